"""``python -m lab headroom``: where GRPO has room to learn, does acting AVSPO help or hurt, against DAPO beside it?

The learning-or-sharpening study (sharpening.py) read a test set GRPO nearly solved at greedy (3.4% errors), so it
could not see help or harm. This study is fixed here in code before its first comparison run
(docs/evidence/headroom.md states it in words):

1. **A testbed with headroom** (:data:`CANDIDATES`): fields of up to 6 digits (tiers 2-6), a warm-up of
   WARMUP_STEPS steps in which the sixth tier has weight SIXTH_TIER_WEIGHT against 4:3:2:1 for tiers 2-5, so tier 5
   is seen rarely and tier 6 almost never (the headroom pilot of docs/evidence/sharpening/headroom_pilot.json: GRPO
   took tier 5 from 0.17 to 0.78 greedy there). Candidates differ by task seed (initialisation, warm-up data,
   held-out and training problems). **The pilot** (:func:`pilot`, validation only) runs GRPO at PILOT_LR with
   PILOT_SEEDS from each candidate in order and keeps the first BASES_WANTED that pass :func:`testbed_gate`: on the
   evaluated tiers (ROOM_TIERS) a greedy validation gain of at least MIN_GAIN over the base, an end between
   END_BAND, and no tier the base had solved (greedy >= SOLVED) losing more than MAX_SOLVED_LOSS. The seeds per
   base follow from the pilot's variance (:func:`seeds_for_mde`: the primary's MDE at most MDE_TARGET).
2. **Every curve kept** (:class:`CurveEvaluation`): greedy and sampled (T = 1, one sample) accuracy on the evaluated
   tiers, validation and test, at the first step at or past every READ_EVERY rollouts from the start, with the
   rollouts that reading had cost (every sampled rollout, DAPO's discarded ones too) and the mean training entropy
   since the last reading; at the budget every tier, every temperature of TEMPERATURES and pass@PASS_K.
3. **Arms tuned alike on validation**: TUNED_ARMS on the grid LR_GRID with TUNING_SEEDS from the first base (one
   extension step where a best is on an edge, as sharpening.tune); DAPO runs at GRPO's best learning rate (the
   same estimator, its sampling the only change) and the ablations (all-fail only, all-pass only) at
   ``always``'s (UNTUNED_ARMS says whose): the issue's budget rule, stated in the report.
4. **Endpoints** (fixed here): (a) test accuracy on the evaluated tiers at the budget, each arm at its best
   temperature (chosen on validation), greedy beside it; (b) rollouts to GRPO's mean greedy test accuracy at the
   budget, by :func:`sustained_crossing` (the first reading from which every later reading stays within
   SUSTAIN_TOLERANCE below the target), "not reached" counted, GRPO run to GRPO_BUDGET_FACTOR x the budget;
   (c) stability: the share of runs whose greedy test reading at the budget lies more than FALL below their own
   best reading up to it, and the seed SD per base. (a) and its greedy reading: paired t over seed pairs with Holm
   over arms x both, and bases as the unit beside.
5. **Mechanism per tier**: of every step's batch, per tier, the share of collapsed groups augmented, the advantage
   mass they received and its sign, the entropy (train.signal_by_tier); ACR by regime per tier.
6. **The decision** (:func:`decision`): per acting AVSPO arm, a verdict (helps / hurts / not shown) from its pooled
   interval and its worst base; the default threshold_mode follows the rule written there.

Cost: at most 2.5 hours on 2 cores with --jobs 2 (COST_NOTE), resumable from the run cache in --out.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

import json

from ..experiment import RunSpec, default_jobs, prepare_base, quiet_process, run_all, run_timing
from ..methods import parse_method
from ..policy import generate
from ..settings import LabSettings
from ..task import (
    Problems,
    evaluation_set,
    held_out_split,
    max_response_length,
    rewards,
    stratified_split,
    training_set,
)
from ..train import load_policy
from .sharpening import (
    BASELINE,
    CLIP_BOUND_LIMIT,
    bases_interval,
    budget_steps,
    clip_bound_rate,
    pass_at_k,
    truncated,
    unstable,
)
from .statistics import ALPHA, POWER, holm, minimum_detectable_effect, paired_test
from .study import STUDY_SETTINGS, manipulation

# --- 1. The testbed and its pilot ---------------------------------------------------------------------------------
TIERS = (2, 3, 4, 5, 6)
WARMUP_STEPS = 1000
SIXTH_TIER_WEIGHT = 0.05
ROOM_TIERS = (5,)  # the evaluated tiers: where the headroom pilot saw GRPO learn from little
BUDGET_STEPS = 250


@dataclass(frozen=True)
class Candidate:
    """A candidate base: the testbed's warm-up from one task seed (initialisation, warm-up data and problem splits)."""

    name: str
    task_seed: int

    def settings(self) -> LabSettings:
        return dataclasses.replace(
            STUDY_SETTINGS, tiers=TIERS, mix=(1,) * len(TIERS), warmup_mix=(4, 3, 2, 1, SIXTH_TIER_WEIGHT),
            warmup_steps=WARMUP_STEPS, task_seed=self.task_seed,
            train_per_tier=BUDGET_STEPS * STUDY_SETTINGS.prompts // len(TIERS) // 2)


CANDIDATES = tuple(Candidate(f"wide{seed}", seed) for seed in range(5))
BASES_WANTED = 3
PILOT_LR = 6e-4  # the headroom pilot's learning rate, at which GRPO learned tier 5
PILOT_SEEDS = (998, 999)  # pilot seeds: tuning uses 1000-1001, the comparison 0, 1, ...
MIN_GAIN = 0.10
END_BAND = (0.5, 0.85)
SOLVED = 0.9
MAX_SOLVED_LOSS = 0.03
MDE_TARGET = 0.03
MAX_SEEDS = 4  # the cost cap (COST_NOTE); the MDE reached is reported whatever it is

# --- 2. What a run reads ------------------------------------------------------------------------------------------
EVAL_SEED = 47
EVAL_PER_TIER = (60, 60, 60, 1000, 200)  # most problems on the evaluated tier
VALIDATION_SHARE = 0.4
READ_EVERY = 8192
TEMPERATURES = (0.0, 0.3, 0.6, 1.0)  # 0: greedy
SAMPLES = 4
T1_SAMPLES = 16
PASS_K = 8
GRPO_BUDGET_FACTOR = 1.5

# --- 3. Arms ------------------------------------------------------------------------------------------------------
DEFAULT_ARM = "avspo"  # threshold_mode=adaptive: the default under test
ALWAYS_ARM = "avspo_always"
ALL_FAIL_ARM = "avspo_always_all_fail"
ALL_PASS_ARM = "avspo_always_all_pass"
TUNED_ARMS = (BASELINE, DEFAULT_ARM, ALWAYS_ARM)
UNTUNED_ARMS = {"dapo": BASELINE, ALL_FAIL_ARM: ALWAYS_ARM, ALL_PASS_ARM: ALWAYS_ARM}
ARMS = (*TUNED_ARMS, *UNTUNED_ARMS)
DROPPED = {"select_grpo": "collapse-aware prompt selection is last in the issue's order; the 2.5-hour cap leaves no "
                          "room for it"}
LR_GRID = (1.5e-4, 3e-4, 6e-4)
LR_EXTENSIONS = 1
TUNING_SEEDS = (1000, 1001)

# --- 4. Endpoints -------------------------------------------------------------------------------------------------
# A reading of 600 test problems at accuracy 0.7 has a binomial SE of about 0.019: a crossing is sustained while
# every later reading stays within about one SE below the target.
SUSTAIN_TOLERANCE = 0.02
FALL = 0.05
# --- 6. The decision ----------------------------------------------------------------------------------------------
HARM = 0.03  # a base's mean difference below -HARM with its seed interval below 0 is harm on that base
COST_NOTE = "at most 2.5 hours wall on 2 cores (--jobs 2), one invocation, resumable from the run cache"

QUICK = {"rollout_budget": 4 * 16 * 4, "prompts": 16, "held_out_per_tier": 8, "train_per_tier": 12,
         "warmup_steps": 40}
QUICK_PER_TIER = (3, 3, 3, 10, 3)
QUICK_READ_EVERY = 2 * 16 * 4


@dataclass(frozen=True)
class CurveEvaluation:
    """What a run of this study reads (train.Evaluation). Sampling is seeded by (task seed, step, temperature): arms
    read with the same random numbers."""

    tiers: tuple[int, ...]
    task_seed: int
    held_out_per_tier: int | tuple[int, ...]
    train_per_tier: int | tuple[int, ...]
    per_tier: tuple[int, ...]
    budget: int
    read_every: int
    read_test: bool

    def due(self, rollouts_total: int, final: bool, rollouts_before: int) -> bool:
        crossed = rollouts_total // self.read_every > rollouts_before // self.read_every
        return final or crossed or rollouts_total == self.budget

    def evaluate(self, policy, step: int, rollouts_total: int, final: bool) -> dict:
        parts = dict(zip(("validation", "test"), evaluation_parts(self)))
        if not self.read_test:
            del parts["test"]
        out = {"curve": {name: curve_reading(policy, problems, self, step) for name, problems in parts.items()}}
        if rollouts_total == self.budget:
            out["full"] = {name: full_reading(policy, problems, self, step) for name, problems in parts.items()}
        return out


@functools.lru_cache(maxsize=8)
def evaluation_parts(evaluation: CurveEvaluation) -> tuple[Problems, Problems]:
    """(validation, test): evaluation problems that are neither held out before nor in the training set, cut by tier."""
    earlier = held_out_split(evaluation.tiers, evaluation.held_out_per_tier, evaluation.task_seed)
    training = training_set(evaluation.tiers, evaluation.train_per_tier, evaluation.task_seed, earlier)
    excluded = Problems(np.concatenate([earlier.a, training.a]), np.concatenate([earlier.b, training.b]),
                        np.concatenate([earlier.tier, training.tier]), earlier.width)
    problems = evaluation_set(evaluation.tiers, evaluation.per_tier, EVAL_SEED, excluded)
    return stratified_split(problems, VALIDATION_SHARE, EVAL_SEED)


def solved(policy, problems: Problems, temperature: float, samples: int, evaluation: CurveEvaluation,
           step: int) -> np.ndarray:
    """1/0 per problem and sample at ``temperature`` (0: greedy). -> (N, samples) float64."""
    prompts = [p for p in problems.prompts() for _ in range(samples)]
    answers = [a for a in problems.answers() for _ in range(samples)]
    seed = int(np.random.SeedSequence([evaluation.task_seed, step, round(100 * temperature), 47]).generate_state(1)[0])
    generator = torch.Generator().manual_seed(seed) if temperature > 0 else None
    rollout = generate(policy, prompts, max_response_length(evaluation.tiers), temperature, generator)
    return rewards(rollout.response_ids, answers).double().numpy().reshape(-1, samples)


def room(problems: Problems) -> Problems:
    return problems.take(np.flatnonzero(np.isin(problems.tier, ROOM_TIERS)))


def curve_reading(policy, problems: Problems, evaluation: CurveEvaluation, step: int) -> dict:
    """Greedy and sampled (T = 1, one sample) accuracy on the evaluated tiers."""
    on_room = room(problems)
    return {"greedy": float(solved(policy, on_room, 0.0, 1, evaluation, step).mean()),
            "sampled": float(solved(policy, on_room, 1.0, 1, evaluation, step).mean())}


def full_reading(policy, problems: Problems, evaluation: CurveEvaluation, step: int) -> dict:
    """At the budget: accuracy on the evaluated tiers at every temperature, each tier's at 0 and 1, pass@PASS_K."""
    out: dict[str, Any] = {"accuracy": {}, "by_tier": {}}
    in_room = np.isin(problems.tier, ROOM_TIERS)
    for temperature in TEMPERATURES:
        samples = 1 if temperature == 0 else T1_SAMPLES if temperature == 1.0 else SAMPLES
        correct = solved(policy, problems, temperature, samples, evaluation, step)
        per_problem = correct.mean(axis=1)
        out["accuracy"][repr(temperature)] = float(per_problem[in_room].mean())
        if temperature in (0.0, 1.0):
            out["by_tier"][repr(temperature)] = {str(d): float(per_problem[problems.tier == d].mean())
                                                 for d in evaluation.tiers}
        if temperature == 1.0:
            out[f"pass@{PASS_K}"] = float(pass_at_k(correct[in_room], PASS_K).mean())
    return out


def evaluation_for(settings: LabSettings, per_tier: tuple[int, ...], read_every: int, read_test: bool,
                   budget: int) -> CurveEvaluation:
    return CurveEvaluation(settings.tiers, settings.task_seed, settings.held_out_per_tier, settings.train_per_tier,
                           per_tier, budget, read_every, read_test)


def base_reading(settings: LabSettings, state: dict, evaluation: CurveEvaluation) -> dict:
    """The base policy's readings (step 0): the curve's first point and the full reading."""
    policy = load_policy(settings, state)
    parts = dict(zip(("validation", "test"), evaluation_parts(evaluation)))
    if not evaluation.read_test:
        del parts["test"]
    return {"step": 0, "rollouts": 0,
            "curve": {n: curve_reading(policy, p, evaluation, 0) for n, p in parts.items()},
            "full": {n: full_reading(policy, p, evaluation, 0) for n, p in parts.items()}}


def at_budget(run: dict, budget: int) -> dict:
    """A run's full reading at the budget."""
    return next(e["full"] for e in run["evals"] if e["rollouts"] == budget and "full" in e)


def room_greedy(full: dict) -> float:
    return full["accuracy"]["0.0"]


def testbed_gate(base: dict, runs: Sequence[dict], budget: int) -> dict:
    """Design point 1 on validation: GRPO's mean greedy gain on the evaluated tiers at least MIN_GAIN, its end within
    END_BAND, and no tier the base had solved (greedy >= SOLVED) losing more than MAX_SOLVED_LOSS on average."""
    start = base["full"]["validation"]
    ends = [at_budget(r, budget)["validation"] for r in runs]
    end = float(np.mean([room_greedy(e) for e in ends]))
    gain = end - room_greedy(start)
    losses = {d: float(start["by_tier"]["0.0"][d] - np.mean([e["by_tier"]["0.0"][d] for e in ends]))
              for d, acc in start["by_tier"]["0.0"].items() if acc >= SOLVED}
    checks = {"gain": gain >= MIN_GAIN, "end_band": END_BAND[0] <= end <= END_BAND[1],
              "solved_tiers_kept": all(loss <= MAX_SOLVED_LOSS for loss in losses.values()),
              "clip": clip_bound_rate(runs, budget) <= CLIP_BOUND_LIMIT}
    return {"base_greedy": room_greedy(start), "end_greedy": end, "gain": gain, "solved_tier_losses": losses,
            "clip_bound": clip_bound_rate(runs, budget), "checks": checks, "passed": all(checks.values())}


def seeds_for_mde(per_base_ends: Mapping[str, Sequence[float]], bases: int) -> dict:
    """Seeds per base for the primary's MDE at most MDE_TARGET: the pooled within-base SD of GRPO's evaluated-tier
    greedy validation accuracy at the budget (the pilot's seeds), sqrt(2) x it as a pair's SD, the fewest seeds
    whose pairs (bases x seeds) reach the target, capped at MAX_SEEDS (the MDE at the cap is stated)."""
    deviations = [np.asarray(v) - np.mean(v) for v in per_base_ends.values() if len(v) >= 2]
    dof = sum(len(d) - 1 for d in deviations)
    sd = float(math.sqrt(sum(float((d ** 2).sum()) for d in deviations) / dof)) if dof else math.nan
    pair_sd = math.sqrt(2) * sd
    seeds = next((s for s in range(2, MAX_SEEDS + 1)
                  if minimum_detectable_effect(pair_sd, bases * s) <= MDE_TARGET), MAX_SEEDS)
    return {"within_base_sd": sd, "pair_sd": pair_sd, "seeds": seeds, "pairs": bases * seeds,
            "mde_at_seeds": minimum_detectable_effect(pair_sd, bases * seeds), "target": MDE_TARGET}


def pilot(out: Path, quick: bool, jobs: int, progress: bool) -> dict:
    """Design point 1: candidates in order until BASES_WANTED pass the gate (validation only)."""
    budget, per_tier, read_every = sizes(quick)
    cache = out / "runs"
    result: dict[str, Any] = {"lr": PILOT_LR, "seeds": list(PILOT_SEEDS), "candidates": {}, "accepted": []}
    ends = {}
    for candidate in CANDIDATES:
        settings, state = base_for(candidate, out, quick)
        evaluation = evaluation_for(settings, per_tier, read_every, False, budget)
        base = base_reading(settings, state, evaluation)
        specs = [RunSpec(f"pilot/grpo/{candidate.name}/seed{s}", dataclasses.replace(settings, lr=PILOT_LR),
                         parse_method(BASELINE), s, evaluation=evaluation) for s in PILOT_SEEDS]
        runs = list(run_all(specs, state, jobs, progress=progress, cache=cache).values())
        gate = testbed_gate(base, runs, budget)
        result["candidates"][candidate.name] = {"task_seed": candidate.task_seed, "base": base, "gate": gate,
                                                "curves": [curve_of(r) for r in runs]}
        ends[candidate.name] = [room_greedy(at_budget(r, budget)["validation"]) for r in runs]
        if progress:
            print(f"python -m lab headroom: pilot {candidate.name}: base {gate['base_greedy']:.3f} -> "
                  f"{gate['end_greedy']:.3f}, solved-tier losses {gate['solved_tier_losses']}, "
                  f"passed {gate['passed']}", file=sys.stderr)
        if gate["passed"] or quick:
            result["accepted"].append(candidate.name)
        if len(result["accepted"]) == BASES_WANTED:
            break
    result["seeds_for_mde"] = seeds_for_mde({n: ends[n] for n in result["accepted"]}, max(len(result["accepted"]), 1))
    return result


def sizes(quick: bool) -> tuple[int, tuple[int, ...], int]:
    """(budget, evaluation problems per tier, rollouts between curve readings)."""
    budget = dataclasses.replace(CANDIDATES[0].settings(), **(QUICK if quick else {})).rollout_budget
    return budget, QUICK_PER_TIER if quick else EVAL_PER_TIER, QUICK_READ_EVERY if quick else READ_EVERY


@functools.lru_cache(maxsize=None)
def _candidate(name: str) -> Candidate:
    return next(c for c in CANDIDATES if c.name == name)


def base_for(candidate: Candidate, out: Path, quick: bool) -> tuple[LabSettings, dict]:
    settings = dataclasses.replace(candidate.settings(), **(QUICK if quick else {}))
    state, _ = prepare_base(settings, out / "bases")
    return settings, state


def curve_of(run: dict) -> list[dict]:
    """A run's curve: each reading's step, rollouts (every sampled one), accuracies, and the mean training entropy of
    the steps since the reading before."""
    entropy = run["steps"]["entropy"]
    out, last = [], 0
    for e in run["evals"]:
        out.append({"step": e["step"], "rollouts": e["rollouts"], **{p: v for p, v in e["curve"].items()},
                    "entropy": float(np.mean(entropy[last:e["step"]])) if e["step"] > last else None})
        last = e["step"]
    return out


def run(args) -> int:
    """The study from one command line: ``--phase pilot`` writes pilot.json; ``all`` (the default) runs the pilot
    (from the cache when it ran), tuning and the comparison, and writes headroom.json and headroom.md."""
    quiet_process()
    started = time.perf_counter()
    jobs = args.jobs or default_jobs()
    progress = not args.no_progress
    out = args.out or Path("avspo_lab_headroom")
    out.mkdir(parents=True, exist_ok=True)
    found = pilot(out, args.quick, jobs, progress)
    found["timing"] = run_timing(started, jobs)
    (out / "pilot.json").write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    print(f"python -m lab headroom: wrote pilot.json in {out}/", file=sys.stderr)
    if args.phase == "pilot":
        return 0
    raise SystemExit("python -m lab headroom: the comparison phase is not written yet")
