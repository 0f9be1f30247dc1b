"""The Level3-500 training set: MATH problems a selector model solves 30-50% of the time, 500 of them.

Two steps. :func:`measure_pass_rates` samples each candidate problem ``n`` times with the selector
model (vLLM, GPU) and scores the samples with the math reward; its result is a pass-rate table
(one JSON line per problem: index, n, correct, pass_rate) that is worth keeping. :func:`select`
then keeps the problems whose pass rate lies in [low, high] and draws ``size`` of them with a
fixed seed; it needs no GPU and is what the tests exercise on a fixture table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from avspo_plugin.math_reward.answer import TRAINING_SOURCES
from avspo_plugin.math_reward.reward import score_many
from recipes.math_data.generation import Engine, Sampling, generate_chat


@dataclass(frozen=True)
class PassRate:
    index: int  # extra_info.index of the verl row (row of the source dataset)
    n: int
    correct: int

    @property
    def pass_rate(self) -> float:
        return self.correct / self.n

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "n": self.n, "correct": self.correct, "pass_rate": self.pass_rate}


@dataclass(frozen=True)
class Selection:
    rows: list[dict[str, Any]]
    candidates: int  # rows with a pass rate
    in_range: int  # of those, pass rate within [low, high]
    low: float
    high: float
    seed: int

    def summary(self) -> dict[str, Any]:
        return {
            "selected": len(self.rows),
            "candidates": self.candidates,
            "in_range": self.in_range,
            "pass_rate_range": [self.low, self.high],
            "seed": self.seed,
        }


def write_pass_rates(rates: Sequence[PassRate], path: str | Path) -> Path:
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(rate.to_json()) + "\n" for rate in rates))
    return path


def read_pass_rates(path: str | Path) -> list[PassRate]:
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such pass-rate file")
    rates = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            rate = PassRate(int(record["index"]), int(record["n"]), int(record["correct"]))
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}:{number}: not a pass-rate record ({err}): {line[:120]!r}") from None
        if rate.n < 1 or not 0 <= rate.correct <= rate.n:
            raise ValueError(f"{path}:{number}: need n >= 1 and 0 <= correct <= n, got {rate.to_json()}")
        rates.append(rate)
    return rates


def measure_pass_rates(
    rows: Sequence[dict[str, Any]], engine: Engine, sampling: Sampling, score_workers: int | None = None
) -> list[PassRate]:
    """Sample every row's prompt ``sampling.n`` times and count correct answers (GPU, vLLM), scored
    with the training reward's answer rule: the pass rate is how often training will see reward 1."""
    completions = generate_chat(engine, [row["prompt"] for row in rows], sampling)
    pairs = [
        (text, row["reward_model"]["ground_truth"]) for row, texts in zip(rows, completions) for text in texts
    ]
    scores = iter(score_many(pairs, answer_sources=TRAINING_SOURCES, workers=score_workers))
    rates = []
    for row, texts in zip(rows, completions):
        correct = sum(int(next(scores).acc) for _ in texts)
        rates.append(PassRate(int(row["extra_info"]["index"]), len(texts), correct))
    return rates


def select(
    rows: Sequence[dict[str, Any]],
    rates: Sequence[PassRate],
    low: float = 0.3,
    high: float = 0.5,
    size: int = 500,
    seed: int = 0,
    allow_fewer: bool = False,
) -> Selection:
    """Rows whose pass rate is in [low, high] (inclusive), ``size`` of them drawn with ``seed``.

    Every row must have a pass rate and every pass rate a row (matched by ``extra_info.index``):
    a mismatch means the table belongs to other data. Fewer than ``size`` rows in range is an error
    unless ``allow_fewer``, then all of them are kept. The draw depends only on the set of indices in
    range and the seed, not on row order; the result is in index order.
    """
    if not 0 <= low <= high <= 1:
        raise ValueError(f"pass-rate range [{low}, {high}] must satisfy 0 <= low <= high <= 1")
    if size < 1:
        raise ValueError(f"size={size} must be >= 1")
    by_index: dict[int, dict[str, Any]] = {}
    for row in rows:
        index = int(row["extra_info"]["index"])
        if index in by_index:
            raise ValueError(f"two rows share extra_info.index {index}")
        by_index[index] = row
    rate_of: dict[int, PassRate] = {}
    for rate in rates:
        if rate.index in rate_of:
            raise ValueError(f"pass-rate table lists index {rate.index} twice")
        rate_of[rate.index] = rate
    no_rate = sorted(set(by_index) - set(rate_of))
    no_row = sorted(set(rate_of) - set(by_index))
    if no_rate or no_row:
        raise ValueError(
            f"pass-rate table does not match the rows: {len(no_rate)} row(s) without a pass rate "
            f"(first: {no_rate[:5]}), {len(no_row)} pass rate(s) without a row (first: {no_row[:5]})"
        )
    in_range = sorted(index for index, rate in rate_of.items() if low <= rate.pass_rate <= high)
    if len(in_range) < size and not allow_fewer:
        raise ValueError(
            f"only {len(in_range)} of {len(rate_of)} problems have a pass rate in [{low}, {high}], "
            f"fewer than size={size}: widen the range, add levels, or allow fewer"
        )
    chosen = in_range
    if len(in_range) > size:
        rng = np.random.default_rng(seed)
        chosen = sorted(int(i) for i in rng.choice(np.asarray(in_range), size=size, replace=False))
    return Selection([by_index[index] for index in chosen], len(rate_of), len(in_range), low, high, seed)
