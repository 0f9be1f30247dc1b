"""The translation to TRL's conventions: GRPOTrainer's own advantage computation is the oracle."""

import statistics
from collections import deque

import numpy as np
import pytest
import torch
from trl import GRPOTrainer

from avspo_plugin import AVSPOConfig, ThresholdState
from avspo_plugin.strategies import STRATEGIES
from avspo_plugin.trl.conventions import (
    TRL_EPSILON,
    group_labels,
    host_settings,
    local_rows,
    replace_latest,
    trl_advantages,
    weighted_rewards,
)

NUM_GENERATIONS = 4
BATCH = 16


def reward_rows(kind, rng):
    """Sixteen rewards (four groups of four) with a collapsed group; 'unscorable' has None rows, a group with a
    single scorable completion and a group with none."""
    if kind == "binary":
        values = rng.integers(0, 2, BATCH).astype(float)
    elif kind == "graded":
        values = rng.integers(0, 5, BATCH) / 4
    else:
        values = rng.random(BATCH)
    values[:NUM_GENERATIONS] = 0.0
    rows = [float(v) for v in values]
    if kind == "unscorable":
        for i in (4, 9, 10, 11, 12, 13, 14, 15):
            rows[i] = None
    return rows


@pytest.fixture(scope="module")
def grpo_oracle(kit, tokenizer, tmp_path_factory):
    """oracle(rows, scale_rewards) -> the advantages stock GRPOTrainer computes for those rewards."""
    assert kit.NUM_GENERATIONS == NUM_GENERATIONS
    rewards = kit.PresetRewards()
    trainer = GRPOTrainer(
        model=kit.build_model(),
        reward_funcs=rewards,
        args=kit.trainer_args(tmp_path_factory.mktemp("oracle")),
        train_dataset=kit.prompt_dataset(),
        processing_class=tokenizer,
    )
    trainer.model.train()
    inputs = [{"prompt": "easy one"}] * BATCH

    def oracle(rows, scale_rewards):
        trainer.scale_rewards = scale_rewards
        rewards.queue.append(rows)
        return trainer._generate_and_score_completions(inputs)["advantages"]

    return oracle


def as_rewards(rows):
    return torch.tensor([torch.nan if r is None else r for r in rows], dtype=torch.float32)


def untriggered(rows, scale_rewards):
    config = AVSPOConfig(threshold_mode="never", **host_settings(scale_rewards))
    return trl_advantages(as_rewards(rows), NUM_GENERATIONS, scale_rewards, config, ThresholdState.initial(config))


@pytest.mark.parametrize("kind", ["binary", "graded", "continuous", "unscorable"])
@pytest.mark.parametrize("scale_rewards", ["group", "batch", "none"])
def test_untriggered_translation_is_grpo_trainers_advantage(grpo_oracle, kind, scale_rewards):
    rng = np.random.default_rng(sum(map(ord, kind + scale_rewards)))
    for _ in range(5):
        rows = reward_rows(kind, rng)
        expected = grpo_oracle(rows, scale_rewards)
        ours = untriggered(rows, scale_rewards).advantages
        assert ours.dtype == expected.dtype
        # TRL's float32 statistics and the core's float64 ones rounded once differ by a few float32 ulps at most.
        torch.testing.assert_close(ours, expected, atol=1e-6, rtol=0)
        if kind == "binary" and scale_rewards != "batch":
            assert torch.equal(ours, expected)
        if kind == "unscorable":
            # None rows, the lone scorable row of group 2 and all of group 3 get 0, as in GRPOTrainer.
            assert torch.equal(ours[[4, 8, 9, 10, 11, 12, 13, 14, 15]], torch.zeros(9))


def test_trl_epsilon_and_unbiased_std_on_a_hand_computed_group():
    rows = [0.0, 0.0, 0.0, 1.0] + [1.0] * 12
    std = statistics.stdev(rows[:4])
    expected = torch.tensor([(r - 0.25) / (std + TRL_EPSILON) for r in rows[:4]], dtype=torch.float32)
    torch.testing.assert_close(untriggered(rows, "group").advantages[:4], expected, atol=1e-7, rtol=0)


def always(scale_rewards, **config):
    return AVSPOConfig(threshold_mode="always", **host_settings(scale_rewards), **config)


def test_batch_scaling_divides_by_the_std_of_real_and_virtual_rewards():
    # Group 0 all-fail, group 1 mixed, groups 2-3 all-pass; two virtual rewards each (stratified: 1, 0.5 / 1, 0.5).
    rows = [0.0] * 4 + [0.0, 1.0, 1.0, 0.0] + [1.0] * 8
    config = always("batch", num_virtual=2)
    result = trl_advantages(as_rewards(rows), NUM_GENERATIONS, "batch", config, ThresholdState.initial(config))
    virtual = {0: [1.0, 0.5], 1: [], 2: [1.0, 0.5], 3: [1.0, 0.5]}
    pooled = rows + [v for values in virtual.values() for v in values]
    batch_std = statistics.stdev(pooled)
    expected = []
    for j in range(4):
        real = rows[4 * j : 4 * j + 4]
        mean = statistics.fmean(real + virtual[j])
        expected += [(r - mean) / (batch_std + TRL_EPSILON) for r in real]
    torch.testing.assert_close(result.advantages, torch.tensor(expected, dtype=torch.float32), atol=1e-6, rtol=0)
    assert result.metrics["adv_abs_max"] == pytest.approx(float(result.advantages.abs().max()))


def test_none_scaling_shifts_collapsed_groups_by_the_virtual_mean():
    rows = [0.0] * 4 + [0.0, 1.0, 1.0, 0.0] + [1.0] * 8
    config = always("none", num_virtual=2)
    result = trl_advantages(as_rewards(rows), NUM_GENERATIONS, "none", config, ThresholdState.initial(config))
    torch.testing.assert_close(result.advantages[:8], torch.tensor([-0.25] * 4 + [-0.5, 0.5, 0.5, -0.5]))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_virtual_rewards_the_core_returns_are_those_of_its_advantages(strategy):
    """The virtual rewards the batch std takes (the core's result) give, in one group, its group-mode advantages."""
    rows = [0.0] * 4 + [0.0, 1.0, 1.0, 0.0] + [1.0, 0.0, 1.0, 1.0] + [1.0] * 4
    rewards = as_rewards(rows)
    config = always("group", strategy=strategy, augmented_collapses="all_fail")
    state = ThresholdState(tau=0.5, step=3)
    result = trl_advantages(rewards, NUM_GENERATIONS, "group", config, state)
    virtual = result.virtual_rewards
    # ACR = 1/2 (an all-fail and an all-pass group); only the all-fail one gets K = ceil(4 * sqrt(1/2)) = 3.
    assert virtual.numel() == result.metrics["num_virtual"] == 3
    real = rows[:4]
    values = real + virtual.tolist()
    std = statistics.stdev(values)
    expected = [(r - statistics.fmean(values)) / (std + TRL_EPSILON) for r in real]
    if strategy == "stratified_observed":  # max(R_j) = 0 gives virtual rewards 0: the group stays collapsed
        assert virtual.tolist() == [0.0, 0.0, 0.0]
    torch.testing.assert_close(result.advantages[:4], torch.tensor(expected, dtype=torch.float32), atol=1e-6, rtol=0)


def test_no_virtual_rewards_when_not_triggered():
    rows = [0.0] * 16
    result = untriggered(rows, "batch")
    assert result.virtual_rewards.numel() == 0
    assert torch.equal(result.advantages, torch.zeros(BATCH))


def test_weighted_rewards_follow_trl_nan_rules():
    per_func = torch.tensor([[1.0, torch.nan], [torch.nan, torch.nan], [0.5, 2.0]])
    rewards = weighted_rewards(per_func, torch.tensor([2.0, 0.5]))
    assert rewards[0] == 2.0 and torch.isnan(rewards[1]) and rewards[2] == 2.0


@pytest.mark.parametrize("num_processes", [1, 2, 3])
def test_each_process_keeps_the_advantages_of_its_own_completions(num_processes):
    """Process p scores 2 prompts x 4 completions; the gathered batch is the concatenation in process order.

    With a constant K, a group's advantages depend on its own rewards only, so process p's slice of the gathered
    result must be what its own rows alone give.
    """
    rng = np.random.default_rng(num_processes)
    local_rewards = [torch.tensor(rng.integers(0, 2, 8), dtype=torch.float32) for _ in range(num_processes)]
    local_rewards[-1][:4] = 0.0  # a collapsed group on the last process
    config = always("group", num_virtual=2)
    state = ThresholdState.initial(config)
    full = trl_advantages(torch.cat(local_rewards), NUM_GENERATIONS, "group", config, state).advantages
    for p, own in enumerate(local_rewards):
        expected = trl_advantages(own, NUM_GENERATIONS, "group", config, state).advantages
        assert torch.equal(local_rows(full, p, num_processes), expected)
    assert local_rows(full, num_processes - 1, num_processes)[:4].abs().min() > 0


def test_k_follows_the_acr_of_the_whole_gathered_batch():
    """Eq. 9's K uses the batch ACR over all processes: process 0 (all collapsed, local ACR 1) gets K = 3 from
    the global ACR 1/2, not K = 4."""
    collapsed, mixed = torch.zeros(8), torch.tensor([0.0, 1.0] * 4)
    config = always("group")
    state = ThresholdState.initial(config)
    result = trl_advantages(torch.cat([collapsed, mixed]), NUM_GENERATIONS, "group", config, state)
    assert result.metrics["acr"] == 0.5 and result.metrics["num_virtual"] == 3
    alone = trl_advantages(collapsed, NUM_GENERATIONS, "group", config, state)
    assert alone.metrics["num_virtual"] == 4
    assert not torch.equal(local_rows(result.advantages, 0, 2), alone.advantages)


def test_local_rows_rejects_inconsistent_sizes():
    with pytest.raises(ValueError, match="10 rows, not a multiple of num_processes=3"):
        local_rows(torch.zeros(10), 0, 3)
    with pytest.raises(ValueError, match=r"process_index=2 is not in \[0, num_processes=2\)"):
        local_rows(torch.zeros(8), 2, 2)


@pytest.mark.parametrize("maxlen,before", [(16, 0), (16, 16), (32, 20), (8, 5)])
def test_replace_latest_swaps_exactly_the_rows_just_logged(maxlen, before):
    log = deque([f"old{i}" for i in range(before)], maxlen=maxlen)
    logged = [f"grpo{i}" for i in range(16)]
    log.extend(logged)
    expected = deque(list(log)[: len(log) - min(16, len(log))] + [f"avspo{i}" for i in range(16)], maxlen=maxlen)
    replace_latest(log, [f"avspo{i}" for i in range(16)])
    assert list(log) == list(expected)
    assert all(entry.startswith(("old", "avspo")) for entry in log)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="scale_rewards='global' is invalid"):
        host_settings("global")
    with pytest.raises(ValueError, match="15 rows, not a multiple of num_generations=4"):
        group_labels(15, 4)
    config = AVSPOConfig()  # verl's epsilon 1e-6: not TRL's
    with pytest.raises(ValueError, match="epsilon"):
        trl_advantages(torch.zeros(8), 4, "group", config, ThresholdState.initial(config))
