"""``avspo lab sweep``: does early ACR predict the final held-out accuracy of GRPO on the lab?

The paper fits Final = 51.4 - 29.6 * ACR_100 over 245 GRPO configurations (R^2 = 0.62).
Here GRPO runs over a grid of temperature x G x RL tier mix x learning rate, from one
base policy, several seeds per configuration. Each run gives its early ACR (mean over its
first 20% of steps) and its final held-out accuracy in %, read three ways (READINGS).
For each reading a least-squares line is fitted twice: over per-configuration means (the
configurations are the independent units) and over all runs; each fit carries R^2 with a
Fisher 95% interval, and the partial R^2 of early ACR given lr and G.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from .policy import build_policy
from .report import EARLY_FRACTION, Z975, markdown_table, window_mean
from .train import evaluate, held_out

# RL tier mixes of the sweep (weights over the lab's four tiers): from mostly short problems to mostly long ones.
SWEEP_MIXES: dict[str, tuple[float, ...]] = {
    "easy": (4, 3, 2, 1),
    "uniform": (1, 1, 1, 1),
    "hard": (1, 2, 3, 4),
}
SWEEP_TEMPERATURES = (0.7, 1.0, 1.3)
SWEEP_GROUP_SIZES = (4, 8)
SWEEP_LEARNING_RATES = (1e-4, 4e-4)
SWEEP_SEEDS = 3  # seeds per configuration, 0..2

# How a run's final accuracy is read (keys of a point's "final_pct"): name -> what it is.
COMMON_TEMPERATURE = 1.0  # the one-seed sweep read every run here, whatever its training temperature
READINGS = {
    "training_temperature": "avg@k sampled at the run's own training temperature",
    "greedy": "greedy decoding",
    "temperature_1.0": f"avg@k sampled at temperature {COMMON_TEMPERATURE} (as the one-seed sweep read every run)",
}
# The partial correlation holds these fixed: settings that may move final accuracy without moving early ACR.
COVARIATES = ("lr", "group_size")
# fit.json's reading, over configuration means: one measurement for every run. Read at its own training temperature,
# a run's score moves with the temperature itself (a lower one scores higher) as well as with what training did.
FIT_READING = "temperature_1.0"


@dataclass(frozen=True)
class SweepConfig:
    label: str
    mix_name: str
    settings: Any  # LabSettings


def sweep_grid(base) -> list[SweepConfig]:
    """Every configuration: temperatures x group sizes x mixes x learning rates, the rest as in ``base``."""
    if len(base.tiers) != len(next(iter(SWEEP_MIXES.values()))):
        raise ValueError(f"the sweep's tier mixes are written for {len(next(iter(SWEEP_MIXES.values())))} tiers; "
                         f"the settings have tiers {base.tiers}")
    grid = []
    for temperature, g, (mix_name, mix), lr in itertools.product(
        SWEEP_TEMPERATURES, SWEEP_GROUP_SIZES, SWEEP_MIXES.items(), SWEEP_LEARNING_RATES
    ):
        label = f"T={temperature} G={g} mix={mix_name} lr={lr:g}"
        settings = dataclasses.replace(base, temperature=temperature, group_size=g, mix=mix, lr=lr)
        grid.append(SweepConfig(label, mix_name, settings))
    return grid


def final_eval_temperatures(settings) -> tuple[float, ...]:
    """The temperatures train() evaluates the final policy at besides its usual evaluation (extra_final_evals)."""
    return tuple(sorted({float(settings.temperature), COMMON_TEMPERATURE}))


def early_steps(steps: int) -> int:
    """How many leading steps the early window holds (window_mean's rounding of EARLY_FRACTION)."""
    return max(1, math.ceil(EARLY_FRACTION * steps))


def sweep_point(run: dict, temperature: float) -> dict[str, Any]:
    """Early ACR and the final accuracy (%) of every reading, from a run trained at ``temperature``
    with extra_final_evals = final_eval_temperatures(its settings)."""
    final = run["evals"]["at_temperature"][-1]
    return {
        "early_acr": window_mean(run["steps"]["acr"], 0.0, EARLY_FRACTION),
        "final_pct": {
            "training_temperature": 100.0 * final[str(float(temperature))],
            "greedy": 100.0 * run["evals"]["greedy"][-1],
            "temperature_1.0": 100.0 * final[str(COMMON_TEMPERATURE)],
        },
    }


def base_accuracy_pct(base_state, settings) -> dict[str, float]:
    """The base policy's held-out accuracy (%) in every reading: greedy, and sampled at each sweep temperature
    with the generator of step 0 (the runs' first evaluation)."""
    policy = build_policy(settings.shape, settings.task_seed)
    policy.load_state_dict(base_state)
    problems = held_out(settings)
    result = {}
    for temperature in sorted({*SWEEP_TEMPERATURES, COMMON_TEMPERATURE}):
        at = dataclasses.replace(settings, eval_temperature=float(temperature))
        evaluation = evaluate(policy, problems, at, step=0)
        result[str(float(temperature))] = 100.0 * evaluation["accuracy"]
    result["greedy"] = 100.0 * evaluation["greedy"]
    return result


def configuration_means(points: Sequence[dict]) -> list[dict[str, Any]]:
    """One entry per configuration (in order of first appearance): its settings, and early ACR and every
    reading averaged over its seeds."""
    by_label: dict[str, list[dict]] = {}
    for p in points:
        by_label.setdefault(p["label"], []).append(p)
    means = []
    for label, runs in by_label.items():
        first = runs[0]
        means.append({
            "label": label,
            **{key: first[key] for key in ("temperature", "group_size", "mix", "lr")},
            "seeds": [p["seed"] for p in runs],
            "early_acr": float(np.mean([p["early_acr"] for p in runs])),
            "final_pct": {r: float(np.mean([p["final_pct"][r] for p in runs])) for r in READINGS},
        })
    return means


def correlation_interval(r: float, n: int, covariates: int = 0) -> list[float] | None:
    """95% interval of a (partial) correlation by Fisher's z: tanh(atanh(r) +- 1.96 / sqrt(n - 3 - k)).

    A correlation partialled on k covariates has n - 2 - k degrees of freedom, so its z has standard error
    1 / sqrt(n - 3 - k) (k = 0: the plain correlation's 1 / sqrt(n - 3)). None when n - 3 - k < 1.
    """
    if n - 3 - covariates < 1:
        return None
    if abs(r) >= 1.0:
        return [float(r), float(r)]
    half = Z975 / math.sqrt(n - 3 - covariates)
    z = math.atanh(r)
    return [math.tanh(z - half), math.tanh(z + half)]


def r2_interval(r_interval: list[float] | None) -> list[float] | None:
    """The interval on r, squared: [0, max] when it contains 0, else [smaller, larger] of the squares."""
    if r_interval is None:
        return None
    lo, hi = r_interval
    squares = sorted((lo * lo, hi * hi))
    return [0.0, squares[1]] if lo <= 0.0 <= hi else squares


def correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson r; 0 when either has no spread (nothing varies together)."""
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    return float(np.corrcoef(x, y)[0, 1])


def fit_line(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    """Least squares y = intercept + slope * x, Pearson r, R^2 = r^2, and their Fisher 95% intervals."""
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if xs.size < 3 or np.ptp(xs) == 0:
        raise ValueError(f"a line needs at least 3 points with different early ACR; got {xs.size}")
    slope, intercept = np.polyfit(xs, ys, 1)
    r = correlation(xs, ys)
    interval = correlation_interval(r, xs.size)
    return {"intercept": float(intercept), "slope": float(slope), "r": r, "r2": r * r, "n": int(xs.size),
            "r_ci95": interval, "r2_ci95": r2_interval(interval)}


def partial_correlation(x: Sequence[float], y: Sequence[float], covariates: np.ndarray) -> dict[str, Any]:
    """r of x and y with the covariates (columns) held fixed: the correlation of their least-squares residuals
    on (1, covariates); k is the rank of the covariates beyond the intercept, the degrees of freedom n - 2 - k."""
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    design = np.column_stack([np.ones(xs.size), np.asarray(covariates, dtype=np.float64)])
    k = int(np.linalg.matrix_rank(design)) - 1
    r = correlation(_residual(xs, design), _residual(ys, design))
    interval = correlation_interval(r, xs.size, k)
    return {"r": r, "r2": r * r, "n": int(xs.size), "covariates": k, "dof": int(xs.size) - 2 - k,
            "r_ci95": interval, "r2_ci95": r2_interval(interval)}


def _residual(values: np.ndarray, design: np.ndarray) -> np.ndarray:
    residual = values - design @ np.linalg.lstsq(design, values, rcond=None)[0]
    # At rounding level the design explains the values entirely: nothing is left to correlate.
    return np.zeros_like(residual) if np.abs(residual).max() <= 1e-12 * max(1.0, np.abs(values).max()) else residual


def sweep_fits(points: Sequence[dict], configurations: Sequence[dict]) -> dict[str, dict[str, dict]]:
    """reading -> {"configurations": fit over per-configuration means, "runs": fit over every run}; each fit
    has the line, r, R^2 with intervals, "acr_range", and "partial": early ACR and final accuracy given lr and G."""
    fits: dict[str, dict[str, dict]] = {}
    for reading in READINGS:
        fits[reading] = {}
        for unit, rows in (("configurations", configurations), ("runs", points)):
            x = [row["early_acr"] for row in rows]
            y = [row["final_pct"][reading] for row in rows]
            covariates = np.array([[row[c] for c in COVARIATES] for row in rows], dtype=np.float64)
            fits[reading][unit] = {
                **fit_line(x, y),
                "acr_range": [min(x), max(x)],
                "partial": {"given": list(COVARIATES), **partial_correlation(x, y, covariates)},
            }
    return fits


def line_text(intercept: float, slope: float, digits: int = 1) -> str:
    """'61.6 - 20.5 x early ACR'."""
    sign = "-" if slope < 0 else "+"
    return f"{intercept:.{digits}f} {sign} {abs(slope):.{digits}f} x early ACR"


def interval_text(interval: list[float] | None, digits: int = 2) -> str:
    return "no interval (too few points)" if interval is None else \
        f"95% CI {interval[0]:.{digits}f} to {interval[1]:.{digits}f}"


def fit_file(fits: dict[str, dict[str, dict]], steps: int, seeds: int) -> dict[str, Any]:
    """The line ``avspo analyze --fit`` reads (see docs/lab.md): FIT_READING over configuration means."""
    fit = fits[FIT_READING]["configurations"]
    window = early_steps(steps)
    return {
        "intercept": fit["intercept"],
        "slope": fit["slope"],
        "early_steps": window,
        "early_fraction": EARLY_FRACTION,
        "target": f"final held-out accuracy (%) at temperature {COMMON_TEMPERATURE} in the avspo CPU lab",
        "label": (
            f"avspo lab sweep ({fit['n']} GRPO configurations x {seeds} seeds, {steps} steps; configuration "
            f"means): final = {line_text(fit['intercept'], fit['slope'])} (early: first {window} steps; "
            f"R^2 = {fit['r2']:.2f}, {interval_text(fit['r2_ci95'])})"
        ),
        "acr_range": fit["acr_range"],
        "r": fit["r"],
        "r2": fit["r2"],
        "r2_ci95": fit["r2_ci95"],
        "n": fit["n"],
        "reading": FIT_READING,
        "seeds_per_point": seeds,
    }


def _stat(value: float, interval: list[float] | None) -> str:
    return f"{value:.3f}" + ("" if interval is None else f" [{interval[0]:.3f}, {interval[1]:.3f}]")


def sweep_markdown(report: dict) -> str:
    settings, fits, seeds = report["settings"], report["fits"], report["seeds"]
    configurations, base = report["configurations"], report["base"]["sweep_readings_pct"]
    window = report["fit"]["early_steps"]
    lines = [
        "# AVSPO CPU lab: early ACR as a predictor of final accuracy (GRPO sweep)",
        "",
        f"{len(report['points'])} GRPO runs: {len(configurations)} configurations x {len(seeds)} seeds "
        f"({', '.join(map(str, seeds))}), {settings['steps']} steps each, from one base policy. Grid: temperature "
        f"{list(SWEEP_TEMPERATURES)} x G {list(SWEEP_GROUP_SIZES)} x RL tier mix "
        f"{ {k: list(v) for k, v in SWEEP_MIXES.items()} } x lr {list(SWEEP_LEARNING_RATES)}. Early ACR: mean "
        f"ACR over the first {window} steps ({EARLY_FRACTION:.0%}). Final accuracy: held-out, in %, on "
        f"{settings['held_out_per_tier']} problems per tier (avg@{settings['eval_samples']} where sampled), read "
        "three ways: " + "; ".join(f"{name}: {text}" for name, text in READINGS.items()) + ".",
        "",
        "## Fits",
        "",
    ]
    rows = []
    for reading in READINGS:
        for unit in ("configurations", "runs"):
            fit = fits[reading][unit]
            partial = fit["partial"]
            rows.append([
                reading, "configuration means" if unit == "configurations" else "runs", str(fit["n"]),
                line_text(fit["intercept"], fit["slope"], 2), f"{fit['r']:.3f}", _stat(fit["r2"], fit["r2_ci95"]),
                _stat(partial["r2"], partial["r2_ci95"]),
            ])
    lines += markdown_table(["final accuracy", "points", "n", "line", "r", "R^2 [95% CI]",
                             "partial R^2 given lr, G [95% CI]"], rows)
    independent = ("The runs are not independent configurations: the seeds of one configuration share every "
                   "setting, so the intervals over runs, which treat each run as independent, are too narrow; the "
                   f"fits over configuration means (n = {len(configurations)}) are the ones to read.")
    if len(seeds) == 1:
        independent = "With one seed per configuration, the runs are the configuration means."
    lines += [
        "",
        "Intervals: Fisher's z on r, tanh(atanh(r) ± 1.96 / sqrt(n - 3)), squared for R^2 (from 0 when the "
        "interval on r contains 0). Partial R^2: the squared correlation of the least-squares residuals of early "
        "ACR and of final accuracy on (1, lr, G), i.e. early ACR's share of what lr and G leave unexplained; it "
        "has n - 2 - k degrees of freedom (k = 2 covariates), so its Fisher interval uses 1.96 / sqrt(n - 3 - k). "
        + independent,
        "",
        "The training-temperature reading changes the measurement with the configuration: the base policy "
        "itself scores " + ", ".join(f"{base[str(float(t))]:.1f}% at T = {t}" for t in SWEEP_TEMPERATURES)
        + ", and temperature also moves early ACR, so that fit mixes both with what training did. fit.json (for "
        f"`avspo analyze --fit`) holds the fit over configuration means at temperature {COMMON_TEMPERATURE}, one "
        "measurement for every run. The paper: final = 51.4 - 29.6 x ACR_100, R^2 = 0.62 over 245 configurations.",
        "",
        "## Base policy",
        "",
        "Held-out accuracy (%) of the base policy: "
        + ", ".join(f"sampled at T = {key}: {value:.1f}" for key, value in base.items() if key != "greedy")
        + f", greedy: {base['greedy']:.1f}.",
        "",
        "## Configurations",
        "",
        f"Means over {len(seeds)} seed(s); in brackets the change from the base policy in the same reading "
        "(points).",
        "",
    ]
    rows = []
    for c in sorted(configurations, key=lambda c: c["early_acr"]):
        before = {"training_temperature": base[str(float(c["temperature"]))], "greedy": base["greedy"],
                  "temperature_1.0": base[str(COMMON_TEMPERATURE)]}
        rows.append([c["label"], f"{c['early_acr']:.3f}",
                     *(f"{c['final_pct'][r]:.1f} ({c['final_pct'][r] - before[r]:+.1f})" for r in READINGS)])
    lines += markdown_table(["configuration", "early ACR", *(f"final acc, {r} (%)" for r in READINGS)], rows)
    timing = report["timing"]
    lines += [
        "",
        f"Wall time {timing['wall_s']:.0f} s; CPU time {timing['cpu_s']:.0f} s ({timing['jobs']} worker processes).",
        "",
        "Plot: sweep_scatter.png. Every run's series: sweep.json. Fitted line for `avspo analyze --fit`: fit.json.",
        "",
    ]
    return "\n".join(lines)


def plot_sweep(report: dict, path: Path) -> Path:
    """One panel per reading: configuration means (colour: temperature, marker: mix, size: G, outline: higher lr),
    single runs in grey, and the line fitted over the configuration means."""
    points, configurations, fits = report["points"], report["configurations"], report["fits"]
    seeds = len(report["seeds"])
    fig = Figure(figsize=(6 * len(READINGS), 4.8))
    axes = fig.subplots(1, len(READINGS))
    markers = {name: m for name, m in zip(SWEEP_MIXES, "o^s")}
    cmap = matplotlib.colormaps["viridis"]
    temperatures = sorted({c["temperature"] for c in configurations})

    def shade(t: float):
        return cmap(0.1 + 0.8 * temperatures.index(t) / max(1, len(temperatures) - 1))

    for name, marker in markers.items():  # legend entries, shown in the last panel
        axes[-1].scatter([], [], marker=marker, color="grey", label=f"mix {name}")
    for t in temperatures:
        axes[-1].scatter([], [], marker="o", color=shade(t), label=f"T = {t}")
    for ax, reading in zip(axes, READINGS):
        if seeds > 1:
            ax.scatter([p["early_acr"] for p in points], [p["final_pct"][reading] for p in points],
                       color="grey", alpha=0.35, s=8, linewidth=0)
        for c in configurations:
            ax.scatter(c["early_acr"], c["final_pct"][reading], marker=markers.get(c["mix"], "o"),
                       color=shade(c["temperature"]), s=22 + 18 * (c["group_size"] == max(SWEEP_GROUP_SIZES)),
                       edgecolor="black" if c["lr"] == max(SWEEP_LEARNING_RATES) else "none", linewidth=0.6)
        fit = fits[reading]["configurations"]
        xs = np.linspace(*fit["acr_range"], 50)
        ax.plot(xs, fit["intercept"] + fit["slope"] * xs, color="crimson",
                label=f"fit: {line_text(fit['intercept'], fit['slope'])}\nR² = {fit['r2']:.2f} "
                      f"({interval_text(fit['r2_ci95'])}, n = {fit['n']})")
        ax.set_title(f"final accuracy: {reading.replace('_', ' ')}", fontsize=10)
        ax.set_xlabel(f"early ACR (mean over first {report['fit']['early_steps']} steps)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    axes[0].set_ylabel("final held-out accuracy (%)")
    runs = f"; grey: single runs of {seeds} seeds each" if seeds > 1 else ""
    fig.suptitle(f"GRPO sweep: early ACR vs final accuracy (coloured: configuration means{runs}; large: G = "
                 f"{max(SWEEP_GROUP_SIZES)}, small: G = {min(SWEEP_GROUP_SIZES)}; outlined: lr "
                 f"{max(SWEEP_LEARNING_RATES):g})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return path
