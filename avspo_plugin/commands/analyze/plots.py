"""PNG plots, drawn on matplotlib Figures (no pyplot state): each run's ACR timeline and prompt histogram, and the
runs' ACR and accuracy side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from .run_analysis import RunResult, number, printable

FAIL_COLOR, PASS_COLOR, OTHER_COLOR = "#d62728", "#2ca02c", "#9e9e9e"
# Below this, ACR minus its all-fail and all-pass rates is rounding, not groups collapsed at another value: one
# group in a billion is 1e-9, float64 rounding of the rates about 1e-16.
ROUNDING = 1e-12


def acr_timeline(result: RunResult, path: Path) -> Figure:
    """Top: ACR with the collapse kinds the run has stacked, the stagnation level and firing; bottom: rewards."""
    timeline, report = result.timeline, result.report
    steps = timeline.steps
    reward = timeline.get("reward_mean")
    rewards = reward is not None or result.validation is not None
    fig = Figure(figsize=(10, 6.5 if rewards else 4.8))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.4]}) if rewards else (
        fig.subplots(), None)
    fail, passed = timeline.get("acr_all_fail"), timeline.get("acr_all_pass")
    acr = timeline.series["acr"]
    if fail is not None and passed is not None:
        other = acr - fail - passed
        other[~(other > ROUNDING)] = 0.0  # the difference of three rates, exact only up to rounding
        kinds = [(np.nan_to_num(share), color, label) for share, color, label in (
            (fail, FAIL_COLOR, "all-fail groups"), (passed, PASS_COLOR, "all-pass groups"),
            (other, OTHER_COLOR, "other collapsed"))]
        kinds = [kind for kind in kinds if kind[0].any()]
        if kinds:
            shares, colors, labels = zip(*kinds)
            top.stackplot(steps, *shares, colors=colors, alpha=0.55, labels=labels)
    low, high = timeline.get("acr_low"), timeline.get("acr_high")
    if low is not None:
        top.fill_between(steps, low, high, color="#1f77b4", alpha=0.2, label="ACR bounds")
    top.plot(steps, acr, color="black", linewidth=1.2, label="ACR")
    _avspo_marks(top, timeline)
    stall = report["stagnation"]
    if stall["enabled"]:
        top.axhline(stall["acr_above"], color="#ff7f0e", linestyle="--", linewidth=1,
                    label=f"stagnation level {stall['acr_above']}")
        for episode in stall["episodes"]:
            top.axvspan(episode["start"], episode["end"], color="#ff7f0e", alpha=0.12)
            top.axvline(episode["fired_at"], color="#ff7f0e", linewidth=1)
    window = report["early_warning"]["window"]
    top.axvspan(window[0], min(window[1], steps[-1]), color="#1f77b4", alpha=0.06,
                label=f"early window (ACR {number(report['early_warning']['acr'])})")
    top.set(ylim=(0, 1), ylabel="fraction of groups")
    top.set_title(f"{_plain(result.label)}: advantage collapse rate\nfrom {_plain(report['basis'])}", fontsize=9)
    top.legend(loc="upper right", fontsize=7, ncol=2)
    top.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole steps only (shared with the bottom axes)
    (top if bottom is None else bottom).set_xlabel("step")
    if bottom is not None:
        if reward is not None:
            bottom.plot(steps, reward, color="#1f77b4", linewidth=1, label="training reward mean")
        if result.validation is not None:
            bottom.plot(result.validation.steps, result.validation.series["reward_mean"], "o-", color="#9467bd",
                        markersize=3, linewidth=1, label="validation mean score")
        bottom.set_ylabel("reward")
        bottom.legend(loc="best", fontsize=7)
    return _save(fig, path)


def _avspo_marks(axis, timeline) -> None:
    """AVSPO's effective ACR (what its advantages wasted) under ACR, and a tick at the top on each step its trigger
    opened: the run's own where it logged them, else the replay of its rewards, labelled as such."""
    effective, triggered = timeline.get("effective_acr"), timeline.get("triggered")
    if timeline.avspo is None or effective is None:
        return
    whose = "AVSPO replayed: " if timeline.avspo == "replay" else ""
    axis.plot(timeline.steps, effective, color="#1f77b4", linewidth=1.2, linestyle="--",
              label=f"{whose}effective ACR (advantages all zero)")
    if triggered is not None:
        opened = timeline.steps[np.nan_to_num(triggered) > 0]
        axis.plot(opened, np.full(len(opened), 0.985), linestyle="none", marker="|", markersize=8, color="#8c564b",
                  label=f"{whose}trigger open ({len(opened)} of {len(timeline.steps)} steps)")


def prompt_histogram(result: RunResult, path: Path) -> None:
    """How often each prompt's group collapsed, stacked by the kind of collapse it mostly had."""
    histogram: dict[str, Any] = result.report["prompts"]["histogram"]
    edges = np.asarray(histogram["edges"])
    centers, width = (edges[:-1] + edges[1:]) / 2, np.diff(edges) * 0.9
    axis = Figure(figsize=(7, 4)).subplots()
    bottom = np.zeros(len(centers))
    for name, color, label in (("never_collapsed", "#1f77b4", "never collapsed"),
                               ("mostly_all_fail", FAIL_COLOR, "mostly all-fail"),
                               ("mostly_all_pass", PASS_COLOR, "mostly all-pass"),
                               ("other_collapsed", OTHER_COLOR, "collapsed at another value")):
        counts = np.asarray(histogram[name])
        if counts.any():
            axis.bar(centers, counts, width=width, bottom=bottom, color=color, label=label)
        bottom += counts
    axis.set(xlabel="fraction of the prompt's groups that collapsed", ylabel="prompts")
    axis.set_title(f"{_plain(result.label)}: per-prompt collapse ({result.report['prompts']['prompts']} prompts)", fontsize=9)
    axis.legend(fontsize=8)
    _save(axis.figure, path)


def compare_acr(results: list[RunResult], path: Path, stagnation_acr: float) -> Figure:
    """Each run's ACR, faint per step and solid as a moving average (about 1/50 of the longest run)."""
    axis = Figure(figsize=(10, 4.5)).subplots()
    window = max(1, max(len(result.timeline.steps) for result in results) // 50)
    for index, result in enumerate(results):
        color = f"C{index % 10}"
        steps, acr = result.timeline.steps, result.timeline.series["acr"]
        axis.plot(steps, acr, color=color, linewidth=0.6, alpha=0.3)
        axis.plot(steps, _moving_average(acr, window), color=color, linewidth=1.5,
                  label=f"{_plain(result.label)} (early {number(result.report['early_warning']['acr'])})")
    if stagnation_acr > 0:
        axis.axhline(stagnation_acr, color="black", linestyle="--", linewidth=1, label="stagnation level")
    axis.set(ylim=(0, 1), xlabel="step", ylabel="ACR" + (f" ({window}-step moving average)" if window > 1 else ""))
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_title("ACR side by side", fontsize=9)
    axis.legend(fontsize=7)
    return _save(axis.figure, path)


def compare_accuracy(results: list[RunResult], accuracy: dict[str, Any], path: Path) -> Figure:
    """Each run's accuracy against the rollouts it had spent (against the step where rollouts were not logged), and
    the first run's final accuracy as the line to reach."""
    curves = [result.report["accuracy"] for result in results]
    by_rollouts = all(curve["rollouts_known"] for curve in curves)
    axis = Figure(figsize=(10, 4.5)).subplots()
    for index, (result, curve) in enumerate(zip(results, curves)):
        x = [point["rollouts" if by_rollouts else "step"] for point in curve["points"]]
        axis.plot(x, [point["accuracy"] for point in curve["points"]], "o-", color=f"C{index % 10}", markersize=3,
                  linewidth=1.2, label=_plain(result.label))
    reference = accuracy["reference_final"]
    axis.axhline(reference["accuracy"], color="black", linestyle="--", linewidth=1,
                 label=f"{_plain(accuracy['reference'])}'s final ({reference['accuracy']:.3f})")
    axis.set(xlabel="rollouts (samples generated for training)" if by_rollouts else "step",
             ylabel=_plain(accuracy["key"]))
    axis.set_title(f"accuracy: {_plain(accuracy['key'])} (one seed per run)", fontsize=9)
    axis.legend(fontsize=7)
    return _save(axis.figure, path)


def _save(fig: Figure, path: Path) -> Figure:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return fig


def _moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over the last ``window`` finite values (shorter at the start)."""
    finite = np.isfinite(values)
    sums = np.cumsum(np.where(finite, values, 0.0))
    counts = np.cumsum(finite)
    sums[window:] = sums[window:] - sums[:-window]
    counts[window:] = counts[window:] - counts[:-window]
    return np.divide(sums, counts, out=np.full(len(values), np.nan), where=counts > 0)


def _plain(text: str) -> str:
    """Text from the inputs (labels, key names) as literal text in a plot: a '$' would start matplotlib's math
    mode, which may not parse; control characters have no glyph."""
    return printable(text).replace("$", r"\$")
