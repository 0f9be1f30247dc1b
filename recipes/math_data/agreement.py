"""How often the math reward and verl's built-in math scorers agree with hand-given labels.

    python -m recipes.math_data.agreement tests/recipes/fixtures/reward_pairs.yaml
    python -m recipes.math_data.agreement PAIRS.yaml --timing --write-docs docs/using/recipes.md

A pairs file is YAML: a list of ``{category, response, reference, expected}`` items (``expected``:
whether a careful grader counts the response correct), with optional ``note``, ``known_miss``
(scorer name -> why that scorer of this package is known to disagree) and ``long_prefix`` (that
many characters of step-by-step filler text put before ``response``, for very long outputs).

The scorers: this package's reward under its training rule and under the paper's evaluation rule,
and verl's ``math_verify``, ``math_reward`` (Hendrycks MATH) and ``math_dapo`` (Minerva
"Answer:" or a strict box) scorers, each called as verl calls it with the reference as stored in
the data (verl must be installed for those three). The agreement table counts, per category, the
pairs where a scorer's verdict equals the label; ``--timing`` adds the time per sample.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from avspo_plugin.extras import extra_imports

PROG = "python -m recipes.math_data.agreement"

with extra_imports(__name__, PROG, "verl,math"):
    import yaml
    from verl.utils.reward_score import math_dapo, math_reward, math_verify

    from avspo_plugin.math_reward.answer import EVALUATION_SOURCES, TRAINING_SOURCES
    from avspo_plugin.math_reward.reward import score_answer

OURS_TRAINING = "avspo (training rule)"
OURS_EVALUATION = "avspo (evaluation rule)"
VERL_MATH_VERIFY = "verl math_verify"
VERL_MATH = "verl math_reward"
VERL_MATH_DAPO = "verl math_dapo"
OURS = (OURS_TRAINING, OURS_EVALUATION)
SCORER_NAMES = (OURS_TRAINING, OURS_EVALUATION, VERL_MATH_VERIFY, VERL_MATH, VERL_MATH_DAPO)

TABLE_START = "<!-- reward-agreement:start (python -m recipes.math_data.agreement --write-docs) -->"
TABLE_END = "<!-- reward-agreement:end -->"
TIMING_START = "<!-- reward-timing:start (python -m recipes.math_data.agreement --timing --write-docs) -->"
TIMING_END = "<!-- reward-timing:end -->"


@dataclass(frozen=True)
class LabelledPair:
    category: str
    response: str
    reference: str
    expected: bool
    note: str = ""
    known_miss: dict[str, str] = field(default_factory=dict)


def filler(length: int) -> str:
    """At least ``length`` characters (whole lines) of plausible step-by-step working: numbers, no
    boxes, no answer sentence."""
    lines: list[str] = []
    step, size = 1, 0
    while size < length:
        lines.append(f"Step {step}: we check that {step} + {2 * step} = {3 * step}, which is consistent.\n")
        size += len(lines[-1])
        step += 1
    return "".join(lines)


def load_pairs(path: str | Path) -> list[LabelledPair]:
    path = Path(path)
    items = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(items, list):
        raise ValueError(f"{path}: expected a list of pairs")
    pairs = []
    for number, item in enumerate(items):
        where = f"{path} item {number}"
        missing = {"category", "response", "reference", "expected"} - set(item)
        if missing:
            raise ValueError(f"{where}: lacks {sorted(missing)}")
        unknown = set(item) - {"category", "response", "reference", "expected", "note", "known_miss", "long_prefix"}
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}")
        if not isinstance(item["expected"], bool):
            raise ValueError(f"{where}: expected must be true or false, got {item['expected']!r}")
        known_miss = dict(item.get("known_miss") or {})
        bad = set(known_miss) - set(OURS)
        if bad:
            raise ValueError(f"{where}: known_miss names {sorted(bad)}; only {list(OURS)} are this package's")
        response = filler(int(item.get("long_prefix", 0))) + str(item["response"])
        pairs.append(
            LabelledPair(str(item["category"]), response, str(item["reference"]), item["expected"],
                         str(item.get("note", "")), known_miss)
        )
    return pairs


def _ours(sources: tuple[str, ...]) -> Callable[[str, str], bool]:
    return lambda response, reference: score_answer(response, reference, answer_sources=sources).acc


def scorers() -> dict[str, Callable[[str, str], bool]]:
    """Scorer name -> (response, reference) -> correct: ours and verl's."""
    return {
        OURS_TRAINING: _ours(TRAINING_SOURCES),
        OURS_EVALUATION: _ours(EVALUATION_SOURCES),
        VERL_MATH_VERIFY: lambda response, reference: math_verify.compute_score(response, reference) == 1.0,
        VERL_MATH: lambda response, reference: math_reward.compute_score(response, reference) == 1.0,
        VERL_MATH_DAPO: lambda response, reference: bool(math_dapo.compute_score(response, reference)["acc"]),
    }


def verdicts(pairs: Sequence[LabelledPair], by_name: dict[str, Callable[[str, str], bool]]) -> dict[str, list[bool]]:
    return {name: [bool(score(pair.response, pair.reference)) for pair in pairs] for name, score in by_name.items()}


def agreement_table(pairs: Sequence[LabelledPair], results: dict[str, list[bool]]) -> str:
    """Markdown: per category, how many pairs each scorer gets right (its verdict equals the label)."""
    names = list(results)
    categories = list(dict.fromkeys(pair.category for pair in pairs))
    right: dict[str, Counter] = {name: Counter() for name in names}
    for name in names:
        for pair, verdict in zip(pairs, results[name]):
            right[name][pair.category] += int(verdict == pair.expected)
    sizes = Counter(pair.category for pair in pairs)
    lines = [
        "| category | pairs | " + " | ".join(names) + " |",
        "|---|---:|" + "---:|" * len(names),
    ]
    for category in categories:
        cells = " | ".join(str(right[name][category]) for name in names)
        lines.append(f"| {category} | {sizes[category]} | {cells} |")
    totals = " | ".join(f"**{sum(right[name].values())}**" for name in names)
    lines.append(f"| **all** | **{len(pairs)}** | {totals} |")
    return "\n".join(lines) + "\n"


def disagreements(pairs: Sequence[LabelledPair], results: dict[str, list[bool]], name: str) -> list[int]:
    """Indices of the pairs where scorer ``name`` disagrees with the label."""
    return [index for index, (pair, verdict) in enumerate(zip(pairs, results[name])) if verdict != pair.expected]


def seconds_per_sample(pairs: Sequence[LabelledPair], score: Callable[[str, str], bool], repeats: int = 3) -> float:
    """Wall time of one call, from the fastest of ``repeats`` passes through the pairs after one
    warm-up pass (the fastest pass is the one least disturbed by other work on the machine)."""
    for pair in pairs:
        score(pair.response, pair.reference)
    passes = []
    for _ in range(repeats):
        started = time.perf_counter()
        for pair in pairs:
            score(pair.response, pair.reference)
        passes.append(time.perf_counter() - started)
    return min(passes) / len(pairs)


def _from_a_worker_thread(score: Callable[[str, str], bool]) -> Callable[[str, str], bool]:
    """``score`` called from a worker thread, as verl's reward loop calls a reward (run_in_executor)."""
    threads = ThreadPoolExecutor(1)
    return lambda response, reference: threads.submit(score, response, reference).result()


def timing_table(pairs: Sequence[LabelledPair], by_name: dict[str, Callable[[str, str], bool]], repeats: int = 5) -> str:
    """Markdown: the time per sample of each scorer, and of the training rule from a worker thread
    (where math-verify runs in this package's worker processes)."""
    timed = dict(by_name)
    timed[f"{OURS_TRAINING}, from a worker thread"] = _from_a_worker_thread(by_name[OURS_TRAINING])
    lines = ["| scorer | ms per sample |", "|---|---:|"]
    for name, score in timed.items():
        lines.append(f"| {name} | {1000 * seconds_per_sample(pairs, score, repeats):.2g} |")
    return "\n".join(lines) + "\n"


def replace_between(text: str, start: str, end: str, body: str) -> str:
    """``text`` with what lies between the marker lines ``start`` and ``end`` replaced by ``body``."""
    head, found, rest = text.partition(start + "\n")
    _middle, found_end, tail = rest.partition(end)
    if not found or not found_end:
        raise ValueError(f"markers {start!r} ... {end!r} not found")
    return head + start + "\n" + body + found_end + tail


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", help="YAML file of labelled (response, reference, expected) pairs")
    parser.add_argument("--timing", action="store_true", help="also measure the time per sample of each scorer")
    parser.add_argument("--repeats", type=int, default=5, help="timing passes over the pairs, the fastest counts (default: 5)")
    parser.add_argument("--write-docs", metavar="MARKDOWN", help="write the table(s) between the markers of this file")
    args = parser.parse_args(argv)
    pairs = load_pairs(args.pairs)
    by_name = scorers()
    results = verdicts(pairs, by_name)
    table = agreement_table(pairs, results)
    print(table)
    for name in OURS:
        missed = disagreements(pairs, results, name)
        for index in missed:
            pair = pairs[index]
            known = "known: " + pair.known_miss[name] if name in pair.known_miss else "NOT LISTED as a known miss"
            print(f"{name} disagrees on item {index} ({pair.category}, reference {pair.reference!r}): {known}")
        for index, pair in enumerate(pairs):
            if name in pair.known_miss and index not in missed:
                print(f"{name} agrees on item {index} ({pair.category}), listed as a known miss: remove the entry")
    timing = None
    if args.timing:
        timing = timing_table(pairs, by_name, args.repeats)
        print(timing)
    if args.write_docs:
        path = Path(args.write_docs)
        text = replace_between(path.read_text(encoding="utf-8"), TABLE_START, TABLE_END, table)
        if timing is not None:
            text = replace_between(text, TIMING_START, TIMING_END, timing)
        path.write_text(text, encoding="utf-8")
        print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
