"""The adaptive threshold (Eq. 12) over scripted reward sequences."""

import numpy as np
import pytest
import torch

from avspo_plugin import AVSPOConfig, ThresholdState, compute_group_advantages
from avspo_plugin.core.threshold import adaptive_threshold_update, advance, sign


def test_sign_of_zero_is_zero():
    assert (sign(0.3), sign(-2.0), sign(0.0)) == (1.0, -1.0, 0.0)


def test_scripted_sequence():
    config = AVSPOConfig(threshold_mode="adaptive", threshold_lr=0.1)
    state = ThresholdState.initial(config)
    # (ACR_t, J_t) -> tau_{t+1}: no update on the first step; then up when J rises, none when flat, down when J falls.
    script = [(0.8, 0.2, 0.5), (0.8, 0.3, 0.53), (0.2, 0.3, 0.53), (0.2, 0.1, 0.563)]
    for acr, reward_mean, expected_tau in script:
        state = advance(config, state, acr, reward_mean)
        assert state.tau == pytest.approx(expected_tau)
        assert state.prev_reward_mean == reward_mean
    assert state.step == 4


def test_update_is_clamped():
    assert adaptive_threshold_update(0.5, 1.0, 1.0, 1.0, 0.1, 0.9) == 0.9
    assert adaptive_threshold_update(0.5, 1.0, -1.0, 1.0, 0.1, 0.9) == 0.1


def test_only_adaptive_mode_moves_the_threshold():
    config = AVSPOConfig(threshold_mode="fixed", threshold_lr=0.1)
    state = advance(config, advance(config, ThresholdState.initial(config), 0.9, 0.1), 0.9, 0.5)
    assert state.tau == 0.5 and state.prev_reward_mean == 0.5


def batch_with(collapsed_groups, mixed_groups, passing):
    """Groups of 4: `collapsed_groups` all-pass (passing=True) or all-fail, `mixed_groups` half right."""
    rows = [[float(passing)] * 4] * collapsed_groups + [[0.0, 1.0, 0.0, 1.0]] * mixed_groups
    labels = np.repeat([f"p{j}" for j in range(len(rows))], 4).astype(object)
    return torch.tensor(rows).reshape(-1), labels


def test_threshold_through_the_estimator_calls():
    """Each call is one step t: the threshold reported is the one in force, Eq. 12 applies after it."""
    config = AVSPOConfig(threshold_mode="adaptive", threshold_lr=0.5)
    state = ThresholdState.initial(config)
    seen = []
    # step 1: ACR 0.75, J = 0.125 (3 all-fail, 1 mixed); step 2: ACR 0.25, J = 0.375; step 3: ACR 0.75, J = 0.875
    for collapsed, mixed, passing in [(3, 1, False), (1, 3, False), (3, 1, True)]:
        scores, labels = batch_with(collapsed, mixed, passing)
        result = compute_group_advantages(scores, labels, config, state)
        seen.append((result.metrics["threshold"], result.metrics["triggered"]))
        state = result.state
    # tau_2 = tau_1 (first step); tau_3 = 0.5 + 0.5 * (+1) * (0.25 - 0.5) = 0.375; tau_4 = 0.375 + 0.5 * (0.75 - 0.375)
    assert seen == [(0.5, 1.0), (0.5, 0.0), (0.375, 1.0)]
    assert state.tau == pytest.approx(0.5625)


def test_state_round_trips_through_state_dict():
    state = ThresholdState(tau=0.42, prev_reward_mean=0.3, step=7)
    assert ThresholdState.from_state_dict(state.state_dict()) == state
    with pytest.raises(ValueError, match="missing"):
        ThresholdState.from_state_dict({"tau": 0.4})
