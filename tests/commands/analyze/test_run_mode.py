"""analyze names a run's mode from its own logs (measure-only or acting, and by which trigger) and words its advice so.

The logs are what the estimator logs: the core's metrics of each step (``compute_group_advantages`` under the mode
named, never the config's default), written as verl's file logger writes ``avspo/*``; the ACR monitor's are its subset
(MONITOR_METRICS) of a measure-only call.
"""

from __future__ import annotations

import numpy as np
import pytest
from commands.analyze.generated_runs import G, draw_run, write_verl_file_log

from avspo_plugin.config import AVSPOConfig
from avspo_plugin.core import ThresholdState, compute_group_advantages
from avspo_plugin.core.metrics import MONITOR_METRICS
from avspo_plugin.threshold_modes import MEASURE_ONLY_MODE

STEPS = 12
MONITOR = "monitor"  # the ACR monitor beside GRPO: the measure-only call's reward-side metrics


def logged_run(tmp_path, mode: str):
    """A verl file-logger log of the core's metrics under ``mode``; returns (path, the metrics per step)."""
    config = AVSPOConfig(threshold_mode=MEASURE_ONLY_MODE if mode == MONITOR else mode)
    state, rows = ThresholdState.initial(config), {}
    for step, groups in draw_run(STEPS, seed=3).items():
        scores = [reward for _, rewards in groups for reward in rewards]
        result = compute_group_advantages(scores, np.repeat(np.arange(len(groups)), G), config, state)
        state = result.state
        names = MONITOR_METRICS if mode == MONITOR else result.metrics
        rows[step] = {f"avspo/{name}": result.metrics[name] for name in names if name in result.metrics}
    return write_verl_file_log(tmp_path / f"{mode}.jsonl", rows), rows


@pytest.mark.parametrize("mode", [MEASURE_ONLY_MODE, MONITOR])
def test_a_measure_only_run_is_named_so_and_told_what_acting_would_do(tmp_path, analyze, mode):
    path, rows = logged_run(tmp_path, mode)
    code, document, out, _ = analyze(path)
    assert code == 0, out
    (run,) = document["runs"]
    named = run["avspo"]["mode"]
    assert named["acting"] is False and named["threshold_mode"] == (None if mode == MONITOR else MEASURE_ONLY_MODE)
    said = ("measure-only, the ACR monitor" if mode == MONITOR else f"measure-only, threshold_mode={MEASURE_ONLY_MODE}")
    assert f"  AVSPO in this run: {said}; " in out
    advice = " ".join(run["advice"])
    what = "the ACR monitor" if mode == MONITOR else f"threshold_mode={MEASURE_ONLY_MODE}"
    assert f"This run only measured ({what}): it added no virtual reward" in advice
    assert "AVSPO with threshold_mode=always would add virtual rewards" in advice
    # No claim of virtual rewards added, nor of a trigger that stayed shut.
    assert "after AVSPO's virtual rewards" not in advice and "hardly acted" not in advice
    assert "This run used AVSPO" not in advice
    if mode == MEASURE_ONLY_MODE:
        assert all(row["avspo/threshold"] == 1.0 and row["avspo/triggered"] == 0.0 for row in rows.values())
        assert named["evidence"] == ("avspo/threshold 1 at every step, the value threshold_mode=never logs: no ACR exceeds "
                                     f"it; the trigger opened on 0 of {STEPS} steps")


@pytest.mark.parametrize("mode", ["always", "adaptive", "fixed"])
def test_an_acting_run_is_named_with_its_trigger(tmp_path, analyze, mode):
    path, rows = logged_run(tmp_path, mode)
    code, document, out, _ = analyze(path)
    assert code == 0, out
    (run,) = document["runs"]
    assert run["avspo"]["mode"]["acting"] is True and run["avspo"]["mode"]["threshold_mode"] == mode
    assert f"  AVSPO in this run: acting, threshold_mode={mode}; avspo/threshold " in out
    advice = " ".join(run["advice"])
    triggered = np.mean([row["avspo/triggered"] for row in rows.values()])
    assert f"This run used AVSPO (acting, threshold_mode={mode}): triggered on" in advice
    assert f"triggered on {100 * triggered:.1f}% of steps" in advice
    assert ("after AVSPO's virtual rewards" in advice) == (triggered > 0)
    # Only a trigger that reads the threshold can stay shut; always opens on every step.
    assert ("AVSPO hardly acted" in advice) == (mode != "always" and triggered < 0.5)
    assert "would add virtual rewards" not in advice


def test_the_adaptive_run_of_these_rewards_moves_its_threshold_and_the_fixed_one_does_not(tmp_path):
    """What tells adaptive from fixed in the logs is there: otherwise the test above could not fail on it."""
    moved = {mode: {row["avspo/threshold"] for row in logged_run(tmp_path, mode)[1].values()}
             for mode in ("adaptive", "fixed")}
    assert len(moved["adaptive"]) > 1 and moved["fixed"] == {AVSPOConfig().threshold_init}
