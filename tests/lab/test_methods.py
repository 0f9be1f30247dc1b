"""The lab's methods: verl's GRPO called as verl's trainer calls it, AVSPO as verl's registered estimator computes it
(from a session of the run's own), NGRPO, and the collapse metrics."""

import numpy as np
import pytest
import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, get_adv_estimator_fn

from avspo_plugin.config import AVSPOConfig
from avspo_plugin.core import AVSPOSession
from avspo_plugin.verl import pop_metrics, session
from lab.methods import (
    PRESETS,
    collapse_metrics,
    compute_advantages,
    compute_ngrpo_outcome_advantage,
    effective_collapse,
    parse_method,
)

# Four groups of four: mixed, all-fail, all-pass, mixed.
SCORES = torch.tensor([1.0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0])
UIDS = np.array([f"g{i // 4}" for i in range(16)], dtype=object)
LENGTHS = torch.tensor([3, 2, 4, 1] * 4)
MASK = (torch.arange(5).unsqueeze(0) < LENGTHS.unsqueeze(1)).float()


def token_rewards():
    out = torch.zeros_like(MASK)
    out[torch.arange(16), LENGTHS - 1] = SCORES
    return out


def test_grpo_and_drgrpo_match_verl_own_function():
    for name, norm in (("grpo", True), ("drgrpo", False)):
        method = PRESETS[name]
        ours = compute_advantages(method, method.algorithm_config(), token_rewards(), MASK, UIDS)
        verl, _ = compute_grpo_outcome_advantage(token_rewards(), MASK, UIDS, norm_adv_by_std_in_grpo=norm)
        assert torch.equal(ours, verl)
    assert not torch.equal(
        compute_advantages(PRESETS["grpo"], PRESETS["grpo"].algorithm_config(), token_rewards(), MASK, UIDS),
        compute_advantages(PRESETS["drgrpo"], PRESETS["drgrpo"].algorithm_config(), token_rewards(), MASK, UIDS),
    )


def test_avspo_acts_on_the_run_session_and_leaves_the_adapter_state_alone():
    session().reset()
    method, run = PRESETS["avspo_always"], AVSPOSession()
    advantages = compute_advantages(method, method.algorithm_config(), token_rewards(), MASK, UIDS, session=run)
    metrics = run.pop_metrics()
    assert metrics["acr"] == 0.5 and metrics["triggered"] == 1.0 and metrics["augmented_groups"] == 0.5
    per_row = advantages.sum(dim=1) / MASK.sum(dim=1)
    assert (per_row[4:8] < 0).all() and (per_row[8:12] > 0).all()  # all-fail pushed down, all-pass up
    assert effective_collapse(advantages, SCORES, UIDS) == {
        "effective_acr": 0.0, "effective_acr_all_fail": 0.0, "effective_acr_all_pass": 0.0}
    assert pop_metrics() == {} and session().config is None  # the verl adapter's process session was not touched
    with pytest.raises(ValueError, match="avspo_always: AVSPO needs the run's session"):
        compute_advantages(method, method.algorithm_config(), token_rewards(), MASK, UIDS)


@pytest.mark.parametrize("name", ["avspo", "avspo_always"])
def test_avspo_equals_verl_registered_estimator_step_after_step(name):
    """The oracle is the host: verl's registered ``avspo`` estimator (the adapter's process session), called as verl's
    trainer calls it, step after step (the adaptive threshold moving between steps) on batches whose ACR varies."""
    method, run = PRESETS[name], AVSPOSession()
    algorithm = method.algorithm_config()
    registered = get_adv_estimator_fn("avspo")
    session().reset()
    generator = torch.Generator().manual_seed(0)
    for _ in range(6):
        # Each group all-fail, all-pass or mixed at random: the batch ACR moves above and below the threshold.
        kind = torch.randint(0, 3, (4, 1), generator=generator).expand(4, 4).reshape(-1)
        scores = torch.where(kind == 2, torch.randint(0, 2, (16,), generator=generator).float(), kind.float())
        rewards = torch.zeros_like(MASK)
        rewards[torch.arange(16), LENGTHS - 1] = scores
        ours = compute_advantages(method, algorithm, rewards, MASK, UIDS, session=run)
        verl, _ = registered(token_level_rewards=rewards, response_mask=MASK, index=UIDS, config=algorithm)
        assert torch.equal(ours, verl)
        assert run.pop_metrics() == pop_metrics()
    session().reset()


def test_ngrpo_hand_computed():
    advantages, returns = compute_ngrpo_outcome_advantage(token_rewards(), MASK, UIDS)
    assert torch.equal(advantages, returns)
    per_row = (advantages.sum(dim=1) / MASK.sum(dim=1)).double()
    # [1,0,0,0] + virtual 1: mean 0.4, unbiased std sqrt(0.3)
    expected_mixed = torch.tensor([0.6, -0.4, -0.4, -0.4], dtype=torch.float64) / (0.3**0.5 + 1e-6)
    assert torch.allclose(per_row[:4], expected_mixed, atol=1e-6)
    # [0,0,0,0] + 1: mean 0.2, std sqrt(0.2): every failure gets -0.2 / 0.447
    assert torch.allclose(per_row[4:8], torch.full((4,), -0.2 / (0.2**0.5 + 1e-6), dtype=torch.float64), atol=1e-6)
    # [1,1,1,1] + 1: nothing changes, the group stays collapsed
    assert torch.equal(per_row[8:12], torch.zeros(4, dtype=torch.float64))
    assert (advantages * (1 - MASK)).abs().sum() == 0  # nothing on padding tokens
    # NGRPO gives all-fail groups a signal and leaves all-pass ones collapsed
    assert effective_collapse(advantages, SCORES, UIDS) == {
        "effective_acr": 0.25, "effective_acr_all_fail": 0.0, "effective_acr_all_pass": 0.25}


def test_collapse_metrics_split_the_regimes():
    # g0: one success among failures; g1: all fail; g2: all pass; g3: two and two.
    assert collapse_metrics(SCORES, UIDS) == {"acr": 0.5, "acr_all_fail": 0.25, "acr_all_pass": 0.25,
                                              "near_collapse_success": 0.25, "near_collapse_failure": 0.0}
    grpo = PRESETS["grpo"]
    advantages = compute_advantages(grpo, grpo.algorithm_config(), token_rewards(), MASK, UIDS)
    assert effective_collapse(advantages, SCORES, UIDS) == {
        "effective_acr": 0.5, "effective_acr_all_fail": 0.25, "effective_acr_all_pass": 0.25}


def test_parse_method_presets_and_avspo_settings():
    assert parse_method("dapo").dynamic_sampling
    custom = parse_method("avspo:strategy=uniform,threshold_mode=fixed,threshold_init=0.3")
    block = custom.algorithm_config()
    assert block.adv_estimator == "avspo"
    assert block.avspo.strategy == "uniform" and block.avspo.threshold_init == 0.3
    assert block.avspo.reward_high == 1.0 and block.avspo.reward_low == 0.0
    with pytest.raises(ValueError, match="unknown method 'ppo'"):
        parse_method("ppo")
    with pytest.raises(ValueError, match="alpah"):
        parse_method("avspo:alpah=0.5")
    with pytest.raises(ValueError, match="threshold_mode"):
        parse_method("avspo:threshold_mode=sometimes")


def test_random_variance_control_gives_collapsed_groups_zero_mean_noise_and_leaves_the_rest_to_grpo():
    from lab.methods import compute_random_variance_advantage

    grpo, _ = compute_grpo_outcome_advantage(token_rewards(), MASK, UIDS)
    advantages, _ = compute_random_variance_advantage(token_rewards(), MASK, UIDS, step=3, seed=1)
    per_row = advantages.sum(dim=1) / MASK.sum(dim=1)
    mixed = torch.tensor([i // 4 in (0, 3) for i in range(16)])
    assert torch.allclose(advantages[mixed], grpo[mixed])  # groups with variance: GRPO's own advantages
    for group in (1, 2):  # all-fail and all-pass: standardised noise, zero mean, unit (unbiased) std
        rows = per_row[4 * group: 4 * group + 4]
        assert abs(float(rows.mean())) < 1e-5 and float(rows.std()) == pytest.approx(1.0, abs=1e-4)
    assert (advantages * (1 - MASK)).abs().sum() == 0
    again, _ = compute_random_variance_advantage(token_rewards(), MASK, UIDS, step=3, seed=1)
    other, _ = compute_random_variance_advantage(token_rewards(), MASK, UIDS, step=4, seed=1)
    assert torch.equal(advantages, again) and not torch.equal(advantages, other)  # drawn from (seed, step)
    # The signs carry no information: over many draws, the all-fail rows are pushed up as often as down.
    signs = [float(compute_random_variance_advantage(token_rewards(), MASK, UIDS, step=s)[0][4, 0] > 0)
             for s in range(400)]
    assert 0.4 < np.mean(signs) < 0.6


def test_zvp_shapes_collapsed_groups_by_token_entropy_with_the_regime_sign():
    from lab.methods import ZVP_SCALE, compute_zvp_advantage

    entropy = torch.rand(MASK.shape, generator=torch.Generator().manual_seed(0))
    advantages, returns = compute_zvp_advantage(token_rewards(), MASK, UIDS, entropy=entropy)
    assert torch.equal(advantages, returns)
    grpo, _ = compute_grpo_outcome_advantage(token_rewards(), MASK, UIDS)
    mixed = torch.tensor([i // 4 in (0, 3) for i in range(16)])
    assert torch.allclose(advantages[mixed], grpo[mixed])
    for row in range(4, 8):  # all-fail: -alpha (max_k H_k - H_t) on the response's tokens
        n = int(LENGTHS[row])
        h = entropy[row, :n]
        assert torch.allclose(advantages[row, :n], -ZVP_SCALE * (h.max() - h))
        assert (advantages[row, :n] <= 0).all() and advantages[row, n:].abs().sum() == 0
    for row in range(8, 12):  # all-pass: +alpha H_t
        n = int(LENGTHS[row])
        assert torch.allclose(advantages[row, :n], ZVP_SCALE * entropy[row, :n])
    with pytest.raises(ValueError, match="token entropies"):
        compute_zvp_advantage(token_rewards(), MASK, UIDS)


def test_study_methods_with_lab_estimators_go_through_compute_advantages():
    from lab.methods import STUDY_EXTRA

    entropy = torch.ones(MASK.shape)
    for name in ("random_variance", "rlzvp"):
        method = STUDY_EXTRA[name]
        advantages = compute_advantages(method, method.algorithm_config(), token_rewards(), MASK, UIDS,
                                        entropy=entropy, step=1, seed=0)
        assert effective_collapse(advantages, SCORES, UIDS)["effective_acr"] < 0.5  # collapsed groups get a signal


@pytest.mark.parametrize("name, num_virtual, effective", [
    ("avspo_paper_point", 4.0, (0.0, 0.0, 0.0)),
    ("avspo_paper_point_all_fail", 4.0, (0.25, 0.0, 0.25)),
    ("avspo_paper_point_all_pass", 4.0, (0.25, 0.25, 0.0)),
    ("avspo_released", 1.0, (0.0, 0.0, 0.0)),
])
def test_the_arms_that_act_augment_the_groups_they_name_with_their_k(name, num_virtual, effective):
    """At ACR 0.5 (under tau_0 = 0.5) the adaptive trigger stays shut; these arms augment at every step."""
    from lab.methods import STUDY_EXTRA

    method, run = STUDY_EXTRA[name], AVSPOSession()
    advantages = compute_advantages(method, method.algorithm_config(), token_rewards(), MASK, UIDS, session=run)
    metrics = run.pop_metrics()
    assert metrics["triggered"] == 1.0 and metrics["num_virtual"] == num_virtual
    assert tuple(effective_collapse(advantages, SCORES, UIDS).values()) == effective


@pytest.mark.parametrize("name", ["avspo", "avspo_opposite", "avspo_all_fail", "avspo_all_pass", "avspo_fixed_k"])
def test_the_arms_as_in_the_paper_keep_its_adaptive_trigger(name):
    """At ACR 0.5 (not above tau_0 = 0.5) the paper's trigger stays shut, whatever the default threshold_mode."""
    from lab.methods import STUDY_EXTRA

    method, run = {**PRESETS, **STUDY_EXTRA}[name], AVSPOSession()
    advantages = compute_advantages(method, method.algorithm_config(), token_rewards(), MASK, UIDS, session=run)
    metrics = run.pop_metrics()
    assert (metrics["acr"], metrics["threshold"], metrics["triggered"], metrics["augmented_groups"]) == (0.5, 0.5, 0.0, 0.0)
    assert effective_collapse(advantages, SCORES, UIDS)["effective_acr"] == 0.5


def test_every_arm_is_labelled_by_its_setting():
    from lab.methods import DEFAULT_METHODS, parse_method, setting_label

    # The named method is the paper's: adv_estimator=avspo at its defaults runs the adaptive trigger.
    assert AVSPOConfig().threshold_mode == "adaptive"
    assert AVSPOConfig.from_mapping(dict(PRESETS["avspo"].avspo)) == AVSPOConfig()
    assert [setting_label(parse_method(name)) for name in DEFAULT_METHODS] == [
        "grpo (adv_estimator=grpo)", "dapo (adv_estimator=grpo, + dynamic sampling)",
        "avspo (threshold_mode=adaptive, the default, the paper's trigger)"]
    assert setting_label(PRESETS["avspo_always"]) == "avspo_always (threshold_mode=always)"
    assert setting_label(parse_method("avspo:strategy=opposite")) == \
        "avspo:strategy=opposite (threshold_mode=adaptive, the paper's trigger, strategy=opposite)"
    assert setting_label(PRESETS["drgrpo"]) == "drgrpo (adv_estimator=grpo, norm_adv_by_std_in_grpo=False)"
