"""What a lab run reports: per-method summaries with 95% confidence intervals, report.md, and the plots."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from avspo_plugin.figures import signed

# Two-sided 95% quantiles of Student's t, t_{0.975, df}, df = 1..30.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
Z975 = 1.959964
# A 95% interval needs at least this many values: from 2, t(0.975, 1) = 12.7 standard errors each side, an interval
# as wide as the quantity it bounds ("0.359 ± 0.993"); from 3 on, t = 4.3 and less.
MIN_VALUES_FOR_INTERVAL = 3
NO_INTERVAL = "too few seeds for an interval"
EARLY_FRACTION = 0.2  # "early ACR": the mean over the first 20% of steps
LATE_FRACTION = 0.1  # "final" entropy and train reward: the mean over the last 10% of steps


def t_quantile_975(df: int) -> float:
    """t_{0.975, df}: the table up to 30, the Cornish-Fisher expansion beyond (error < 1e-3)."""
    if df <= len(_T975):
        return _T975[df - 1]
    z = Z975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def mean_ci(values: Sequence[float]) -> dict[str, Any]:
    """Mean and the half-width of its 95% t-interval over seeds.

    With fewer than MIN_VALUES_FOR_INTERVAL values ci95 is None and ci95_reason says why (else None).
    """
    data = np.asarray(values, dtype=np.float64)
    stat = {"mean": float(data.mean()), "ci95": None, "n": int(data.size), "values": data.tolist(), "ci95_reason": None}
    if data.size < MIN_VALUES_FOR_INTERVAL:
        stat["ci95_reason"] = f"{NO_INTERVAL}: {data.size} values, at least {MIN_VALUES_FOR_INTERVAL} needed"
    else:
        stat["ci95"] = t_quantile_975(data.size - 1) * float(data.std(ddof=1)) / math.sqrt(data.size)
    return stat


def window_mean(series: Sequence[float], first: float = 0.0, last: float = 1.0) -> float:
    """Mean of the series over the fraction [first, last) of its steps (at least one step)."""
    n = len(series)
    lo = min(math.floor(first * n), n - 1)
    hi = max(lo + 1, math.ceil(last * n))
    return float(np.mean(series[lo:hi]))


def accuracy_at_rollouts(run: dict, budget: float) -> tuple[float, int]:
    """Held-out accuracy at the last evaluation whose cumulative rollouts do not exceed the budget, and its step."""
    evals = run["evals"]
    inside = [i for i, r in enumerate(evals["rollouts"]) if r <= budget]
    i = inside[-1]
    return evals["accuracy"][i], evals["step"][i]


def run_summary(run: dict, budget: float) -> dict[str, float]:
    steps, evals = run["steps"], run["evals"]
    at_budget, step_at_budget = accuracy_at_rollouts(run, budget)
    return {
        "final_accuracy": evals["accuracy"][-1],
        "accuracy_at_budget": at_budget,
        "step_at_budget": float(step_at_budget),
        "mean_accuracy": float(np.mean(evals["accuracy"][1:])),
        "final_greedy": evals["greedy"][-1],
        "early_acr": window_mean(steps["acr"], 0.0, EARLY_FRACTION),
        "mean_acr": window_mean(steps["acr"]),
        "mean_effective_acr": window_mean(steps["effective_acr"]),
        "mean_acr_all_fail": window_mean(steps["acr_all_fail"]),
        "mean_acr_all_pass": window_mean(steps["acr_all_pass"]),
        "final_reward": window_mean(steps["reward"], 1 - LATE_FRACTION),
        "final_entropy": window_mean(steps["entropy"], 1 - LATE_FRACTION),
        "rollouts_total": steps["rollouts_total"][-1],
        "cpu_s": run["cpu_s"],
    }


SUMMARY_HELP = {
    "final_accuracy": "held-out accuracy (avg@k at the eval temperature) after the last step",
    "accuracy_at_budget": "held-out accuracy at the same number of rollouts (the smallest total of any run)",
    "step_at_budget": "the step at which a run reached that rollout budget (its last evaluation within it)",
    "mean_accuracy": "held-out accuracy averaged over all evaluations after step 0",
    "final_greedy": "held-out greedy accuracy after the last step",
    "early_acr": "mean ACR over the first 20% of steps",
    "mean_acr": "mean ACR over all steps (raw: groups whose rewards are all equal)",
    "mean_effective_acr": "mean effective ACR (groups whose advantages are all zero, after the method)",
    "mean_acr_all_fail": "mean fraction of groups that all failed",
    "mean_acr_all_pass": "mean fraction of groups that all passed",
    "final_reward": "train reward over the last 10% of steps",
    "final_entropy": "mean token entropy over the last 10% of steps",
    "rollouts_total": "rollouts consumed in all",
    "cpu_s": "CPU seconds of the run",
}


def summarize(runs: dict[str, dict[int, dict]], baseline: str | None = "grpo") -> dict[str, Any]:
    """Per method: mean and 95% CI over seeds of every summary metric; final accuracy by tier; paired deltas.

    runs: method -> seed -> run. Deltas to ``baseline`` pair runs by seed (same seed, same first rollouts).
    """
    budget = min(run["steps"]["rollouts_total"][-1] for by_seed in runs.values() for run in by_seed.values())
    per_run = {m: {seed: run_summary(run, budget) for seed, run in by_seed.items()} for m, by_seed in runs.items()}
    summary: dict[str, Any] = {"rollout_budget": budget, "methods": {}}
    for method, by_seed in per_run.items():
        seeds = sorted(by_seed)
        entry = {key: mean_ci([by_seed[s][key] for s in seeds]) for key in SUMMARY_HELP}
        tiers = runs[method][seeds[0]]["evals"]["by_tier"][-1]
        entry["final_accuracy_by_tier"] = {
            tier: mean_ci([runs[method][s]["evals"]["by_tier"][-1][tier] for s in seeds]) for tier in tiers
        }
        if baseline in per_run and method != baseline:
            shared = [s for s in seeds if s in per_run[baseline]]
            for key in ("final_accuracy", "accuracy_at_budget", "mean_accuracy"):
                entry[f"{key}_vs_{baseline}"] = mean_ci(
                    [by_seed[s][key] - per_run[baseline][s][key] for s in shared]
                )
        summary["methods"][method] = entry
    return summary


def fmt(stat: dict[str, Any] | None, scale: float = 1.0, digits: int = 3, signed: bool = False) -> str:
    if stat is None:
        return ""
    sign = "+" if signed else ""
    text = f"{stat['mean'] * scale:{sign}.{digits}f}"
    if stat.get("ci95") is not None:
        text += f" ± {stat['ci95'] * scale:.{digits}f}"
    return text


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def base_table(base: dict, tiers: Sequence[int]) -> list[str]:
    sampled = base["sampled_by_tier"]
    held = base["held_out"]
    rows = [
        [
            str(d),
            f"{sampled[str(d)]['pass_rate']:.3f}",
            f"{sampled[str(d)]['all_fail']:.2f}",
            f"{sampled[str(d)]['all_pass']:.2f}",
            f"{held['by_tier'][str(d)]:.3f}",
            f"{held['greedy_by_tier'][str(d)]:.3f}",
        ]
        for d in tiers
    ]
    header = ["tier (digits)", "pass rate at T", "all-fail groups", "all-pass groups", "held-out avg@k", "greedy"]
    return markdown_table(header, rows)


def learning_table(base: dict, methods: dict) -> list[str]:
    """Per method: base -> final held-out accuracy, sampled and greedy, with the change."""
    rows = [[label,
             f"{base['accuracy']:.3f} → {fmt(entry['final_accuracy'])} ({entry['final_accuracy']['mean'] - base['accuracy']:+.3f})",
             f"{base['greedy']:.3f} → {fmt(entry['final_greedy'])} ({entry['final_greedy']['mean'] - base['greedy']:+.3f})"]
            for label, entry in methods.items()]
    return markdown_table(["method", "sampled: base → final (Δ)", "greedy: base → final (Δ)"], rows)


def values_text(seeds: int) -> str:
    """What the report's cells hold, intervals or not."""
    if seeds >= MIN_VALUES_FOR_INTERVAL:
        return "Values are mean ± 95% CI half-width over seeds (t-interval)."
    return (f"Values are means over seeds, without intervals: {NO_INTERVAL} ({seeds}; an interval needs at least "
            f"{MIN_VALUES_FOR_INTERVAL}).")


def label_of(report: dict, name: str) -> str:
    """The method's name with its setting (report.json's ``label``; the name alone in a report without one)."""
    return report["methods"].get(name, {}).get("label", name)


def triggered_share(report: dict, name: str) -> float | None:
    """The share of an AVSPO method's steps, over all its runs, on which virtual samples were added; None for
    a method without AVSPO's trigger."""
    values = [v for run in report["runs"][name].values() for v in run["steps"].get("triggered", [])]
    return float(np.mean(values)) if values else None


def resolution_lines(report: dict, baseline: str = "grpo") -> list[str]:
    """What the run can and cannot tell apart: per method, whether its collapsed groups got a signal (effective ACR
    against the baseline's raw ACR, and for AVSPO the share of steps its trigger opened: visible in any run), and
    whether its paired accuracy difference to the baseline is told apart from seed noise (its interval)."""
    methods = report["summary"]["methods"]
    if baseline not in methods:
        return []
    seeds = len(report["seeds"])
    raw = methods[baseline]["mean_acr"]["mean"]
    lines = ["## What this run can and cannot tell apart", "",
             f"Mechanism (visible in any run): {baseline}'s collapsed groups carry no signal, its mean ACR "
             f"{raw:.3f} of groups per step. For each method, the share of groups left without a signal (mean "
             "effective ACR) and, for AVSPO, the share of steps on which its trigger added virtual samples:", ""]
    for name, entry in methods.items():
        if name == baseline:
            continue
        share = triggered_share(report, name)
        trigger = "" if share is None else f"; trigger open on {share:.0%} of steps"
        verdict = "acted on the collapsed groups" if entry["mean_effective_acr"]["mean"] < raw / 2 else \
            f"left them as {baseline} does"
        lines.append(f"- {label_of(report, name)}: effective ACR {entry['mean_effective_acr']['mean']:.3f}{trigger}: "
                     f"{verdict}.")
    lines += ["", f"Held-out accuracy against {baseline} (final, paired by seed, {seeds} seeds):", ""]
    for name, entry in methods.items():
        delta = entry.get(f"final_accuracy_vs_{baseline}")
        if delta is None:
            continue
        if delta["ci95"] is None:
            verdict = f"{NO_INTERVAL}: no difference can be told apart from seed noise"
        else:
            low, high = delta["mean"] - delta["ci95"], delta["mean"] + delta["ci95"]
            bounds = f"[{signed(low)}, {signed(high)}]"
            verdict = (f"{bounds} includes 0: not told apart from {baseline}; a true difference "
                       f"smaller than about {delta['ci95']:.3f} would not show here" if low <= 0 <= high else
                       f"{bounds} excludes 0: told apart from {baseline} at this budget")
        lines.append(f"- {label_of(report, name)}: {signed(delta['mean'])}, 95% interval {verdict}.")
    lines += ["", f"{report['settings']['steps']} steps and {seeds} seeds are a demonstration, not a powered "
              "comparison: accuracy differences of the size the lab's study measured (docs/evidence/results.md, "
              "many more pairs and steps) need that study's design.", ""]
    return lines


def lab_markdown(report: dict) -> str:
    settings, summary = report["settings"], report["summary"]
    methods = summary["methods"]
    lines = [
        "# AVSPO CPU lab",
        "",
        f"{len(report['seeds'])} seeds ({', '.join(map(str, report['seeds']))}), {settings['steps']} steps, "
        f"{settings['prompts']} prompts x G = {settings['group_size']} per step, temperature {settings['temperature']}, "
        f"lr {settings['lr']}, RL tier mix {settings['mix']} over tiers {settings['tiers']}. "
        f"Held-out accuracy: avg@{settings['eval_samples']} at temperature {settings['eval_temperature']} on "
        f"{settings['held_out_per_tier']} problems per tier. {values_text(len(report['seeds']))}",
        "",
        "## Base policy (after the supervised warm-up)",
        "",
        f"Pass rate of G = {settings['group_size']} samples per held-out prompt at temperature "
        f"{settings['temperature']}, and the fraction of prompts whose samples all fail / all pass:",
        "",
        *base_table(report["base"], settings["tiers"]),
        "",
        "## Does RL learn? Held-out accuracy of the base policy and after RL",
        "",
        f"Sampled: avg@{settings['eval_samples']} at temperature {settings['eval_temperature']}; greedy: greedy "
        "decoding; both on the held-out problems, final = after the last step, mean over seeds.",
        "",
        *learning_table(report["base"]["held_out"], {label_of(report, n): e for n, e in methods.items()}),
        "",
        "## Same number of steps",
        "",
    ]
    baseline = "grpo" if "grpo" in methods else None
    header = ["method", "final held-out acc", f"Δ vs {baseline} (paired)" if baseline else "", "mean held-out acc",
              "greedy", "train reward (last 10%)", "entropy (last 10%)"]
    rows = []
    for name, entry in methods.items():
        rows.append([
            label_of(report, name),
            fmt(entry["final_accuracy"]),
            fmt(entry.get(f"final_accuracy_vs_{baseline}"), signed=True) if baseline else "",
            fmt(entry["mean_accuracy"]),
            fmt(entry["final_greedy"]),
            fmt(entry["final_reward"]),
            fmt(entry["final_entropy"]),
        ])
    lines += markdown_table(header, rows)
    lines += [
        "",
        "## Same number of rollouts",
        "",
        f"Budget: {int(summary['rollout_budget'])} rollouts (the smallest total of any run). A method that "
        "spends more rollouts per step (DAPO) is read at its last evaluation within the budget.",
        "",
    ]
    header = ["method", "held-out acc at budget", f"Δ vs {baseline} (paired)" if baseline else "",
              "step reached", "rollouts in all"]
    rows = [
        [
            label_of(report, name),
            fmt(entry["accuracy_at_budget"]),
            fmt(entry.get(f"accuracy_at_budget_vs_{baseline}"), signed=True) if baseline else "",
            fmt(entry["step_at_budget"], digits=0),
            fmt(entry["rollouts_total"], digits=0),
        ]
        for name, entry in methods.items()
    ]
    lines += markdown_table(header, rows)
    lines += ["", "## Collapse", ""]
    header = ["method", "early ACR (first 20%)", "mean ACR", "mean effective ACR", "all-fail", "all-pass"]
    rows = [
        [
            label_of(report, name),
            fmt(entry["early_acr"]),
            fmt(entry["mean_acr"]),
            fmt(entry["mean_effective_acr"]),
            fmt(entry["mean_acr_all_fail"]),
            fmt(entry["mean_acr_all_pass"]),
        ]
        for name, entry in methods.items()
    ]
    lines += markdown_table(header, rows)
    lines += ["", "## Final held-out accuracy by tier", ""]
    tiers = [str(d) for d in settings["tiers"]]
    rows = [[label_of(report, name), *(fmt(entry["final_accuracy_by_tier"][t], digits=2) for t in tiers)]
            for name, entry in methods.items()]
    lines += markdown_table(["method", *(f"tier {t}" for t in tiers)], rows)
    lines += ["", *resolution_lines(report)] if baseline else []
    lines += ["", "## Methods", ""]
    lines += [f"- {label_of(report, name)}: {spec['description']}" for name, spec in report["methods"].items()]
    timing = report["timing"]
    lines += [
        "",
        f"Wall time {timing['wall_s']:.0f} s; CPU time of the runs {timing['runs_cpu_s']:.0f} s (each run's own, "
        f"{timing['jobs']} worker processes, one torch thread each); warm-up {report['base']['warmup_cpu_s']:.0f} CPU s.",
        "",
        "Plots: acr.png (ACR, effective ACR, all-fail and all-pass over steps), accuracy.png (held-out accuracy over "
        "steps and over rollouts), entropy.png (mean token entropy over steps).",
        "",
    ]
    return "\n".join(lines)


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average over the last ``window`` steps (shorter at the start)."""
    if window <= 1:
        return values
    cumulative = np.cumsum(np.insert(values, 0, 0.0))
    idx = np.arange(1, len(values) + 1)
    lo = np.maximum(0, idx - window)
    return (cumulative[idx] - cumulative[lo]) / (idx - lo)


def _band(ax, x, matrix: np.ndarray, label: str, color, window: int = 1) -> bool:
    """Mean over seeds (rows), each seed smoothed first, with its 95% CI band from MIN_VALUES_FOR_INTERVAL seeds
    on; whether a band was drawn."""
    data = np.vstack([smooth(np.asarray(row, dtype=np.float64), window) for row in matrix])
    mean = data.mean(axis=0)
    ax.plot(x, mean, label=label, color=color, linewidth=1.4)
    if data.shape[0] < MIN_VALUES_FOR_INTERVAL:
        return False
    half = t_quantile_975(data.shape[0] - 1) * data.std(axis=0, ddof=1) / math.sqrt(data.shape[0])
    ax.fill_between(x, mean - half, mean + half, color=color, alpha=0.15, linewidth=0)
    return True


def band_caption(drawn: Sequence[bool]) -> str:
    """The plot title's claim: an interval only when every line has its band."""
    return "mean over seeds, band: 95% CI" if drawn and all(drawn) else f"mean over seeds; {NO_INTERVAL}"


def method_colors(names: Sequence[str]) -> dict[str, Any]:
    cmap = matplotlib.colormaps["tab10"]
    return {name: cmap(i % 10) for i, name in enumerate(names)}


def plot_lab(runs: dict[str, dict[int, dict]], out: Path, prefix: str = "", labels: dict[str, str] | None = None
             ) -> list[Path]:
    """acr.png, accuracy.png and entropy.png in ``out`` (names prefixed by ``prefix``); each method's line is named
    by ``labels`` (default: its name)."""
    runs = {(labels or {}).get(name, name): by_seed for name, by_seed in runs.items()}
    colors = method_colors(list(runs))
    steps = len(next(iter(next(iter(runs.values())).values()))["steps"]["acr"])
    window = max(1, steps // 20)
    x = np.arange(1, steps + 1)
    written = []

    fig = Figure(figsize=(11, 7.5))
    axes = fig.subplots(2, 2, sharex=True)
    panels = [("acr", "ACR (all rewards equal)"), ("effective_acr", "effective ACR (all advantages zero)"),
              ("acr_all_fail", "all-fail groups"), ("acr_all_pass", "all-pass groups")]
    drawn = []
    for ax, (key, title) in zip(axes.flat, panels):
        for name, by_seed in runs.items():
            drawn.append(_band(ax, x, [run["steps"][key] for run in by_seed.values()], name, colors[name], window))
        ax.set_title(title)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("step")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"Collapse per step ({band_caption(drawn)}; moving average over {window} steps)")
    fig.tight_layout()
    written.append(out / f"{prefix}acr.png")
    fig.savefig(written[-1], dpi=90)

    fig = Figure(figsize=(11, 4.2))
    axes = fig.subplots(1, 2, sharey=True)
    drawn = []
    for name, by_seed in runs.items():
        seeds = list(by_seed.values())
        eval_steps = seeds[0]["evals"]["step"]
        accuracy = [run["evals"]["accuracy"] for run in seeds]
        drawn.append(_band(axes[0], eval_steps, accuracy, name, colors[name]))
        rollouts = np.mean([run["evals"]["rollouts"] for run in seeds], axis=0)
        drawn.append(_band(axes[1], rollouts, accuracy, name, colors[name]))
    axes[0].set_xlabel("step")
    axes[1].set_xlabel("rollouts (mean over seeds)")
    axes[0].set_ylabel("held-out accuracy")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Held-out accuracy ({band_caption(drawn)})")
    fig.tight_layout()
    written.append(out / f"{prefix}accuracy.png")
    fig.savefig(written[-1], dpi=90)

    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    drawn = [_band(ax, x, [run["steps"]["entropy"] for run in by_seed.values()], name, colors[name], window)
             for name, by_seed in runs.items()]
    ax.set_xlabel("step")
    ax.set_ylabel("mean token entropy (nats)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"Entropy ({band_caption(drawn)};\nmoving average over {window} steps)", fontsize=10)
    fig.tight_layout()
    written.append(out / f"{prefix}entropy.png")
    fig.savefig(written[-1], dpi=90)
    return written
