"""How many virtual samples a collapsed group gets (Eq. 9) and their reward values (Eq. 10 and variants).

Every function works on all groups at once: K is a (N,) integer tensor, and the
virtual rewards of a call are packed, one value per virtual sample, group after group
(T = sum_j K_j values): group j's are values[o_j : o_j + K_j], o_j = K_1 + ... + K_{j-1}.
:func:`virtual_owners` and :func:`slot_numbers` give each packed value its group and its
k = 1..K_j, so memory is linear in the batch however unequal the groups (a (N, K_max) matrix
would hold N x K_max values for one huge group beside many small ones).
"""

from __future__ import annotations

import numpy as np
import torch

# Eq. 9 is evaluated in float64; a product within this of an integer is that integer, so that
# for instance 8 * 0.25**0.5 = 4.000000000000001 gives K = 4, not 5.
INTEGER_SNAP = 1e-9


def num_virtual_auto(group_size: torch.Tensor, acr: float, alpha: float) -> torch.Tensor:
    """Eq. 9: K_j = max(1, min(G_j, ceil(G_j * ACR_t ** alpha))).

    group_size: (N,) float64 G_j; acr: ACR_t in [0, 1]; alpha in (0, 1] -> (N,) int64.
    """
    product = group_size.to(torch.float64) * (acr**alpha)
    nearest = torch.round(product)
    product = torch.where((product - nearest).abs() <= INTEGER_SNAP, nearest, product)
    return torch.minimum(group_size.to(torch.float64), torch.ceil(product)).clamp(min=1).to(torch.int64)


def virtual_owners(num_virtual: torch.Tensor, total: int) -> torch.Tensor:
    """The group of each packed virtual sample t = 0..T-1: owner_t = #{j : e_j <= t}, e_j = K_1 + ... + K_j.

    num_virtual: (N,) int64 -> (T,) int64, group j repeated K_j times. total: T = sum_j K_j, known to the
    caller (given, the device needs no sync to size the result). A count of group ends and a cumulative
    sum: on a CPU shared with another process, repeat_interleave and searchsorted stall for about 10 ms
    in the thread pool.
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


def stratified_rewards(k: torch.Tensor, size: torch.Tensor, reward_low: float, reward_high: float) -> torch.Tensor:
    """Eq. 10 with r_max read as the highest achievable reward: r_vk = hi - (k-1)/K_j * (hi - lo).

    k: (T,) float64 slot numbers; size: (T,) float64 K_j of each sample's group -> (T,) float64.
    """
    return reward_high - (k - 1) / size * (reward_high - reward_low)


def stratified_observed_rewards(k: torch.Tensor, size: torch.Tensor, group_max: torch.Tensor) -> torch.Tensor:
    """Eq. 10 as printed, r_max = max(R_j): r_vk = max(R_j) * (1 - (k-1)/K_j).

    k, size: (T,) float64; group_max: (T,) float64 max(R_j) of each sample's group -> (T,) float64.
    """
    return group_max * (1 - (k - 1) / size)


def opposite_rewards(group_value: torch.Tensor, reward_low: float, reward_high: float) -> torch.Tensor:
    """The authors' released code: every r_vk is the bound farther from c_j (hi if c_j - lo <= hi - c_j, else lo).

    group_value: (T,) float64 c_j of each sample's group -> (T,) float64.
    """
    return torch.where(group_value - reward_low <= reward_high - group_value, reward_high, reward_low)


def uniform_rewards(
    total: int, reward_low: float, reward_high: float, seed: int, step: int, call_in_step: int = 0,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """r_vk ~ U[lo, hi], drawn from a generator seeded with (seed, step) so a resumed run draws the same values.

    call_in_step > 0 (a host that computes one step's advantages in several calls) joins the seed, so
    the calls of one step draw independent values. total: T -> (T,) float64 on ``device``, drawn on the CPU
    (the same values on every device).
    """
    entropy = [seed, step] if call_in_step == 0 else [seed, step, call_in_step]
    generator = torch.Generator().manual_seed(int(np.random.SeedSequence(entropy).generate_state(1)[0]))
    draws = torch.rand(total, generator=generator, dtype=torch.float64)
    return (reward_low + draws * (reward_high - reward_low)).to(device)


def fixed_partial_rewards(k: torch.Tensor, reward_low: float, reward_high: float, partial: float) -> torch.Tensor:
    """r_vk = lo + partial * (hi - lo) for every k.  k: (T,) float64 -> (T,) float64."""
    return torch.full_like(k, reward_low + partial * (reward_high - reward_low))


def exp_decay_rewards(k: torch.Tensor, reward_low: float, reward_high: float, decay: float) -> torch.Tensor:
    """r_vk = lo + (hi - lo) * decay ** (k-1).  k: (T,) float64 -> (T,) float64."""
    return reward_low + (reward_high - reward_low) * decay ** (k - 1)
