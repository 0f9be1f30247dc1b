"""The trigger threshold: the adaptive rule of Eq. 12, and each threshold mode run by its row of THRESHOLD_MODES."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch

from ..allowed import INT64_MAX, Integer, Number
from ..config import AVSPOConfig
from ..state_files import check_fields
from ..threshold_modes import THRESHOLD_MODES

# A count or a step number of a state.
COUNT = Integer(0, INT64_MAX)
# The type and range of each field of ThresholdState.state_dict(), checked on load.
THRESHOLD_FIELDS = {"tau": Number(0.0, 1.0), "prev_reward_mean": (None, Number()), "step": COUNT}


@dataclass(frozen=True)
class ThresholdState:
    """tau_t, J_{t-1} (None before the first step) and t, the steps with a valid sample so far (``uniform``'s seed)."""

    tau: float
    prev_reward_mean: float | None = None
    step: int = 0

    @classmethod
    def initial(cls, config: AVSPOConfig) -> ThresholdState:
        return cls(tau=config.threshold_init)

    def state_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> ThresholdState:
        check_fields(state, THRESHOLD_FIELDS, "AVSPO threshold state")
        prev = state["prev_reward_mean"]
        return cls(float(state["tau"]), None if prev is None else float(prev), int(state["step"]))


def sign(x: float) -> float:
    """sign(x) with sign(0) = 0."""
    return float((x > 0) - (x < 0))


def adaptive_threshold_update(
    tau: float, acr: float, reward_delta: float, lr: float, tau_min: float, tau_max: float
) -> float:
    """Eq. 12: tau_{t+1} = clip(tau_t + eta * sign(dJ_t) * (ACR_t - tau_t), tau_min, tau_max).

    dJ_t = J_t - J_{t-1}, J = mean sequence reward of the batch's real samples. Scalars.
    """
    return min(tau_max, max(tau_min, tau + lr * sign(reward_delta) * (acr - tau)))


def threshold_in_force(config: AVSPOConfig, state: ThresholdState) -> float:
    """The threshold this call compares ACR_t against: tau_t (adaptive), threshold_init (fixed), or for a mode that
    reads none the constant of the same decision under ACR_t > threshold (always: 0; never: 1)."""
    mode = THRESHOLD_MODES[config.threshold_mode]
    if mode.adapts_threshold:
        return state.tau
    if mode.reads_threshold:
        return config.threshold_init
    return 0.0 if mode.augments else 1.0


def groups_to_augment(
    config: AVSPOConfig, acr: float, threshold: float, collapsed: torch.Tensor, all_fail: torch.Tensor,
    all_pass: torch.Tensor,
) -> tuple[bool, torch.Tensor]:
    """Eq. 13: R'_j = R_j U V_j  iff  ACR_t > tau_t  and  sigma_{R_j} < collapse_tol (group j collapsed).

    A mode that reads no threshold is open if it augments (always), else shut (never); ``augmented_collapses``
    narrows the group condition to one kind. collapsed, all_fail, all_pass: (N,) bool -> (triggered, augmented (N,)).
    """
    mode = THRESHOLD_MODES[config.threshold_mode]
    triggered = acr > threshold if mode.reads_threshold else mode.augments
    eligible = {"all": collapsed, "all_fail": all_fail, "all_pass": all_pass}[config.augmented_collapses]
    return triggered, eligible & triggered


def advance(config: AVSPOConfig, state: ThresholdState, acr: float, reward_mean: float) -> ThresholdState:
    """The state after step t: Eq. 12 applied in adaptive mode from the second step on; J_t remembered."""
    tau = state.tau
    if THRESHOLD_MODES[config.threshold_mode].adapts_threshold and state.prev_reward_mean is not None:
        tau = adaptive_threshold_update(tau, acr, reward_mean - state.prev_reward_mean, config.threshold_lr,
                                        config.threshold_min, config.threshold_max)
    return ThresholdState(tau=tau, prev_reward_mean=reward_mean, step=state.step + 1)
