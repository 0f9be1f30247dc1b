"""The metrics every AVSPO call returns, and how several calls fold into one logged step."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .collapse import at_bound

# name -> how calls within one logged step combine. Rates pool over the step's groups (weighted by each call's
# ``groups``), reward_mean over its samples, num_virtual over its augmented groups, so a step split into several
# calls reports what one call over the whole step would; threshold is the latest value, counts add up.
METRIC_REDUCTIONS: dict[str, str] = {
    **dict.fromkeys(("acr", "acr_all_fail", "acr_all_pass", "effective_acr", "near_collapse", "near_collapse_success",
                     "near_collapse_failure", "triggered"), "per_group"),
    "threshold": "last",
    "num_virtual": "per_augmented_group",
    "augmented_groups": "per_group",
    **dict.fromkeys(("groups", "filtered_groups", "samples", "wasted_rollouts"), "sum"),
    "reward_mean": "per_sample",
    "adv_abs_max": "max",
}

# The metrics of every call: filtered_groups comes only from a host's filtering (verl's algorithm.filter_groups).
CALL_METRICS = tuple(name for name in METRIC_REDUCTIONS if name != "filtered_groups")
# What a monitor beside another estimator logs: the reward side alone. The rest describe AVSPO's own
# advantages (virtual samples, its threshold), which a monitor never forms; effective_acr equals acr there.
MONITOR_METRICS = ("acr", "acr_all_fail", "acr_all_pass", "near_collapse", "near_collapse_success",
                   "near_collapse_failure", "groups", "filtered_groups", "samples", "wasted_rollouts", "reward_mean")

# How each reduction reads in docs/using/metrics.md.
REDUCTION_HELP = {
    "per_group": "pooled over the step's groups",
    "per_sample": "pooled over the step's samples",
    "per_augmented_group": "pooled over the step's augmented groups",
    "last": "the latest call's (one value per step)",
    "sum": "summed",
    "max": "maximum",
}

# The count that weighs each call's value of a pooled metric.
_WEIGHTS = {
    "per_group": lambda call: call.get("groups", 1.0),
    "per_sample": lambda call: call.get("samples", 1.0),
    "per_augmented_group": lambda call: call.get("augmented_groups", 0.0) * call.get("groups", 0.0),
}
# The reductions that need no weights.
_FOLDS = {"last": lambda values: values[-1], "sum": sum, "max": max}

METRIC_HELP: dict[str, str] = {
    "acr": "Advantage Collapse Rate: fraction of groups (>= 2 samples) whose reward std < collapse_tol (Eq. 4).",
    "acr_all_fail": "Fraction of groups collapsed at reward_low (all samples failed).",
    "acr_all_pass": "Fraction of groups collapsed at reward_high (all samples passed).",
    "effective_acr": "Fraction of groups whose real advantages are all below collapse_tol after augmentation.",
    "near_collapse": "Fraction of groups (>= 3 samples) where exactly one sample differs from all the others "
    "(near_collapse_success + near_collapse_failure).",
    "near_collapse_success": "Fraction of groups (>= 3 samples) with one sample at the group's highest reward and "
    "all others at its lowest: a lone success, one sample from all-fail collapse.",
    "near_collapse_failure": "Fraction of groups (>= 3 samples) with one sample at the group's lowest reward and "
    "all others at its highest: a lone failure, one sample from all-pass collapse.",
    "triggered": "1 when virtual samples were enabled this step (Eq. 13's ACR_t > tau_t), else 0.",
    "threshold": "The threshold in force this step (tau_t when adaptive).",
    "num_virtual": "Mean K over the augmented groups (0 when none was augmented).",
    "augmented_groups": "Fraction of groups that received virtual samples.",
    "groups": "Number of groups with >= 2 valid samples (the denominator of every rate), as generated: "
    "groups that verl's group filtering (algorithm.filter_groups) evicted before the estimator are included.",
    "filtered_groups": "Number of collapsed groups verl's group filtering (algorithm.filter_groups) evicted "
    "before the estimator saw them (counted in groups, acr and its split; absent without filtering).",
    "samples": "Number of samples in the groups counted (padding groups excluded).",
    "wasted_rollouts": "Number of samples whose group's advantages are all below collapse_tol (effectively "
    "collapsed: no gradient signal), as generated: the samples of groups that verl's group filtering evicted "
    "are included (rollout.n each).",
    "reward_mean": "J_t: mean sequence reward of the valid samples.",
    "adv_abs_max": "Largest |advantage| of a valid sample.",
}


def aggregate_metrics(calls: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Fold the metrics of several calls (in call order) into one step's metrics, by METRIC_REDUCTIONS; the plain mean
    for a pooled metric whose weights are all 0 and for keys not there (host extras)."""
    calls = list(calls)
    merged: dict[str, float] = {}
    for name in dict.fromkeys(key for call in calls for key in call):
        having = [call for call in calls if name in call]
        values = [float(call[name]) for call in having]
        how = METRIC_REDUCTIONS.get(name, "mean")
        weights = [float(_WEIGHTS[how](call)) for call in having] if how in _WEIGHTS else []
        if len(values) == 1:  # exactly the call's value (w * v / w may round)
            merged[name] = values[0]
        elif how in _FOLDS:
            merged[name] = _FOLDS[how](values)
        elif sum(weights) > 0:
            merged[name] = sum(w * v for w, v in zip(weights, values)) / sum(weights)
        else:
            merged[name] = sum(values) / len(values)
    return merged


def filtered_group_metrics(
    value_counts: Mapping[float, int], group_size: int, reward_low: float, reward_high: float, threshold: float
) -> dict[str, float]:
    """The metrics of one call made of the collapsed groups a host's filtering evicted: value_counts {the value the
    group's samples shared: number of groups}; group_size: samples per group (verl's rollout.n)."""
    groups = float(sum(value_counts.values()))
    if groups <= 0:
        return {}
    fail = sum(count for value, count in value_counts.items() if at_bound(float(value), reward_low))
    passed = sum(count for value, count in value_counts.items() if at_bound(float(value), reward_high))
    return {
        "acr": 1.0, "acr_all_fail": fail / groups, "acr_all_pass": passed / groups, "effective_acr": 1.0,
        "near_collapse": 0.0, "near_collapse_success": 0.0, "near_collapse_failure": 0.0, "triggered": 0.0,
        "augmented_groups": 0.0, "threshold": threshold, "groups": groups, "filtered_groups": groups,
        "samples": 0.0, "wasted_rollouts": groups * group_size,
    }  # fmt: skip
