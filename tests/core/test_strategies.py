"""Hand-computed cases for every strategy, mode and option of the core."""

import math

import numpy as np
import pytest
import torch
from core_reference import reference_advantages, run

from avspo_plugin import AVSPOConfig, ThresholdState, compute_group_advantages
from avspo_plugin.core.virtual import num_virtual_samples

K4_VIRTUAL = {
    # strategy -> (virtual rewards of the all-fail group, of the all-pass group), K = 4, rewards in [0, 1]
    "stratified": ([1, 0.75, 0.5, 0.25], [1, 0.75, 0.5, 0.25]),
    "stratified_observed": ([0, 0, 0, 0], [1, 0.75, 0.5, 0.25]),
    "opposite": ([1, 1, 1, 1], [0, 0, 0, 0]),
    "fixed_partial": ([0.5] * 4, [0.5] * 4),
    "exp_decay": ([1, 0.5, 0.25, 0.125], [1, 0.5, 0.25, 0.125]),
}


@pytest.mark.parametrize("strategy", sorted(K4_VIRTUAL))
def test_each_strategy_matches_explicit_virtual_samples(three_groups, strategy):
    scores, labels = three_groups
    result = run(scores, labels, strategy=strategy, threshold_mode="always")
    fail_virtual, pass_virtual = K4_VIRTUAL[strategy]
    expected = (
        reference_advantages([0] * 4, fail_virtual)
        + reference_advantages([1] * 4, pass_virtual)
        + reference_advantages([0, 1, 0, 1], [])
    )
    assert result.advantages.tolist() == pytest.approx(expected, abs=1e-6)
    assert result.metrics["num_virtual"] == 4
    assert result.metrics["acr"] == pytest.approx(2 / 3)


def test_stratified_pushes_failures_down_and_successes_up(three_groups):
    result = run(*three_groups, threshold_mode="adaptive")  # default strategy stratified; tau 0.5 < ACR 2/3
    adv = result.advantages
    assert result.metrics["triggered"] == 1
    assert (adv[:4] < 0).all() and (adv[4:8] > 0).all()
    assert result.metrics["effective_acr"] == 0


def test_stratified_with_one_virtual_sample_leaves_all_pass_collapsed(three_groups):
    # Eq. 10's first term is reward_high: with K = 1 an all-pass group gets 1 again and stays collapsed.
    result = run(*three_groups, num_virtual=1, threshold_mode="always")
    assert result.advantages[4:8].abs().max() == 0
    assert (result.advantages[:4] < 0).all()
    assert result.metrics["effective_acr"] == pytest.approx(1 / 3)


def test_uniform_is_seeded_by_seed_and_step(three_groups):
    scores, labels = three_groups
    first = run(scores, labels, strategy="uniform", threshold_mode="always", seed=3)
    again = run(scores, labels, strategy="uniform", threshold_mode="always", seed=3)
    other_seed = run(scores, labels, strategy="uniform", threshold_mode="always", seed=4)
    cfg = AVSPOConfig(strategy="uniform", threshold_mode="always", seed=3)
    later = run(scores, labels, state=ThresholdState(tau=0.5, step=1), strategy="uniform", threshold_mode="always", seed=3)
    assert torch.equal(first.advantages, again.advantages)
    assert not torch.equal(first.advantages, other_seed.advantages)
    assert not torch.equal(first.advantages, later.advantages)
    assert (first.advantages[:4] < 0).all() and (first.advantages[4:8] > 0).all()
    assert cfg.bounded


def test_uniform_rewards_lie_in_bounds():
    from avspo_plugin.strategies import uniform_rewards

    values = uniform_rewards(11, -1.0, 2.0, seed=0, step=7)
    assert values.shape == (11,)
    assert values.min() >= -1.0 and values.max() <= 2.0


def test_custom_reward_bounds_place_virtual_rewards(three_groups):
    scores, labels = three_groups
    shifted = [2 * s - 1 for s in scores]  # rewards in {-1, 1}
    result = run(shifted, labels, reward_low=-1.0, reward_high=1.0, threshold_mode="always")
    expected = reference_advantages([-1] * 4, [1, 0.5, 0, -0.5])
    assert result.advantages[:4].tolist() == pytest.approx(expected, abs=1e-6)
    assert result.metrics["acr_all_fail"] == pytest.approx(1 / 3)


def test_population_std_and_dr_grpo(three_groups):
    scores, labels = three_groups
    virtual = [1, 0.75, 0.5, 0.25]
    pop = run(scores, labels, threshold_mode="always", std="population")
    assert pop.advantages[:4].tolist() == pytest.approx(reference_advantages([0] * 4, virtual, population=True), abs=1e-6)
    dr = run(scores, labels, threshold_mode="always", norm_by_std=False)
    assert dr.advantages[:4].tolist() == pytest.approx(reference_advantages([0] * 4, virtual, norm_by_std=False))
    assert dr.advantages[8:].tolist() == pytest.approx([-0.5, 0.5, -0.5, 0.5])


@pytest.mark.parametrize(
    "augmented_collapses, fail_moved, pass_moved", [("all", True, True), ("all_fail", True, False), ("all_pass", False, True)]
)
def test_augmented_collapses_selects_the_kind_of_collapse(three_groups, augmented_collapses, fail_moved, pass_moved):
    result = run(*three_groups, threshold_mode="always", augmented_collapses=augmented_collapses)
    assert bool(result.advantages[:4].abs().max() > 0) == fail_moved
    assert bool(result.advantages[4:8].abs().max() > 0) == pass_moved
    assert result.metrics["augmented_groups"] == pytest.approx((fail_moved + pass_moved) / 3)


def test_modes_decide_the_trigger(three_groups):
    scores, labels = three_groups  # ACR = 2/3
    assert run(scores, labels, threshold_mode="never").metrics["triggered"] == 0
    assert run(scores, labels, threshold_mode="always").metrics["triggered"] == 1
    assert run(scores, labels, threshold_mode="fixed", threshold_init=0.6).metrics["triggered"] == 1
    assert run(scores, labels, threshold_mode="fixed", threshold_init=0.7).metrics["triggered"] == 0
    high = run(scores, labels, state=ThresholdState(tau=0.8), threshold_mode="adaptive")
    assert high.metrics["triggered"] == 0 and high.metrics["threshold"] == 0.8
    assert high.advantages[:8].abs().max() == 0


def test_never_mode_reports_metrics_but_changes_nothing(three_groups):
    result = run(*three_groups, threshold_mode="never")
    m = result.metrics
    assert m["acr"] == pytest.approx(2 / 3)
    assert m["acr_all_fail"] == pytest.approx(1 / 3) and m["acr_all_pass"] == pytest.approx(1 / 3)
    assert m["effective_acr"] == pytest.approx(2 / 3)
    assert m["num_virtual"] == 0 and m["augmented_groups"] == 0 and m["groups"] == 3
    assert m["reward_mean"] == pytest.approx(0.5)
    assert m["adv_abs_max"] == pytest.approx(math.sqrt(3) / 2, abs=1e-5)


@pytest.mark.parametrize(
    "group_size, acr, expected",
    [(8, 0.25, 4), (8, 1.0, 8), (8, 0.01, 1), (8, 0.0, 1), (35, 9 / 49, 15), (4, 2 / 3, 4)],
)
def test_eq9_number_of_virtual_samples(group_size, acr, expected):
    # 35 * (9/49) ** 0.5 is 15.000000000000002 in float64: snapped to 15, not ceiled to 16.
    group = torch.tensor([float(group_size)], dtype=torch.float64)
    k = num_virtual_samples(AVSPOConfig(alpha=0.5), group, acr, torch.tensor([True]))
    assert k.tolist() == [expected]


def test_uneven_groups_get_their_own_k():
    scores = [0] * 8 + [1] * 2 + [0, 1]
    labels = ["a"] * 8 + ["b"] * 2 + ["c"] * 2  # ACR = 2/3: K_a = ceil(8 * 0.8165) = 7, K_b = ceil(1.633) = 2
    result = run(scores, labels, threshold_mode="always")
    assert result.advantages[:8].tolist() == pytest.approx(
        reference_advantages([0] * 8, [1 - k / 7 for k in range(7)]), abs=1e-6
    )
    assert result.advantages[8:10].tolist() == pytest.approx(reference_advantages([1, 1], [1, 0.5]), abs=1e-6)
    assert result.metrics["num_virtual"] == pytest.approx(4.5)


def test_singletons_keep_verl_convention_and_never_count():
    result = run([1.0, 0.0, 0.0, 0.0], ["solo", "a", "a", "a"], threshold_mode="always")
    assert result.advantages[0].item() == pytest.approx(1 / (1 + 1e-6))
    assert result.metrics["groups"] == 1 and result.metrics["acr"] == 1


def test_padding_rows_join_no_group():
    valid = torch.tensor([True, True, True, False, False])
    result = run([0, 1, 0, 0, 0], ["a", "a", "a", "pad", "pad"], valid=valid, threshold_mode="always")
    assert result.metrics["groups"] == 1 and result.metrics["acr"] == 0
    assert result.advantages[3:].tolist() == [0, 0]
    assert result.metrics["reward_mean"] == pytest.approx(1 / 3)


def test_near_collapse_counts_odd_one_out_groups():
    scores = [0, 0, 0, 1] + [0, 0, 1, 1] + [1, 1, 1, 0] + [0, 1] + [1, 1, 1, 1]
    labels = ["odd1"] * 4 + ["even"] * 4 + ["odd2"] * 4 + ["pair"] * 2 + ["flat"] * 4
    result = run(scores, labels, threshold_mode="never")
    assert result.metrics["near_collapse"] == pytest.approx(2 / 5)
    # odd1: one success among failures; odd2: one failure among successes.
    assert result.metrics["near_collapse_success"] == pytest.approx(1 / 5)
    assert result.metrics["near_collapse_failure"] == pytest.approx(1 / 5)


def test_lone_success_and_lone_failure_read_the_groups_own_values_not_the_bounds():
    # Rewards off the bounds (0.2 / 0.9, 3 / -1): the odd sample is judged against its group's other values.
    scores = [0.2, 0.2, 0.9] + [3.0, 3.0, 3.0, -1.0] + [0.2, 0.9, 0.9] + [0.5, 0.5]
    labels = ["up"] * 3 + ["down"] * 4 + ["down2"] * 3 + ["pair"] * 2
    result = run(scores, labels, threshold_mode="never")
    assert result.metrics["near_collapse_success"] == pytest.approx(1 / 4)
    assert result.metrics["near_collapse_failure"] == pytest.approx(2 / 4)


def test_nearly_equal_rewards_count_as_collapsed():
    result = run([0.5, 0.5 + 1e-8, 0.5, 0.5], ["a"] * 4, threshold_mode="never")
    assert result.metrics["acr"] == 1


def test_result_carries_each_groups_k_and_virtual_rewards():
    # Eq. 13 on a batch of three groups: all-fail, all-pass, mixed; ACR = 2/3 > tau, K = ceil(4 * (2/3)**0.5) = 4.
    scores = torch.tensor([0.0] * 4 + [1.0] * 4 + [0.0, 1.0, 0.0, 1.0])
    labels = np.repeat(["fail", "pass", "mixed"], 4).astype(object)
    config = AVSPOConfig(threshold_mode="fixed", threshold_init=0.5)
    result = compute_group_advantages(scores, labels, config, ThresholdState.initial(config))
    # Groups in sorted label order: fail, mixed, pass.
    assert result.num_virtual.tolist() == [4, 0, 4]
    stratified = [1.0, 0.75, 0.5, 0.25]  # r_vk = 1 - (k-1)/K
    assert result.virtual_rewards.tolist() == stratified * 2  # packed: fail's four, then pass's
    untriggered = compute_group_advantages(scores, labels, config.replace(threshold_mode="never"), ThresholdState.initial(config))
    assert untriggered.num_virtual.tolist() == [0, 0, 0] and untriggered.virtual_rewards.numel() == 0
