"""Reward bounds: required only where virtual rewards are placed; the kinds of collapse are named by them.

Monitor-only runs (threshold_mode never) of rewards outside [reward_low, reward_high] (two reward
functions summed, rewards up to 2) must run; with AVSPO on the same rewards stop the run.
"""

import numpy as np
import pytest
import torch

from avspo_plugin import AVSPOConfig
from avspo_plugin.core import AVSPOSession, ThresholdState, compute_group_advantages
from avspo_plugin.strategies import STRATEGIES
from avspo_plugin.threshold_modes import THRESHOLD_MODES

# Accuracy + format, each 0 or 1, summed: groups collapsed at 0, 1 and 2, and a mixed one.
SUMMED = torch.tensor([0.0] * 4 + [1.0] * 4 + [2.0] * 4 + [0.0, 1.0, 2.0, 1.0])
LABELS = np.repeat([f"p{j}" for j in range(4)], 4).astype(object)


def grpo(scores, labels):
    """verl's GRPO by hand: (r - mean) / (std + 1e-6), unbiased std."""
    out = torch.empty_like(scores)
    for label in np.unique(labels):
        rows = torch.from_numpy(labels == label)
        group = scores[rows]
        out[rows] = (group - group.mean()) / (group.std() + 1e-6)
    return out


def test_monitor_only_accepts_rewards_outside_the_bounds():
    config = AVSPOConfig(threshold_mode="never")
    result = compute_group_advantages(SUMMED, LABELS, config, ThresholdState.initial(config))
    assert torch.equal(result.advantages, grpo(SUMMED, LABELS))
    # Regimes are named by the bounds [0, 1]: the group collapsed at 2 is in neither.
    assert result.metrics["acr"] == 0.75
    assert result.metrics["acr_all_fail"] == 0.25  # the group at 0
    assert result.metrics["acr_all_pass"] == 0.25  # the group at 1 = reward_high; the group at 2 is in neither
    assert result.metrics["augmented_groups"] == 0.0
    # With the bounds of the sum, the group at 2 is the all-pass one and the group at 1 of neither kind.
    summed = AVSPOConfig(threshold_mode="never", reward_high=2.0)
    result = compute_group_advantages(SUMMED, LABELS, summed, ThresholdState.initial(summed))
    assert (result.metrics["acr_all_fail"], result.metrics["acr_all_pass"]) == (0.25, 0.25)
    shifted = compute_group_advantages(SUMMED - 0.5, LABELS, summed, ThresholdState.initial(summed))
    assert shifted.metrics["acr"] == 0.75
    assert (shifted.metrics["acr_all_fail"], shifted.metrics["acr_all_pass"]) == (0.0, 0.0)  # at -0.5, 0.5, 1.5


@pytest.mark.parametrize("mode", [m for m in THRESHOLD_MODES if m != "never"])
def test_avspo_on_refuses_rewards_outside_the_bounds_with_the_fix(mode):
    config = AVSPOConfig(threshold_mode=mode)
    with pytest.raises(ValueError) as error:
        compute_group_advantages(SUMMED, LABELS, config, ThresholdState.initial(config))
    message = str(error.value)
    assert "reward 2 of uid 'p2' at row 8 (5 in all) lies outside [reward_low, reward_high] = [0.0, 1.0]" in message
    assert "for a sum of rewards, the sum of their lowest and of their highest values" in message
    assert message.endswith("or threshold_mode=never to monitor ACR only, with any reward range")


def test_only_bounded_strategies_with_avspo_on_need_the_bounds():
    needs = {(s, m) for s in STRATEGIES for m in THRESHOLD_MODES
             if AVSPOConfig(strategy=s, threshold_mode=m).places_virtual_rewards_in_bounds}  # fmt: skip
    assert needs == {(s, m) for s in STRATEGIES if s != "stratified_observed" for m in THRESHOLD_MODES if m != "never"}


def test_collapse_kinds_under_avspo_are_unchanged_inside_the_bounds():
    """Rewards within the bounds (what AVSPO on admits): all-fail is value <= low + 1e-6, all-pass >= high - 1e-6."""
    scores = torch.tensor([0.0] * 4 + [1.0] * 4 + [-5e-7] * 4 + [1.0 + 5e-7] * 4 + [0.5] * 4)
    labels = np.repeat(np.arange(5), 4)
    config = AVSPOConfig(threshold_mode="always", augmented_collapses="all_fail")
    result = compute_group_advantages(scores, labels, config, ThresholdState.initial(config))
    assert (result.metrics["acr_all_fail"], result.metrics["acr_all_pass"]) == (0.4, 0.4)
    assert result.metrics["augmented_groups"] == 0.4


def test_step_with_keeps_a_host_computation_like_group_advantages():
    """A host's own call around the core (TRL's translation) advances the session exactly as group_advantages() does."""
    config = AVSPOConfig(threshold_mode="adaptive", threshold_lr=0.5, threshold_init=0.2)
    by_core, by_host = AVSPOSession(), AVSPOSession()
    seen = []

    def host(cfg, state):
        seen.append(state)
        return compute_group_advantages(SUMMED / 2, LABELS, cfg, state)

    for _ in range(3):
        expected = by_core.group_advantages(SUMMED / 2, LABELS, config)
        got = by_host.step_with(config, host)
        by_core.close_step()
        by_host.close_step()
        assert torch.equal(got.advantages, expected.advantages) and got.metrics == expected.metrics
    assert seen[0] == ThresholdState.initial(config) and len(set(seen)) == 3
    assert by_host.state_dict() == by_core.state_dict()
    assert by_host.pop_metrics() == by_core.pop_metrics()
