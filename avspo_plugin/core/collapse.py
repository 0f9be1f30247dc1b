"""Advantage collapse: which groups collapsed, of which kind, and the rates (Eq. 4 / 11) over the groups with at
least two valid samples."""

from __future__ import annotations

from typing import Any

import torch

from .groups import GroupStats, segment_max, segment_sum

# Distance from a reward bound within which a value counts as that bound.
BOUND_TOL = 1e-6


def at_bound(value: Any, bound: float) -> Any:
    """|value - bound| <= BOUND_TOL, for a number (bool) or a tensor (bool tensor)."""
    return abs(value - bound) <= BOUND_TOL


def multi_sample_groups(stats: GroupStats) -> torch.Tensor:
    """1[G_j >= 2]: the groups that count for ACR.  (N,) bool."""
    return stats.count >= 2


def collapsed_groups(stats: GroupStats, collapse_tol: float) -> torch.Tensor:
    """1[G_j >= 2 and sigma_{R_j} < collapse_tol]: the collapsed groups of Eq. 4.  (N,) bool."""
    return multi_sample_groups(stats) & (stats.std < collapse_tol)


def collapse_kinds(
    collapsed: torch.Tensor, stats: GroupStats, reward_low: float, reward_high: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """All-fail and all-pass collapsed groups, (N,) bool each: value c_j at reward_low, resp. reward_high; a group
    collapsed at another value (rewards outside the bounds, in monitor-only runs) is of neither kind."""
    return collapsed & at_bound(stats.mean, reward_low), collapsed & at_bound(stats.mean, reward_high)


def off_bound_message(groups: int, total: int, value: float, reward_low: float, reward_high: float,
                      augments: bool) -> str:
    """The once-per-run warning for ``groups`` of ``total`` multi-sample groups collapsed at neither reward
    bound, the lowest of them at ``value``; augments: whether this config gives such groups virtual samples."""
    fate = (
        "with augmented_collapses=all they get virtual samples whenever collapsed groups do" if augments
        else "they get no virtual samples here"
    )
    if reward_low < value < reward_high:
        fit = (
            f"If {value:g} is your task's lowest or highest reward (e.g. rewards {{{reward_low:g}, {value:g}}}), set "
            f"reward_low or reward_high to it (reward_high={value:g}) so that these groups count as all-fail or "
            "all-pass; if such groups are partial successes to leave alone, set augmented_collapses=all_fail or "
            "augmented_collapses=all_pass (only groups at that bound get virtual samples)"
        )
    else:
        fit = "Set reward_low and reward_high to the lowest and highest reward your task gives"
    return (
        f"AVSPO: {groups} of {total} groups ({groups / total:.1%}) collapsed at a value that is neither "
        f"reward_low={reward_low:g} nor reward_high={reward_high:g} (the lowest: {value:g}); ACR counts them, "
        f"acr_all_fail and acr_all_pass do not, and {fate}. {fit}. This warning is given once per run."
    )


def group_rate(flags: torch.Tensor, multi: torch.Tensor) -> float:
    """(1/N_multi) sum_j flags_j over multi-sample groups, 0 when there are none (Eq. 4 / 11 for flags = collapsed).
    flags, multi: (N,) bool -> Python float."""
    return share(*torch.stack([(flags & multi).sum(), multi.sum()]).tolist())


def share(count: float, total: float) -> float:
    """count / total, 0 when total is 0 (a rate over no group, a mean over no augmented group)."""
    return count / total if total else 0.0


def near_collapse_groups(
    scores: torch.Tensor, group_ids: torch.Tensor, valid: torch.Tensor, stats: GroupStats, collapsed: torch.Tensor,
    collapse_tol: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Odd-one-out groups, split by the odd sample: (lone_success, lone_failure).

    lone_success_j = 1[G_j >= 3, one sample at the group's highest value, the other G_j - 1 at its lowest];
    lone_failure_j likewise with lowest and highest swapped. (With G_j = 2 a split group would be both.)
    scores: (B,) float64; group_ids, valid: (B,); stats, collapsed: per group (N,) -> two (N,) bool.
    """
    num_groups = stats.count.shape[0]
    weight = valid.to(scores.dtype)
    low = stats.low.index_select(0, group_ids)
    high = stats.high.index_select(0, group_ids)
    at_low = segment_sum(weight * (scores - low <= collapse_tol), group_ids, num_groups)
    at_high = segment_sum(weight * (high - scores <= collapse_tol), group_ids, num_groups)
    rest = stats.count - 1
    split = (stats.count >= 3) & ~collapsed & (stats.high - stats.low > collapse_tol)
    return split & (at_low == rest) & (at_high == 1), split & (at_high == rest) & (at_low == 1)


def effectively_collapsed_groups(
    advantages: torch.Tensor, group_ids: torch.Tensor, valid: torch.Tensor, multi: torch.Tensor, collapse_tol: float
) -> torch.Tensor:
    """Multi-sample groups whose real advantages (B,) float64 are all below collapse_tol in magnitude: (N,) bool."""
    largest = segment_max(advantages.abs(), group_ids, multi.shape[0], valid)
    return multi & (largest < collapse_tol)
