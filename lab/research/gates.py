"""The gates a base policy must pass before methods are compared on it: plain GRPO must clearly learn there.

They are computed from GRPO's runs on one base (several seeds) and the base's own evaluation, and were
written before any method was compared (issue 20). A base that fails any gate is reported and not used for
comparisons: ranking methods on a testbed where RL does not learn ranks them by how much they lose.

G1  ``grpo_gain``: held-out accuracy at the training temperature rises by at least GAIN_MEAN (paired mean
    over seeds); ``grpo_gain_per_seed``: by at least GAIN_PER_SEED on at least SEED_SHARE of the seeds.
G2  ``greedy_change``: held-out greedy accuracy does not fall (paired mean change >= 0).
G3  ``acr_first_half``: mean ACR over the first half of the steps lies in ACR_RANGE;
    ``both_regimes``: all-fail and all-pass groups are both present there (each at least REGIME_FLOOR of
    the groups on average); ``learnable_all_fail``: most all-fail groups come from tiers whose held-out
    accuracy rises under GRPO (by more than TIER_RISE), not only from a tier no run learns.
G4  ``clip_rate``: gradient clipping binds on at most CLIP_RATE of GRPO's updates.
G5  ``held_out_unseen``: no training prompt is a held-out problem.

Every gate is ``{"value": ..., "bound": ..., "passed": bool}`` (some carry a ``detail``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

GAIN_MEAN = 0.10
GAIN_PER_SEED = 0.05
SEED_SHARE = 0.8
ACR_RANGE = (0.2, 0.6)
REGIME_FLOOR = 0.05
TIER_RISE = 0.02  # a tier "rises under GRPO" when its paired mean gain exceeds this (two points)
LEARNABLE_SHARE = 0.5  # "most" all-fail groups
CLIP_RATE = 0.10
GATE_NAMES = ("grpo_gain", "grpo_gain_per_seed", "greedy_change", "acr_first_half", "both_regimes",
              "learnable_all_fail", "clip_rate", "held_out_unseen")


def first_half(series: Sequence[float]) -> list[float]:
    """The first half of a per-step series (the first ceil(n/2) steps)."""
    return list(series[: math.ceil(len(series) / 2)])


def gate(value: Any, bound: Any, passed: bool, **detail: Any) -> dict[str, Any]:
    entry = {"value": value, "bound": bound, "passed": bool(passed)}
    if detail:
        entry["detail"] = detail
    return entry


def tier_gains(base_eval: Mapping, runs: Sequence[Mapping]) -> dict[str, float]:
    """Per tier: the paired mean over runs of final minus base held-out accuracy (at the training temperature)."""
    return {tier: float(np.mean([run["evals"]["by_tier"][-1][tier] - before for run in runs]))
            for tier, before in base_eval["by_tier"].items()}


def all_fail_share_by_tier(runs: Sequence[Mapping], tiers: Sequence[str]) -> dict[str, float]:
    """Which tiers the all-fail groups of the first half come from: per tier, its share of them (sum 1, or all 0
    when there were none). Reads the per-step ``all_fail_tier<d>`` series (fraction of the step's groups that
    are all-fail and of tier d)."""
    counts = {t: float(sum(np.sum(first_half(run["steps"][f"all_fail_tier{t}"])) for run in runs)) for t in tiers}
    total = sum(counts.values())
    return {t: (c / total if total > 0 else 0.0) for t, c in counts.items()}


def grpo_gates(base_eval: Mapping, runs: Sequence[Mapping], grad_clip: float) -> dict[str, dict[str, Any]]:
    """The gates of one base, from its step-0 evaluation and GRPO's runs from it (one per seed).

    base_eval: the base's held-out evaluation (``accuracy``, ``greedy``, ``by_tier``) at the training temperature;
    runs: train() results (``evals`` with the final evaluation last, per-step ``steps``). grad_clip: the clip of
    those runs (a run's ``clip_bound`` series says how often it bound).
    """
    if not runs:
        raise ValueError("the gates need at least one GRPO run")
    gains = [run["evals"]["accuracy"][-1] - base_eval["accuracy"] for run in runs]
    greedy = [run["evals"]["greedy"][-1] - base_eval["greedy"] for run in runs]
    acr = float(np.mean([np.mean(first_half(run["steps"]["acr"])) for run in runs]))
    all_fail = float(np.mean([np.mean(first_half(run["steps"]["acr_all_fail"])) for run in runs]))
    all_pass = float(np.mean([np.mean(first_half(run["steps"]["acr_all_pass"])) for run in runs]))
    by_tier = tier_gains(base_eval, runs)
    rising = [t for t, g in by_tier.items() if g > TIER_RISE]
    shares = all_fail_share_by_tier(runs, list(by_tier))
    learnable = float(sum(shares[t] for t in rising))
    bound_steps = [b for run in runs for b in run["steps"]["clip_bound"] if b is not None]
    updated = [n for run in runs for n in run["steps"]["grad_norm"] if n is not None]
    clip_rate = float(np.mean(bound_steps)) if updated else 0.0
    held_out_drawn = int(sum(sum(run["steps"]["held_out_drawn"]) for run in runs))
    share = float(np.mean([g >= GAIN_PER_SEED for g in gains]))
    return {
        "grpo_gain": gate(float(np.mean(gains)), GAIN_MEAN, np.mean(gains) >= GAIN_MEAN, per_seed=gains),
        "grpo_gain_per_seed": gate(share, SEED_SHARE, share >= SEED_SHARE, least_gain=GAIN_PER_SEED),
        "greedy_change": gate(float(np.mean(greedy)), 0.0, np.mean(greedy) >= 0.0, per_seed=greedy),
        "acr_first_half": gate(acr, list(ACR_RANGE), ACR_RANGE[0] <= acr <= ACR_RANGE[1]),
        "both_regimes": gate(min(all_fail, all_pass), REGIME_FLOOR, min(all_fail, all_pass) >= REGIME_FLOOR,
                             all_fail=all_fail, all_pass=all_pass),
        # With no all-fail group at all there is nothing unlearnable in it; both_regimes fails such a base anyway.
        "learnable_all_fail": gate(learnable, LEARNABLE_SHARE, learnable > LEARNABLE_SHARE or sum(shares.values()) == 0,
                                   tier_gain=by_tier, rising_tiers=rising, all_fail_share=shares),
        "clip_rate": gate(clip_rate, CLIP_RATE, clip_rate <= CLIP_RATE, grad_clip=grad_clip),
        "held_out_unseen": gate(held_out_drawn, 0, held_out_drawn == 0),
    }


def passed(gates: Mapping[str, Mapping]) -> bool:
    """Whether a base passes every gate."""
    return all(g["passed"] for g in gates.values())


def failed(gates: Mapping[str, Mapping]) -> list[str]:
    return [name for name, g in gates.items() if not g["passed"]]
