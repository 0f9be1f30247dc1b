"""``avspo lab [run|sweep|study|tune]``: the CPU RLVR lab from the command line.

``avspo lab`` (``run``) runs every method over several seeds on the built-in default and writes
report.json, report.md and the plots; ``--quick`` is a short version of the same. ``avspo
lab sweep`` runs GRPO over bases x learning rates x G x tier mixes and tests early ACR as a predictor of the
final gain (sweep.py). ``avspo lab study``
is the powered comparison of docs/study.md (study.py); ``avspo lab tune`` one round of tuning GRPO alone on the
study's bases (tuning.py). The console script imports this module only for ``avspo lab``: verl and the lab load
for the lab alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from omegaconf import OmegaConf

from . import study, sweep, tuning
from .experiment import RunSpec, default_jobs, prepare_base, quiet_process, run_all, run_keys, run_timing, write_report
from .methods import DEFAULT_METHODS, PRESETS, STUDY_EXTRA, parse_method
from .report import lab_markdown, plot_lab, summarize
from .settings import LabSettings

# The built-in default and the quick check: what they change in LabSettings, and their seeds.
DEFAULT_SEEDS = 3
# A toy budget that checks everything runs: a short warm-up, few prompts, a small held-out split.
QUICK = {"steps": 8, "eval_every": 4, "prompts": 16, "warmup_steps": 300, "held_out_per_tier": 20, "eval_samples": 2}
QUICK_SEEDS = study.QUICK_SEEDS
# Options a design fixes (tuning runs on the study's): per action, whose design and what to do instead.
DESIGN_FIXED = ("steps", "prompts", "group-size", "temperature", "lr", "mix", "warmup-steps", "eval-every",
                "dapo-max-gen-batches", "task-seed", "train-per-tier")
DESIGN_ADVICE = {
    "study": ("study", "leave them out (docs/study.md)"),
    "tune": ("study", "tune GRPO's settings with --set KEY=VALUE (docs/study.md)"),
    "sweep": ("sweep", "leave them out: its grid varies base, lr, G and tier mix itself (docs/sweep.md)"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    default = LabSettings()
    parser.add_argument("action", nargs="?", choices=("run", "sweep", "study", "tune"), default="run",
                        help="run: compare methods (default); sweep: GRPO over bases x lr x G x tier mix, does early "
                             "ACR predict the final gain beyond early reward and base accuracy, on bases held out "
                             "(docs/sweep.md, about 2 hours on 2 cores); study: the powered comparison of "
                             "docs/study.md (hours of CPU); tune: one round of tuning GRPO on the study's bases "
                             "(docs/tuning/)")
    parser.add_argument("--quick", action="store_true",
                        help=f"short check: {QUICK_SEEDS} seeds and {QUICK['steps']} steps (study and sweep: their designs "
                             "on a toy budget and warm-up, a pipeline check)")
    parser.add_argument("--methods", nargs="+", metavar="METHOD", default=None,
                        help=f"methods to compare (run only): {' '.join(PRESETS)}, the study's "
                             f"{' '.join(STUDY_EXTRA)}, or avspo:key=value,key=value for any algorithm.avspo "
                             f"setting (default: {' '.join(DEFAULT_METHODS)})")
    parser.add_argument("--seeds", type=int, default=None,
                        help=f"number of seeds, 0..N-1 (default {DEFAULT_SEEDS}; --quick {QUICK_SEEDS}; "
                             f"sweep: {sweep.SWEEP.seeds} per configuration, --quick too)")
    parser.add_argument("--steps", type=int, default=None, help=f"RL steps per run (default {default.steps})")
    parser.add_argument("--prompts", type=int, default=None,
                        help=f"prompt groups per step, P (default {default.prompts})")
    parser.add_argument("--group-size", type=int, default=None,
                        help=f"samples per prompt, G (default {default.group_size})")
    parser.add_argument("--temperature", type=float, default=None,
                        help=f"sampling temperature of the rollouts (default {default.temperature})")
    parser.add_argument("--lr", type=float, default=None,
                        help=f"AdamW learning rate of the RL phase (default {default.lr:g})")
    parser.add_argument("--mix", default=None, metavar="W1,W2,...",
                        help=f"RL tier mix, one weight per tier {default.tiers} "
                             f"(default {','.join(f'{w:g}' for w in default.mix)})")
    parser.add_argument("--warmup-steps", type=int, default=None,
                        help=f"supervised warm-up steps of the base policy (default {default.warmup_steps})")
    parser.add_argument("--eval-every", type=int, default=None,
                        help=f"held-out evaluation every N steps (default {default.eval_every})")
    parser.add_argument("--dapo-max-gen-batches", type=int, default=None,
                        help=f"DAPO: most generation batches per step (default {default.dapo_max_gen_batches})")
    parser.add_argument("--task-seed", type=int, default=None,
                        help="seed of the held-out split, the base policy's initialisation and warm-up data "
                             f"(default {default.task_seed})")
    parser.add_argument("--jobs", type=int, default=None,
                        help="worker processes (default: the CPUs this process may use); results do not depend on it")
    parser.add_argument("--out", type=Path, default=None,
                        help="output directory (default ./avspo_lab, or ./avspo_lab_sweep for sweep)")
    parser.add_argument("--train-per-tier", type=int, default=None,
                        help="a fixed training set of N problems per tier in shuffled epochs (default: fresh problems "
                             "every step); the select_* methods need one")
    parser.add_argument("--bases", type=int, default=None,
                        help="study only: how many accepted base policies (default 3)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", default=None,
                        help="tune only: change one of GRPO's settings from the study's (lr, group_size, temperature, "
                             "kl_coef, grad_clip, clip_ratio); repeat for several")
    parser.add_argument("--label", default=None, help="tune only: what the round tries, for tuning.md")
    parser.add_argument("--candidates", nargs="+", metavar="NAME", default=None,
                        help="tune only: run GRPO from these base candidates (study.BASE_CANDIDATES by name, e.g. "
                             "carrydrop25) instead of the ones the base rule chooses; each is reported with its regime "
                             "in training")
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


def run(args: argparse.Namespace) -> int:
    quiet_process()
    try:
        if args.action in DESIGN_ADVICE:
            fixed = [f"--{name}" for name in DESIGN_FIXED if getattr(args, name.replace("-", "_")) is not None]
            if fixed:
                whose, advice = DESIGN_ADVICE[args.action]
                raise ValueError(f"the {whose}'s design fixes {', '.join(fixed)}; {advice}")
        if args.action == "tune":
            if args.methods is not None or args.quick or args.bases is not None:
                raise ValueError("`avspo lab tune` runs GRPO on the study's bases: no --methods, --quick, --bases")
            return tuning.run(args)
        if args.set is not None or args.label is not None or args.candidates is not None:
            raise ValueError("--set, --label and --candidates apply to `avspo lab tune` only")
        if args.action == "study":
            return study.run(args)
        if args.bases is not None:
            raise ValueError("--bases applies to `avspo lab study` only")
        if args.action == "sweep":
            if args.methods is not None:
                raise ValueError("--methods applies to `avspo lab` only: the sweep runs GRPO")
            return sweep.run(args)
        return run_lab(args)
    except ValueError as err:
        print(f"avspo lab: error: {err}", file=sys.stderr)
        return 2


def run_lab(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    settings = _settings(args, QUICK if args.quick else {})
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

    print(f"avspo lab: {len(methods)} methods x {len(seeds)} seeds, {settings.steps} steps; warming up the base "
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
            m.name: {"description": m.description, "estimator": m.estimator,
                     "dynamic_sampling": m.dynamic_sampling, "algorithm": _plain(m.algorithm_config())}
            for m in methods
        },
        "base": base,
        "summary": summarize(runs),
        "runs": {name: {str(seed): run for seed, run in by_seed.items()} for name, by_seed in runs.items()},
        "timing": run_timing(started, jobs),
    }
    write_report(out, "report", report, lab_markdown(report))
    plot_lab(runs, out)
    print(f"avspo lab: wrote {out / 'report.json'}, {out / 'report.md'} and plots in {out}/", file=sys.stderr)
    return 0


def _plain(config) -> dict:
    return OmegaConf.to_container(config, resolve=True)
