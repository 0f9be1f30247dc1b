"""Group labels factorised into contiguous ids, and per-group (segment) statistics, vectorised over the batch.

Per-group values go back to samples with ``index_select`` (on a shared CPU ``values[group_ids]`` stalls for ms).
"""

from __future__ import annotations

import itertools
import operator
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


def label_array(index: Any) -> np.ndarray:
    """The labels as a 1-D numpy array; a list or tuple as its own objects (np.asarray makes [3, "3"] two "3")."""
    if isinstance(index, torch.Tensor):
        return index.detach().reshape(-1).cpu().numpy()
    if isinstance(index, np.ndarray):
        return index.reshape(-1)
    return np.fromiter(index, dtype=object)


def factorize_labels(labels: np.ndarray, device: torch.device) -> tuple[torch.Tensor, int]:
    """Each label's position among the N distinct labels, sorted: group_ids (B,) int64 on ``device``, and N.

    labels: (B,) numpy array. Labels equal in Python are one group (3, 3.0); labels that do not compare (3 and "3")
    or not equal to themselves (NaN) are an error. Python objects go through a dict (np.unique is several times slower).
    """
    if labels.dtype != object:
        _refuse_self_unequal(labels, np.arange(labels.shape[0]), labels)
        uniques, inverse = np.unique(labels, return_inverse=True)
        return torch.from_numpy(inverse.reshape(-1).astype(np.int64)).to(device), len(uniques)
    first_seen: defaultdict = defaultdict(itertools.count().__next__)
    try:
        seen_ids = np.fromiter(map(first_seen.__getitem__, labels), dtype=np.int64, count=labels.shape[0])
    except TypeError:
        bad = next(label for label in labels if _raises_type_error(hash, label))
        raise ValueError(f"group labels (index/uid) must be hashable: {bad!r} ({type(bad).__name__}) is not") from None
    seen = np.fromiter(first_seen, dtype=object, count=len(first_seen))
    # Only the N distinct labels are compared; a NaN's first row is the first row of its dict entry.
    _refuse_self_unequal(seen, seen_ids, labels)
    try:
        order = np.array(sorted(range(len(seen)), key=seen.__getitem__), dtype=np.int64)
    except TypeError:
        raise ValueError(_incomparable_labels(seen)) from None
    return torch.from_numpy(np.argsort(order)[seen_ids]).to(device), len(seen)


def _refuse_self_unequal(candidates: np.ndarray, positions: np.ndarray, labels: np.ndarray) -> None:
    """Raise ValueError naming the first row whose label is not equal to itself (NaN, NaT).

    candidates: (M,) the labels compared (every row's, or the distinct ones); positions: (B,) each row's in them.
    """
    unequal = np.asarray(candidates != candidates, dtype=bool)
    if not unequal.any():
        return
    rows = np.flatnonzero(unequal[positions])
    row = int(rows[0])
    label = labels[row]
    shown = str(label) if isinstance(label, np.generic) else repr(label)  # nan, NaT: no Python value shows them
    raise ValueError(
        f"group label (index/uid) {shown} at row {row} ({rows.shape[0]} row(s) in all) is not equal to itself, "
        "so it names no group: give every row a label that equals itself (a string or an integer id)"
    )


def _raises_type_error(call: Any, *args: Any) -> bool:
    """Whether call(*args) raises TypeError: a label that cannot be hashed, two that cannot be compared."""
    try:
        call(*args)
    except TypeError:
        return True
    return False


def _incomparable_labels(seen: np.ndarray) -> str:
    """The error for labels that cannot be ordered, naming two of them and their types."""
    by_type: dict = {}
    for label in seen:
        by_type.setdefault(type(label), label)
    samples = list(by_type.values())
    pairs = [(a, b) for i, a in enumerate(samples) for b in samples[i + 1:] if _raises_type_error(operator.lt, a, b)]
    if not pairs:
        return f"group labels (index/uid) of type {type(seen[0]).__name__} cannot be ordered, e.g. {seen[0]!r}"
    a, b = pairs[0]
    return (
        f"group labels (index/uid) mix {type(a).__name__} and {type(b).__name__}, e.g. {a!r} and {b!r}: "
        "give every label of a batch one type"
    )


def segment_sum(values: torch.Tensor, group_ids: torch.Tensor, num_groups: int) -> torch.Tensor:
    """sum_{i: g_i = j} v_i.  values: (B,), group_ids: (B,) -> (N,), dtype of values."""
    return torch.zeros(num_groups, dtype=values.dtype, device=values.device).index_add_(0, group_ids, values)


def segment_max(values: torch.Tensor, group_ids: torch.Tensor, num_groups: int, include: torch.Tensor) -> torch.Tensor:
    """max_{i: g_i = j, include_i} v_i; -inf for groups with nothing included.  (B,) -> (N,)."""
    out = torch.full((num_groups,), -torch.inf, dtype=values.dtype, device=values.device)
    masked = torch.where(include, values, torch.full_like(values, -torch.inf))
    return out.scatter_reduce_(0, group_ids, masked, reduce="amax", include_self=True)


@dataclass(frozen=True)
class GroupStats:
    """Statistics of the valid samples of each group, each (N,).

    In float64: count G_j; mean mu_{R_j}; sum_sq_dev sum_i (r_i - mu_{R_j})^2; std sigma_{R_j} with the chosen
    ddof; low, high the lowest and highest reward. In the scores' dtype: host_mean, host_std as verl's GRPO rounds
    them. Every value is 0 where G_j = 0 (low +inf, high -inf); std and host_std are 0 where G_j <= ddof.
    """

    count: torch.Tensor
    mean: torch.Tensor
    sum_sq_dev: torch.Tensor
    std: torch.Tensor
    low: torch.Tensor
    high: torch.Tensor
    host_mean: torch.Tensor
    host_std: torch.Tensor


def group_stats(
    scores: torch.Tensor, group_ids: torch.Tensor, num_groups: int, valid: torch.Tensor, ddof: int
) -> GroupStats:
    """Every group statistic in one float64 pass over the scores, centred on the host's own group mean.

    m_j = torch.mean(R_j) in the scores' dtype (:func:`host_group_reductions`); in float64, with
    d_i = r_i - m_j summed in batch order:
      S1_j = sum_i d_i, S2_j = sum_i d_i^2 (a sequential float64 sum, as torch.std sums them);
      mu_j = m_j + S1_j / G_j;  sum_sq_dev_j = S2_j - S1_j^2 / G_j  (the corrected two-pass formula);
      sigma_j = sqrt(sum_sq_dev_j / (G_j - ddof));  host std = fl(sqrt(S2_j / (G_j - ddof))), which is
      torch.std of a 1-D float32 CPU tensor bit for bit (float64: within one rounding, as torch fuses the
      multiply-add; bfloat16 and float16: torch's own row-wise std).
    A group of equal rewards whose host mean is their value has d = 0, so sigma_j = 0 exactly.
    scores: (B,) any float dtype; group_ids: (B,) int64; valid: (B,) bool; ddof: 1 (unbiased) or 0.
    """
    count = segment_sum(valid.to(torch.float64), group_ids, num_groups)
    host_mean, host_std, low, high = host_group_reductions(scores, group_ids, count, valid, ddof)
    pivot = host_mean.to(torch.float64)
    deviation = torch.where(valid, scores.to(torch.float64) - pivot.index_select(0, group_ids), 0.0)
    first = segment_sum(deviation, group_ids, num_groups)
    second = segment_sum(deviation * deviation, group_ids, num_groups)
    size = count.clamp(min=1)
    sum_sq_dev = (second - first * first / size).clamp(min=0.0)
    dof = (count - ddof).clamp(min=1)
    if host_std is None:
        host_std = torch.sqrt(second / dof).to(scores.dtype)
    host_std = torch.where(count > ddof, host_std, 0.0)
    std = torch.where(count > ddof, torch.sqrt(sum_sq_dev / dof), 0.0)
    return GroupStats(count, pivot + first / size, sum_sq_dev, std, low, high, host_mean, host_std)


def grouped_order(group_ids: torch.Tensor, valid: torch.Tensor, num_groups: int) -> torch.Tensor:
    """The rows (B,) int64 sorted stably by group id, invalid rows last: each group's rows in batch order.

    On CPU, under 2**15 groups, numpy's radix sort of int16 ids: ten times faster than torch's sort of 8,192 ids.
    """
    keys = torch.where(valid, group_ids, num_groups)
    if keys.device.type == "cpu" and num_groups < 2**15:
        return torch.from_numpy(np.argsort(keys.numpy().astype(np.int16), kind="stable"))
    return torch.argsort(keys, stable=True)


def host_group_reductions(
    scores: torch.Tensor, group_ids: torch.Tensor, count: torch.Tensor, valid: torch.Tensor, ddof: int
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """Per group: torch.mean of its scores, their lowest and highest value, and torch.std where it is not S2's.

    As verl's GRPO reduces each group's stacked scores (batch order): groups of equal size s are the rows of one
    (N_s, s) matrix (a loop over sizes, not groups), and a row's mean has the bits of the group's own. std is
    None for float32 and float64 (:func:`group_stats` takes it from S2), else torch's row-wise std.
    scores, group_ids, valid: (B,); count: (N,) G_j float64.
    Returns (mean (N,) in scores' dtype, std (N,) or None, low (N,) float64, high (N,) float64).
    """
    num_groups = count.shape[0]
    mean = torch.zeros(num_groups, dtype=scores.dtype, device=scores.device)
    low = torch.full((num_groups,), torch.inf, dtype=torch.float64, device=scores.device)
    high = torch.full((num_groups,), -torch.inf, dtype=torch.float64, device=scores.device)
    rowwise_std = scores.dtype not in (torch.float32, torch.float64)
    std = torch.zeros_like(mean) if rowwise_std else None
    sizes = count.to(torch.int64)
    order = grouped_order(group_ids, valid, num_groups)
    row_sizes = torch.where(valid, sizes.index_select(0, group_ids), 0).index_select(0, order)
    for size in sizes.unique().tolist():
        if size == 0:
            continue
        rows = order.index_select(0, (row_sizes == size).nonzero().squeeze(1))
        matrix = scores.index_select(0, rows).view(-1, size)
        ids = group_ids.index_select(0, rows[::size])
        mean.index_copy_(0, ids, matrix.mean(dim=1))
        # amin and amax: aminmax(dim=1) takes milliseconds on CPU for a (1024, 8) matrix.
        low.index_copy_(0, ids, matrix.amin(dim=1).to(torch.float64))
        high.index_copy_(0, ids, matrix.amax(dim=1).to(torch.float64))
        if rowwise_std and size > ddof:
            std.index_copy_(0, ids, matrix.std(dim=1, correction=ddof))
    return mean, std, low, high
