"""One run from source to numbers (read, build the timeline, derive the signals) and the JSON form of it all; the
terminal summary and analysis.md of the analysed runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from avspo_plugin.config import AVSPOConfig
from avspo_plugin.evidence.regimes import REGIME_TITLES

from . import advice
from .accuracy import accuracy_curve
from .advice import mode_text, percent
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
    columns = ("reward_mean", *(("acr", "acr_all_fail", "acr_all_pass", "groups") if grouped else ()), "samples")
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
        report, validation = result.report, result.report.get("validation")
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


def number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: control characters (escape sequences, NUL, ...) shown escaped."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _between(values: dict[str, Any]) -> str:
    """' (between LOW and HIGH)' where ACR is an interval, else ''."""
    return "" if values["acr_low"] is None else f" (between {number(values['acr_low'])} and {number(values['acr_high'])})"


def _short(text: str, width: int) -> str:
    text = printable(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 3] + "..."


def run_block(result: RunResult) -> str:
    r = result.report
    lines = [f"== {printable(r['label'])}  ({r['format']}: {printable(r['source'])})", f"  ACR from: {r['basis']}"]
    mode = r["avspo"]["mode"]
    if mode is not None:
        lines.append(f"  AVSPO in this run: {mode_text(mode)}; {mode['evidence']}")
    steps, sizes, means = r["steps"], r.get("group_sizes"), r["means"]
    sizes_text = "; group size " + ", ".join(f"{size} ({count} groups)" for size, count in sizes.items()) if sizes else ""
    lines.append(f"  steps {steps['first']}..{steps['last']} ({steps['count']} logged){sizes_text}")
    split = "" if means["acr_all_fail"] is None else (
        f": all-fail {number(means['acr_all_fail'])}, all-pass {number(means['acr_all_pass'])}")
    near = f"; near-collapse {number(means['near_collapse'])}" if means["near_collapse"] is not None else ""
    lines.append(f"  ACR mean {number(means['acr'])}{_between(means)}{split}{near}")
    reward = r["reward_mean"]
    if reward is not None:
        lines.append(f"  reward mean {number(reward['first'])} at the start, {number(reward['last'])} at the end")
    early = r["early_warning"]
    done = "" if early["complete"] else f"  [run shorter than the window: {early['points']} logged steps]"
    window = f"{early['window'][0]}-{early['window'][1]}"
    lines.append(f"  early ACR, steps {window}: {number(early['acr'])}{_between(early)}{done}")
    stall = r["stagnation"]
    rule = f"ACR > {stall['acr_above']} for more than {stall['more_than_steps']} consecutive steps"
    state = (f"FIRED at step {stall['fired_at_step']}" if stall["fired"] else
             f"not fired (longest run above it: {stall['longest_run_steps']} step(s))")
    lines.append(f"  stagnation signal ({rule}): {state}" if stall["enabled"] else "  stagnation signal: disabled")
    validation = r.get("validation")
    if validation is not None:
        lines.append(
            f"  validation mean score: {number(validation['last']['mean_score'])} at step {validation['last']['step']} "
            f"(best {number(validation['best']['mean_score'])} at step {validation['best']['step']})"
        )
    prompts = r.get("prompts")
    if prompts and prompts["top"]:
        lines.append(f"  prompts that wasted the most rollouts ({prompts['prompts']} prompts seen):")
        lines.append(f"    {'wasted':>6} {'groups':>6} {'fail':>5} {'pass':>5}  prompt")
        for row in prompts["top"]:
            lines.append(
                f"    {row['wasted_rollouts']:>6} {row['groups']:>6} {row['all_fail']:>5} {row['all_pass']:>5}  "
                f"{_short(row['prompt'], 70)}"
            )
    if r["advice"]:
        lines.append("  advice (estimates):")
        lines += [f"    - {line}" for line in r["advice"]]
    for title, items in (("WARNINGS", r["warnings"]), ("notes", r["notes"]), ("caveats", r["caveats"])):
        if items:
            lines.append(f"  {title}:")
            lines += [f"    - {printable(item)}" for item in items]
    return "\n".join(lines)


COLUMNS = (
    ("run", "label", lambda v: _short(str(v), 24)),
    ("steps", "steps", str),
    ("early ACR", "acr_early", number),
    ("mean ACR", "acr_mean", number),
    ("effective ACR", "effective_acr", number),
    ("all-fail", "all_fail", percent),
    ("all-pass", "all_pass", percent),
    ("regime", "regime", lambda v: "-" if v is None else REGIME_TITLES[v]),
    ("stagnation", "stagnation_at", lambda v: "-" if v is None else f"step {v}"),
    ("reward end", "reward_last", number),
    ("val end", "val_last", number),
    ("exact", "exact", lambda v: "yes" if v else "proxy"),
)


def comparison_cells(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """(column titles, one row of cells per run) of the side-by-side table."""
    return [title for title, _, _ in COLUMNS], [[fmt(row[key]) for _, key, fmt in COLUMNS] for row in rows]


def _aligned(titles: list[str], cells: list[list[str]]) -> list[str]:
    widths = [max(len(title), *(len(line[i]) for line in cells)) for i, title in enumerate(titles)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in [titles, *cells]]


def _point(point: dict[str, Any]) -> str:
    return f"{point['accuracy']:.3f} at step {point['step']}"


def accuracy_cells(accuracy: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(titles, cells) of the accuracy comparison: each run's first, final and best value, and when it first reached
    the reference run's final value."""
    reference = accuracy["reference_final"]
    reach = f"reached {accuracy['reference']}'s final {reference['accuracy']:.3f}"
    cells = []
    for run in accuracy["runs"]:
        rollouts = run["rollouts_to_reference_final"]
        reached = ("not reached" if run["reached_at_step"] is None else f"at step {run['reached_at_step']}, "
                   + ("rollouts not logged" if rollouts is None else f"{rollouts:,} rollouts"))
        cells.append([_short(run["label"], 24), _point(run["first"]), _point(run["final"]), _point(run["best"]), reached])
    return ["run", "first", "final", "best", reach], cells


def paired_cells(paired: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(titles, cells) of the seed-paired comparison: each seed's final values and their difference."""
    reference, other = paired["reference"], paired["other"]
    return (["seed", reference, other, f"{other} - {reference}"],
            [[row["seed"], f"{row[reference]:.3f}", f"{row[other]:.3f}", f"{row['difference']:+.3f}"]
             for row in paired["per_seed"]])


def summary(results: list[RunResult], rows: list[dict[str, Any]], accuracy: dict[str, Any] | None = None) -> str:
    blocks = [run_block(result) for result in results]
    if len(results) > 1:
        blocks.append("\n".join(["== side by side", *_aligned(*comparison_cells(rows))]))
    if accuracy is not None:
        blocks.append("\n".join([f"== accuracy: {printable(accuracy['key'])}", *_aligned(*accuracy_cells(accuracy)),
                                 accuracy["caveat"]]))
    return "\n\n".join(blocks)


def _markdown_table(titles: list[str], cells: list[list[str]]) -> list[str]:
    rows = ["| " + " | ".join(item.replace("|", "\\|") for item in line) + " |" for line in [titles, *cells]]
    return [rows[0], "|" + "---|" * len(titles), *rows[1:]]


def markdown(results: list[RunResult], rows: list[dict[str, Any]], accuracy: dict[str, Any] | None, summary_text: str,
             document: dict[str, Any]) -> str:
    """analysis.md: the comparison in tables, the plots by their file names (beside it in --out), and the terminal
    summary in full."""
    labels = ", ".join(printable(result.label) for result in results)
    lines = [f"# avspo analyze: {labels}", "",
             "Written by `avspo analyze` beside `analysis.json` (every number below, and more) and the plots.", ""]
    lines += ["## Side by side", "",
              "ACR: the mean share of a step's groups whose rewards were all equal. Effective ACR: the mean share whose "
              "advantages were all zero, what the run's advantages wasted (AVSPO's own metric where the run logged "
              "it; else its ACR, as GRPO's advantages are zero in exactly the collapsed groups).", "",
              *_markdown_table(*comparison_cells(rows)), ""]
    if accuracy is not None:
        lines += [f"## Accuracy: `{printable(accuracy['key'])}`", "", *_markdown_table(*accuracy_cells(accuracy)), ""]
        if accuracy["paired"] is not None:
            lines += ["### Seed by seed", "", *_markdown_table(*paired_cells(accuracy["paired"])), ""]
        lines += [accuracy["caveat"], ""]
    plots = [Path(path).name for run in document["runs"] for name, path in run["files"].items() if name != "prompts_csv"]
    plots += [Path(document[key]).name for key in ("comparison_plot", "accuracy_plot") if key in document]
    if plots:
        lines += ["## Plots", "", *(f"![{name}]({name})" for name in plots), ""]
    lines += ["## The full summary", "", "```", summary_text, "```", ""]
    return "\n".join(lines)
