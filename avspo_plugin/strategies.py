"""The virtual-reward strategies, one row each (Eq. 10 and the paper's ablation variants), read by the config and
the core. Imports nothing of the package."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class Slots:
    """The packed virtual samples of one call, (T,) float64 each (T = sum_j K_j, see core/virtual.py): each one's
    k = 1..K_j, its group's K_j, value c_j and max(R_j); and what seeds ``uniform``."""

    k: torch.Tensor
    size: torch.Tensor
    group_value: torch.Tensor
    group_max: torch.Tensor
    step: int
    call_in_step: int


def uniform_rewards(
    total: int, reward_low: float, reward_high: float, seed: int, step: int, call_in_step: int = 0,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """(T = total,) float64 r_vk ~ U[lo, hi] on ``device``, drawn on the CPU from a generator seeded with (seed, step)
    so a resumed run draws the same values; call_in_step > 0 (a step's k-th call) joins the seed."""
    entropy = [seed, step] if call_in_step == 0 else [seed, step, call_in_step]
    generator = torch.Generator().manual_seed(int(np.random.SeedSequence(entropy).generate_state(1)[0]))
    draws = torch.rand(total, generator=generator, dtype=torch.float64)
    return (reward_low + draws * (reward_high - reward_low)).to(device)


@dataclass(frozen=True)
class Strategy:
    """One strategy: ``equation`` is its entry in the help of ``strategy`` (docs/using/config.md, the packaged verl
    YAML, the hosts' option help); ``bounded``: its rewards lie between reward_low and reward_high (so the rewards
    must too); ``rewards(slots, config)``: the (T,) float64 virtual rewards (config: the AVSPOConfig in force)."""

    name: str
    equation: str
    bounded: bool
    rewards: Callable[[Slots, Any], torch.Tensor]


def _opposite(s: Slots, c: Any) -> torch.Tensor:
    lo, hi = c.reward_low, c.reward_high
    return torch.where(s.group_value - lo <= hi - s.group_value, hi, lo)


STRATEGIES: dict[str, Strategy] = {strategy.name: strategy for strategy in (
    Strategy("stratified", "r_vk = reward_high - (k-1)/K * (reward_high - reward_low)", True,
             lambda s, c: c.reward_high - (s.k - 1) / s.size * (c.reward_high - c.reward_low)),
    Strategy("stratified_observed", "r_vk = max(R_j) * (1 - (k-1)/K), Eq. 10 as printed", False,
             lambda s, c: s.group_max * (1 - (s.k - 1) / s.size)),
    Strategy("opposite", "every virtual reward is the bound farther from the group's value (the authors' released "
             "code)", True, _opposite),
    Strategy("uniform", "r_vk ~ U[reward_low, reward_high]", True,
             lambda s, c: uniform_rewards(s.k.shape[0], c.reward_low, c.reward_high, c.seed, s.step, s.call_in_step,
                                          s.k.device)),
    Strategy("fixed_partial", "r_vk = reward_low + partial * (reward_high - reward_low)", True,
             lambda s, c: torch.full_like(s.k, c.reward_low + c.partial * (c.reward_high - c.reward_low))),
    Strategy("exp_decay", "r_vk = reward_low + (reward_high - reward_low) * decay**(k-1)", True,
             lambda s, c: c.reward_low + (c.reward_high - c.reward_low) * c.decay ** (s.k - 1)),
)}  # fmt: skip
