"""Evaluation as in the paper: pass@1 at temperature 0.1 with 2,048 response tokens, per benchmark and
overall (total correct over total problems), plus avg@k / pass@k when sampling k > 1 per problem.

    python -m recipes.math_data.evaluate --model CKPT --data-dir data/eval --out results/ckpt
    python -m recipes.math_data.evaluate --generations results/ckpt/generations.jsonl --out results/ckpt

From the repository's root. The first samples with vLLM (GPU) and writes ``generations.jsonl``
with its sampling settings beside it (``generation_settings.json``); both score with the math reward
under the paper's evaluation rule (answer from ``\\boxed{}``, else "The answer is", else the last
number: ``answer.EVALUATION_SOURCES``) and write ``results.json`` and ``results.md``.

avg@k is the mean over problems of the fraction of a problem's k samples that are correct (with
k = 1 it is pass@1); pass@k is the fraction of problems with at least one correct sample. The
overall row pools problems: sum of per-problem correct fractions over the number of problems.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from avspo_plugin.commands.main import run_command
from avspo_plugin.extras import extra_imports

PROG = "python -m recipes.math_data.evaluate"

with extra_imports(__name__, PROG, "math"):
    from avspo_plugin.math_reward.answer import EVALUATION_SOURCES
    from avspo_plugin.math_reward.reward import score_many
    from recipes.math_data.generation import Engine, Sampling, generate_chat
    from recipes.math_data.sources import BENCHMARKS, DataError, read_verl_parquet

PAPER_TEMPERATURE = 0.1
PAPER_MAX_TOKENS = 2048
GENERATIONS = "generations.jsonl"
SETTINGS = "generation_settings.json"


@dataclass
class BenchmarkResult:
    name: str
    problems: int
    k: int
    correct: float  # sum over problems of the fraction of samples correct
    solved: int  # problems with at least one correct sample
    reasons: Counter = field(default_factory=Counter)

    @property
    def title(self) -> str:
        return BENCHMARKS[self.name].title if self.name in BENCHMARKS else self.name

    @property
    def avg_at_k(self) -> float:
        return 100.0 * self.correct / self.problems

    @property
    def pass_at_k(self) -> float:
        return 100.0 * self.solved / self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "problems": self.problems,
            "k": self.k,
            "correct": self.correct,
            f"avg@{self.k}": self.avg_at_k,
            f"pass@{self.k}": self.pass_at_k,
            "reasons": dict(sorted(self.reasons.items())),
        }


@dataclass
class Report:
    benchmarks: list[BenchmarkResult]
    settings: dict[str, Any]

    @property
    def problems(self) -> int:
        return sum(result.problems for result in self.benchmarks)

    @property
    def correct(self) -> float:
        return sum(result.correct for result in self.benchmarks)

    @property
    def overall(self) -> float:
        return 100.0 * self.correct / self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "benchmarks": {result.name: result.to_json() for result in self.benchmarks},
            "overall": {
                "problems": self.problems,
                "correct": self.correct,
                "accuracy": self.overall,
                "solved": sum(result.solved for result in self.benchmarks),
            },
        }

    def markdown(self) -> str:
        ks = sorted({result.k for result in self.benchmarks})
        sampled = ks != [1]  # with one sample per problem avg@1 and pass@1 coincide: one column
        k_label = str(ks[0]) if len(ks) == 1 else "k"
        head = f"| Benchmark | Problems | k | avg@{k_label} (%) |" + (f" pass@{k_label} (%) |" if sampled else "")
        lines = [head, "|---|---:|---:|---:|" + ("---:|" if sampled else "")]
        if not sampled:
            lines[0] = "| Benchmark | Problems | k | pass@1 (%) |"
        for result in self.benchmarks:
            row = f"| {result.title} | {result.problems} | {result.k} | {result.avg_at_k:.1f} |"
            lines.append(row + (f" {result.pass_at_k:.1f} |" if sampled else ""))
        solved = sum(result.solved for result in self.benchmarks)
        overall = f"| **Overall** (total correct / total problems) | {self.problems} | | {self.overall:.1f} |"
        lines.append(overall + (f" {100.0 * solved / self.problems:.1f} |" if sampled else ""))
        settings = ", ".join(f"{key}={value}" for key, value in self.settings.items())
        return "\n".join(lines) + f"\n\nSettings: {settings}\n"


def _benchmark_order(name: str) -> tuple[int, str]:
    order = list(BENCHMARKS)
    return (order.index(name), name) if name in order else (len(order), name)


def score_generations(
    records: Sequence[dict[str, Any]], settings: dict[str, Any], workers: int | None = None
) -> Report:
    """Score generation records ({data_source, index, ground_truth, responses}) into a report.

    All problems of one benchmark must have the same number of responses (k); a problem listed twice
    or a record without responses is an error naming it.
    """
    seen: set[tuple[str, Any]] = set()
    k_of: dict[str, int] = {}
    for number, record in enumerate(records):
        check_record(record, f"generation record {number}")
        key = (record["data_source"], record["index"])
        if key in seen:
            raise DataError(f"generation record {number}: problem {key} appears twice")
        seen.add(key)
        responses = record["responses"]
        if not responses:
            raise DataError(f"generation record {number} ({key}): no responses")
        k = k_of.setdefault(record["data_source"], len(responses))
        if len(responses) != k:
            raise DataError(
                f"generation record {number} ({key}): {len(responses)} responses, "
                f"other problems of {record['data_source']} have {k}"
            )
    pairs = [(text, record["ground_truth"]) for record in records for text in record["responses"]]
    scores = iter(score_many(pairs, answer_sources=EVALUATION_SOURCES, workers=workers))
    results: dict[str, BenchmarkResult] = {}
    for record in records:
        name = record["data_source"]
        result = results.setdefault(name, BenchmarkResult(name, 0, k_of[name], 0.0, 0))
        outcomes = [next(scores) for _ in record["responses"]]
        hits = sum(outcome.acc for outcome in outcomes)
        result.problems += 1
        result.correct += hits / len(outcomes)
        result.solved += int(hits > 0)
        result.reasons.update(outcome.reason for outcome in outcomes)
    ordered = [results[name] for name in sorted(results, key=_benchmark_order)]
    if not ordered:
        raise DataError("no generation records to score")
    return Report(ordered, settings)


# Each field of a generation record and the JSON types it may hold.
RECORD_FIELDS = {"data_source": (str,), "index": (int, str), "ground_truth": (str,), "responses": (list,)}


def check_record(record: Any, where: str) -> dict[str, Any]:
    """``record`` if it is a generation record with every field of the right type; else DataError naming ``where``."""
    if not isinstance(record, dict):
        raise DataError(f"{where}: a generation record is a JSON object, got {type(record).__name__}")
    missing = set(RECORD_FIELDS) - set(record)
    if missing:
        raise DataError(f"{where}: generation record lacks {sorted(missing)}")
    for name, types in RECORD_FIELDS.items():
        value = record[name]
        # JSON true/false are Python bools, which are ints: an index of true is not a problem index.
        if not isinstance(value, types) or isinstance(value, bool):
            expected = " or ".join(t.__name__ for t in types)
            raise DataError(f"{where}: field {name!r} must be {expected}, got {type(value).__name__} {value!r:.80}")
    for position, response in enumerate(record["responses"]):
        if not isinstance(response, str):
            raise DataError(
                f"{where}: responses[{position}] must be str, got {type(response).__name__} {response!r:.80}"
            )
    return record


def read_generations(path: str | Path) -> list[dict[str, Any]]:
    """The records of a generations.jsonl file, each checked (DataError names the line that is bad)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such generations file")
    records = []
    with path.open(encoding="utf-8", errors="strict") as lines:
        try:
            numbered = list(enumerate(lines, start=1))
        except UnicodeDecodeError as err:
            raise DataError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start} of a line)") from None
    for number, line in numbered:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{number}: not a JSON record ({err.msg} at column {err.colno})") from None
        records.append(check_record(record, f"{path}:{number}"))
    return records


def write_generations(records: Sequence[dict[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
    return path


def generate_records(rows: Sequence[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    sampling = Sampling(args.k, args.temperature, args.max_tokens, top_p=args.top_p, seed=args.seed)
    engine = Engine(args.model, args.tensor_parallel_size, max_model_len=args.max_model_len)
    completions = generate_chat(engine, [row["prompt"] for row in rows], sampling)
    return [
        {
            "data_source": row["data_source"],
            "index": row["extra_info"]["index"],
            "ground_truth": row["reward_model"]["ground_truth"],
            "prompt": row["prompt"],
            "responses": texts,
        }
        for row, texts in zip(rows, completions)
    ]


def _data_files(args: argparse.Namespace) -> list[Path]:
    files = [Path(p).expanduser() for p in args.data or []]
    if args.data_dir:
        folder = Path(args.data_dir).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no such folder (write it with `python -m recipes.math_data.prepare eval --out-dir {folder}`)")
        files += sorted(folder.glob("*.parquet"))
    if not files:
        raise ValueError("no evaluation data: give --data FILE... or --data-dir DIR (written by `python -m recipes.math_data.prepare eval --out-dir DIR`)")
    return files


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="model to sample with vLLM (GPU): a local path or hub id")
    source.add_argument("--generations", help="score this generations.jsonl instead of sampling")
    parser.add_argument("--data", nargs="+", help="verl parquet files of the benchmarks (with --model)")
    parser.add_argument("--data-dir", help="folder of <benchmark>.parquet files from `prepare eval` (with --model)")
    parser.add_argument("--out", required=True, help="output folder: generations.jsonl, results.json, results.md")
    parser.add_argument("--k", type=int, default=1, help="samples per problem (default: 1, pass@1)")
    parser.add_argument("--temperature", type=float, default=PAPER_TEMPERATURE, help="default: 0.1, as the paper")
    parser.add_argument("--max-tokens", type=int, default=PAPER_MAX_TOKENS, help="default: 2048, as the paper")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    parser.add_argument("--max-model-len", type=int, help="vLLM context length (default: the model's)")
    parser.add_argument("--workers", type=int, help="scoring processes (default: the CPUs this process may use)")


def run(args: argparse.Namespace) -> int:
    out = Path(args.out).expanduser()
    if args.model:
        rows = [row for path in _data_files(args) for row in read_verl_parquet(path)]
        records = generate_records(rows, args)
        write_generations(records, out / GENERATIONS)
        settings = {
            "model": args.model, "temperature": args.temperature, "max_tokens": args.max_tokens,
            "k": args.k, "top_p": args.top_p, "seed": args.seed,
        }
        (out / SETTINGS).write_text(json.dumps(settings, indent=2) + "\n")
    else:
        records = read_generations(args.generations)
        sidecar = Path(args.generations).expanduser().parent / SETTINGS
        settings = json.loads(sidecar.read_text()) if sidecar.is_file() else {}
        settings["generations"] = str(args.generations)
    report = score_generations(records, settings, workers=args.workers)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(report.to_json(), indent=2) + "\n")
    markdown = report.markdown()
    (out / "results.md").write_text(markdown)
    print(markdown, end="")
    print(f"-> {out / 'results.json'}, {out / 'results.md'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m recipes.math_data.evaluate`` from the checkout's root, with the console script's error messages."""
    return run_command(PROG, sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
