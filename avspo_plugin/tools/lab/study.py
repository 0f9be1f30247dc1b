"""``avspo lab study``: does AVSPO, or prompt selection, help a GRPO run, where, and why?

The design is fixed here in code before any method is compared (docs/study.md states it in words):

1. Bases by a rule on base-policy statistics only (:func:`regime_of`): each candidate warm-up of
   BASE_CANDIDATES, in order, is warmed up and sampled (G samples per held-out prompt at the RL temperature);
   its share of all-fail groups F and all-pass groups P (weighted by the RL tier mix) name its regime. The first
   eligible candidate of each regime (all-fail dominant, mixed, all-pass dominant) is that regime's base.
2. GRPO's settings are frozen by tuning on seeds the study does not use (``avspo lab tune``, docs/tuning/):
   STUDY_SETTINGS holds them, every method runs with them plus its own defaults.
3. Phase 1: GRPO on every base with the study's seeds; the gates of gates.py on each base. A base that fails
   any gate is reported, and no method is compared on it.
4. Phase 2: every other method on the bases that pass, each run to exactly the same rollout budget (DAPO's
   last step samples only what is left). PRIMARY methods run PRIMARY_SEEDS seeds per base, chosen so that
   the MDE at 80% power of their difference to GRPO is at most MDE_TARGET (from the tuning runs' variance);
   the other methods ABLATION_SEEDS, their MDE stated.
5. Endpoints: held-out accuracy at the budget (primary), its area under the curve over rollouts, and greedy
   accuracy, each as a difference to GRPO paired by base and seed, pooled over bases and per base, with
   Holm's correction over the methods; rollouts each method needs to reach GRPO's final accuracy; wall time.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from avspo_plugin.tools.regimes import DOMINANCE, REGIME_TITLES, REGIMES, collapse_regime

from .experiment import RunSpec, default_jobs, prepare_base, quiet_process, run_all, run_timing, write_report
from .gates import failed, grpo_gates, passed
from .methods import parse_method
from .settings import LabSettings
from .statistics import ALPHA, POWER, holm, mean_interval, paired_test
from .study_report import plot_study, study_markdown

STUDY_METHODS = ("grpo", "drgrpo", "dapo", "ngrpo", "avspo", "avspo_all_fail", "avspo_all_pass",
                 "avspo_fixed_threshold", "avspo_fixed_k", "avspo_opposite", "random_variance", "rlzvp",
                 "select_grpo", "select_avspo")
BASELINE = "grpo"
PRIMARY = ("grpo", "avspo", "select_grpo")
MDE_TARGET = 0.015
# Seeds per base, from the tuning runs' variance (docs/tuning/tuning.md): rounds 3-6 put the pairs an MDE of
# MDE_TARGET needs at 3 to 5 per base; the primary comparisons pool 3 bases (12 pairs). The rest: 2, MDE stated.
PRIMARY_SEEDS = 4
ABLATION_SEEDS = 2
MAX_BASE_ACCURACY = 0.8  # room for the gates' +0.10: a base above this is not eligible
MIN_BASE_GREEDY = 0.5  # a base below this has not learned the carry rule yet: not eligible
BUDGET_STEPS = 250

# GRPO's frozen settings are the lab's defaults (settings.py), found by tuning: docs/tuning/ has every round.
_DEFAULT = LabSettings()
FROZEN_GRPO = {key: getattr(_DEFAULT, key)
               for key in ("lr", "group_size", "prompts", "temperature", "kl_coef", "grad_clip", "clip_ratio")}
STUDY_SETTINGS = dataclasses.replace(
    _DEFAULT,
    eval_temperature=_DEFAULT.temperature,  # the gates read accuracy at the training temperature
    # A pool in which each problem is drawn twice over the budget (tiers drawn uniformly): selection needs prompts
    # that come back, and no problem is trained on more than twice (with selection, skipped draws use some up).
    train_per_tier=BUDGET_STEPS * _DEFAULT.prompts // len(_DEFAULT.tiers) // 2,
    rollout_budget=BUDGET_STEPS * _DEFAULT.prompts * _DEFAULT.group_size,
    eval_fractions=(0.125, 0.25, 0.5, 0.75, 1.0),
    eval_every=10**6,  # budget mode evaluates at eval_fractions
)
QUICK = {"rollout_budget": 6 * 16 * 4, "prompts": 16, "held_out_per_tier": 8, "eval_samples": 2, "train_per_tier": 12}
QUICK_WARMUP = {"warmup_steps": 60}
QUICK_SEEDS = 2


@dataclass(frozen=True)
class BaseCandidate:
    """A candidate base policy: its name and what its warm-up changes in the study's settings."""

    name: str
    warmup: Mapping[str, Any]


# First, warm-ups of the default length on traces whose carries are dropped at a falling rate: the base learns to
# forget carries at about that rate, so greedy decoding is mostly right while most sampled groups fail (no warm-up
# on correct traces is all-fail dominant with greedy accuracy >= MIN_BASE_GREEDY: docs/tuning/, rounds 1-2).
# Then a warm-up that under-trains the long tiers (tier weights 16:8:4:1 instead of 4:3:2:1): all-pass dominant with
# all-fail groups on tiers 4-5 above the REGIME_FLOOR of gate G3, which GRPO leaves nearly in place on an all-pass
# base; the correct-trace warm-ups below have fewer (round 3's warmup740: 0.03), weights 8:4:2:1 had them at the floor
# (round 4's mix8421: 0.0499 in the first half). docs/tuning/ has every round.
# Then warm-ups on correct traces of different lengths: the base is caught at different points of learning to add
# (docs/lab.md: the lab's warm-up learns the carry rule within a few dozen steps around step 750).
BASE_CANDIDATES = (
    *(BaseCandidate(f"carrydrop{round(100 * rate)}", {"warmup_carry_drop": rate}) for rate in (0.35, 0.3, 0.25, 0.2, 0.15)),
    BaseCandidate("mix16841", {"warmup_mix": (16, 8, 4, 1)}),
    *(BaseCandidate(f"warmup{n}", {"warmup_steps": n}) for n in (730, 735, 740, 745, 750, 755, 757, 758, 760, 765, 770)),
)


def regime_of(sampled_by_tier: Mapping[str, Mapping], held_out: Mapping, settings: LabSettings) -> tuple[str | None, str]:
    """The rule on base statistics (design point 1): (regime or None when not eligible, why).

    F and P: the all-fail and all-pass shares of G-sample groups over the held-out prompts, weighted by the RL
    tier mix. Eligible: held-out accuracy at most MAX_BASE_ACCURACY and greedy accuracy at least MIN_BASE_GREEDY.
    Regime: all_fail when F >= DOMINANCE x P, all_pass when P >= DOMINANCE x F, else mixed.
    """
    weights = dict(zip((str(d) for d in settings.tiers), settings.weights("mix")))
    fail = float(sum(weights[t] * s["all_fail"] for t, s in sampled_by_tier.items()))
    pass_ = float(sum(weights[t] * s["all_pass"] for t, s in sampled_by_tier.items()))
    shares = f"F = {fail:.2f}, P = {pass_:.2f}, accuracy {held_out['accuracy']:.2f}"
    if held_out["accuracy"] > MAX_BASE_ACCURACY:
        return None, f"{shares}: above {MAX_BASE_ACCURACY}, no room for the gates' gain"
    if held_out["greedy"] < MIN_BASE_GREEDY:
        return None, f"{shares}, greedy {held_out['greedy']:.2f}: below {MIN_BASE_GREEDY}, the carry rule not learned"
    if fail + pass_ == 0:
        return None, f"{shares}: no collapsed group, no regime"
    regime = collapse_regime(fail, pass_)
    return regime, f"{shares}: {REGIME_TITLES[regime]}"


def choose_bases(settings: LabSettings, progress: bool, quick: bool = False) -> list[dict]:
    """Every candidate of BASE_CANDIDATES in order, warmed up and judged by :func:`regime_of`; the first eligible
    one of each regime is marked ``chosen`` (candidates after all regimes are filled are not warmed up).
    quick: only the first candidate, chosen whatever the rule says (a pipeline check on a toy warm-up)."""
    candidates, filled = [], set()
    for candidate in BASE_CANDIDATES[:1] if quick else BASE_CANDIDATES:
        if filled == set(REGIMES):
            break
        base_settings = dataclasses.replace(settings, **{**candidate.warmup, **(QUICK_WARMUP if quick else {})})
        state, description = prepare_base(base_settings)
        regime, why = regime_of(description["sampled_by_tier"], description["held_out"], base_settings)
        if quick:
            regime, why = regime or "not eligible", f"{why} (quick: chosen without the rule)"
        chosen = regime is not None and regime not in filled
        filled.add(regime) if chosen else None
        candidates.append({"name": candidate.name, "warmup": dict(candidate.warmup), "regime": regime,
                           "chosen": chosen, "why": why, "description": description, "state": state,
                           "settings": base_settings})
        if progress:
            print(f"avspo lab study: base {candidate.name}: {why}{' (chosen)' if chosen else ''}", file=sys.stderr)
    return candidates


def run_base(base: dict, methods: Sequence, seeds: Sequence[int], jobs: int, progress: bool) -> dict[str, dict[int, dict]]:
    """method -> seed -> run, every method from one base."""
    specs = [RunSpec(f"{m.name}/{base['name']}/seed{s}", base["settings"], m, s) for m in methods for s in seeds]
    results = run_all(specs, base["state"], jobs, progress=progress, initial_eval=base["description"]["held_out"])
    return {m.name: {s: results[f"{m.name}/{base['name']}/seed{s}"] for s in seeds} for m in methods}


def gate_bases(bases: Sequence[dict], grpo_runs: Mapping[str, Mapping[int, dict]]) -> dict[str, dict]:
    """The gates of every base, from its GRPO runs: {base name: {gate: {value, bound, passed}}}."""
    return {b["name"]: grpo_gates(b["description"]["held_out"], list(grpo_runs[b["name"]].values()),
                                  b["settings"].grad_clip) for b in bases}


def bases_to_compare(bases: Sequence[dict], gates: Mapping[str, Mapping], enforce: bool, progress: bool) -> list[dict]:
    """The bases methods are compared on: those whose gates all pass (every base when the gates are not enforced)."""
    for b in bases:
        if progress:
            verdict = "passes every gate" if passed(gates[b["name"]]) else f"fails {', '.join(failed(gates[b['name']]))}"
            print(f"avspo lab study: base {b['name']} ({b['regime']}): GRPO {verdict}", file=sys.stderr)
    return [b for b in bases if passed(gates[b["name"]]) or not enforce]


# --- endpoints and analysis ------------------------------------------------------------------------------


def auc(run: dict, budget: int) -> float:
    """Mean held-out accuracy over the rollout budget: the trapezoid area under accuracy over rollouts / budget."""
    x = np.asarray(run["evals"]["rollouts"], dtype=np.float64)
    y = np.asarray(run["evals"]["accuracy"], dtype=np.float64)
    return float(np.trapezoid(y, x) / budget)


def run_endpoints(run: dict, budget: int) -> dict[str, float]:
    evals = run["evals"]
    return {"accuracy": evals["accuracy"][-1], "auc": auc(run, budget), "greedy": evals["greedy"][-1]}


def rollouts_to_reach(runs: Sequence[dict], target: float) -> float | None:
    """Rollouts at which the mean accuracy curve over ``runs`` first reaches ``target`` (linear between
    evaluations); None when it never does."""
    x = np.mean([r["evals"]["rollouts"] for r in runs], axis=0)
    y = np.mean([r["evals"]["accuracy"] for r in runs], axis=0)
    for i in range(len(y)):
        if y[i] >= target:
            if i == 0:
                return 0.0
            return float(x[i - 1] + (target - y[i - 1]) / (y[i] - y[i - 1]) * (x[i] - x[i - 1]))
    return None


def analyse(endpoints: Mapping[str, Mapping[str, Mapping[int, dict]]], methods: Sequence[str],
            bases: Sequence[str]) -> dict:
    """endpoints: method -> base -> seed -> run_endpoints. Each method against GRPO, paired by base and seed,
    pooled over bases and per base; Holm over the methods per endpoint; means."""
    compared = [m for m in methods if m != BASELINE]
    keys = ("accuracy", "auc", "greedy")
    result: dict[str, Any] = {"pooled": {}, "per_base": {}}

    def differences(method: str, key: str, on: Sequence[str]) -> list[float]:
        return [endpoints[method][b][s][key] - endpoints[BASELINE][b][s][key]
                for b in on for s in sorted(endpoints[BASELINE][b]) if s in endpoints[method][b]]

    for key in keys:
        family = {m: paired_test(differences(m, key, bases)) for m in compared}
        holm(family)
        result["pooled"][key] = family
        for b in bases:
            per = {m: paired_test(differences(m, key, [b])) for m in compared}
            holm(per)
            result["per_base"].setdefault(b, {})[key] = per
    result["means"] = {
        m: {key: {"mean": float(np.mean(v)), "ci95": mean_interval(v)}
            for key in keys for v in [[endpoints[m][b][s][key] for b in bases for s in endpoints[m][b]]]}
        for m in methods
    }
    return result


def vs_grpo(analysis: Mapping) -> dict[str, dict]:
    """Per method: its pooled paired difference to GRPO at the budget, with interval, p (Holm) and MDE."""
    return {m: {k: test[k] for k in ("mean", "ci95", "p", "p_holm", "significant", "n", "mde", "mde_holm")}
            for m, test in analysis["pooled"]["accuracy"].items()}


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
    """What the report keeps of one method on one base: mean series over seeds, per-tier accuracy over evaluations,
    clipping, steps and cost."""
    keys = [k for k in (*SERIES_KEYS, *(f"acr_tier{d}" for d in tiers)) if any(k in r["steps"] for r in runs)]
    evals = [r["evals"] for r in runs]
    bound = [b for r in runs for b in r["steps"]["clip_bound"] if b is not None]
    norms = [n for r in runs for n in r["steps"]["grad_norm"] if n is not None]
    return {
        "series": {k: mean_series(runs, k) for k in keys},
        "eval_rollouts": np.mean([e["rollouts"] for e in evals], axis=0).tolist(),
        "accuracy": np.mean([e["accuracy"] for e in evals], axis=0).tolist(),
        "accuracy_by_tier": {str(d): np.mean([[b[str(d)] for b in e["by_tier"]] for e in evals], axis=0).tolist()
                             for d in tiers},
        "greedy": np.mean([e["greedy"] for e in evals], axis=0).tolist(),
        "clip_bound": float(np.mean(bound)) if bound else 0.0,
        "grad_norm_median": float(np.median(norms)) if norms else None,
        "steps": float(np.mean([len(r["steps"]["acr"]) for r in runs])),
        "wall_s": float(np.mean([r["wall_s"] for r in runs])),
        "cpu_s": float(np.mean([r["cpu_s"] for r in runs])),
    }


def seeds_of(method: str, count: int | None = None) -> list[int]:
    """The study's seeds of a method (per base)."""
    return list(range(count if count is not None else PRIMARY_SEEDS if method in PRIMARY else ABLATION_SEEDS))


def planned_runs(methods: Sequence[str], bases: int, primary_seeds: int, ablation_seeds: int) -> int:
    return bases * sum(primary_seeds if m in PRIMARY else ablation_seeds for m in methods)


def run(args) -> int:
    """The study from one command line: bases, GRPO and its gates, the comparisons, analysis, report."""
    quiet_process()
    started = time.perf_counter()
    settings = dataclasses.replace(STUDY_SETTINGS, **(QUICK if args.quick else {}))
    methods = [parse_method(m) for m in (args.methods or STUDY_METHODS)]
    if BASELINE not in [m.name for m in methods]:
        raise ValueError(f"--methods must include the baseline {BASELINE!r}")
    primary_seeds = args.seeds if args.seeds is not None else QUICK_SEEDS if args.quick else PRIMARY_SEEDS
    ablation_seeds = min(primary_seeds, QUICK_SEEDS if args.quick else ABLATION_SEEDS)
    seeds = {m.name: list(range(primary_seeds if m.name in PRIMARY else ablation_seeds)) for m in methods}
    out = args.out or Path("avspo_lab_study")
    out.mkdir(parents=True, exist_ok=True)
    jobs = args.jobs or default_jobs()
    progress = not args.no_progress
    # The quick study checks the pipeline on a toy budget where GRPO cannot learn: its gates are reported, not
    # enforced.
    enforce_gates = not args.quick

    candidates = choose_bases(settings, progress, quick=args.quick)
    bases = [c for c in candidates if c["chosen"]][: args.bases or len(REGIMES)]
    if not bases:
        raise ValueError("no candidate base is eligible (docs/study.md, design point 1)")
    grpo = next(m for m in methods if m.name == BASELINE)
    grpo_runs = {b["name"]: run_base(b, [grpo], seeds[BASELINE], jobs, progress)[BASELINE] for b in bases}
    gates = gate_bases(bases, grpo_runs)
    compared = bases_to_compare(bases, gates, enforce_gates, progress)

    runs: dict[str, dict[str, dict[int, dict]]] = {m.name: {} for m in methods}
    for b in bases:
        runs[BASELINE][b["name"]] = grpo_runs[b["name"]]
    for b in compared:
        others = [m for m in methods if m.name != BASELINE]
        for count in sorted({len(seeds[m.name]) for m in others}):
            group = [m for m in others if len(seeds[m.name]) == count]
            for name, by_seed in run_base(b, group, list(range(count)), jobs, progress).items():
                runs[name][b["name"]] = by_seed

    names = [b["name"] for b in compared]
    budget = settings.rollout_budget
    endpoints = {m: {b: {s: run_endpoints(r, budget) for s, r in by_seed.items()} for b, by_seed in by_base.items()}
                 for m, by_base in runs.items()}
    analysis = analyse(endpoints, [m.name for m in methods], names) if names and len(methods) > 1 else None
    grpo_final = {b: float(np.mean([r["evals"]["accuracy"][-1] for r in runs[BASELINE][b].values()])) for b in names}
    report = {
        "format": 2,
        "kind": "study",
        "gates": gates,
        "design": {
            "methods": [m.name for m in methods], "baseline": BASELINE, "primary": list(PRIMARY),
            "seeds": {m: s for m, s in seeds.items()}, "mde_target": MDE_TARGET, "alpha": ALPHA, "power": POWER,
            "regimes": list(REGIMES), "dominance": DOMINANCE, "max_base_accuracy": MAX_BASE_ACCURACY,
            "min_base_greedy": MIN_BASE_GREEDY,
            "frozen_grpo": FROZEN_GRPO, "gates_enforced": enforce_gates,
            "planned_runs": planned_runs([m.name for m in methods], len(bases), primary_seeds, ablation_seeds),
        },
        "settings": settings.to_dict(),
        "method_descriptions": {m.name: m.description for m in methods},
        "candidates": [{k: v for k, v in c.items() if k not in ("state", "settings")} for c in candidates],
        "bases": {b["name"]: {"regime": b["regime"], "compared": b in compared} for b in bases},
        "endpoints": {m: {b: {str(s): v for s, v in by_seed.items()} for b, by_seed in by_base.items()}
                      for m, by_base in endpoints.items()},
        "analysis": analysis,
        "vs_grpo": vs_grpo(analysis) if analysis else {},
        "rollouts_to_grpo_final": {m.name: {b: rollouts_to_reach(list(runs[m.name][b].values()), grpo_final[b])
                                            for b in names if b in runs[m.name]} for m in methods},
        "summaries": {m: {b: summarize_method(list(by_seed.values()), settings.tiers) for b, by_seed in by_base.items()}
                      for m, by_base in runs.items()},
        "timing": run_timing(started, jobs),
    }
    write_report(out, "study", report, study_markdown(report))
    plot_study(report, out)
    if not compared:
        print("avspo lab study: no base passes the gates; no method was compared (study.md lists the gates)",
              file=sys.stderr)
        return 3
    print(f"avspo lab study: wrote study.json, study.md and plots in {out}/", file=sys.stderr)
    return 0
