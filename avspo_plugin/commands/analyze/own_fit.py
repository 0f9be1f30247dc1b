"""``avspo analyze --fit-final KEY``: the lab's pre-registered models fitted on a user's own runs.

Each run given to analyze whose tracker log holds KEY (e.g. a validation score) is a finished run: its final score
is KEY's value at the last step it was logged. Its early signals are means over analyze's early window
(``--early-steps``): early ACR (and its all-fail and all-pass shares where logged) and the early mean train reward.
Its settings are the keys named with ``--fit-setting`` (else the learning-rate keys of SETTING_KEYS found in every
run), each the run's largest logged value (a schedule's peak), a learning rate as its log2. The models, scheme,
bootstrap and rule are the lab's (avspo_plugin/evidence/forecast_models.py): settings + early reward, that +
early ACR, that + each of ACR's parts; leave one setting out (runs of one combination of settings held out together;
with no setting, each run alone), REPS refitted resamples of the runs (a user's settings are chosen, not drawn: what
varies is each run's outcome). The verdict is the lab's (forecast_models.decide: adds, not shown to add with the
smallest gain the test would have detected, or cannot tell), and runs without KEY are forecast only where it is
``adds``; a fit on fewer runs than MIN_RUNS_PER_PARAMETER per parameter of its largest model, or on fewer than
MIN_TRAIN_GROUPS + 1 settings, is refused.

The runs are checked first (docs/using/analyze.md): a KEY no run logs is refused, naming the closest keys the runs do
log; a run whose final KEY is NaN or infinite is left out of the fit with a warning naming it and the value; a final
the same for every finished run gives no verdict, saying why; a setting that cannot enter its transform (a learning
rate of 0 under log2) is refused naming the run and the value.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from avspo_plugin.evidence import forecast_models as sm

from . import readers
from .run_analysis import RunResult
from .run_logs import AnalyzeError, ScalarLog

# Learning-rate keys as verl, TRL/transformers and OpenRLHF log them: settings found in the logs.
SETTING_KEYS = ("actor/lr", "train/learning_rate", "learning_rate", "lr")
MIN_RUNS_PER_PARAMETER = 3
EARLY_SERIES = {"acr": "acr", "acr_all_fail": "acr_all_fail", "acr_all_pass": "acr_all_pass", "reward": "reward_mean"}
SCHEME = "leave_one_setting_out"
# What early ACR is added to on a user's runs, in words.
OWN_BASELINE = "your runs' settings + early reward"
# How many of the keys the runs log are named when KEY is not among them.
CLOSEST_KEYS = 5


def _scalars(path: Path, option: str) -> ScalarLog:
    loaded = readers.load(path)
    if loaded.scalars is None:
        raise AnalyzeError(f"{path}: {option} reads the final score from a tracker log (verl's file logger, "
                           f"TensorBoard, a wandb export); this is {loaded.format}")
    return loaded.scalars


def final_score(log: ScalarLog, key: str) -> tuple[int, float] | None:
    """(step, value) of ``key`` at the last step it was logged (NaN and infinities included); None where never."""
    logged = {step: row[key] for step, row in log.values.items() if key in row}
    logged.update(log.infinite.get(key, {}))
    return None if not logged else max(logged.items())


def check_key_is_logged(key: str, logs: Sequence[ScalarLog], option: str) -> None:
    """AnalyzeError when no run logs ``key`` as a number: naming the closest keys the runs do log, or where it is
    logged as something else."""
    if any(final_score(log, key) is not None for log in logs):
        return
    where = next((log.nonnumeric[key] for log in logs if key in log.nonnumeric), None)
    if where is not None:
        raise AnalyzeError(f"{option}: no run logs {key!r} as a number (the first value that is not: {where})")
    keys = sorted({name for log in logs for name in log.keys()})
    closest = difflib.get_close_matches(key, keys, n=CLOSEST_KEYS, cutoff=0.0)
    raise AnalyzeError(f"{option}: no run logs {key!r}; the closest keys the runs log: {', '.join(closest) or 'none'}")


def check_settings(label: str, settings: dict[str, float], option: str) -> None:
    """AnalyzeError naming the run and the value of a setting that cannot enter its transform (log2 of a value <= 0)."""
    for name, value in settings.items():
        if sm.enters_as_log2(name) and value <= 0:
            raise AnalyzeError(f"{option}: run {label} has {name} = {value:g}, which enters the models as its log2 and "
                               "must be > 0 (a run at learning rate 0?): leave the run out, or name other settings "
                               "with --fit-setting")


def _early_means(result: RunResult, early_steps: int) -> dict[str, float]:
    timeline = result.timeline
    inside = timeline.steps < timeline.steps[0] + early_steps
    means = {}
    for term, series in EARLY_SERIES.items():
        values = timeline.get(series)
        if values is not None:
            window = values[inside][np.isfinite(values[inside])]
            if window.size:
                means[term] = float(window.mean())
    return means


def minimum_runs(parameters: int) -> int:
    return MIN_RUNS_PER_PARAMETER * parameters


def fit_own_runs(results: Sequence[RunResult], paths: Sequence[Path], key: str, setting_keys: Sequence[str],
                 early_steps: int, reps: int = sm.REPS, seed: int = sm.SEED) -> dict[str, Any]:
    """The pre-registered table on the runs that logged ``key``, its verdict, and forecasts of the others where early
    ACR adds; ``left_out`` names the runs whose final score is not finite, ``no_verdict`` why there is none (else None).
    """
    option = f"--fit-final {key}"
    logs = [_scalars(Path(path), option) for path in paths]
    check_key_is_logged(key, logs, option)
    found = [k for k in SETTING_KEYS if all(any(k in row for row in log.values.values()) for log in logs)][:1]
    names = list(setting_keys) or found
    runs, left_out = [], []
    for result, log in zip(results, logs):
        settings = {}
        for name in names:
            values = [row[name] for row in log.values.values() if name in row and np.isfinite(row[name])]
            if not values:
                raise AnalyzeError(f"{option}: run {result.label} logs no value of the setting {name!r}")
            settings[name] = max(values)
        check_settings(result.label, settings, option)
        early = result.report["early_warning"]
        if not early["complete"]:
            raise AnalyzeError(f"{option}: run {result.label} has {early['points']} logged steps, shorter than the "
                               f"early window of {early_steps} steps (--early-steps)")
        final = final_score(log, key)
        if final is not None and not math.isfinite(final[1]):
            left_out.append({"run": result.label, "step": final[0], "value": str(final[1])})
            continue
        runs.append({"label": result.label, "final": None if final is None else final[1], "settings": settings,
                     "signals": _early_means(result, early_steps)})
    finished = [r for r in runs if r["final"] is not None]
    own = {"key": key, "settings": names, "finished_runs": [r["label"] for r in finished],
           "unfinished_runs": [r["label"] for r in runs if r["final"] is None], "left_out": left_out,
           "table": None, "verdict": None, "no_verdict": None, "forecasts": None}
    finals = {r["final"] for r in finished}
    if len(finals) == 1:
        own["no_verdict"] = (f"every finished run ({len(finished)}) ends at {key} = {finals.pop():g}: with nothing to "
                             "explain, R^2 is undefined and no model can be told from another")
        return own
    terms = [t for t in sm.SIGNAL_TERMS if finished and all(t in r["signals"] for r in finished)]
    if "acr" not in terms or "reward" not in terms:
        raise AnalyzeError(f"{option}: every finished run needs early ACR and an early mean reward; "
                           f"found early {', '.join(terms) or 'nothing'}")
    try:
        matrix, columns = sm.encode_settings([r["settings"] for r in runs])
    except ValueError as err:
        raise AnalyzeError(f"{option}: {err}") from None
    setting_groups = sm.group_index([tuple(r["settings"].values()) for r in finished]) if names else \
        np.arange(len(finished))
    parameters = 1 + matrix.shape[1] + 2  # intercept, settings, early reward, early ACR (or one of its parts)
    needed = minimum_runs(parameters)
    groups = int(setting_groups.max()) + 1 if len(finished) else 0
    if len(finished) < needed or groups < sm.MIN_TRAIN_GROUPS + 1:
        raise AnalyzeError(
            f"{option}: {len(finished)} finished runs log {key} ({groups} distinct settings); the pre-registered "
            f"models need at least {needed} runs ({MIN_RUNS_PER_PARAMETER} per parameter of the largest model, "
            f"{parameters} parameters) and at least {sm.MIN_TRAIN_GROUPS + 1} distinct settings "
            f"({', '.join(names) or 'no setting named or found: each run is its own'})")
    index = [i for i, r in enumerate(runs) if r["final"] is not None]
    table = sm.RunTable(
        target=np.array([runs[i]["final"] for i in index], dtype=np.float64),
        settings=matrix[index], setting_names=columns,
        signals={t: np.array([runs[i]["signals"][t] for i in index], dtype=np.float64) for t in terms},
        folds={SCHEME: setting_groups}, cluster=np.arange(len(index)),
    )
    try:
        fitted = sm.preregistered_table(table, reps, seed)
    except ValueError as err:
        raise AnalyzeError(f"{option}: {err}") from None
    own.update(table=fitted, verdict=fitted["decision"]["verdict"])
    if fitted["decision"]["adds"]:
        coefficients = fitted["primary_coefficients"]
        own["forecasts"] = []
        for i, run in enumerate(runs):
            if run["final"] is None and all(t in run["signals"] for t in ("reward", "acr")):
                row = dict(zip(columns, matrix[i]))
                value = coefficients["intercept"] + sum(c * (row[n] if n in row else run["signals"][n])
                                                        for n, c in coefficients.items() if n != "intercept")
                own["forecasts"].append({"run": run["label"], key: float(value)})
    return own


def left_out_warnings(own: dict[str, Any]) -> list[str]:
    """One warning per run left out of the fit for a final score that is not finite."""
    return [f"--fit-final {own['key']}: run {entry['run']} ends at {own['key']} = {entry['value']} (step "
            f"{entry['step']}), not a finite number: left out of the fit" for entry in own["left_out"]]


def _estimate(estimate: dict[str, Any], digits: int = 3) -> str:
    value = "undefined" if estimate["value"] is None else f"{estimate['value']:+.{digits}f}"
    ci = estimate["ci95"]
    return value + ("" if ci is None else f" (95% CI {ci[0]:+.{digits}f} to {ci[1]:+.{digits}f})")


def own_fit_lines(fit: dict[str, Any]) -> list[str]:
    """The fit on the user's runs in a few lines: the baseline's and ACR's out-of-sample R^2, the gain, the verdict
    (forecast_models.verdict_text), and forecasts only where early ACR adds; or why there is no verdict."""
    head = f"The lab's pre-registered models on your runs (--fit-final {fit['key']})"
    if fit["no_verdict"] is not None:
        return [f"{head}: no verdict: {fit['no_verdict']}; no forecast printed"]
    table = fit["table"]
    models, gain = table["models"], table["added"]["acr"][SCHEME]
    boot = table["bootstrap"]
    settings = ", ".join(table["setting_columns"]) or "none"
    scheme = "each setting's runs held out in turn" if fit["settings"] else "each run held out in turn"
    left_out = f", {len(fit['left_out'])} left out (final not finite)" if fit["left_out"] else ""
    lines = [
        f"{head}: {table['runs']} finished runs{left_out}, settings {settings}; {scheme}; {boot['reps']} resamples of "
        f"the runs, each refitted ({boot['resamples'][SCHEME]['kept']} kept):",
        f"  settings + early reward: out-of-sample R^2 {_estimate(models['baseline']['oos_r2'][SCHEME], 2)}",
        f"  + early ACR: out-of-sample R^2 {_estimate(models['acr']['oos_r2'][SCHEME], 2)}; change {_estimate(gain)}",
        f"  verdict: {sm.verdict_text(table['decision'], OWN_BASELINE)} (the lab's rule: a rise in out-of-sample R^2 of "
        f"at least {table['decision']['min_gain']} with its 95% interval above 0)",
    ]
    if fit["forecasts"] is None:
        lines.append(f"  no forecast printed (a forecast needs the verdict {sm.ADDS})")
    elif fit["forecasts"]:
        lines += [f"  forecast {fit['key']} of {f['run']}: {f[fit['key']]:.4g} (settings + early reward + early "
                  "ACR, fitted on your finished runs)" for f in fit["forecasts"]]
    else:
        lines.append(f"  no run without {fit['key']} to forecast")
    return lines
