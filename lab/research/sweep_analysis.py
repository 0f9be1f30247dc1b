"""The sweep's analysis, fixed before the sweep runs: does early ACR predict how a GRPO run ends, beyond what users
already log, on bases it was not fitted on?

Target: a run's final held-out gain, its final accuracy minus the base policy's, in points (%), both avg@k at the
evaluation temperature. Signals: the means over the first EARLY_FRACTION of a run's steps of the per-step series
STEP_SIGNALS, and the base policy's held-out accuracy (a fraction). Every function here is pure: arrays or
per-run records in, numbers out.

The runs of one base share its starting point, so they are not independent: out-of-sample fits hold whole bases
out, and intervals resample bases (:func:`base_multiplicities`), never runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from avspo_plugin.core.early_warnings import StreakWarning

from ..report import EARLY_FRACTION, Z975, window_mean

# The early window is the lab's "early ACR" window: the first EARLY_FRACTION (report.py, 0.2) of a run's steps.
# Per-step series whose early-window means are signals, then the base's accuracy.
STEP_SIGNALS = ("acr", "acr_all_fail", "acr_all_pass", "near_collapse_success", "near_collapse_failure", "reward",
                "entropy")
SIGNALS = (*STEP_SIGNALS, "base_accuracy")
# What a user already has: the early mean train reward and how good the base policy is.
BASELINE = ("reward", "base_accuracy")
# Each added to BASELINE alone: what collapse adds to it.
ADDED = ("acr", "acr_all_fail", "acr_all_pass", "near_collapse_success", "near_collapse_failure")
BOOTSTRAP_REPS = 2000
BOOTSTRAP_SEED = 29
# Leave-one-base-out fits each held-out base on the others: at least two of them, so three bases.
MIN_BASES = 3
# The paper's stagnation rule (the product's avspo/stagnation warning, AVSPOConfig's defaults): ACR above 0.35 for
# more than 50 consecutive steps.
STAGNATION_ACR = 0.35
STAGNATION_STEPS = 50


def early_signals(steps: Mapping[str, Sequence[float]], base_accuracy: float) -> dict[str, float]:
    """Every signal of one run: each STEP_SIGNALS series' mean over the first EARLY_FRACTION of its steps (the
    window of report.window_mean), and ``base_accuracy`` (the base policy's held-out accuracy, a fraction)."""
    missing = [name for name in STEP_SIGNALS if name not in steps]
    if missing:
        raise ValueError(f"the run records no per-step {', '.join(missing)}; the sweep reads {', '.join(STEP_SIGNALS)}")
    return {**{name: window_mean(steps[name], 0.0, EARLY_FRACTION) for name in STEP_SIGNALS},
            "base_accuracy": float(base_accuracy)}


def final_gain(evals: Mapping[str, Sequence[float]]) -> float:
    """Final held-out accuracy minus the base policy's, in points: 100 x (accuracy[-1] - accuracy[0]); a run's
    evaluation at step 0 is the base policy's, with the same problems and random numbers as every run from it."""
    accuracy = evals["accuracy"]
    return 100.0 * (float(accuracy[-1]) - float(accuracy[0]))


def stagnation(acr: Sequence[float]) -> dict[str, Any]:
    """The paper's stagnation rule on one run's per-step ACR, decided by the core's StreakWarning (what a live run
    logs as avspo/stagnation): ``fired`` when ACR > STAGNATION_ACR on more than STAGNATION_STEPS consecutive steps,
    ``fired_at_step`` (1-based; None when it did not fire) and ``longest_streak`` (steps)."""
    warning = StreakWarning("stagnation", STAGNATION_ACR, STAGNATION_STEPS, above=True)
    longest = 0
    for step, value in enumerate(acr, start=1):
        warning.observe(float(value), step)
        longest = max(longest, warning.streak)
    return {"fired": warning.fired_step is not None, "fired_at_step": warning.fired_step, "longest_streak": longest}


def r2_in_sample(features: np.ndarray, target: np.ndarray) -> float | None:
    """R^2 of the least-squares fit of target (n,) on an intercept and features (n, k), on the same runs; None when
    the target does not vary."""
    design = np.column_stack([np.ones(target.size), features])
    residual = target - design @ np.linalg.lstsq(design, target, rcond=None)[0]
    ss_tot = float(np.sum((target - target.mean()) ** 2))
    return float(1.0 - residual @ residual / ss_tot) if ss_tot > 0 else None


def base_multiplicities(bases: int, reps: int, seed: int) -> np.ndarray:
    """(reps, bases): how often each base is drawn when ``bases`` bases are drawn with replacement, ``reps`` times,
    by numpy's default_rng(seed). A run counts as many times as its base is drawn."""
    return np.random.default_rng(seed).multinomial(bases, np.full(bases, 1.0 / bases), size=reps).astype(np.float64)


def lobo_predictions(features: np.ndarray, target: np.ndarray, base_index: np.ndarray) -> np.ndarray:
    """Leave-one-base-out predictions (n,): each run's target predicted by least squares on an intercept and
    features (n, k), fitted on the runs of every other base (base_index (n,)), never on its own base's."""
    design = np.column_stack([np.ones(target.size), features])
    predicted = np.empty_like(target)
    for base in np.unique(base_index):
        held_out = base_index == base
        coef = np.linalg.lstsq(design[~held_out], target[~held_out], rcond=None)[0]
        predicted[held_out] = design[held_out] @ coef
    return predicted


def weighted_r2(target: np.ndarray, predicted: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """1 - SSE / SS_tot for each row of weights (R, n): the weighted squared errors of ``predicted`` over the weighted
    squares of ``target`` around its weighted mean. Returns (R,); NaN where the weighted target does not vary."""
    mean = weights @ target / weights.sum(axis=1)
    ss_tot = np.sum(weights * (target - mean[:, None]) ** 2, axis=1)
    sse = weights @ (target - predicted) ** 2
    return np.where(ss_tot > 0, 1.0 - sse / np.where(ss_tot > 0, ss_tot, 1.0), np.nan)


def percentile_interval(values: np.ndarray) -> list[float] | None:
    """The 2.5th and 97.5th percentiles of the finite values (None when there are none)."""
    finite = values[np.isfinite(values)]
    return [float(v) for v in np.percentile(finite, [2.5, 97.5])] if finite.size else None


def _columns(points: Sequence[Mapping], names: Sequence[str]) -> np.ndarray:
    return np.array([[p["signals"][name] for name in names] for p in points], dtype=np.float64).reshape(len(points), -1)


def _indices(labels: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Distinct labels in order of first appearance, and each label's index among them."""
    distinct = list(dict.fromkeys(labels))
    position = {label: i for i, label in enumerate(distinct)}
    return distinct, np.array([position[label] for label in labels], dtype=np.int64)


def prediction_table(points: Sequence[Mapping], reps: int = BOOTSTRAP_REPS, seed: int = BOOTSTRAP_SEED) -> dict:
    """What predicts the final gain: in-sample and leave-one-base-out R^2 of every signal alone, of BASELINE, and of
    BASELINE plus each of ADDED, with the gain in out-of-sample R^2 that each ADDED signal brings.

    points: per run, ``base``, ``signals`` (SIGNALS) and ``final_gain``. Out of sample (OOS): every run predicted by
    the fit on the other bases' runs (:func:`lobo_predictions`); OOS R^2 = 1 - SSE / SS_tot around the mean of all
    runs' gains. Intervals: ``reps`` bootstrap resamples of the bases (:func:`base_multiplicities`, seed ``seed``),
    each run weighted by how often its base was drawn, R^2 recomputed from the same held-out predictions; the 95%
    interval is the 2.5th to 97.5th percentile, and a gain's is that of the paired differences (both models on the
    same resamples). The predictions are not refitted per resample: a resample that draws a base twice would have
    to hold both copies out and fit on fewer distinct bases than the sweep has, which biases R^2 down, most for the
    base-level signal (base accuracy) with six bases. So the intervals say which bases happened to be in the sweep,
    not how the fits themselves vary.
    """
    names, base_index = _indices([p["base"] for p in points])
    if len(names) < MIN_BASES:
        raise ValueError(f"leave-one-base-out needs at least {MIN_BASES} bases; the runs have {len(names)}: "
                         f"{', '.join(names)}")
    target = np.array([p["final_gain"] for p in points], dtype=np.float64)
    # Row 0: the runs as they are; then one row per resample.
    weights = np.vstack([np.ones((1, len(names))), base_multiplicities(len(names), reps, seed)])[:, base_index]

    def oos(signals: Sequence[str]) -> np.ndarray:
        return weighted_r2(target, lobo_predictions(_columns(points, signals), target, base_index), weights)

    def estimate(values: np.ndarray) -> dict[str, Any]:
        """The runs' value (None when undefined: the gains do not vary) and the resamples' interval."""
        return {"value": float(values[0]) if np.isfinite(values[0]) else None, "ci95": percentile_interval(values[1:])}

    alone = {name: {"in_sample_r2": r2_in_sample(_columns(points, [name]), target), "oos_r2": estimate(oos([name]))}
             for name in SIGNALS}
    baseline = oos(BASELINE)
    added = {}
    for name in ADDED:
        with_signal = oos([*BASELINE, name])
        added[name] = {"oos_r2": estimate(with_signal), "gain": estimate(with_signal - baseline),
                       "in_sample_r2": r2_in_sample(_columns(points, [*BASELINE, name]), target)}
    return {
        "runs": len(points), "bases": names,
        "bootstrap": {"reps": reps, "seed": seed, "resampled": "bases"},
        "alone": alone,
        "baseline": {"signals": list(BASELINE), "oos_r2": estimate(baseline),
                     "in_sample_r2": r2_in_sample(_columns(points, BASELINE), target)},
        "added": added,
    }


def correlation_interval(r: float, n: int, covariates: int = 0) -> list[float] | None:
    """95% interval of a (partial) correlation by Fisher's z: tanh(atanh(r) +- 1.96 / sqrt(n - 3 - k)), k the
    covariates it is partialled on (n - 2 - k degrees of freedom). None when n - 3 - k < 1."""
    if n - 3 - covariates < 1:
        return None
    if abs(r) >= 1.0:
        return [float(r), float(r)]
    half = Z975 / math.sqrt(n - 3 - covariates)
    z = math.atanh(r)
    return [math.tanh(z - half), math.tanh(z + half)]


def within_configuration_correlation(x: np.ndarray, y: np.ndarray, configuration_index: np.ndarray) -> dict[str, Any]:
    """Pearson r of x and y across seeds of the same configuration: each run's deviation from its configuration's
    mean, pooled over configurations (the configuration's settings, which move both, are taken out).

    x, y, configuration_index: (n,). Its interval is Fisher's with the configurations' means as covariates
    (k = configurations - 1). r is None where a deviation series is all zero (one seed, or nothing varies)."""
    counts = np.bincount(configuration_index)
    dx = x - (np.bincount(configuration_index, x) / counts)[configuration_index]
    dy = y - (np.bincount(configuration_index, y) / counts)[configuration_index]
    scale = math.sqrt(float(dx @ dx) * float(dy @ dy))
    r = float(dx @ dy) / scale if scale > 0 else None
    return {"r": r, "runs": int(x.size), "configurations": int(counts.size),
            "ci95": None if r is None else correlation_interval(r, x.size, counts.size - 1)}


def seed_correlations(points: Sequence[Mapping]) -> dict[str, dict]:
    """:func:`within_configuration_correlation` of every STEP_SIGNALS signal with the final gain (the base's
    accuracy is one value per configuration: nothing varies across seeds)."""
    _, configuration_index = _indices([p["configuration"] for p in points])
    gain = np.array([p["final_gain"] for p in points], dtype=np.float64)
    return {name: within_configuration_correlation(_columns(points, [name])[:, 0], gain, configuration_index)
            for name in STEP_SIGNALS}


def _weighted_mean(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    total = weights.sum(axis=1)
    return np.where(total > 0, (weights @ values) / np.where(total > 0, total, 1.0), np.nan)


def stagnation_comparison(points: Sequence[Mapping], reps: int = BOOTSTRAP_REPS, seed: int = BOOTSTRAP_SEED) -> dict:
    """How often the stagnation rule fired (points' ``stagnation.fired``), and the mean final gain of runs where it
    fired and where it did not, with their difference (fired minus not) and its 95% interval: the 2.5th to 97.5th
    percentile over ``reps`` bootstrap resamples of the bases (:func:`base_multiplicities`, seed ``seed``), a
    resample without a run on either side left out (``kept`` says how many remained). Means are None on an empty side."""
    names, base_index = _indices([p["base"] for p in points])
    fired = np.array([p["stagnation"]["fired"] for p in points], dtype=bool)
    gain = np.array([p["final_gain"] for p in points], dtype=np.float64)
    weights = np.vstack([np.ones((1, len(names))), base_multiplicities(len(names), reps, seed)])[:, base_index]
    with_rule, without = _weighted_mean(weights * fired, gain), _weighted_mean(weights * ~fired, gain)
    difference = with_rule - without

    def value(values: np.ndarray) -> float | None:
        return None if np.isnan(values[0]) else float(values[0])

    return {"rule": {"acr_above": STAGNATION_ACR, "more_than_steps": STAGNATION_STEPS},
            "fired": int(fired.sum()), "runs": int(fired.size), "share": float(fired.mean()),
            "bases_fired": sorted({names[i] for i in base_index[fired]}),
            "gain_fired": value(with_rule), "gain_not_fired": value(without), "difference": value(difference),
            "ci95": percentile_interval(difference[1:]), "kept": int(np.isfinite(difference[1:]).sum()), "reps": reps}


def analyse(points: Sequence[Mapping], reps: int = BOOTSTRAP_REPS, seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """The whole analysis of a sweep's runs (points: per run ``base``, ``configuration``, ``signals``,
    ``final_gain``, ``stagnation``): :func:`prediction_table`, :func:`seed_correlations`,
    :func:`stagnation_comparison`."""
    return {"prediction": prediction_table(points, reps, seed), "seeds": seed_correlations(points),
            "stagnation": stagnation_comparison(points, reps, seed)}
