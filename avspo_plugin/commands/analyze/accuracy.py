"""Accuracy curves of runs compared on one logged metric (``--accuracy KEY``, e.g. verl's
``val-core/gsm8k/acc/mean@1``), against the rollouts each run had spent, and the rollouts each run took to reach the
reference run's final accuracy (the first run given: the A/B recipe's GRPO arm)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .paired import paired_difference
from .run_logs import AnalyzeError, ScalarLog
from .timeline import Timeline, logged_values

# What one comparison of single runs cannot tell, said wherever the comparison is.
ONE_SEED_CAVEAT = (
    "Each run is one seed: a difference between two runs of one seed each can be the seeds' (data order, sampling) "
    "and not the method's. Repeat both with other seeds (data.seed, actor_rollout_ref.rollout.seed) before reading "
    "a difference as an effect; validation accuracy of a few hundred problems also moves by a few points between "
    "checkpoints of the same run."
)


def accuracy_curve(scalars: ScalarLog | None, key: str, timeline: Timeline, source: str) -> dict[str, Any]:
    """KEY at every step the run logged it, with the rollouts spent by then (the run's ``avspo/samples`` summed over
    its training steps up to that step; none before the first). A NaN before the last value is left out with a
    warning in the run's warnings; a last value that is NaN or infinite, or an infinite one anywhere, is an
    AnalyzeError naming the file, line, step and key."""
    if scalars is None:
        raise AnalyzeError(f"{source}: --accuracy {key} reads a logged metric, and this run is a rollout dump: give "
                           "its tracker log (verl's file logger .jsonl, TensorBoard or wandb)")
    infinite = scalars.infinite.get(key, {})
    logged = {step: row[key] for step, row in scalars.values.items() if key in row} | infinite
    if not logged:
        similar = sorted(name for name in scalars.keys() if name.startswith(key.split("/")[0] + "/") and name != key)
        raise AnalyzeError(f"{source}: no value of --accuracy {key!r} in this log"
                           + (f"; keys of that kind here: {', '.join(similar[:8])}" if similar else ""))
    # The final is the last value logged: a NaN or infinite one is no accuracy to compare, and the step before is
    # not this run's final; an infinite one anywhere is no accuracy at all.
    last = max(logged)
    if not math.isfinite(logged[last]) or infinite:
        step = last if not math.isfinite(logged[last]) else min(infinite)
        what = "the run's last value of it, its final" if step == last else "an accuracy is a finite number"
        raise AnalyzeError(f"{scalars.where.get(step, source)}: --accuracy {key!r} is {logged[step]!r} at step {step} "
                           f"({what}): this run has no final accuracy to compare; give a log whose last value of "
                           f"{key} is a number")
    # NaN values before the last are left out, each named in the run's warnings (and on stderr).
    values = dict(sorted(logged_values(scalars, key, source, (-math.inf, math.inf)).items()))
    samples = timeline.get("samples")
    rollouts = None if samples is None else np.cumsum(np.nan_to_num(samples))
    points = []
    for step, value in values.items():
        spent = None
        if rollouts is not None:
            done = np.searchsorted(timeline.steps, step, side="right")
            spent = int(rollouts[done - 1]) if done else 0
        points.append({"step": step, "accuracy": value, "rollouts": spent})
    best = max(points, key=lambda point: point["accuracy"])
    return {"key": key, "points": points, "first": points[0], "final": points[-1], "best": best,
            "rollouts_known": rollouts is not None}


def compare_accuracy(labels: list[str], curves: list[dict[str, Any]]) -> dict[str, Any]:
    """Against the first run's final accuracy: the step and rollouts at which each run first reached it; runs labelled
    ARM@SEED are also compared seed by seed (paired.py), whose answer replaces the caveat of one seed."""
    reference = curves[0]["final"]
    runs = []
    for label, curve in zip(labels, curves):
        reached = next((point for point in curve["points"] if point["accuracy"] >= reference["accuracy"]), None)
        runs.append({
            "label": label, "first": curve["first"], "final": curve["final"], "best": curve["best"],
            "reached_at_step": None if reached is None else reached["step"],
            "rollouts_to_reference_final": None if reached is None else reached["rollouts"],
        })
    paired = paired_difference(labels, [curve["final"]["accuracy"] for curve in curves])
    return {"key": curves[0]["key"], "reference": labels[0], "reference_final": reference, "runs": runs,
            "paired": paired, "caveat": ONE_SEED_CAVEAT if paired is None else paired["answer"]}
