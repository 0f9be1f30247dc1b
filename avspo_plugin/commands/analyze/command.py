"""``avspo analyze PATH... --out DIR``: ACR diagnostics of finished (or stopped) GRPO runs."""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

from avspo_plugin.argument_types import positive_int
from avspo_plugin.config import AVSPOConfig
from avspo_plugin.threshold_modes import PAPER_MODE

from . import plots, run_analysis
from .accuracy import compare_accuracy
from .run_analysis import markdown, printable, summary
from .run_logs import AnalyzeError
from .timeline import PROMPT_COUNTS, PromptTable

DEFAULTS = AVSPOConfig()
# The config keys analyze measures with, each a flag: (key, type, help with {} for the key's default).
MONITOR_FLAGS = (
    ("stagnation_acr", float, "stagnation signal: ACR above this ... (default {}; 0 disables)"),
    ("stagnation_steps", int, "... for more than this many consecutive steps (default {})"),
    ("reward_low", float, "reward of a failed sample: all-fail groups sit here (default {})"),
    ("reward_high", float, "reward of a passed sample: all-pass groups sit here (default {})"),
    ("collapse_tol", float, "a group is collapsed when its reward std is below this (default {})"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="+", metavar="[LABEL=]PATH",
        help="one run each: a verl rollout dump (trainer.rollout_data_dir, a directory or one .jsonl), verl's file "
             "tracker .jsonl, a TensorBoard log directory, a wandb history export (.csv, .json, .jsonl), or a TRL "
             "output directory / trainer_state.json. LABEL names the run in the report.",
    )
    parser.add_argument("--out", required=True, type=Path, help="directory for analysis.json and the plots")
    parser.add_argument(
        "--val", action="append", default=[], metavar="[LABEL=]PATH",
        help="verl validation dumps (trainer.validation_data_dir) of a run: LABEL picks the run, otherwise runs "
             "are taken in order; repeat for several runs",
    )
    parser.add_argument("--early-steps", type=positive_int, default=100,
                        help="length of the early window whose mean ACR is reported (default 100, the paper's)")
    for key, kind, text in MONITOR_FLAGS:
        default = getattr(DEFAULTS, key)
        parser.add_argument(f"--{key.replace('_', '-')}", type=kind, default=default, help=text.format(default))
    parser.add_argument("--accuracy", metavar="KEY", default=None,
                        help="a logged metric to compare the runs' accuracy by, e.g. verl's "
                             "val-core/gsm8k/acc/mean@1: each run's curve against the rollouts it spent, and the "
                             "rollouts each run took to reach the first run's final value")
    parser.add_argument("--group-size", type=positive_int, default=None,
                        help="samples per prompt (G); needed to read OpenRLHF logs")
    parser.add_argument("--top", type=positive_int, default=10, help="prompts listed as the biggest wasters (default 10)")
    parser.add_argument("--no-plots", action="store_true", help="write analysis.json only")


def run(args: argparse.Namespace) -> int:
    """Errors in the input raise AnalyzeError or ConfigError: the console script prints them in one line."""
    if args.out.exists() and not args.out.is_dir():
        raise AnalyzeError(f"--out {args.out} is a file: --out names the folder analysis.json and the plots go into "
                           "(made if missing); name another folder, or move the file away")
    monitor = AVSPOConfig.from_mapping({key: getattr(args, key) for key, _, _ in MONITOR_FLAGS},
                                       where="avspo analyze").as_monitor()
    settings = run_analysis.Settings(monitor=monitor, replay=monitor.replace(threshold_mode=PAPER_MODE),
                                     early_steps=args.early_steps, group_size=args.group_size, top=args.top,
                                     accuracy=args.accuracy)
    runs = [_split_label(spec) for spec in args.paths]
    labels = numbered_unique(_default_labels(runs), str)
    vals = _pair_validation(labels, [_split_label(spec) for spec in args.val])
    results = [run_analysis.analyse(label, path, vals.get(label), settings) for label, (_, path) in zip(labels, runs)]
    for result in results:
        for warning in result.report["warnings"]:
            print(f"avspo analyze: warning: {printable(warning)}", file=sys.stderr)
    rows = run_analysis.compare(results)
    accuracy = None if args.accuracy is None else compare_accuracy(
        [result.label for result in results], [result.report["accuracy"] for result in results])

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    prefixes = numbered_unique([file_prefix(result.label) for result in results], str.casefold)
    for result, prefix in zip(results, prefixes):
        # Every file of a run lies beside analysis.json as <prefix>.<what>: one folder for every run's files.
        result.report["file_prefix"] = prefix
        files = {}
        if result.prompts is not None:
            files["prompts_csv"] = _write_prompts(result.prompts, out / f"{prefix}.prompts.csv")
        for name, draw, wanted in (("acr_timeline", plots.acr_timeline, True),
                                   ("prompt_collapse_hist", plots.prompt_histogram, result.prompts is not None)):
            if wanted and not args.no_plots:
                files[name] = str(out / f"{prefix}.{name}.png")
                draw(result, Path(files[name]))
        result.report["files"] = files
    document = {
        "tool": "avspo analyze",
        "settings": {
            "early_steps": args.early_steps,
            "stagnation": {"acr_above": args.stagnation_acr, "more_than_steps": args.stagnation_steps},
            "group_size": args.group_size,
            "monitor": monitor.to_dict(),
            "avspo_replay": settings.replay.to_dict(),
        },
        "runs": [result.report for result in results],
        "comparison": rows,
        "accuracy_comparison": accuracy,
    }
    if len(results) > 1 and not args.no_plots:
        plots.compare_acr(results, out / "acr_compare.png", args.stagnation_acr)
        document["comparison_plot"] = str(out / "acr_compare.png")
    if accuracy is not None and not args.no_plots:
        plots.compare_accuracy(results, accuracy, out / "accuracy_compare.png")
        document["accuracy_plot"] = str(out / "accuracy_compare.png")
    try:
        (out / "analysis.json").write_text(json.dumps(document, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    except ValueError as err:  # a NaN or inf slipped into the report
        raise AnalyzeError(f"analysis.json: {err}") from None
    text = summary(results, rows, accuracy)
    (out / "analysis.md").write_text(markdown(results, rows, accuracy, text, document), encoding="utf-8")
    print(text)
    print(f"\nWrote {out / 'analysis.md'}, {out / 'analysis.json'}" + ("" if args.no_plots else " and plots"))
    return 0


def _split_label(spec: str) -> tuple[str | None, Path]:
    """'LABEL=PATH' -> (LABEL, PATH); an existing path, a spec without '=' or '=PATH' has no label."""
    if "=" in spec and not Path(spec).exists():
        label, path = spec.split("=", 1)
        return label or None, Path(path)
    return None, Path(spec)


def _default_labels(runs: list[tuple[str | None, Path]]) -> list[str]:
    """Given labels, else the shortest path tails that tell the runs apart ('a/rollouts', 'b/rollouts'); a file
    counts without its extension ('exp.jsonl' is the run 'exp'), since the label names the run's output files."""
    tails = [(*p.parts[:-1], p.stem) if p.is_file() else p.parts for p in (path.resolve() for _, path in runs)]
    for depth in range(1, max(len(parts) for parts in tails) + 1):
        labels = ["/".join(parts[-depth:]) for parts in tails]
        unlabeled = [text for (given, _), text in zip(runs, labels) if given is None]
        if len(set(unlabeled)) == len(unlabeled):
            break
    return [given or text for (given, _), text in zip(runs, labels)]


def numbered_unique(names: list[str], key: Callable[[str], str]) -> list[str]:
    """``names`` with each repeat (equal under ``key``) numbered ``-2``, ``-3``, ... until no two are equal."""
    taken: set[str] = set()
    result = []
    for name in names:
        candidate, number = name, 1
        while key(candidate) in taken:
            number += 1
            candidate = f"{name}-{number}"
        taken.add(key(candidate))
        result.append(candidate)
    return result


# Longest file prefix made from a label: with ".prompt_collapse_hist.png" and "-N" after it, far below 255 bytes.
FILE_PREFIX_MAX = 64
# Device names Windows reserves in every folder, whatever the extension.
RESERVED_NAMES = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}


def file_prefix(label: str) -> str:
    """The start of a run's file names under --out: ASCII letters, digits, '.', '_' and '-' only (so the name stays
    in --out), no leading dot or dash (no hidden file, no option), no Windows device name."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", label)[:FILE_PREFIX_MAX].lstrip("._-").rstrip("._") or "run"
    return f"run_{name}" if name.split(".")[0].lower() in RESERVED_NAMES else name


def _pair_validation(labels: list[str], vals: list[tuple[str | None, Path]]) -> dict[str, Path]:
    for label, path in vals:
        if label is not None and label not in labels:
            raise AnalyzeError(f"--val {label}={path}: no run is labelled {label!r} (runs: {', '.join(labels)})")
    paired = {label: path for label, path in vals if label is not None}
    free = [label for label in labels if label not in paired]
    unlabelled = [path for label, path in vals if label is None]
    if len(unlabelled) > len(free):
        raise AnalyzeError(f"--val {unlabelled[len(free)]}: more validation dumps than runs")
    return paired | dict(zip(free, unlabelled))


# How a text cell that a spreadsheet would run as a formula starts (OWASP, "CSV injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _write_prompts(table: PromptTable, path: Path) -> str:
    """prompts.csv. Prompt texts come from the logs: one that starts like a formula gets a single quote before it
    (OWASP's rule), so that a spreadsheet shows it as text."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["prompt", *PROMPT_COUNTS[:-1], "wasted_rollouts", "mean_reward"])
        for index, text in enumerate(table.texts):
            counts = [int(getattr(table, name)[index]) for name in PROMPT_COUNTS]
            rollouts = int(table.rollouts[index])
            mean = float(f"{table.reward_sum[index] / rollouts:.6g}") if rollouts else ""
            writer.writerow(["'" + text if text.startswith(FORMULA_STARTS) else text, *counts, mean])
    return str(path)
