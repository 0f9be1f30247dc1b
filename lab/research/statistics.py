"""The statistics of the lab's study and tuning: paired t-tests, Holm's correction, the minimum detectable
effect, and how many pairs a comparison needs for a given one."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

ALPHA = 0.05
POWER = 0.8


def paired_test(differences: Sequence[float]) -> dict[str, Any]:
    """Paired t-test of mean difference 0: mean, 95% interval, p, sd, and the minimum detectable effect at 80% power
    at alpha = 0.05 (``mde``) and at the strictest Holm level of the family (``mde_holm``, filled by :func:`holm`)."""
    d = np.asarray(differences, dtype=np.float64)
    n = d.size
    if n < 2:
        raise ValueError(f"a paired test needs at least 2 differences, got {n}")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    p = float(2 * stats.t.sf(abs(mean) / se, n - 1)) if se > 0 else (0.0 if mean != 0 else 1.0)
    return {"mean": mean, "ci95": t_interval(mean, sd, n), "p": p, "sd": sd, "n": n,
            "mde": minimum_detectable_effect(sd, n, ALPHA)}


def t_interval(mean: float, sd: float, n: int, alpha: float = ALPHA) -> list[float]:
    """The two-sided t-interval of a mean at level 1 - ``alpha``: mean -+ t_{1-alpha/2, n-1} sd / sqrt(n)."""
    half = float(stats.t.ppf(1 - alpha / 2, n - 1)) * sd / math.sqrt(n)
    return [mean - half, mean + half]


def minimum_detectable_effect(sd: float, n: int, alpha: float = ALPHA) -> float:
    """Smallest true paired mean difference a two-sided paired t-test at ``alpha`` detects with POWER:
    (t_{1-alpha/2, n-1} + t_{POWER, n-1}) * sd / sqrt(n)."""
    return float((stats.t.ppf(1 - alpha / 2, n - 1) + stats.t.ppf(POWER, n - 1)) * sd / math.sqrt(n))


def pairs_for_mde(sd: float, target: float, alpha: float = ALPHA, most: int = 10_000) -> int:
    """The fewest pairs n >= 2 whose MDE at ``alpha`` and POWER is at most ``target``, for paired differences of
    standard deviation ``sd``."""
    if target <= 0:
        raise ValueError(f"target MDE {target} must be > 0")
    for n in range(2, most + 1):
        if minimum_detectable_effect(sd, n, alpha) <= target:
            return n
    raise ValueError(f"no n <= {most} reaches an MDE of {target} with sd {sd}")


def holm(tests: dict[str, dict]) -> None:
    """Holm's step-down correction over a family of tests, in place: ``p_holm`` and ``significant`` (at ALPHA),
    and ``mde_holm``, the MDE at the strictest level Holm applies (ALPHA / family size)."""
    ordered = sorted(tests, key=lambda name: tests[name]["p"])
    m = len(ordered)
    running = 0.0
    for rank, name in enumerate(ordered):
        running = max(running, min(1.0, (m - rank) * tests[name]["p"]))
        tests[name]["p_holm"] = running
        tests[name]["significant"] = running < ALPHA
        tests[name]["mde_holm"] = minimum_detectable_effect(tests[name]["sd"], tests[name]["n"], ALPHA / m)


def mean_interval(values: Sequence[float]) -> float | None:
    """Half-width of the 95% t-interval of the mean (None below 3 values)."""
    v = np.asarray(values, dtype=np.float64)
    return float(stats.t.ppf(1 - ALPHA / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)) if v.size >= 3 else None


def two_look_error_rate(first_n: int, first_alpha: float, second_n: int, second_alpha: float,
                        draws: int = 100_000, seed: int = 56) -> dict[str, Any]:
    """How often a study with no true difference rejects when it reads a paired t-test at ``first_n`` pairs at level
    ``first_alpha`` and, not having rejected, adds pairs and reads again at ``second_n`` (the first pairs among them)
    at ``second_alpha``: ``draws`` simulated studies of standard normal paired differences, seeded by ``seed``.
    ``two_sided``: a rejection either way at either look; ``harm``: one with a negative mean (against the nominal
    ``first_alpha / 2`` of one two-sided test, ``nominal_harm``)."""
    if not 2 <= first_n < second_n:
        raise ValueError(f"looks at {first_n} then {second_n} pairs: need 2 <= first < second")
    d = np.random.default_rng(seed).standard_normal((draws, second_n))

    def rejects(x: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
        n = x.shape[1]
        mean = x.mean(axis=1)
        t = mean / (x.std(axis=1, ddof=1) / math.sqrt(n))
        return np.abs(t) > stats.t.ppf(1 - alpha / 2, n - 1), mean < 0

    first, first_negative = rejects(d[:, :first_n], first_alpha)
    second, second_negative = rejects(d, second_alpha)
    either = first | (~first & second)
    harm = (first & first_negative) | (~first & second & second_negative)
    return {"two_sided": float(either.mean()), "harm": float(harm.mean()), "nominal_harm": first_alpha / 2,
            "first_n": first_n, "first_alpha": first_alpha, "second_n": second_n, "second_alpha": second_alpha,
            "draws": draws, "seed": seed}
