"""``python -m lab tasks``: tasks as the unit. On new tasks built to have room, does the paper's AVSPO beat GRPO?

Issue 56, items 1-5 and 7, registered here in code before any of its runs (docs/evidence/tasks.md states it in words;
its registration section is rendered from this module's design() and planned_mde() by
tasks_report.registration_markdown). One look: the design below is run once, in one invocation
(``python -m lab tasks --out docs/evidence/tasks --jobs 2``), resumable from its run cache; nothing is extended and no
family is added after a result.

1. **Tasks with room by construction** (:func:`choose_tasks`, validation only). A task is a task seed never used by
   an earlier study (TASK_SEEDS, from 5600; the earlier ones are EARLIER_TASK_SEEDS: the headroom study's 0-23, and 0,
   the default of the study, the sweeps, tuning and sharpening). Each gets the headroom study's testbed (tiers 2-6,
   warm-up weights 4:3:2:1 and SIXTH_TIER_WEIGHT) warmed up for WARMUP_STEPS steps, its weights kept at each of
   CHECKPOINTS along the way (train.warm_up_checkpoints: one warm-up, so its learning rate is still decaying at
   every checkpoint but the last; decided so, since the headroom study found that the warm-up's length moves a tier
   anywhere from blank to solved: checkpoints along one warm-up walk each tier through its learning). On each
   checkpoint, greedy accuracy per tier on the task's validation problems; :func:`frontier_of` names its frontier
   tier: the lowest tier below SOLVED, kept when it is one of FRONTIER_TIERS and its accuracy lies within LOW_WINDOW
   (so every lower tier is near solved and the frontier has room). :func:`frontier_choice` takes, of the checkpoints
   that qualify, the one whose frontier accuracy is nearest the window's middle (a tie: the later). Candidates are
   taken in order until N_TASKS qualify (at least MIN_TASKS, else no comparison). The gate reads the base only,
   never GRPO's gain.
   **Two regimes on purpose** (:func:`regime_for`): the i-th accepted task (0-based) trains on the frontier-heavy mix
   when i is even (all-fail groups should dominate early) and on the mostly-solved mix when i is odd (all-pass
   groups should), fixed before any RL run. The mixes are fixed training sets of TRAIN_PROBLEMS problems
   (:func:`train_counts`): FRONTIER_SHARE of them on the frontier tier, the rest spread evenly over the lower tiers,
   none above the frontier. The regime's manipulation check (:func:`regime_check`, recorded per task): over the
   first EARLY_SHARE of GRPO's steps (mean over its seeds), the all-fail share above the all-pass share in the
   frontier-heavy regime, below it in the mostly-solved one.
2. **Four arms at one learning rate** (ARMS, LR): GRPO; the paper's AVSPO (``avspo``: threshold_mode=adaptive,
   every other key at its default); ``always`` on all-pass groups only and on all-fail groups only
   (``avspo_always_all_pass``, ``avspo_always_all_fail``: augmented_collapses). LR = 6e-4: the learning rate the
   headroom study's tuning chose on validation for GRPO (and for both AVSPO arms it tuned) on another task, so no arm
   is tuned on these tasks. SEEDS: two RL seeds per task. The arms' manipulation check (:func:`acted`): an acting
   arm acted on a task when it augmented at least MIN_AUGMENTED_SHARE of the collapsed groups it targets (1 - its
   effective ACR / its ACR of them, summed over the steps of its runs); where it did not, the report says "did not
   act" for that task, and an arm that acted on fewer than MIN_TEST_TASKS tasks gets no verdict.
3. **One endpoint at one horizon** (:func:`run_endpoints`): frontier-tier test accuracy at T = 1, T1_SAMPLES samples
   per problem, averaged over the last ENDPOINT_READINGS readings (every READ_EVERY rollouts; the budget is
   BUDGET_STEPS steps of 128 x 4 rollouts for every arm); greedy the same way beside. **Primary**: the paper's AVSPO
   minus GRPO, tasks as the unit (per task the mean of its seed pairs; a paired t with tasks - 1 df), seed pairs
   beside; the two ablations secondary; Holm over the real tests only (:func:`compare`: an arm with fewer than
   MIN_TEST_TASKS acting tasks, or whose runs equal GRPO's or another arm's, is no test). The planned MDE
   (:func:`planned_mde`) is from the headroom study's seed SDs (PLANNING_SEED_SD) and an assumed spread of the true
   effect across tasks (PLANNING_TAU); the analysis reports the realised one. Secondary, pre-declared: the same per
   regime (:func:`by_regime`, tasks whose regime check passed).
4. **One look, test locked** (:func:`read_complete`): the analysis reads runs only from the run cache and refuses
   (TestLocked) unless every registered run is there, so no test reading is looked at before the last run is in.
5. **What a run's logs tell** (:func:`predictor`): from an acting run's own first EARLY_SHARE of steps, FEATURES (its
   all-fail share, the share of its advantage mass given to collapsed groups, its entropy against its start),
   an L2 logistic regression (PREDICTOR_L2, standardised features) predicts the sign of its task's effect (the arm's
   task mean minus GRPO's on the primary). Tested leaving one task out (all its runs, of every arm); it "tells" when
   its leave-one-task-out accuracy beats the majority sign's (fitted on the same folds) and a permutation test
   (PERMUTATIONS, the signs shuffled over tasks within each arm) gives p < PREDICTOR_ALPHA; else the report says it
   cannot tell.
7. **Cost** (COST_NOTE), measured before the registration on the shared 2-core machine, one torch thread: a step
   costs about 0.44 CPU-s (16 GRPO steps at these settings from a 300-step checkpoint with one full endpoint reading:
   11.0 CPU-s, the always arm 11.5); the readings are batched, one generate call per reading and temperature: a curve
   reading 0.32 CPU-s, one with the 16-sample T = 1 reading of 600 frontier test problems (9,600 rows) 2.6 CPU-s, the
   reading at the budget 4.0 CPU-s; a warm-up step 0.037 CPU-s. A run: about 120 CPU-s (the brief's estimate 170);
   a task's warm-up with its checkpoint readings about 60. 12 tasks x 4 arms x 2 seeds = 96 runs: 1.6 hours of wall
   time with --jobs 2 on idle cores (2.3 at 170 CPU-s a run), plus 10-20 minutes of warm-ups (12-40 candidates):
   about 2.5 hours at most, and resumable across sessions from the run cache in --out.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from avspo_plugin.state_files import read_json, write_json

from ..experiment import (
    RunSpec,
    content_fingerprint,
    default_jobs,
    in_workers,
    quiet_process,
    run_all,
    run_fingerprint,
    run_timing,
    state_digest,
    write_report,
)
from ..methods import parse_method
from ..settings import LabSettings
from ..task import Problems, held_out_split, stratified_split
from ..train import load_policy, warm_up_checkpoints
from . import headroom
from .sharpening import verified
from .statistics import ALPHA, holm, minimum_detectable_effect, paired_test
from .study import EFFECTIVE_SERIES
from .tasks_report import tasks_markdown

# --- 1. Tasks with room by construction -------------------------------------------------------------------------
TIERS = headroom.TIERS  # (2, 3, 4, 5, 6)
SIXTH_TIER_WEIGHT = headroom.SIXTH_TIER_WEIGHT
# Task seeds of earlier studies: headroom.py's candidates 0-23; study.py, sweep*.py, tuning.py and sharpening.py run
# LabSettings' default task seed, 0 (tests/lab/research/test_tasks.py checks both).
EARLIER_TASK_SEEDS = tuple(range(24))
TASK_SEEDS = tuple(range(5600, 5640))  # candidates, in order
N_TASKS = 12
MIN_TASKS = 10
WARMUP_STEPS = 1400
CHECKPOINTS = tuple(range(300, WARMUP_STEPS + 1, 100))
FRONTIER_TIERS = (3, 4, 5, 6)
SOLVED = 0.9  # a tier below the frontier is near solved: greedy validation accuracy at least this (headroom.SOLVED)
LOW_WINDOW = (0.05, 0.40)  # the frontier's greedy validation accuracy at the base
# The task's held-out split is its evaluation set, cut by tier into validation (VALIDATION_SHARE) and test: no
# warm-up batch and no training problem is ever one of them (both exclude the held-out split).
EVAL_PER_TIER = (300, 1000, 1000, 1000, 1000)
VALIDATION_SHARE = 0.4
SPLIT_SEED = 56
SALT = 56  # the readings' sampling seeds: (task seed, step, temperature, SALT)
REGIMES = ("all_fail", "all_pass")
REGIME_NAMES = {"all_fail": "frontier-heavy (all-fail groups should dominate)",
                "all_pass": "mostly solved (all-pass groups should dominate)"}
FRONTIER_SHARE = {"all_fail": 0.8, "all_pass": 0.2}
TRAIN_PROBLEMS = 7680  # each problem drawn 4 times over the budget (240 steps x 128 prompts)

# --- 2. Arms ----------------------------------------------------------------------------------------------------
BASELINE = "grpo"
PRIMARY_ARM = "avspo"  # the paper's AVSPO: threshold_mode=adaptive, every other key at its default
ABLATIONS = ("avspo_always_all_pass", "avspo_always_all_fail")
ARMS = (BASELINE, PRIMARY_ARM, *ABLATIONS)
LR = 6e-4  # the headroom study's tuned learning rate (GRPO's, and both AVSPO arms' it tuned), on another task
SEEDS = (0, 1)
MIN_AUGMENTED_SHARE = 0.10
MIN_TEST_TASKS = 3

# --- 3. Endpoints -----------------------------------------------------------------------------------------------
BUDGET_STEPS = 240
READ_EVERY = 16 * 512  # 16 steps: the budget is 15 reading intervals
ENDPOINT_READINGS = 3
T1_SAMPLES = 16
EARLY_SHARE = 0.25  # the early logs: the first quarter of the budget's steps
# Planning variance (docs/evidence/headroom/headroom.json, its curves): the SD over 6 seeds of a run's test T = 1
# accuracy on the evaluated tier averaged over its last 3 readings up to the budget, per base (wide0, wide0warm700).
PLANNING_SEED_SD = {"grpo": (0.0305, 0.0332), "avspo": (0.0392, 0.0398), "avspo_always": (0.0713, 0.0429)}
PLANNING_TAU = 0.05  # assumed SD across tasks of the true effect (the headroom study's two bases differed by 0.14)

# --- 5. The predictor -------------------------------------------------------------------------------------------
FEATURES = ("all_fail_share", "collapsed_mass_share", "entropy_change")
ENTROPY_START_STEPS = 8  # "its start": the mean entropy of its first steps
PREDICTOR_L2 = 1.0
PERMUTATIONS = 999
PREDICTOR_ALPHA = 0.05
MIN_PREDICTOR_TASKS = 6

COST_NOTE = ("96 runs (12 tasks x 4 arms x 2 seeds) at about 120 CPU-s each (measured; 170 planned for) and 12-40 "
             "warm-ups of about 60: 1.8-2.5 hours wall on 2 cores (--jobs 2), resumable across sessions from the run "
             "cache in --out")

# The pipeline on a toy budget (--quick): two candidates taken whatever the rule says, a few steps.
QUICK_SIZES = {"prompts": 16, "warmup_steps": 40, "checkpoints": (20, 40), "budget_steps": 4, "read_every": 16 * 4,
               "eval_per_tier": (6, 10, 10, 10, 10), "train_problems": 48, "tasks": 2}


@dataclass(frozen=True)
class Sizes:
    """The sizes of one execution: the registered design, or the quick pipeline check."""

    prompts: int = 128
    warmup_steps: int = WARMUP_STEPS
    checkpoints: tuple[int, ...] = CHECKPOINTS
    budget_steps: int = BUDGET_STEPS
    read_every: int = READ_EVERY
    eval_per_tier: tuple[int, ...] = EVAL_PER_TIER
    train_problems: int = TRAIN_PROBLEMS
    tasks: int = N_TASKS

    @property
    def budget(self) -> int:
        return self.budget_steps * self.prompts * 4


def sizes(quick: bool) -> Sizes:
    return Sizes(**QUICK_SIZES) if quick else Sizes()


def warmup_settings(task_seed: int, size: Sizes) -> LabSettings:
    """A task's settings before its frontier is known: the headroom testbed (headroom.Candidate) with the task's seed,
    its evaluation set as the held-out split, the study's learning rate and budget, no training set yet."""
    recipe = headroom.Candidate(f"task{task_seed}", task_seed, warmup_steps=size.warmup_steps,
                                sixth_tier_weight=SIXTH_TIER_WEIGHT).settings()
    return dataclasses.replace(recipe, held_out_per_tier=size.eval_per_tier, train_per_tier=0, lr=LR,
                               prompts=size.prompts, rollout_budget=size.budget)


def run_settings(task: Mapping[str, Any], size: Sizes) -> LabSettings:
    """A task's RL settings: its warm-up settings with its regime's fixed training set."""
    return dataclasses.replace(warmup_settings(task["task_seed"], size),
                               train_per_tier=train_counts(task["frontier"], task["regime"], size.train_problems))


@functools.lru_cache(maxsize=16)
def evaluation_parts(tiers: tuple[int, ...], task_seed: int, per_tier: tuple[int, ...]) -> tuple[Problems, Problems]:
    """(validation, test): the task's held-out split cut by tier."""
    return stratified_split(held_out_split(tiers, per_tier, task_seed), VALIDATION_SHARE, SPLIT_SEED)


def accuracy_by_tier(policy, problems: Problems, temperature: float, samples: int, task_seed: int, step: int,
                     tiers: tuple[int, ...]) -> dict[str, float]:
    """Mean accuracy per tier of ``samples`` responses per problem (one batched generate call)."""
    correct = verified(policy, problems, temperature, samples, (task_seed, step, SALT), tiers).mean(axis=1)
    return {str(d): float(correct[problems.tier == d].mean()) for d in tiers if (problems.tier == d).any()}


def frontier_of(by_tier: Mapping[str, float]) -> tuple[int | None, str]:
    """A checkpoint's frontier tier (None: it does not qualify) and why: the lowest tier below SOLVED, kept when it is
    one of FRONTIER_TIERS with its accuracy within LOW_WINDOW."""
    below = [int(d) for d, acc in sorted(by_tier.items(), key=lambda kv: int(kv[0])) if acc < SOLVED]
    if not below:
        return None, "every tier solved"
    tier, acc = below[0], by_tier[str(below[0])]
    if tier not in FRONTIER_TIERS:
        return None, f"tier {tier} not solved ({acc:.3f})"
    if not LOW_WINDOW[0] <= acc <= LOW_WINDOW[1]:
        return None, f"frontier tier {tier} at {acc:.3f}, outside {LOW_WINDOW}"
    return tier, f"frontier tier {tier} at {acc:.3f}"


def frontier_choice(readings: Mapping[int, Mapping[str, float]]) -> dict[str, Any]:
    """The rule on one task's checkpoints (checkpoint -> tier -> greedy validation accuracy): of those whose
    :func:`frontier_of` qualifies, the one with the frontier accuracy nearest LOW_WINDOW's middle (a tie: the later).
    ``checkpoint`` None when none qualifies."""
    middle = sum(LOW_WINDOW) / 2
    judged = {int(c): frontier_of(by_tier) for c, by_tier in readings.items()}
    qualifying = [c for c, (tier, _) in judged.items() if tier is not None]
    out: dict[str, Any] = {"checkpoint": None, "frontier": None, "frontier_accuracy": None,
                           "why": {str(c): why for c, (_, why) in sorted(judged.items())},
                           "qualifying": sorted(qualifying)}
    if qualifying:
        best = min(qualifying, key=lambda c: (abs(readings[c][str(judged[c][0])] - middle), -c))
        out.update(checkpoint=best, frontier=judged[best][0], frontier_accuracy=readings[best][str(judged[best][0])])
    return out


def regime_for(index: int) -> str:
    """The regime of the index-th accepted task (0-based), fixed before any RL run: even all_fail, odd all_pass."""
    return REGIMES[index % 2]


def train_counts(frontier: int, regime: str, total: int) -> tuple[int, ...]:
    """The fixed training set per tier of TIERS: FRONTIER_SHARE[regime] of ``total`` on the frontier, the rest evenly
    over the lower tiers, none above the frontier."""
    lower = [d for d in TIERS if d < frontier]
    if not lower:
        raise ValueError(f"frontier tier {frontier} has no lower tier in {TIERS}")
    on_frontier = round(FRONTIER_SHARE[regime] * total)
    each = (total - on_frontier) // len(lower)
    return tuple(on_frontier if d == frontier else each if d < frontier else 0 for d in TIERS)


def _checkpoint_path(settings: LabSettings, at: tuple[int, ...], cache: Path) -> Path:
    return cache / content_fingerprint({"settings": settings.to_dict(), "checkpoints": list(at)})


def read_checkpoints(task_seed: int, quick: bool, cache: Path) -> dict[str, dict[str, float]]:
    """One task's warm-up with its checkpoints (kept in ``cache``) and each checkpoint's greedy validation accuracy
    per tier (kept beside them); read back when there."""
    size = sizes(quick)
    settings = warmup_settings(task_seed, size)
    path = _checkpoint_path(settings, size.checkpoints, cache)
    if path.with_suffix(".json").exists():
        return read_json(str(path.with_suffix(".json")), "Delete it to warm that task up again.")
    quiet_process()
    states = warm_up_checkpoints(settings, size.checkpoints)
    validation, _ = evaluation_parts(settings.tiers, task_seed, settings.held_out_per_tier)
    readings = {str(c): accuracy_by_tier(load_policy(settings, s), validation, 0.0, 1, task_seed, 0, settings.tiers)
                for c, s in states.items()}
    cache.mkdir(parents=True, exist_ok=True)
    torch.save(states, path.with_suffix(".pt"))  # the states first: readings on disk mean their states are there
    write_json(str(path.with_suffix(".json")), readings)
    return readings


def checkpoint_state(task_seed: int, checkpoint: int, quick: bool, cache: Path) -> dict[str, torch.Tensor]:
    size = sizes(quick)
    path = _checkpoint_path(warmup_settings(task_seed, size), size.checkpoints, cache).with_suffix(".pt")
    return torch.load(path, weights_only=True)[checkpoint]


def choose_tasks(out: Path, quick: bool, jobs: int, progress: bool) -> dict[str, Any]:
    """Design point 1 (validation only): candidates in order, ``jobs`` at a time, until the design's tasks qualify;
    each accepted task's checkpoint, frontier, regime and training set. --quick takes the first candidates whatever
    the rule says (the last checkpoint, its lowest unsolved frontier tier)."""
    size = sizes(quick)
    cache = out / "checkpoints"
    result: dict[str, Any] = {"candidates": {}, "accepted": [], "tasks": {}}
    candidates = TASK_SEEDS[:size.tasks] if quick else TASK_SEEDS
    for start in range(0, len(candidates), max(jobs, 1)):
        chunk = candidates[start:start + max(jobs, 1)]
        for seed, readings in zip(chunk, in_workers(read_checkpoints, [(s, quick, cache) for s in chunk], jobs)):
            choice = frontier_choice({int(c): r for c, r in readings.items()})
            if quick and choice["checkpoint"] is None:
                last = max(int(c) for c in readings)
                below = [int(d) for d, a in readings[str(last)].items() if a < SOLVED and int(d) in FRONTIER_TIERS]
                tier = min(below) if below else FRONTIER_TIERS[-1]
                choice.update(checkpoint=last, frontier=tier, frontier_accuracy=readings[str(last)][str(tier)],
                              quick="taken without the rule")
            result["candidates"][str(seed)] = {"readings": readings, **choice}
            if choice["checkpoint"] is not None and len(result["accepted"]) < size.tasks:
                result["accepted"].append(seed)
            if progress:
                print(f"python -m lab tasks: task seed {seed}: {choice.get('quick', '')} checkpoint "
                      f"{choice['checkpoint']}, frontier {choice['frontier']}", file=sys.stderr)
        if len(result["accepted"]) >= size.tasks:
            break
    for index, seed in enumerate(result["accepted"]):
        chosen = result["candidates"][str(seed)]
        regime = regime_for(index)
        result["tasks"][task_name(seed)] = {
            "task_seed": seed, "index": index, "checkpoint": chosen["checkpoint"], "frontier": chosen["frontier"],
            "base_validation_greedy": chosen["readings"][str(chosen["checkpoint"])], "regime": regime,
            "train_per_tier": list(train_counts(chosen["frontier"], regime, size.train_problems))}
    return result


def task_name(task_seed: int) -> str:
    return f"task{task_seed}"


# --- 3. What a run reads ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FrontierEvaluation:
    """What a run of this study reads (train.Evaluation), on the schedule of the headroom study's curves (the first
    step at or past every read_every rollouts, and the budget): the frontier tier's greedy accuracy on validation and
    test and its T = 1 accuracy of one sample on test; at the last ``endpoint_readings`` readings also its T = 1
    accuracy over ``t1_samples`` samples per problem (``t1_mean``); at the budget every tier's greedy accuracy on
    both parts. Sampling is seeded by (task seed, step, temperature): every arm reads with the same random numbers."""

    tiers: tuple[int, ...]
    task_seed: int
    held_out_per_tier: tuple[int, ...]
    frontier: int
    budget: int
    read_every: int
    endpoint_readings: int = ENDPOINT_READINGS
    t1_samples: int = T1_SAMPLES

    due = headroom.CurveEvaluation.due

    def endpoint_reading(self, rollouts_total: int) -> bool:
        return rollouts_total >= self.budget - (self.endpoint_readings - 1) * self.read_every

    def evaluate(self, policy, step: int, rollouts_total: int, final: bool) -> dict:
        return self.read(policy, step, self.endpoint_reading(rollouts_total), rollouts_total == self.budget)

    def read(self, policy, step: int, endpoint: bool, full: bool) -> dict:
        validation, test = evaluation_parts(self.tiers, self.task_seed, self.held_out_per_tier)
        front = {name: p.take(np.flatnonzero(p.tier == self.frontier)) for name, p in
                 (("validation", validation), ("test", test))}

        def accuracy(problems: Problems, temperature: float, samples: int) -> float:
            return float(verified(policy, problems, temperature, samples, (self.task_seed, step, SALT),
                                  self.tiers).mean())

        curve = {"validation": {"greedy": accuracy(front["validation"], 0.0, 1)},
                 "test": {"greedy": accuracy(front["test"], 0.0, 1), "sampled": accuracy(front["test"], 1.0, 1)}}
        if endpoint:
            curve["test"]["t1_mean"] = accuracy(front["test"], 1.0, self.t1_samples)
        out: dict[str, Any] = {"curve": curve}
        if full:
            out["full"] = {name: {"greedy_by_tier": accuracy_by_tier(policy, p, 0.0, 1, self.task_seed, step,
                                                                     self.tiers)}
                           for name, p in (("validation", validation), ("test", test))}
        return out


def evaluation_for(settings: LabSettings, frontier: int, size: Sizes) -> FrontierEvaluation:
    return FrontierEvaluation(settings.tiers, settings.task_seed, tuple(settings.held_out_per_tier), frontier,
                              size.budget, size.read_every)


def base_reading(evaluation: FrontierEvaluation, settings: LabSettings, state: dict, cache: Path) -> dict:
    """The base's reading (step 0, every part), kept in ``cache`` under the settings and the evaluation."""
    path = cache / f"{content_fingerprint({'settings': settings.to_dict(), 'evaluation': dataclasses.asdict(evaluation)})}.json"
    if path.exists():
        return read_json(str(path), "Delete it to read that base again.")
    reading = {"step": 0, "rollouts": 0, **evaluation.read(load_policy(settings, state), 0, True, True)}
    write_json(str(path), reading, indent=1)
    return reading


def registered_runs(tasks: Mapping[str, Mapping], quick: bool) -> dict[str, list[RunSpec]]:
    """Every registered run, by task: ARMS x SEEDS, each at the task's settings, LR and evaluation."""
    size = sizes(quick)
    out = {}
    for name, task in tasks.items():
        settings = run_settings(task, size)
        evaluation = evaluation_for(settings, task["frontier"], size)
        out[name] = [RunSpec(f"{arm}/{name}/seed{s}", settings, parse_method(arm), s, evaluation=evaluation)
                     for arm in ARMS for s in SEEDS]
    return out


# --- 4. One look: the test lock ---------------------------------------------------------------------------------
class TestLocked(RuntimeError):
    """The analysis was asked to read test readings before every registered run was in the cache."""

    __test__ = False  # not a pytest class


def read_complete(specs: Mapping[str, Sequence[RunSpec]], digests: Mapping[str, str], cache: Path) -> dict[str, dict]:
    """Every registered run's result, read from the run cache (the runs of task t from the base of digest
    digests[t]); raises TestLocked, naming what is missing, unless every one is there."""
    results, missing = {}, []
    for task, task_specs in specs.items():
        for spec in task_specs:
            path = cache / f"{run_fingerprint(spec, digests[task])}.json"
            if path.exists():
                results[spec.key] = read_json(str(path), "Delete it to run that run again.")["result"]
            else:
                missing.append(spec.key)
    if missing:
        raise TestLocked(f"{len(missing)} of {sum(len(s) for s in specs.values())} registered runs are not in "
                         f"{cache}: no test reading is read until every one is ({', '.join(missing[:5])}"
                         f"{', ...' if len(missing) > 5 else ''})")
    return results


def by_arm(results: Mapping[str, dict], tasks: Sequence[str]) -> dict[str, dict[str, dict[int, dict]]]:
    """arm -> task -> seed -> run, from results keyed arm/task/seed<s>."""
    return {arm: {t: {s: results[f"{arm}/{t}/seed{s}"] for s in SEEDS} for t in tasks} for arm in ARMS}


# --- Early logs (no test reading) -------------------------------------------------------------------------------
def early_steps(run: dict) -> int:
    return max(1, round(EARLY_SHARE * len(run["steps"]["acr"])))


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def early_shares(runs: Sequence[dict]) -> dict[str, float]:
    """The all-fail and all-pass shares of the groups over each run's early steps, mean over runs."""
    return {kind: float(np.mean([np.mean(r["steps"][f"acr_{kind}"][:early_steps(r)]) for r in runs]))
            for kind in REGIMES}


def regime_check(regime: str, grpo_runs: Sequence[dict]) -> dict[str, Any]:
    """Design point 1's manipulation check: over GRPO's early steps, the regime's own kind of collapse dominates."""
    shares = early_shares(grpo_runs)
    other = REGIMES[1 - REGIMES.index(regime)]
    return {"regime": regime, "early_all_fail": shares["all_fail"], "early_all_pass": shares["all_pass"],
            "passed": bool(shares[regime] > shares[other])}


def acted(arm: str, runs: Sequence[dict]) -> dict[str, Any]:
    """Design point 2's manipulation check of an acting arm on one task: the share of the collapsed groups it targets
    (Method.acts_on) that it augmented, 1 - sum(effective ACR of them) / sum(their ACR) over its runs' steps."""
    effective_key, raw_key = EFFECTIVE_SERIES[parse_method(arm).acts_on]
    raw = float(sum(sum(r["steps"][raw_key]) for r in runs))
    effective = float(sum(sum(r["steps"][effective_key]) for r in runs))
    share = 1 - effective / raw if raw > 0 else None
    trigger = _mean([v for r in runs for v in r["steps"].get("triggered", [])])
    return {"augmented_share": share, "trigger_rate": trigger, "threshold": MIN_AUGMENTED_SHARE,
            "acted": share is not None and share >= MIN_AUGMENTED_SHARE}


def early_features(run: dict) -> dict[str, float]:
    """FEATURES of one run's early steps: the mean all-fail share of its groups; the share of its advantage mass
    (sum of |per-response advantage|) that went to collapsed groups; its mean entropy over the second half of the
    early steps relative to its first ENTROPY_START_STEPS steps, minus 1."""
    steps, n = run["steps"], early_steps(run)
    mass = sum(steps.get("advantage_abs_sum", [0.0] * n)[:n])
    collapsed = sum(sum(v for v in steps.get(f"collapsed_advantage_abs_sum_tier{d}", [])[:n] if v is not None)
                    for d in TIERS)
    start = max(1, min(ENTROPY_START_STEPS, n // 2))
    first, late = np.mean(steps["entropy"][:start]), np.mean(steps["entropy"][n // 2:n] or steps["entropy"][:n])
    return {"all_fail_share": float(np.mean(steps["acr_all_fail"][:n])),
            "collapsed_mass_share": float(collapsed / mass) if mass > 0 else 0.0,
            "entropy_change": float(late / first - 1) if first > 0 else 0.0}


# --- 3. Endpoints and the comparison ----------------------------------------------------------------------------
def run_endpoints(run: dict) -> dict[str, float]:
    """A run's endpoints: the mean over its last ENDPOINT_READINGS readings (those with ``t1_mean``) of the frontier
    tier's T = 1 test accuracy over T1_SAMPLES samples (``primary``) and of its greedy test accuracy (``greedy``);
    the last reading's beside."""
    readings = [e["curve"]["test"] for e in run["evals"] if "t1_mean" in e["curve"]["test"]]
    if len(readings) != ENDPOINT_READINGS:
        raise ValueError(f"a run has {len(readings)} endpoint readings, the design {ENDPOINT_READINGS}")
    return {"primary": float(np.mean([r["t1_mean"] for r in readings])),
            "greedy": float(np.mean([r["greedy"] for r in readings])),
            "last_t1": readings[-1]["t1_mean"], "last_greedy": readings[-1]["greedy"]}


def arm_test(endpoints: Mapping[str, Mapping[str, Mapping[int, dict]]], arm: str, tasks: Sequence[str],
             key: str = "primary") -> dict[str, Any] | None:
    """``arm`` minus GRPO on ``key`` over ``tasks``: tasks as the unit (each task's mean over its seed pairs; paired t
    with tasks - 1 df, its MDE the realised one), the seed pairs beside; None below 2 tasks."""
    per_task = {t: [endpoints[arm][t][s][key] - endpoints[BASELINE][t][s][key] for s in endpoints[arm][t]]
                for t in tasks}
    if len(per_task) < 2:
        return None
    test = paired_test([float(np.mean(d)) for d in per_task.values()])
    test.update(tasks=list(per_task), per_task={t: float(np.mean(d)) for t, d in per_task.items()},
                seed_pairs=paired_test([d for ds in per_task.values() for d in ds]))
    return test


def compare(endpoints: Mapping, counted: Mapping[str, Sequence[str]], key: str = "primary") -> dict[str, dict]:
    """Each acting arm against GRPO on ``key`` over the tasks where it acted (:func:`arm_test`); ``real``: a test of
    the family, not when the arm acted on fewer than MIN_TEST_TASKS tasks, nor when its runs' endpoints equal GRPO's
    or an earlier arm's (``why``). Holm over the real tests alone."""
    out: dict[str, dict] = {}
    seen: dict[tuple, str] = {}
    for arm in ARMS[1:]:
        tasks = list(counted[arm])
        values = tuple(endpoints[arm][t][s][key] for t in tasks for s in endpoints[arm][t])
        test = arm_test(endpoints, arm, tasks, key) if len(tasks) >= MIN_TEST_TASKS else None
        if test is None:
            out[arm] = {"real": False, "status": "did not act", "tasks": tasks,
                        "why": f"acted on {len(tasks)} tasks (< {MIN_TEST_TASKS})"}
            continue
        if all(endpoints[arm][t][s][key] == endpoints[BASELINE][t][s][key] for t in tasks for s in endpoints[arm][t]):
            test.update(real=False, status="not distinct", why="its endpoints equal GRPO's")
        elif (tuple(tasks), values) in seen:
            test.update(real=False, status="not distinct", why=f"its endpoints equal {seen[(tuple(tasks), values)]}'s")
        else:
            test.update(real=True)
            seen[(tuple(tasks), values)] = arm
        out[arm] = test
    real = {arm: t for arm, t in out.items() if t["real"]}
    if real:
        holm(real)
    return out


def verdict(test: Mapping[str, Any]) -> str:
    """"helps" / "hurts" when the Holm-corrected p is below ALPHA (by the sign of the task-mean difference), "not
    shown" otherwise; "did not act" or "not distinct" for an arm that is no test."""
    if not test["real"]:
        return test["status"]
    if test["p_holm"] < ALPHA:
        return "helps" if test["mean"] > 0 else "hurts"
    return "not shown"


def by_regime(endpoints: Mapping, counted: Mapping[str, Sequence[str]], tasks: Mapping[str, Mapping],
              checks: Mapping[str, Mapping]) -> dict[str, dict[str, Any]]:
    """Secondary, pre-declared: each acting arm per regime over the tasks of that regime whose regime check passed
    and where the arm acted (a paired t over tasks from 2 tasks on, the mean alone for one; no Holm)."""
    out: dict[str, dict[str, Any]] = {}
    for arm in ARMS[1:]:
        out[arm] = {}
        for regime in REGIMES:
            kept = [t for t in counted[arm] if tasks[t]["regime"] == regime and checks[t]["passed"]]
            test = arm_test(endpoints, arm, kept)
            if test is None and kept:
                d = [endpoints[arm][t][s]["primary"] - endpoints[BASELINE][t][s]["primary"]
                     for t in kept for s in endpoints[arm][t]]
                test = {"mean": float(np.mean(d)), "n": 1, "tasks": kept}
            out[arm][regime] = test or {"n": 0, "tasks": []}
    return out


def planned_mde(tasks: int = N_TASKS, seeds: int = len(SEEDS), tau: float = PLANNING_TAU) -> dict[str, Any]:
    """The MDE planned before any run: a task's mean difference has SD sqrt(tau^2 + (sd_arm^2 + sd_grpo^2) / seeds),
    each seed SD the root mean square of PLANNING_SEED_SD's (the ablations: avspo_always's); MDE at 80% power at
    ALPHA and at Holm's strictest level (ALPHA / 3), with tau and with no spread across tasks."""
    def rms(values: Sequence[float]) -> float:
        return math.sqrt(float(np.mean(np.square(values))))

    out: dict[str, Any] = {"tasks": tasks, "seeds": seeds, "tau": tau, "seed_sd": PLANNING_SEED_SD}
    for arm, source in ((PRIMARY_ARM, "avspo"), ("ablations", "avspo_always")):
        pair_var = (rms(PLANNING_SEED_SD[source]) ** 2 + rms(PLANNING_SEED_SD[BASELINE]) ** 2) / seeds
        row = {}
        for name, spread in (("with_tau", tau), ("seed_noise_only", 0.0)):
            sd = math.sqrt(spread ** 2 + pair_var)
            row[name] = {"task_sd": sd, "mde": minimum_detectable_effect(sd, tasks),
                         "mde_holm": minimum_detectable_effect(sd, tasks, ALPHA / (len(ARMS) - 1))}
        out[arm] = row
    return out


# --- 5. The predictor -------------------------------------------------------------------------------------------
def logistic_fit(x: np.ndarray, y: np.ndarray, l2: float = PREDICTOR_L2, iterations: int = 50) -> np.ndarray:
    """L2-penalised logistic regression by Newton's method (the intercept unpenalised). x: (n, k), y: (n,) 0/1 ->
    (k + 1,) weights, intercept first."""
    design = np.column_stack([np.ones(len(x)), x])
    w = np.zeros(design.shape[1])
    penalty = np.diag([0.0] + [l2] * x.shape[1])
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-design @ w))
        gradient = design.T @ (p - y) + penalty @ w
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + penalty + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return w


def loo_accuracy(x: np.ndarray, y: np.ndarray, groups: np.ndarray) -> tuple[float, float]:
    """Leave-one-group-out accuracy of the logistic rule (features standardised on the training fold) and of the
    training fold's majority sign. x: (n, k), y: (n,) 0/1, groups: (n,) task labels."""
    hits, base_hits = 0, 0
    for g in np.unique(groups):
        held, kept = groups == g, groups != g
        majority = float(y[kept].mean() >= 0.5)
        base_hits += int((y[held] == majority).sum())
        if len(np.unique(y[kept])) < 2:
            predicted = np.full(held.sum(), majority)
        else:
            mean, sd = x[kept].mean(axis=0), x[kept].std(axis=0)
            sd[sd == 0] = 1.0
            w = logistic_fit((x[kept] - mean) / sd, y[kept])
            predicted = (w[0] + ((x[held] - mean) / sd) @ w[1:] > 0).astype(float)
        hits += int((predicted == y[held]).sum())
    return hits / len(y), base_hits / len(y)


def predictor(samples: Sequence[Mapping[str, Any]], permutations: int = PERMUTATIONS, seed: int = 56) -> dict[str, Any]:
    """Design point 5. samples: one per acting run, {"arm", "task", "features" (FEATURES), "effect" (its arm's task
    mean difference)}; the label is the effect's sign (an effect of exactly 0 is left out). Leave-one-task-out
    accuracy against the majority sign's, a permutation p (signs shuffled over tasks within each arm), the verdict."""
    kept = [s for s in samples if s["effect"] != 0]
    tasks = sorted({s["task"] for s in kept})
    out: dict[str, Any] = {"features": list(FEATURES), "runs": len(kept), "tasks": len(tasks), "l2": PREDICTOR_L2,
                           "permutations": permutations}
    y = np.array([float(s["effect"] > 0) for s in kept])
    if len(tasks) < MIN_PREDICTOR_TASKS or len(np.unique(y)) < 2:
        out.update(verdict="cannot tell", why=f"{len(tasks)} tasks (at least {MIN_PREDICTOR_TASKS}) with effects of "
                                              f"{'both signs' if len(np.unique(y)) == 2 else 'one sign or none'}")
        return out
    x = np.array([[s["features"][f] for f in FEATURES] for s in kept], dtype=np.float64)
    groups = np.array([s["task"] for s in kept])
    accuracy, majority = loo_accuracy(x, y, groups)
    rng = np.random.default_rng(seed)
    labels = {(s["arm"], s["task"]): float(s["effect"] > 0) for s in kept}
    arms = sorted({a for a, _ in labels})
    at_least = 0
    for _ in range(permutations):
        shuffled = {}
        for arm in arms:
            keys = [k for k in labels if k[0] == arm]
            shuffled.update(zip(keys, rng.permutation([labels[k] for k in keys])))
        permuted = np.array([shuffled[(s["arm"], s["task"])] for s in kept])
        at_least += loo_accuracy(x, permuted, groups)[0] >= accuracy
    p = (1 + at_least) / (1 + permutations)
    tells = accuracy > majority and p < PREDICTOR_ALPHA
    out.update(loo_accuracy=accuracy, majority_accuracy=majority, p=p, verdict="tells" if tells else "cannot tell",
               why=f"leave-one-task-out accuracy {accuracy:.3f} against the majority sign's {majority:.3f}, "
                   f"permutation p {p:.3f}")
    return out


# --- The analysis (after the lock) ------------------------------------------------------------------------------
def analyse(chosen: Mapping[str, Any], specs: Mapping[str, Sequence[RunSpec]], digests: Mapping[str, str],
            cache: Path, base_readings: Mapping[str, dict], quick: bool,
            permutations: int = PERMUTATIONS) -> dict[str, Any]:
    """Everything the report says, from the run cache through the test lock (:func:`read_complete`)."""
    tasks = chosen["tasks"]
    runs = by_arm(read_complete(specs, digests, cache), list(tasks))
    checks = {t: regime_check(tasks[t]["regime"], list(runs[BASELINE][t].values())) for t in tasks}
    manipulation = {arm: {t: acted(arm, list(runs[arm][t].values())) for t in tasks} for arm in ARMS[1:]}
    counted = {arm: [t for t in tasks if manipulation[arm][t]["acted"]] for arm in ARMS[1:]}
    endpoints = {arm: {t: {s: run_endpoints(r) for s, r in by_seed.items()} for t, by_seed in by_task.items()}
                 for arm, by_task in runs.items()}
    primary = compare(endpoints, counted)
    features = {arm: {t: {s: early_features(r) for s, r in by_seed.items()} for t, by_seed in runs[arm].items()}
                for arm in ARMS}
    effects = {arm: {t: float(np.mean([endpoints[arm][t][s]["primary"] - endpoints[BASELINE][t][s]["primary"]
                                       for s in SEEDS])) for t in tasks} for arm in ARMS[1:]}
    samples = [{"arm": arm, "task": t, "features": features[arm][t][s], "effect": effects[arm][t]}
               for arm in ARMS[1:] for t in counted[arm] for s in SEEDS]
    return {
        "format": 1,
        "kind": "tasks",
        "design": design(quick),
        "planned_mde": planned_mde(),
        "frontier_rule": chosen,
        "tasks": {t: {**v, "regime_check": checks[t], "base_reading": base_readings[t]} for t, v in tasks.items()},
        "manipulation": manipulation,
        "counted": counted,
        "endpoints": {arm: {t: {str(s): v for s, v in by_seed.items()} for t, by_seed in by_task.items()}
                      for arm, by_task in endpoints.items()},
        "curves": {arm: {t: {str(s): headroom.curve_of(r) for s, r in by_seed.items()} for t, by_seed in by_task.items()}
                   for arm, by_task in runs.items()},
        "full_readings": {arm: {t: {str(s): next(e["full"] for e in r["evals"] if "full" in e)
                                    for s, r in by_seed.items()} for t, by_seed in by_task.items()}
                          for arm, by_task in runs.items()},
        "comparison": {"primary": primary, "greedy": compare(endpoints, counted, "greedy"),
                       "as_shipped": arm_test(endpoints, PRIMARY_ARM, list(tasks))},
        "verdicts": {arm: verdict(test) for arm, test in primary.items()},
        "by_regime": by_regime(endpoints, counted, tasks, checks),
        "early_logs": {arm: {t: {str(s): v for s, v in by_seed.items()} for t, by_seed in by_task.items()}
                       for arm, by_task in features.items()},
        "predictor": predictor(samples, permutations),
        "run_cost": {arm: {"cpu_s": float(np.mean([r["cpu_s"] for by in runs[arm].values() for r in by.values()])),
                           "wall_s": float(np.mean([r["wall_s"] for by in runs[arm].values() for r in by.values()]))}
                     for arm in ARMS},
    }


def design(quick: bool) -> dict[str, Any]:
    size = sizes(quick)
    return {"tiers": list(TIERS), "task_seeds": list(TASK_SEEDS), "earlier_task_seeds": list(EARLIER_TASK_SEEDS),
            "tasks": size.tasks, "min_tasks": MIN_TASKS, "warmup_steps": size.warmup_steps,
            "checkpoints": list(size.checkpoints), "sixth_tier_weight": SIXTH_TIER_WEIGHT,
            "frontier_tiers": list(FRONTIER_TIERS), "solved": SOLVED, "low_window": list(LOW_WINDOW),
            "eval_per_tier": list(size.eval_per_tier), "validation_share": VALIDATION_SHARE,
            "frontier_share": FRONTIER_SHARE, "train_problems": size.train_problems, "arms": list(ARMS),
            "baseline": BASELINE, "primary_arm": PRIMARY_ARM, "ablations": list(ABLATIONS), "lr": LR,
            "seeds": list(SEEDS), "min_augmented_share": MIN_AUGMENTED_SHARE, "min_test_tasks": MIN_TEST_TASKS,
            "budget_steps": size.budget_steps, "budget": size.budget, "read_every": size.read_every,
            "endpoint_readings": ENDPOINT_READINGS, "t1_samples": T1_SAMPLES, "early_share": EARLY_SHARE,
            "features": list(FEATURES), "predictor_l2": PREDICTOR_L2, "permutations": PERMUTATIONS,
            "predictor_alpha": PREDICTOR_ALPHA, "alpha": ALPHA, "planning_tau": PLANNING_TAU, "cost": COST_NOTE,
            "quick": quick}


def registration() -> dict[str, Any]:
    """What the report records of the code it ran: the checkout's commit, the last commit that changed this design
    (the registration, unless a later one did), and whether lab/ had changes not committed."""
    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    return {"head": git("rev-parse", "HEAD"), "design_commit": git("log", "-1", "--format=%H", "--",
                                                                     "lab/research/tasks.py"),
            "lab_changes": git("status", "--porcelain", "--", "lab").splitlines()}


# --- The study from one command line ----------------------------------------------------------------------------
def run(args) -> int:
    """``--phase bases`` writes bases.json (the frontier rule, validation only); ``all`` (the default) goes on with every
    registered run and writes tasks.json and tasks.md. A second invocation with the same --out reads back every
    warm-up and finished run."""
    quiet_process()
    started = time.perf_counter()
    jobs = args.jobs or default_jobs()
    progress = not args.no_progress
    quick = args.quick
    out = args.out or Path("avspo_lab_tasks")
    registered = registration()
    if not quick and registered["lab_changes"]:
        raise SystemExit("python -m lab tasks: lab/ has changes not committed; the registered study runs from a frozen "
                         f"worktree ({len(registered['lab_changes'])} changed: {registered['lab_changes'][:3]})")
    out.mkdir(parents=True, exist_ok=True)
    chosen = choose_tasks(out, quick, jobs, progress)
    (out / "bases.json").write_text(json.dumps(chosen, indent=1) + "\n", encoding="utf-8")
    if args.phase == "bases":
        print(f"python -m lab tasks: wrote bases.json in {out}/", file=sys.stderr)
        return 0
    if len(chosen["tasks"]) < (sizes(quick).tasks if quick else MIN_TASKS):
        raise SystemExit(f"python -m lab tasks: {len(chosen['tasks'])} tasks passed the frontier rule (bases.json in "
                         f"{out}/), the design needs at least {MIN_TASKS}: no comparison")
    specs = registered_runs(chosen["tasks"], quick)
    digests, readings = {}, {}
    for name, task in chosen["tasks"].items():
        state = checkpoint_state(task["task_seed"], task["checkpoint"], quick, out / "checkpoints")
        digests[name] = state_digest(state)
        run_all(specs[name], state, jobs, progress=progress, cache=out / "runs")
    for name, task in chosen["tasks"].items():  # the bases' test readings too only once every run is in
        state = checkpoint_state(task["task_seed"], task["checkpoint"], quick, out / "checkpoints")
        readings[name] = base_reading(specs[name][0].evaluation, specs[name][0].settings, state, out / "base_readings")
    report = analyse(chosen, specs, digests, out / "runs", readings, quick)
    report["registration"] = registered
    report["timing"] = {**run_timing(started, jobs), "runs": sum(len(s) for s in specs.values())}
    write_report(out, "tasks", report, tasks_markdown(report))
    print(f"python -m lab tasks: wrote tasks.json and tasks.md in {out}/", file=sys.stderr)
    return 0
