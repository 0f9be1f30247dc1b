"""With nothing augmented, AVSPO is verl's GRPO: verl's own compute_grpo_outcome_advantage is the oracle."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

from avspo_plugin import AVSPOConfig, ThresholdState, compute_token_advantages
from avspo_plugin.core.groups import group_stats


@st.composite
def batches(draw):
    """Uneven groups (singletons included) of binary, graded or continuous rewards, in shuffled order, as
    verl hands them to an estimator: token_level_rewards with the reward on the last response token."""
    sizes = draw(st.lists(st.integers(1, 9), min_size=1, max_size=12))
    kind = draw(st.sampled_from(["binary", "graded", "continuous"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    labels = np.array([f"{j:08x}-uid" for j, size in enumerate(sizes) for _ in range(size)], dtype=object)
    labels = labels[rng.permutation(len(labels))]
    batch, length = len(labels), 6
    rewards = {
        "binary": lambda: rng.integers(0, 2, batch).astype(np.float64),
        "graded": lambda: rng.integers(0, 5, batch) / 4,
        "continuous": lambda: rng.random(batch) * 10 ** rng.uniform(-3, 3) + rng.normal() * 10,
    }[kind]()
    lengths = torch.as_tensor(rng.integers(0, length + 1, batch))  # 0: a row emptied by rejection sampling
    mask = (torch.arange(length)[None, :] < lengths[:, None]).float()
    dtype = draw(st.sampled_from([torch.float32, torch.bfloat16]))
    token_rewards = torch.zeros(batch, length, dtype=dtype)
    token_rewards[torch.arange(batch), (lengths - 1).clamp(min=0)] = torch.as_tensor(rewards, dtype=dtype)
    return token_rewards, mask, labels, kind


def verl_grpo(token_rewards, mask, labels, norm_by_std):
    advantages, _ = compute_grpo_outcome_advantage(token_rewards.clone(), mask, labels, norm_adv_by_std_in_grpo=norm_by_std)
    return advantages


@settings(max_examples=1500, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(batch=batches(), norm_by_std=st.booleans(), mode=st.sampled_from(["never", "adaptive", "fixed"]))
def test_untriggered_avspo_equals_verl_grpo(batch, norm_by_std, mode):
    token_rewards, mask, labels, kind = batch
    config = AVSPOConfig(
        threshold_mode=mode, threshold_init=0.9, norm_by_std=norm_by_std, reward_low=-1e4, reward_high=1e4
    )
    # tau = 0.9 leaves ACR at most 9/12 < tau... unless every group collapses: skip those draws for trigger modes.
    result = compute_token_advantages(token_rewards, mask, labels, config, ThresholdState.initial(config))
    if result.metrics["triggered"]:
        assert mode != "never"
        return
    expected = verl_grpo(token_rewards, mask, labels, norm_by_std)
    # Bit for bit on every kind of reward and dtype: untouched groups are normalised by statistics
    # rounded as verl rounds them (the same torch reductions in the rewards' dtype).
    assert result.advantages.dtype == expected.dtype
    assert torch.equal(result.advantages, expected), kind


def test_untriggered_equals_verl_bit_for_bit_on_binary_rewards():
    rng = np.random.default_rng(0)
    labels = np.repeat([f"uid-{j}" for j in range(64)], 8).astype(object)
    rewards = torch.as_tensor(rng.integers(0, 2, 512), dtype=torch.float32)
    token_rewards = torch.zeros(512, 4)
    token_rewards[:, -1] = rewards
    mask = torch.ones(512, 4)
    config = AVSPOConfig(threshold_mode="never")
    ours = compute_token_advantages(token_rewards, mask, labels, config, ThresholdState.initial(config)).advantages
    assert torch.equal(ours, verl_grpo(token_rewards, mask, labels, True))


@pytest.mark.parametrize("mask_dtype", [torch.float32, torch.int64, torch.bool])
def test_output_dtype_follows_verl_for_each_mask_dtype(mask_dtype):
    labels = np.array(["a", "a", "b", "b"], dtype=object)
    token_rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    mask = torch.ones(4, 2, dtype=mask_dtype)
    config = AVSPOConfig(threshold_mode="never")
    ours = compute_token_advantages(token_rewards, mask, labels, config, ThresholdState.initial(config)).advantages
    expected = verl_grpo(token_rewards, mask, labels, True)
    assert ours.dtype == expected.dtype
    assert torch.equal(ours, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_host_statistics_are_torch_mean_and_std_of_each_group_bit_for_bit(dtype):
    """The mean and std an untouched group is normalised by are torch.mean and torch.std of its scores in batch
    order, as verl's GRPO computes them, on 3,000 groups of continuous rewards of every magnitude. float64
    (which verl does not produce): the mean bit for bit, the std within a float64 rounding (torch's loop
    contracts dx * dx + sum into one fused multiply-add, which the float32 result rounds away)."""
    rng = np.random.default_rng(7)
    sizes = rng.integers(1, 17, 3000)
    group_ids = np.repeat(np.arange(sizes.size), sizes)[rng.permutation(sizes.sum())]
    magnitude = 10 ** rng.uniform(-3, 3, group_ids.size)
    scores = torch.as_tensor(rng.normal(size=group_ids.size) * magnitude + rng.normal(size=group_ids.size)).to(dtype)
    valid = torch.as_tensor(rng.random(group_ids.size) > 0.05)
    stats = group_stats(scores, torch.as_tensor(group_ids), sizes.size, valid, ddof=1)
    for group in range(sizes.size):
        rows = torch.as_tensor(np.flatnonzero(group_ids == group))
        rows = rows[valid[rows]]
        if rows.numel() < 2:
            continue
        expected_mean, expected_std = torch.mean(scores[rows]), torch.std(scores[rows])
        assert torch.equal(stats.host_mean[group], expected_mean), group
        if dtype == torch.float64:
            torch.testing.assert_close(stats.host_std[group], expected_std, rtol=1e-15, atol=0)
        else:
            assert torch.equal(stats.host_std[group], expected_std), group


def test_host_statistics_of_more_groups_than_int16_ids_hold():
    """2**15 groups and more are ordered by torch's sort instead of numpy's int16 radix sort: same statistics."""
    rng = np.random.default_rng(8)
    num_groups = 2**15 + 7
    group_ids = np.repeat(np.arange(num_groups), 3)[rng.permutation(3 * num_groups)]
    scores = torch.as_tensor(rng.normal(size=group_ids.size), dtype=torch.float32)
    stats = group_stats(scores, torch.as_tensor(group_ids), num_groups, torch.ones(group_ids.size, dtype=torch.bool), 1)
    for group in rng.choice(num_groups, 300, replace=False):
        rows = torch.as_tensor(np.flatnonzero(group_ids == group))
        assert torch.equal(stats.host_mean[group], torch.mean(scores[rows]))
        assert torch.equal(stats.host_std[group], torch.std(scores[rows]))
