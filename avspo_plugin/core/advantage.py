"""AVSPO advantages (Eq. 13 / Eq. 14) with every ACR metric, in one vectorised pass over float64 group statistics; a
group given no virtual sample is normalised by verl's GRPO's own mean and std (bit-equal to GRPO when none is).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from ..config import AVSPOConfig
from ..strategies import STRATEGIES, Slots
from ..threshold_modes import MEASURE_ONLY_MODE
from . import virtual as vr
from .collapse import (
    BOUND_TOL,
    collapse_kinds,
    collapsed_groups,
    effectively_collapsed_groups,
    group_rate,
    multi_sample_groups,
    near_collapse_groups,
    share,
)
from .groups import GroupStats, factorize_labels, group_stats, label_array, segment_sum
from .inputs import TensorLike, as_config, as_index, as_state, as_tensor
from .metrics import CALL_METRICS
from .threshold import ThresholdState, advance, groups_to_augment, threshold_in_force

# float32 holds every integer up to this magnitude exactly.
FLOAT32_EXACT_INTEGERS = 2**24


@dataclass(frozen=True)
class AVSPOResult:
    """advantages: (B,) for :func:`compute_group_advantages`, (B, L) for :func:`compute_token_advantages`.

    num_virtual: (N,) int64 K_j, groups in sorted label order; virtual_rewards: (sum_j K_j,) float64, packed
    (:mod:`.virtual`); off_bound_groups: the groups collapsed at neither reward bound, the lowest at off_bound_value.
    """

    advantages: torch.Tensor
    state: ThresholdState
    metrics: dict[str, float]
    num_virtual: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.int64))
    virtual_rewards: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.float64))
    off_bound_groups: int = 0
    off_bound_value: float = math.inf


def virtual_rewards(
    config: AVSPOConfig, num_virtual: torch.Tensor, owners: torch.Tensor, stats: GroupStats, step: int,
    call_in_step: int = 0,
) -> torch.Tensor:
    """The packed virtual rewards of the configured strategy (its row of :data:`~avspo_plugin.strategies.STRATEGIES`).

    num_virtual: (N,) int64 K_j; owners: (T,) int64 the group of each virtual sample -> (T,) float64.
    step, call_in_step: the threshold step t and the call's place within it, which seed ``uniform``.
    """
    slots = Slots(vr.slot_numbers(num_virtual, owners), num_virtual.to(torch.float64).index_select(0, owners),
                  stats.mean.index_select(0, owners), stats.high.index_select(0, owners), step, call_in_step)
    return STRATEGIES[config.strategy].rewards(slots, config)


def augmented_group_stats(
    stats: GroupStats, num_virtual: torch.Tensor, virtual: torch.Tensor, ddof: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 14's statistics over R'_j = R_j U V_j (G_j real and K_j virtual values), in float64.

    mu'_j = (G_j mu_j + sum_k v_jk) / (G_j + K_j)
    sigma'_j^2 = [sum_i (r_i - mu_j)^2 + G_j (mu_j - mu'_j)^2 + sum_k (v_jk - mu'_j)^2] / (G_j + K_j - ddof)
    stats: per group (N,); num_virtual: (N,) int64 K_j; virtual: (sum_j K_j,) float64, packed (:mod:`.virtual`).
    Returns (mu' (N,), sigma' (N,)); with K_j = 0 they are the group's own mean and std.
    """
    num_groups = num_virtual.shape[0]
    owners = vr.virtual_owners(num_virtual, virtual.shape[0])
    total = stats.count + num_virtual.to(torch.float64)
    mean = (stats.count * stats.mean + segment_sum(virtual, owners, num_groups)) / total.clamp(min=1)
    virtual_sq_dev = segment_sum((virtual - mean.index_select(0, owners)) ** 2, owners, num_groups)
    sum_sq_dev = stats.sum_sq_dev + stats.count * (stats.mean - mean) ** 2 + virtual_sq_dev
    return mean, torch.sqrt(sum_sq_dev / (total - ddof).clamp(min=1))


def normalized_advantages(
    scores: torch.Tensor, group_ids: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, epsilon: float,
    norm_by_std: bool,
) -> torch.Tensor:
    """Eq. 2 / Eq. 14: A_i = (r_i - mu_j) / (sigma_j + eps), or r_i - mu_j without std normalisation.

    Formed in the dtype of scores (B,) from mean, std (N,) rounded to that dtype, as verl does.
    """
    mean = mean.to(scores.dtype).index_select(0, group_ids)
    if not norm_by_std:
        return scores - mean
    return (scores - mean) / (std.to(scores.dtype).index_select(0, group_ids) + epsilon)


def reward_range_problem(
    scores: torch.Tensor, valid: torch.Tensor, config: AVSPOConfig, describe_row: Callable[[int], str],
    setting_names: tuple[str, str, str] = ("reward_low", "reward_high", "threshold_mode"),
    reward_source: Callable[[int], str] | None = None,
) -> str | None:
    """The message every host gives when virtual rewards are placed in [reward_low, reward_high] and a valid reward
    lies farther than BOUND_TOL outside it, else None. scores, valid: (B,); describe_row, reward_source: row -> text;
    setting_names: the host's names of reward_low, reward_high and threshold_mode."""
    if not config.places_virtual_rewards_in_bounds:
        return None
    outside = valid & ((scores < config.reward_low - BOUND_TOL) | (scores > config.reward_high + BOUND_TOL))
    if not bool(outside.any()):
        return None
    row = int(outside.nonzero()[0])
    low, high, mode = setting_names
    source = "" if reward_source is None else reward_source(row)
    return (
        f"reward {float(scores[row]):g} of {describe_row(row)} ({int(outside.sum())} in all) lies outside "
        f"[{low}, {high}] = [{config.reward_low}, {config.reward_high}], where strategy {config.strategy!r} places "
        f"virtual rewards{source}. Set {low} and {high} to the reward's range (for a sum of rewards, the sum of their "
        f"lowest and of their highest values); or {mode}={MEASURE_ONLY_MODE} to monitor ACR only, with any reward range"
    )


def label_at(labels: np.ndarray, row: int) -> Any:
    """Row ``row``'s group label as a plain Python value, to name in an error (3, not np.int64(3))."""
    label = labels[row]
    return label.item() if isinstance(label, np.generic) else label


def float_rewards(scores: torch.Tensor, labels: np.ndarray) -> torch.Tensor:
    """Rewards (B,) as a floating tensor: integer and boolean rewards become float32, as verl's grpo_vectorized
    makes them; integers beyond 2**24 in magnitude, which float32 cannot hold exactly, are an error."""
    if scores.is_floating_point():
        return scores
    if scores.is_complex():
        raise ValueError(f"rewards must be real numbers (a float, integer or bool tensor), got dtype {scores.dtype}")
    # The magnitude in float64: torch has no abs of uint16, uint32 or uint64.
    magnitude = scores.to(torch.float64).abs()
    if scores.dtype != torch.bool and scores.numel() and float(magnitude.max()) > FLOAT32_EXACT_INTEGERS:
        row = int(magnitude.argmax())
        raise ValueError(
            f"integer reward {scores[row].item()} at row {row} (uid {label_at(labels, row)!r}) is beyond 2**24, where "
            "float32 (the dtype integer rewards are read in) stops holding integers exactly: pass the rewards "
            "as a float64 tensor"
        )
    return scores.to(torch.float32)


def check_rewards(scores: torch.Tensor, valid: torch.Tensor, labels: np.ndarray, config: AVSPOConfig) -> None:
    """Reject non-finite rewards anywhere, and rewards outside the bounds where virtual rewards are placed."""
    bad = ~torch.isfinite(scores)
    if bool(bad.any()):
        first = int(bad.nonzero()[0])
        raise ValueError(
            f"{int(bad.sum())} non-finite reward(s) (NaN or inf); the first is {float(scores[first])} "
            f"at row {first}, uid {label_at(labels, first)!r}"
        )
    problem = reward_range_problem(scores, valid, config, lambda row: f"uid {label_at(labels, row)!r} at row {row}")
    if problem is not None:
        raise ValueError(problem)


def non_finite_advantages(
    advantages: torch.Tensor, labels: np.ndarray, group_ids: torch.Tensor, mean: torch.Tensor, std: torch.Tensor,
    epsilon: float,
) -> str:
    """The error for non-finite advantages (B,) of finite rewards: group statistics that overflow the rewards'
    dtype (float32 sums beyond 3.4e38), or an epsilon the dtype rounds to 0 (float16 below 6e-8)."""
    bad = ~torch.isfinite(advantages)
    row = int(bad.nonzero()[0])
    group = int(group_ids[row])
    return (
        f"advantage of row {row} (uid {label_at(labels, row)!r}) is {float(advantages[row])} ({int(bad.sum())} "
        f"row(s) in all): the rewards' dtype {advantages.dtype} cannot hold its group's statistics (mean "
        f"{float(mean[group])}, std {float(std[group])}, epsilon {epsilon}); pass the rewards in a wider dtype "
        "(float64)"
    )


def check_shapes(
    scores: torch.Tensor, labels: np.ndarray, valid: torch.Tensor | None, response_mask: torch.Tensor | None
) -> None:
    """Rewards (B,), labels (B,), valid (B,) and response_mask (B, L), or an error that names the shapes."""
    if scores.dim() != 1 or labels.shape[0] != scores.shape[0]:
        raise ValueError(
            f"rewards and group index disagree: rewards have shape {tuple(scores.shape)}, "
            f"index has shape {labels.shape}; need rewards (B,) and index (B,)"
        )
    if valid is not None and valid.shape != scores.shape:
        raise ValueError(f"valid mask shape {tuple(valid.shape)} differs from rewards shape {tuple(scores.shape)}")
    if response_mask is not None and (response_mask.dim() != 2 or response_mask.shape[0] != scores.shape[0]):
        raise ValueError(
            f"response_mask shape {tuple(response_mask.shape)} is not (B, L) for rewards of shape {tuple(scores.shape)}"
        )


def normalising_statistics(
    stats: GroupStats, augmented: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, dtype: torch.dtype
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The mu_j and sigma_j that Eq. 14 divides by, in float64 and in the rewards' dtype, where an augmented
    group's are rounded once and any other group's are verl's GRPO's (stats.host_mean, stats.host_std); a group of
    one valid sample has verl's mu_j = 0, sigma_j = 1.

    augmented: (N,) bool; mean, std: (N,) float64 mu'_j, sigma'_j -> [(mean, std) float64, (mean, std) in dtype].
    """
    singleton = stats.count == 1
    rounded_mean = torch.where(augmented, mean.to(dtype), stats.host_mean)
    rounded_std = torch.where(augmented, std.to(dtype), stats.host_std)
    return [(torch.where(singleton, 0.0, mu), torch.where(singleton, 1.0, sigma))
            for mu, sigma in ((mean, std), (rounded_mean, rounded_std))]


def call_metrics(
    stats: GroupStats, collapsed: torch.Tensor, kinds: tuple[torch.Tensor, torch.Tensor], exact: torch.Tensor,
    group_ids: torch.Tensor, valid: torch.Tensor, advantages: torch.Tensor, effective: torch.Tensor,
    augmented: torch.Tensor, num_virtual: torch.Tensor, triggered: bool, threshold: float, collapse_tol: float,
) -> tuple[dict[str, float], int, float]:
    """The call's metrics (docs/using/metrics.md), the number of groups collapsed at neither reward bound and
    the lowest value of those (inf when there is none).

    collapsed, effective, augmented: (N,) bool; kinds: (all_fail, all_pass) (N,) bool; exact: (B,) float64
    rewards; group_ids, valid, advantages: (B,); num_virtual: (N,) int64 K_j. "reward_mean" is J_t of Eq. 12.
    """
    multi = multi_sample_groups(stats)
    all_fail, all_pass = kinds
    lone_success, lone_failure = near_collapse_groups(exact, group_ids, valid, stats, collapsed, collapse_tol)
    off_bound = collapsed & ~all_fail & ~all_pass
    # Every metric in one transfer: one device sync per call, not one per metric.
    num_samples, wasted, reward_sum, adv_abs_max, off_bound_value = torch.stack([
        stats.count.sum(), torch.where(effective, stats.count, 0.0).sum(),
        torch.where(valid, exact, 0.0).sum(), advantages.abs().max().to(torch.float64),
        torch.where(off_bound, stats.mean, torch.inf).min(),
    ]).tolist()
    # Every flag is of multi-sample groups alone.
    counts = torch.stack([
        flags.sum()
        for flags in (collapsed, all_fail, all_pass, effective, lone_success, lone_failure, augmented, multi,
                      num_virtual, off_bound)
    ]).tolist()
    num_collapsed, fail, pass_, effective_multi, success, failure, num_augmented = counts[:7]
    num_multi, total_virtual, off_bound_count = counts[7:]
    metrics = {
        "acr": share(num_collapsed, num_multi),
        "acr_all_fail": share(fail, num_multi),
        "acr_all_pass": share(pass_, num_multi),
        "effective_acr": share(effective_multi, num_multi),
        "near_collapse": share(success + failure, num_multi),
        "near_collapse_success": share(success, num_multi),
        "near_collapse_failure": share(failure, num_multi),
        "triggered": float(triggered),
        "threshold": threshold,
        "num_virtual": share(total_virtual, num_augmented),
        "augmented_groups": share(num_augmented, num_multi),
        "groups": float(num_multi),
        "samples": num_samples,
        "wasted_rollouts": wasted,
        "reward_mean": reward_sum / num_samples,
        "adv_abs_max": adv_abs_max,  # NaN or inf when an advantage is; padding rows hold 0
    }
    return metrics, off_bound_count, off_bound_value


def compute_group_advantages(
    scores: TensorLike, index: Any, config: AVSPOConfig | Mapping[str, Any], state: ThresholdState | None = None,
    valid: TensorLike | None = None, response_mask: TensorLike | None = None, call_in_step: int = 0,
) -> AVSPOResult:
    """AVSPO advantages (B,) in scores' dtype, ``state`` advanced by Eq. 12 as if this batch were a whole step, and
    the batch's metrics.

    scores: (B,) sequence rewards; index: (B,) group labels (uids); valid: (B,) bool, False for rows that join no
    group (advantage 0); response_mask: (B, L), where the rewards come from tokens: a group none of whose valid rows
    has a response token (verl's padding) is left out, an empty row of another group is not (as in verl's GRPO).
    call_in_step: the call's place in the host's step.
    """
    config = as_config(config)
    state = as_state(state, config)
    scores, valid = as_tensor(scores, "scores"), None if valid is None else as_tensor(valid, "valid")
    response_mask = None if response_mask is None else as_tensor(response_mask, "response_mask")
    labels = label_array(as_index(index))
    check_shapes(scores, labels, valid, response_mask)
    scores = float_rewards(scores.detach(), labels)
    valid = torch.ones_like(scores, dtype=torch.bool) if valid is None else valid.to(torch.bool)
    threshold = threshold_in_force(config, state)
    with torch.no_grad():
        group_ids, num_groups = factorize_labels(labels, scores.device)
        if response_mask is not None:
            valid = valid & responding_groups(response_mask, group_ids, num_groups, valid).index_select(0, group_ids)
        exact = scores.to(torch.float64)
        check_rewards(exact, valid, labels, config)
        if not bool(valid.any()):
            metrics = {**dict.fromkeys(CALL_METRICS, 0.0), "threshold": threshold}
            return AVSPOResult(torch.zeros_like(scores), state, metrics)

        ddof = 1 if config.std == "unbiased" else 0
        stats = group_stats(scores, group_ids, num_groups, valid, ddof)
        # Eq. 4 / Eq. 11: the collapsed groups (sigma_{R_j} < collapse_tol), their kinds, and ACR_t.
        multi = multi_sample_groups(stats)
        collapsed = collapsed_groups(stats, config.collapse_tol)
        kinds = collapse_kinds(collapsed, stats, config.reward_low, config.reward_high)
        acr = group_rate(collapsed, multi)
        triggered, augmented = groups_to_augment(config, acr, threshold, collapsed, *kinds)
        num_virtual = vr.num_virtual_samples(config, stats.count, acr, augmented)
        # One sync sizes the packed virtual rewards: T values, linear in the batch (K_j <= G_j, or a constant K).
        owners = vr.virtual_owners(num_virtual, int(num_virtual.sum()))
        virtual = virtual_rewards(config, num_virtual, owners, stats, state.step, call_in_step)
        (exact_mean, exact_std), (mean, std) = normalising_statistics(
            stats, augmented, *augmented_group_stats(stats, num_virtual, virtual, ddof), scores.dtype
        )
        advantages = normalized_advantages(scores, group_ids, mean, std, config.epsilon, config.norm_by_std)
        advantages = torch.where(valid, advantages, 0.0)

        # Eq. 14's float64 advantages are largest in magnitude at a group's lowest or highest reward: those two
        # values per group decide whether all of its advantages are below collapse_tol.
        extreme_ids = torch.arange(num_groups, device=scores.device).repeat(2)
        extreme_advantages = normalized_advantages(
            torch.cat([stats.low, stats.high]), extreme_ids, exact_mean, exact_std, config.epsilon, config.norm_by_std
        )
        effective = effectively_collapsed_groups(
            extreme_advantages, extreme_ids, (stats.count > 0).repeat(2), multi, config.collapse_tol
        )
        metrics, off_bound_count, off_bound_value = call_metrics(
            stats, collapsed, kinds, exact, group_ids, valid, advantages, effective, augmented, num_virtual,
            triggered, threshold, config.collapse_tol,
        )
        if not math.isfinite(metrics["adv_abs_max"]):  # NaN and inf propagate through the max
            raise ValueError(non_finite_advantages(advantages, labels, group_ids, mean, std, config.epsilon))
    return AVSPOResult(
        advantages, advance(config, state, acr, metrics["reward_mean"]), metrics, num_virtual, virtual,
        off_bound_groups=off_bound_count, off_bound_value=off_bound_value,
    )


def nonempty_rows(response_mask: torch.Tensor) -> torch.Tensor:
    """Rows with at least one response token.  response_mask: (B, L) 0/1 (bool, int or float) -> (B,) bool.
    (amax reads a float mask about six times faster than any() on CPU.)"""
    if response_mask.dtype == torch.bool:
        return response_mask.any(dim=-1)
    if response_mask.shape[-1] == 0:
        return torch.zeros(response_mask.shape[0], dtype=torch.bool, device=response_mask.device)
    return response_mask.amax(dim=-1) > 0


def responding_groups(
    response_mask: torch.Tensor, group_ids: torch.Tensor, num_groups: int, valid: torch.Tensor
) -> torch.Tensor:
    """Groups with a valid row that has a response token: (N,) bool.  response_mask: (B, L); group_ids, valid: (B,).

    One valid row per group is read first, at its first token (every verl response starts with one); only the
    rows of groups not settled so are read in full: N reads of a right-padded mask, not a pass over (B, L).
    """
    rows = torch.arange(valid.shape[0], device=valid.device)
    some_row = torch.full((num_groups,), -1, dtype=torch.int64, device=valid.device)
    some_row.scatter_reduce_(0, group_ids, torch.where(valid, rows, -1), reduce="amax")
    starts = response_mask[:, 0] != 0 if response_mask.shape[-1] else torch.zeros_like(valid)
    responding = (some_row >= 0) & (starts.index_select(0, some_row.clamp(min=0)))
    unsettled = (valid & ~responding.index_select(0, group_ids)).nonzero().squeeze(1)
    if unsettled.numel() == 0:
        return responding
    answered = nonempty_rows(response_mask.index_select(0, unsettled)).to(torch.int64)
    return responding | (segment_sum(answered, group_ids.index_select(0, unsettled), num_groups) > 0)


def compute_token_advantages(
    token_level_rewards: TensorLike, response_mask: TensorLike, index: Any, config: AVSPOConfig | Mapping[str, Any],
    state: ThresholdState | None = None, call_in_step: int = 0,
) -> AVSPOResult:
    """Outcome-reward AVSPO on token-level tensors, as verl's estimators take them.

    token_level_rewards, response_mask: (B, L); index, config, state: as :func:`compute_group_advantages` takes
    them. The sequence reward is the token sum. Returns advantages (B, L) = A_i * response_mask.
    """
    token_level_rewards = as_tensor(token_level_rewards, "token_level_rewards")
    response_mask = as_tensor(response_mask, "response_mask")
    if token_level_rewards.shape != response_mask.shape or token_level_rewards.dim() != 2:
        raise ValueError(
            f"token_level_rewards shape {tuple(token_level_rewards.shape)} and response_mask shape "
            f"{tuple(response_mask.shape)} must be equal and (B, L)"
        )
    result = compute_group_advantages(
        token_level_rewards.sum(dim=-1), index, config, state, response_mask=response_mask, call_in_step=call_in_step
    )
    return replace(result, advantages=result.advantages.unsqueeze(-1) * response_mask)
