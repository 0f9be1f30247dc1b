"""The lab sweep's side of the pre-registered forecast analysis (lab/research/forecast_models.py): its runs as
the models read them, the verdict's words for its baseline, and the stagnation rule's within-cells comparison."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .forecast_models import (
    ADDS,
    CANNOT_TELL,
    DETECTION_POWER,
    MIN_GAIN,
    NOT_SHOWN,
    REPS,
    SEED,
    SIGNAL_TERMS,
    RunTable,
    cluster_weights,
    encode_settings,
    estimate,
    group_index,
)

# The baseline of the lab's sweep in words, as a verdict on it is quoted.
BASELINE_WORDS = "the run's settings + early reward + base accuracy"
VERDICT_MEANINGS = (f"{ADDS} (the rule is met); {NOT_SHOWN}, with the smallest gain the test would have detected "
                    f"({DETECTION_POWER:.0%} of the time, from its interval's spread, and at least {MIN_GAIN}); "
                    f"{CANNOT_TELL}, when in some scheme the interval is too wide to say anything: the smallest gain its "
                    "spread would detect exceeds what out-of-sample R^2 can still rise above the baseline's (it is at "
                    "most 1), or the gain is undefined; such a design could not have passed its own rule")


def table_from_points(points: Sequence[Mapping]) -> RunTable:
    """The lab sweep's runs (sweep.json ``points``): target the final gain, settings lr, G and tier mix, every
    SIGNAL_TERMS signal, both schemes (a setting = lr x G x mix), clusters the bases."""
    settings, names = encode_settings([{"lr": p["lr"], "group_size": p["group_size"], "mix": p["mix"]}
                                       for p in points])
    return RunTable(
        target=np.array([p["final_gain"] for p in points], dtype=np.float64),
        settings=settings, setting_names=names,
        signals={term: np.array([p["signals"][term] for p in points], dtype=np.float64) for term in SIGNAL_TERMS},
        folds={"leave_one_base_out": group_index([p["base"] for p in points]),
               "leave_one_setting_out": group_index([(p["lr"], p["group_size"], p["mix"]) for p in points])},
        cluster=group_index([p["base"] for p in points]),
    )


def within_cells_difference(outcome: np.ndarray, flag: np.ndarray, cell: np.ndarray, cluster: np.ndarray,
                            reps: int = REPS, seed: int = SEED) -> dict[str, Any]:
    """Mean outcome where ``flag`` holds minus where it does not, compared within cells (cell: (n,) int, e.g. lr x base)
    and pooled over the cells that hold runs on both sides, each weighted n1 n0 / (n1 + n0) (Mantel-Haenszel's weight
    for a difference). Interval: the 2.5th-97.5th percentile over ``reps`` resamples of the clusters (refitted: cells
    and weights recomputed on each), a resample without a cell holding both sides left out. Also the crude difference
    (no cells), for comparison."""
    weights = cluster_weights(cluster, reps, seed)
    onehot = (cell[:, None] == np.arange(int(cell.max()) + 1)[None, :]).astype(np.float64)
    fired, other = weights * flag, weights * ~flag
    n1, n0 = fired @ onehot, other @ onehot
    both = (n1 > 0) & (n0 > 0)
    mean1 = (fired * outcome) @ onehot / np.where(n1 > 0, n1, 1.0)
    mean0 = (other * outcome) @ onehot / np.where(n0 > 0, n0, 1.0)
    w = np.where(both, n1 * n0 / np.where(both, n1 + n0, 1.0), 0.0)
    total = w.sum(axis=1)
    pooled = np.where(total > 0, np.sum(w * (mean1 - mean0), axis=1) / np.where(total > 0, total, 1.0), np.nan)
    crude = fired @ outcome / fired.sum(axis=1) - other @ outcome / other.sum(axis=1)
    kept = np.isfinite(pooled)
    return {"within_cells": estimate(pooled, kept), "crude": estimate(crude, np.isfinite(crude)),
            "cells": int(onehot.shape[1]), "cells_with_both": int(both[0].sum()), "kept": int(kept[1:].sum()),
            "reps": reps, "seed": seed}


def stagnation_within_cells(points: Sequence[Mapping], reps: int = REPS, seed: int = SEED) -> dict[str, Any]:
    """The stagnation rule's runs (points' ``stagnation.fired``) against the others, final gain compared within
    lr x base cells (:func:`within_cells_difference`, clusters the bases), and how often it fired at each lr."""
    fired = np.array([p["stagnation"]["fired"] for p in points], dtype=bool)
    lrs = sorted({p["lr"] for p in points})
    return {
        "cells_by": "lr x base",
        **within_cells_difference(np.array([p["final_gain"] for p in points], dtype=np.float64), fired,
                                  group_index([(p["lr"], p["base"]) for p in points]),
                                  group_index([p["base"] for p in points]), reps, seed),
        "fired_by_lr": [{"lr": lr, "fired": int(sum(f for f, p in zip(fired, points) if p["lr"] == lr)),
                         "runs": sum(p["lr"] == lr for p in points)} for lr in lrs],
    }
