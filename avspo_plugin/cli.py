"""The ``avspo`` console script: one entry point, one subcommand per tool.

Each subcommand lives in its own module, imported only when that subcommand
runs, so ``avspo --help`` stays fast and a tool's heavy dependencies load only
for that tool. A module provides ``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Optional, Sequence

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "advantages": ("avspo_plugin.synthetic_batches", "GRPO and AVSPO advantages side by side on drawn batches (no training)."),
    "lab": ("avspo_plugin.lab.command", "CPU RLVR lab: GRPO, Dr. GRPO, NGRPO, DAPO and AVSPO on a tiny Qwen2; `lab sweep`: ACR vs accuracy."),
    "analyze": ("avspo_plugin.analyze.command", "ACR diagnostics of finished GRPO runs from their dumps and logs."),
    "math-prepare": ("avspo_plugin.math.prepare", "verl parquet files of MATH, the six eval benchmarks, the Level3-500 selection."),
    "math-eval": ("avspo_plugin.math.evaluate", "pass@1 / avg@k per benchmark and overall, from a model (vLLM) or generations."),
    "doctor": ("avspo_plugin.doctor", "Check that verl registers the avspo estimator here and in a Ray actor, and the run's config; --host trl|openrlhf checks those adapters."),
    "openrlhf": ("avspo_plugin.openrlhf.launch", "Run OpenRLHF's train_ppo_ray with the avspo estimator."),
    "verl-demo": ("avspo_plugin.verl.demo", "Train a tiny Qwen2 with stock verl main_ppo and the avspo estimator on CPU."),
}
# Former names: still accepted, with a note naming the command now.
MOVED: dict[str, str] = {"demo": "advantages"}


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="avspo", description="ACR diagnostics and AVSPO advantages.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            importlib.import_module(module_name).add_arguments(sub)
    for old, new in MOVED.items():
        sub = subparsers.add_parser(old, description=f"Now `avspo {new}`.")  # no help=: left out of the listing
        if old == chosen:
            importlib.import_module(SUBCOMMANDS[new][0]).add_arguments(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    if args.command in MOVED:
        print(f"note: `avspo {args.command}` is now `avspo {MOVED[args.command]}`", file=sys.stderr)
        args.command = MOVED[args.command]
    module = importlib.import_module(SUBCOMMANDS[args.command][0])
    return int(module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
