"""``python -m lab study``, ``python -m lab tune``, ``python -m lab sweep``: the research actions, each with its own options.

``study`` is the powered comparison of docs/evidence/study.md (study.py), ``tune`` one round of tuning GRPO alone on the
study's bases (tuning.py, docs/evidence/tuning/), ``sweep`` GRPO over bases x learning rates x G x tier mixes, testing early
ACR as a predictor of the final gain (sweep.py, docs/evidence/sweep.md).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from ..methods import PRESETS, STUDY_EXTRA
from ..settings import QUICK_SEEDS
from . import headroom, sharpening, study, sweep, tasks, tuning

RUNS: dict[str, Callable[[argparse.Namespace], int]] = {"study": study.run, "tune": tuning.run, "sweep": sweep.run,
                                                        "sharpening": sharpening.run, "headroom": headroom.run,
                                                        "tasks": tasks.run}
# The options each action shares with the demo (`python -m lab`). They have default SUPPRESS here, so that one given
# before the action's name, where the demo's parser reads it, stands as it does after the name; the demo's other
# options given there are refused (lab/command.py).
SHARED_WITH_DEMO = {
    "study": ("quick", "methods", "seeds", "jobs", "out", "no_progress"),
    "tune": ("seeds", "jobs", "out", "no_progress"),
    "sweep": ("quick", "seeds", "jobs", "out", "no_progress"),
    "sharpening": ("quick", "jobs", "out", "no_progress"),
    "headroom": ("quick", "jobs", "out", "no_progress"),
    "tasks": ("quick", "jobs", "out", "no_progress"),
}
STUDY_HELP = "the powered comparison of docs/evidence/study.md: gates, then every method on the bases that pass (hours of CPU)"
TUNE_HELP = "one round of tuning GRPO alone on the study's bases, on seeds the study does not use (docs/evidence/tuning/)"
SWEEP_HELP = ("GRPO over bases x lr x G x tier mix: does early ACR predict the final gain beyond early reward and base "
              "accuracy, on bases held out (docs/evidence/sweep.md, about 2 hours on 2 cores)")


SHARPENING_HELP = ("learning or sharpening: GRPO and AVSPO's default each tuned on validation and read at its own "
                   "best temperature on test problems no choice saw (docs/evidence/sharpening.md, about 3 hours on 2 cores)")

HEADROOM_HELP = ("where GRPO has room to learn: GRPO, DAPO, AVSPO's default and always, tuned alike on validation, read "
                 "on test with every curve kept (docs/evidence/headroom.md, at most 2.5 hours on 2 cores)")

TASKS_HELP = ("tasks as the unit (issue 56): new tasks with room by construction, two regimes on purpose, GRPO against the "
              "paper's AVSPO and always on all-pass or all-fail groups only, one look with the test locked "
              "(docs/evidence/tasks.md, about 2.5 hours on 2 cores, resumable)")


def add_parsers(actions: argparse._SubParsersAction) -> None:
    """A parser for each action of RUNS, with its options, among the actions of ``python -m lab``."""
    study_parser = actions.add_parser(
        "study", help=STUDY_HELP,
        description=f"{STUDY_HELP}. Its design fixes the training settings (docs/evidence/study.md): the demo's --steps, --lr, "
                    "... are not options here.")
    study_parser.add_argument("--quick", action="store_true", default=argparse.SUPPRESS,
                              help=f"the study's design on a toy budget and warm-up, {QUICK_SEEDS} seeds: a "
                                   "pipeline check (gates reported, not enforced)")
    study_parser.add_argument("--methods", nargs="+", metavar="METHOD", default=argparse.SUPPRESS,
                              help=f"methods to compare, the baseline {study.BASELINE} among them: "
                                   f"{' '.join(PRESETS)} {' '.join(STUDY_EXTRA)} or avspo:key=value,... "
                                   f"(default: {' '.join(study.STUDY_METHODS)})")
    study_parser.add_argument("--bases", type=int, default=None, help="how many accepted base policies (default 3)")
    _add_run_options(study_parser, out="./avspo_lab_study",
                     seeds=f"seeds per base of the primary methods, 0..N-1 (default {study.PRIMARY_SEEDS}; --quick "
                           f"{QUICK_SEEDS})")

    tune_parser = actions.add_parser(
        "tune", help=TUNE_HELP,
        description=f"{TUNE_HELP}. It runs the study's settings with the changes given by --set (docs/evidence/study.md).")
    tune_parser.add_argument("--set", action="append", metavar="KEY=VALUE", default=None,
                             help=f"change one of GRPO's settings from the study's ({', '.join(tuning.TUNABLE)}); "
                                  "repeat for several")
    tune_parser.add_argument("--label", default=None, help="what the round tries, for tuning.md")
    tune_parser.add_argument("--candidates", nargs="+", metavar="NAME", default=None,
                             help="run GRPO from these base candidates (study.BASE_CANDIDATES by name, e.g. "
                                  "carrydrop25) instead of the ones the base rule chooses; each is reported with its "
                                  "regime in training")
    _add_run_options(tune_parser, out="docs/evidence/tuning",
                     seeds=f"tuning seeds per base, from {tuning.TUNING_SEEDS[0]} on (default 2)")

    sweep_parser = actions.add_parser(
        "sweep", help=SWEEP_HELP,
        description=f"{SWEEP_HELP}. Its grid varies base, lr, G and tier mix itself and fixes the rest (docs/evidence/sweep.md): "
                    "the demo's --steps, --lr, ... are not options here.")
    sweep_parser.add_argument("--quick", action="store_true", default=argparse.SUPPRESS,
                              help=f"the sweep's pipeline on a toy budget and warm-up: {len(sweep.QUICK_SWEEP.bases)} "
                                   "bases, one learning rate")
    sweep_parser.add_argument("--confirm", action="store_true",
                              help=f"the pre-registered confirmation sweep instead (sweep.CONFIRM_SWEEP: "
                                   f"{len(sweep.CONFIRM_SWEEP.bases)} new bases, lr "
                                   f"{' '.join(f'{lr:g}' for lr in sweep.CONFIRM_SWEEP.learning_rates)}, seeds from "
                                   f"{sweep.CONFIRM_SWEEP.first_seed}; default --out ./avspo_lab_sweep_confirm); "
                                   "with --quick its pipeline on a toy budget")
    _add_run_options(sweep_parser, out="./avspo_lab_sweep",
                     seeds=f"seeds per configuration, 0..N-1 (default {sweep.SWEEP.seeds}, --quick too)")

    _add_fixed_design_parser(actions, "sharpening", SHARPENING_HELP,
                             "Its design fixes everything else (sharpening.py): seeds, learning rates and bases are "
                             "not options here.", "the design on a toy budget, one base, two learning rates: a "
                             "pipeline check")
    headroom_parser = _add_fixed_design_parser(
        actions, "headroom", HEADROOM_HELP, "Its design fixes everything else (headroom.py); a second invocation with "
        "the same --out reads every finished run back from its cache.", "the design on a toy budget and warm-up: a "
        "pipeline check")
    headroom_parser.add_argument("--phase", choices=("pilot", "all"), default="all",
                                 help="pilot: the testbed pilot alone (validation only); all: pilot, tuning, "
                                      "comparison and report (default)")
    tasks_parser = _add_fixed_design_parser(
        actions, "tasks", TASKS_HELP, "Its design is registered in lab/research/tasks.py: nothing else is an option; a "
        "second invocation with the same --out reads every warm-up and finished run back.", "the design on a toy "
        "budget and warm-up, two tasks taken whatever the rule says: a pipeline check")
    tasks_parser.add_argument("--phase", choices=("bases", "all"), default="all",
                              help="bases: the warm-ups and the frontier rule alone (validation only); all: bases, "
                                   "every registered run and the report (default)")


def _add_fixed_design_parser(actions: argparse._SubParsersAction, name: str, help_text: str, fixed: str,
                             quick: str) -> argparse.ArgumentParser:
    """The parser of a study whose design fixes seeds, learning rates and bases: --quick and the shared run options."""
    parser = actions.add_parser(name, help=help_text, description=f"{help_text}. {fixed}")
    parser.add_argument("--quick", action="store_true", default=argparse.SUPPRESS, help=quick)
    _add_run_options(parser, out=f"./avspo_lab_{name}", seeds=None)
    return parser


def _add_run_options(parser: argparse.ArgumentParser, seeds: str | None, out: str) -> None:
    """The options every action shares with the demo: seeds (unless None: the design fixes them), workers, output
    directory, progress bar."""
    if seeds is not None:
        parser.add_argument("--seeds", type=int, default=argparse.SUPPRESS, help=seeds)
    parser.add_argument("--jobs", type=int, default=argparse.SUPPRESS,
                        help="worker processes (default: the CPUs this process may use); results do not depend on it")
    parser.add_argument("--out", type=Path, default=argparse.SUPPRESS, help=f"output directory (default {out})")
    parser.add_argument("--no-progress", action="store_true", default=argparse.SUPPRESS, help="no progress bar")
