"""Data preparation for the recipes: verl parquet files from MATH, GSM8K's training split and the six evaluation
benchmarks, and the Level3-500 selection.

    python -m recipes.math_data.prepare math --out data/math_train.parquet [--local PATH]
    python -m recipes.math_data.prepare gsm8k --out data/gsm8k_train.parquet [--local PATH]
    python -m recipes.math_data.prepare eval --out-dir data/eval [--local math500=PATH ...]
    python -m recipes.math_data.prepare level3-500 --train data/math_train.parquet \\
        --model Qwen/Qwen2.5-Math-1.5B --out data/level3_500.parquet          # GPU: vLLM sampling
    python -m recipes.math_data.prepare level3-500 --train data/math_train.parquet \\
        --pass-rates data/level3_pass_rates.jsonl --out data/level3_500.parquet  # CPU: reuse a table

from the repository's root. Without ``--local`` a dataset is read from the dataset hub.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from avspo_plugin.commands.main import run_command
from avspo_plugin.extras import extra_imports

PROG = "python -m recipes.math_data.prepare"

with extra_imports(__name__, PROG, "math"):
    from recipes.math_data.generation import Engine, Sampling
    from recipes.math_data.level3 import measure_pass_rates, read_pass_rates, select, write_pass_rates
    from recipes.math_data.sources import (
        BENCHMARKS,
        GSM8K_TRAIN,
        MATH_TRAIN,
        SYSTEM_PROMPT,
        DataError,
        parse_level,
        read_rows,
        read_verl_parquet,
        to_verl_rows,
        write_parquet,
    )


def _local_map(items: Sequence[str]) -> dict[str, str]:
    local = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not path:
            raise SystemExit(f"--local {item!r}: expected NAME=PATH, NAME one of {', '.join(BENCHMARKS)}")
        if name not in BENCHMARKS:
            raise SystemExit(f"--local {item!r}: unknown benchmark {name!r}; valid: {', '.join(BENCHMARKS)}")
        local[name] = path
    return local


def _levels(text: str | None) -> set[int] | None:
    if text is None:
        return None
    try:
        return {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise SystemExit(f"--levels {text!r}: expected comma-separated integers such as 3 or 3,4") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    steps = parser.add_subparsers(dest="step", metavar="STEP", required=True)

    math = steps.add_parser("math", help="MATH training problems as a verl parquet file.")
    math.add_argument("--out", required=True, help="output parquet file")
    math.add_argument("--local", help=f"local copy of MATH train (default: hub {MATH_TRAIN.hub_id})")
    math.add_argument("--levels", help="keep only these levels, e.g. 3 or 3,4 (default: all)")
    math.add_argument("--system-prompt", default=SYSTEM_PROMPT, help="system message of every prompt")

    gsm8k = steps.add_parser("gsm8k", help="GSM8K training problems as a verl parquet file (the one-GPU A/B recipe).")
    gsm8k.add_argument("--out", required=True, help="output parquet file")
    gsm8k.add_argument("--local", help=f"local copy of GSM8K train (default: hub {GSM8K_TRAIN.hub_id}, "
                                       f"{GSM8K_TRAIN.hub_config}, {GSM8K_TRAIN.hub_split})")
    gsm8k.add_argument("--system-prompt", default=SYSTEM_PROMPT, help="system message of every prompt")

    evaluation = steps.add_parser("eval", help="The evaluation benchmarks, one verl parquet file each.")
    evaluation.add_argument("--out-dir", required=True, help="folder for <benchmark>.parquet files")
    evaluation.add_argument(
        "--benchmarks", nargs="+", choices=list(BENCHMARKS), default=list(BENCHMARKS), help="which (default: all)"
    )
    evaluation.add_argument(
        "--local", action="append", default=[], metavar="NAME=PATH",
        help="local copy of a benchmark (file or folder); repeat per benchmark; others come from the hub",
    )
    evaluation.add_argument("--system-prompt", default=SYSTEM_PROMPT, help="system message of every prompt")

    level3 = steps.add_parser(
        "level3-500", help="Select problems a model solves within a pass-rate range (the paper's Level3-500)."
    )
    level3.add_argument("--train", required=True, help="verl parquet written by the `math` step")
    level3.add_argument("--out", required=True, help="output parquet file of the selection")
    level3.add_argument("--levels", default="3", help="candidate MATH levels (default: 3)")
    level3.add_argument(
        "--pass-rates",
        help="pass-rate table (JSON lines): read it when --model is not given, written when it is "
        "(default with --model: <out>.pass_rates.jsonl)",
    )
    level3.add_argument("--model", help="selector model for vLLM sampling (GPU); e.g. Qwen/Qwen2.5-Math-1.5B")
    level3.add_argument("--samples", type=int, default=16, help="samples per problem (default: 16)")
    level3.add_argument("--temperature", type=float, default=1.0, help="default: 1.0, as training")
    level3.add_argument("--max-tokens", type=int, default=1024, help="default: 1024, as training")
    level3.add_argument("--tensor-parallel-size", type=int, default=1)
    level3.add_argument("--low", type=float, default=0.3, help="lowest pass rate kept (default: 0.3)")
    level3.add_argument("--high", type=float, default=0.5, help="highest pass rate kept (default: 0.5)")
    level3.add_argument("--size", type=int, default=500, help="problems to draw (default: 500)")
    level3.add_argument("--seed", type=int, default=0, help="seed of the draw and of sampling (default: 0)")
    level3.add_argument("--allow-fewer", action="store_true", help="keep all in range when fewer than --size")


def prepare_math(args: argparse.Namespace) -> int:
    levels = _levels(args.levels)
    rows = read_rows(MATH_TRAIN, args.local)
    keep = None if levels is None else (lambda row: parse_level(row.get("level")) in levels)
    verl_rows = to_verl_rows(MATH_TRAIN, rows, "train", args.system_prompt, keep=keep)
    if not verl_rows:
        raise SystemExit(f"no MATH rows at levels {sorted(levels or [])}")
    path = write_parquet(verl_rows, args.out)
    print(f"math: {len(verl_rows)} of {len(rows)} problems -> {path}")
    return 0


def prepare_gsm8k(args: argparse.Namespace) -> int:
    rows = read_rows(GSM8K_TRAIN, args.local)
    path = write_parquet(to_verl_rows(GSM8K_TRAIN, rows, "train", args.system_prompt), args.out)
    print(f"gsm8k: {len(rows)} problems -> {path}")
    return 0


def prepare_eval(args: argparse.Namespace) -> int:
    local = _local_map(args.local)
    out_dir = Path(args.out_dir).expanduser()
    for name in args.benchmarks:
        spec = BENCHMARKS[name]
        verl_rows = to_verl_rows(spec, read_rows(spec, local.get(name)), "test", args.system_prompt)
        path = write_parquet(verl_rows, out_dir / f"{name}.parquet")
        print(f"{name}: {len(verl_rows)} problems -> {path}")
    return 0


def prepare_level3(args: argparse.Namespace) -> int:
    levels = _levels(args.levels)
    all_rows = read_verl_parquet(args.train)
    rows = [row for row in all_rows if levels is None or row["extra_info"].get("level") in levels]
    if not rows:
        raise SystemExit(f"{args.train}: no rows at levels {sorted(levels or [])}")
    out = Path(args.out).expanduser()
    if args.model:
        sampling = Sampling(args.samples, args.temperature, args.max_tokens, seed=args.seed)
        rates = measure_pass_rates(rows, Engine(args.model, args.tensor_parallel_size), sampling)
        table = write_pass_rates(rates, args.pass_rates or out.with_suffix(".pass_rates.jsonl"))
        print(f"pass rates of {len(rates)} problems ({args.samples} samples each) -> {table}")
    elif args.pass_rates:
        rates = read_pass_rates(args.pass_rates)
    else:
        raise SystemExit("level3-500 needs --model (sample on GPUs) or --pass-rates (a table measured before)")
    selection = select(rows, rates, args.low, args.high, args.size, args.seed, args.allow_fewer)
    path = write_parquet(selection.rows, out)
    summary = {**selection.summary(), "levels": sorted(levels or []), "train": str(args.train)}
    out.with_suffix(".summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"level3-500: {json.dumps(selection.summary())} -> {path}")
    return 0


STEPS = {"math": prepare_math, "gsm8k": prepare_gsm8k, "eval": prepare_eval, "level3-500": prepare_level3}


def run(args: argparse.Namespace) -> int:
    try:
        return STEPS[args.step](args)
    except (ValueError, RuntimeError) as err:
        if isinstance(err, DataError):
            raise
        # The data and its tools (datasets, vLLM) say what is wrong with the input; the step is named here.
        raise DataError(f"{args.step}: {err}") from err


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m recipes.math_data.prepare`` from the checkout's root, with the console script's error messages."""
    return run_command(PROG, sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
