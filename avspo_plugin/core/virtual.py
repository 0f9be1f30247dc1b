"""How many virtual samples a collapsed group gets (Eq. 9) and their reward values (Eq. 10 and variants).

Every function works on all groups at once: K is a (N,) integer tensor, and the
virtual rewards of a call form a (N, K_max) matrix whose slots k > K_j are
masked out by :func:`virtual_slots`.
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


def virtual_slots(num_virtual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Slot numbers k = 1..K_max (1, K_max) float64 and the mask k <= K_j (N, K_max) bool."""
    k_max = int(num_virtual.max()) if num_virtual.numel() else 0
    k = torch.arange(1, k_max + 1, dtype=torch.float64, device=num_virtual.device).unsqueeze(0)
    return k, k <= num_virtual.unsqueeze(1)


def stratified_rewards(num_virtual: torch.Tensor, reward_low: float, reward_high: float) -> torch.Tensor:
    """Eq. 10 with r_max read as the highest achievable reward: r_vk = hi - (k-1)/K_j * (hi - lo).

    num_virtual: (N,) int64 K_j -> (N, K_max) float64.
    """
    k, _ = virtual_slots(num_virtual)
    return reward_high - (k - 1) / num_virtual.unsqueeze(1).to(torch.float64) * (reward_high - reward_low)


def stratified_observed_rewards(num_virtual: torch.Tensor, group_max: torch.Tensor) -> torch.Tensor:
    """Eq. 10 as printed, r_max = max(R_j): r_vk = max(R_j) * (1 - (k-1)/K_j).

    num_virtual: (N,) int64; group_max: (N,) float64 -> (N, K_max) float64.
    """
    k, _ = virtual_slots(num_virtual)
    return group_max.unsqueeze(1) * (1 - (k - 1) / num_virtual.unsqueeze(1).to(torch.float64))


def opposite_rewards(
    num_virtual: torch.Tensor, group_value: torch.Tensor, reward_low: float, reward_high: float
) -> torch.Tensor:
    """The authors' released code: every r_vk is the bound farther from c_j (hi if c_j - lo <= hi - c_j, else lo).

    num_virtual: (N,) int64; group_value: (N,) float64 c_j -> (N, K_max) float64.
    """
    k, _ = virtual_slots(num_virtual)
    far = torch.where(group_value - reward_low <= reward_high - group_value, reward_high, reward_low)
    return far.unsqueeze(1).expand(-1, k.shape[1])


def uniform_rewards(
    num_virtual: torch.Tensor, reward_low: float, reward_high: float, seed: int, step: int, call_in_step: int = 0
) -> torch.Tensor:
    """r_vk ~ U[lo, hi], drawn from a generator seeded with (seed, step) so a resumed run draws the same values.

    call_in_step > 0 (a host that computes one step's advantages in several calls) joins the seed, so
    the calls of one step draw independent values. num_virtual: (N,) int64 -> (N, K_max) float64.
    """
    k, _ = virtual_slots(num_virtual)
    entropy = [seed, step] if call_in_step == 0 else [seed, step, call_in_step]
    generator = torch.Generator().manual_seed(int(np.random.SeedSequence(entropy).generate_state(1)[0]))
    draws = torch.rand((num_virtual.shape[0], k.shape[1]), generator=generator, dtype=torch.float64)
    return (reward_low + draws * (reward_high - reward_low)).to(num_virtual.device)


def fixed_partial_rewards(num_virtual: torch.Tensor, reward_low: float, reward_high: float, partial: float) -> torch.Tensor:
    """r_vk = lo + partial * (hi - lo) for every k.  num_virtual: (N,) int64 -> (N, K_max) float64."""
    k, _ = virtual_slots(num_virtual)
    value = reward_low + partial * (reward_high - reward_low)
    return torch.full((num_virtual.shape[0], k.shape[1]), value, dtype=torch.float64, device=num_virtual.device)


def exp_decay_rewards(num_virtual: torch.Tensor, reward_low: float, reward_high: float, decay: float) -> torch.Tensor:
    """r_vk = lo + (hi - lo) * decay ** (k-1).  num_virtual: (N,) int64 -> (N, K_max) float64."""
    k, _ = virtual_slots(num_virtual)
    return (reward_low + (reward_high - reward_low) * decay ** (k - 1)).expand(num_virtual.shape[0], -1)
