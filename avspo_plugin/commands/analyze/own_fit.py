"""``avspo analyze --fit-final KEY``: the lab's pre-registered models fitted on a user's own runs.

Each run given to analyze whose tracker log holds KEY (e.g. a validation score) is a finished run: its final score
is KEY's value at the last step it was logged. Its early signals are means over analyze's early window
(``--early-steps``): early ACR (and its all-fail and all-pass shares where logged) and the early mean train reward.
Its settings are the keys named with ``--fit-setting`` (else the learning-rate keys of SETTING_KEYS found in every
run), each the run's largest logged value (a schedule's peak), a learning rate as its log2. The models, scheme,
bootstrap and rule are the lab's (avspo_plugin/commands/analyze/forecast_models.py): settings + early reward, that +
early ACR, that + each of ACR's parts; leave one setting out (runs of one combination of settings held out together;
with no setting, each run alone), REPS refitted resamples of the runs (a user's settings are chosen, not drawn: what
varies is each run's outcome). Runs without KEY are forecast only when
early ACR adds by the rule; a fit on fewer runs than MIN_RUNS_PER_PARAMETER per parameter of its largest model, or on
fewer than MIN_TRAIN_GROUPS + 1 settings, is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import detect
from . import forecast_models as sm
from .analysis import RunResult
from .records import AnalyzeError

# Learning-rate keys as verl, TRL/transformers and OpenRLHF log them: settings found in the logs.
SETTING_KEYS = ("actor/lr", "train/learning_rate", "learning_rate", "lr")
MIN_RUNS_PER_PARAMETER = 3
EARLY_SERIES = {"acr": "acr", "acr_all_fail": "acr_all_fail", "acr_all_pass": "acr_all_pass", "reward": "reward_mean"}
SCHEME = "leave_one_setting_out"


def _scalars(path: Path, option: str) -> dict[int, dict[str, float]]:
    loaded = detect.load(path)
    if loaded.scalars is None:
        raise AnalyzeError(f"{path}: {option} reads the final score from a tracker log (verl's file logger, "
                           f"TensorBoard, a wandb export); this is {loaded.format}")
    return loaded.scalars.values


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
    """The pre-registered table on the runs that logged ``key``, and forecasts of the others when early ACR adds."""
    option = f"--fit-final {key}"
    logs = [_scalars(Path(path), option) for path in paths]
    found = [k for k in SETTING_KEYS if all(any(k in row for row in log.values()) for log in logs)][:1]
    names = list(setting_keys) or found
    runs = []
    for result, log in zip(results, logs):
        steps = sorted(step for step, row in log.items() if key in row)
        settings = {}
        for name in names:
            values = [row[name] for row in log.values() if name in row and np.isfinite(row[name])]
            if not values:
                raise AnalyzeError(f"{option}: run {result.label} logs no value of the setting {name!r}")
            settings[name] = max(values)
        early = result.report["early_warning"]
        if not early["complete"]:
            raise AnalyzeError(f"{option}: run {result.label} has {early['points']} logged steps, shorter than the "
                               f"early window of {early_steps} steps (--early-steps)")
        runs.append({"label": result.label, "final": log[steps[-1]][key] if steps else None, "settings": settings,
                     "signals": _early_means(result, early_steps)})
    finished = [r for r in runs if r["final"] is not None]
    terms = [t for t in sm.SIGNAL_TERMS if finished and all(t in r["signals"] for r in finished)]
    if "acr" not in terms or "reward" not in terms:
        raise AnalyzeError(f"{option}: every finished run needs early ACR and an early mean reward; "
                           f"found early {', '.join(terms) or 'nothing'}")
    matrix, columns = sm.encode_settings([r["settings"] for r in runs])
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
    fitted = sm.preregistered_table(table, reps, seed)
    forecasts = []
    if fitted["decision"]["adds"]:
        coefficients = fitted["primary_coefficients"]
        for i, run in enumerate(runs):
            if run["final"] is None and all(t in run["signals"] for t in ("reward", "acr")):
                row = dict(zip(columns, matrix[i]))
                value = coefficients["intercept"] + sum(c * (row[n] if n in row else run["signals"][n])
                                                        for n, c in coefficients.items() if n != "intercept")
                forecasts.append({"run": run["label"], key: float(value)})
    return {"key": key, "settings": names, "finished_runs": [runs[i]["label"] for i in index],
            "unfinished_runs": [r["label"] for r in runs if r["final"] is None], "table": fitted,
            "forecasts": forecasts if fitted["decision"]["adds"] else None}


def _estimate(estimate: dict[str, Any], digits: int = 3) -> str:
    value = "undefined" if estimate["value"] is None else f"{estimate['value']:+.{digits}f}"
    ci = estimate["ci95"]
    return value + ("" if ci is None else f" (95% CI {ci[0]:+.{digits}f} to {ci[1]:+.{digits}f})")


def own_fit_lines(fit: dict[str, Any]) -> list[str]:
    """The fit on the user's runs in a few lines: the baseline's and ACR's out-of-sample R^2, the gain, the rule's
    decision, and forecasts only where early ACR adds."""
    table = fit["table"]
    models, gain = table["models"], table["added"]["acr"][SCHEME]
    boot = table["bootstrap"]
    settings = ", ".join(table["setting_columns"]) or "none"
    scheme = "each setting's runs held out in turn" if fit["settings"] else "each run held out in turn"
    lines = [
        f"The lab's pre-registered models on your runs (--fit-final {fit['key']}): {table['runs']} finished runs, "
        f"settings {settings}; {scheme}; {boot['reps']} resamples of the runs, each refitted "
        f"({boot['resamples'][SCHEME]['kept']} kept):",
        f"  settings + early reward: out-of-sample R^2 {_estimate(models['baseline']['oos_r2'][SCHEME], 2)}",
        f"  + early ACR: out-of-sample R^2 {_estimate(models['acr']['oos_r2'][SCHEME], 2)}; change {_estimate(gain)}",
    ]
    rule = (f"the lab's rule: a rise in out-of-sample R^2 of at least {table['decision']['min_gain']} with its 95% "
            "interval above 0")
    if table["decision"]["adds"]:
        lines.append(f"  so: on your runs early ACR adds ({rule})")
        if fit["forecasts"]:
            lines += [f"  forecast {fit['key']} of {f['run']}: {f[fit['key']]:.4g} (settings + early reward + early "
                      "ACR, fitted on your finished runs)" for f in fit["forecasts"]]
        else:
            lines.append(f"  no run without {fit['key']} to forecast")
    else:
        lines.append(f"  so: on your runs early ACR does not add ({rule}); no forecast printed")
    return lines
