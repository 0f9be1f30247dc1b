"""One run from source to numbers: read, build the timeline, derive the signals; and the JSON form of it all."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from avspo_plugin.config import AVSPOConfig

from . import advice
from .accuracy import accuracy_curve
from .run_logs import load, load_dumps
from .timeline import MEAN_SERIES, PromptTable, Timeline, finite_mean, sample_timeline, scalar_timeline


@dataclass(frozen=True)
class Settings:
    """Everything the analysis of every run shares."""

    monitor: AVSPOConfig  # threshold_mode "never": how ACR, collapse kinds and stagnation are measured
    replay: AVSPOConfig  # the AVSPO whose effect is replayed on per-sample rewards
    early_steps: int
    group_size: int | None
    top: int
    accuracy: str | None = None  # --accuracy KEY: a logged metric read as each run's accuracy curve


@dataclass
class RunResult:
    label: str
    timeline: Timeline
    prompts: PromptTable | None
    validation: Timeline | None
    report: dict[str, Any] = field(default_factory=dict)


def analyse(label: str, path: Path, val_path: Path | None, settings: Settings) -> RunResult:
    loaded = load(path)
    prompts, sizes = None, None
    if loaded.samples is not None:
        timeline, prompts, sizes = sample_timeline(loaded.samples, settings.monitor, settings.replay, str(path))
    else:
        timeline = scalar_timeline(loaded.scalars, settings.group_size, settings.monitor, str(path))
    validation, val_report = None, None
    if val_path is not None:
        val_loaded = load_dumps(val_path)
        validation, _, _ = sample_timeline(val_loaded.samples, settings.monitor, settings.replay, str(val_path))
        val_report = _validation_report(val_path, validation, val_loaded.notes)

    report: dict[str, Any] = {
        "label": label,
        "source": str(loaded.path),
        "format": loaded.format,
        "basis": timeline.basis,
        "exact": timeline.exact,
        "caveats": timeline.caveats,
        "notes": loaded.notes,
        "warnings": [] if loaded.scalars is None else loaded.scalars.warnings,
        "keys": timeline.keys,
        "steps": {"first": int(timeline.steps[0]), "last": int(timeline.steps[-1]), "count": len(timeline.steps)},
    }
    if sizes is not None:
        report["group_sizes"] = {str(size): count for size, count in sorted(sizes.items())}
        if len(sizes) > 1:
            report["notes"] = report["notes"] + [
                "groups differ in size (" + ", ".join(f"{count} of {size}" for size, count in sorted(sizes.items()))
                + "): a prompt sampled twice in one step forms one larger group when the dump has no uid"
            ]
    report["means"] = {name: finite_mean(timeline.get(name)) for name in MEAN_SERIES}
    reward = timeline.get("reward_mean")
    reward = None if reward is None else reward[np.isfinite(reward)]
    report["reward_mean"] = None if reward is None else {"first": float(reward[0]), "last": float(reward[-1])}
    report["rollout_shares"] = advice.shares(timeline)
    report["regime"] = advice.regime(report["rollout_shares"])
    report["early_warning"] = advice.early_window(timeline, settings.early_steps)
    report["stagnation"] = advice.stagnation(timeline, settings.monitor.stagnation_acr, settings.monitor.stagnation_steps)
    report["dapo"] = advice.dapo_estimate(timeline)
    report["avspo"] = advice.avspo_estimate(timeline, settings.replay.threshold_init)
    if prompts is not None:
        report["prompts"] = advice.prompt_summary(prompts, settings.top)
    if val_report is not None:
        report["validation"] = val_report
    if settings.accuracy is not None:
        report["accuracy"] = accuracy_curve(loaded.scalars, settings.accuracy, timeline, str(path))
    report["advice"] = advice.advice(report)
    report["per_step"] = per_step(timeline)
    return RunResult(label, timeline, prompts, validation, report)


def _validation_report(path: Path, validation: Timeline, notes: list[str]) -> dict[str, Any]:
    """Validation dumps: mean score per validation step (the accuracy with 0/1 rewards) and its collapse split."""
    accuracy = validation.series["reward_mean"]
    best = int(np.nanargmax(accuracy))
    grouped = bool(np.nansum(validation.series["groups"]))
    if not grouped:
        notes = notes + ["one sample per prompt (val_kwargs.n = 1): no groups, so no collapse split"]
    columns = ("reward_mean", "acr", "acr_all_fail", "acr_all_pass", "groups", "samples") if grouped else (
        "reward_mean", "samples")
    return {
        "source": str(path),
        "notes": notes,
        "last": {"step": int(validation.steps[-1]), "mean_score": float(accuracy[-1])},
        "best": {"step": int(validation.steps[best]), "mean_score": float(accuracy[best])},
        "per_step": per_step(validation, columns),
    }


def per_step(timeline: Timeline, names: tuple[str, ...] | None = None) -> dict[str, list]:
    names = names or tuple(name for name in timeline.series if timeline.get(name) is not None)
    return {"step": timeline.steps.tolist()} | {
        name: [float(v) if np.isfinite(v) else None for v in timeline.series[name]] for name in names}


def compare(results: list[RunResult]) -> list[dict[str, Any]]:
    """One row per run of the headline numbers, for side-by-side reading."""
    rows = []
    for result in results:
        report = result.report
        validation = report.get("validation")
        rows.append({
            "label": result.label,
            "steps": report["steps"]["count"],
            "acr_early": report["early_warning"]["acr"],
            "acr_mean": report["means"]["acr"],
            "effective_acr": effective_acr(report),
            "all_fail": report["rollout_shares"]["all_fail"],
            "all_pass": report["rollout_shares"]["all_pass"],
            "regime": None if report["regime"] is None else report["regime"]["name"],
            "stagnation_at": report["stagnation"]["fired_at_step"],
            "reward_last": None if report["reward_mean"] is None else report["reward_mean"]["last"],
            "val_last": None if validation is None else validation["last"]["mean_score"],
            "exact": report["exact"],
        })
    return rows


def effective_acr(report: dict[str, Any]) -> float | None:
    """The mean share of groups whose advantages were all zero: AVSPO's own effective_acr where the run logged it;
    else its ACR, since GRPO's advantages (and its relatives') are zero in exactly the collapsed groups."""
    avspo = report["avspo"]
    if avspo["source"] == "logged" and avspo["effective_acr"] is not None:
        return avspo["effective_acr"]
    return report["means"]["acr"]
