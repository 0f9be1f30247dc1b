"""The advice a timeline gives, and the estimates it rests on: early-window ACR, the stagnation signal, what DAPO
would drop and AVSPO would do, the collapse regime."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from avspo_plugin.config import DEFAULT_EVIDENCE, AVSPOConfig
from avspo_plugin.core.early_warnings import StreakWarning
from avspo_plugin.core.threshold import ThresholdState, threshold_in_force
from avspo_plugin.evidence.regimes import (
    DECISION_TABLE,
    DOMINANCE,
    MIN_COLLAPSED,
    REGIME_TITLES,
    collapse_regime,
)
from avspo_plugin.names import METRIC_PREFIX
from avspo_plugin.threshold_modes import MEASURE_ONLY_MODE, PAPER_MODE, THRESHOLD_MODES

from .timeline import MEAN_SERIES, PROMPT_COUNTS, PromptTable, Timeline, finite_mean


def early_window(timeline: Timeline, steps: int) -> dict[str, Any]:
    """Mean ACR (and its split, and its bounds where it is an interval) over the run's first ``steps`` steps."""
    first = int(timeline.steps[0])
    inside = timeline.steps < first + steps
    result: dict[str, Any] = {
        "window": [first, first + steps - 1],
        "points": int(inside.sum()),
        "complete": bool(timeline.steps[-1] >= first + steps - 1),
    }
    for name in MEAN_SERIES:
        values = timeline.get(name)
        result[name] = finite_mean(None if values is None else values[inside])
    return result


def stagnation(timeline: Timeline, acr_above: float, more_than: int) -> dict[str, Any]:
    """The paper's stagnation signal: ACR above ``acr_above`` for more than ``more_than`` consecutive steps, decided
    by the core's StreakWarning (what a live run logs as ``avspo/stagnation``) fed one logged point at a time, a point
    standing for d steps (d the usual spacing of logged steps). Episodes: the stretches above the level that lasted
    long enough, with the step the signal fired in each. 0 disables either number."""
    steps, acr = timeline.steps.tolist(), timeline.series["acr"].tolist()
    spacing = int(np.median(np.diff(steps))) if len(steps) > 1 else 1
    enabled = acr_above > 0 and more_than > 0
    patience = max(1, more_than // spacing)
    episodes, current = [], None
    warning = StreakWarning("stagnation", acr_above, patience, above=True)
    for step, value in zip(steps, acr) if enabled else ():
        warning.observe(value, step)
        if warning.streak == 0:
            current = None
            continue
        if current is None:
            current = {"start": step, "fired_at": None}
            episodes.append(current)
        current.update(end=step, steps=step - current["start"] + spacing)
        if current["fired_at"] is None and warning.streak > patience:
            current["fired_at"] = step
    return {"acr_above": acr_above, "more_than_steps": more_than, "enabled": enabled,
            "fired": warning.fired_step is not None, "fired_at_step": warning.fired_step,
            "episodes": [e for e in episodes if e["fired_at"] is not None],
            "longest_run_steps": max((e["steps"] for e in episodes), default=0)}


def dapo_estimate(timeline: Timeline) -> dict[str, Any]:
    """What DAPO dynamic sampling would drop and cost: keeping B informative groups at collapse rate a takes about
    B / (1 - a) sampled groups, a / (1 - a) extra rollouts per step; a step where every group collapsed cannot fill."""
    acr = _finite(timeline.series["acr"])
    full = acr >= 1.0 - 1e-12
    return {"dropped_groups": float(acr.mean()), "extra_rollouts": finite_mean(acr[~full] / (1.0 - acr[~full])),
            "steps_all_collapsed": int(full.sum())}


# Below this share of triggered steps, a run that used AVSPO is told it mostly trained as GRPO.
INERT_TRIGGER_RATE = 0.5
# The modes that read no threshold, each told from the others by the constant it logs as avspo/threshold.
UNREAD_THRESHOLD_MODES = tuple(name for name, mode in THRESHOLD_MODES.items() if not mode.reads_threshold)
# Logged thresholds closer than this are one value (TensorBoard keeps float32).
THRESHOLD_TOL = 1e-6


def _logged_threshold_of(mode: str) -> float:
    """avspo/threshold as a mode that reads no threshold logs it (the core's stand-in constant)."""
    config = AVSPOConfig(threshold_mode=mode)
    return threshold_in_force(config, ThresholdState.initial(config))


def run_mode(timeline: Timeline) -> dict[str, Any] | None:
    """AVSPO's part in the run as its own avspo/* metrics show it: ``acting`` (True: it could add virtual rewards,
    False: measure-only, None: not known), ``threshold_mode`` (None where the logs do not tell or no estimator
    ran) and ``evidence``, the logged values that say so. None where the source records no such thing (per-sample
    dumps, logs of a run without the plugin)."""
    monitored = timeline.keys.get("acr", "").endswith(f"{METRIC_PREFIX}acr")
    if timeline.avspo == "replay" or (timeline.avspo is None and not monitored):
        return None
    if timeline.avspo is None:
        return {"acting": False, "threshold_mode": None, "monitor": True,
                "evidence": f"{timeline.keys['acr']} logged without {METRIC_PREFIX}triggered, as "
                            "algorithm.avspo_monitor logs beside the run's own estimator"}
    triggered = _finite(timeline.series["triggered"])
    opened = int((triggered > 0).sum())
    threshold = _finite(timeline.series["threshold"]) if "threshold" in timeline.series else np.empty(0)
    key = timeline.keys.get("threshold", f"{METRIC_PREFIX}threshold")
    if threshold.size == 0:
        # Only an open trigger tells acting from measure-only without the threshold.
        return {"acting": True if opened else None, "threshold_mode": None, "monitor": False,
                "evidence": f"{key} not logged; the trigger opened on {opened} of {triggered.size} steps"}
    low, high = float(threshold.min()), float(threshold.max())
    if high - low > THRESHOLD_TOL:
        mode, evidence = PAPER_MODE, f"{key} moved between {low:g} and {high:g} (Eq. 12)"
    else:
        mode = next((name for name in UNREAD_THRESHOLD_MODES if abs(_logged_threshold_of(name) - low) <= THRESHOLD_TOL),
                    "fixed")
        evidence = f"{key} {low:g} at every step" + (
            ": threshold_mode=fixed, or adaptive whose threshold never moved" if mode == "fixed" else
            f", the value threshold_mode={mode} logs" + (": no ACR exceeds it" if mode == MEASURE_ONLY_MODE else ""))
    return {"acting": THRESHOLD_MODES[mode].augments, "threshold_mode": mode, "monitor": False,
            "evidence": f"{evidence}; the trigger opened on {opened} of {triggered.size} steps"}


def mode_text(mode: dict[str, Any]) -> str:
    """The run's mode in words: measure-only or acting, and by which trigger."""
    if mode["monitor"]:
        return "measure-only, the ACR monitor"
    if mode["acting"] is None:
        return "acting or measure-only: not known, its trigger never opened"
    trigger = f"threshold_mode={mode['threshold_mode']}" if mode["threshold_mode"] else "trigger not known"
    return f"{'acting' if mode['acting'] else 'measure-only'}, {trigger}"


def avspo_estimate(timeline: Timeline, threshold_init: float) -> dict[str, Any]:
    """AVSPO on this run: the replay, or the run's own AVSPO metrics where it could act; else (a measure-only run,
    a run without the plugin) the steps above the initial threshold. ``mode``: :func:`run_mode`."""
    acr_mean = finite_mean(timeline.series["acr"])
    mode = run_mode(timeline)
    if timeline.avspo == "replay" or (timeline.avspo == "logged" and mode["acting"] is not False):
        return {"source": timeline.avspo, "mode": mode, "triggered_steps": finite_mean(timeline.get("triggered")),
                "augmented_groups": finite_mean(timeline.get("augmented_groups")),
                "effective_acr": finite_mean(timeline.get("effective_acr")), "acr": acr_mean}
    acr = _finite(timeline.series["acr"])
    return {"source": "threshold", "mode": mode, "threshold_init": threshold_init,
            "steps_above_threshold": float((acr > threshold_init).mean()), "acr": acr_mean}


def _finite(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]


def shares(timeline: Timeline) -> dict[str, float | None]:
    """Share of rollouts in all-fail, all-pass and all collapsed groups; where samples are absent, the group rates
    (equal when every group has the same size)."""
    result = {}
    for share, rate in (("all_fail", "acr_all_fail"), ("all_pass", "acr_all_pass"), ("collapsed", "acr")):
        values = timeline.get(f"rollouts_{share}")
        result[share] = finite_mean(timeline.get(rate) if values is None else values)
    return result


def regime(shares_of_rollouts: dict[str, float | None]) -> dict[str, Any] | None:
    """The run's collapse regime from its rollout shares (None when the split is unknown or collapse is rarer than
    MIN_COLLAPSED)."""
    fail, pass_, collapsed = (shares_of_rollouts[k] for k in ("all_fail", "all_pass", "collapsed"))
    if fail is None or pass_ is None or collapsed is None or collapsed < MIN_COLLAPSED or fail + pass_ == 0:
        return None
    return {"name": collapse_regime(fail, pass_), "all_fail": fail, "all_pass": pass_, "dominance": DOMINANCE,
            "decision_table": DECISION_TABLE}


def nearest_lab_case(all_fail: float, all_pass: float) -> dict[str, Any]:
    """The regime of the lab's tasks study (DEFAULT_EVIDENCE["cases"]) whose GRPO runs' mean early shares of all-fail
    and all-pass groups lie nearest (Euclidean) to ``all_fail`` and ``all_pass``."""
    return min(DEFAULT_EVIDENCE["cases"],
               key=lambda case: math.hypot(case["all_fail"] - all_fail, case["all_pass"] - all_pass))


def prompt_summary(table: PromptTable, top: int) -> dict[str, Any]:
    """Prompts that waste the most rollouts, and those that never formed a mixed group."""
    seen = table.groups > 0
    never_mixed = seen & (table.collapsed == table.groups)
    always_fail = never_mixed & (table.all_fail == table.groups)
    always_pass = never_mixed & (table.all_pass == table.groups)
    total = int(table.rollouts.sum())
    order = np.lexsort((-table.collapsed, -table.wasted))
    listed = []
    for index in order[:top]:
        if table.wasted[index] == 0:
            break
        counts = {name: int(getattr(table, name)[index]) for name in PROMPT_COUNTS}
        counts["wasted_rollouts"] = counts.pop("wasted")
        listed.append({"prompt": table.texts[index], **counts,
                       "mean_reward": float(table.reward_sum[index] / counts["rollouts"])})
    rate = np.divide(table.collapsed, table.groups, out=np.zeros(len(table.groups)), where=seen)
    edges = np.linspace(0.0, 1.0, 11)
    ever = seen & (table.collapsed > 0)
    fail_major = ever & (table.all_fail > 0) & (table.all_fail >= table.all_pass)
    pass_major = ever & (table.all_pass > table.all_fail)
    categories = {"never_collapsed": seen & ~ever, "mostly_all_fail": fail_major, "mostly_all_pass": pass_major,
                  "other_collapsed": ever & ~fail_major & ~pass_major}
    return {
        "prompts": int(seen.sum()),
        "never_mixed": int(never_mixed.sum()),
        "always_all_fail": int(always_fail.sum()),
        "always_all_pass": int(always_pass.sum()),
        "rollouts_always_all_fail": _share(table.rollouts[always_fail].sum(), total),
        "rollouts_always_all_pass": _share(table.rollouts[always_pass].sum(), total),
        "top": listed,
        "histogram": {"edges": edges.tolist()}
        | {name: np.histogram(rate[mask], edges)[0].tolist() for name, mask in categories.items()},
    }


def _share(part: float, total: float) -> float:
    return float(part) / total if total else 0.0


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def advice(run: dict[str, Any]) -> list[str]:
    """Plain-language advice from the run's numbers; every figure is an estimate and says so."""
    lines = []
    share = run["rollout_shares"]
    if share["collapsed"] is not None:
        split = ""
        if share["all_fail"] is not None and share["all_pass"] is not None:
            split = f": {percent(share['all_fail'])} in all-fail groups, {percent(share['all_pass'])} in all-pass groups"
        avspo = run["avspo"]
        if avspo["source"] == "logged" and avspo["effective_acr"] is not None:
            # An AVSPO run's waste is what its own advantages left at zero, not the collapse of its rewards.
            added = ("after AVSPO's virtual rewards," if avspo["triggered_steps"] else
                     "AVSPO's trigger never opened, so no virtual reward was added and")
            lines.append(
                f"{percent(share['collapsed'])} of rollouts fell in collapsed groups (ACR){split}; {added} "
                f"{percent(avspo['effective_acr'])} of groups were left with no advantage (effective ACR): "
                "that is what this run's advantages wasted."
            )
        else:
            lines.append(
                f"{percent(share['collapsed'])} of rollouts fell in collapsed groups and gave GRPO no advantage{split}."
            )
        regime = run.get("regime")
        if regime is not None:
            why = {"all_fail": " (the prompts are mostly too hard for the policy)",
                   "all_pass": " (the prompts are mostly too easy for the policy)", "mixed": ""}[regime["name"]]
            lines.append(
                f"Regime: {REGIME_TITLES[regime['name']]}{why}. The decision table ({DECISION_TABLE}) says, per "
                "regime, what the lab read of the paper's AVSPO and of always on all-fail or all-pass groups only "
                "against GRPO, across independent tasks where GRPO had room to learn."
            )
    early = run.get("early_warning") or {}
    if early.get("acr_all_fail") is not None and early.get("acr_all_pass") is not None and DEFAULT_EVIDENCE["cases"]:
        case = nearest_lab_case(early["acr_all_fail"], early["acr_all_pass"])
        lines.append(
            f"Which case this run is nearest: its first {early['points']} logged steps had {percent(early['acr_all_fail'])} "
            f"of groups all-fail and {percent(early['acr_all_pass'])} all-pass; the lab's study of "
            f"{DEFAULT_EVIDENCE['scope']} (docs/evidence/results.md; evidence about the mechanism on a tiny model, "
            f"not a forecast for this run) read, {case['clause']}."
        )
    prompts = run.get("prompts")
    if prompts and prompts["never_mixed"]:
        lines.append(
            f"{prompts['never_mixed']} of {prompts['prompts']} prompts never had a mixed group: "
            f"{prompts['always_all_fail']} always all-fail ({percent(prompts['rollouts_always_all_fail'])} of rollouts), "
            f"{prompts['always_all_pass']} always all-pass ({percent(prompts['rollouts_always_all_pass'])}). Removing the "
            "always-solved ones and deferring the never-solved ones frees that budget (an estimate: a prompt that "
            "collapsed so far may not collapse later). prompts.csv lists every prompt."
        )
    dapo = run["dapo"]
    if dapo["dropped_groups"] > 0:
        cost = "an unbounded number of" if dapo["extra_rollouts"] is None else f"about +{percent(dapo['extra_rollouts'])}"
        tail = (f"; {dapo['steps_all_collapsed']} step(s) had every group collapsed, which resampling cannot fill"
                if dapo["steps_all_collapsed"] else "")
        lines.append(
            f"DAPO dynamic sampling (verl algorithm.filter_groups, OpenRLHF --algo.dynamic_filtering_enable) would "
            f"drop {percent(dapo['dropped_groups'])} of groups and need {cost} rollouts per step to refill the batch "
            f"(estimate, if refills collapse at the same rate){tail}."
        )
    avspo = run["avspo"]
    if avspo["source"] == "replay":
        lines.append(
            f"AVSPO with the paper's trigger (threshold_mode=adaptive, the other keys at their defaults) replayed on "
            f"these rewards: triggered on {percent(avspo['triggered_steps'])} of "
            f"steps, gave advantages to {percent(avspo['augmented_groups'])} of groups; effective ACR "
            f"{percent(avspo['effective_acr'])} vs GRPO's {percent(avspo['acr'])}, at no extra rollouts (estimate: with "
            "AVSPO the policy, and so later rewards, would have differed). What the lab found: "
            + DEFAULT_EVIDENCE["acting_evidence"]
        )
    elif avspo["source"] == "logged":
        mode = avspo["mode"]
        lines.append(
            f"This run used AVSPO ({mode_text(mode)}): triggered on "
            f"{percent(avspo['triggered_steps'])} of steps; effective ACR {percent(avspo['effective_acr'])} vs ACR "
            f"{percent(avspo['acr'])}."
        )
        can_stay_shut = mode["threshold_mode"] is None or THRESHOLD_MODES[mode["threshold_mode"]].can_stay_shut
        if can_stay_shut and avspo["triggered_steps"] is not None and avspo["triggered_steps"] < INERT_TRIGGER_RATE:
            unknown = (f" (or it ran at threshold_mode={MEASURE_ONLY_MODE}, which never opens it: "
                       f"{METRIC_PREFIX}threshold, which tells, is not in the log)" if mode["acting"] is None else "")
            lines.append(
                f"AVSPO hardly acted: on the {percent(1 - avspo['triggered_steps'])} of steps its trigger stayed shut "
                f"the run trained as GRPO{unknown}. A batch of many prompts seldom has ACR above the threshold; "
                "threshold_mode=always augments every collapsed group at every step (docs/method/method.md). "
                + DEFAULT_EVIDENCE["acting_evidence"]
            )
    elif avspo["acr"] > 0:
        mode, measured = avspo["mode"], ""
        if mode is not None:
            how, advantages = ("the ACR monitor", "its own estimator's") if mode["monitor"] else (
                f"threshold_mode={mode['threshold_mode']}", "GRPO's")
            measured = f"This run only measured ({how}): it added no virtual reward and trained on {advantages} advantages. "
        lines.append(
            f"{measured}AVSPO with threshold_mode=always would add virtual rewards to the collapsed groups, "
            f"{percent(avspo['acr'])} of groups on average, at every step; with the paper's adaptive trigger "
            f"(threshold_mode=adaptive) only on "
            f"the {percent(avspo['steps_above_threshold'])} of logged steps whose ACR exceeded tau_0 = "
            f"{avspo['threshold_init']} (estimate: the adaptive threshold moves during training). "
            + DEFAULT_EVIDENCE["acting_evidence"]
        )
    stall = run["stagnation"]
    if stall["fired"]:
        lines.append(
            f"Stagnation signal fired at step {stall['fired_at_step']} (ACR > {stall['acr_above']} for more than "
            f"{stall['more_than_steps']} consecutive steps): in the paper such runs stopped improving."
        )
    return lines
