"""One run from source to numbers: read, build the timeline, derive the signals; and the JSON form of it all."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from avspo_plugin.config import AVSPOConfig

from . import advice, readers
from .accuracy import accuracy_curve
from .timeline import PromptTable, Timeline, sample_timeline, scalar_timeline


@dataclass(frozen=True)
class Settings:
    """Everything the analysis of every run shares."""

    monitor: AVSPOConfig  # threshold_mode "never": how ACR and collapse kinds are measured
    replay: AVSPOConfig  # the AVSPO whose effect is replayed on per-sample rewards
    early_steps: int
    stagnation_acr: float
    stagnation_steps: int
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
    loaded = readers.load(path)
    prompts, sizes = None, None
    if loaded.samples is not None:
        timeline, prompts, sizes = sample_timeline(loaded.samples, settings.monitor, settings.replay, str(path))
    else:
        timeline = scalar_timeline(loaded.scalars, settings.group_size, settings.monitor, str(path))
    validation, val_report = None, None
    if val_path is not None:
        val_loaded = readers.load_dumps(val_path)
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
        "warnings": loaded.warnings,
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
    report["means"] = {name: _mean(timeline.get(name)) for name in
                       ("acr", "acr_low", "acr_high", "acr_all_fail", "acr_all_pass", "near_collapse")}
    reward = timeline.get("reward_mean")
    report["reward_mean"] = None if reward is None else {"first": _finite(reward)[0], "last": _finite(reward)[-1]}
    report["rollout_shares"] = advice.shares(timeline)
    report["regime"] = advice.regime(report["rollout_shares"])
    report["early_warning"] = advice.early_window(timeline, settings.early_steps)
    report["stagnation"] = advice.stagnation(timeline, settings.stagnation_acr, settings.stagnation_steps)
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
    table: dict[str, list] = {"step": timeline.steps.tolist()}
    for name in names:
        table[name] = [None if not np.isfinite(v) else float(v) for v in timeline.series[name]]
    return table


def _finite(values: np.ndarray) -> list[float]:
    return values[np.isfinite(values)].tolist()


def _mean(values: np.ndarray | None) -> float | None:
    if values is None:
        return None
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None


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


def unique_labels(labels: list[str]) -> list[str]:
    """Labels made unique by numbering repeats (two runs both named 'rollouts')."""
    return numbered_unique(labels, str)


def numbered_unique(names: list[str], key: Callable[[str], str]) -> list[str]:
    """``names`` with each repeat (equal under ``key``) numbered ``-2``, ``-3``, ... until no two are equal."""
    taken: set[str] = set()
    result = []
    for name in names:
        candidate, number = name, 1
        while key(candidate) in taken:
            number += 1
            candidate = f"{name}-{number}"
        taken.add(key(candidate))
        result.append(candidate)
    return result


# Longest file prefix made from a label: with ".prompt_collapse_hist.png" after it and room for "-N", far below
# every file system's 255-byte limit.
FILE_PREFIX_MAX = 64
# Device names Windows reserves in every folder, whatever the extension.
RESERVED_NAMES = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}


def file_prefix(label: str) -> str:
    """The start of a run's file names under --out (``<prefix>.acr_timeline.png``): plain on every platform.

    Only ASCII letters, digits, '.', '_' and '-' are kept (anything else, '/' and NUL included, becomes '_'), so
    the name stays in --out; leading dots, dashes and underscores are dropped, so no label gives a hidden file or
    an option-like name; Windows device names get a prefix. The label itself stays as given in the report.
    """
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", label)[:FILE_PREFIX_MAX].lstrip("._-").rstrip("._") or "run"
    return f"run_{name}" if name.split(".")[0].lower() in RESERVED_NAMES else name


def file_prefixes(labels: list[str]) -> list[str]:
    """One :func:`file_prefix` per run, unique even on case-insensitive file systems (macOS, Windows)."""
    return numbered_unique([file_prefix(label) for label in labels], str.casefold)
