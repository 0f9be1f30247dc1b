"""``python -m lab study``: does AVSPO help a GRPO run where it acts, where, and why?

The design is fixed here in code before any method is compared (docs/evidence/study.md states it in words):

1. Bases by a rule on base-policy statistics only (:func:`regime_of`): each candidate warm-up of
   BASE_CANDIDATES, in order, is warmed up and sampled (G samples per held-out prompt at the RL temperature);
   its share of all-fail groups F and all-pass groups P (weighted by the RL tier mix) name its regime. The first
   eligible candidate of each regime (all-fail dominant, mixed, all-pass dominant) is that regime's base.
   The report names each base's regime again as training shows it (:func:`training_regime`: the rule
   ``avspo analyze`` applies to a user's logs, on GRPO's first half of training); the decision table's rows are
   those regimes. A regime that none of these bases shows in training gets the candidate of
   TRAINING_REGIME_BASES, found on tuning seeds to show it, as one more base (:func:`bases_for_missing_regimes`).
2. GRPO's settings are frozen by tuning on seeds the study does not use (``python -m lab tune``, docs/evidence/tuning/):
   STUDY_SETTINGS holds them, every method runs with them plus its own defaults.
3. Phase 1: GRPO on every base with the study's seeds; the gates of gates.py on each base. A base that fails
   any gate is reported, and no method is compared on it.
4. Phase 2: every other method on the bases that pass, each run to exactly the same rollout budget. PRIMARY
   methods run PRIMARY_SEEDS seeds per base (the MDE at 80% power of their difference to GRPO at most
   MDE_TARGET, from the tuning runs' variance); methods named with --methods outside PRIMARY run ABLATION_SEEDS.
5. The manipulation check (:func:`manipulation`): a method counts as tested on a base only where it acted.
   A method that claims to give collapsed groups a signal (Method.acts_on) acted when its effective ACR of the
   groups it targets, over the run, is at most MANIPULATION_RATIO of GRPO's on that base; prompt selection acted
   when it skipped at least MIN_SKIPPED_SHARE of the candidate prompts. Pooled comparisons leave out the pairs
   of bases where a method did not act; the report says "did not act", with its trigger rate, never "no effect".
6. Phase 3: GRPO at its accuracy-best learning rate. LR_CANDIDATES are tried with GRPO alone on LR_TUNING_SEEDS
   (tuning seeds, never study seeds) from every compared base; the learning rate with the highest mean final
   held-out accuracy is GRPO's best. If it is not the study's, GRPO and ACTING_AVSPO run at it with the study's
   seeds, GRPO's learning gates (LEARNING_GATES) are checked there, and the two are compared as in phase 2.
7. Endpoints: held-out accuracy at the budget (primary), its area under the curve over rollouts, and greedy
   accuracy, each as a difference to GRPO paired by base and seed, pooled over bases and per base, with
   Holm's correction over the methods; rollouts each method needs to reach GRPO's final accuracy; wall time.

Arms of the earlier study (docs/evidence/study-history/study-2026-11-26/) not run here are in NOT_RERUN, each with why.
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

from avspo_plugin.evidence.regimes import DOMINANCE, REGIME_TITLES, REGIMES, collapse_regime

from ..experiment import RunSpec, default_jobs, prepare_base, quiet_process, run_all, run_timing, write_report
from ..methods import Method, parse_method
from ..settings import QUICK_SEEDS, LabSettings
from .gates import GATE_NAMES, failed, first_half, grpo_gates, passed
from .statistics import ALPHA, POWER, holm, mean_interval, paired_test
from .study_report import plot_study, study_markdown

STUDY_METHODS = ("grpo", "avspo", "avspo_always", "avspo_paper_point", "avspo_paper_point_all_fail",
                 "avspo_paper_point_all_pass", "avspo_released", "ngrpo", "random_variance")
BASELINE = "grpo"
PRIMARY = STUDY_METHODS
# The arms of the earlier study (docs/evidence/study-history/study-2026-11-26/, same settings, bases and seeds) that this one does not run.
NOT_RERUN = {
    "drgrpo": "answers whether dropping the std division helps, a question AVSPO's trigger does not touch; "
              "its runs stand in docs/evidence/study-history/study-2026-11-26/",
    "dapo": "DAPO at equal rollouts answers a question AVSPO's trigger does not touch; its runs stand in "
            "docs/evidence/study-history/study-2026-11-26/",
    "rlzvp": "a peer method whose result AVSPO's trigger does not touch; its runs stand in docs/evidence/study-history/study-2026-11-26/",
    "select_grpo": "prompt selection, a separate question (removed from the plugin: not shown to help); its runs stand in docs/evidence/study-history/study-2026-11-26/",
    "select_avspo": "prompt selection with the adaptive AVSPO, which did not act there; replaced by nothing until "
                    "selection is studied again",
    "avspo_all_fail": "the adaptive trigger restricted to all-fail groups did not act (trigger rate 0-12%); "
                      "replaced by avspo_paper_point_all_fail, which acts",
    "avspo_all_pass": "as avspo_all_fail; replaced by avspo_paper_point_all_pass",
    "avspo_fixed_threshold": "a fixed 0.5 threshold acted on 0-12% of steps; replaced by avspo_always, which acts "
                             "on every step",
    "avspo_fixed_k": "K = 2 under the adaptive trigger, which seldom acted; K is varied by avspo_always (Eq. 9), "
                     "avspo_paper_point (K = G) and avspo_released (K = 1), which act",
    "avspo_opposite": "the opposite-bound rule under the adaptive trigger; replaced by avspo_released (the "
                      "authors' rule as released: every collapsed group, K = 1)",
}
MDE_TARGET = 0.015
# Seeds per base, from the tuning runs' variance (docs/evidence/tuning/tuning.md): rounds 3-6 put the pairs an MDE of
# MDE_TARGET needs at 3 to 5 per base. Methods outside PRIMARY (named with --methods): 2, MDE stated.
PRIMARY_SEEDS = 4
ABLATION_SEEDS = 2
# The manipulation check (design point 5), fixed before any run: the paper reports effective ACR 58-63% below
# GRPO's; a method that removes less than half of GRPO's collapse on its target did not act there.
MANIPULATION_RATIO = 0.5
MIN_SKIPPED_SHARE = 0.10
EFFECTIVE_SERIES = {"all": ("effective_acr", "acr"), "all_fail": ("effective_acr_all_fail", "acr_all_fail"),
                    "all_pass": ("effective_acr_all_pass", "acr_all_pass")}
# Phase 3 (design point 6): GRPO's learning rate tuned for final accuracy alone, on a tuning seed; the AVSPO arm
# compared with GRPO there is the paper's equations with the trigger open (every collapsed group, K by Eq. 9).
LR_CANDIDATES = (1.5e-4, 3e-4, 6e-4)
LR_TUNING_SEEDS = (1000,)  # tuning seeds (tuning.TUNING_SEEDS): the study's seeds are 0, 1, ...
ACTING_AVSPO = "avspo_always"
# The gates that say GRPO learns; both_regimes and acr_first_half keep both kinds of collapse alive for phase 2's
# question and are reported, not enforced, at GRPO's best learning rate.
LEARNING_GATES = tuple(g for g in GATE_NAMES if g not in ("both_regimes", "acr_first_half"))
# Design point 1, for regimes as training shows them: docs/evidence/tuning/ round 7 found, on tuning seed 1000, that
# carrydrop20 stays all-fail dominant through GRPO's first half (all-fail 0.184, all-pass 0.084) and passes every
# gate, where the rule's all-fail base (carrydrop35) trained as mixed.
TRAINING_REGIME_BASES = {"all_fail": "carrydrop20"}
MAX_BASE_ACCURACY = 0.8  # room for the gates' +0.10: a base above this is not eligible
MIN_BASE_GREEDY = 0.5  # a base below this has not learned the carry rule yet: not eligible
BUDGET_STEPS = 250

# GRPO's frozen settings are the lab's defaults (settings.py), found by tuning: docs/evidence/tuning/ has every round.
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


@dataclass(frozen=True)
class BaseCandidate:
    """A candidate base policy: its name and what its warm-up changes in the study's settings."""

    name: str
    warmup: Mapping[str, Any]


# First, warm-ups of the default length on traces whose carries are dropped at a falling rate: the base learns to
# forget carries at about that rate, so greedy decoding is mostly right while most sampled groups fail (no warm-up
# on correct traces is all-fail dominant with greedy accuracy >= MIN_BASE_GREEDY: docs/evidence/tuning/, rounds 1-2).
# Then a warm-up that under-trains the long tiers (tier weights 16:8:4:1 instead of 4:3:2:1): all-pass dominant with
# all-fail groups on tiers 4-5 above the REGIME_FLOOR of gate G3, which GRPO leaves nearly in place on an all-pass
# base; the correct-trace warm-ups below have fewer (round 3's warmup740: 0.03), weights 8:4:2:1 had them at the floor
# (round 4's mix8421: 0.0499 in the first half). docs/evidence/tuning/ has every round.
# Then warm-ups on correct traces of different lengths: the base is caught at different points of learning to add
# (docs/evidence/lab.md: the lab's warm-up learns the carry rule within a few dozen steps around step 750).
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


def choose_bases(settings: LabSettings, progress: bool, quick: bool = False,
                 named: Sequence[str] | None = None, cache: Path | None = None) -> list[dict]:
    """Every candidate of BASE_CANDIDATES in order, warmed up and judged by :func:`regime_of`; the first eligible
    one of each regime is marked ``chosen`` (candidates after all regimes are filled are not warmed up).
    quick: only the first candidate, chosen whatever the rule says (a pipeline check on a toy warm-up).
    named: only these candidates, in the order given, each chosen when eligible (tuning's search for bases).
    cache: where warmed-up bases are kept and read back (:func:`prepare_base`)."""
    known = {c.name: c for c in BASE_CANDIDATES}
    unknown = [name for name in named or () if name not in known]
    if unknown:
        raise ValueError(f"unknown base candidate(s) {', '.join(unknown)}; the candidates: {', '.join(known)}")
    order = [known[name] for name in named] if named else BASE_CANDIDATES[:1] if quick else BASE_CANDIDATES
    candidates, filled = [], set()
    for candidate in order:
        if filled == set(REGIMES) and not named:
            break
        base_settings = dataclasses.replace(settings, **{**candidate.warmup, **(QUICK_WARMUP if quick else {})})
        state, description = prepare_base(base_settings, cache)
        regime, why = regime_of(description["sampled_by_tier"], description["held_out"], base_settings)
        if quick:
            regime, why = regime or "not eligible", f"{why} (quick: chosen without the rule)"
        chosen = regime is not None and (regime not in filled or bool(named))
        filled.add(regime) if chosen else None
        candidates.append({"name": candidate.name, "warmup": dict(candidate.warmup), "regime": regime,
                           "chosen": chosen, "why": why, "description": description, "state": state,
                           "settings": base_settings})
        if progress:
            print(f"python -m lab study: base {candidate.name}: {why}{' (chosen)' if chosen else ''}", file=sys.stderr)
    return candidates


def run_base(base: dict, methods: Sequence, seeds: Sequence[int], jobs: int, progress: bool,
             cache: Path | None = None) -> dict[str, dict[int, dict]]:
    """method -> seed -> run, every method from one base (finished runs kept in and read back from ``cache``)."""
    specs = [RunSpec(f"{m.name}/{base['name']}/seed{s}", base["settings"], m, s) for m in methods for s in seeds]
    results = run_all(specs, base["state"], jobs, progress=progress, initial_eval=base["description"]["held_out"],
                      cache=cache)
    return {m.name: {s: results[f"{m.name}/{base['name']}/seed{s}"] for s in seeds} for m in methods}


def bases_for_missing_regimes(settings: LabSettings, bases: Sequence[dict], grpo_runs: Mapping[str, Mapping[int, dict]],
                              progress: bool, cache: Path | None = None) -> list[dict]:
    """The candidates of TRAINING_REGIME_BASES for the regimes that none of ``bases`` shows in training (GRPO's
    runs, :func:`training_regime`), warmed up and judged as in :func:`choose_bases`; each marked ``added_for``."""
    shown = {training_regime(list(grpo_runs[b["name"]].values()))["regime"] for b in bases}
    have = {b["name"] for b in bases}
    missing = {regime: name for regime, name in TRAINING_REGIME_BASES.items() if regime not in shown and name not in have}
    added = choose_bases(settings, progress, named=list(missing.values()), cache=cache) if missing else []
    for candidate, regime in zip(added, missing):
        candidate["added_for"] = regime
    return added


def gate_bases(bases: Sequence[dict], grpo_runs: Mapping[str, Mapping[int, dict]]) -> dict[str, dict]:
    """The gates of every base, from its GRPO runs: {base name: {gate: {value, bound, passed}}}."""
    return {b["name"]: grpo_gates(b["description"]["held_out"], list(grpo_runs[b["name"]].values()),
                                  b["settings"].grad_clip) for b in bases}


def bases_to_compare(bases: Sequence[dict], gates: Mapping[str, Mapping], enforce: bool, progress: bool) -> list[dict]:
    """The bases methods are compared on: those whose gates all pass (every base when the gates are not enforced)."""
    for b in bases:
        if progress:
            verdict = "passes every gate" if passed(gates[b["name"]]) else f"fails {', '.join(failed(gates[b['name']]))}"
            print(f"python -m lab study: base {b['name']} ({b['regime']}): GRPO {verdict}", file=sys.stderr)
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
            bases: Sequence[str], acted: Mapping[str, Sequence[str]] | None = None) -> dict:
    """endpoints: method -> base -> seed -> run_endpoints. Each method against GRPO, paired by base and seed,
    pooled over bases and per base; Holm over the methods per endpoint; means.

    acted: method -> the bases where it acted (:func:`manipulation`); the pooled comparison of a method listed
    there takes only those bases' pairs, and a method with fewer than 2 such pairs is left out of the pooled
    family (``pooled_bases`` says which bases each pooled comparison took). Per-base comparisons are kept for
    every base; the report marks those where the method did not act."""
    compared = [m for m in methods if m != BASELINE]
    keys = ("accuracy", "auc", "greedy")
    acted = acted or {}
    pooled_bases = {m: [b for b in bases if m not in acted or b in acted[m]] for m in compared}
    result: dict[str, Any] = {"pooled": {}, "per_base": {}, "pooled_bases": pooled_bases}

    def differences(method: str, key: str, on: Sequence[str]) -> list[float]:
        return [endpoints[method][b][s][key] - endpoints[BASELINE][b][s][key]
                for b in on for s in sorted(endpoints[BASELINE][b]) if s in endpoints[method][b]]

    for key in keys:
        family = {m: paired_test(differences(m, key, pooled_bases[m])) for m in compared
                  if len(differences(m, key, pooled_bases[m])) >= 2}
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


def training_regime(grpo_runs: Sequence[dict]) -> dict[str, Any]:
    """A base's regime as training shows it: the rule ``avspo analyze`` applies to a user's logs
    (:func:`collapse_regime`), on the all-fail and all-pass shares of GRPO's first half of training (mean over
    steps and seeds). The lab's groups all have G samples, so shares of groups equal shares of rollouts."""
    all_fail = float(np.mean([np.mean(first_half(r["steps"]["acr_all_fail"])) for r in grpo_runs]))
    all_pass = float(np.mean([np.mean(first_half(r["steps"]["acr_all_pass"])) for r in grpo_runs]))
    return {"regime": collapse_regime(all_fail, all_pass), "all_fail_first_half": all_fail,
            "all_pass_first_half": all_pass}


def _run_mean(runs: Sequence[dict], key: str) -> float:
    """Mean over runs of a run's mean of a per-step series."""
    return float(np.mean([np.mean([v for v in r["steps"][key] if v is not None]) for r in runs]))


def manipulation(method: Method, runs: Sequence[dict], grpo_runs: Sequence[dict]) -> dict[str, Any] | None:
    """Did ``method`` act on this base (design point 5)? None for a method that claims nothing (acts_on None).

    Virtual-sample and other collapse methods: effective_acr_ratio = the method's mean effective ACR of the groups
    it targets (all collapsed, all-fail or all-pass) / GRPO's on the same base (GRPO's effective ACR is its raw
    ACR); acted when at most MANIPULATION_RATIO (None and not acted when GRPO had no such group). trigger_rate:
    the share of steps on which AVSPO's trigger fired (AVSPO arms only)."""
    if method.acts_on is None:
        return None
    effective_key, raw_key = EFFECTIVE_SERIES[method.acts_on]
    reference = _run_mean(grpo_runs, raw_key)
    ratio = _run_mean(runs, effective_key) / reference if reference > 0 else None
    triggered = all("triggered" in r["steps"] for r in runs)
    return {"acts_on": method.acts_on, "effective_acr_ratio": ratio,
            "trigger_rate": _run_mean(runs, "triggered") if triggered else None,
            "acted": ratio is not None and ratio <= MANIPULATION_RATIO}


def acted_bases(checks: Mapping[str, Mapping[str, dict | None]]) -> dict[str, list[str]]:
    """method -> the bases where it acted, for the methods the manipulation check applies to."""
    return {m: [b for b, check in by_base.items() if check["acted"]]
            for m, by_base in checks.items() if all(check is not None for check in by_base.values())}


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


def planned_runs(methods: Sequence[str], bases: int, primary_seeds: int, ablation_seeds: int) -> int:
    """Runs of phases 1-3, counting phase 3's comparison (2 methods), which runs when GRPO's best learning rate is
    not the study's."""
    return bases * (sum(primary_seeds if m in PRIMARY else ablation_seeds for m in methods)
                    + len(LR_CANDIDATES) * len(LR_TUNING_SEEDS) + 2 * primary_seeds)


def tune_learning_rate(bases: Sequence[dict], tuning_seeds: Sequence[int], jobs: int, progress: bool,
                       cache: Path | None = None) -> dict:
    """Phase 3's choice (design point 6): GRPO alone at each of LR_CANDIDATES on tuning seeds from every base;
    ``best``: the learning rate with the highest mean final held-out accuracy over bases and seeds."""
    grpo = parse_method(BASELINE)
    final: dict[str, dict[str, list[float]]] = {repr(lr): {} for lr in LR_CANDIDATES}
    for b in bases:  # every learning rate of a base in one pool of workers, not one run at a time
        specs = [RunSpec(f"{BASELINE}/{b['name']}/lr{lr!r}/seed{s}", dataclasses.replace(b["settings"], lr=lr), grpo, s)
                 for lr in LR_CANDIDATES for s in tuning_seeds]
        results = run_all(specs, b["state"], jobs, progress=progress, initial_eval=b["description"]["held_out"],
                          cache=cache)
        for lr in LR_CANDIDATES:
            final[repr(lr)][b["name"]] = [results[f"{BASELINE}/{b['name']}/lr{lr!r}/seed{s}"]["evals"]["accuracy"][-1]
                                          for s in tuning_seeds]
    means = {lr: float(np.mean([a for accs in by_base.values() for a in accs])) for lr, by_base in final.items()}
    best = max(LR_CANDIDATES, key=lambda lr: means[repr(lr)])
    if progress:
        print(f"python -m lab study: GRPO's final accuracy by learning rate {means}: best {best}", file=sys.stderr)
    return {"final_accuracy": final, "mean_final_accuracy": means, "best": best, "seeds": list(tuning_seeds)}


def compare_at_learning_rate(bases: Sequence[dict], lr: float, seeds: Sequence[int], jobs: int, progress: bool,
                             enforce_gates: bool, cache: Path | None = None) -> dict:
    """Phase 3's comparison: GRPO and ACTING_AVSPO at learning rate ``lr`` with the study's seeds, compared on the
    bases where GRPO passes LEARNING_GATES there (every base when gates are not enforced)."""
    methods = [parse_method(BASELINE), parse_method(ACTING_AVSPO)]
    at_lr = [{**b, "settings": dataclasses.replace(b["settings"], lr=lr)} for b in bases]
    runs = {b["name"]: run_base(b, methods, list(seeds), jobs, progress, cache) for b in at_lr}
    gates = gate_bases(at_lr, {name: by_method[BASELINE] for name, by_method in runs.items()})
    learns = [name for name, by_gate in gates.items()
              if all(by_gate[g]["passed"] for g in LEARNING_GATES) or not enforce_gates]
    budget = at_lr[0]["settings"].rollout_budget if at_lr else 0
    endpoints = {m.name: {name: {s: run_endpoints(r, budget) for s, r in runs[name][m.name].items()} for name in runs}
                 for m in methods}
    checks = {ACTING_AVSPO: {name: manipulation(methods[1], list(runs[name][ACTING_AVSPO].values()),
                                                list(runs[name][BASELINE].values())) for name in learns}}
    analysis = analyse(endpoints, [m.name for m in methods], learns, acted_bases(checks)) if learns else None
    return {"lr": lr, "gates": gates, "compared": learns, "manipulation": checks, "analysis": analysis,
            "endpoints": {m: {b: {str(s): v for s, v in by_seed.items()} for b, by_seed in by_base.items()}
                          for m, by_base in endpoints.items()},
            "summaries": {m.name: {name: summarize_method(list(runs[name][m.name].values()),
                                                          at_lr[0]["settings"].tiers) for name in runs}
                          for m in methods}}


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

    # Every warmed-up base and every finished run is kept: a stopped study resumes where it stopped.
    candidates = choose_bases(settings, progress, quick=args.quick, cache=out / "bases")
    bases = [c for c in candidates if c["chosen"]][: args.bases or len(REGIMES)]
    if not bases:
        raise ValueError("no candidate base is eligible (docs/evidence/study.md, design point 1)")
    grpo = next(m for m in methods if m.name == BASELINE)
    cache = out / "runs"  # every finished run: a stopped study resumes where it stopped
    grpo_runs = {b["name"]: run_base(b, [grpo], seeds[BASELINE], jobs, progress, cache)[BASELINE] for b in bases}
    if not args.quick and not args.bases:  # the quick study's toy warm-up shows no regime worth another base
        added = bases_for_missing_regimes(settings, bases, grpo_runs, progress, out / "bases")
        candidates += added
        bases += [c for c in added if c["chosen"]]
        grpo_runs.update({b["name"]: run_base(b, [grpo], seeds[BASELINE], jobs, progress, cache)[BASELINE]
                          for b in bases if b["name"] not in grpo_runs})
    gates = gate_bases(bases, grpo_runs)
    compared = bases_to_compare(bases, gates, enforce_gates, progress)

    runs: dict[str, dict[str, dict[int, dict]]] = {m.name: {} for m in methods}
    for b in bases:
        runs[BASELINE][b["name"]] = grpo_runs[b["name"]]
    for b in compared:
        others = [m for m in methods if m.name != BASELINE]
        for count in sorted({len(seeds[m.name]) for m in others}):
            group = [m for m in others if len(seeds[m.name]) == count]
            for name, by_seed in run_base(b, group, list(range(count)), jobs, progress, cache).items():
                runs[name][b["name"]] = by_seed

    names = [b["name"] for b in compared]
    budget = settings.rollout_budget
    endpoints = {m: {b: {s: run_endpoints(r, budget) for s, r in by_seed.items()} for b, by_seed in by_base.items()}
                 for m, by_base in runs.items()}
    checks = {m.name: {b: manipulation(m, list(runs[m.name][b].values()), list(runs[BASELINE][b].values()))
                       for b in names} for m in methods if m.name != BASELINE}
    analysis = analyse(endpoints, [m.name for m in methods], names, acted_bases(checks)) \
        if names and len(methods) > 1 else None
    grpo_final = {b: float(np.mean([r["evals"]["accuracy"][-1] for r in runs[BASELINE][b].values()])) for b in names}
    report = {
        "format": 2,
        "kind": "study",
        "gates": gates,
        "design": {
            "methods": [m.name for m in methods], "baseline": BASELINE, "primary": list(PRIMARY),
            "seeds": {m: s for m, s in seeds.items()}, "mde_target": MDE_TARGET, "alpha": ALPHA, "power": POWER,
            "manipulation_ratio": MANIPULATION_RATIO, "min_skipped_share": MIN_SKIPPED_SHARE,
            "lr_candidates": list(LR_CANDIDATES), "lr_tuning_seeds": list(LR_TUNING_SEEDS),
            "acting_avspo": ACTING_AVSPO, "learning_gates": list(LEARNING_GATES),
            "training_regime_bases": TRAINING_REGIME_BASES,
            "regimes": list(REGIMES), "dominance": DOMINANCE, "max_base_accuracy": MAX_BASE_ACCURACY,
            "min_base_greedy": MIN_BASE_GREEDY,
            "frozen_grpo": FROZEN_GRPO, "gates_enforced": enforce_gates,
            "planned_runs": planned_runs([m.name for m in methods], len(bases), primary_seeds, ablation_seeds),
        },
        "settings": settings.to_dict(),
        "method_descriptions": {m.name: m.description for m in methods},
        "candidates": [{k: v for k, v in c.items() if k not in ("state", "settings")} for c in candidates],
        "bases": {b["name"]: {"regime": b["regime"], "added_for": b.get("added_for"), "compared": b in compared,
                              "training": training_regime(list(grpo_runs[b["name"]].values()))} for b in bases},
        "not_rerun": {m: why for m, why in NOT_RERUN.items() if m not in runs},
        "manipulation": checks,
        "best_lr": None,
        "at_best_lr": None,
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
    # Phases 1-2 are written before phase 3 runs; phase 3 completes the same report.
    write_report(out, "study", report, study_markdown(report))
    if compared:
        report["best_lr"] = tune_learning_rate(compared, LR_TUNING_SEEDS, jobs, progress, cache)
        report["at_best_lr"] = compare_at_learning_rate(
            compared, report["best_lr"]["best"], seeds[BASELINE], jobs, progress, enforce_gates, cache
        ) if report["best_lr"]["best"] != settings.lr else None
        report["timing"] = run_timing(started, jobs)
        write_report(out, "study", report, study_markdown(report))
    plot_study(report, out)
    if not compared:
        print("python -m lab study: no base passes the gates; no method was compared (study.md lists the gates)",
              file=sys.stderr)
        return 3
    print(f"python -m lab study: wrote study.json, study.md and plots in {out}/", file=sys.stderr)
    return 0
