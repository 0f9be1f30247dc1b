"""``python -m lab sweep``: does early ACR predict how a GRPO run ends, on the testbed where GRPO learns?

The design is fixed here in code before the sweep runs (docs/evidence/sweep.md states it in words):

1. GRPO at the study's frozen settings (study.STUDY_SETTINGS: every run to the same rollout budget, a fixed training
   pool), temperature fixed at SWEEP_TEMPERATURE so that it cannot drive both early ACR and the final score.
2. What users vary, crossed (SWEEP): the base policy (study.BASE_CANDIDATES by name, each warmed up and judged by the
   study's eligibility rule; an ineligible one is reported and left out), the learning rate, G at equal rollouts
   per step (prompts = rollouts per step / G), and the RL tier mix (the training pool's per-tier composition).
   Each configuration runs SWEEP.seeds seeds.
3. The analysis (sweep_analysis.py): which early signals predict the final held-out gain over the base, in sample
   and on whole bases held out, what ACR adds to early reward and base accuracy, whether ACR and the gain move
   together across seeds of one configuration, and the paper's stagnation rule.
4. fit.json: the line gain = a + b x early ACR, labelled as measured on the lab, with its
   out-of-sample result and whether that supports a forecast for another run (sweep_preregistered.FORECAST_RULE: the
   line's own rule, and the pre-registered verdict where the file holds it).

Finished runs are kept in ``OUT/runs`` (experiment.run_all's cache): a stopped sweep resumes where it stopped.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..experiment import (
    RunSpec,
    default_jobs,
    prepare_base,
    quiet_process,
    run_all,
    run_fingerprint,
    run_timing,
    state_digest,
    write_report,
)
from ..methods import PRESETS
from ..report import EARLY_FRACTION
from ..settings import LabSettings
from .forecast_models import MIN_TRAIN_GROUPS
from .study import QUICK as STUDY_QUICK
from .study import QUICK_WARMUP, STUDY_SETTINGS, BaseCandidate, choose_bases, regime_of
from .sweep_analysis import MIN_BASES, analyse, early_signals, final_gain, stagnation
from .sweep_preregistered import (
    EVIDENCE,
    EXPLORATORY_WHY,
    FORECAST_RULE,
    LINE_RULE,
    line_why,
    preregistered,
    result,
    with_verdicts,
)
from .sweep_report import plot_signals, report_markdown


@dataclass(frozen=True)
class SweepDesign:
    """What the sweep crosses: every base x learning rate x G x tier mix, each with ``seeds`` seeds (0, 1, ...)."""

    bases: tuple[str, ...]  # study.BASE_CANDIDATES names
    learning_rates: tuple[float, ...]
    group_sizes: tuple[int, ...]  # at the settings' rollouts per step: prompts = prompts x group_size / G
    mixes: tuple[tuple[str, tuple[float, ...]], ...]  # (name, weights per tier)
    seeds: int
    first_seed: int = 0  # seeds first_seed, first_seed + 1, ...


# Six bases spanning the regimes and base accuracies 0.14 to 0.62 on the development machine (docs/evidence/study/study.md,
# docs/evidence/tuning/ round 7): in GRPO's first half carrydrop25, carrydrop20 and mix16841 train all-fail dominant,
# carrydrop35 mixed, carrydrop15 and warmup730 all-pass dominant. The study's learning rate and 4x it (phase 3's
# largest candidate); the default tier mix and one weighted towards the long tiers.
SWEEP = SweepDesign(
    bases=("carrydrop35", "carrydrop25", "carrydrop20", "carrydrop15", "mix16841", "warmup730"),
    learning_rates=(1.5e-4, 6e-4),
    group_sizes=(4, 8),
    mixes=(("default", (1, 1, 1, 1)), ("hard", (1, 2, 3, 4))),
    seeds=2,
)
# The pipeline on a toy budget: the fewest bases leave-one-base-out needs, one learning rate.
QUICK_SWEEP = dataclasses.replace(SWEEP, bases=SWEEP.bases[:MIN_BASES], learning_rates=SWEEP.learning_rates[:1])
SWEEP_TEMPERATURE = 1.0
SWEEP_SETTINGS = dataclasses.replace(STUDY_SETTINGS, temperature=SWEEP_TEMPERATURE, eval_temperature=SWEEP_TEMPERATURE)
# The plan's cost estimate, with a margin: a GRPO run of REFERENCE_BUDGET rollouts at the frozen settings took 105-115
# CPU-seconds in docs/evidence/study/, and 94-95 from carrydrop25 at lr 6e-4 (G = 8 on the hard pool, G = 4 on the default)
# beside the study's two workers on the 2-core development machine; a base's warm-up and description 25-30.
REFERENCE_BUDGET = 128_000
ESTIMATED_RUN_CPU_S = 140.0
ESTIMATED_WARMUP_CPU_S = 30.0
# The confirmation sweep (issue 40): the pre-registered analysis (lab/research/forecast_models.py, committed before it runs) on bases
# that no sweep, tuning round or fit has used (new warm-ups, none of study.BASE_CANDIDATES: carry-drop rates between
# the ones tried, a tier mix between 16:8:4:1 and 4:3:2:1, a warm-up length below 730), seeds no run has used (the
# study's are 0, 1, ..., tuning's 1000-1099), and learning rates between (3e-4) and beyond (1.2e-3) the sweep's
# 1.5e-4 and 6e-4; G and the tier mix as in SWEEP. 6 x 2 x 2 x 2 x 2 = 96 runs; it needs CONFIRM_MIN_BASES eligible.
CONFIRM_CANDIDATES = (
    *(BaseCandidate(f"carrydrop{round(100 * rate)}", {"warmup_carry_drop": rate}) for rate in (0.32, 0.22, 0.17, 0.12)),
    BaseCandidate("mix12631", {"warmup_mix": (12, 6, 3, 1)}),
    BaseCandidate("warmup725", {"warmup_steps": 725}),
)
CONFIRM_SWEEP = SweepDesign(
    bases=tuple(c.name for c in CONFIRM_CANDIDATES),
    learning_rates=(3e-4, 1.2e-3),
    group_sizes=SWEEP.group_sizes,
    mixes=SWEEP.mixes,
    seeds=2,
    first_seed=2000,
)
# Leave-one-base-out keeps a resample only where every held-out base is fitted on MIN_TRAIN_GROUPS others.
CONFIRM_MIN_BASES = MIN_TRAIN_GROUPS + 1
# Its pipeline on a toy budget: the fewest bases the pre-registered analysis needs, one learning rate, one seed.
QUICK_CONFIRM = dataclasses.replace(CONFIRM_SWEEP, bases=CONFIRM_SWEEP.bases[:CONFIRM_MIN_BASES],
                                    learning_rates=CONFIRM_SWEEP.learning_rates[:1], seeds=1)
CONFIRM_COMMAND = "python -m lab sweep --confirm --out build/sweep-confirm --jobs 2"


@dataclass(frozen=True)
class SweepConfiguration:
    label: str
    base: str
    mix: str
    settings: LabSettings


def with_group_size(settings: LabSettings, group_size: int) -> LabSettings:
    """``settings`` with G = group_size and as many prompts as keep the rollouts per step (prompts x G)."""
    rollouts = settings.prompts * settings.group_size
    if rollouts % group_size:
        raise ValueError(f"G={group_size} does not divide the {rollouts} rollouts per step (prompts {settings.prompts} "
                         f"x G {settings.group_size})")
    return dataclasses.replace(settings, group_size=group_size, prompts=rollouts // group_size)


def with_tier_mix(settings: LabSettings, weights: Sequence[float]) -> LabSettings:
    """``settings`` whose RL prompts follow the tier weights. With a fixed training pool (the sweep's) the mix does
    not apply to drawing, so the pool's per-tier counts take the weights' proportions at the same total (rounded);
    ``mix`` records the weights either way."""
    w = np.asarray(weights, dtype=np.float64)
    if not settings.fixed_training_set:
        return dataclasses.replace(settings, mix=tuple(weights))
    counts = np.rint(sum(settings.train_counts()) * w / w.sum()).astype(int)
    return dataclasses.replace(settings, mix=tuple(weights), train_per_tier=tuple(int(c) for c in counts))


def sweep_grid(bases: Sequence[Mapping], design: SweepDesign) -> list[SweepConfiguration]:
    """Every configuration: for each base (choose_bases' entries, with their warm-up ``settings``) every learning
    rate x G x tier mix of the design, the rest as the base's settings."""
    grid = []
    for base in bases:
        for lr in design.learning_rates:
            for group_size in design.group_sizes:
                for mix_name, weights in design.mixes:
                    settings = with_tier_mix(with_group_size(dataclasses.replace(base["settings"], lr=lr), group_size),
                                             weights)
                    grid.append(SweepConfiguration(f"{base['name']} lr={lr:g} G={group_size} mix={mix_name}",
                                                   base["name"], mix_name, settings))
    return grid


def sweep_plan(design: SweepDesign, seeds: int, budget: int, jobs: int) -> dict[str, Any]:
    """The runs of the design with ``seeds`` seeds, and their estimated cost: ESTIMATED_RUN_CPU_S per run (scaled by
    the rollout budget over REFERENCE_BUDGET) spread over ``jobs`` workers, after the bases' warm-ups in this
    process (ESTIMATED_WARMUP_CPU_S each). Estimates, not measurements: the report gives the measured time."""
    configurations = (len(design.bases) * len(design.learning_rates) * len(design.group_sizes) * len(design.mixes))
    runs = configurations * seeds
    run_cpu = runs * ESTIMATED_RUN_CPU_S * budget / REFERENCE_BUDGET
    warmup_cpu = len(design.bases) * ESTIMATED_WARMUP_CPU_S
    return {"bases": len(design.bases), "configurations": configurations, "seeds": seeds, "runs": runs,
            "rollouts_per_run": budget, "jobs": jobs, "estimated_cpu_s": run_cpu + warmup_cpu,
            "estimated_wall_s": run_cpu / max(1, min(jobs, runs)) + warmup_cpu}


def confirmation_plan(jobs: int = 2) -> dict[str, Any]:
    """The confirmation sweep as planned (CONFIRM_SWEEP at SWEEP_SETTINGS): its command, bases, learning rates, seeds
    and :func:`sweep_plan`'s estimate with ``jobs`` workers."""
    design = CONFIRM_SWEEP
    return {"command": CONFIRM_COMMAND, "base_names": list(design.bases), "learning_rates": list(design.learning_rates),
            "seed_list": list(range(design.first_seed, design.first_seed + design.seeds)), "min_bases": CONFIRM_MIN_BASES,
            **sweep_plan(design, design.seeds, SWEEP_SETTINGS.rollout_budget, jobs)}


def confirmation_bases(settings: LabSettings, quick: bool, names: Sequence[str], cache: Path) -> list[dict]:
    """CONFIRM_CANDIDATES named, in order, warmed up (kept in ``cache``) and judged by study.regime_of, each chosen
    when eligible (quick: chosen whatever the rule says, on the toy warm-up), as study.choose_bases(named=...)
    describes its candidates."""
    known = {c.name: c for c in CONFIRM_CANDIDATES}
    candidates = []
    for name in names:
        candidate = known[name]
        base_settings = dataclasses.replace(settings, **{**candidate.warmup, **(QUICK_WARMUP if quick else {})})
        state, description = prepare_base(base_settings, cache)
        regime, why = regime_of(description["sampled_by_tier"], description["held_out"], base_settings)
        if quick:
            regime, why = regime or "not eligible", f"{why} (quick: chosen without the rule)"
        candidates.append({"name": name, "warmup": dict(candidate.warmup), "regime": regime,
                           "chosen": regime is not None, "why": why, "description": description, "state": state,
                           "settings": base_settings})
    return candidates


def configuration_record(configuration: SweepConfiguration, seeds: Sequence[int]) -> dict[str, Any]:
    """What sweep.json keeps of a configuration: its label, base, what the grid set, and its seeds."""
    settings = configuration.settings
    return {"label": configuration.label, "base": configuration.base, "lr": settings.lr,
            "group_size": settings.group_size, "prompts": settings.prompts, "mix": configuration.mix,
            "mix_weights": list(settings.mix), "train_per_tier": settings.train_per_tier, "seeds": list(seeds)}


def sweep_point(configuration: SweepConfiguration, seed: int, run: Mapping, run_file: str) -> dict[str, Any]:
    """One run as the analysis reads it: its configuration, seed, early signals, final gain (points), the
    stagnation rule's verdict, and where its series are kept."""
    settings, evals = configuration.settings, run["evals"]
    return {
        "base": configuration.base, "configuration": configuration.label, "lr": settings.lr,
        "group_size": settings.group_size, "prompts": settings.prompts, "mix": configuration.mix, "seed": seed,
        "signals": early_signals(run["steps"], evals["accuracy"][0]),
        "final_gain": final_gain(evals),
        "final_accuracy": float(evals["accuracy"][-1]),
        "stagnation": stagnation(run["steps"]["acr"]),
        "steps": len(run["steps"]["acr"]),
        "run_file": run_file,
    }


def early_window(steps: int) -> int:
    """How many leading steps the early window holds (report.window_mean's rounding of EARLY_FRACTION)."""
    return max(1, int(np.ceil(EARLY_FRACTION * steps)))


def fit_file(points: Sequence[Mapping], prediction: Mapping, settings: LabSettings) -> dict[str, Any]:
    """fit.json: the least-squares line gain = intercept + slope x early ACR over every run,
    labelled as measured on the lab, with early ACR's leave-one-base-out R^2 (``oos``, from ``prediction``:
    sweep_analysis.prediction_table) and ``forecast``: whether that supports projecting another run (LINE_RULE; once
    the pre-registered test joins the file, sweep_preregistered.with_verdicts decides)."""
    lengths = sorted({p["steps"] for p in points})
    if len(lengths) != 1:
        raise ValueError(f"the runs differ in length ({lengths} steps): one early window cannot describe them")
    acr = np.array([p["signals"]["acr"] for p in points])
    gain = np.array([p["final_gain"] for p in points])
    # lstsq, not polyfit: with early ACR all equal (a toy budget) the line is flat, not an error.
    intercept, slope = (float(v) for v in np.linalg.lstsq(np.column_stack([np.ones(acr.size), acr]), gain,
                                                          rcond=None)[0])
    oos = prediction["alone"]["acr"]["oos_r2"]
    window = early_window(lengths[0])
    bases = len(prediction["bases"])
    why = line_why({"r2": oos["value"], "ci95": oos["ci95"], "bases": bases})
    sign = "-" if slope < 0 else "+"
    return {
        "intercept": intercept,
        "slope": slope,
        "early_steps": window,
        "early_fraction": EARLY_FRACTION,
        "acr_range": [float(acr.min()), float(acr.max())],
        "target": (f"final held-out gain over the base policy (points of avg@{settings.eval_samples} accuracy at "
                   f"temperature {settings.eval_temperature}) in the avspo CPU lab"),
        "label": (f"measured on the avspo CPU lab, not on this run's task ({len(points)} GRPO runs from {bases} base "
                  f"policies): gain = {intercept:.1f} {sign} {abs(slope):.1f} x early ACR (first {window} steps); "
                  f"out-of-sample {why}"),
        "measured_on": "avspo CPU lab (python -m lab sweep): GRPO on multi-digit addition, a tiny Qwen2",
        "in_sample_r2": prediction["alone"]["acr"]["in_sample_r2"],
        "oos": {"method": "leave-one-base-out", "r2": oos["value"], "ci95": oos["ci95"], "bases": bases,
                "runs": len(points), "bootstrap": prediction["bootstrap"],
                "gain_over_baseline": {"baseline": prediction["baseline"]["signals"],
                                       **prediction["added"]["acr"]["gain"]},
                # What ACR and each of its parts add to the baseline (early reward + base accuracy), for analyze.
                "baseline_r2": prediction["baseline"]["oos_r2"],
                "added": {name: added["gain"] for name, added in prediction["added"].items()}},
        "forecast": {"supported": oos["ci95"] is not None and oos["ci95"][0] > 0, "rule": LINE_RULE, "why": why},
    }


def describe_bases(candidates: Sequence[Mapping]) -> dict[str, dict]:
    """What the report keeps of each named base: eligible (chosen by study.choose_bases), regime, the rule's words,
    its warm-up and its held-out accuracy and greedy accuracy."""
    return {c["name"]: {"eligible": c["chosen"], "regime": c["regime"], "why": c["why"], "warmup": c["warmup"],
                        "accuracy": c["description"]["held_out"]["accuracy"],
                        "greedy": c["description"]["held_out"]["greedy"]} for c in candidates}


def run(args) -> int:
    """The sweep from one command line: plan, bases, every configuration's runs, the analysis, the report."""
    quiet_process()
    started = time.perf_counter()
    confirm = bool(getattr(args, "confirm", False))
    design = (QUICK_CONFIRM if args.quick else CONFIRM_SWEEP) if confirm else (QUICK_SWEEP if args.quick else SWEEP)
    settings = dataclasses.replace(SWEEP_SETTINGS, **(STUDY_QUICK if args.quick else {}))
    count = args.seeds if args.seeds is not None else design.seeds
    seeds = list(range(design.first_seed, design.first_seed + count))
    if not seeds:
        raise ValueError("--seeds must be >= 1")
    out = args.out or Path("avspo_lab_sweep_confirm" if confirm else "avspo_lab_sweep")
    out.mkdir(parents=True, exist_ok=True)
    jobs = args.jobs or default_jobs()
    progress = not args.no_progress
    plan = sweep_plan(design, len(seeds), settings.rollout_budget, jobs)
    print(f"python -m lab sweep: {plan['configurations']} GRPO configurations ({plan['bases']} bases x "
          f"{len(design.learning_rates)} learning rates x {len(design.group_sizes)} G x {len(design.mixes)} tier "
          f"mixes) x {len(seeds)} seeds = {plan['runs']} runs of {settings.rollout_budget:,} rollouts; estimated "
          f"{plan['estimated_cpu_s']:,.0f} CPU-seconds ({plan['estimated_cpu_s'] / 3600:.1f} h), "
          f"{plan['estimated_wall_s']:,.0f} s wall ({plan['estimated_wall_s'] / 3600:.1f} h) with {jobs} workers",
          file=sys.stderr)

    if confirm:
        candidates = confirmation_bases(settings, args.quick, design.bases, out / "bases")
    else:
        candidates = choose_bases(settings, progress=False, quick=args.quick, named=list(design.bases),
                                  cache=out / "bases")
    for c in candidates:
        verdict = "in the sweep" if c["chosen"] else "NOT ELIGIBLE, left out of the sweep"
        print(f"python -m lab sweep: base {c['name']}: {c['why']}: {verdict}", file=sys.stderr)
    bases = [c for c in candidates if c["chosen"]]
    needed = CONFIRM_MIN_BASES if confirm else MIN_BASES
    if len(bases) < needed:
        raise ValueError(f"{len(bases)} of the bases {', '.join(design.bases)} are eligible; "
                         f"{'the pre-registered leave-one-base-out' if confirm else 'leave-one-base-out'} needs {needed}")

    cache = out / "runs"
    grpo = PRESETS["grpo"]
    points, configurations, ran, cached = [], [], 0, 0
    for base in bases:
        digest = state_digest(base["state"])
        grid = sweep_grid([base], design)
        configurations += [configuration_record(config, seeds) for config in grid]
        planned = [(config, RunSpec(f"{config.label} seed={seed}", config.settings, grpo, seed))
                   for config in grid for seed in seeds]
        files = {spec.key: f"runs/{run_fingerprint(spec, digest)}.json" for _, spec in planned}
        found = sum((out / name).exists() for name in files.values())
        cached, ran = cached + found, ran + len(planned) - found
        results = run_all([spec for _, spec in planned], base["state"], jobs, progress=progress,
                          initial_eval=base["description"]["held_out"], cache=cache)
        points += [sweep_point(config, spec.seed, results[spec.key], files[spec.key]) for config, spec in planned]

    analysis = analyse(points)
    fit = fit_file(points, analysis["prediction"], settings)
    if confirm:
        # The pre-registered table on these runs, beside the exploratory one of the packaged fit file.
        packaged = json.loads((EVIDENCE / "sweep" / "fit.json").read_text(encoding="utf-8")).get("preregistered") or {}
        status = "quick: a toy budget that checks the pipeline" if args.quick else "confirmation"
        fit["preregistered"] = preregistered(
            packaged.get("exploratory"),
            result(points, status, f"{out}/sweep.json", "the pre-registered analysis on bases, seeds and learning "
                   "rates no fit has seen, specified in code before these runs"),
            confirmation_plan(jobs))
        fit = with_verdicts(fit)
    report = {
        "format": 3,
        "kind": "sweep",
        "design": {**dataclasses.asdict(design), "seeds": seeds, "temperature": SWEEP_TEMPERATURE,
                   "early_fraction": EARLY_FRACTION, "forecast_rule": FORECAST_RULE, "quick": bool(args.quick),
                   "confirm": confirm},
        "plan": plan,
        "settings": settings.to_dict(),
        "bases": describe_bases(candidates),
        "configurations": configurations,
        "points": points,
        "analysis": analysis,
        "fit": fit,
        "timing": {**run_timing(started, jobs), "runs_run": ran, "runs_from_cache": cached},
    }
    (out / "fit.json").write_text(json.dumps(fit, indent=1) + "\n", encoding="utf-8")
    write_report(out, "sweep", report, report_markdown(report))
    plot_signals(points, analysis["prediction"], out / "sweep_signals.png")
    print(f"python -m lab sweep: wrote sweep.json, sweep.md, fit.json and sweep_signals.png in {out}/", file=sys.stderr)
    return 0


def write_preregistered(argv: Sequence[str] | None = None) -> int:
    """``python -m lab.research.sweep [DIR] [--confirmation CONFIRM_DIR]``: the pre-registered analysis of DIR's
    sweep.json (default docs/evidence/sweep) into its fit.json: the exploratory pass fitted again (no run is made), the
    confirmation kept, or taken from CONFIRM_DIR/fit.json (what ``python -m lab sweep --confirm --out CONFIRM_DIR``
    wrote), with the verdict that follows. ``python -m renderer`` then writes the packaged copy analyze reads and the
    pages that quote it."""
    parser = argparse.ArgumentParser(prog="python -m lab.research.sweep")
    parser.add_argument("directory", nargs="?", type=Path, default=EVIDENCE / "sweep")
    parser.add_argument("--confirmation", type=Path, help="a confirmation sweep's --out folder")
    args = parser.parse_args(argv)
    report = json.loads((args.directory / "sweep.json").read_text(encoding="utf-8"))
    fit = json.loads((args.directory / "fit.json").read_text(encoding="utf-8"))
    kept = fit.get("preregistered") or {}
    confirmation, planned = kept.get("confirmation"), kept.get("planned_confirmation") or confirmation_plan()
    if args.confirmation is not None:
        confirmed = json.loads((args.confirmation / "fit.json").read_text(encoding="utf-8"))["preregistered"]
        confirmation, planned = confirmed["confirmation"], confirmed["planned_confirmation"]
    fit["preregistered"] = preregistered(
        result(report["points"], "exploratory", "docs/evidence/sweep/sweep.json", EXPLORATORY_WHY), confirmation,
        planned)
    (args.directory / "fit.json").write_text(json.dumps(with_verdicts(fit), indent=1) + "\n", encoding="utf-8")
    print(f"wrote the pre-registered analysis into {args.directory / 'fit.json'}; `python -m renderer` renders what "
          "quotes it", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(write_preregistered())
