"""``--accuracy KEY``: each run's curve of a logged metric (e.g. verl's ``val-core/gsm8k/acc/mean@1``) against the
rollouts it spent, the rollouts each run took to reach the first run's final value, and, for runs labelled
``ARM@SEED`` (``grpo@1=...`` ``avspo@1=...``), the two arms compared seed by seed."""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np
from scipy import stats

from avspo_plugin.figures import signed

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
    values = dict(sorted(logged_values(scalars, key, source, (-math.inf, math.inf)).items()))
    samples = timeline.get("samples")
    spent = [None] * len(values)
    if samples is not None:  # the training steps' samples summed up to each step (0 before the first)
        done = np.searchsorted(timeline.steps, list(values), side="right")
        spent = [int(total) for total in np.concatenate([[0], np.cumsum(np.nan_to_num(samples))])[done]]
    points = [{"step": step, "accuracy": value, "rollouts": used} for (step, value), used in zip(values.items(), spent)]
    best = max(points, key=lambda point: point["accuracy"])
    return {"key": key, "points": points, "first": points[0], "final": points[-1], "best": best,
            "rollouts_known": samples is not None}


def compare_accuracy(labels: list[str], curves: list[dict[str, Any]]) -> dict[str, Any]:
    """Against the first run's final accuracy: the step and rollouts at which each run first reached it; runs labelled
    ARM@SEED are also compared seed by seed (paired_difference), whose answer replaces the caveat of one seed."""
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


# Between an arm's name and its seed in a run's label.
SEED_MARK = "@"
LEVEL = 0.95
# The power at which the smallest detectable difference is stated.
POWER = 0.8


def seed_pairs(labels: list[str]) -> tuple[str, str, list[str]] | None:
    """(reference arm, other arm, seeds both ran) when every label is ``ARM@SEED`` over two arms; None when no label
    carries a seed. A mix, a third arm, or a seed one arm lacks is an error naming it."""
    # 'avspo@3' -> ('avspo', '3'); None for a label without a seed
    parts = [(arm, seed) if mark and arm and seed else None
             for arm, mark, seed in (label.rpartition(SEED_MARK) for label in labels)]
    if all(part is None for part in parts):
        return None
    if any(part is None for part in parts):
        bare = [label for label, part in zip(labels, parts) if part is None]
        raise AnalyzeError(f"runs {', '.join(bare)} carry no seed while others do: label every run ARM{SEED_MARK}SEED "
                           f"(e.g. grpo{SEED_MARK}1=PATH) to pair them by seed, or none")
    arms = list(dict.fromkeys(arm for arm, _ in parts))
    if len(arms) != 2:
        raise AnalyzeError(f"runs labelled ARM{SEED_MARK}SEED name {len(arms)} arms ({', '.join(arms)}): a paired "
                           "comparison takes exactly two")
    seeds = {arm: [seed for name, seed in parts if name == arm] for arm in arms}
    for arm, own in seeds.items():
        repeated = sorted({seed for seed in own if own.count(seed) > 1})
        if repeated:
            raise AnalyzeError(f"arm {arm!r} has seed {repeated[0]} twice: one run per arm and seed")
    unpaired = sorted(set(seeds[arms[0]]) ^ set(seeds[arms[1]]))
    if unpaired:
        raise AnalyzeError(f"seed {unpaired[0]} was run by one arm only: each seed needs a run of "
                           f"{arms[0]!r} and of {arms[1]!r}")
    return arms[0], arms[1], seeds[arms[0]]


def paired_difference(labels: list[str], finals: list[float]) -> dict[str, Any] | None:
    """Per seed, the other arm's final value minus the reference arm's; pooled, their mean with a t-interval at
    LEVEL when there are two seeds or more, and the smallest difference that many seeds detect at POWER given the
    spread seen. None when the labels carry no seeds."""
    pairing = seed_pairs(labels)
    if pairing is None:
        return None
    reference, other, seeds = pairing
    final = dict(zip(labels, finals))
    per_seed = []
    for seed in seeds:
        base, arm = final[f"{reference}{SEED_MARK}{seed}"], final[f"{other}{SEED_MARK}{seed}"]
        per_seed.append({"seed": seed, reference: base, other: arm, "difference": arm - base})
    differences = [row["difference"] for row in per_seed]
    n = len(differences)
    mean = sum(differences) / n
    result: dict[str, Any] = {"reference": reference, "other": other, "seeds": n, "per_seed": per_seed,
                              "mean_difference": mean, "ahead_on": sum(d > 0 for d in differences),
                              "behind_on": sum(d < 0 for d in differences), "level": LEVEL, "interval": None,
                              "detectable": None}
    if n >= 2:
        error = statistics.stdev(differences) / math.sqrt(n)
        quantile = float(stats.t.ppf(1 - (1 - LEVEL) / 2, n - 1))
        result["interval"] = [mean - quantile * error, mean + quantile * error]
        result["detectable"] = (quantile + float(stats.t.ppf(POWER, n - 1))) * error
    result["answer"] = answer(result)
    return result


def answer(result: dict[str, Any]) -> str:
    """The comparison in plain words, at the strength its seeds carry."""
    reference, other, n = result["reference"], result["other"], result["seeds"]
    head = (f"{other} minus {reference}, final value: {signed(result['mean_difference'])} "
            f"({'on one seed' if n == 1 else f'mean of {n} seed pairs'}; {other} ahead on {result['ahead_on']} of "
            f"{n}, behind on {result['behind_on']})")
    if n == 1:
        return (f"{head}. One seed per arm cannot tell the method from the seed (data order, sampling): run "
                "SEEDS=3 or more for an interval.")
    low, high = result["interval"]
    level = f"{result['level']:.0%}"
    bounds = f"[{signed(low)}, {signed(high)}]"
    if low > 0 or high < 0:
        verdict = f"{other} {'ahead of' if low > 0 else 'behind'} {reference}: the {level} interval excludes 0"
    else:
        verdict = f"no difference shown: the {level} interval includes 0"
    return (f"{head}, {level} interval {bounds}: {verdict}. At this spread {n} seed pairs detect a "
            f"difference of about {result['detectable']:.3f} or more ({POWER:.0%} power); a smaller one would not "
            "show.")

