"""``avspo lab study``: the powered comparison, with its design fixed here before any result was seen.

Design (docs/study.md states it in words, with the reasons):

1. Base policies by a rule on base-policy statistics only (:func:`accept_base`): the default warm-up from
   task seeds 0, 1, 2, ... in order; a base is accepted when at least one tier's pass rate at the RL
   temperature lies in [0.02, 0.15] (all-fail groups common but learnable) and the tier the warm-up never
   shows stays unreachable (pass rate <= 0.005: the negative control). The first three accepted are used.
2. The gradient clip by a GRPO-only pilot before any comparison (:func:`pilot_clip`): the 90th percentile of
   GRPO's per-step gradient norms (each the mean over the step's mini-batch updates) over its first steps on
   the first base, meant to make the clip bind on about a tenth of GRPO's updates rather than on nearly all.
3. Every method runs from every base with seeds 0..19 to exactly the same rollout budget (DAPO's last
   step samples only what is left), and is evaluated at 35%, 70% and 100% of it: avg@16 at temperature 1
   on 200 held-out problems per tier (tier 1 has only 100 problems in all, so 50).
4. Endpoints: held-out accuracy at the budget (primary), its area under the accuracy-over-rollouts curve
   (AUC, as the mean accuracy over the budget), both as differences to GRPO paired by base and seed.
   Holm's correction over the methods compared with GRPO, per endpoint. The minimum detectable paired
   effect at 80% power is reported for every comparison.
5. Prompt selection's goal: held-out accuracy at 70% of the budget against GRPO's at 100%; reached when
   the lower end of the 95% interval of that difference is above -0.01.

Nothing is tuned per method: every method shares the settings, the bases, the clip and the seeds.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .settings import LabSettings

STUDY_METHODS = ("grpo", "drgrpo", "dapo", "avspo", "avspo_all_fail", "avspo_all_pass", "select_grpo", "select_avspo")
BASELINE = "grpo"
STUDY_SEEDS = 20
BASES = 3
CANDIDATE_TASK_SEEDS = tuple(range(10))
LEARNABLE_PASS_RATE = (0.02, 0.15)  # a tier in this range makes all-fail groups common but learnable
UNREACHABLE_PASS_RATE = 0.005  # the tier the warm-up never shows must stay at or below this
PILOT_SEED = 10_000  # not a study seed
PILOT_STEPS = 30
PILOT_QUANTILE = 0.9
ALPHA = 0.05
POWER = 0.8
MDE_TARGET = 0.02  # the design asks every comparison to detect a paired difference this small
SELECTION_FRACTION = 0.7  # selection's goal: GRPO's final accuracy with 30% fewer rollouts
SELECTION_MARGIN = 0.01

STUDY_SETTINGS = LabSettings(
    held_out_per_tier=(50, 200, 200, 200, 200),
    eval_samples=16,
    train_per_tier=48,
    rollout_budget=80 * 16 * 8,
    eval_fractions=(0.35, SELECTION_FRACTION, 1.0),
    eval_every=10**6,  # budget mode evaluates at eval_fractions
)
QUICK = {"rollout_budget": 6 * 16 * 8, "held_out_per_tier": 8, "eval_samples": 2, "train_per_tier": 8}
QUICK_SEEDS = 2


def accept_base(sampled_by_tier: dict[str, dict], settings: LabSettings) -> tuple[bool, str]:
    """The base-policy rule (design point 1) on the base's sampled pass rates per tier; returns (accepted, why)."""
    low, high = LEARNABLE_PASS_RATE
    never_shown = [str(d) for d, w in zip(settings.tiers, settings.warmup_mix) if w == 0]
    learnable = [t for t, s in sampled_by_tier.items() if low <= s["pass_rate"] <= high]
    reachable = [t for t in never_shown if sampled_by_tier[t]["pass_rate"] > UNREACHABLE_PASS_RATE]
    if not learnable:
        return False, f"no tier with a pass rate in [{low}, {high}]"
    if not never_shown:
        return False, "no tier left out of the warm-up (no negative control)"
    if reachable:
        return False, f"tier(s) {', '.join(reachable)} never shown in the warm-up are reachable"
    return True, f"tier(s) {', '.join(learnable)} in [{low}, {high}]; tier(s) {', '.join(never_shown)} unreachable"


def choose_bases(settings: LabSettings, count: int, progress: bool) -> list[dict]:
    """Warm up candidate task seeds in order until ``count`` pass :func:`accept_base`; every candidate is reported."""
    from .experiment import prepare_base

    candidates = []
    for task_seed in CANDIDATE_TASK_SEEDS:
        base_settings = dataclasses.replace(settings, task_seed=task_seed)
        state, description = prepare_base(base_settings)
        accepted, why = accept_base(description["sampled_by_tier"], base_settings)
        candidates.append({"task_seed": task_seed, "accepted": accepted, "why": why, "description": description,
                           "state": state})
        if progress:
            print(f"avspo lab study: task seed {task_seed}: {'accepted' if accepted else 'rejected'} ({why})",
                  file=sys.stderr)
        if sum(c["accepted"] for c in candidates) == count:
            return candidates
    raise ValueError(f"only {sum(c['accepted'] for c in candidates)} of task seeds {CANDIDATE_TASK_SEEDS} pass "
                     f"the base rule; the study needs {count}")


def pilot_clip(settings: LabSettings, base: dict) -> dict:
    """Design point 2: GRPO alone, no clip, PILOT_STEPS steps from the first base; the clip is the PILOT_QUANTILE
    quantile of its per-step gradient norms (the mean over each step's mini-batches), rounded up to two
    significant digits."""
    from .methods import PRESETS
    from .train import train

    pilot = dataclasses.replace(settings, rollout_budget=0, steps=PILOT_STEPS, eval_every=PILOT_STEPS,
                                grad_clip=1e12, task_seed=base["task_seed"])
    run = train(pilot, PRESETS[BASELINE], PILOT_SEED, base["state"],
                initial_eval=base["description"]["held_out"])
    norms = np.asarray([n for n in run["steps"]["grad_norm"] if n is not None])
    quantile = float(np.quantile(norms, PILOT_QUANTILE))
    digits = 1 - int(math.floor(math.log10(quantile)))
    clip = math.ceil(quantile * 10**digits) / 10**digits
    return {"grad_clip": clip, "quantile": quantile, "median_norm": float(np.median(norms)),
            "updates": int(norms.size), "steps": PILOT_STEPS, "seed": PILOT_SEED, "task_seed": base["task_seed"]}


# --- statistics ------------------------------------------------------------------------------------------


def auc(run: dict, budget: int) -> float:
    """Mean held-out accuracy over the rollout budget: the trapezoid area under accuracy over rollouts / budget."""
    x = np.asarray(run["evals"]["rollouts"], dtype=np.float64)
    y = np.asarray(run["evals"]["accuracy"], dtype=np.float64)
    return float(np.trapezoid(y, x) / budget)


def run_endpoints(run: dict, budget: int) -> dict[str, float]:
    evals = run["evals"]
    at = {f"accuracy_at_{int(round(100 * f))}": a for f, a in zip(evals["budget_fraction"][1:], evals["accuracy"][1:])}
    return {"accuracy": evals["accuracy"][-1], "auc": auc(run, budget), **at}


def paired_test(differences: Sequence[float]) -> dict[str, Any]:
    """Paired t-test of mean difference 0: mean, 95% interval, p, sd, and the minimum detectable effect at 80% power
    at alpha = 0.05 (``mde``) and at the strictest Holm level of the family (``mde_holm``, filled by :func:`holm`)."""
    from scipy import stats

    d = np.asarray(differences, dtype=np.float64)
    n = d.size
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    t_crit = float(stats.t.ppf(1 - ALPHA / 2, n - 1))
    p = float(2 * stats.t.sf(abs(mean) / se, n - 1)) if se > 0 else (0.0 if mean != 0 else 1.0)
    return {"mean": mean, "ci95": [mean - t_crit * se, mean + t_crit * se], "p": p, "sd": sd, "n": n,
            "mde": minimum_detectable_effect(sd, n, ALPHA)}


def minimum_detectable_effect(sd: float, n: int, alpha: float) -> float:
    """Smallest true paired mean difference a two-sided paired t-test at ``alpha`` detects with POWER:
    (t_{1-alpha/2, n-1} + t_{POWER, n-1}) * sd / sqrt(n)."""
    from scipy import stats

    return float((stats.t.ppf(1 - alpha / 2, n - 1) + stats.t.ppf(POWER, n - 1)) * sd / math.sqrt(n))


def holm(tests: dict[str, dict]) -> None:
    """Holm's step-down correction over a family of tests, in place: ``p_holm`` and ``significant`` (at ALPHA),
    and ``mde_holm``, the MDE at the strictest level Holm applies (ALPHA / family size)."""
    ordered = sorted(tests, key=lambda name: tests[name]["p"])
    m = len(ordered)
    running = 0.0
    for rank, name in enumerate(ordered):
        running = max(running, min(1.0, (m - rank) * tests[name]["p"]))
        tests[name]["p_holm"] = running
        tests[name]["significant"] = running < ALPHA
        tests[name]["mde_holm"] = minimum_detectable_effect(tests[name]["sd"], tests[name]["n"], ALPHA / m)


def analyse(endpoints: dict[str, dict[int, dict[int, dict]]], methods: Sequence[str], bases: Sequence[int]) -> dict:
    """endpoints: method -> task seed -> seed -> run_endpoints. Paired tests against GRPO, pooled over bases and
    per base; Holm over the methods per endpoint; the selection goal."""
    compared = [m for m in methods if m != BASELINE]
    result: dict[str, Any] = {"pooled": {}, "per_base": {}, "selection_goal": {}}
    names = sorted(next(iter(next(iter(endpoints[BASELINE].values())).values())))

    def differences(method: str, key: str, baseline_key: str, task_seeds: Sequence[int]) -> list[float]:
        return [endpoints[method][b][s][key] - endpoints[BASELINE][b][s][baseline_key]
                for b in task_seeds for s in sorted(endpoints[BASELINE][b]) if s in endpoints[method][b]]

    for key in names:
        family = {m: paired_test(differences(m, key, key, bases)) for m in compared}
        holm(family)
        result["pooled"][key] = family
        for b in bases:
            per = {m: paired_test(differences(m, key, key, [b])) for m in compared}
            holm(per)
            result["per_base"].setdefault(str(b), {})[key] = per
    at = f"accuracy_at_{int(round(100 * SELECTION_FRACTION))}"
    for m in (m for m in methods if m.startswith("select_")):
        goal = paired_test(differences(m, at, "accuracy", bases))
        goal["reached"] = goal["ci95"][0] > -SELECTION_MARGIN
        result["selection_goal"][m] = goal
    result["means"] = {
        m: {key: {"mean": float(np.mean(v)), "ci95": _ci(v)}
            for key in names for v in [[endpoints[m][b][s][key] for b in bases for s in endpoints[m][b]]]}
        for m in methods
    }
    return result


def _ci(values: Sequence[float]) -> float:
    from scipy import stats

    v = np.asarray(values, dtype=np.float64)
    return float(stats.t.ppf(1 - ALPHA / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)) if v.size >= 3 else None


# --- series kept in the report -----------------------------------------------------------------------------

SERIES_KEYS = ("acr", "acr_all_fail", "acr_all_pass", "effective_acr", "reward", "entropy", "grad_norm", "clip_bound",
               "threshold", "triggered", "num_virtual", "skipped_prompts", "selection/precision", "selection/recall")


def mean_series(runs: Sequence[dict], key: str) -> list[float | None]:
    """Mean over runs, step by step, of a per-step series (None entries skipped; runs may differ in length)."""
    length = max(len(r["steps"].get(key, [])) for r in runs)
    out = []
    for i in range(length):
        values = [r["steps"][key][i] for r in runs if i < len(r["steps"].get(key, [])) and r["steps"][key][i] is not None]
        out.append(float(np.mean(values)) if values else None)
    return out


def summarize_method(runs: Sequence[dict], tiers: Sequence[int]) -> dict:
    """What the report keeps of one method on one base: mean series over seeds and per-tier accuracy over evals."""
    keys = [k for k in (*SERIES_KEYS, *(f"acr_tier{d}" for d in tiers)) if any(k in r["steps"] for r in runs)]
    evals = [r["evals"] for r in runs]
    return {
        "series": {k: mean_series(runs, k) for k in keys},
        "eval_rollouts": np.mean([e["rollouts"] for e in evals], axis=0).tolist(),
        "accuracy_by_tier": {str(d): np.mean([[b[str(d)] for b in e["by_tier"]] for e in evals], axis=0).tolist()
                             for d in tiers},
        "answer_without_end_by_tier": {
            str(d): np.mean([[b[str(d)] for b in e["answer_without_end_by_tier"]] for e in evals], axis=0).tolist()
            for d in tiers},
        "greedy": np.mean([e["greedy"] for e in evals], axis=0).tolist(),
        "clip_bound": float(np.mean([np.mean(r["steps"]["clip_bound"]) for r in runs])),
        "grad_norm_median": float(np.median([n for r in runs for n in r["steps"]["grad_norm"] if n is not None])),
        "steps": float(np.mean([len(r["steps"]["acr"]) for r in runs])),
        "cpu_s": float(np.sum([r["cpu_s"] for r in runs])),
    }


def run(args) -> int:
    """The study from one command line: bases, pilot, runs, analysis, report (study.json, study.md, plots)."""
    from .experiment import RunSpec, default_jobs, quiet_process, run_all, run_timing, write_report
    from .methods import parse_method
    from .study_report import plot_study, study_markdown

    quiet_process()
    started = time.perf_counter()
    settings = dataclasses.replace(STUDY_SETTINGS, **(QUICK if args.quick else {}))
    seeds = list(range(args.seeds if args.seeds is not None else QUICK_SEEDS if args.quick else STUDY_SEEDS))
    methods = [parse_method(m) for m in (args.methods or STUDY_METHODS)]
    if BASELINE not in [m.name for m in methods]:
        raise ValueError(f"--methods must include the baseline {BASELINE!r}")
    out = args.out or Path("avspo_lab_study")
    out.mkdir(parents=True, exist_ok=True)
    jobs = args.jobs or default_jobs()
    progress = not args.no_progress

    candidates = choose_bases(settings, args.bases or BASES, progress)
    bases = [c for c in candidates if c["accepted"]]
    pilot = pilot_clip(settings, bases[0])
    settings = dataclasses.replace(settings, grad_clip=pilot["grad_clip"])
    if progress:
        print(f"avspo lab study: gradient clip {pilot['grad_clip']} (GRPO pilot: 90th percentile "
              f"{pilot['quantile']:.3g}, median {pilot['median_norm']:.3g}); {len(methods)} methods x {len(bases)} "
              f"bases x {len(seeds)} seeds", file=sys.stderr)

    endpoints: dict[str, dict[int, dict[int, dict]]] = {m.name: {} for m in methods}
    summaries: dict[str, dict[str, dict]] = {m.name: {} for m in methods}
    for base in bases:
        base_settings = dataclasses.replace(settings, task_seed=base["task_seed"])
        specs = [RunSpec(f"{m.name}/base{base['task_seed']}/seed{s}", base_settings, m, s) for m in methods for s in seeds]
        results = run_all(specs, base["state"], jobs, progress=progress, initial_eval=base["description"]["held_out"])
        for m in methods:
            runs = [results[f"{m.name}/base{base['task_seed']}/seed{s}"] for s in seeds]
            endpoints[m.name][base["task_seed"]] = {
                s: run_endpoints(r, settings.rollout_budget) for s, r in zip(seeds, runs)}
            summaries[m.name][str(base["task_seed"])] = summarize_method(runs, settings.tiers)

    task_seeds = [b["task_seed"] for b in bases]
    report = {
        "format": 1,
        "kind": "study",
        "design": {
            "methods": [m.name for m in methods], "baseline": BASELINE, "seeds": seeds,
            "candidate_task_seeds": list(CANDIDATE_TASK_SEEDS), "learnable_pass_rate": list(LEARNABLE_PASS_RATE),
            "unreachable_pass_rate": UNREACHABLE_PASS_RATE, "alpha": ALPHA, "power": POWER,
            "selection_fraction": SELECTION_FRACTION, "selection_margin": SELECTION_MARGIN,
            "pilot": {"quantile": PILOT_QUANTILE, "steps": PILOT_STEPS, "seed": PILOT_SEED},
        },
        "settings": settings.to_dict(),
        "method_descriptions": {m.name: m.description for m in methods},
        "candidates": [{k: v for k, v in c.items() if k != "state"} for c in candidates],
        "pilot": pilot,
        "endpoints": {m: {str(b): {str(s): v for s, v in by_seed.items()} for b, by_seed in by_base.items()}
                      for m, by_base in endpoints.items()},
        "analysis": analyse(endpoints, [m.name for m in methods], task_seeds),
        "summaries": summaries,
        "timing": run_timing(started, jobs),
    }
    write_report(out, "study", report, study_markdown(report))
    plot_study(report, out)
    print(f"avspo lab study: wrote study.json, study.md and plots in {out}/", file=sys.stderr)
    return 0
