"""``python -m lab sharpening``: does AVSPO's default teach the policy something, or only sharpen it?

The study of docs/evidence/study.md measured AVSPO's gain as avg@k at the training temperature (T = 1), on the
held-out set that also chose its bases, gates and learning rates, against a GRPO tuned on one seed. Lower entropy
at T = 1 is what a lower sampling temperature also buys, so that gain may be sharpening. This study is fixed here
in code before its first run (docs/evidence/sharpening.md states it in words):

1. Evaluation problems no earlier choice saw (:class:`SplitEvaluation`): EVAL_PER_TIER problems per tier (most of
   them of the longest tier, the hardest), disjoint from the earlier held-out split and from the training set, cut
   by tier into validation (VALIDATION_SHARE) and test. Every choice below reads validation only; test is read for
   the report. Headroom: docs/evidence/sharpening/headroom_pilot.json (headroom_pilot.py) found no class of problems
   of this testbed, by tier and carry count, where GRPO's greedy accuracy stays below 0.9 after the budget, and
   wider fields need a warm-up recipe of their own; the report gives error rates and their ratios beside accuracies.
2. Endpoints, each on both parts: greedy accuracy, avg@k at the temperatures of TEMPERATURES (k = SAMPLES; at T = 1
   k = T1_SAMPLES, with the unbiased pass@PASS_K, coverage, which sharpening lowers). **Primary: each method at its
   own best evaluation temperature**, the one with the highest mean validation accuracy over its comparison runs.
3. Fair tuning: every arm of ARMS gets the same learning-rate grid (LR_GRID), the same tuning seeds and bases
   (TUNING_SEEDS x TUNING_BASES); its score at a learning rate is the mean validation accuracy at its best
   temperature there. A best on the grid's edge extends the grid by a factor of 2 that way (LR_EXTENSIONS), unless
   that learning rate is unstable (:func:`unstable`); the report says whether each best is interior.
4. The comparison at each arm's own best learning rate: COMPARISON_SEEDS seeds on each of BASES (the earlier study's
   four bases, which trained as all-fail dominant, mixed and all-pass dominant). Pairs by (base, seed), and bases
   as the unit (a t interval over the per-base mean differences), side by side; Holm over the arms; the MDE at 80%
   power from the observed differences (target MDE_TARGET, pooled). A base counts where GRPO learns there
   (:func:`grpo_learns`) and AVSPO acted (study.manipulation, written before the earlier study).
5. Rollouts to a target: GRPO runs to GRPO_BUDGET_FACTOR x the budget, every arm is read (greedy, on test) every
   READ_EVERY rollouts from half the budget on; per run, the first reading at or above GRPO's mean greedy test
   accuracy on that base at the budget, with a bootstrap over seeds; "not reached" counts as such.
6. Mechanism: ppo_kl, clip_fraction, sum |A| and sum A per step, the update's parameter norm and entropy, kept in
   every run's series and summarised per arm and base over the budget.
7. The decision for the product's default (:func:`decision`), fixed here: learning when the primary's pooled
   seed-pair interval lies above 0 and the bases-as-unit mean difference is positive, and ``threshold_mode=always``
   stays the default; otherwise the gain at T = 1 is not shown to be more than sharpening, and the default becomes
   ``adaptive``, the paper's equations as written (in a batch of many prompts it seldom acts, so a run stays close to
   GRPO until ACR rises above its threshold).

Cost (design point 9 of the issue that asked for this study): 3.5 hours of compute at most with 2 workers. Fewer
arms before fewer seeds: the all-pass-only arm is not run (DROPPED says why).
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
from scipy import stats

from ..experiment import RunSpec, default_jobs, prepare_base, quiet_process, run_all, run_timing, write_report
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
from .sharpening_report import sharpening_markdown
from .statistics import ALPHA, holm, paired_test
from .study import BASE_CANDIDATES, QUICK, QUICK_WARMUP, STUDY_SETTINGS, manipulation

ARMS = ("grpo", "avspo_always")
BASELINE = "grpo"
DROPPED = {"avspo_paper_point_all_pass": "augmenting all-pass groups only (K by Eq. 9) is not run: within 3.5 hours "
                                         "on 2 cores, fewer arms before fewer seeds"}
# The earlier study's compared bases; in GRPO's first half of training they showed all three regimes
# (docs/evidence/study.md: carrydrop20 all-fail dominant, warmup730 all-pass dominant, the others mixed).
BASES = ("carrydrop35", "carrydrop15", "warmup730", "carrydrop20")
TUNING_BASES = ("carrydrop20", "warmup730")  # one of each dominant regime
TUNING_SEEDS = (1000, 1001)  # tuning seeds: the comparison's seeds are 0, 1, ...
COMPARISON_SEEDS = 4
LR_GRID = (3e-4, 6e-4, 1.2e-3)
LR_EXTENSIONS = 1  # grid steps added at most on each side (cost); a best still on an edge is reported as such
CLIP_BOUND_LIMIT = 0.10  # gate G4 of the earlier study: the gradient clip binds on at most 10% of updates
MDE_TARGET = 0.015

# The evaluation problems (design point 1): most of the longest tier, where GRPO's errors are (headroom_pilot.py).
EVAL_SEED = 39
EVAL_PER_TIER = (100, 100, 200, 600)
VALIDATION_SHARE = 0.4
TEMPERATURES = (0.0, 0.3, 0.6, 0.8, 1.0)  # 0: greedy
SAMPLES = 4
T1_SAMPLES = 16
PASS_K = 8
GRPO_BUDGET_FACTOR = 1.5
READ_EVERY = 16 * 512  # rollouts between readings for design point 5 (16 steps of 128 x 4)

QUICK_DESIGN = {"bases": BASES[:1], "tuning_bases": BASES[:1], "tuning_seeds": TUNING_SEEDS[:1], "seeds": 2,
                "lr_grid": (1.5e-4, 3e-4), "extensions": 0, "per_tier": (3, 3, 3, 3)}


@dataclass(frozen=True)
class SplitEvaluation:
    """What a run of this study reads (train.Evaluation): at the budget, every endpoint on validation (and on test
    when ``read_test``); with ``read_test``, greedy test accuracy every READ_EVERY rollouts from half the budget to
    the run's end. Sampling is seeded by (task seed, step, temperature): arms read with the same random numbers."""

    tiers: tuple[int, ...]
    task_seed: int
    held_out_per_tier: int | tuple[int, ...]
    train_per_tier: int | tuple[int, ...]
    per_tier: tuple[int, ...]
    budget: int
    read_test: bool

    def due(self, rollouts_total: int, final: bool, rollouts_before: int) -> bool:
        if rollouts_total == self.budget:
            return True
        return self.read_test and (final or (rollouts_total >= self.budget // 2
                                             and (rollouts_total - self.budget // 2) % READ_EVERY == 0))

    def evaluate(self, policy, step: int, rollouts_total: int, final: bool) -> dict:
        validation, test = evaluation_parts(self)
        if rollouts_total != self.budget:
            return {"test": {"greedy": float(solved(policy, test, 0.0, 1, self, step).mean())}}
        parts = {"validation": validation, **({"test": test} if self.read_test else {})}
        return {name: read_endpoints(policy, problems, self, step) for name, problems in parts.items()}


@functools.lru_cache(maxsize=4)
def evaluation_parts(evaluation: SplitEvaluation) -> tuple[Problems, Problems]:
    """(validation, test): the evaluation problems, none held out before or in the training set, cut by tier."""
    return split_problems(evaluation.tiers, evaluation.task_seed, evaluation.held_out_per_tier,
                          evaluation.train_per_tier, evaluation.per_tier, EVAL_SEED, VALIDATION_SHARE)


def split_problems(tiers: tuple[int, ...], task_seed: int, held_out_per_tier: int | tuple[int, ...],
                   train_per_tier: int | tuple[int, ...], per_tier: tuple[int, ...], seed: int,
                   validation_share: float) -> tuple[Problems, Problems]:
    """(validation, test): per_tier problems drawn with ``seed``, none in the task's held-out split or training set,
    cut by tier into ``validation_share`` and the rest."""
    earlier = held_out_split(tiers, held_out_per_tier, task_seed)
    training = training_set(tiers, train_per_tier, task_seed, earlier)
    excluded = Problems(np.concatenate([earlier.a, training.a]), np.concatenate([earlier.b, training.b]),
                        np.concatenate([earlier.tier, training.tier]), earlier.width)
    problems = evaluation_set(tiers, per_tier, seed, excluded)
    return stratified_split(problems, validation_share, seed)


def solved(policy, problems: Problems, temperature: float, samples: int, evaluation: SplitEvaluation,
           step: int) -> np.ndarray:
    """1/0 per problem and sample: ``samples`` responses per problem at ``temperature`` (0: greedy) pass the
    verifier.  -> (N, samples) float64."""
    return verified(policy, problems, temperature, samples, (evaluation.task_seed, step, 39), evaluation.tiers)


def verified(policy, problems: Problems, temperature: float, samples: int, seed_key: tuple[int, int, int],
             tiers: tuple[int, ...]) -> np.ndarray:
    """1/0 per problem and sample at ``temperature`` (0: greedy), sampling seeded by (task seed, step, temperature,
    study salt) from ``seed_key`` = (task seed, step, salt): arms read with the same random numbers.
    -> (N, samples) float64."""
    prompts = [p for p in problems.prompts() for _ in range(samples)]
    answers = [a for a in problems.answers() for _ in range(samples)]
    task_seed, step, salt = seed_key
    seed = int(np.random.SeedSequence([task_seed, step, round(100 * temperature), salt]).generate_state(1)[0])
    generator = torch.Generator().manual_seed(seed) if temperature > 0 else None
    rollout = generate(policy, prompts, max_response_length(tiers), temperature, generator)
    return rewards(rollout.response_ids, answers).double().numpy().reshape(-1, samples)


def pass_at_k(correct: np.ndarray, k: int) -> np.ndarray:
    """Unbiased pass@k per problem from n samples of which c are correct (Chen et al., 2021):
    1 - C(n - c, k) / C(n, k) = 1 - prod_{i=0}^{k-1} (n - c - i) / (n - i), as a running product (no factorials).
    correct: (N, n) 0/1 with n >= k -> (N,) float64."""
    n = correct.shape[1]
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n = {n} samples per problem")
    c = correct.sum(axis=1)
    i = np.arange(k)
    terms = np.clip((n - c[:, None] - i) / (n - i), 0.0, None)  # (N, k): a term <= 0 means every k-subset passes
    return 1.0 - np.prod(terms, axis=1)


def read_endpoints(policy, problems: Problems, evaluation: SplitEvaluation, step: int) -> dict:
    """Accuracy at every temperature of TEMPERATURES (greedy at 0), per tier at 0 and 1, and pass@PASS_K at T = 1."""
    out: dict[str, Any] = {"accuracy": {}, "by_tier": {}}
    for temperature in TEMPERATURES:
        samples = 1 if temperature == 0 else T1_SAMPLES if temperature == 1.0 else SAMPLES
        correct = solved(policy, problems, temperature, samples, evaluation, step)
        per_problem = correct.mean(axis=1)
        out["accuracy"][repr(temperature)] = float(per_problem.mean())
        if temperature in (0.0, 1.0):
            out["by_tier"][repr(temperature)] = {str(d): float(per_problem[problems.tier == d].mean())
                                                 for d in evaluation.tiers}
        if temperature == 1.0:
            out[f"pass@{PASS_K}"] = float(pass_at_k(correct, PASS_K).mean())
    return out


@dataclass(frozen=True)
class Design:
    """The sizes of one execution of the study: the full design, or the quick pipeline check."""

    bases: tuple[str, ...] = BASES
    tuning_bases: tuple[str, ...] = TUNING_BASES
    tuning_seeds: tuple[int, ...] = TUNING_SEEDS
    seeds: int = COMPARISON_SEEDS
    lr_grid: tuple[float, ...] = LR_GRID
    extensions: int = LR_EXTENSIONS
    per_tier: tuple[int, ...] = EVAL_PER_TIER


def evaluation_for(settings: LabSettings, design: Design, read_test: bool) -> SplitEvaluation:
    return SplitEvaluation(settings.tiers, settings.task_seed, settings.held_out_per_tier, settings.train_per_tier,
                           design.per_tier, settings.rollout_budget, read_test)


def best_temperature(readings: Sequence[dict]) -> tuple[float, dict[str, float]]:
    """The temperature with the highest mean validation accuracy over these runs' budget readings, and every
    temperature's mean."""
    means = {t: float(np.mean([r["validation"]["accuracy"][t] for r in readings])) for t in map(repr, TEMPERATURES)}
    best = max(means, key=lambda t: means[t])
    return float(best), means


def budget_reading(run: dict, budget: int) -> dict:
    """A run's full reading at the budget."""
    return next(e for e in run["evals"] if e["rollouts"] == budget and "validation" in e)


def unstable(runs: Sequence[dict], budget: int) -> str | None:
    """Why a learning rate is unstable on these tuning runs, or None: a gradient norm that is not finite, or the
    gradient clip binding on more than CLIP_BOUND_LIMIT of the updates within the budget."""
    norms = [n for r in runs for n in r["steps"]["grad_norm"] if n is not None]
    if norms and not np.all(np.isfinite(norms)):
        return "a gradient norm was not finite"
    clip = clip_bound_rate(runs, budget)
    if clip > CLIP_BOUND_LIMIT:
        return f"the gradient clip bound on {clip:.0%} of updates (> {CLIP_BOUND_LIMIT:.0%})"
    return None


def clip_bound_rate(runs: Sequence[dict], budget: int) -> float:
    """The share of the updates within the budget on which the gradient clip bound (0 without any update)."""
    bound = [b for r in runs for b in r["steps"]["clip_bound"][: budget_steps(r, budget)] if b is not None]
    return float(np.mean(bound)) if bound else 0.0


def budget_steps(run: dict, budget: int) -> int:
    """Steps a run took to sample ``budget`` rollouts."""
    totals = run["steps"]["rollouts_total"]
    return next((i + 1 for i, total in enumerate(totals) if total >= budget), len(totals))


def tune(arm: str, bases: Mapping[str, dict], design: Design, jobs: int, progress: bool, cache: Path) -> dict:
    """Design point 3 for one arm: its score (mean validation accuracy at its best temperature over the tuning runs)
    at each learning rate of the grid, extended while the best lies on an edge and the next value is stable."""
    method = parse_method(arm)

    def score(lr: float) -> dict:
        runs = []
        for name in design.tuning_bases:
            b = bases[name]
            settings = dataclasses.replace(b["settings"], lr=lr)
            evaluation = evaluation_for(settings, design, read_test=False)
            specs = [RunSpec(f"tune/{arm}/{name}/lr{lr!r}/seed{s}", settings, method, s, evaluation=evaluation)
                     for s in design.tuning_seeds]
            runs += list(run_all(specs, b["state"], jobs, progress=progress, cache=cache).values())
        budget = runs[0]["evals"][-1]["rollouts"]
        readings = [budget_reading(r, budget) for r in runs]
        temperature, by_temperature = best_temperature(readings)
        return {"score": by_temperature[repr(temperature)], "temperature": temperature,
                "by_temperature": by_temperature, "unstable": unstable(runs, budget),
                "per_run": [r["validation"]["accuracy"][repr(temperature)] for r in readings],
                "runs_cpu_s": float(sum(r["cpu_s"] for r in runs))}

    scores, _, best, interior = search_grid(design.lr_grid, design.extensions, score)
    if progress:
        print(f"python -m lab sharpening: {arm}: validation score by lr "
              f"{ {lr: round(s['score'], 4) for lr, s in scores.items()} }: best {best}", file=sys.stderr)
    return {"grid": sorted(float(lr) for lr in scores), "scores": scores, "best": best, "interior": interior,
            "seeds": list(design.tuning_seeds), "bases": list(design.tuning_bases)}


def search_grid(lr_grid: Sequence[float], extensions: int, score) -> tuple[dict[str, dict], list[float], float, bool]:
    """Design point 3's search: ``score(lr)`` (a dict with "score" and "unstable") at each learning rate of the grid,
    then at most ``extensions`` steps of a factor of 2 past an edge that holds the best stable score (not past an
    unstable top). Returns (scores by repr(lr), the grid, the best stable lr, whether it is interior: inside the
    grid, or on its top with the step above unstable)."""
    scores: dict[str, dict] = {}
    grid = list(lr_grid)
    for lr in grid:
        scores[repr(lr)] = score(lr)
    for _ in range(extensions):
        stable = {lr: s for lr, s in scores.items() if s["unstable"] is None}
        best = float(max(stable, key=lambda lr: stable[lr]["score"]))
        if best == min(grid):
            grid.insert(0, best / 2)
            scores[repr(best / 2)] = score(best / 2)
        elif best == max(grid) and scores[repr(best)]["unstable"] is None:
            grid.append(best * 2)
            scores[repr(best * 2)] = score(best * 2)
        else:
            break
    stable = {lr: s for lr, s in scores.items() if s["unstable"] is None}
    best = float(max(stable, key=lambda lr: stable[lr]["score"]))
    interior = min(grid) < best < max(grid) or (best == max(grid) and scores[repr(best)]["unstable"] is not None)
    return scores, grid, best, interior


def grpo_learns(grpo_runs: Sequence[dict], base_reading: dict, budget: int) -> dict:
    """GRPO learns on a base (a choice: it reads validation): its greedy validation accuracy at the budget above
    the base's on average, and the gradient clip bound on at most CLIP_BOUND_LIMIT of updates."""
    greedy = float(np.mean([budget_reading(r, budget)["validation"]["accuracy"]["0.0"] for r in grpo_runs]))
    clip = clip_bound_rate(grpo_runs, budget)
    base = base_reading["validation"]["accuracy"]["0.0"]
    return {"greedy_gain": greedy - base, "clip_bound": clip,
            "passed": greedy - base > 0 and clip <= CLIP_BOUND_LIMIT}


def bases_interval(differences_by_base: Mapping[str, Sequence[float]]) -> dict:
    """Bases as the unit: the t interval of the mean over bases of each base's mean paired difference."""
    means = np.array([np.mean(d) for d in differences_by_base.values()], dtype=np.float64)
    n = means.size
    out = {"mean": float(means.mean()) if n else None, "n": int(n), "per_base": dict(zip(differences_by_base, means.tolist()))}
    if n >= 2:
        se = float(means.std(ddof=1) / math.sqrt(n))
        t = float(stats.t.ppf(1 - ALPHA / 2, n - 1))
        p = float(2 * stats.t.sf(abs(means.mean()) / se, n - 1)) if se > 0 else (0.0 if means.mean() != 0 else 1.0)
        out.update(ci95=[float(means.mean() - t * se), float(means.mean() + t * se)], p=p)
    return out


def endpoint_values(run: dict, budget: int, temperature: float) -> dict[str, float]:
    """One run's test endpoints at the budget: the primary (at the arm's best temperature), each temperature,
    pass@k at T = 1."""
    test = budget_reading(run, budget)["test"]
    return {"primary": test["accuracy"][repr(temperature)],
            **{f"T={t}": test["accuracy"][t] for t in test["accuracy"]}, f"pass@{PASS_K}": test[f"pass@{PASS_K}"]}


def compare(endpoints: Mapping[str, Mapping[str, Mapping[int, dict]]], counted: Mapping[str, Sequence[str]]) -> dict:
    """Every endpoint of every arm against GRPO (:func:`against_baseline`), Holm over the arms."""
    arms = [a for a in endpoints if a != BASELINE]
    names = next(iter(next(iter(endpoints[BASELINE].values())).values())).keys()
    out: dict[str, dict] = {}
    for endpoint in names:
        family = {arm: test for arm in arms if (test := against_baseline(endpoints, arm, endpoint, counted[arm]))}
        if family:
            holm(family)
        out[endpoint] = family
    return out


def against_baseline(endpoints: Mapping[str, Mapping[str, Mapping[int, dict]]], arm: str, endpoint: str,
                     bases: Sequence[str]) -> dict | None:
    """One arm's endpoint against GRPO on ``bases``: seed pairs (paired t), bases as the unit, each base's own
    seed-pair test, and error rates beside accuracies (the ratio of mean error rates, arm / GRPO); None below 2 pairs."""
    by_base = {b: [endpoints[arm][b][s][endpoint] - endpoints[BASELINE][b][s][endpoint] for s in endpoints[arm][b]]
               for b in bases}
    pairs = [d for ds in by_base.values() for d in ds]
    if len(pairs) < 2:
        return None
    test = paired_test(pairs)
    grpo_error = 1 - float(np.mean([endpoints[BASELINE][b][s][endpoint] for b in by_base for s in endpoints[arm][b]]))
    arm_error = 1 - float(np.mean([endpoints[arm][b][s][endpoint] for b in by_base for s in endpoints[arm][b]]))
    test.update(bases=bases_interval(by_base), grpo_error=grpo_error, error=arm_error,
                error_ratio=arm_error / grpo_error if grpo_error > 0 else None, counted=list(by_base),
                per_base={b: paired_test(d) if len(d) >= 2 else {"mean": float(np.mean(d)), "n": len(d)}
                          for b, d in by_base.items()})
    return test


def rollouts_to_target(runs: Mapping[str, Mapping[str, Mapping[int, dict]]], budget: int,
                       resamples: int = 2000) -> dict:
    """Design point 5: per base, the target (GRPO's mean greedy test accuracy at the budget) and, per arm, each seed's
    rollouts at its first greedy test reading at or above it (None: not reached within the run), the share reached
    and the median with a bootstrap interval over seeds (not reached ranks above every reached value; an interval
    end that is not reached is None)."""
    rng = np.random.default_rng(39)
    out: dict[str, dict] = {}
    for base in runs[BASELINE]:
        target = float(np.mean([budget_reading(r, budget)["test"]["accuracy"]["0.0"]
                                for r in runs[BASELINE][base].values()]))
        per_arm = {}
        for arm, by_base in runs.items():
            if base not in by_base:
                continue
            values = []
            for run in by_base[base].values():
                readings = [(e["rollouts"], e["test"]["greedy"] if "greedy" in e["test"] else e["test"]["accuracy"]["0.0"])
                            for e in run["evals"] if "test" in e]
                values.append(next((r for r, acc in readings if acc >= target), None))
            per_arm[arm] = {**crossings(values, rng, resamples),
                            "max_rollouts": max(run["evals"][-1]["rollouts"] for run in by_base[base].values())}
        out[base] = {"target_greedy": target, "arms": per_arm}
    return out


def crossings(values: Sequence[int | None], rng: np.random.Generator, resamples: int) -> dict:
    """Each seed's rollouts to a target (None: not reached), the share reached, and the median with a bootstrap
    interval over seeds (not reached ranks above every reached value; a median or interval end not reached is None)."""
    ranked = np.array([math.inf if v is None else v for v in values], dtype=np.float64)
    medians = np.sort(np.median(rng.choice(ranked, size=(resamples, ranked.size)), axis=1))
    low, high = medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]
    return {"per_seed": list(values), "reached": sum(v is not None for v in values) / len(values),
            "median": _finite(float(np.median(ranked))), "ci95": [_finite(low), _finite(high)]}


def _finite(value: float) -> float | None:
    return None if math.isinf(value) else float(value)


MECHANISM_KEYS = ("ppo_kl", "clip_fraction", "advantage_abs_sum", "advantage_sum", "update_norm", "entropy",
                  "acr", "effective_acr", "num_virtual")


def mechanism(runs: Sequence[dict], budget: int) -> dict:
    """Per-step means over seeds of the mechanism series, within the budget, and each series' mean over the run
    (entropy also over its last 10 steps)."""
    steps = min(budget_steps(r, budget) for r in runs)
    series = {}
    for key in MECHANISM_KEYS:
        if all(key in r["steps"] for r in runs):
            values = np.array([[np.nan if v is None else v for v in r["steps"][key][:steps]] for r in runs], dtype=float)
            series[key] = np.nanmean(values, axis=0).tolist()
    means = {k: float(np.nanmean(v)) for k, v in series.items()}
    if "entropy" in series:
        means["entropy_last10"] = float(np.mean(series["entropy"][-10:]))
    return {"series": series, "means": means}


DEFAULT_IF_LEARNING, DEFAULT_OTHERWISE = "always", "adaptive"


def run_mean(run: dict, key: str, budget: int) -> float:
    """A run's mean of one per-step series over the steps within the budget (NaN when it has no value there)."""
    values = [v for v in run["steps"][key][: budget_steps(run, budget)] if v is not None]
    return float(np.mean(values)) if values else math.nan


def mechanism_tracking(runs: Mapping[str, Mapping[str, Mapping[int, dict]]], endpoints: Mapping, arm: str,
                       budget: int) -> dict:
    """Does the gain track the mechanism? Over the seed pairs (base, seed): the Pearson correlation between the
    primary's difference (arm - GRPO) and the difference in each mechanism series' mean over the budget's steps."""
    out = {}
    pairs = [(b, s) for b in runs[arm] for s in runs[arm][b]]
    gains = np.array([endpoints[arm][b][s]["primary"] - endpoints[BASELINE][b][s]["primary"] for b, s in pairs])
    for key in MECHANISM_KEYS:
        if not all(key in runs[a][b][s]["steps"] for a in (arm, BASELINE) for b, s in pairs):
            continue
        diffs = np.array([run_mean(runs[arm][b][s], key, budget) - run_mean(runs[BASELINE][b][s], key, budget)
                          for b, s in pairs])
        if len(pairs) >= 3 and np.all(np.isfinite(diffs)) and diffs.std() > 0 and gains.std() > 0:
            r, p = stats.pearsonr(diffs, gains)
            out[key] = {"mean_difference": float(diffs.mean()), "r": float(r), "p": float(p), "n": len(pairs)}
        else:
            out[key] = {"mean_difference": float(np.mean(diffs)), "r": None, "p": None, "n": len(pairs)}
    return out


def decision(primary: dict | None) -> dict:
    """Design point 7: learning when the primary's pooled seed-pair interval lies above 0 and the bases-as-unit mean
    difference is positive (the default threshold_mode stays DEFAULT_IF_LEARNING); otherwise the T = 1 gain is not
    shown to be more than sharpening (the default becomes DEFAULT_OTHERWISE)."""
    if not primary:
        return {"verdict": "not_compared", "learning": False, "default_threshold_mode": None}
    learning = primary["ci95"][0] > 0 and (primary["bases"]["mean"] or 0) > 0
    return {"verdict": "learning" if learning else "not_shown_beyond_sharpening", "learning": learning,
            "default_threshold_mode": DEFAULT_IF_LEARNING if learning else DEFAULT_OTHERWISE}


def run(args) -> int:
    """The study from one command line: bases, tuning, comparison, analysis, report."""
    quiet_process()
    started = time.perf_counter()
    design = Design(**QUICK_DESIGN) if args.quick else Design()
    settings = dataclasses.replace(STUDY_SETTINGS, **(QUICK if args.quick else {}))
    jobs = args.jobs or default_jobs()
    progress = not args.no_progress
    out = args.out or Path("avspo_lab_sharpening")
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "runs"
    known = {c.name: c for c in BASE_CANDIDATES}
    bases = {}
    for name in design.bases:
        base_settings = dataclasses.replace(settings, **{**known[name].warmup, **(QUICK_WARMUP if args.quick else {})})
        state, description = prepare_base(base_settings, out / "bases")
        bases[name] = {"settings": base_settings, "state": state, "description": description}
    budget = settings.rollout_budget
    # The bases' own readings (step 0): the gate compares GRPO with them.
    base_readings = {name: read_base(b, design) for name, b in bases.items()}

    tuning = {arm: tune(arm, bases, design, jobs, progress, cache) for arm in ARMS}

    runs: dict[str, dict[str, dict[int, dict]]] = {arm: {} for arm in ARMS}
    for name, b in bases.items():
        specs = []
        for arm in ARMS:
            arm_budget = round(budget * GRPO_BUDGET_FACTOR / (settings.prompts * settings.group_size)) * \
                settings.prompts * settings.group_size if arm == BASELINE else budget
            run_settings = dataclasses.replace(b["settings"], lr=tuning[arm]["best"], rollout_budget=arm_budget)
            evaluation = evaluation_for(b["settings"], design, read_test=True)
            specs += [RunSpec(f"{arm}/{name}/seed{s}", run_settings, parse_method(arm), s, evaluation=evaluation)
                      for s in range(design.seeds)]
        results = run_all(specs, b["state"], jobs, progress=progress, cache=cache)
        for arm in ARMS:
            runs[arm][name] = {s: results[f"{arm}/{name}/seed{s}"] for s in range(design.seeds)}
    report = analyse(runs, tuning, base_readings, bases, budget, design, args.quick)
    # Each run's own CPU clock (workers fork from a server process, which the caller's clock does not count).
    runs_cpu_s = sum(s["runs_cpu_s"] for t in tuning.values() for s in t["scores"].values()) + \
        sum(r["cpu_s"] for by_base in runs.values() for by_seed in by_base.values() for r in by_seed.values())
    report.update(settings=settings.to_dict(), timing={**run_timing(started, jobs), "runs_cpu_s": runs_cpu_s,
                                                        "runs": sum(len(t["scores"]) * len(design.tuning_bases) *
                                                                    len(design.tuning_seeds) for t in tuning.values())
                                                        + len(ARMS) * len(design.bases) * design.seeds})
    write_report(out, "sharpening", report, sharpening_markdown(report))
    print(f"python -m lab sharpening: wrote sharpening.json and sharpening.md in {out}/", file=sys.stderr)
    return 0


def read_base(base: dict, design: Design) -> dict:
    """The base policy's full reading on validation and test (step 0)."""
    evaluation = evaluation_for(base["settings"], design, read_test=True)
    policy = load_policy(base["settings"], base["state"])
    validation, test = evaluation_parts(evaluation)
    return {"validation": read_endpoints(policy, validation, evaluation, 0),
            "test": read_endpoints(policy, test, evaluation, 0)}


def analyse(runs, tuning, base_readings, bases, budget: int, design: Design, quick: bool) -> dict:
    """Everything the report says, from the runs (design points 2-7)."""
    arms = list(runs)
    readings = {arm: [budget_reading(r, budget) for by_seed in runs[arm].values() for r in by_seed.values()]
                for arm in arms}
    temperatures = {arm: best_temperature(readings[arm]) for arm in arms}
    learns = {b: grpo_learns(list(runs[BASELINE][b].values()), base_readings[b], budget) for b in runs[BASELINE]}
    checks = {arm: {b: manipulation(parse_method(arm), list(runs[arm][b].values()),
                                    [truncated(r, budget) for r in runs[BASELINE][b].values()])
                    for b in runs[arm]} for arm in arms if arm != BASELINE}
    # The quick check's toy budget learns nothing: every base is counted there, to exercise the analysis.
    counted = {arm: [b for b in runs[arm] if quick or (learns[b]["passed"] and checks[arm][b]["acted"])]
               for arm in arms if arm != BASELINE}
    endpoints = {arm: {b: {s: endpoint_values(r, budget, temperatures[arm][0]) for s, r in by_seed.items()}
                       for b, by_seed in runs[arm].items()} for arm in arms}
    comparison = compare(endpoints, counted)
    primary = comparison.get("primary", {}).get("avspo_always")
    return {
        "format": 1,
        "kind": "sharpening",
        "design": {
            "arms": arms, "baseline": BASELINE, "dropped": DROPPED, "bases": list(design.bases),
            "tuning_bases": list(design.tuning_bases), "tuning_seeds": list(design.tuning_seeds),
            "comparison_seeds": list(range(design.seeds)), "lr_grid": list(design.lr_grid),
            "lr_extensions": design.extensions, "temperatures": list(TEMPERATURES), "samples": SAMPLES,
            "t1_samples": T1_SAMPLES, "pass_k": PASS_K, "grpo_budget_factor": GRPO_BUDGET_FACTOR,
            "read_every": READ_EVERY, "mde_target": MDE_TARGET, "clip_bound_limit": CLIP_BOUND_LIMIT, "quick": quick,
        },
        "split": split_description(bases, design),
        "tuning": tuning,
        "best_temperature": {arm: {"temperature": t, "validation_by_temperature": means}
                             for arm, (t, means) in temperatures.items()},
        "base_readings": base_readings,
        "grpo_learns": learns,
        "manipulation": checks,
        "counted": counted,
        "endpoints": {arm: {b: {str(s): v for s, v in by_seed.items()} for b, by_seed in by_base.items()}
                      for arm, by_base in endpoints.items()},
        "test_readings": {arm: {b: {str(s): budget_reading(r, budget)["test"] for s, r in by_seed.items()}
                                for b, by_seed in by_base.items()} for arm, by_base in runs.items()},
        "comparison": comparison,
        "rollouts_to_target": rollouts_to_target(runs, budget),
        "mechanism": {arm: {b: mechanism(list(by_seed.values()), budget) for b, by_seed in by_base.items()}
                      for arm, by_base in runs.items()},
        "mechanism_tracking": {arm: mechanism_tracking(runs, endpoints, arm, budget) for arm in arms if arm != BASELINE},
        "decision": decision(primary),
        "run_cost": {arm: {"wall_s": float(np.mean([r["wall_s"] for by in runs[arm].values() for r in by.values()])),
                           "cpu_s": float(np.mean([r["cpu_s"] for by in runs[arm].values() for r in by.values()]))}
                     for arm in arms},
    }


def truncated(run: dict, budget: int) -> dict:
    """A run's step series cut at the budget (GRPO runs past it for design point 5)."""
    steps = budget_steps(run, budget)
    return {**run, "steps": {k: v[:steps] for k, v in run["steps"].items()}}


def split_description(bases: Mapping[str, dict], design: Design) -> dict:
    """The evaluation split: its seed and sizes per tier and part."""
    settings = next(iter(bases.values()))["settings"]
    validation, test = evaluation_parts(evaluation_for(settings, design, read_test=True))
    return {"seed": EVAL_SEED, "validation_share": VALIDATION_SHARE, "per_tier": list(design.per_tier),
            "validation": {str(d): int((validation.tier == d).sum()) for d in settings.tiers},
            "test": {str(d): int((test.tier == d).sum()) for d in settings.tiers},
            "sizes": {"validation": len(validation), "test": len(test)}}
