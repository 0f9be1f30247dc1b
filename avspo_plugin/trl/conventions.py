"""TRL's GRPO conventions translated to the core and back; no TRL import.

GRPOTrainer's ``scale_rewards`` picks the advantage's denominator, and AVSPO (R'_j = R_j U V_j) follows it:

* ``group``: (r - mu_j) / (sigma_j + 1e-4); AVSPO: Eq. 14, (r - mu'_j) / (sigma'_j + 1e-4);
* ``none``: r - mu_j; AVSPO: r - mu'_j (the core's ``norm_by_std=False``);
* ``batch``: (r - mu_j) / (sigma_batch + 1e-4); AVSPO: sigma'_batch pools the batch's real rewards with every virtual
  reward of the step (the real-only std would be 0 exactly when every reward is equal, when AVSPO has most to do).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import torch

from ..config import AVSPOConfig
from ..core import AVSPOResult, ThresholdState, compute_group_advantages
from ..core.advantage import reward_range_problem

# GRPOTrainer adds this to the std in every advantage denominator (hard-coded, not a GRPOConfig field).
TRL_EPSILON = 1e-4
SCALE_REWARDS = ("group", "batch", "none")


def host_settings(scale_rewards: str) -> dict[str, object]:
    """The AVSPO keys that TRL's GRPO fixes: eps 1e-4, unbiased std, std division only for ``group`` (for ``batch``
    the core computes r - mu'_j and :func:`trl_advantages` divides by the batch std)."""
    if scale_rewards not in SCALE_REWARDS:
        raise ValueError(f"scale_rewards={scale_rewards!r} is invalid: allowed one of {', '.join(SCALE_REWARDS)}")
    return {"epsilon": TRL_EPSILON, "std": "unbiased", "norm_by_std": scale_rewards == "group"}


def weighted_rewards(rewards_per_func: torch.Tensor, reward_weights: torch.Tensor) -> torch.Tensor:
    """TRL's reward of each completion: sum_k w_k r_k over the functions that scored it; NaN if none did.
    rewards_per_func: (B, F) with NaN where a function returned None; reward_weights: (F,) -> (B,)."""
    unscorable = torch.isnan(rewards_per_func).all(dim=1)
    rewards = (rewards_per_func * reward_weights.to(rewards_per_func.device).unsqueeze(0)).nansum(dim=1)
    return rewards.masked_fill(unscorable, torch.nan)


def reward_bounds_problem(
    rewards_per_func: torch.Tensor,
    reward_weights: torch.Tensor,
    reward_func_names: Sequence[str],
    num_generations: int,
    config: AVSPOConfig,
) -> str | None:
    """What is wrong when AVSPO places virtual rewards and a summed reward leaves [reward_low, reward_high], naming
    each reward function's weight and value; else None. rewards_per_func: (B, F) gathered, NaN where a function
    returned None; reward_weights: (F,)."""
    rewards = weighted_rewards(rewards_per_func, reward_weights)
    valid = ~torch.isnan(rewards)
    scores = torch.where(valid, rewards, torch.zeros_like(rewards)).to(torch.float64)
    weights = [float(w) for w in reward_weights]

    def weighted_sum(row: int) -> str:
        values = ["None" if math.isnan(v) else f"{v:g}" for v in rewards_per_func[row].tolist()]
        terms = " + ".join(f"{w:g} * {name} ({v})" for w, name, v in zip(weights, reward_func_names, values))
        return (
            f"; TRL's reward is the weighted sum of reward_funcs (reward_weights), {terms}, whose range runs from "
            "sum_k w_k * (lowest reward of function k) to sum_k w_k * (highest), lowest and highest swapped for a "
            f"negative weight (with every function in [0, 1]: {sum(min(w, 0.0) for w in weights):g} to "
            f"{sum(max(w, 0.0) for w in weights):g})"
        )

    return reward_range_problem(
        scores, valid, config, lambda row: f"completion {row} in group {row // num_generations}",
        ("avspo_reward_low", "avspo_reward_high", "avspo_threshold_mode"), weighted_sum,
    )  # fmt: skip


def group_labels(num_rows: int, num_generations: int) -> np.ndarray:
    """Group j of row i is i // G: TRL's ``view(-1, num_generations)``.  -> (B,) int64."""
    if num_generations < 1 or num_rows % num_generations:
        raise ValueError(
            f"the gathered batch has {num_rows} rows, not a multiple of num_generations={num_generations}: "
            "TRL's groups are consecutive runs of num_generations completions"
        )
    return np.arange(num_rows, dtype=np.int64) // num_generations


def trl_advantages(
    rewards: torch.Tensor,
    num_generations: int,
    scale_rewards: str,
    config: AVSPOConfig,
    state: ThresholdState,
) -> AVSPOResult:
    """AVSPO advantages (B,) of a gathered TRL batch under TRL's conventions (the module docstring), in the rewards'
    dtype, with the state after the step and the core's metrics (``adv_abs_max`` over these advantages).
    rewards: (B,) from :func:`weighted_rewards`, NaN where unscorable; config: with :func:`host_settings`'s keys."""
    expected = host_settings(scale_rewards)
    differing = {key: getattr(config, key) for key, value in expected.items() if getattr(config, key) != value}
    if differing:
        raise ValueError(
            f"config {differing} differs from TRL's settings for scale_rewards={scale_rewards!r}: {expected}"
        )
    labels = group_labels(rewards.shape[0], num_generations)
    valid = ~torch.isnan(rewards)
    scores = torch.where(valid, rewards, torch.zeros_like(rewards))
    result = compute_group_advantages(scores, labels, config, state, valid=valid)
    advantages = result.advantages
    # A group with a single scorable completion: TRL gives it 0 (its reward minus its own mean; its NaN std
    # is zeroed), where the core keeps verl's convention (mean 0, std 1).
    scorable = valid.view(-1, num_generations).sum(dim=1).repeat_interleave(num_generations)
    advantages = torch.where(scorable >= 2, advantages, torch.zeros_like(advantages))
    if scale_rewards == "batch":
        pooled = torch.cat([scores.detach().to(torch.float64)[valid], result.virtual_rewards])
        batch_std = pooled.std() if pooled.numel() > 1 else pooled.new_zeros(())
        advantages = advantages / (batch_std.to(advantages.dtype) + TRL_EPSILON)
    metrics = dict(result.metrics)
    metrics["adv_abs_max"] = float(advantages[valid].abs().max()) if bool(valid.any()) else 0.0
    return replace(result, advantages=advantages, metrics=metrics)


def local_rows(gathered: torch.Tensor, process_index: int, num_processes: int) -> torch.Tensor:
    """This process's rows of a batch gathered over processes (accelerate concatenates in process order, the same
    number of rows each): (num_processes * n, ...) -> (n, ...)."""
    if num_processes < 1 or not 0 <= process_index < num_processes:
        raise ValueError(f"process_index={process_index} is not in [0, num_processes={num_processes})")
    if gathered.shape[0] % num_processes:
        raise ValueError(
            f"the gathered batch has {gathered.shape[0]} rows, not a multiple of num_processes={num_processes}"
        )
    per_process = gathered.shape[0] // num_processes
    return gathered[process_index * per_process : (process_index + 1) * per_process]


def replace_latest(log: deque, values: Sequence[float]) -> None:
    """Replace the last len(values) entries of a bounded log (TRL's completions columns), the ones just appended for
    the same rows, by ``values``: the log stays aligned with the other columns, however few entries it holds."""
    for _ in range(min(len(values), len(log))):
        log.pop()
    log.extend(values)
