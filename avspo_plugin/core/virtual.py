"""How many virtual samples a collapsed group gets (Eq. 9), and where each packed virtual sample sits.

A call's T = sum_j K_j virtual rewards are packed group after group: group j's are values[o_j : o_j + K_j],
o_j = K_1 + ... + K_{j-1}, so memory is linear in the batch however unequal the groups.
"""

from __future__ import annotations

import torch

from ..config import AVSPOConfig

# Eq. 9 is evaluated in float64; a product within this of an integer is that integer, so that
# for instance 8 * 0.25**0.5 = 4.000000000000001 gives K = 4, not 5.
INTEGER_SNAP = 1e-9


def num_virtual_samples(
    config: AVSPOConfig, group_size: torch.Tensor, acr: float, augmented: torch.Tensor
) -> torch.Tensor:
    """Eq. 9: K_j = max(1, min(G_j, ceil(G_j * ACR_t ** alpha))) for an augmented group (or num_virtual given as a
    number), K_j = 0 for any other.  group_size: (N,) float64 G_j; augmented: (N,) bool -> (N,) int64.
    """
    if config.num_virtual != "auto":
        return torch.full_like(group_size, config.num_virtual, dtype=torch.int64) * augmented
    product = group_size * (acr**config.alpha)
    nearest = torch.round(product)
    product = torch.where((product - nearest).abs() <= INTEGER_SNAP, nearest, product)
    return torch.minimum(group_size, torch.ceil(product)).clamp(min=1).to(torch.int64) * augmented


def virtual_owners(num_virtual: torch.Tensor, total: int) -> torch.Tensor:
    """The group of each packed virtual sample t = 0..T-1: owner_t = #{j : e_j <= t}, e_j = K_1 + ... + K_j.

    num_virtual: (N,) int64 -> (T,) int64, group j repeated K_j times; total: T, given so that sizing the result
    needs no device sync. (repeat_interleave and searchsorted stall for ~10 ms on a shared CPU.)
    """
    ends = torch.cumsum(num_virtual, 0)
    marks = torch.zeros(total + 1, dtype=torch.int64, device=num_virtual.device)
    marks.index_add_(0, ends, torch.ones_like(ends))
    return torch.cumsum(marks[:total], 0)


def slot_numbers(num_virtual: torch.Tensor, owners: torch.Tensor) -> torch.Tensor:
    """k = 1..K_j of each packed virtual sample within its group.  (N,) int64, owners (T,) -> (T,) float64."""
    starts = torch.cumsum(num_virtual, 0) - num_virtual
    position = torch.arange(owners.shape[0], device=owners.device) - starts.index_select(0, owners)
    return (position + 1).to(torch.float64)
