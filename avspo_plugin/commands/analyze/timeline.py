"""Per-step ACR timelines and per-prompt collapse counts. From per-sample rewards every number is the core's (the
monitor's metrics, each group's collapse and kind, and AVSPO replayed on the recorded rewards); from logged scalars,
the keys the hosts log, with what each proxy does not measure in the timeline's caveats."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch

from avspo_plugin.config import AVSPOConfig
from avspo_plugin.core import ThresholdState, compute_group_advantages
from avspo_plugin.core.collapse import collapse_kinds, collapsed_groups, multi_sample_groups
from avspo_plugin.core.groups import factorize_labels, group_stats
from avspo_plugin.names import METRIC_PREFIX

from .run_logs import AnalyzeError, SampleLog, ScalarLog

# Series of a timeline. acr_low/acr_high bound ACR where a log only brackets it.
ACR_SERIES = ("acr", "acr_all_fail", "acr_all_pass", "near_collapse", "reward_mean", "groups")
SHARE_SERIES = ("rollouts_all_fail", "rollouts_all_pass", "rollouts_collapsed")
AVSPO_SERIES = ("triggered", "effective_acr", "augmented_groups", "threshold")
# The series the report averages over the run and over its early window.
MEAN_SERIES = ("acr", "acr_low", "acr_high", "acr_all_fail", "acr_all_pass", "near_collapse")


def finite_mean(values: np.ndarray | None) -> float | None:
    """The mean of the finite values; None where there are none (or no series)."""
    finite = np.empty(0) if values is None else values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None


@dataclass
class Timeline:
    """Per-step series (float64, NaN where a step has no value), where they came from, and what to keep in mind.
    avspo: "replay" (the AVSPO series replay the recorded rewards), "logged" (the run logged them) or None."""

    steps: np.ndarray
    series: dict[str, np.ndarray]
    basis: str
    exact: bool
    caveats: list[str] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)
    avspo: str | None = None

    def get(self, name: str) -> np.ndarray | None:
        """The series, None where it is absent or has no finite value."""
        values = self.series.get(name)
        return values if values is not None and np.isfinite(values).any() else None


# The counts of a PromptTable, in prompts.csv's order.
PROMPT_COUNTS = ("groups", "collapsed", "all_fail", "all_pass", "rollouts", "wasted")


@dataclass
class PromptTable:
    """Per prompt: groups of >= 2 samples it formed, how many collapsed and of which kind, rollouts spent."""

    texts: list[str]
    groups: np.ndarray
    collapsed: np.ndarray
    all_fail: np.ndarray
    all_pass: np.ndarray
    rollouts: np.ndarray
    wasted: np.ndarray
    reward_sum: np.ndarray


def sample_timeline(log: SampleLog, monitor: AVSPOConfig, replay: AVSPOConfig, source: str) -> tuple[
    Timeline, PromptTable, Counter
]:
    """Per-step metrics, the AVSPO replay, per-prompt counts and the group-size histogram of a dump."""
    num_prompts = len(log.prompt_texts)
    table = PromptTable(texts=log.prompt_texts, **{name: np.zeros(num_prompts, dtype=np.int64) for name in PROMPT_COUNTS},
                        reward_sum=np.zeros(num_prompts, dtype=np.float64))
    names = ACR_SERIES + SHARE_SERIES + AVSPO_SERIES + ("samples",)
    series = {name: np.full(len(log.steps), np.nan) for name in names}
    sizes: Counter = Counter()
    monitor_state, replay_state = ThresholdState.initial(monitor), ThresholdState.initial(replay)
    for row, step in enumerate(log.steps):
        scores = torch.from_numpy(step.scores)
        try:
            observed = compute_group_advantages(scores, step.groups, monitor, monitor_state)
            replayed = compute_group_advantages(scores, step.groups, replay, replay_state)
        except ValueError as err:
            raise AnalyzeError(f"{source}: step {step.step}: {err}") from None
        monitor_state, replay_state = observed.state, replayed.state
        for name in ACR_SERIES:
            series[name][row] = observed.metrics[name]
        for name in AVSPO_SERIES:
            series[name][row] = replayed.metrics[name]
        series["samples"][row] = len(step.scores)

        group_ids, kinds = _group_kinds(scores, step.groups, monitor)
        counts = kinds["rollouts"]
        sizes.update(counts.tolist())
        group_prompt = _group_prompts(group_ids, len(counts), step, source)
        for name in ("all_fail", "all_pass", "collapsed"):
            series[f"rollouts_{name}"][row] = counts[kinds[name]].sum() / counts.sum()
        kinds["wasted"] = counts * kinds["collapsed"]
        for name, values in kinds.items():
            np.add.at(getattr(table, name), group_prompt, values)
        np.add.at(table.reward_sum, step.prompts, step.scores)
    steps = np.asarray([step.step for step in log.steps], dtype=np.int64)
    basis = f"per-sample rewards (groups by {log.grouping}), ACR computed by avspo's core"
    return Timeline(steps, series, basis, exact=True, avspo="replay"), table, sizes


def _group_kinds(scores: torch.Tensor, labels: np.ndarray, monitor: AVSPOConfig) -> tuple[np.ndarray, dict]:
    """The group id of each sample (B,), and per group (N,) by the core's own statistics: its size (``rollouts``),
    whether it has >= 2 samples (``groups``), collapsed, and of which kind."""
    group_ids, num_groups = factorize_labels(labels, scores.device)
    ddof = 1 if monitor.std == "unbiased" else 0
    stats = group_stats(scores, group_ids, num_groups, torch.ones_like(scores, dtype=torch.bool), ddof)
    collapsed = collapsed_groups(stats, monitor.collapse_tol)
    all_fail, all_pass = collapse_kinds(collapsed, stats, monitor.reward_low, monitor.reward_high)
    kinds = {"groups": multi_sample_groups(stats), "collapsed": collapsed, "all_fail": all_fail, "all_pass": all_pass}
    counts = {name: flag.numpy() for name, flag in kinds.items()}
    return group_ids.numpy(), {"rollouts": stats.count.numpy().astype(np.int64), **counts}


def _group_prompts(group_ids: np.ndarray, num_groups: int, step, source: str) -> np.ndarray:
    """The prompt of each group; a group whose samples carry different prompts is an error."""
    low = np.full(num_groups, np.iinfo(np.int64).max)
    high = np.full(num_groups, -1)
    np.minimum.at(low, group_ids, step.prompts)
    np.maximum.at(high, group_ids, step.prompts)
    mixed = np.flatnonzero(low != high)
    if mixed.size:
        label = step.groups[np.flatnonzero(group_ids == mixed[0])[0]]
        raise AnalyzeError(f"{source}: step {step.step}: group {label!r} holds samples of different prompts")
    return low


def _candidates(keys: set[str], names: tuple[str, ...]) -> list[str]:
    """Keys that are one of ``names`` or end in ``/name``, training keys only (no eval/val/test prefix); exact names
    first, then shorter keys (``avspo/acr`` before ``train/avspo/acr``)."""
    found = []
    for key in keys:
        for name in names:
            if key == name or key.endswith("/" + name):
                prefix = key[: -len(name)]
                if not any(part.startswith(("eval", "val", "test")) for part in prefix.split("/") if part):
                    found.append(key)
                break
    return sorted(found, key=lambda key: (key not in names, len(key), key))


# Series that are fractions (of groups, of rollouts): a logged value outside [0, 1] is not one of them.
FRACTION_SERIES = ("acr", "acr_all_fail", "acr_all_pass", "near_collapse", "effective_acr")
# Bad values listed by name in a warning; the rest are counted.
WARNING_EXAMPLES = 3


def logged_values(log: ScalarLog, key: str, source: str, bounds: tuple[float, float]) -> dict[int, float]:
    """{step: value} of ``key``; a NaN, infinite or out-of-``bounds`` value is left out with a warning in
    ``log.warnings`` naming where it was read, its step and its value, so that no mean takes it in."""
    values = {step: row[key] for step, row in log.values.items() if key in row}
    if key in log.nonnumeric:
        raise AnalyzeError(f"{log.nonnumeric[key]}: {key!r} has a value that is not a number ({source})")
    low, high = bounds
    bad = sorted(step for step, value in values.items() if not low <= value <= high)  # NaN fails both tests
    if bad:
        shown = "; ".join(f"{log.where.get(step, source)}: step {step}: {values[step]!r}" for step in bad[:WARNING_EXAMPLES])
        more = f"; and {len(bad) - WARNING_EXAMPLES} more" if len(bad) > WARNING_EXAMPLES else ""
        what = "NaN or infinite" if (low, high) == (-math.inf, math.inf) else f"NaN or outside [{low:g}, {high:g}]"
        log.warnings.append(f"{key}: {len(bad)} logged value(s) {what} left out of every mean and plot: {shown}{more}")
    for step in bad:
        del values[step]
    return values


REWARD_MEAN_KEYS = (f"{METRIC_PREFIX}reward_mean", "critic/score/mean", "reward", "rollout/reward_mean")


def scalar_timeline(log: ScalarLog, group_size: int | None, monitor: AVSPOConfig, source: str) -> Timeline:
    """Read ACR (or the closest proxy the log holds) per step from a tracker log."""
    keys = log.keys()
    names = ACR_SERIES + AVSPO_SERIES + ("samples",)
    found = {name: match[0] for name in names if (match := _candidates(keys, (f"{METRIC_PREFIX}{name}",)))}
    if "acr" in found:
        return _from_keys(log, found, source, basis="avspo/* metrics logged by the plugin (per group, exact)",
                          exact=True, avspo="logged" if "triggered" in found else None)
    zero_std = _candidates(keys, ("frac_reward_zero_std",))
    pass_rate = _candidates(keys, ("dynamic_filtering_pass_rate",))
    std = _candidates(keys, ("group_reward_std",))
    reward = _candidates(keys, REWARD_MEAN_KEYS)
    extra = {"reward_mean": reward[0]} if reward else {}
    if zero_std:
        timeline = _from_keys(log, {"acr": zero_std[0], **extra}, source,
                              basis=f"TRL {zero_std[0]} (fraction of samples in zero-std groups)", exact=False)
        timeline.caveats += [
            "frac_reward_zero_std is a fraction of samples, not of groups: it equals ACR because TRL's groups all "
            "have num_generations samples.",
            "It is only ACR with scale_rewards='group' or 'none' and multi_objective_aggregation='sum_then_normalize'; "
            "otherwise TRL tests the batch std and the value is 0 or 1 for the whole batch.",
            "A logged value averages every generation batch since the previous log (logging_steps, gradient "
            "accumulation), and zero std means torch.isclose(std, 0) (atol 1e-8) rather than std < collapse_tol.",
            "No all-fail / all-pass split: TRL does not log it.",
        ]
        return timeline
    if pass_rate or std:
        key = (pass_rate or std)[0]
        if group_size is None:
            raise AnalyzeError(
                f"{source}: OpenRLHF logs ({key}) can only be read as ACR with the group size: "
                "pass --group-size (the run's rollout.n_samples_per_prompt)"
            )
        if not pass_rate and group_size < 2:
            raise AnalyzeError(f"{source}: --group-size {group_size}: a group needs at least 2 samples")
        how = " (dynamic filtering)" if pass_rate else ", binary rewards (an interval)"
        timeline = _from_keys(log, {"acr": key, **extra}, source, basis=f"OpenRLHF {key} with G = {group_size}{how}",
                              exact=False, acr_bounds=(0.0, math.inf))
        if pass_rate:
            _from_pass_rate(timeline, key, group_size, source)
        else:
            _from_group_std(timeline, key, group_size, monitor, source)
        timeline.caveats.append("No all-fail / all-pass split: OpenRLHF does not log it.")
        return timeline
    shown = ", ".join(sorted(keys)[:15]) + (" ..." if len(keys) > 15 else "")
    raise AnalyzeError(
        f"{source}: no ACR in this log: looked for avspo/acr (runs made with the plugin), TRL "
        f"frac_reward_zero_std, OpenRLHF dynamic_filtering_pass_rate or group_reward_std. Keys found: {shown}. "
        "Per-sample rewards (verl trainer.rollout_data_dir dumps) give ACR for any verl run."
    )


def _from_keys(log: ScalarLog, found: dict[str, str], source: str, basis: str, exact: bool,
               avspo: str | None = None, acr_bounds: tuple[float, float] = (0.0, 1.0)) -> Timeline:
    """The timeline of the logged keys ``found`` (series name -> key) at the steps with a valid ``acr``. A value that
    is not finite, or outside [0, 1] for a fraction (``acr_bounds`` for ``acr``), is left out with a warning."""
    values = {
        name: logged_values(log, key, source, acr_bounds if name == "acr" else
                             (0.0, 1.0) if name in FRACTION_SERIES else (-math.inf, math.inf))
        for name, key in found.items()
    }
    steps = sorted(values["acr"])
    if not steps:
        raise AnalyzeError(f"{source}: {found['acr']!r} has no valid numeric value at any step")
    series = {name: np.asarray([by_step.get(step, np.nan) for step in steps], dtype=np.float64)
              for name, by_step in values.items()}
    return Timeline(np.asarray(steps, dtype=np.int64), series, basis, exact, keys=dict(found), avspo=avspo)


def _from_pass_rate(timeline: Timeline, key: str, group_size: int, source: str) -> None:
    """ACR from OpenRLHF 0.11's pass_rate = 100 * accepted samples / consumed prompts: accepted prompts = rate / (100 G)."""
    accepted = timeline.series["acr"] / (100.0 * group_size)
    if np.nanmax(accepted) > 1 + 1e-9:
        at = int(timeline.steps[np.nanargmax(accepted)])
        raise AnalyzeError(
            f"{source}: step {at}: {key} = {np.nanmax(timeline.series['acr']):g} means more than every prompt passed "
            f"with --group-size {group_size}: is the group size right?"
        )
    timeline.series["acr"] = 1.0 - accepted
    timeline.caveats += [
        "OpenRLHF logs dynamic_filtering_pass_rate as 100 * accepted samples / consumed prompts; "
        f"1 - rate / (100 * {group_size}) is the share of sampled prompts the filter dropped.",
        "That share is ACR only with binary rewards and dynamic_filtering_range (0, 1), and it covers the prompts "
        "sampled for the step including refills; the groups trained on are all informative.",
    ]


def _from_group_std(timeline: Timeline, key: str, group_size: int, monitor: AVSPOConfig, source: str) -> None:
    """Bracket ACR from the mean group std of binary rewards.

    A non-collapsed group of G binary rewards (k successes, 0 < k < G) has unbiased std
    (high - low) * sqrt(k (G - k) / (G (G - 1))), between s_min (k = 1) and s_max (k = G/2),
    so with mean group std m: 1 - m / s_min <= ACR <= 1 - m / s_max.
    """
    spread = (monitor.reward_high - monitor.reward_low) / np.sqrt(group_size * (group_size - 1))
    s_min = spread * np.sqrt(group_size - 1)
    s_max = spread * np.sqrt((group_size // 2) * (group_size - group_size // 2))
    mean_std = timeline.series["acr"]
    if np.nanmax(mean_std) > s_max * (1 + 1e-6):
        at = int(timeline.steps[np.nanargmax(mean_std)])
        raise AnalyzeError(
            f"{source}: step {at}: {key} = {np.nanmax(mean_std):g} exceeds the largest std of {group_size} rewards in "
            f"[{monitor.reward_low}, {monitor.reward_high}] ({s_max:.4g}): are the rewards binary and --group-size right?"
        )
    low = np.clip(1.0 - mean_std / s_min, 0.0, 1.0)
    high = np.clip(1.0 - mean_std / s_max, 0.0, 1.0)
    timeline.series.update(acr=(low + high) / 2, acr_low=low, acr_high=high)
    timeline.caveats += [
        f"OpenRLHF's group_reward_std is the mean group std, not a zero-std fraction: with binary rewards and G = "
        f"{group_size} it only brackets ACR between 1 - m/{s_min:.4g} and 1 - m/{s_max:.4g}; the midpoint is shown.",
        "With dynamic filtering on, the std is taken after filtering and says little about collapse.",
    ]
