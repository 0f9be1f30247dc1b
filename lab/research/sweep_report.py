"""What ``python -m lab sweep`` writes besides sweep.json: sweep.md and the plot of every signal against the final gain."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..report import markdown_table
from .forecast import BASELINE_WORDS, VERDICT_MEANINGS
from .forecast_models import verdict_text
from .sweep_analysis import ADDED, BASELINE, EARLY_FRACTION, SIGNALS, STEP_SIGNALS

SIGNAL_TITLES = {
    "acr": "early ACR",
    "acr_all_fail": "early all-fail share",
    "acr_all_pass": "early all-pass share",
    "near_collapse_success": "early lone-success share",
    "near_collapse_failure": "early lone-failure share",
    "reward": "early mean train reward",
    "entropy": "early entropy (nats)",
    "base_accuracy": "base held-out accuracy",
}
PANEL_COLUMNS = 4


def _number(value: float | None, digits: int = 2) -> str:
    return "undefined" if value is None else f"{value:.{digits}f}"


def _estimate(estimate: Mapping, digits: int = 2) -> str:
    """'0.41 [0.12, 0.60]', or the value alone when there is no interval."""
    interval = estimate["ci95"]
    value = _number(estimate["value"], digits)
    return value if interval is None else f"{value} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def _r(correlation: Mapping) -> str:
    if correlation["r"] is None:
        return "none (nothing varies across seeds)"
    return _estimate({"value": correlation["r"], "ci95": correlation["ci95"]})


def _gain(value: float | None) -> str:
    return "no run" if value is None else f"{value:+.1f}"


def bases_section(bases: Mapping[str, Mapping]) -> list[str]:
    rows = [[name, b["regime"] or "none", "yes" if b["eligible"] else "**no: left out**", f"{b['accuracy']:.3f}",
             f"{b['greedy']:.3f}", b["why"]] for name, b in bases.items()]
    return markdown_table(["base", "regime (base statistics)", "in the sweep", "held-out accuracy", "greedy", "rule"],
                          rows)


def prediction_section(prediction: Mapping) -> list[str]:
    boot = prediction["bootstrap"]
    lines = [
        "## Which early signal predicts the final gain",
        "",
        f"{prediction['runs']} runs from {len(prediction['bases'])} bases. In sample: R^2 of the least-squares line "
        "over every run. Across bases: leave-one-base-out R^2 (each base's runs predicted by the fit on the other "
        "bases' runs; 1 - SSE / SS_tot around the mean of all runs; below 0 predicts worse than that mean). "
        f"Intervals: 2.5th-97.5th percentile over {boot['reps']} bootstrap resamples of the bases (seed "
        f"{boot['seed']}), each run weighted by how often its base was drawn, from the same held-out predictions: they "
        "say which bases happened to be in the sweep, not how the fits vary.",
        "",
    ]
    rows = [[SIGNAL_TITLES[name], _number(entry["in_sample_r2"]), _estimate(entry["oos_r2"])]
            for name, entry in prediction["alone"].items()]
    lines += markdown_table(["signal (alone)", "R^2 in sample", "R^2 across bases [95% CI]"], rows)
    baseline = prediction["baseline"]
    lines += [
        "",
        "## What collapse adds to early reward and base accuracy",
        "",
        f"Baseline: {' + '.join(SIGNAL_TITLES[s] for s in BASELINE)}, R^2 across bases "
        f"{_estimate(baseline['oos_r2'])} (in sample {_number(baseline['in_sample_r2'])}). Each signal below is added "
        "to it alone; the gain is the change in R^2 across bases, its interval over the same resamples (paired).",
        "",
    ]
    rows = [[SIGNAL_TITLES[name], _estimate(prediction["added"][name]["oos_r2"]),
             _estimate(prediction["added"][name]["gain"], 3)] for name in ADDED]
    lines += markdown_table(["added to the baseline", "R^2 across bases [95% CI]", "gain [95% CI]"], rows)
    return lines


def seeds_section(correlations: Mapping[str, Mapping]) -> list[str]:
    first = next(iter(correlations.values()))
    lines = [
        "## Across seeds of one configuration",
        "",
        "Pearson r of each signal and the final gain after subtracting each configuration's mean from both (pooled "
        f"over {first['configurations']} configurations, {first['runs']} runs): whether a run whose early signal "
        "is higher than its seed-twin's also ends differently, with every setting equal. Fisher interval with the "
        "configuration means as covariates.",
        "",
    ]
    rows = [[SIGNAL_TITLES[name], _r(c)] for name, c in correlations.items() if name in STEP_SIGNALS]
    return lines + markdown_table(["signal", "r within configurations [95% CI]"], rows)


def stagnation_section(rule: Mapping) -> list[str]:
    fired = ", ".join(rule["bases_fired"]) or "none"
    difference = "undefined (no run on one side)" if rule["difference"] is None else (
        f"{_estimate({'value': rule['difference'], 'ci95': rule['ci95']}, 1)} (interval over {rule['kept']} of "
        f"{rule['reps']} base resamples with runs on both sides)")
    return [
        "## The paper's stagnation rule",
        "",
        f"ACR above {rule['rule']['acr_above']} for more than {rule['rule']['more_than_steps']} consecutive steps "
        f"(the product's avspo/stagnation warning), over each whole run: it fired on {rule['fired']} of "
        f"{rule['runs']} runs ({rule['share']:.0%}; bases: {fired}). Mean final gain (points) where it fired: "
        f"{_gain(rule['gain_fired'])}; where it did not: {_gain(rule['gain_not_fired'])}; difference {difference}.",
    ]


def fit_section(fit: Mapping) -> list[str]:
    forecast = fit["forecast"]
    verdict = "supports" if forecast["supported"] else "does **not** support"
    return [
        "## The line in fit.json",
        "",
        f"{fit['label']}. Rule for a forecast: {forecast['rule']}. This sweep {verdict} one "
        f"({forecast['why']}).",
    ]


def sweep_markdown(report: Mapping) -> str:
    design, settings, plan = report["design"], report["settings"], report["plan"]
    analysis, timing = report["analysis"], report["timing"]
    mixes = ", ".join(f"{name} {':'.join(f'{w:g}' for w in weights)}" for name, weights in design["mixes"])
    lines = [
        "# AVSPO CPU lab: does early ACR predict how a GRPO run ends? (the sweep)",
        "",
        f"{len(report['points'])} GRPO runs: {len(report['configurations'])} configurations x "
        f"{len(design['seeds'])} seeds, every run to {settings['rollout_budget']:,} rollouts at temperature "
        f"{design['temperature']}. Crossed: base policy ({', '.join(design['bases'])}), learning rate "
        f"({', '.join(f'{lr:g}' for lr in design['learning_rates'])}), G at {settings['prompts'] * settings['group_size']} "
        f"rollouts per step ({', '.join(map(str, design['group_sizes']))}), tier mix of the training pool ({mixes}); "
        "the rest at the study's frozen GRPO settings. Target: final held-out accuracy minus the base's, in points "
        f"(avg@{settings['eval_samples']} at temperature {settings['eval_temperature']}). Signals: means over the "
        f"first {design['early_fraction']:.0%} of steps. The design is fixed in code before the runs (docs/evidence/sweep.md)."
        + (" **Quick: a toy budget that checks the pipeline; its numbers mean nothing.**" if design["quick"] else ""),
        "",
        "## Bases",
        "",
        *bases_section(report["bases"]),
        "",
        *prediction_section(analysis["prediction"]),
        "",
        *seeds_section(analysis["seeds"]),
        "",
        *stagnation_section(analysis["stagnation"]),
        "",
        *fit_section(report["fit"]),
        "",
        "## Cost",
        "",
        f"Wall time {timing['wall_s']:.0f} s, CPU time {timing['cpu_s']:.0f} s ({timing['jobs']} worker processes); "
        f"{timing['runs_run']} runs run, {timing['runs_from_cache']} read back from runs/. Planned: {plan['runs']} "
        f"runs, estimated {plan['estimated_cpu_s']:.0f} CPU-s and {plan['estimated_wall_s']:.0f} s wall.",
        "",
        "Plot: sweep_signals.png. Per run (configuration, seed, early signals, final gain, stagnation, its series in "
        "runs/): sweep.json.",
        "",
    ]
    return "\n".join(lines)


def report_markdown(report: Mapping) -> str:
    """sweep.md of a sweep's report (sweep.json): :func:`sweep_markdown`, and a confirmation's pre-registered section
    from its fit (``python -m renderer`` renders docs/evidence/sweep-confirm/sweep.md with it)."""
    markdown = sweep_markdown(report)
    if report["design"].get("confirm"):
        markdown += "\n" + "\n".join(preregistered_markdown(report["fit"]["preregistered"])) + "\n"
    return markdown


def signals_figure(points: Sequence[Mapping], prediction: Mapping) -> Figure:
    """One panel per signal (SIGNALS): the signal against the final gain, one point per run coloured by its base;
    one legend of the bases present; each title with the signal's R^2 in sample and across bases."""
    bases = list(dict.fromkeys(p["base"] for p in points))
    base_of = np.array([bases.index(p["base"]) for p in points])
    gain = np.array([p["final_gain"] for p in points])
    colours = matplotlib.colormaps["tab10"]
    rows = math.ceil(len(SIGNALS) / PANEL_COLUMNS)
    fig = Figure(figsize=(4 * PANEL_COLUMNS, 3.4 * rows + 0.6))
    axes = fig.subplots(rows, PANEL_COLUMNS, squeeze=False, sharey=True).ravel()
    for ax, name in zip(axes, SIGNALS):
        x = np.array([p["signals"][name] for p in points])
        for i, base in enumerate(bases):
            ax.scatter(x[base_of == i], gain[base_of == i], s=14, color=colours(i % colours.N), label=base)
        entry = prediction["alone"][name]
        ax.set_title(f"{SIGNAL_TITLES[name]}\nR² {_number(entry['in_sample_r2'])} in sample, "
                     f"{_number(entry['oos_r2']['value'])} across bases", fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
        ax.yaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
        ax.grid(alpha=0.3)
    for ax in axes[len(SIGNALS):]:
        ax.set_visible(False)
    for ax in axes[::PANEL_COLUMNS]:
        ax.set_ylabel("final gain (points)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(bases), fontsize=8, title="base policy")
    fig.suptitle(f"GRPO sweep: early signals (first {EARLY_FRACTION:.0%} of steps) against the final held-out gain over "
                 "the base", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 0.97))
    return fig


def plot_signals(points: Sequence[Mapping], prediction: Mapping, path: Path) -> Path:
    signals_figure(points, prediction).savefig(path, dpi=90)
    return path


MODEL_TITLES = {
    "intercept": "intercept only",
    "settings": "settings (lr, G, tier mix)",
    "baseline": "settings + early reward + base accuracy (the baseline)",
    "acr": "baseline + early ACR",
    "acr_all_fail": "baseline + early all-fail share",
    "acr_all_pass": "baseline + early all-pass share",
    "entropy": "baseline + early entropy",
}
SCHEME_TITLES = {"leave_one_base_out": "leave one base out", "leave_one_setting_out": "leave one setting out"}


def _scheme_cell(estimates: Mapping, scheme: str, digits: int = 2) -> str:
    return _estimate(estimates[scheme], digits) if scheme in estimates else "not run"


def preregistered_result_lines(outcome: Mapping) -> list[str]:
    """One result of the pre-registered analysis (sweep_preregistered.result): every model's R^2, what each added
    term gains, the rule's decision on these runs, and the stagnation rule within lr x base cells."""
    table, stall = outcome["table"], outcome["stagnation_within_cells"]
    schemes = table["schemes"]
    resamples = table["bootstrap"]["resamples"]
    kept = "; ".join(f"{SCHEME_TITLES[s]} {resamples[s]['kept']} of {table['bootstrap']['reps']} kept over "
                     f"{resamples[s]['groups']} groups" for s in schemes)
    lines = [f"{outcome['runs']} runs from {len(outcome['bases'])} bases ({', '.join(outcome['bases'])}); "
             f"{outcome['status']}: {outcome['why']}. Settings columns: {', '.join(table['setting_columns']) or 'none'}. "
             f"Bootstrap resamples (each refitted): {kept}.", ""]
    rows = [[MODEL_TITLES[name], _number(model["in_sample_r2"]),
             *(_scheme_cell(model["oos_r2"], s) for s in schemes)] for name, model in table["models"].items()]
    lines += markdown_table(["model", "R^2 in sample", *(f"R^2 {SCHEME_TITLES[s]} [95% CI]" for s in schemes)], rows)
    decision = table["decision"]
    rows = [[MODEL_TITLES[name].replace("baseline + ", ""), *(_scheme_cell(gains, s, 3) for s in schemes)]
            for name, gains in table["added"].items()]
    lines += ["", *markdown_table(["added to the baseline", *(f"gain, {SCHEME_TITLES[s]} [95% CI]" for s in schemes)],
                                  rows)]
    met = ", ".join(f"{SCHEME_TITLES[s]} {'met' if ok else 'not met'}" for s, ok in decision["schemes"].items())
    coefficients = table["primary_coefficients"]
    slope = "" if coefficients is None else (f" Early ACR's coefficient in the baseline + early ACR model over every "
                                             f"run: {coefficients['acr']:+.1f} points per unit of ACR.")
    lines += ["", f"**The pre-registered rule on these runs: {decision['verdict']}** ({met}): "
                  f"{verdict_text(decision, BASELINE_WORDS)}.{slope}", ""]
    fired = ", ".join(f"{f['fired']} of {f['runs']} at lr {f['lr']:g}" for f in stall["fired_by_lr"])
    lines.append(
        f"The stagnation rule fired on {fired}. Final gain (points) of runs where it fired minus the others, within "
        f"{stall['cells_by']} cells ({stall['cells_with_both']} of {stall['cells']} cells hold both; weights "
        f"n1 n0 / (n1 + n0)): {_estimate(stall['within_cells'], 1)}; pooled without cells: "
        f"{_estimate(stall['crude'], 1)} (intervals over {stall['kept']} of {stall['reps']} base resamples).")
    return lines


def preregistered_markdown(prereg: Mapping) -> list[str]:
    """fit.json's ``preregistered`` (sweep_preregistered.preregistered) as the section docs/evidence/sweep.md shows."""
    boot = prereg["bootstrap"]
    lines = [
        "## Early ACR's forecast value, pre-registered",
        "",
        "Fixed in code (`lab/research/forecast_models.py`) before any new run. Models, each least "
        "squares on an intercept and: "
        + "; ".join(f"{MODEL_TITLES[name]}" for name in prereg["models"]) + ". Out of sample: "
        + " and ".join(SCHEME_TITLES[s] for s in prereg["schemes"]) + " (a setting: one lr x G x tier mix). "
        f"Intervals: {boot['reps']} bootstrap resamples of the bases (seed {boot['seed']}), every model refitted in "
        f"every fold of every resample; a resample is kept where each held-out fold is fitted on at least "
        f"{boot['min_train_groups']} other groups. Rule: {prereg['rule']}. Verdicts, at the strength the intervals "
        f"carry: {VERDICT_MEANINGS}.",
        "",
        f"**Verdict: {prereg['verdict']}**"
        + (" (only the confirmation sweep decides; it has not yet run)." if prereg["verdict"] == "pending" else
           f": {verdict_text(prereg['confirmation']['table']['decision'], BASELINE_WORDS)}."),
        "",
    ]
    exploratory = prereg["exploratory"]
    if exploratory is not None:
        lines += ["### Exploratory: the 96-run sweep", "", *preregistered_result_lines(exploratory), ""]
    lines += ["### Confirmation", ""]
    confirmation, planned = prereg["confirmation"], prereg["planned_confirmation"]
    if confirmation is None:
        lines.append(
            f"Specified and **not yet run**: `{planned['command']}`: {planned['runs']} GRPO runs "
            f"({planned['bases']} new bases {', '.join(planned['base_names'])}, at least {planned['min_bases']} eligible; "
            f"lr {', '.join(f'{lr:g}' for lr in planned['learning_rates'])}; seeds "
            f"{', '.join(map(str, planned['seed_list']))}), estimated {planned['estimated_cpu_s']:,.0f} CPU-seconds and "
            f"{planned['estimated_wall_s']:,.0f} s wall ({planned['estimated_wall_s'] / 3600:.1f} h) with "
            f"{planned['jobs']} workers; resumable from its run cache (the same `--out`).")
    else:
        lines += preregistered_result_lines(confirmation)
    return lines
