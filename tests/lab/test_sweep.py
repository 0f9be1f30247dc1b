"""The sweep's design and analysis without training: leave-one-base-out R^2 and its bootstrap over bases, the
within-configuration correlation, the stagnation rule, the grid, the fit file analyze reads, the plot. `python -m lab
sweep --quick` end to end is in test_command.py."""

import json

import numpy as np
import pytest

from avspo_plugin.config import AVSPOConfig
from lab.research.study import BASE_CANDIDATES
from lab.research.sweep import (
    QUICK_SWEEP,
    SWEEP,
    SWEEP_SETTINGS,
    fit_file,
    sweep_grid,
    sweep_plan,
    with_tier_mix,
)
from lab.research.sweep_analysis import (
    ADDED,
    BASELINE,
    SIGNALS,
    STAGNATION_ACR,
    STAGNATION_STEPS,
    early_signals,
    final_gain,
    lobo_predictions,
    prediction_table,
    stagnation,
    stagnation_comparison,
    weighted_r2,
    within_configuration_correlation,
)
from lab.research.sweep_report import signals_figure
from lab.settings import LabSettings


def test_leave_one_base_out_predicts_each_base_without_its_own_runs():
    rng = np.random.default_rng(0)
    base_index = np.repeat(np.arange(4), 10)
    features = rng.normal(size=(40, 2))
    target = 3 * features[:, 0] + rng.normal(size=40)
    predicted = lobo_predictions(features, target, base_index)
    held_out = base_index == 2
    design = np.column_stack([np.ones(30), features[~held_out]])
    coef = np.linalg.lstsq(design, target[~held_out], rcond=None)[0]
    assert predicted[held_out] == pytest.approx(np.column_stack([np.ones(10), features[held_out]]) @ coef)
    # Moving base 2's own targets leaves its predictions where they were and moves every other base's.
    moved = lobo_predictions(features, np.where(held_out, target + 100, target), base_index)
    assert moved[held_out] == pytest.approx(predicted[held_out])
    assert np.all(np.abs(moved[~held_out] - predicted[~held_out]) > 1)


def test_weighted_r2_counts_a_base_drawn_twice_twice():
    target, predicted = np.array([1.0, 2.0, 4.0, 7.0]), np.array([1.5, 2.0, 3.0, 7.5])
    base_index = np.array([0, 0, 1, 2])
    multiplicity = np.array([[1.0, 1.0, 1.0], [2.0, 0.0, 1.0]])
    got = weighted_r2(target, predicted, multiplicity[:, base_index])
    repeated_target, repeated_predicted = np.array([1, 2, 1, 2, 7.0]), np.array([1.5, 2, 1.5, 2, 7.5])
    plain = 1 - np.sum((target - predicted) ** 2) / np.sum((target - target.mean()) ** 2)
    repeated = 1 - np.sum((repeated_target - repeated_predicted) ** 2) / np.sum(
        (repeated_target - repeated_target.mean()) ** 2)
    assert got == pytest.approx([plain, repeated])


def synthetic_points(seed: int, bases: int = 6, runs: int = 16, noise: float = 0.8, base_effect: float = 0.5):
    """gain = 10 x (acr - 0.3) / 0.1 + base effect + noise, in points: early ACR predicts, every other signal is
    noise (independent of the gain); two seeds per configuration."""
    rng = np.random.default_rng(seed)
    points = []
    for b in range(bases):
        base_accuracy, shift = rng.uniform(0.1, 0.7), base_effect * rng.normal()
        for i in range(runs):
            acr = rng.normal(0.3, 0.1)
            signals = {name: rng.uniform(0, 1) for name in SIGNALS}
            signals.update(acr=acr, base_accuracy=base_accuracy)
            points.append({"base": f"base{b}", "configuration": f"base{b} config{i // 2}", "signals": signals,
                           "final_gain": 10 * (acr - 0.3) / 0.1 + 10 * shift + 10 * noise * rng.normal(),
                           "stagnation": {"fired": acr > 0.35}, "steps": 250})
    return points


def test_the_signal_that_predicts_gains_out_of_sample_and_noise_does_not():
    table = prediction_table(synthetic_points(1), reps=400, seed=3)
    acr, noise = table["alone"]["acr"]["oos_r2"], table["alone"]["entropy"]["oos_r2"]
    assert acr["value"] > 0.4 and acr["ci95"][0] > 0.2
    # Fitting noise costs: below 0 out of sample, though above 0 in sample.
    assert noise["value"] < 0 and noise["ci95"][1] < 0.1 and table["alone"]["entropy"]["in_sample_r2"] > 0
    # Added to the baseline (reward and base accuracy, noise here), ACR gains and a noise signal does not.
    assert table["baseline"]["signals"] == list(BASELINE) and set(table["added"]) == set(ADDED)
    assert table["added"]["acr"]["gain"]["ci95"][0] > 0.2
    assert table["added"]["near_collapse_failure"]["gain"]["ci95"][1] < 0.05


def test_bootstrap_interval_over_bases_covers_the_truth():
    """Over 60 data sets of 6 bases x 16 runs, the interval on early ACR's out-of-sample R^2 covers its expected
    value (the mean estimate over the data sets) in most of them: a percentile bootstrap over 6 bases is narrower
    than nominal (about 85% here), as docs/evidence/sweep.md says."""
    intervals = np.array([[table["value"], *table["ci95"]] for seed in range(60) for table in
                          [prediction_table(synthetic_points(100 + seed), reps=300, seed=seed)["alone"]["acr"]["oos_r2"]]])
    truth = intervals[:, 0].mean()
    covered = (intervals[:, 1] <= truth) & (truth <= intervals[:, 2])
    assert covered.mean() >= 0.75 and np.mean(intervals[:, 2] - intervals[:, 1]) < 0.5


def test_too_few_bases_are_named():
    points = [p for p in synthetic_points(2) if p["base"] in ("base0", "base1")]
    with pytest.raises(ValueError, match="at least 3 bases; the runs have 2: base0, base1"):
        prediction_table(points, reps=10)


def test_within_configuration_correlation_takes_the_configurations_out():
    # Between configurations ACR and gain rise together; across seeds of one configuration they move oppositely.
    configuration = np.repeat(np.arange(10), 2)
    means = np.repeat(np.linspace(0.1, 0.6, 10), 2)
    wiggle = np.tile([0.02, -0.02], 10) * np.repeat(np.linspace(1, 2, 10), 2)
    acr, gain = means + wiggle, 50 * means - 100 * wiggle
    assert np.corrcoef(acr, gain)[0, 1] > 0.8
    result = within_configuration_correlation(acr, gain, configuration)
    assert result["r"] == pytest.approx(-1.0) and (result["runs"], result["configurations"]) == (20, 10)
    noisy = gain + np.random.default_rng(0).normal(0, 1, 20)
    result = within_configuration_correlation(acr, noisy, configuration)
    deviations = [v - np.repeat(v.reshape(10, 2).mean(axis=1), 2) for v in (acr, noisy)]
    assert result["r"] == pytest.approx(np.corrcoef(*deviations)[0, 1])
    assert result["ci95"][0] < result["r"] < result["ci95"][1]
    assert within_configuration_correlation(acr[::2], gain[::2], np.arange(10))["r"] is None  # one seed each


@pytest.mark.parametrize(
    "acr, fired_at, longest",
    [
        ([0.4] * 50, None, 50),  # 50 steps above: not more than 50
        ([0.4] * 51, 51, 51),
        ([0.1] * 10 + [0.5] * 60 + [0.1], 61, 60),
        ([0.4] * 30 + [0.2] + [0.4] * 30, None, 30),  # broken streaks do not add up
        ([0.35] * 80, None, 0),  # at the level is not above it
    ],
)
def test_stagnation_rule_on_hand_made_series(acr, fired_at, longest):
    assert stagnation(acr) == {"fired": fired_at is not None, "fired_at_step": fired_at, "longest_streak": longest}


def test_stagnation_rule_is_the_products_default():
    assert (AVSPOConfig().stagnation_acr, AVSPOConfig().stagnation_steps) == (STAGNATION_ACR, STAGNATION_STEPS)


def test_stagnation_comparison_of_gains():
    def point(base, fired, gain):
        return {"base": base, "stagnation": {"fired": fired}, "final_gain": gain}

    points = [point(b, fired, gain + offset) for b, offset in (("a", 0), ("b", 4), ("c", -2))
              for fired, gain in ((True, 1.0), (False, 6.0), (False, 8.0))]
    result = stagnation_comparison(points, reps=200, seed=0)
    assert (result["fired"], result["runs"], result["share"]) == (3, 9, pytest.approx(1 / 3))
    assert result["bases_fired"] == ["a", "b", "c"]
    assert result["gain_fired"] == pytest.approx(1 + 2 / 3) and result["gain_not_fired"] == pytest.approx(7 + 2 / 3)
    # Every base shows the same -6: every resample does too.
    assert result["difference"] == pytest.approx(-6) and result["ci95"] == pytest.approx([-6, -6])
    never = stagnation_comparison([{**p, "stagnation": {"fired": False}} for p in points], reps=20, seed=0)
    assert never["gain_fired"] is None and never["difference"] is None and never["ci95"] is None


def test_early_signals_and_final_gain_of_a_run():
    steps = {name: list(np.arange(10.0)) for name in SIGNALS[:-1]}
    signals = early_signals(steps, base_accuracy=0.4)
    assert signals == {**{name: 0.5 for name in SIGNALS[:-1]}, "base_accuracy": 0.4}  # steps 0 and 1 of 10
    assert final_gain({"accuracy": [0.30, 0.45, 0.52]}) == pytest.approx(22.0)
    with pytest.raises(ValueError, match="no per-step near_collapse_success"):
        early_signals({k: v for k, v in steps.items() if k != "near_collapse_success"}, 0.4)


def fake_bases(names):
    return [{"name": name, "settings": SWEEP_SETTINGS} for name in names]


def test_the_grid_crosses_what_users_vary_at_equal_rollouts_and_temperature_one():
    assert set(SWEEP.bases) <= {c.name for c in BASE_CANDIDATES}
    grid = sweep_grid(fake_bases(SWEEP.bases), SWEEP)
    assert len(grid) == 48 and len({c.label for c in grid}) == 48
    for config in grid:
        s = config.settings
        assert (s.temperature, s.eval_temperature, s.prompts * s.group_size, s.rollout_budget) == (1.0, 1.0, 512, 128_000)
        assert s.rollout_budget // (s.prompts * s.group_size) == 250
        assert sum(s.train_counts()) == sum(SWEEP_SETTINGS.train_counts())
    assert {(c.settings.group_size, c.settings.prompts) for c in grid} == {(4, 128), (8, 64)}
    assert {c.settings.lr for c in grid} == {1.5e-4, 6e-4}
    hard = [c for c in grid if c.mix == "hard"]
    assert len(hard) == 24 and all(c.settings.train_counts() == (1600, 3200, 4800, 6400) for c in hard)
    assert len(sweep_grid(fake_bases(QUICK_SWEEP.bases), QUICK_SWEEP)) == 12


def test_tier_mix_without_a_fixed_pool_sets_the_drawing_weights():
    fresh = with_tier_mix(LabSettings(), (1, 2, 3, 4))
    assert fresh.mix == (1, 2, 3, 4) and not fresh.fixed_training_set


def test_plan_fits_under_three_hours_on_two_workers():
    plan = sweep_plan(SWEEP, SWEEP.seeds, SWEEP_SETTINGS.rollout_budget, jobs=2)
    assert (plan["configurations"], plan["runs"]) == (48, 96)
    assert plan["estimated_cpu_s"] == pytest.approx(96 * 140 + 6 * 30)
    assert plan["estimated_wall_s"] == pytest.approx(96 * 140 / 2 + 6 * 30) and plan["estimated_wall_s"] < 3 * 3600


def write_fit(tmp_path, points):
    fit = fit_file(points, prediction_table(points, reps=200, seed=0), SWEEP_SETTINGS)
    path = tmp_path / "fit.json"
    path.write_text(json.dumps(fit))
    return fit, path


def test_the_fit_file_holds_the_line_the_sweep_measured(tmp_path):
    points = synthetic_points(4, base_effect=0.1)
    fit, _ = write_fit(tmp_path, points)
    assert fit["forecast"]["supported"] and fit["oos"]["method"] == "leave-one-base-out"
    slope, intercept = np.polyfit([p["signals"]["acr"] for p in points], [p["final_gain"] for p in points], 1)
    assert (fit["intercept"], fit["slope"]) == (pytest.approx(intercept), pytest.approx(slope))
    assert fit["early_steps"] == 50 and "measured on the avspo CPU lab" in fit["label"]
    assert f"{fit['oos']['r2']:.2f}" in fit["label"] and "gain over the base policy" in fit["target"]


def test_a_line_that_does_not_forecast_across_bases_says_so(tmp_path):
    points, rng = synthetic_points(5), np.random.default_rng(7)
    for p in points:  # the gain now follows the base alone
        p["final_gain"] = 10 * int(p["base"][-1]) + rng.normal()
    fit, _ = write_fit(tmp_path, points)
    assert not fit["forecast"]["supported"] and "leave-one-base-out R^2" in fit["forecast"]["why"]


def test_plot_has_a_panel_per_signal_a_legend_of_the_bases_present_and_whole_gain_ticks():
    points = [p for p in synthetic_points(6) if p["base"] != "base2"]
    fig = signals_figure(points, prediction_table(points, reps=50, seed=0))
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == len(SIGNALS)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["base0", "base1", "base3", "base4", "base5"]
    assert all(float(t).is_integer() for ax in panels for t in ax.get_yticks())


def test_confirmation_sweep_is_on_new_bases_seeds_and_learning_rates():
    from lab.research.sweep import CONFIRM_SWEEP, confirmation_plan

    used = set(SWEEP.bases) | {c.name for c in BASE_CANDIDATES}
    assert len(CONFIRM_SWEEP.bases) >= 4 and not set(CONFIRM_SWEEP.bases) & used
    assert CONFIRM_SWEEP.first_seed >= 2000  # the study's seeds are 0, 1, ...; tuning's 1000-1099
    assert not set(CONFIRM_SWEEP.learning_rates) & set(SWEEP.learning_rates)
    assert min(SWEEP.learning_rates) < min(CONFIRM_SWEEP.learning_rates) < max(SWEEP.learning_rates)
    assert max(CONFIRM_SWEEP.learning_rates) > max(SWEEP.learning_rates)
    plan = confirmation_plan(jobs=2)
    assert plan["runs"] >= 48 and plan["estimated_wall_s"] <= 2.5 * 3600
    assert plan["command"] == "python -m lab sweep --confirm --out build/sweep-confirm --jobs 2"


def test_quick_confirmation_runs_the_preregistered_analysis(tmp_path, monkeypatch, capsys):
    """`python -m lab sweep --confirm --quick` end to end with warm-up and training stubbed (test_command.py runs the
    real training on the plain sweep): its bases, seeds and lr, the pre-registered table in fit.json and sweep.md."""
    import torch

    from lab.command import main
    from lab.research import sweep
    from lab.research.sweep_analysis import STEP_SIGNALS

    warmed = []

    def prepare_base(settings, cache):
        warmed.append(settings)
        tiers = {str(t): {"all_fail": 0.2, "all_pass": 0.1, "pass_rate": 0.4} for t in settings.tiers}
        return ({"w": torch.tensor([float(len(warmed))])},
                {"held_out": {"accuracy": 0.1 * len(warmed), "greedy": 0.9}, "sampled_by_tier": tiers})

    def run_all(specs, state, jobs, progress, initial_eval, cache):
        rng = np.random.default_rng(int(state["w"]))
        results = {}
        for spec in specs:
            steps = {name: rng.uniform(0, 1, 10).tolist() for name in STEP_SIGNALS}
            results[spec.key] = {"steps": steps, "evals": {"accuracy": [initial_eval["accuracy"],
                                                                        float(rng.uniform(0.3, 0.9))]}}
        return results

    monkeypatch.setattr(sweep, "prepare_base", prepare_base)
    monkeypatch.setattr(sweep, "run_all", run_all)
    monkeypatch.setattr(sweep, "plot_signals", lambda points, prediction, path: path)
    assert main(["sweep", "--confirm", "--quick", "--out", str(tmp_path), "--no-progress", "--jobs", "1"]) == 0
    assert "16 runs" in capsys.readouterr().err
    report = json.loads((tmp_path / "sweep.json").read_text())
    assert list(report["bases"]) == list(sweep.QUICK_CONFIRM.bases) and report["design"]["confirm"]
    assert [w.warmup_carry_drop for w in warmed[:3]] == [0.32, 0.22, 0.17]
    assert {p["seed"] for p in report["points"]} == {2000} and {p["lr"] for p in report["points"]} == {3e-4}
    prereg = json.loads((tmp_path / "fit.json").read_text())["preregistered"]
    confirmation = prereg["confirmation"]
    assert confirmation["runs"] == 16 and confirmation["status"].startswith("quick")
    assert set(confirmation["table"]["models"]["acr"]["oos_r2"]) == {"leave_one_base_out", "leave_one_setting_out"}
    assert prereg["exploratory"]["status"] == "exploratory" and prereg["verdict"] == "pending"  # a toy budget gives no verdict
    assert "### Confirmation" in (tmp_path / "sweep.md").read_text()


def test_a_fit_file_supports_a_forecast_only_where_the_preregistered_verdict_is_adds(tmp_path):
    """The confirmation's own fit file: its line of early ACR alone meets the line's rule (R^2 0.60, interval above
    0), yet the pre-registered verdict on the same runs is cannot tell, so the file supports no forecast and says
    why; edited so that the verdict is adds, it does. Drawing the verdicts again changes nothing."""
    from lab.research import forecast_models as sm
    from lab.research.sweep_preregistered import EVIDENCE, with_verdicts

    fit = json.loads((EVIDENCE / "sweep-confirm" / "fit.json").read_text())
    assert fit["oos"]["ci95"][0] > 0
    checked = with_verdicts(fit)
    assert checked == with_verdicts(checked) == fit
    assert not checked["forecast"]["supported"] and checked["preregistered"]["verdict"] == sm.CANNOT_TELL
    assert "the pre-registered confirmation: cannot tell whether early ACR adds" in checked["forecast"]["why"]

    table = fit["preregistered"]["confirmation"]["table"]
    table["added"]["acr"] = {scheme: {"value": 0.2, "ci95": [0.1, 0.3]} for scheme in table["added"]["acr"]}
    adds = with_verdicts(fit)
    assert adds["preregistered"]["verdict"] == sm.ADDS and adds["forecast"]["supported"]
