"""The pre-registered analysis of early ACR's forecast value (lab/research/forecast_models.py) on synthetic sweeps whose truth is known:
ACR truly adds (the rule says yes) or is noise (the rule says no); the refitted folds and bootstrap."""

import numpy as np
import pytest

from lab.research import forecast_models as sm
from lab.research.forecast import stagnation_within_cells, table_from_points

REPS = 150


def synthetic_points(acr_effect: float, seed: int = 3, bases: int = 6) -> list[dict]:
    """A lab-shaped sweep: bases x lr (2) x G (2) x mix (2) x 2 seeds. gain = settings + reward + base accuracy effects
    + acr_effect x (early ACR - 0.3) + noise; early ACR varies run by run, independent of everything else."""
    rng = np.random.default_rng(seed)
    points = []
    for b in range(bases):
        base_accuracy, shift = rng.uniform(0.1, 0.7), rng.normal(0, 1.0)
        for lr in (1.5e-4, 6e-4):
            for group_size in (4, 8):
                for mix in ("default", "hard"):
                    for s in range(2):
                        signals = {name: float(rng.uniform(0, 1)) for name in sm.SIGNAL_TERMS}
                        signals.update(base_accuracy=base_accuracy, acr=float(rng.normal(0.3, 0.1)))
                        gain = (10 * np.log2(lr / 1.5e-4) - 2 * (group_size == 8) + 3 * (mix == "hard")
                                + 20 * signals["reward"] - 30 * base_accuracy + shift
                                + acr_effect * (signals["acr"] - 0.3) + rng.normal(0, 2.0))
                        points.append({"base": f"b{b}", "lr": lr, "group_size": group_size, "mix": mix, "seed": s,
                                       "signals": signals, "final_gain": float(gain)})
    return points


def test_the_rule_says_yes_where_acr_truly_adds_and_no_where_it_is_noise():
    adds = sm.preregistered_table(table_from_points(synthetic_points(acr_effect=-80.0)), reps=REPS)
    assert adds["decision"]["adds"] and all(adds["decision"]["schemes"].values())
    gain = adds["added"]["acr"]
    assert all(g["value"] >= sm.MIN_GAIN and g["ci95"][0] > 0 for g in gain.values())
    assert adds["primary_coefficients"]["acr"] == pytest.approx(-80, abs=8)
    assert adds["bootstrap"]["refitted"] and adds["setting_columns"] == ["log2 lr", "group_size", "mix=hard"]

    noise = sm.preregistered_table(table_from_points(synthetic_points(acr_effect=0.0)), reps=REPS)
    assert not noise["decision"]["adds"]
    # Narrow intervals: not shown to add, with the smallest gain this test would have detected (the rule's 0.05).
    assert noise["decision"]["verdict"] == sm.NOT_SHOWN and noise["decision"]["detectable_gain"] == sm.MIN_GAIN
    # The baseline predicts (the settings, reward and base accuracy are the truth); ACR adds about nothing.
    assert noise["models"]["baseline"]["oos_r2"]["leave_one_setting_out"]["value"] > 0.5
    assert abs(noise["added"]["acr"]["leave_one_setting_out"]["value"]) < sm.MIN_GAIN


BASELINE = {"leave_one_base_out": {"value": 0.5, "ci95": [0.1, 0.7]}, "leave_one_setting_out": {"value": 0.5,
                                                                                                "ci95": [0.1, 0.7]}}


def test_decision_needs_every_scheme_the_minimum_gain_and_an_interval_above_zero():
    good = {"value": 0.08, "ci95": [0.01, 0.2]}
    assert sm.decide({"leave_one_base_out": good, "leave_one_setting_out": good}, BASELINE)["adds"]
    assert not sm.decide({"leave_one_base_out": good, "leave_one_setting_out": {"value": 0.04, "ci95": [0.01, 0.1]}},
                         BASELINE)["adds"]
    assert not sm.decide({"leave_one_base_out": {"value": 0.3, "ci95": [-0.01, 0.6]}}, BASELINE)["adds"]
    assert not sm.decide({}, BASELINE)["adds"]


@pytest.mark.parametrize(
    "gains, verdict, words",
    [
        ({"leave_one_base_out": {"value": 0.08, "ci95": [0.01, 0.2]}}, sm.ADDS, "early ACR adds to X"),
        # Interval 0.2 wide: the spread detects (1.96 + 0.84) x 0.2 / 3.92 = 0.143 <= 0.5 of room.
        ({"leave_one_base_out": {"value": 0.02, "ci95": [-0.08, 0.12]}}, sm.NOT_SHOWN,
         "early ACR is not shown to add to X: this test would have detected a gain in out-of-sample R^2 of 0.14 or "
         "more (80% of the time); a smaller one could have gone unseen"),
        # Narrow, below the rule's minimum: detectable is the rule's 0.05.
        ({"leave_one_base_out": {"value": 0.0, "ci95": [-0.01, 0.01]}}, sm.NOT_SHOWN, "R^2 of 0.05 or more"),
        # The confirmation's leave-one-base-out interval: 2.565 wide detects 1.83, more than the 0.5 of room.
        ({"leave_one_base_out": {"value": 0.122, "ci95": [-1.196, 1.369]},
          "leave_one_setting_out": {"value": 0.02, "ci95": [-0.08, 0.12]}}, sm.CANNOT_TELL,
         "cannot tell whether early ACR adds to X: leaving one base out, the 95% interval of the gain in out-of-sample "
         "R^2 (-1.196 to +1.369) is too wide to say anything (the smallest gain it would detect, 1.83, exceeds the 0.50 "
         "by which R^2 can still rise above the baseline's 0.50), so this design could not have passed its own rule; "
         "leaving one setting out it is not shown to add (a gain of 0.14 or more would have been detected)"),
        ({"leave_one_base_out": {"value": None, "ci95": None}}, sm.CANNOT_TELL, "the gain in out-of-sample R^2 is "
         "undefined"),
        ({}, sm.CANNOT_TELL, "no out-of-sample scheme could be run"),
    ],
    ids=["adds", "not-shown", "not-shown-at-the-rules-minimum", "cannot-tell-too-wide", "cannot-tell-undefined",
         "cannot-tell-no-scheme"],
)
def test_three_verdicts_at_the_strength_the_intervals_carry(gains, verdict, words):
    decision = sm.decide(gains, BASELINE)
    assert decision["verdict"] == verdict and decision["adds"] == (verdict == sm.ADDS)
    assert words in sm.verdict_text(decision, "X")


def test_the_detectable_gain_is_the_one_a_test_of_that_spread_finds_four_times_in_five():
    """Simulated: a true gain g = detectable_gain, estimates drawn with the standard error the interval implies; the
    interval (estimate +- 1.96 se) lies above 0 in 80% of draws."""
    ci95 = [-0.3, 0.5]
    gain, se = sm.detectable_gain(ci95), (ci95[1] - ci95[0]) / (2 * sm.Z_INTERVAL)
    estimates = np.random.default_rng(0).normal(gain, se, 200_000)
    assert np.mean(estimates - sm.Z_INTERVAL * se > 0) == pytest.approx(sm.DETECTION_POWER, abs=0.005)


def test_each_fold_is_refitted_without_its_runs_in_every_resample():
    rng = np.random.default_rng(1)
    x = np.column_stack([np.ones(12), rng.normal(size=12)])
    y = 2 * x[:, 1] + rng.normal(size=12)
    fold = np.repeat(np.arange(4), 3)
    weights = np.vstack([np.ones(12), np.repeat([2.0, 0.0, 1.0, 1.0], 3)])
    predicted = sm.fold_predictions(x, y, fold, weights)
    for r in range(2):
        for f in range(4):
            train = (fold != f) & (weights[r] > 0)
            w = np.sqrt(weights[r][train])
            coef = np.linalg.lstsq(x[train] * w[:, None], y[train] * w, rcond=None)[0]
            assert predicted[r, fold == f] == pytest.approx(x[fold == f] @ coef)
    # A resample whose held-out folds have too few other groups is not kept.
    assert sm.kept_resamples(fold, np.vstack([np.ones(12), np.repeat([1.0, 1.0, 1.0, 0.0], 3)])).tolist() == [True, False]


def test_settings_are_encoded_where_they_vary_and_errors_name_the_setting():
    matrix, names = sm.encode_settings([{"actor/lr": 1e-3, "G": 8, "mix": "a"}, {"actor/lr": 4e-3, "G": 8, "mix": "b"}])
    assert names == ("log2 actor/lr", "mix=b") and matrix.tolist() == [[np.log2(1e-3), 0.0], [np.log2(4e-3), 1.0]]
    with pytest.raises(ValueError, match="setting lr enters as its log2 and must be > 0"):
        sm.encode_settings([{"lr": 0.0}, {"lr": 1e-3}])
    with pytest.raises(ValueError, match="run 1 names the settings"):
        sm.encode_settings([{"lr": 1e-3}, {"G": 4}])


def test_stagnation_compared_within_lr_x_base_cells_takes_the_learning_rate_out():
    """The rule fires mostly at the high lr, where runs gain 10 points more; within lr x base cells it changes
    nothing: the crude difference is large, the within-cell one about 0."""
    rng = np.random.default_rng(5)
    points = []
    for b in range(6):
        for lr, share in ((1.5e-4, 0.25), (6e-4, 0.75)):
            for s in range(8):
                fired = bool(s < 8 * share)
                points.append({"base": f"b{b}", "lr": lr, "final_gain": 20 + 10 * (lr > 2e-4) + rng.normal(0, 0.5),
                               "stagnation": {"fired": fired}})
    result = stagnation_within_cells(points, reps=REPS)
    assert result["crude"]["value"] > 4 and abs(result["within_cells"]["value"]) < 0.5
    assert result["cells"] == 12 and result["cells_with_both"] == 12
    assert result["fired_by_lr"] == [{"lr": 1.5e-4, "fired": 12, "runs": 48}, {"lr": 6e-4, "fired": 36, "runs": 48}]
