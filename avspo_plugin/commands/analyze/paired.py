"""The A/B's answer: two arms run with the same seeds (runs labelled ``ARM@SEED``, e.g. ``grpo@1=...``
``avspo@1=...``), compared seed by seed on ``--accuracy KEY``'s final value, pooled over the seeds, and what that
many seeds can and cannot tell."""

from __future__ import annotations

import math
from typing import Any

from scipy import stats

from avspo_plugin.figures import signed

from .run_logs import AnalyzeError

# Between an arm's name and its seed in a run's label.
SEED_MARK = "@"
LEVEL = 0.95
# The power at which the smallest detectable difference is stated.
POWER = 0.8


def split_label(label: str) -> tuple[str, str] | None:
    """'avspo@3' -> ('avspo', '3'); None for a label without a seed."""
    arm, mark, seed = label.rpartition(SEED_MARK)
    return (arm, seed) if mark and arm and seed else None


def seed_pairs(labels: list[str]) -> tuple[str, str, list[str]] | None:
    """(reference arm, other arm, seeds both ran) when every label is ``ARM@SEED`` over two arms; None when no label
    carries a seed. A mix, a third arm, or a seed one arm lacks is an error naming it."""
    parts = [split_label(label) for label in labels]
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
    per_seed = [{"seed": seed, reference: final[f"{reference}{SEED_MARK}{seed}"],
                 other: final[f"{other}{SEED_MARK}{seed}"],
                 "difference": final[f"{other}{SEED_MARK}{seed}"] - final[f"{reference}{SEED_MARK}{seed}"]}
                for seed in seeds]
    differences = [row["difference"] for row in per_seed]
    n = len(differences)
    mean = sum(differences) / n
    result: dict[str, Any] = {"reference": reference, "other": other, "seeds": n, "per_seed": per_seed,
                              "mean_difference": mean, "ahead_on": sum(d > 0 for d in differences),
                              "behind_on": sum(d < 0 for d in differences), "level": LEVEL, "interval": None,
                              "detectable": None}
    if n >= 2:
        sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))
        half = float(stats.t.ppf(1 - (1 - LEVEL) / 2, n - 1)) * sd / math.sqrt(n)
        result["interval"] = [mean - half, mean + half]
        result["detectable"] = float((stats.t.ppf(1 - (1 - LEVEL) / 2, n - 1) + stats.t.ppf(POWER, n - 1))
                                     * sd / math.sqrt(n))
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

