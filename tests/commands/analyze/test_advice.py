"""Early window, stagnation signal and the DAPO / AVSPO estimates on hand-made timelines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from avspo_plugin.commands.analyze import advice
from avspo_plugin.commands.analyze.timeline import Timeline
from avspo_plugin.config import DEFAULT_EVIDENCE
from avspo_plugin.evidence.regimes import collapse_regime


def timeline(acr, steps=None, **series):
    steps = np.arange(1, len(acr) + 1) if steps is None else np.asarray(steps)
    values = {"acr": np.asarray(acr, dtype=float)} | {k: np.asarray(v, dtype=float) for k, v in series.items()}
    return Timeline(steps=steps, series=values, basis="test", exact=True)


def test_early_window_is_the_mean_over_the_first_steps():
    acr = [0.8] * 10 + [0.2] * 30
    early = advice.early_window(timeline(acr), 10)
    assert early["window"] == [1, 10] and early["points"] == 10 and early["complete"]
    assert early["acr"] == pytest.approx(0.8)
    short = advice.early_window(timeline(acr), 100)
    assert not short["complete"] and short["points"] == 40
    assert short["acr"] == pytest.approx((8 + 6) / 40)


def test_early_window_counts_steps_not_points_for_sparse_logs():
    steps = np.arange(10, 401, 10)  # TRL logging every 10 steps
    early = advice.early_window(timeline([0.5] * 10 + [0.1] * 30, steps=steps), 100)
    assert early["window"] == [10, 109] and early["points"] == 10
    assert early["acr"] == pytest.approx(0.5)


def test_stagnation_fires_after_more_than_the_given_run_of_steps():
    acr = [0.1] * 10 + [0.5] * 60 + [0.1] * 5 + [0.4] * 30
    stall = advice.stagnation(timeline(acr), 0.35, 50)
    # High from step 11: 50 consecutive steps by step 60, more than 50 at step 61.
    assert stall["fired"] and stall["fired_at_step"] == 61
    assert stall["episodes"] == [{"start": 11, "end": 70, "steps": 60, "fired_at": 61}]
    assert stall["longest_run_steps"] == 60
    quiet = advice.stagnation(timeline([0.5] * 50 + [0.1] + [0.5] * 50), 0.35, 50)
    assert not quiet["fired"] and quiet["longest_run_steps"] == 50
    at_level = advice.stagnation(timeline([0.35] * 100), 0.35, 50)  # "above" is strict
    assert not at_level["fired"]


def test_stagnation_on_sparse_logs_and_disabled():
    steps = np.arange(10, 1001, 10)
    stall = advice.stagnation(timeline([0.6] * 100, steps=steps), 0.35, 50)
    assert stall["fired_at_step"] == 60  # points 10..60 cover 60 - 10 + 10 = 60 steps > 50
    for level, length in ((0.0, 50), (0.35, 0)):
        off = advice.stagnation(timeline([0.9] * 100), level, length)
        assert not off["enabled"] and not off["fired"]


def test_dapo_estimate():
    dapo = advice.dapo_estimate(timeline([0.5, 0.0, 0.75, 1.0]))
    assert dapo["dropped_groups"] == pytest.approx(2.25 / 4)
    assert dapo["extra_rollouts"] == pytest.approx((1.0 + 0.0 + 3.0) / 3)
    assert dapo["steps_all_collapsed"] == 1


def test_avspo_estimate_without_replay_counts_steps_above_the_initial_threshold():
    estimate = advice.avspo_estimate(timeline([0.2, 0.6, 0.7, 0.4]), 0.5)
    assert estimate == {"source": "threshold", "mode": None, "threshold_init": 0.5, "steps_above_threshold": 0.5,
                        "acr": pytest.approx(0.475)}
    run = {"rollout_shares": {"collapsed": None}, "dapo": {"dropped_groups": 0}, "avspo": estimate,
           "stagnation": {"fired": False}}
    assert advice.advice(run) == [
        "AVSPO with threshold_mode=always would add virtual rewards to the collapsed groups, 47.5% of "
        "groups on average, at every step; with the paper's adaptive trigger (threshold_mode=adaptive) only on the "
        "50.0% of logged steps whose "
        "ACR exceeded tau_0 = 0.5 (estimate: the adaptive threshold moves during training). "
        + DEFAULT_EVIDENCE["acting_evidence"]]


def test_a_logged_avspo_run_whose_trigger_seldom_opened_is_told_it_trained_as_grpo():
    logged = Timeline(steps=np.arange(1, 5), series={k: np.asarray(v, dtype=float) for k, v in {
        "acr": [0.3, 0.3, 0.6, 0.3], "triggered": [0, 0, 1, 0], "augmented_groups": [0, 0, 0.6, 0],
        "effective_acr": [0.3, 0.3, 0.0, 0.3], "threshold": [0.5] * 4}.items()}, basis="test", exact=True,
        avspo="logged")
    estimate = advice.avspo_estimate(logged, 0.5)
    assert estimate["triggered_steps"] == 0.25 and estimate["effective_acr"] == pytest.approx(0.225)
    run = {"rollout_shares": {"collapsed": None}, "dapo": {"dropped_groups": 0}, "avspo": estimate,
           "stagnation": {"fired": False}}
    lines = advice.advice(run)
    assert lines[0] == ("This run used AVSPO (acting, threshold_mode=fixed): triggered on 25.0% of steps; effective ACR "
                         "22.5% vs ACR 37.5%.")
    assert lines[1].startswith("AVSPO hardly acted: on the 75.0% of steps its trigger stayed shut the run trained as "
                                "GRPO. A batch")
    assert lines[1].endswith(DEFAULT_EVIDENCE["acting_evidence"])  # what the lab showed of acting, where always is named
    estimate["triggered_steps"] = 1.0
    assert len(advice.advice(run)) == 1


def test_a_logged_run_without_its_threshold_whose_trigger_never_opened_is_not_called_acting_or_measure_only():
    shut = Timeline(steps=np.arange(1, 4), series={k: np.asarray(v, dtype=float) for k, v in {
        "acr": [0.3, 0.4, 0.3], "triggered": [0, 0, 0], "effective_acr": [0.3, 0.4, 0.3]}.items()},
        basis="test", exact=True, avspo="logged")
    estimate = advice.avspo_estimate(shut, 0.5)
    assert estimate["mode"] == {"acting": None, "threshold_mode": None, "monitor": False,
                                "evidence": "avspo/threshold not logged; the trigger opened on 0 of 3 steps"}
    run = {"rollout_shares": {"collapsed": 0.3, "all_fail": None, "all_pass": None}, "dapo": {"dropped_groups": 0},
           "avspo": estimate, "stagnation": {"fired": False}}
    collapsed, used, hardly = advice.advice(run)
    assert "AVSPO's trigger never opened, so no virtual reward was added and 33.3% of groups" in collapsed
    assert used.startswith("This run used AVSPO (acting or measure-only: not known, its trigger never opened)")
    assert "(or it ran at threshold_mode=never, which never opens it: avspo/threshold, which tells, is not in the log)" in hardly


def test_a_run_is_told_the_lab_case_nearest_its_early_collapse_split(monkeypatch):
    monkeypatch.setitem(DEFAULT_EVIDENCE, "cases", [
        {"regime": "all_fail", "all_fail": 0.6, "all_pass": 0.1, "clause": "in its hard tasks: always -0.1"},
        {"regime": "all_pass", "all_fail": 0.1, "all_pass": 0.5, "clause": "in its easy tasks: always +0.1"}])
    run = {"rollout_shares": {"collapsed": None}, "dapo": {"dropped_groups": 0}, "stagnation": {"fired": False},
           "avspo": {"source": "threshold", "acr": 0.0},
           "early_warning": {"acr_all_fail": 0.15, "acr_all_pass": 0.4, "points": 10}}
    (line,) = advice.advice(run)
    assert line.startswith("Which case this run is nearest: its first 10 logged steps had 15.0% of groups all-fail "
                           "and 40.0% all-pass") and line.endswith("not a forecast for this run) read, in its easy tasks: always +0.1.")
    run["early_warning"].update(acr_all_fail=0.55, acr_all_pass=0.3)
    assert advice.advice(run)[0].endswith("read, in its hard tasks: always -0.1.")
    run["early_warning"]["acr_all_pass"] = None  # no split logged: no case named
    assert advice.advice(run) == []


def test_moving_average_of_the_comparison_plot_skips_gaps():
    from avspo_plugin.commands.analyze.plots import _moving_average

    values = np.array([1.0, 3.0, np.nan, 5.0, 7.0])
    np.testing.assert_allclose(_moving_average(values, 2), [1.0, 2.0, 3.0, 5.0, 6.0])
    np.testing.assert_allclose(_moving_average(values, 1), [1.0, 3.0, np.nan, 5.0, 7.0])


@pytest.mark.parametrize(("all_fail", "all_pass", "regime"), [
    (0.30, 0.15, "all_fail"), (0.30, 0.151, "mixed"), (0.15, 0.30, "all_pass"), (0.2, 0.2, "mixed"),
    (0.1, 0.0, "all_fail"), (0.0, 0.1, "all_pass"),
])
def test_collapse_regime_is_the_dominant_kind_by_a_factor_of_two(all_fail, all_pass, regime):
    assert collapse_regime(all_fail, all_pass) == regime


@pytest.mark.parametrize(("all_fail", "all_pass", "message"), [
    (0.0, 0.0, "no collapsed group"), (1.2, 0.1, "all_fail share 1.2 is not in"), (0.1, float("nan"), "all_pass share nan"),
])
def test_collapse_regime_refuses_shares_it_cannot_judge(all_fail, all_pass, message):
    with pytest.raises(ValueError, match=message):
        collapse_regime(all_fail, all_pass)


def test_a_run_with_too_little_collapse_or_no_split_has_no_regime():
    assert advice.regime({"all_fail": 0.02, "all_pass": 0.01, "collapsed": 0.03}) is None
    assert advice.regime({"all_fail": None, "all_pass": None, "collapsed": 0.5}) is None
    named = advice.regime({"all_fail": 0.05, "all_pass": 0.30, "collapsed": 0.35})
    assert named["name"] == "all_pass" and named["decision_table"] == "docs/evidence/results.md#decision-table"


def test_the_packaged_cases_are_the_tasks_studys_checked_regimes_and_each_is_its_own_nearest():
    report = json.loads((Path(__file__).parents[3] / DEFAULT_EVIDENCE["source"]).read_text())
    checked = [r for r in ("all_fail", "all_pass")
               if any(t["regime"] == r and t["regime_check"]["passed"] for t in report["tasks"].values())]
    assert [case["regime"] for case in DEFAULT_EVIDENCE["cases"]] == checked
    for case in DEFAULT_EVIDENCE["cases"]:
        assert advice.nearest_lab_case(case["all_fail"], case["all_pass"]) is case
        assert case["clause"] in DEFAULT_EVIDENCE["acting_evidence_detail"]
