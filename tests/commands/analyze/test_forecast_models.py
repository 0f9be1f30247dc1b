"""The pre-registered analysis of early ACR's forecast value (avspo_plugin/commands/analyze/forecast_models.py) on synthetic sweeps whose truth is known:
ACR truly adds (the rule says yes) or is noise (the rule says no); the refitted folds and bootstrap."""

import numpy as np
import pytest

from avspo_plugin.commands.analyze import forecast_models as sm

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
    adds = sm.preregistered_table(sm.table_from_points(synthetic_points(acr_effect=-80.0)), reps=REPS)
    assert adds["decision"]["adds"] and all(adds["decision"]["schemes"].values())
    gain = adds["added"]["acr"]
    assert all(g["value"] >= sm.MIN_GAIN and g["ci95"][0] > 0 for g in gain.values())
    assert adds["primary_coefficients"]["acr"] == pytest.approx(-80, abs=8)
    assert adds["bootstrap"]["refitted"] and adds["setting_columns"] == ["log2 lr", "group_size", "mix=hard"]

    noise = sm.preregistered_table(sm.table_from_points(synthetic_points(acr_effect=0.0)), reps=REPS)
    assert not noise["decision"]["adds"]
    # The baseline predicts (the settings, reward and base accuracy are the truth); ACR adds about nothing.
    assert noise["models"]["baseline"]["oos_r2"]["leave_one_setting_out"]["value"] > 0.5
    assert abs(noise["added"]["acr"]["leave_one_setting_out"]["value"]) < sm.MIN_GAIN


def test_decision_needs_every_scheme_the_minimum_gain_and_an_interval_above_zero():
    good = {"value": 0.08, "ci95": [0.01, 0.2]}
    assert sm.decide({"leave_one_base_out": good, "leave_one_setting_out": good})["adds"]
    assert not sm.decide({"leave_one_base_out": good, "leave_one_setting_out": {"value": 0.04, "ci95": [0.01, 0.1]}})["adds"]
    assert not sm.decide({"leave_one_base_out": {"value": 0.3, "ci95": [-0.01, 0.6]}})["adds"]
    assert not sm.decide({})["adds"]


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
    result = sm.stagnation_within_cells(points, reps=REPS)
    assert result["crude"]["value"] > 4 and abs(result["within_cells"]["value"]) < 0.5
    assert result["cells"] == 12 and result["cells_with_both"] == 12
    assert result["fired_by_lr"] == [{"lr": 1.5e-4, "fired": 12, "runs": 48}, {"lr": 6e-4, "fired": 36, "runs": 48}]
