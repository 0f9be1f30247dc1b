"""``python -m lab``: the demo from the command line, and the research actions after it.

``python -m lab`` runs every method over several seeds on the built-in default and writes report.json, report.md and
the plots; ``--quick`` is a short version of the same. ``python -m lab study|tune|sweep|sharpening`` are the research
harness, each with its own options (research/command.py). Run from the checkout's root: the lab is not part of the
installed package.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from omegaconf import OmegaConf

from avspo_plugin.commands.main import run_command

from .experiment import RunSpec, default_jobs, prepare_base, quiet_process, run_all, run_keys, run_timing, write_report
from .methods import DEFAULT_METHODS, PRESETS, STUDY_EXTRA, parse_method, setting_label
from .report import lab_markdown, plot_lab, summarize
from .research.command import RUNS, SHARED_WITH_DEMO, add_parsers
from .settings import QUICK_SEEDS, LabSettings

PROG = "python -m lab"
# The built-in default (make demo) and the quick check: what they change in LabSettings, and their seeds. The demo
# runs 4 methods x 3 seeds in about 5 minutes on 2 idle cores: 100 steps (LabSettings has 250, the study's), held-out
# evaluations every 25; its report says what that can and cannot tell apart.
DEFAULT_SEEDS = 3
DEMO = {"steps": 100, "eval_every": 25}
# A toy budget that checks everything runs: a short warm-up, few prompts, a small held-out split.
QUICK = {"steps": 8, "eval_every": 4, "prompts": 16, "warmup_steps": 60, "held_out_per_tier": 20, "eval_samples": 2}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's options, then the actions: ``run`` (the demo by name) and the research actions, each with its own."""
    add_demo_arguments(parser)
    actions = parser.add_subparsers(
        dest="action", metavar="ACTION", title="actions",
        description="each with its own options (python -m lab ACTION --help); without one, `python -m lab` runs the demo")
    # No defaults under `run` (SUPPRESS): an option given before its name stands, as one given after it.
    add_demo_arguments(actions.add_parser("run", help="the demo by name: the same as `python -m lab` alone",
                                          argument_default=argparse.SUPPRESS))
    add_parsers(actions)


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's options: methods, seeds, the settings of LabSettings the command line may change, workers,
    output directory, progress bar."""
    default = dataclasses.replace(LabSettings(), **DEMO)
    parser.add_argument("--quick", action="store_true",
                        help=f"short check: {QUICK_SEEDS} seeds and {QUICK['steps']} steps on a toy budget")
    parser.add_argument("--methods", nargs="+", metavar="METHOD",
                        help=f"methods to compare: {' '.join(PRESETS)}, the study's "
                             f"{' '.join(STUDY_EXTRA)}, or avspo:key=value,key=value for any algorithm.avspo "
                             f"setting (default: {' '.join(DEFAULT_METHODS)})")
    parser.add_argument("--seeds", type=int,
                        help=f"number of seeds, 0..N-1 (default {DEFAULT_SEEDS}; --quick {QUICK_SEEDS})")
    parser.add_argument("--steps", type=int, help=f"RL steps per run (default {default.steps})")
    parser.add_argument("--prompts", type=int,
                        help=f"prompt groups per step, P (default {default.prompts})")
    parser.add_argument("--group-size", type=int,
                        help=f"samples per prompt, G (default {default.group_size})")
    parser.add_argument("--temperature", type=float,
                        help=f"sampling temperature of the rollouts (default {default.temperature})")
    parser.add_argument("--lr", type=float,
                        help=f"AdamW learning rate of the RL phase (default {default.lr:g})")
    parser.add_argument("--mix", metavar="W1,W2,...",
                        help=f"RL tier mix, one weight per tier {default.tiers} "
                             f"(default {','.join(f'{w:g}' for w in default.mix)})")
    parser.add_argument("--warmup-steps", type=int,
                        help=f"supervised warm-up steps of the base policy (default {default.warmup_steps})")
    parser.add_argument("--eval-every", type=int,
                        help=f"held-out evaluation every N steps (default {default.eval_every})")
    parser.add_argument("--dapo-max-gen-batches", type=int,
                        help=f"DAPO: most generation batches per step (default {default.dapo_max_gen_batches})")
    parser.add_argument("--task-seed", type=int,
                        help="seed of the held-out split, the base policy's initialisation and warm-up data "
                             f"(default {default.task_seed})")
    parser.add_argument("--jobs", type=int,
                        help="worker processes (default: the CPUs this process may use); results do not depend on it")
    parser.add_argument("--out", type=Path,
                        help="output directory (default ./avspo_lab)")
    parser.add_argument("--train-per-tier", type=int,
                        help="a fixed training set of N problems per tier in shuffled epochs (default: fresh problems "
                             "every step)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _settings(args: argparse.Namespace, preset: dict):
    values = dict(preset)
    given = {
        "steps": args.steps,
        "prompts": args.prompts,
        "group_size": args.group_size,
        "temperature": args.temperature,
        "lr": args.lr,
        "warmup_steps": args.warmup_steps,
        "eval_every": args.eval_every,
        "dapo_max_gen_batches": args.dapo_max_gen_batches,
        "task_seed": args.task_seed,
        "train_per_tier": args.train_per_tier,
    }
    values.update({k: v for k, v in given.items() if v is not None})
    if args.mix is not None:
        try:
            values["mix"] = tuple(float(w) for w in args.mix.split(","))
        except ValueError:
            raise ValueError(f"--mix {args.mix!r}: give one number per tier, comma-separated") from None
    return dataclasses.replace(LabSettings(), **values)


def main(argv: list[str] | None = None) -> int:
    """``python -m lab ARGS`` (lab/__main__.py), with the console script's error messages."""
    return run_command(PROG, sys.modules[__name__], argv)


def run(args: argparse.Namespace) -> int:
    quiet_process()
    try:
        if args.action in (None, "run"):
            return run_lab(args)
        not_taken = demo_options_not_taken(args)
        if not_taken:
            raise ValueError(f"`python -m lab {args.action}` does not take {', '.join(not_taken)}, given before its name: "
                             f"options of the demo (`python -m lab {args.action} --help` lists its own)")
        return RUNS[args.action](args)
    except ValueError as err:
        print(f"python -m lab: error: {err}", file=sys.stderr)
        return 2


def demo_options_not_taken(args: argparse.Namespace) -> list[str]:
    """The demo's options given with a research action that the action does not take: before the action's name,
    the demo's parser reads them, and the action would ignore them."""
    demo = argparse.ArgumentParser(add_help=False)
    add_demo_arguments(demo)
    return [f"--{dest.replace('_', '-')}" for dest, default in vars(demo.parse_args([])).items()
            if dest not in SHARED_WITH_DEMO[args.action] and getattr(args, dest) != default]


def run_lab(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    settings = _settings(args, QUICK if args.quick else DEMO)
    methods = [parse_method(m) for m in (args.methods or DEFAULT_METHODS)]
    names = [m.name for m in methods]
    if len(set(names)) != len(names):
        raise ValueError(f"--methods names a method twice: {names}")
    seeds = list(range(args.seeds if args.seeds is not None else QUICK_SEEDS if args.quick else DEFAULT_SEEDS))
    if not seeds:
        raise ValueError("--seeds must be >= 1")
    out = args.out or Path("avspo_lab")
    out.mkdir(parents=True, exist_ok=True)
    jobs = args.jobs or default_jobs()

    print(f"python -m lab: {len(methods)} methods x {len(seeds)} seeds, {settings.steps} steps; warming up the base "
          f"policy ({settings.warmup_steps} supervised steps)", file=sys.stderr)
    base_state, base = prepare_base(settings)
    specs = [RunSpec(key, settings, method, seed) for key, method, seed in run_keys(methods, seeds)]
    results = run_all(specs, base_state, jobs, progress=not args.no_progress, initial_eval=base["held_out"])
    runs = {m.name: {seed: results[f"{m.name}/seed{seed}"] for seed in seeds} for m in methods}

    report = {
        "format": 1,
        "kind": "lab",
        "settings": settings.to_dict(),
        "seeds": seeds,
        "methods": {
            m.name: {"label": setting_label(m), "description": m.description, "estimator": m.estimator,
                     "dynamic_sampling": m.dynamic_sampling, "algorithm": _plain(m.algorithm_config())}
            for m in methods
        },
        "base": base,
        "summary": summarize(runs),
        "runs": {name: {str(seed): run for seed, run in by_seed.items()} for name, by_seed in runs.items()},
        "timing": {**run_timing(started, jobs),
                   "runs_cpu_s": sum(run["cpu_s"] for by_seed in runs.values() for run in by_seed.values())},
    }
    write_report(out, "report", report, lab_markdown(report))
    plot_lab(runs, out, labels={m.name: setting_label(m) for m in methods})
    print(f"python -m lab: wrote {out / 'report.json'}, {out / 'report.md'} and plots in {out}/", file=sys.stderr)
    return 0


def _plain(config) -> dict:
    return OmegaConf.to_container(config, resolve=True)
