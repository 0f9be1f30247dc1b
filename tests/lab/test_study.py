"""The study's machinery: rollout-budget runs, the fixed training set, the base rule and the
statistics (checked against scipy's own tests and the noncentral t distribution)."""

import dataclasses
import json

import numpy as np
import pytest
import torch
from scipy import stats

from lab.command import main
from lab.methods import PRESETS, STUDY_EXTRA
from lab.research.statistics import (
    POWER,
    holm,
    minimum_detectable_effect,
    paired_test,
    pairs_for_mde,
)
from lab.research.study import analyse, auc, regime_of, rollouts_to_reach, run_endpoints
from lab.settings import LabSettings
from lab.task import EpochSampler, held_out_split, training_set
from lab.train import train, warm_up

TINY = LabSettings(
    warmup_steps=40, warmup_batch=32, held_out_per_tier=4, prompts=4, group_size=4, mini_batches=2,
    eval_samples=2, train_per_tier=4, rollout_budget=5 * 16, eval_fractions=(0.35, 0.7, 1.0),
)
DEFAULT = LabSettings()


@pytest.fixture(scope="module")
def base_state():
    torch.set_num_threads(1)
    return warm_up(TINY)


def test_budget_runs_end_exactly_at_the_budget_and_evaluate_at_its_fractions(base_state):
    grpo = train(TINY, PRESETS["grpo"], 0, base_state)
    assert grpo["steps"]["rollouts_total"][-1] == TINY.rollout_budget
    assert len(grpo["steps"]["acr"]) == 5
    assert grpo["evals"]["budget_fraction"] == [0.0, 0.35, 0.7, 1.0]
    assert grpo["evals"]["rollouts"] == [0, 32, 64, 80]  # the first step whose rollouts reach 28, 56, 80
    dapo = train(dataclasses.replace(TINY, dapo_max_gen_batches=4), PRESETS["dapo"], 0, base_state)
    assert dapo["steps"]["rollouts_total"][-1] == TINY.rollout_budget  # its last step samples only what is left
    assert dapo["evals"]["budget_fraction"] == [0.0, 0.35, 0.7, 1.0]  # one evaluation may stand for two fractions
    assert dapo["evals"]["rollouts"][-1] == TINY.rollout_budget
    ends = run_endpoints(dapo, TINY.rollout_budget)
    assert ends == {"accuracy": dapo["evals"]["accuracy"][-1], "auc": auc(dapo, TINY.rollout_budget),
                    "greedy": dapo["evals"]["greedy"][-1]}
    assert sum(grpo["steps"]["held_out_drawn"]) == 0
    x, y = np.asarray(dapo["evals"]["rollouts"], float), np.asarray(dapo["evals"]["accuracy"])
    assert auc(dapo, TINY.rollout_budget) == pytest.approx(float(np.sum((y[1:] + y[:-1]) / 2 * np.diff(x))) / 80)


def test_budget_must_be_whole_generation_batches():
    with pytest.raises(ValueError, match="rollout_budget=20 must be a non-negative multiple of prompts x group_size = 16"):
        dataclasses.replace(TINY, rollout_budget=20)
    with pytest.raises(ValueError, match="eval_fractions"):
        dataclasses.replace(TINY, eval_fractions=(0.5, 0.9))


def test_training_set_is_disjoint_from_held_out_and_epochs_visit_every_problem_once():
    held = held_out_split((1, 2), (50, 10), seed=0)
    train_set = training_set((1, 2), (50, 20), 0, held)  # every tier-1 problem that is not held out
    assert not np.isin(train_set.keys(), held.keys()).any()
    assert len(set(train_set.keys().tolist())) == 70
    with pytest.raises(ValueError, match="training set asks 51 problems of tier 1, which has 50 available"):
        training_set((1, 2), (51, 1), 0, held)
    epochs = EpochSampler(train_set, np.random.default_rng(0))
    first, rest = epochs.next_ids(50), epochs.next_ids(20)
    assert sorted([*first, *rest]) == list(range(70))


def test_regime_rule_on_base_statistics():
    def stats(fail, pass_):
        return {str(d): {"all_fail": f, "all_pass": p} for d, f, p in zip(DEFAULT.tiers, fail, pass_)}

    held = {"accuracy": 0.4, "greedy": 0.8}
    # F and P weigh the tiers by the RL mix (uniform): F = 0.25, P = 0.05.
    assert regime_of(stats((0, 0.2, 0.3, 0.5), (0.2, 0, 0, 0)), held, DEFAULT)[0] == "all_fail"
    assert regime_of(stats((0, 0, 0.1, 0.1), (0.4, 0.2, 0.1, 0)), held, DEFAULT)[0] == "all_pass"
    regime, why = regime_of(stats((0, 0.2, 0.2, 0.4), (0.4, 0.2, 0.1, 0.1)), held, DEFAULT)
    assert regime == "mixed" and why.startswith("F = 0.20, P = 0.20")
    assert regime_of(stats((0,) * 4, (0.9,) * 4), {"accuracy": 0.85, "greedy": 1.0}, DEFAULT) == \
        (None, "F = 0.00, P = 0.90, accuracy 0.85: above 0.8, no room for the gates' gain")
    assert regime_of(stats((0.9,) * 4, (0,) * 4), {"accuracy": 0.1, "greedy": 0.3}, DEFAULT)[0] is None


def test_rollouts_to_reach_interpolates_the_mean_curve():
    runs = [{"evals": {"rollouts": [0, 100, 200], "accuracy": a}} for a in ([0.2, 0.4, 0.6], [0.2, 0.2, 0.4])]
    assert rollouts_to_reach(runs, 0.4) == pytest.approx(150.0)  # mean curve 0.2, 0.3, 0.5
    assert rollouts_to_reach(runs, 0.2) == 0.0
    assert rollouts_to_reach(runs, 0.51) is None


def test_pairs_for_mde_is_the_fewest_that_reach_the_target():
    n = pairs_for_mde(0.02, 0.015)
    assert minimum_detectable_effect(0.02, n) <= 0.015 < minimum_detectable_effect(0.02, n - 1)


def test_paired_test_and_holm_agree_with_scipy():
    rng = np.random.default_rng(0)
    d = rng.normal(0.01, 0.03, size=60)
    test = paired_test(d)
    reference = stats.ttest_1samp(d, 0.0)
    assert test["p"] == pytest.approx(reference.pvalue, rel=1e-9)
    low, high = reference.confidence_interval(0.95)
    assert test["ci95"] == pytest.approx([low, high], rel=1e-9)
    family = {"a": {"p": 0.01, "sd": 1.0, "n": 20}, "b": {"p": 0.04, "sd": 1.0, "n": 20}, "c": {"p": 0.03, "sd": 1.0, "n": 20}}
    holm(family)
    assert [family[k]["p_holm"] for k in "abc"] == pytest.approx([0.03, 0.06, 0.06])
    assert [family[k]["significant"] for k in "abc"] == [True, False, False]


def test_minimum_detectable_effect_has_the_stated_power():
    sd, n = 0.03, 60
    mde = minimum_detectable_effect(sd, n, 0.05)
    t_crit = stats.t.ppf(0.975, n - 1)
    noncentrality = mde / (sd / np.sqrt(n))
    power = stats.nct.sf(t_crit, n - 1, noncentrality) + stats.nct.cdf(-t_crit, n - 1, noncentrality)
    assert power == pytest.approx(POWER, abs=0.01)


def test_analyse_pairs_by_base_and_seed():
    endpoints = {m: {b: {s: {"accuracy": 0.5 + delta + 0.01 * s, "auc": 0.4, "greedy": 0.6 + delta}
                         for s in range(5)} for b in ("one", "two")}
                 for m, delta in (("grpo", 0.0), ("select_grpo", 0.02))}
    result = analyse(endpoints, ["grpo", "select_grpo"], ["one", "two"])
    assert result["pooled"]["accuracy"]["select_grpo"]["mean"] == pytest.approx(0.02)
    assert result["pooled"]["accuracy"]["select_grpo"]["n"] == 10
    assert result["per_base"]["one"]["greedy"]["select_grpo"]["n"] == 5
    assert result["means"]["grpo"]["accuracy"]["mean"] == pytest.approx(0.52)


def test_tuning_refuses_a_setting_that_is_not_grpos_own(capsys):
    assert main(["tune", "--set", "prompts=64"]) == 2
    assert "key one of lr, group_size" in capsys.readouterr().err


def test_the_study_compares_methods_only_on_bases_that_pass_every_gate():
    from lab.research.study import bases_to_compare

    good = {"grpo_gain": {"value": 0.12, "bound": 0.1, "passed": True}}
    bad = {"grpo_gain": {"value": 0.02, "bound": 0.1, "passed": False}}
    bases = [{"name": "a", "regime": "mixed"}, {"name": "b", "regime": "all_fail"}]
    gates = {"a": good, "b": bad}
    assert [b["name"] for b in bases_to_compare(bases, gates, enforce=True, progress=False)] == ["a"]
    assert [b["name"] for b in bases_to_compare(bases, {"a": bad, "b": bad}, enforce=True, progress=False)] == []
    assert len(bases_to_compare(bases, gates, enforce=False, progress=False)) == 2  # --quick: reported, not enforced


def test_tuning_changes_only_grpo_settings_and_keeps_rollouts_per_step():
    from lab.research.tuning import parse_changes

    assert parse_changes(["group_size=8", "temperature=1.2", "lr=3e-4"], DEFAULT) == {
        "group_size": 8, "prompts": 64, "temperature": 1.2, "eval_temperature": 1.2, "lr": 3e-4}
    with pytest.raises(ValueError, match="not a number"):
        parse_changes(["lr=fast"], DEFAULT)
    with pytest.raises(ValueError, match="are not a multiple"):
        parse_changes(["group_size=3"], DEFAULT)


def test_quick_study_writes_the_gates_and_the_paired_differences(tmp_path):
    import json

    assert main(["study", "--quick", "--jobs", "1", "--no-progress", "--out", str(tmp_path),
                 "--methods", "grpo", "avspo", "rlzvp"]) == 0
    report = json.loads((tmp_path / "study.json").read_text())
    (base,) = report["gates"]
    assert set(report["gates"][base]) == {"grpo_gain", "grpo_gain_per_seed", "greedy_change", "acr_first_half",
                                          "both_regimes", "learnable_all_fail", "clip_rate", "held_out_unseen"}
    assert all(set(g) >= {"value", "bound", "passed"} for g in report["gates"][base].values())
    assert report["design"]["gates_enforced"] is False
    assert set(report["manipulation"]) == {"avspo", "rlzvp"}
    assert set(report["manipulation"]["avspo"][base]) == {"acts_on", "effective_acr_ratio", "trigger_rate", "acted"}
    assert report["bases"][base]["training"]["regime"] in ("all_fail", "mixed", "all_pass")
    assert report["best_lr"]["best"] in report["design"]["lr_candidates"]
    assert set(report["vs_grpo"]) == {m for m in ("avspo", "rlzvp") if report["manipulation"][m][base]["acted"]}
    assert set(report["vs_grpo"]["avspo"]) >= {"mean", "ci95", "mde", "p_holm"}
    markdown = (tmp_path / "study.md").read_text()
    assert markdown.index("## Gates") < markdown.index("## Held-out accuracy at the rollout budget")
    assert "Gates not enforced" in markdown
    assert "## Manipulation check: where each method acted" in markdown
    assert "## At GRPO's accuracy-best learning rate" in markdown


def test_the_manipulation_check_counts_a_method_only_where_it_acted():
    from lab.methods import PRESETS
    from lab.research.study import acted_bases, manipulation

    def run(**series):
        return {"steps": {k: list(v) for k, v in series.items()}}

    grpo = [run(acr=[0.4, 0.2], acr_all_fail=[0.2, 0.1], acr_all_pass=[0.2, 0.1])]
    inert = [run(effective_acr=[0.4, 0.2], triggered=[0.0, 0.0])]
    acting = [run(effective_acr=[0.1, 0.0], triggered=[1.0, 1.0])]
    assert manipulation(PRESETS["avspo"], inert, grpo) == {
        "acts_on": "all", "effective_acr_ratio": 1.0, "trigger_rate": 0.0, "acted": False}
    assert manipulation(PRESETS["avspo_always"], acting, grpo)["acted"]  # 0.05 / 0.3
    # A restricted arm is judged on the groups it targets: all-fail groups only.
    all_fail_only = [run(effective_acr_all_fail=[0.0, 0.0], effective_acr=[0.2, 0.1], triggered=[1.0, 1.0])]
    assert manipulation(STUDY_EXTRA["avspo_paper_point_all_fail"], all_fail_only, grpo)["effective_acr_ratio"] == 0.0
    no_all_pass = [run(acr=[0.4], acr_all_fail=[0.4], acr_all_pass=[0.0])]
    assert manipulation(STUDY_EXTRA["avspo_paper_point_all_pass"], [run(effective_acr_all_pass=[0.0])],
                        no_all_pass) == {"acts_on": "all_pass", "effective_acr_ratio": None, "trigger_rate": None,
                                         "acted": False}
    assert manipulation(PRESETS["dapo"], grpo, grpo) is None  # DAPO claims nothing to check
    checks = {"avspo": {"one": {"acted": False}, "two": {"acted": True}}, "dapo": {"one": None, "two": None}}
    assert acted_bases(checks) == {"avspo": ["two"]}


def test_pooled_comparisons_leave_out_the_bases_where_a_method_did_not_act():
    endpoints = {m: {b: {s: {"accuracy": 0.5 + delta[b] + 0.01 * s, "auc": 0.4, "greedy": 0.6}
                         for s in range(3)} for b in ("one", "two")}
                 for m, delta in (("grpo", {"one": 0.0, "two": 0.0}), ("avspo", {"one": 0.0, "two": 0.03}),
                                  ("avspo_always", {"one": 0.0, "two": 0.0}))}
    result = analyse(endpoints, ["grpo", "avspo", "avspo_always"], ["one", "two"],
                     acted={"avspo": ["two"], "avspo_always": []})
    assert result["pooled_bases"] == {"avspo": ["two"], "avspo_always": []}
    assert result["pooled"]["accuracy"]["avspo"]["n"] == 3
    assert result["pooled"]["accuracy"]["avspo"]["mean"] == pytest.approx(0.03)
    assert "avspo_always" not in result["pooled"]["accuracy"]  # acted nowhere: not pooled
    assert result["per_base"]["one"]["accuracy"]["avspo"]["n"] == 3  # per base: every base, marked in the report


def test_a_bases_regime_in_training_is_the_analyze_rule_on_grpos_first_half():
    from lab.research.study import training_regime

    runs = [{"steps": {"acr_all_fail": [0.3, 0.3, 0.0, 0.0], "acr_all_pass": [0.1, 0.1, 0.5, 0.5]}}]
    assert training_regime(runs) == {"regime": "all_fail", "all_fail_first_half": 0.3,
                                     "all_pass_first_half": pytest.approx(0.1)}


def test_a_regime_no_base_shows_in_training_gets_the_candidate_tuning_found_for_it(monkeypatch):
    from lab.research import study

    warmed = []
    monkeypatch.setattr(study, "choose_bases", lambda settings, progress, named, cache: warmed.append(named) or
                        [{"name": name, "chosen": True} for name in named])
    mixed = {0: {"steps": {"acr_all_fail": [0.2, 0.2], "acr_all_pass": [0.15, 0.15]}}}
    all_fail = {0: {"steps": {"acr_all_fail": [0.3, 0.3], "acr_all_pass": [0.1, 0.1]}}}
    bases = [{"name": "carrydrop35"}, {"name": "carrydrop15"}]

    added = study.bases_for_missing_regimes(DEFAULT, bases, {"carrydrop35": mixed, "carrydrop15": mixed}, False)
    assert warmed == [[study.TRAINING_REGIME_BASES["all_fail"]]]
    assert added == [{"name": study.TRAINING_REGIME_BASES["all_fail"], "chosen": True, "added_for": "all_fail"}]
    # A base that shows the regime in training already: nothing warmed up, nothing added.
    assert study.bases_for_missing_regimes(DEFAULT, bases, {"carrydrop35": all_fail, "carrydrop15": mixed}, False) == []
    assert warmed == [[study.TRAINING_REGIME_BASES["all_fail"]]]


def test_tuning_can_name_the_candidates_it_runs_and_refuses_unknown_ones():
    from lab.research.study import choose_bases

    with pytest.raises(ValueError, match=r"unknown base candidate\(s\) carrydrop99; the candidates: carrydrop35, "):
        choose_bases(DEFAULT, progress=False, named=["carrydrop25", "carrydrop99"])


def test_a_warmed_up_base_is_kept_and_read_back_not_warmed_up_again(tmp_path, monkeypatch):
    from lab import experiment
    from lab.research.study import QUICK, QUICK_WARMUP, STUDY_SETTINGS

    settings = dataclasses.replace(STUDY_SETTINGS, **QUICK, **QUICK_WARMUP)
    state, description = experiment.prepare_base(settings, tmp_path)
    monkeypatch.setattr(experiment, "warm_up", lambda settings: pytest.fail("warmed up again"))
    again, described = experiment.prepare_base(settings, tmp_path)
    assert described == json.loads(json.dumps(description))
    assert again.keys() == state.keys() and all(torch.equal(again[k], state[k]) for k in state)
    # Other settings are another base.
    with pytest.raises(pytest.fail.Exception, match="warmed up again"):
        experiment.prepare_base(dataclasses.replace(settings, warmup_steps=settings.warmup_steps + 1), tmp_path)
    # Damaged parameters are named, with what to do, never read as a base.
    from avspo_plugin.state_files import StateFileError

    (parameters,) = tmp_path.glob("*.pt")
    parameters.write_bytes(parameters.read_bytes()[:100])
    with pytest.raises(StateFileError, match=rf"{parameters.name}: the parameters of a warmed-up base cannot be read"
                                             r" .*Delete it"):
        experiment.prepare_base(settings, tmp_path)


def test_a_damaged_cached_run_is_named_not_read_as_a_result(tmp_path):
    from avspo_plugin.state_files import StateFileError, write_json
    from lab.experiment import _read_cached

    assert _read_cached(tmp_path, "absent") is None
    write_json(str(tmp_path / "done.json"), {"key": "grpo/b/seed0", "result": {"seed": 0}})
    assert _read_cached(tmp_path, "done") == {"seed": 0}
    (tmp_path / "cut.json").write_text('{"key": "grpo/b/seed0", "res')
    with pytest.raises(StateFileError, match=r"cut\.json is not valid JSON .*Delete it to run that run again"):
        _read_cached(tmp_path, "cut")
