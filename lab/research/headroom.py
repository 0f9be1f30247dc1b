"""``python -m lab headroom``: where GRPO has room to learn, does acting AVSPO help or hurt, against DAPO beside it?

The learning-or-sharpening study (sharpening.py) read a test set GRPO nearly solved at greedy (3.4% errors), so it
could not see help or harm. This study is fixed here in code before its first comparison run
(docs/evidence/headroom.md states it in words):

1. **A testbed with headroom** (:data:`CANDIDATES`): fields of up to 6 digits (tiers 2-6), a warm-up of
   WARMUP_STEPS steps in which the sixth tier has weight SIXTH_TIER_WEIGHT against 4:3:2:1 for tiers 2-5, so tier 5
   is seen rarely and tier 6 almost never (the headroom pilot of docs/evidence/sharpening/headroom_pilot.json: GRPO
   took tier 5 from 0.17 to 0.78 greedy there). Candidates differ by task seed (initialisation, warm-up data,
   held-out and training problems), then (WARMUP_FAMILY, added when one task seed of 24 passed) by the warm-up's
   length on the one task seed that passed. **The pilot** (:func:`pilot`, validation only) runs GRPO at PILOT_LR with
   PILOT_SEEDS from each candidate in order and keeps the first BASES_WANTED that pass :func:`headroom_gate`: on the
   evaluated tiers (ROOM_TIERS) a greedy validation gain of at least MIN_GAIN over the base, an end between
   END_BAND, and no tier the base had solved (greedy >= SOLVED) losing more than MAX_SOLVED_LOSS (too few such
   candidates: filled up with those passing the learning checks, their losses reported). Task seeds from
   SCREENED_FROM on are screened at the base first (BASE_WINDOW). The seeds per
   base follow from the pilot's variance (:func:`seeds_for_mde`: the primary's MDE at most MDE_TARGET).
2. **Every curve kept** (:class:`CurveEvaluation`): greedy and sampled (T = 1, one sample) accuracy on the evaluated
   tiers, validation and test, at the first step at or past every READ_EVERY rollouts from the start, with the
   rollouts that reading had cost (every sampled rollout, DAPO's discarded ones too) and the mean training entropy
   since the last reading; at the budget every tier, every temperature of TEMPERATURES and pass@PASS_K.
3. **Arms tuned alike on validation**: TUNED_ARMS on the grid LR_GRID with TUNING_SEEDS from the first base (one
   extension step where a best is on an edge, sharpening.search_grid); DAPO runs at GRPO's best learning rate (the
   same estimator, its sampling the only change; UNTUNED_ARMS). The ablations are dropped before a seed (DROPPED).
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

7. **The second look** (:data:`SECOND_LOOK_PAIRS`, fixed after the first look and before any run of its own): the
   third base, twice the seed pairs, verdicts at Pocock's per-look level LOOK_ALPHA.

Cost: at most 2.5 hours on 2 cores with --jobs 2 (COST_NOTE), resumable from the run cache in --out.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from avspo_plugin.state_files import read_json, write_json

from ..experiment import (
    RunSpec,
    content_fingerprint,
    default_jobs,
    prepare_base,
    prepare_bases,
    quiet_process,
    run_all,
    run_timing,
    write_report,
)
from ..methods import parse_method
from ..settings import LabSettings
from ..task import (
    Problems,
)
from ..train import load_policy
from .headroom_report import crossing, headroom_markdown, room_greedy
from .sharpening import (
    BASELINE,
    CLIP_BOUND_LIMIT,
    against_baseline,
    budget_steps,
    clip_bound_rate,
    crossings,
    pass_at_k,
    search_grid,
    split_problems,
    truncated,
    unstable,
    verified,
)
from .statistics import holm, minimum_detectable_effect, t_interval
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
    warmup_steps: int = WARMUP_STEPS
    sixth_tier_weight: float = SIXTH_TIER_WEIGHT
    screened: bool = False  # run GRPO from it only if its base lies within BASE_WINDOW

    def settings(self) -> LabSettings:
        return dataclasses.replace(
            STUDY_SETTINGS, tiers=TIERS, mix=(1,) * len(TIERS), warmup_mix=(4, 3, 2, 1, self.sixth_tier_weight),
            warmup_steps=self.warmup_steps, task_seed=self.task_seed,
            train_per_tier=BUDGET_STEPS * STUDY_SETTINGS.prompts // len(TIERS) // 2)


# The first eight candidates ran GRPO from each (docs/evidence/headroom.md has what they found: GRPO learned tier 5
# only from a base weak on it but not blank, wide0 at 0.158). The next sixteen are screened at the base first
# (SCREENED_FROM on): GRPO runs only from a base whose tier-5 greedy validation accuracy lies within BASE_WINDOW.
SCREENED_FROM = 8
BASE_WINDOW = (0.05, 0.35)
TASK_SEED_CANDIDATES = tuple(Candidate(f"wide{seed}", seed, screened=seed >= SCREENED_FROM) for seed in range(24))
# The 24 task seeds gave one base that passes (wide0): the warm-up lands a task seed's base anywhere from blank to
# solved on tier 5, and the three in BASE_WINDOW beside wide0 (wide8, wide12, wide16) are weak on every tier, not on
# tier 5 alone. Added after that round and before any of them ran: wide0's task (the same initialisation, warm-up
# data stream and problems) warmed up for other lengths, nearest first, so that tier 5 stands at other points of
# its learning while tiers 2-4 are learnt. The bases are then one task's: a base as the unit says how AVSPO's effect
# varies with where the warm-up left tier 5, not across tasks (docs/evidence/headroom.md says so beside the result).
WARMUP_FAMILY = (1150, 850, 1300, 700)
# The warm-up's length gave none (tier 5 stayed flat from 700-1,300 steps but 1,000): added after that round and
# before any of its runs, the other thing the recipe sets, the sixth tier's warm-up weight, on wide0's task and
# warm-up length. The earlier headroom pilot read weights 0 (tier 5 at 0.12, flat under GRPO), 0.05 (wide0) and
# 0.25 (tier 5 solved at the base); the round tries weights between, nearest 0.05 first within each side.
WEIGHT_FAMILY = (0.07, 0.035, 0.1, 0.15)
# The second look (SECOND_LOOK below) goes on for the design's third base: the warm-up's length again, around the
# 700 steps that passed (nearest first, alternating sides), since tier 5 climbed and fell within 700-850 steps.
WARMUP_FAMILY_2 = (750, 650, 800, 600)
CANDIDATES = (*TASK_SEED_CANDIDATES,
              *(Candidate(f"wide0warm{steps}", 0, warmup_steps=steps) for steps in WARMUP_FAMILY),
              *(Candidate(f"wide0sixth{weight:g}", 0, sixth_tier_weight=weight) for weight in WEIGHT_FAMILY),
              *(Candidate(f"wide0warm{steps}", 0, warmup_steps=steps) for steps in WARMUP_FAMILY_2))
BASES_WANTED = 3
# GRPO's learning rate in the pilot. First tried: 6e-4, the earlier headroom pilot's (FIRST_TRY): on wide0 it took
# tier 5 from 0.16 to 0.81 but tier 4 lost 0.15 and the two seeds ended 0.11 apart, so the pilot runs at 3e-4, the
# middle of the tuning grid; the first try stays in pilot.json (read back from the run cache).
PILOT_LR = 3e-4
FIRST_TRY = {"candidate": "wide0", "lr": 6e-4}
PILOT_SEEDS = (998, 999)  # the tuning seeds too (GRPO's tuning runs at PILOT_LR are the pilot's); comparison: 0, 1, ...
MIN_GAIN = 0.10
END_BAND = (0.5, 0.85)
SOLVED = 0.9
MAX_SOLVED_LOSS = 0.03
MDE_TARGET = 0.03
# The cost cap (COST_NOTE): a run costs about 170 CPU-s here, and the 2 cores are shared with other work, so two
# seeds per base; the MDE reached is reported whatever it is, and a third seed can be added later from the run cache.
MAX_SEEDS = 2
# Set after the pilot accepted two bases, before any comparison run: the cap is on seed pairs (BASES_WANTED x
# MAX_SEEDS, what the cost cap was planned for), so fewer accepted bases get more seeds each (two bases: three).
MAX_PAIRS = BASES_WANTED * MAX_SEEDS
# The second look, fixed after the first (2 bases x 3 seeds, kept as docs/evidence/headroom/first_look.json: both
# acting arms "not shown", every pooled mean below GRPO's, realised MDE 0.32 against 0.045 planned: AVSPO's seed SD
# was 10x GRPO's) and before any run of its own: the pilot goes on for the third base (WARMUP_FAMILY_2), the seed
# pairs double to SECOND_LOOK_PAIRS (seeds per base = SECOND_LOOK_PAIRS // bases; the first look's runs are read back
# from the run cache, so its seeds are the first of each base), and, the data being looked at twice, a verdict reads
# intervals at Pocock's per-look level for two equal looks (LOOK_ALPHA; 0.05 over both). The first look did not
# reject at 0.05, so not at LOOK_ALPHA either. The 95% intervals stay beside as description.
SECOND_LOOK_PAIRS = 2 * MAX_PAIRS
LOOK_ALPHA = 0.0294

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
TUNED_ARMS = (BASELINE, DEFAULT_ARM, ALWAYS_ARM)
UNTUNED_ARMS = {"dapo": BASELINE}
ARMS = (*TUNED_ARMS, *UNTUNED_ARMS)
# Fewer arms before fewer seeds: at about 170 CPU-s a run, 3 tuned arms x 3 learning rates x 2 seeds and 4 arms x 3
# bases x MAX_SEEDS seeds fill the cap; each ablation would cost 3 x MAX_SEEDS runs.
DROPPED = {"avspo_always_all_fail": "always on all-fail groups only: dropped before a seed (the cost cap)",
           "avspo_always_all_pass": "always on all-pass groups only: dropped before a seed (the cost cap)",
           "select_grpo": "collapse-aware prompt selection: last in the issue's order, no room under the cap"}
LR_GRID = (1.5e-4, 3e-4, 6e-4)
LR_EXTENSIONS = 1
TUNING_SEEDS = PILOT_SEEDS

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
QUICK_BASES = 2
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
    return split_problems(evaluation.tiers, evaluation.task_seed, evaluation.held_out_per_tier,
                          evaluation.train_per_tier, evaluation.per_tier, EVAL_SEED, VALIDATION_SHARE)


def solved(policy, problems: Problems, temperature: float, samples: int, evaluation: CurveEvaluation,
           step: int) -> np.ndarray:
    """1/0 per problem and sample at ``temperature`` (0: greedy). -> (N, samples) float64."""
    return verified(policy, problems, temperature, samples, (evaluation.task_seed, step, 47), evaluation.tiers)


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


def base_reading(settings: LabSettings, state: dict, evaluation: CurveEvaluation, cache: Path) -> dict:
    """The base policy's readings (step 0): the curve's first point and the full reading, kept in ``cache`` under a
    fingerprint of the settings and the evaluation (deterministic on one machine, as the runs are)."""
    path = cache / f"{content_fingerprint({'settings': settings.to_dict(), 'evaluation': dataclasses.asdict(evaluation)})}.json"
    if path.exists():
        return read_json(str(path), "Delete it to read that base again.")
    reading = _read_base(settings, state, evaluation)
    write_json(str(path), reading, indent=1)
    return reading


def _read_base(settings: LabSettings, state: dict, evaluation: CurveEvaluation) -> dict:
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


def headroom_gate(base: dict, runs: Sequence[dict], budget: int) -> dict:
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
    whose pairs (bases x seeds) reach the target, capped at MAX_PAIRS // bases and at least MAX_SEEDS (the MDE at
    the cap is stated)."""
    deviations = [np.asarray(v) - np.mean(v) for v in per_base_ends.values() if len(v) >= 2]
    dof = sum(len(d) - 1 for d in deviations)
    sd = float(math.sqrt(sum(float((d ** 2).sum()) for d in deviations) / dof)) if dof else math.nan
    pair_sd = math.sqrt(2) * sd
    cap = max(MAX_SEEDS, MAX_PAIRS // bases)
    seeds = next((s for s in range(2, cap + 1) if minimum_detectable_effect(pair_sd, bases * s) <= MDE_TARGET), cap)
    return {"within_base_sd": sd, "pair_sd": pair_sd, "seeds": seeds, "pairs": bases * seeds,
            "mde_at_seeds": minimum_detectable_effect(pair_sd, bases * seeds), "target": MDE_TARGET}


def pilot(out: Path, quick: bool, jobs: int, progress: bool) -> dict:
    """Design point 1: candidates in order until BASES_WANTED pass the gate (validation only)."""
    budget, per_tier, read_every = sizes(quick)
    cache = out / "runs"
    result: dict[str, Any] = {"lr": PILOT_LR, "seeds": list(PILOT_SEEDS), "candidates": {}, "accepted": []}
    ends = {}
    candidates = CANDIDATES[:QUICK_BASES] if quick else CANDIDATES
    prepare_bases([base_settings(c, quick) for c in candidates], out / "bases", jobs)
    for candidate in candidates:
        settings, state = base_for(candidate, out, quick)
        evaluation = evaluation_for(settings, per_tier, read_every, False, budget)
        base = base_reading(settings, state, evaluation, out / "base_readings")
        if candidate.screened and not BASE_WINDOW[0] <= room_greedy(base["full"]["validation"]) <= BASE_WINDOW[1]:
            result["candidates"][candidate.name] = {**recipe_of(candidate), "base": base, "screened_out": True}
            continue
        specs = [RunSpec(f"pilot/grpo/{candidate.name}/seed{s}", dataclasses.replace(settings, lr=PILOT_LR),
                         parse_method(BASELINE), s, evaluation=evaluation) for s in PILOT_SEEDS]
        runs = list(run_all(specs, state, jobs, progress=progress, cache=cache).values())
        gate = headroom_gate(base, runs, budget)
        result["candidates"][candidate.name] = {**recipe_of(candidate), "base": base, "gate": gate,
                                                "curves": [curve_of(r) for r in runs]}
        ends[candidate.name] = [room_greedy(at_budget(r, budget)["validation"]) for r in runs]
        if progress:
            print(f"python -m lab headroom: pilot {candidate.name}: base {gate['base_greedy']:.3f} -> "
                  f"{gate['end_greedy']:.3f}, solved-tier losses {gate['solved_tier_losses']}, "
                  f"passed {gate['passed']}", file=sys.stderr)
        if gate["passed"] or quick:
            result["accepted"].append(candidate.name)
        if len(result["accepted"]) == (QUICK_BASES if quick else BASES_WANTED):
            break
    # Fixed before the pilot ran: too few candidates passing every check are filled up, in order, with those that
    # pass the learning checks (gain, band, clip); the solved-tier losses they carry are reported as the testbed's.
    for name, c in result["candidates"].items():
        learning = "gate" in c and all(ok for check, ok in c["gate"]["checks"].items() if check != "solved_tiers_kept")
        if len(result["accepted"]) < BASES_WANTED and name not in result["accepted"] and learning:
            result["accepted"].append(name)
            result.setdefault("accepted_with_solved_tier_losses", []).append(name)
    result["accepted"].sort(key=[c.name for c in CANDIDATES].index)
    if not quick:  # the first try, read back from the run cache (FIRST_TRY)
        settings, state = base_for(_candidate(FIRST_TRY["candidate"]), out, quick)
        evaluation = evaluation_for(settings, per_tier, read_every, False, budget)
        specs = [RunSpec(f"pilot/grpo/{FIRST_TRY['candidate']}/seed{s}", dataclasses.replace(settings, lr=FIRST_TRY["lr"]),
                         parse_method(BASELINE), s, evaluation=evaluation) for s in PILOT_SEEDS]
        runs = list(run_all(specs, state, jobs, progress=progress, cache=cache).values())
        base = result["candidates"][FIRST_TRY["candidate"]]["base"]  # the pilot read this base already
        result["first_try"] = {**FIRST_TRY, "gate": headroom_gate(base, runs, budget), "curves": [curve_of(r) for r in runs]}
    result["seeds_for_mde"] = seeds_for_mde({n: ends[n] for n in result["accepted"]}, max(len(result["accepted"]), 1))
    return result


def comparison_seeds(found: Mapping[str, Any], bases: int, quick: bool) -> int:
    """Seeds per base in the comparison: the pilot's plan (:func:`seeds_for_mde`), raised for the second look to
    SECOND_LOOK_PAIRS // bases (the quick check keeps the plan)."""
    planned = found["seeds_for_mde"]["seeds"]
    return planned if quick else max(planned, SECOND_LOOK_PAIRS // bases)


def recipe_of(candidate: Candidate) -> dict:
    """How a candidate base was made (what pilot.json records of it)."""
    return {"task_seed": candidate.task_seed, "warmup_steps": candidate.warmup_steps,
            "sixth_tier_weight": candidate.sixth_tier_weight}


def sizes(quick: bool) -> tuple[int, tuple[int, ...], int]:
    """(budget, evaluation problems per tier, rollouts between curve readings)."""
    budget = dataclasses.replace(CANDIDATES[0].settings(), **(QUICK if quick else {})).rollout_budget
    return budget, QUICK_PER_TIER if quick else EVAL_PER_TIER, QUICK_READ_EVERY if quick else READ_EVERY


@functools.cache
def _candidate(name: str) -> Candidate:
    return next(c for c in CANDIDATES if c.name == name)


def base_settings(candidate: Candidate, quick: bool) -> LabSettings:
    return dataclasses.replace(candidate.settings(), **(QUICK if quick else {}))


def base_for(candidate: Candidate, out: Path, quick: bool) -> tuple[LabSettings, dict]:
    settings = base_settings(candidate, quick)
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



# --- 3. Tuning ----------------------------------------------------------------------------------------------------
def best_temperature(readings: Sequence[dict]) -> tuple[float, dict[str, float]]:
    """The temperature with the highest mean validation accuracy on the evaluated tiers over these budget readings."""
    means = {t: float(np.mean([r["validation"]["accuracy"][t] for r in readings])) for t in map(repr, TEMPERATURES)}
    best = max(means, key=lambda t: means[t])
    return float(best), means


def tune(arm: str, tuning_base: dict, quick: bool, jobs: int, progress: bool, cache: Path) -> dict:
    """Design point 3 for one arm: its score (mean validation accuracy on the evaluated tiers at its best temperature
    over the tuning runs) at each learning rate of LR_GRID, extended by sharpening.search_grid's rule."""
    method = parse_method(arm)
    budget, per_tier, read_every = sizes(quick)
    evaluation = evaluation_for(tuning_base["settings"], per_tier, read_every, False, budget)

    def score(lr: float) -> dict:
        settings = dataclasses.replace(tuning_base["settings"], lr=lr)
        specs = [RunSpec(f"tune/{arm}/{tuning_base['name']}/lr{lr!r}/seed{s}", settings, method, s,
                         evaluation=evaluation) for s in TUNING_SEEDS]
        runs = list(run_all(specs, tuning_base["state"], jobs, progress=progress, cache=cache).values())
        readings = [at_budget(r, budget) for r in runs]
        temperature, by_temperature = best_temperature(readings)
        return {"score": by_temperature[repr(temperature)], "temperature": temperature,
                "by_temperature": by_temperature, "unstable": unstable(runs, budget),
                "per_run": [r["validation"]["accuracy"][repr(temperature)] for r in readings],
                "curves": [curve_of(r) for r in runs], "runs_cpu_s": float(sum(r["cpu_s"] for r in runs)),
                "runs_wall_s": float(sum(r["wall_s"] for r in runs))}

    scores, _, best, interior = search_grid(QUICK_LR_GRID if quick else LR_GRID, 0 if quick else LR_EXTENSIONS,
                                               score)
    if progress:
        print(f"python -m lab headroom: {arm}: validation score by lr "
              f"{ {lr: round(v['score'], 4) for lr, v in scores.items()} }: best {best}", file=sys.stderr)
    return {"grid": sorted(float(lr) for lr in scores), "scores": scores, "best": best, "interior": interior,
            "seeds": list(TUNING_SEEDS), "base": tuning_base["name"]}


def learning_rates(tuning: Mapping[str, dict]) -> dict[str, dict]:
    """Each arm's learning rate: its own tuned best, or (UNTUNED_ARMS) the tuned arm's it borrows, with whose."""
    return {arm: {"lr": tuning[UNTUNED_ARMS.get(arm, arm)]["best"], "from": UNTUNED_ARMS.get(arm, arm)}
            for arm in ARMS}


# --- 4. Endpoints -------------------------------------------------------------------------------------------------
def endpoint_values(run: dict, budget: int, temperature: float) -> dict[str, float]:
    """One run's test endpoints on the evaluated tiers at the budget: the primary (at the arm's best temperature),
    greedy, each temperature, pass@k at T = 1."""
    test = at_budget(run, budget)["test"]
    return {"primary": test["accuracy"][repr(temperature)], "greedy": test["accuracy"]["0.0"],
            **{f"T={t}": test["accuracy"][t] for t in test["accuracy"]}, f"pass@{PASS_K}": test[f"pass@{PASS_K}"]}


def compare(endpoints: Mapping[str, Mapping[str, Mapping[int, dict]]], counted: Mapping[str, Sequence[str]]) -> dict:
    """Every endpoint of every arm against GRPO (sharpening.against_baseline: seed pairs, bases as the unit, each
    base's own test, error rates); Holm over arms x {primary, greedy} together (design point 4), over the arms alone
    for the other endpoints."""
    arms = [a for a in endpoints if a != BASELINE]
    names = next(iter(next(iter(endpoints[BASELINE].values())).values())).keys()
    out: dict[str, dict] = {}
    for endpoint in names:
        family = {arm: test for arm in arms if (test := against_baseline(endpoints, arm, endpoint, counted[arm]))}
        if family and endpoint not in ("primary", "greedy"):
            holm(family)
        out[endpoint] = family
    joint = {(e, a): out[e][a] for e in ("primary", "greedy") for a in out.get(e, {})}
    if joint:
        holm(joint)
    for test in (t for family in out.values() for t in family.values()):
        for part in (test, *test["per_base"].values()):
            if "sd" in part:
                part["ci_look"] = t_interval(part["mean"], part["sd"], part["n"], LOOK_ALPHA)
    return out


def sustained_crossing(readings: Sequence[tuple[int, float]], target: float) -> int | None:
    """Endpoint (b)'s rule at SUSTAIN_TOLERANCE (headroom_report.crossing)."""
    return crossing(readings, target, SUSTAIN_TOLERANCE)


def rollouts_to_target(runs: Mapping[str, Mapping[str, Mapping[int, dict]]], budget: int,
                       resamples: int = 2000) -> dict:
    """Endpoint (b): per base, the target (GRPO's mean greedy test accuracy on the evaluated tiers at the budget) and,
    per arm, each seed's :func:`sustained_crossing` over its greedy test curve (GRPO's runs to GRPO_BUDGET_FACTOR x
    the budget, the others' to the budget), the share reached and the median with a bootstrap interval over seeds
    (not reached ranks above every reached value; an interval end that is not reached is None)."""
    rng = np.random.default_rng(47)
    out: dict[str, dict] = {}
    for base in runs[BASELINE]:
        target = float(np.mean([room_greedy(at_budget(r, budget)["test"]) for r in runs[BASELINE][base].values()]))
        per_arm = {}
        for arm, by_base in runs.items():
            values = [sustained_crossing([(e["rollouts"], e["curve"]["test"]["greedy"]) for e in run["evals"]], target)
                      for run in by_base[base].values()]
            per_arm[arm] = {**crossings(values, rng, resamples),
                            "max_rollouts": max(run["evals"][-1]["rollouts"] for run in by_base[base].values())}
        out[base] = {"target_greedy": target, "arms": per_arm}
    return out



def stability(runs: Mapping[str, Mapping[str, Mapping[int, dict]]], endpoints: Mapping, budget: int) -> dict:
    """Endpoint (c): per arm, the share of runs whose greedy test reading at the budget lies more than FALL below
    their own best greedy test reading up to it, and the seed SD of the primary per base."""
    out = {}
    for arm, by_base in runs.items():
        falls = []
        for by_seed in by_base.values():
            for run in by_seed.values():
                curve = [e["curve"]["test"]["greedy"] for e in run["evals"] if e["rollouts"] <= budget]
                falls.append(max(curve) - curve[-1] > FALL)
        out[arm] = {"fell_share": float(np.mean(falls)), "runs": len(falls),
                    "seed_sd": {b: float(np.std([v["primary"] for v in endpoints[arm][b].values()], ddof=1))
                                for b in by_base}}
    return out


# --- 5. Mechanism -------------------------------------------------------------------------------------------------
TIER_SERIES = ("augmented_tier{d}", "collapsed_advantage_sum_tier{d}", "collapsed_advantage_abs_sum_tier{d}",
               "entropy_tier{d}", "acr_tier{d}", "all_fail_tier{d}")
RUN_SERIES = ("acr", "acr_all_fail", "acr_all_pass", "effective_acr", "entropy", "triggered", "advantage_sum",
              "advantage_abs_sum", "gen_batches")


def series_mean(run: dict, key: str, steps: int) -> float | None:
    values = [v for v in run["steps"].get(key, [])[:steps] if v is not None]
    return float(np.mean(values)) if values else None


def half_mean(runs: Sequence[dict], budget: int, start: float, stop: float, key: str) -> float | None:
    """The mean over runs of each run's mean of ``key`` over the [start, stop) share of its budget's steps."""
    values = []
    for r in runs:
        steps = budget_steps(r, budget)
        kept = [v for v in r["steps"].get(key, [])[int(start * steps):int(stop * steps)] if v is not None]
        if kept:
            values.append(float(np.mean(kept)))
    return float(np.mean(values)) if values else None


def mechanism(runs: Sequence[dict], budget: int, tiers: Sequence[int]) -> dict:
    """Means over the budget's steps and over seeds: per tier (TIER_SERIES) and for the run (RUN_SERIES), each over
    the first and the second half of the budget."""
    out: dict[str, Any] = {"by_tier": {}, "run": {}}
    for half, (start, stop) in {"first_half": (0, 0.5), "second_half": (0.5, 1.0)}.items():
        mean = functools.partial(half_mean, runs, budget, start, stop)
        out["by_tier"][half] = {str(d): {k.format(d=""): mean(k.format(d=d)) for k in TIER_SERIES} for d in tiers}
        out["run"][half] = {k: mean(k) for k in RUN_SERIES}
    return out


LOG_SIGNALS = ("entropy_change", "room_all_fail", "room_all_pass", "room_augmented")


def log_signals(run: dict, budget: int) -> dict[str, float | None]:
    """What a run's own logs show in its first quarter, for telling a user which case a run is in: the change of its
    mean entropy from the first eighth to the second eighth, the all-fail and all-pass shares of the evaluated tiers'
    groups, and the share of their collapsed groups augmented."""
    steps = budget_steps(run, budget)
    eighth = max(steps // 8, 1)

    def mean(key: str, start: int, stop: int) -> float | None:
        vals = [v for v in run["steps"].get(key, [])[start:stop] if v is not None]
        return float(np.mean(vals)) if vals else None

    first, second = mean("entropy", 0, eighth), mean("entropy", eighth, 2 * eighth)
    fail = [mean(f"all_fail_tier{d}", 0, 2 * eighth) for d in ROOM_TIERS]
    acr = [mean(f"acr_tier{d}", 0, 2 * eighth) for d in ROOM_TIERS]
    groups_share = 1 / len(TIERS)  # all_fail_tier<d> is a share of all groups; the tier draws 1/len(TIERS) of them
    room_fail = float(np.mean(fail)) / groups_share if None not in fail else None
    room_acr = float(np.mean(acr)) if None not in acr else None
    augmented = [mean(f"augmented_tier{d}", 0, 2 * eighth) for d in ROOM_TIERS]
    return {"entropy_change": None if first is None or second is None else second - first,
            "room_all_fail": room_fail,
            "room_all_pass": None if room_acr is None or room_fail is None else room_acr - room_fail,
            "room_augmented": float(np.mean(augmented)) if None not in augmented else None}


def signal_tracking(runs: Mapping[str, Mapping[str, Mapping[int, dict]]], endpoints: Mapping, arm: str,
                    budget: int) -> dict:
    """Exploratory: over the seed pairs, the Pearson correlation of each of the arm's own LOG_SIGNALS with the
    primary's difference to GRPO, and each base's mean signal beside its mean difference."""
    pairs = [(b, s) for b in runs[arm] for s in runs[arm][b]]
    gains = np.array([endpoints[arm][b][s]["primary"] - endpoints[BASELINE][b][s]["primary"] for b, s in pairs])
    signals = {(b, s): log_signals(runs[arm][b][s], budget) for b, s in pairs}
    out: dict[str, Any] = {"per_base": {b: {"difference": float(np.mean([g for (bb, _), g in zip(pairs, gains) if bb == b])),
                                            **{k: _mean_or_none([signals[(b, s)][k] for s in runs[arm][b]])
                                               for k in LOG_SIGNALS}} for b in runs[arm]}}
    for key in LOG_SIGNALS:
        values = np.array([np.nan if signals[p][key] is None else signals[p][key] for p in pairs])
        ok = np.isfinite(values)
        if ok.sum() >= 3 and values[ok].std() > 0 and gains[ok].std() > 0:
            r, p = stats.pearsonr(values[ok], gains[ok])
            out[key] = {"r": float(r), "p": float(p), "n": int(ok.sum())}
        else:
            out[key] = {"r": None, "p": None, "n": int(ok.sum())}
    return out


def _mean_or_none(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


# --- 6. The decision ----------------------------------------------------------------------------------------------
ACTING = {"adaptive": DEFAULT_ARM, "always": ALWAYS_ARM}


def verdict(test: dict | None) -> str:
    """One acting arm against GRPO on the primary, from intervals at LOOK_ALPHA (``ci_look``): "helps" when the
    pooled seed-pair interval lies above 0, the
    bases-as-unit mean is positive and no base's mean difference is below -HARM; "hurts" when the pooled interval lies
    below 0, or some base's mean difference is below -HARM with that base's seed-pair interval below 0; "not shown"
    otherwise; "not tested" without a comparison (GRPO did not learn, or the arm did not act)."""
    if not test:
        return "not tested"
    per_base = test["per_base"].values()
    if test["ci_look"][1] < 0 or any(b["mean"] < -HARM and "ci_look" in b and b["ci_look"][1] < 0 for b in per_base):
        return "hurts"
    if test["ci_look"][0] > 0 and test["bases"]["mean"] > 0 and all(b["mean"] >= -HARM for b in per_base):
        return "helps"
    return "not shown"


def decision(primary: Mapping[str, dict]) -> dict:
    """The default threshold_mode, fixed before the run: among the acting modes (ACTING) that help, the one with the
    larger pooled mean; else ``adaptive`` (the paper's equations) unless it hurts; else ``never`` (adv_estimator=avspo
    then measures and logs like the monitor, and acting is the user's explicit choice)."""
    verdicts = {mode: verdict(primary.get(arm)) for mode, arm in ACTING.items()}
    helping = [m for m, v in verdicts.items() if v == "helps"]
    if helping:
        default = max(helping, key=lambda m: primary[ACTING[m]]["mean"])
    elif verdicts["adaptive"] != "hurts":
        default = "adaptive"
    else:
        default = "never"
    return {"verdicts": verdicts, "default_threshold_mode": default}


QUICK_LR_GRID = (3e-4, 6e-4)


# --- The study from one command line ------------------------------------------------------------------------------
def run(args) -> int:
    """``--phase pilot`` writes pilot.json; ``all`` (the default) runs the pilot (read back from the run cache when it
    ran), tuning and the comparison, and writes headroom.json and headroom.md."""
    quiet_process()
    started = time.perf_counter()
    jobs = args.jobs or default_jobs()
    progress = not args.no_progress
    out = args.out or Path("avspo_lab_headroom")
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "runs"
    found = pilot(out, args.quick, jobs, progress)
    (out / "pilot.json").write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    if args.phase == "pilot":
        print(f"python -m lab headroom: wrote pilot.json in {out}/", file=sys.stderr)
        return 0
    if len(found["accepted"]) < 2:
        raise SystemExit(f"python -m lab headroom: {len(found['accepted'])} candidate(s) passed the testbed gate "
                         f"(pilot.json in {out}/): no comparison")
    budget, per_tier, read_every = sizes(args.quick)
    bases = {}
    for name in found["accepted"]:
        settings, state = base_for(_candidate(name), out, args.quick)
        bases[name] = {"name": name, "settings": settings, "state": state,
                       "reading": base_reading(settings, state, evaluation_for(settings, per_tier, read_every, True,
                                                                                budget), out / "base_readings")}
    tuning = {arm: tune(arm, bases[found["accepted"][0]], args.quick, jobs, progress, cache) for arm in TUNED_ARMS}
    rates = learning_rates(tuning)
    seeds = comparison_seeds(found, len(bases), args.quick)
    runs: dict[str, dict[str, dict[int, dict]]] = {arm: {} for arm in ARMS}
    for name, b in bases.items():
        batch = b["settings"].prompts * b["settings"].group_size
        evaluation = evaluation_for(b["settings"], per_tier, read_every, True, budget)
        specs = []
        for arm in ARMS:
            arm_budget = budget if arm != BASELINE else round(budget * GRPO_BUDGET_FACTOR / batch) * batch
            settings = dataclasses.replace(b["settings"], lr=rates[arm]["lr"], rollout_budget=arm_budget)
            specs += [RunSpec(f"{arm}/{name}/seed{s}", settings, parse_method(arm), s, evaluation=evaluation)
                      for s in range(seeds)]
        results = run_all(specs, b["state"], jobs, progress=progress, cache=cache)
        for arm in ARMS:
            runs[arm][name] = {s: results[f"{arm}/{name}/seed{s}"] for s in range(seeds)}
    report = analyse(runs, tuning, rates, found, bases, budget, args.quick)
    runs_cpu_s = sum(s["runs_cpu_s"] for t in tuning.values() for s in t["scores"].values()) + \
        sum(r["cpu_s"] for by_base in runs.values() for by_seed in by_base.values() for r in by_seed.values())
    report["timing"] = {**run_timing(started, jobs), "runs_cpu_s": runs_cpu_s,
                        "runs": sum(len(t["scores"]) * len(TUNING_SEEDS) for t in tuning.values())
                        + len(ARMS) * len(bases) * seeds}
    write_report(out, "headroom", report, headroom_markdown(report))
    print(f"python -m lab headroom: wrote headroom.json and headroom.md in {out}/", file=sys.stderr)
    return 0


def analyse(runs, tuning, rates, found, bases, budget: int, quick: bool) -> dict:
    """Everything the report says, from the runs (design points 2-6)."""
    arms = list(runs)
    readings = {arm: [at_budget(r, budget) for by_seed in runs[arm].values() for r in by_seed.values()] for arm in arms}
    temperatures = {arm: best_temperature(readings[arm]) for arm in arms}
    learns = {b: headroom_gate(bases[b]["reading"], [truncated(r, budget) for r in runs[BASELINE][b].values()], budget)
              for b in runs[BASELINE]}
    checks = {arm: {b: manipulation(parse_method(arm), [truncated(r, budget) for r in runs[arm][b].values()],
                                    [truncated(r, budget) for r in runs[BASELINE][b].values()])
                    for b in runs[arm]} for arm in arms if arm != BASELINE}
    # A comparison counts where GRPO learns (gain on the evaluated tiers, validation) and the arm acted (a method
    # that claims nothing, DAPO, counts wherever GRPO learns); the quick check's toy budget counts every base.
    counted = {arm: [b for b in runs[arm] if quick or (learns[b]["checks"]["gain"] and
                                                         (checks[arm][b] is None or checks[arm][b]["acted"]))]
               for arm in arms if arm != BASELINE}
    endpoints = {arm: {b: {s: endpoint_values(r, budget, temperatures[arm][0]) for s, r in by_seed.items()}
                       for b, by_seed in runs[arm].items()} for arm in arms}
    comparison = compare(endpoints, counted)
    # The default as shipped, on every base whether or not its trigger acted (what a user of the default gets).
    as_shipped = compare({a: endpoints[a] for a in (BASELINE, DEFAULT_ARM)},
                         {DEFAULT_ARM: [b for b in runs[DEFAULT_ARM] if quick or learns[b]["checks"]["gain"]]})
    acting = {arm: signal_tracking(runs, endpoints, arm, budget) for arm in arms if arm not in (BASELINE, "dapo")}
    return {
        "format": 1,
        "kind": "headroom",
        "design": {
            "tiers": list(TIERS), "room_tiers": list(ROOM_TIERS), "warmup_steps": WARMUP_STEPS,
            "sixth_tier_weight": SIXTH_TIER_WEIGHT, "arms": arms, "baseline": BASELINE, "tuned_arms": list(TUNED_ARMS),
            "untuned_arms": UNTUNED_ARMS, "dropped": DROPPED, "lr_grid": list(LR_GRID), "lr_extensions": LR_EXTENSIONS,
            "tuning_seeds": list(TUNING_SEEDS), "comparison_seeds": list(range(len(next(iter(runs[BASELINE].values()))))),
            "second_look": {"pairs": SECOND_LOOK_PAIRS, "look_alpha": LOOK_ALPHA, "first_look": "first_look.json",
                            "warmup_family": list(WARMUP_FAMILY_2)},
            "temperatures": list(TEMPERATURES), "samples": SAMPLES, "t1_samples": T1_SAMPLES, "pass_k": PASS_K,
            "read_every": READ_EVERY, "grpo_budget_factor": GRPO_BUDGET_FACTOR,
            "sustain_tolerance": SUSTAIN_TOLERANCE, "fall": FALL, "harm": HARM, "mde_target": MDE_TARGET,
            "gate": {"min_gain": MIN_GAIN, "end_band": list(END_BAND), "solved": SOLVED,
                     "max_solved_loss": MAX_SOLVED_LOSS}, "cost": COST_NOTE, "quick": quick,
        },
        "pilot": found,
        "split": split_description(bases, quick),
        "tuning": tuning,
        "learning_rates": rates,
        "best_temperature": {arm: {"temperature": t, "validation_by_temperature": means}
                             for arm, (t, means) in temperatures.items()},
        "base_readings": {b: v["reading"] for b, v in bases.items()},
        "grpo_learns": learns,
        "manipulation": checks,
        "counted": counted,
        "endpoints": {arm: {b: {str(s): v for s, v in by_seed.items()} for b, by_seed in by_base.items()}
                      for arm, by_base in endpoints.items()},
        "test_readings": {arm: {b: {str(s): at_budget(r, budget)["test"] for s, r in by_seed.items()}
                                for b, by_seed in by_base.items()} for arm, by_base in runs.items()},
        "curves": {arm: {b: {str(s): curve_of(r) for s, r in by_seed.items()} for b, by_seed in by_base.items()}
                   for arm, by_base in runs.items()},
        "comparison": comparison,
        "default_as_shipped": as_shipped.get("primary", {}).get(DEFAULT_ARM),
        "rollouts_to_target": rollouts_to_target(runs, budget),
        "stability": stability(runs, endpoints, budget),
        "mechanism": {arm: {b: mechanism(list(by_seed.values()), budget, TIERS) for b, by_seed in by_base.items()}
                      for arm, by_base in runs.items()},
        "log_signals": acting,
        "verdicts": {arm: verdict(test) for arm, test in comparison.get("primary", {}).items()},
        "decision": decision(comparison.get("primary", {})),
        "run_cost": {arm: {"wall_s": float(np.mean([r["wall_s"] for by in runs[arm].values() for r in by.values()])),
                           "cpu_s": float(np.mean([r["cpu_s"] for by in runs[arm].values() for r in by.values()])),
                           "rollouts": float(np.mean([r["evals"][-1]["rollouts"] for by in runs[arm].values()
                                                      for r in by.values()]))}
                     for arm in arms},
    }


def split_description(bases: Mapping[str, dict], quick: bool) -> dict:
    """The evaluation split: its seed and sizes per tier and part (the first base's; every base draws its own)."""
    budget, per_tier, read_every = sizes(quick)
    first = next(iter(bases.values()))["settings"]
    validation, test = evaluation_parts(evaluation_for(first, per_tier, read_every, True, budget))
    return {"seed": EVAL_SEED, "validation_share": VALIDATION_SHARE, "per_tier": list(per_tier),
            "validation": {str(d): int((validation.tier == d).sum()) for d in TIERS},
            "test": {str(d): int((test.tier == d).sum()) for d in TIERS}}
