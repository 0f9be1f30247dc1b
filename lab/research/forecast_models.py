"""Early ACR's forecast value, pre-registered (issue 40): the models, the out-of-sample schemes, the bootstrap and the
decision rule, fixed in code before the confirmation sweep runs; the lab's sweep (lab/research/forecast.py) fits them.
Research, not part of the package: ``avspo analyze`` fits no forecast.

Target: a run's final score (the lab: its final held-out gain over the base, in points). Terms (MODELS):

- ``settings``: what the user set and knows (the lab: log2 lr, G, the tier mix as an indicator); a setting enters
  only where it varies between runs (one that does not is absorbed by the intercept), a text setting as one
  indicator per level after the first, a setting in LOG2_SETTINGS as its log2;
- ``reward``: the early mean train reward; ``base_accuracy``: the base policy's held-out accuracy;
- ``acr``, ``acr_all_fail``, ``acr_all_pass`` (its parts) and ``entropy``: early-window means.

Models, each a least-squares fit on an intercept and its terms: ``intercept``, ``settings``, ``baseline`` (settings
+ reward + base accuracy), and ``baseline`` + each of ADDED alone. A term a table does not have is left out of every
model; a model whose added term is missing is not fitted.

Out of sample (SCHEMES): ``leave_one_base_out`` (each base's runs predicted by the fit on the other bases' runs) and
``leave_one_setting_out`` (each setting's runs, a setting being one combination of the settings' values, predicted by
the fit on the runs of every other setting). OOS R^2 = 1 - SSE / SS_tot, SS_tot around the mean of the runs counted.

Bootstrap (:func:`preregistered_table`): REPS resamples of the clusters (the lab: the bases) with replacement, seed
SEED. Every resample REFITS every model in every fold, on the resampled runs (a run counts as often as its cluster
is drawn); in leave-one-base-out every copy of a base drawn twice is held out together. A resample is kept when
every fold it holds out is fitted on at least MIN_TRAIN_GROUPS distinct groups; ``kept`` says how many. The 95%
interval is the 2.5th to 97.5th percentile; a gain's is that of the paired differences (both models, same resample).

Decision (RULE): early ACR adds when, in every scheme the table has, adding it to the baseline raises OOS R^2 by at
least MIN_GAIN and the 95% interval of that gain lies above 0.

Verdict (:func:`decide`), at the strength the data carry, one of VERDICTS: ``adds`` (the rule is met); ``not shown to
add``, with the smallest gain this test would have detected (:func:`detectable_gain`); ``cannot tell``, when in some
scheme even that smallest detectable gain is more than OOS R^2 can still rise above the baseline's (an OOS R^2 is at
most 1), or the gain is undefined: a design that could not have passed its own rule. :func:`verdict_text` words each,
for every place that quotes a verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MODELS: dict[str, tuple[str, ...]] = {
    "intercept": (),
    "settings": ("settings",),
    "baseline": ("settings", "reward", "base_accuracy"),
    "acr": ("settings", "reward", "base_accuracy", "acr"),
    "acr_all_fail": ("settings", "reward", "base_accuracy", "acr_all_fail"),
    "acr_all_pass": ("settings", "reward", "base_accuracy", "acr_all_pass"),
    "entropy": ("settings", "reward", "base_accuracy", "entropy"),
}
BASELINE_MODEL = "baseline"
ADDED = ("acr", "acr_all_fail", "acr_all_pass", "entropy")
PRIMARY = "acr"
SIGNAL_TERMS = ("reward", "base_accuracy", "acr", "acr_all_fail", "acr_all_pass", "entropy")
SCHEMES = ("leave_one_base_out", "leave_one_setting_out")
LOG2_SETTINGS = ("lr",)
MIN_GAIN = 0.05
REPS = 2000
SEED = 40
MIN_TRAIN_GROUPS = 3
RULE = (f"early ACR adds to the settings + early reward + base accuracy when, in each out-of-sample scheme, it raises "
        f"R^2 by at least {MIN_GAIN} and the bootstrap 95% interval of that gain lies above 0")
# The condition number a fit's normal equations may reach before the smallest directions count as zero.
PINV_RCOND = 1e-10
ADDS, NOT_SHOWN, CANNOT_TELL = "adds", "not shown to add", "cannot tell"
VERDICTS = (ADDS, NOT_SHOWN, CANNOT_TELL)
# A gain is detectable when a test of this interval's spread would put the interval above 0 four times in five (80%
# power): its true value at least (Z_INTERVAL + Z_POWER) standard errors, the standard error being the 95% interval's
# width over 2 Z_INTERVAL (normal quantiles: 97.5th and 80th percentiles).
DETECTION_POWER = 0.8
Z_INTERVAL = 1.959964
Z_POWER = 0.841621
SCHEME_WORDS = {"leave_one_base_out": "leaving one base out", "leave_one_setting_out": "leaving one setting out"}


@dataclass(frozen=True)
class RunTable:
    """The runs as the models read them.

    target: (n,) final score. settings: (n, s) encoded settings columns that vary (``setting_names`` names them).
    signals: term -> (n,) for the SIGNAL_TERMS the runs have. folds: scheme -> (n,) int group of each run (a scheme
    absent here is not run). cluster: (n,) int, the bootstrap's unit."""

    target: np.ndarray
    settings: np.ndarray
    setting_names: tuple[str, ...]
    signals: dict[str, np.ndarray]
    folds: dict[str, np.ndarray]
    cluster: np.ndarray

    @property
    def runs(self) -> int:
        return int(self.target.size)


def group_index(labels: Sequence[Any]) -> np.ndarray:
    """Each label's index among the distinct labels, in order of first appearance."""
    position: dict[Any, int] = {}
    return np.array([position.setdefault(label, len(position)) for label in labels], dtype=np.int64)


def encode_settings(settings: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, tuple[str, ...]]:
    """(n, s) columns of the settings that vary between runs, and their names: a number as it is (its log2 for a name
    in LOG2_SETTINGS or ending in one, e.g. actor/lr), a text value as one 0/1 column per level after the first (in
    sorted order, named ``name=level``). Every run must name the same settings."""
    names = list(settings[0]) if settings else []
    for i, run in enumerate(settings):
        if list(run) != names:
            raise ValueError(f"run {i} names the settings {sorted(run)}, run 0 {sorted(names)}: every run needs the same")
    columns, column_names = [], []
    for name in names:
        values = [run[name] for run in settings]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            column = np.asarray(values, dtype=np.float64)
            if enters_as_log2(name):
                if np.any(column <= 0):
                    raise ValueError(f"setting {name} enters as its log2 and must be > 0, found {column.min():g}")
                column, name = np.log2(column), f"log2 {name}"
            if np.ptp(column) > 0:
                columns.append(column)
                column_names.append(name)
        else:
            levels = sorted({str(v) for v in values})
            for level in levels[1:]:
                columns.append(np.array([str(v) == level for v in values], dtype=np.float64))
                column_names.append(f"{name}={level}")
    matrix = np.column_stack(columns) if columns else np.zeros((len(settings), 0))
    return matrix, tuple(column_names)


def enters_as_log2(name: str) -> bool:
    """Whether a numeric setting enters the models as its log2: a name in LOG2_SETTINGS, or ending in one."""
    return any(name == key or name.endswith(("/" + key, "_" + key)) for key in LOG2_SETTINGS)


def model_terms(table: RunTable) -> dict[str, tuple[str, ...]]:
    """The MODELS this table can fit, each with the terms it has (a signal the runs lack is left out; a model whose
    added term is missing is dropped)."""
    have = {"settings", *table.signals}
    fitted = {}
    for name, terms in MODELS.items():
        if name in ADDED and name not in table.signals:
            continue
        fitted[name] = tuple(term for term in terms if term in have)
    return fitted


def design(table: RunTable, terms: Sequence[str], standardise: bool = True) -> np.ndarray:
    """(n, 1 + k): the intercept and the terms' columns; standardised (centred, unit scale) unless asked not to,
    which changes no prediction of a least-squares fit with an intercept and keeps its normal equations conditioned."""
    columns = [table.settings if term == "settings" else table.signals[term][:, None] for term in terms]
    features = np.column_stack(columns) if columns else np.zeros((table.runs, 0))
    if standardise and features.shape[1]:
        scale = features.std(axis=0)
        features = (features - features.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    return np.column_stack([np.ones(table.runs), features])


def fold_predictions(x: np.ndarray, y: np.ndarray, fold: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(R, n): each run predicted by the weighted least-squares fit on every run outside its fold, for each row of
    weights (R, n; a run's weight is how often it was drawn). The minimum-norm solution where a fit is rank
    deficient. x: (n, k) with the intercept; y, fold: (n,)."""
    folds = int(fold.max()) + 1
    train = weights[:, None, :] * (fold[None, :] != np.arange(folds)[:, None])[None]  # (R, F, n)
    reps, k = weights.shape[0], x.shape[1]
    flat = train.reshape(reps * folds, -1)
    normal = (flat @ (x[:, :, None] * x[:, None, :]).reshape(-1, k * k)).reshape(reps, folds, k, k)
    moment = (flat @ (x * y[:, None])).reshape(reps, folds, k)
    coef = np.einsum("rfij,rfj->rfi", np.linalg.pinv(normal, rcond=PINV_RCOND, hermitian=True), moment)
    return np.einsum("nk,rnk->rn", x, coef[:, fold, :])


def weighted_r2(y: np.ndarray, predicted: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(R,): 1 - weighted SSE / weighted SS_tot around the weighted mean of y, per row of predicted and weights
    (R, n); NaN where y does not vary among the runs counted."""
    total = weights.sum(axis=1)
    mean = weights @ y / total
    ss_tot = np.sum(weights * (y[None, :] - mean[:, None]) ** 2, axis=1)
    sse = np.sum(weights * (y[None, :] - predicted) ** 2, axis=1)
    return np.where(ss_tot > 0, 1.0 - sse / np.where(ss_tot > 0, ss_tot, 1.0), np.nan)


def in_sample_r2(x: np.ndarray, y: np.ndarray) -> float | None:
    """R^2 of the least-squares fit of y on x (with its intercept column) over every run; None when y is constant."""
    residual = y - x @ np.linalg.lstsq(x, y, rcond=None)[0]
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    return float(1.0 - residual @ residual / ss_tot) if ss_tot > 0 else None


def cluster_weights(cluster: np.ndarray, reps: int, seed: int) -> np.ndarray:
    """(1 + reps, n): row 0 all ones (the runs as they are), then each run's count in one resample of the clusters
    drawn with replacement (numpy default_rng(seed))."""
    clusters = int(cluster.max()) + 1
    drawn = np.random.default_rng(seed).multinomial(clusters, np.full(clusters, 1.0 / clusters), size=reps)
    return np.vstack([np.ones((1, clusters)), drawn])[:, cluster].astype(np.float64)


def kept_resamples(fold: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(R,) bool: resamples in which every fold holding runs is fitted on at least MIN_TRAIN_GROUPS other groups."""
    folds = int(fold.max()) + 1
    present = (weights @ (fold[:, None] == np.arange(folds)[None, :])) > 0  # (R, F)
    return present.sum(axis=1) >= MIN_TRAIN_GROUPS + 1


def percentile_interval(values: np.ndarray) -> list[float] | None:
    finite = values[np.isfinite(values)]
    return [float(v) for v in np.percentile(finite, [2.5, 97.5])] if finite.size else None


def estimate(values: np.ndarray, kept: np.ndarray) -> dict[str, Any]:
    """The runs' value (row 0; None where undefined) and the 95% interval over the kept resamples (rows 1..)."""
    return {"value": float(values[0]) if np.isfinite(values[0]) else None,
            "ci95": percentile_interval(values[1:][kept[1:]])}


def preregistered_table(table: RunTable, reps: int = REPS, seed: int = SEED) -> dict[str, Any]:
    """Every model's in-sample R^2 and OOS R^2 in each scheme of the table, what each ADDED term adds to the
    baseline (paired gains), the primary model's coefficients over every run, and the decision (:func:`decide`)."""
    if table.runs < 3 or not table.folds:
        raise ValueError(f"the pre-registered models need runs in at least one scheme of {', '.join(SCHEMES)}; "
                         f"got {table.runs} runs and schemes {sorted(table.folds)}")
    terms = model_terms(table)
    weights = cluster_weights(table.cluster, reps, seed)
    models: dict[str, dict[str, Any]] = {name: {"terms": list(t), "in_sample_r2": in_sample_r2(design(table, t),
                                                                                                  table.target),
                                                "oos_r2": {}} for name, t in terms.items()}
    added: dict[str, dict[str, Any]] = {name: {} for name in ADDED if name in terms}
    resamples = {}
    for scheme, fold in table.folds.items():
        groups = int(fold.max()) + 1
        if groups < MIN_TRAIN_GROUPS + 1:
            raise ValueError(f"{scheme} needs at least {MIN_TRAIN_GROUPS + 1} groups; the runs have {groups}")
        kept = kept_resamples(fold, weights)
        resamples[scheme] = {"groups": groups, "kept": int(kept[1:].sum())}
        r2 = {name: weighted_r2(table.target, fold_predictions(design(table, t), table.target, fold, weights), weights)
              for name, t in terms.items()}
        for name in terms:
            models[name]["oos_r2"][scheme] = estimate(r2[name], kept)
        for name in added:
            added[name][scheme] = estimate(r2[name] - r2[BASELINE_MODEL], kept)
    raw = design(table, terms[PRIMARY], standardise=False) if PRIMARY in terms else None
    coefficients = None
    if raw is not None:
        coef = np.linalg.lstsq(raw, table.target, rcond=None)[0]
        names = ["intercept", *(n for t in terms[PRIMARY] for n in (table.setting_names if t == "settings" else [t]))]
        coefficients = dict(zip(names, (float(c) for c in coef)))
    return {
        "runs": table.runs, "setting_columns": list(table.setting_names), "schemes": list(table.folds),
        "bootstrap": {"reps": reps, "seed": seed, "resampled": "clusters", "clusters": int(table.cluster.max()) + 1,
                      "refitted": True, "resamples": resamples},
        "models": models, "added": added, "primary_coefficients": coefficients,
        "decision": decide(added.get(PRIMARY, {}), models[BASELINE_MODEL]["oos_r2"]),
    }


def detectable_gain(ci95: Sequence[float] | None) -> float | None:
    """The smallest gain in OOS R^2 a test whose 95% interval is ``ci95`` would detect (DETECTION_POWER), from the
    interval's spread alone; None without an interval."""
    if ci95 is None:
        return None
    return (Z_INTERVAL + Z_POWER) * (ci95[1] - ci95[0]) / (2 * Z_INTERVAL)


def decide(gains: Mapping[str, Mapping[str, Any]], baselines: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """RULE and the verdict on the primary term's gain per scheme ({scheme: {"value", "ci95"}}), beside the baseline's
    OOS R^2 per scheme (same form).

    Per scheme (``by_scheme``): whether it meets the rule (also ``schemes``: {scheme: met}), the gain its interval's
    spread would detect (``spread_detects``, :func:`detectable_gain`), the smallest gain this test would have
    detected (``detectable_gain``: that, and at least MIN_GAIN, which the rule asks for), the ``room`` above the
    baseline (1 - its OOS R^2) and its verdict: ``adds`` when met; ``cannot tell`` when the gain or the baseline is
    undefined or what the spread would detect exceeds the room (the interval is too wide to say anything); else ``not
    shown to add``. Over the schemes (the rule needs every one): ``adds`` when all add; ``cannot tell`` when any cannot
    tell (or there is no scheme); else ``not shown to add``, ``detectable_gain`` then the largest of the schemes not
    met."""
    by_scheme = {}
    for scheme, gain in gains.items():
        met = bool(gain["value"] is not None and gain["value"] >= MIN_GAIN and gain["ci95"] is not None
                   and gain["ci95"][0] > 0)
        baseline = baselines.get(scheme, {}).get("value")
        room = None if baseline is None else 1.0 - baseline
        spread = detectable_gain(gain["ci95"])
        if met:
            verdict = ADDS
        elif gain["value"] is None or spread is None or room is None or spread > room:
            verdict = CANNOT_TELL
        else:
            verdict = NOT_SHOWN
        by_scheme[scheme] = {"met": met, "verdict": verdict, "gain": dict(gain), "baseline_oos_r2": baseline,
                             "room": room, "spread_detects": spread,
                             "detectable_gain": None if spread is None else max(MIN_GAIN, spread)}
    verdicts = {entry["verdict"] for entry in by_scheme.values()}
    verdict = ADDS if verdicts == {ADDS} else CANNOT_TELL if not verdicts or CANNOT_TELL in verdicts else NOT_SHOWN
    detectable = (max(e["detectable_gain"] for e in by_scheme.values() if not e["met"]) if verdict == NOT_SHOWN
                  else None)
    return {"rule": RULE, "min_gain": MIN_GAIN, "term": PRIMARY,
            "schemes": {scheme: entry["met"] for scheme, entry in by_scheme.items()}, "adds": verdict == ADDS,
            "verdict": verdict, "detectable_gain": detectable, "power": DETECTION_POWER, "by_scheme": by_scheme}


def verdict_text(decision: Mapping[str, Any], baseline: str) -> str:
    """The verdict of :func:`decide` in words, what its intervals allow: "early ACR adds to <baseline>", "... is not
    shown to add to <baseline>: ..." with the smallest gain this test would have detected, or "cannot tell whether
    ...", naming the scheme whose interval is too wide and saying that the design could not have passed its rule.
    baseline: what early ACR is added to, in words ("the run's settings + early reward + base accuracy")."""
    verdict = decision["verdict"]
    if verdict == ADDS:
        return f"early ACR adds to {baseline}"
    if verdict == NOT_SHOWN:
        return (f"early ACR is not shown to add to {baseline}: this test would have detected a gain in out-of-sample "
                f"R^2 of {decision['detectable_gain']:.2f} or more ({decision['power']:.0%} of the time); a smaller one "
                "could have gone unseen")
    unclear = [(scheme, entry) for scheme, entry in decision["by_scheme"].items() if entry["verdict"] == CANNOT_TELL]
    if not unclear:
        return f"cannot tell whether early ACR adds to {baseline}: no out-of-sample scheme could be run"
    scheme, entry = unclear[0]
    words = SCHEME_WORDS.get(scheme, scheme)
    gain, room = entry["gain"], entry["room"]
    if gain["value"] is None or room is None or gain["ci95"] is None:
        return (f"cannot tell whether early ACR adds to {baseline}: {words}, the gain in out-of-sample R^2 is "
                "undefined (the final score does not vary among the runs held out)")
    others = "".join(f"; {SCHEME_WORDS.get(other, other)} it is not shown to add (a gain of "
                     f"{e['detectable_gain']:.2f} or more would have been detected)"
                     for other, e in decision["by_scheme"].items() if e["verdict"] == NOT_SHOWN)
    return (f"cannot tell whether early ACR adds to {baseline}: {words}, the 95% interval of the gain in out-of-sample "
            f"R^2 ({gain['ci95'][0]:+.3f} to {gain['ci95'][1]:+.3f}) is too wide to say anything (the smallest gain it "
            f"would detect, {entry['spread_detects']:.2f}, exceeds the {room:.2f} by which R^2 can still rise above "
            f"the baseline's {entry['baseline_oos_r2']:.2f}), so this design could not have passed its own rule"
            + others)
