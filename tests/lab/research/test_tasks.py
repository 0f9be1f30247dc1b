"""The tasks study's registered rules (lab/research/tasks.py, issue 56): new task seeds, the frontier rule, the regimes,
the reading schedule, the test lock, the analysis on synthetic runs with a known effect, the leave-one-task-out
predictor, the planned MDE, the arms it adds, the checkpoints along one warm-up, and its registration page."""

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from avspo_plugin.core import AVSPOSession
from lab.command import main
from lab.experiment import run_fingerprint
from lab.methods import STUDY_EXTRA, compute_advantages, effective_collapse
from lab.research import command as research_command
from lab.research import headroom, tasks
from lab.research.statistics import minimum_detectable_effect
from lab.research.tasks_report import registration_markdown, tasks_markdown
from lab.settings import LabSettings, PolicyShape
from lab.train import warm_up, warm_up_checkpoints

ROOT = Path(__file__).resolve().parents[3]


def test_task_seeds_are_new_and_enough():
    assert len(tasks.TASK_SEEDS) >= tasks.N_TASKS >= tasks.MIN_TASKS >= 10
    assert not set(tasks.TASK_SEEDS) & set(tasks.EARLIER_TASK_SEEDS)
    assert {c.task_seed for c in headroom.CANDIDATES} <= set(tasks.EARLIER_TASK_SEEDS)
    assert LabSettings().task_seed in tasks.EARLIER_TASK_SEEDS  # study, sweeps, tuning, sharpening: the default
    # No other study sets a task seed of its own.
    for path in sorted((ROOT / "lab" / "research").glob("*.py")):
        if path.name not in ("tasks.py", "headroom.py"):
            assert not re.search(r"task_seed\s*=\s*\d", path.read_text()), path.name


def test_the_frontier_is_the_lowest_unsolved_tier_inside_the_low_window():
    assert tasks.frontier_of({"2": 1.0, "3": 0.95, "4": 0.2, "5": 0.0, "6": 0.0})[0] == 4
    assert tasks.frontier_of({"2": 1.0, "3": 0.95, "4": 0.6, "5": 0.1, "6": 0.0})[0] is None  # 4 above the window
    assert tasks.frontier_of({"2": 0.8, "3": 0.2, "4": 0.1, "5": 0.0, "6": 0.0})[0] is None  # tier 2 not solved
    assert tasks.frontier_of({"2": 1.0, "3": 1.0, "4": 0.97, "5": 0.02, "6": 0.0})[0] is None  # 5 blank
    assert tasks.frontier_of({d: 1.0 for d in "23456"})[0] is None


def test_the_rule_takes_the_checkpoint_nearest_the_windows_middle_and_the_later_on_a_tie():
    solved = {"2": 1.0, "3": 0.99}
    readings = {300: {**solved, "4": 0.06, "5": 0.0, "6": 0.0}, 400: {**solved, "4": 0.22, "5": 0.0, "6": 0.0},
                500: {**solved, "4": 0.95, "5": 0.7, "6": 0.0}, 600: {**solved, "4": 0.96, "5": 0.2, "6": 0.0}}
    choice = tasks.frontier_choice(readings)
    assert choice["qualifying"] == [300, 400, 600] and (choice["checkpoint"], choice["frontier"]) == (400, 4)
    readings[600]["5"] = readings[400]["4"]  # a tie with 400
    assert (tasks.frontier_choice(readings)["checkpoint"], tasks.frontier_choice(readings)["frontier"]) == (600, 5)
    assert tasks.frontier_choice({300: {**solved, "4": 0.9, "5": 0.9, "6": 0.9}})["checkpoint"] is None


def test_regimes_alternate_by_acceptance_order_and_set_the_training_mix():
    assert [tasks.regime_for(i) for i in range(4)] == ["all_fail", "all_pass", "all_fail", "all_pass"]
    heavy = tasks.train_counts(5, "all_fail", 7680)
    solved = tasks.train_counts(5, "all_pass", 7680)
    assert heavy == (512, 512, 512, 6144, 0) and solved == (2048, 2048, 2048, 1536, 0)
    assert tasks.train_counts(3, "all_pass", 7680) == (6144, 1536, 0, 0, 0)
    # The largest count on tier 2 fits beside its evaluation problems (8,100 tier-2 problems).
    assert tasks.train_counts(3, "all_pass", tasks.TRAIN_PROBLEMS)[0] + tasks.EVAL_PER_TIER[0] <= 8100
    with pytest.raises(ValueError, match="no lower tier"):
        tasks.train_counts(2, "all_fail", 100)


def test_every_arm_reads_the_same_schedule_with_three_endpoint_readings():
    size = tasks.Sizes()
    assert size.budget % size.read_every == 0 and size.budget == 240 * 512
    evaluation = tasks.FrontierEvaluation((2, 3, 4, 5, 6), 5600, tasks.EVAL_PER_TIER, 4, size.budget, size.read_every)
    read = [r for r in range(512, size.budget + 1, 512) if evaluation.due(r, r == size.budget, r - 512)]
    assert read == list(range(size.read_every, size.budget + 1, size.read_every))
    assert [r for r in read if evaluation.endpoint_reading(r)] == [size.budget - 2 * size.read_every,
                                                                   size.budget - size.read_every, size.budget]


def test_the_evaluation_problems_are_the_held_out_split_so_no_training_problem_is_one():
    size = tasks.sizes(quick=True)
    settings = tasks.run_settings({"task_seed": 5600, "frontier": 4, "regime": "all_fail"}, size)
    from lab.task import training_set
    from lab.train import held_out
    validation, test = tasks.evaluation_parts(settings.tiers, 5600, settings.held_out_per_tier)
    train = training_set(settings.tiers, settings.train_per_tier, 5600, held_out(settings))
    keys = set(train.keys().tolist())
    assert not keys & set(validation.keys().tolist()) and not keys & set(test.keys().tolist())
    assert len(validation) + len(test) == sum(size.eval_per_tier)


# --- synthetic runs -----------------------------------------------------------------------------------------------
STEPS = 8


def fake_run(primary: float, greedy: float, *, fail=0.3, passed=0.1, augmented=0.0, kind="all", entropy=1.0,
             collapsed_mass=0.0) -> dict:
    """A train() result with the study's readings: three endpoint readings around ``primary`` / ``greedy``; per-step
    series with all-fail share ``fail``, all-pass ``passed``, and ``augmented`` of the targeted collapsed groups
    given a signal."""
    acr = fail + passed
    target = {"all": acr, "all_fail": fail, "all_pass": passed}[kind]
    steps = {"acr": [acr] * STEPS, "acr_all_fail": [fail] * STEPS, "acr_all_pass": [passed] * STEPS,
             "effective_acr": [acr] * STEPS, "effective_acr_all_fail": [fail] * STEPS,
             "effective_acr_all_pass": [passed] * STEPS, "entropy": [entropy] * 2 + [entropy * 0.9] * (STEPS - 2),
             "advantage_abs_sum": [10.0] * STEPS, "collapsed_advantage_abs_sum_tier4": [10.0 * collapsed_mass] * STEPS,
             "triggered": [1.0 if augmented else 0.0] * STEPS}
    key = {"all": "effective_acr", "all_fail": "effective_acr_all_fail", "all_pass": "effective_acr_all_pass"}[kind]
    steps[key] = [target * (1 - augmented)] * STEPS
    evals = [{"step": s, "rollouts": 64 * s, "curve": {"validation": {"greedy": greedy}, "test": {
        "greedy": greedy + (s - 7) * 0.01, "sampled": primary, **({"t1_mean": primary + (s - 7) * 0.01} if s >= 6 else {})}}}
        for s in range(1, STEPS + 1)]
    evals[-1]["full"] = {"test": {"greedy_by_tier": {"4": greedy}}}
    return {"steps": steps, "evals": evals, "cpu_s": 1.0, "wall_s": 1.0}


def test_a_runs_endpoint_is_the_mean_of_its_three_endpoint_readings():
    ends = tasks.run_endpoints(fake_run(0.5, 0.6))
    assert ends["primary"] == pytest.approx(0.5) and ends["greedy"] == pytest.approx(0.6)
    assert ends["last_t1"] == pytest.approx(0.51)
    broken = fake_run(0.5, 0.6)
    del broken["evals"][-1]["curve"]["test"]["t1_mean"]
    with pytest.raises(ValueError, match="endpoint readings"):
        tasks.run_endpoints(broken)


def synthetic_study(tmp_path, effect=0.05, n_tasks=6, missing=0):
    """A quick-sized registration of n_tasks fake tasks, its runs written into a run cache (all but ``missing``):
    avspo = GRPO + effect + seed noise, always on all-pass groups never acts, always on all-fail groups acts and
    equals GRPO."""
    names = [f"task{5600 + i}" for i in range(n_tasks)]
    chosen = {"tasks": {n: {"task_seed": 5600 + i, "index": i, "checkpoint": 40, "frontier": 4,
                            "regime": tasks.regime_for(i), "base_validation_greedy": {"4": 0.2},
                            "train_per_tier": list(tasks.train_counts(4, tasks.regime_for(i), 48))}
                        for i, n in enumerate(names)}}
    specs = tasks.registered_runs(chosen["tasks"], quick=True)
    digests = {n: f"digest{n}" for n in names}
    rng = np.random.default_rng(0)
    cache = tmp_path / "runs"
    cache.mkdir()
    written = 0
    for n, task_specs in specs.items():
        regime = chosen["tasks"][n]["regime"]
        fail, passed = (0.4, 0.1) if regime == "all_fail" else (0.1, 0.4)
        base = {s: 0.3 + 0.05 * rng.standard_normal() for s in tasks.SEEDS}
        for spec in task_specs:
            arm, seed = spec.key.split("/")[0], spec.seed
            primary = base[seed] + (effect + 0.01 * rng.standard_normal() if arm == "avspo" else 0.0)
            run = fake_run(primary, primary + 0.2, fail=fail, passed=passed,
                           augmented={"grpo": 0.0, "avspo": 0.5, "avspo_always_all_pass": 0.0,
                                      "avspo_always_all_fail": 1.0}[arm],
                           kind=STUDY_EXTRA.get(arm, None).acts_on if arm in STUDY_EXTRA else "all")
            if written < len([s for ts in specs.values() for s in ts]) - missing:
                path = cache / f"{run_fingerprint(spec, digests[n])}.json"
                path.write_text(json.dumps({"key": spec.key, "result": run}))
                written += 1
    return chosen, specs, digests, cache


def test_the_analysis_refuses_test_readings_until_every_registered_run_is_in(tmp_path):
    chosen, specs, digests, cache = synthetic_study(tmp_path, missing=1)
    with pytest.raises(tasks.TestLocked, match="1 of 48 registered runs"):
        tasks.analyse(chosen, specs, digests, cache, {}, quick=True, permutations=9)
    with pytest.raises(tasks.TestLocked):  # a run of another base (digest) is not this registration's
        tasks.read_complete(specs, {n: "other" for n in digests}, cache)


def test_the_analysis_finds_a_known_effect_and_names_the_arms_that_did_not_act(tmp_path):
    chosen, specs, digests, cache = synthetic_study(tmp_path, effect=0.05)
    readings = {n: {"curve": {}} for n in chosen["tasks"]}
    report = tasks.analyse(chosen, specs, digests, cache, readings, quick=True, permutations=9)
    primary = report["comparison"]["primary"]
    assert primary["avspo"]["real"] and primary["avspo"]["n"] == 6  # tasks as the unit
    assert primary["avspo"]["seed_pairs"]["n"] == 12
    assert primary["avspo"]["mean"] == pytest.approx(0.05, abs=0.01)
    assert report["verdicts"] == {"avspo": "helps", "avspo_always_all_pass": "did not act",
                                  "avspo_always_all_fail": "not distinct"}
    assert primary["avspo"]["p_holm"] == primary["avspo"]["p"]  # Holm over the one real test
    assert primary["avspo"]["mde"] == pytest.approx(minimum_detectable_effect(primary["avspo"]["sd"], 6))
    assert all(c["passed"] for c in (t["regime_check"] for t in report["tasks"].values()))
    assert report["by_regime"]["avspo"]["all_fail"]["n"] == 3 and report["by_regime"]["avspo"]["all_pass"]["n"] == 3
    assert report["manipulation"]["avspo"]["task5600"]["augmented_share"] == pytest.approx(0.5)
    json.dumps(report)
    assert "| avspo | helps |" in tasks_markdown({**report, "registration": {}})
    # No effect: not shown.
    (tmp_path / "null").mkdir()
    chosen, specs, digests, cache = synthetic_study(tmp_path / "null", effect=0.0)
    null = tasks.analyse(chosen, specs, digests, cache, readings, quick=True, permutations=9)
    assert null["verdicts"]["avspo"] == "not shown"


def test_a_failed_regime_check_is_recorded():
    heavy = [fake_run(0.3, 0.5, fail=0.1, passed=0.4)]
    assert not tasks.regime_check("all_fail", heavy)["passed"] and tasks.regime_check("all_pass", heavy)["passed"]


def test_an_arm_acts_only_past_its_threshold():
    assert tasks.acted("avspo", [fake_run(0.3, 0.5, augmented=0.05)])["acted"] is False
    assert tasks.acted("avspo", [fake_run(0.3, 0.5, augmented=0.2)])["acted"] is True
    none_collapsed = fake_run(0.3, 0.5, fail=0.0, passed=0.0)
    assert tasks.acted("avspo_always_all_fail", [none_collapsed]) == {
        "augmented_share": None, "trigger_rate": 0.0, "threshold": tasks.MIN_AUGMENTED_SHARE, "acted": False}


def test_the_predictor_tells_a_sign_its_features_carry_and_not_one_they_do_not():
    rng = np.random.default_rng(1)

    def samples(informative: bool) -> list[dict]:
        out = []
        for t in range(12):
            effect = 0.05 if t % 2 else -0.05
            for arm in ("avspo", "avspo_always_all_fail"):
                for _ in range(2):
                    signal = (effect * 10 if informative else 0.0) + 0.1 * rng.standard_normal()
                    out.append({"arm": arm, "task": f"t{t}", "effect": effect,
                                "features": {"all_fail_share": signal, "collapsed_mass_share": rng.random(),
                                             "entropy_change": rng.standard_normal()}})
        return out

    told = tasks.predictor(samples(True), permutations=99)
    assert told["verdict"] == "tells" and told["loo_accuracy"] > 0.9 and told["p"] <= 0.02
    blind = tasks.predictor(samples(False), permutations=99)
    assert blind["verdict"] == "cannot tell"
    few = tasks.predictor(samples(True)[:8], permutations=9)
    assert few["verdict"] == "cannot tell" and "tasks" in few["why"]


def test_early_features_read_the_first_quarter():
    features = tasks.early_features(fake_run(0.3, 0.5, fail=0.25, collapsed_mass=0.4, entropy=2.0))
    assert features["all_fail_share"] == pytest.approx(0.25)
    assert features["collapsed_mass_share"] == pytest.approx(0.4)
    assert features["entropy_change"] == pytest.approx(0.0)  # 2 early steps of 8: both at the start's entropy


def test_the_planned_mde_follows_the_headroom_seed_sds():
    plan = tasks.planned_mde()
    grpo, avspo = (np.sqrt(np.mean(np.square(tasks.PLANNING_SEED_SD[a]))) for a in ("grpo", "avspo"))
    sd = np.sqrt(tasks.PLANNING_TAU ** 2 + (grpo ** 2 + avspo ** 2) / 2)
    assert plan["avspo"]["with_tau"]["mde"] == pytest.approx(minimum_detectable_effect(sd, tasks.N_TASKS))
    assert plan["avspo"]["seed_noise_only"]["mde"] < plan["avspo"]["with_tau"]["mde"] < \
        plan["avspo"]["with_tau"]["mde_holm"]


def _batch():
    """Four groups of 4: all-fail, all-pass, mixed, mixed (ACR 0.5)."""
    scores = torch.tensor([0.0] * 4 + [1.0] * 4 + [1.0, 0, 0, 0] + [1.0, 1, 0, 0])
    mask = torch.ones(16, 3)
    rewards = torch.zeros(16, 3)
    rewards[:, -1] = scores
    return scores, mask, rewards, np.array([f"g{i // 4}" for i in range(16)], dtype=object)


@pytest.mark.parametrize("arm, effective", [("avspo_always_all_fail", (0.25, 0.0, 0.25)),
                                            ("avspo_always_all_pass", (0.25, 0.25, 0.0))])
def test_the_always_ablations_augment_only_the_groups_they_name(arm, effective):
    scores, mask, rewards, uids = _batch()
    method, session = STUDY_EXTRA[arm], AVSPOSession()
    advantages = compute_advantages(method, method.algorithm_config(), rewards, mask, uids, session=session)
    assert session.pop_metrics()["triggered"] == 1.0
    assert tuple(effective_collapse(advantages, scores, uids).values()) == effective


def test_checkpoints_along_one_warm_up_end_at_the_warm_up():
    settings = dataclasses.replace(LabSettings(), warmup_steps=3, warmup_batch=4,
                                   shape=PolicyShape(hidden=16, layers=1, heads=2, kv_heads=1, intermediate=16))
    states = warm_up_checkpoints(settings, (1, 3))
    assert set(states) == {1, 3}
    final = warm_up(settings)
    assert all(torch.equal(states[3][k], final[k]) for k in final)
    assert not all(torch.equal(states[1][k], final[k]) for k in final)
    with pytest.raises(ValueError, match="within"):
        warm_up_checkpoints(settings, (4,))


def test_the_registration_page_holds_the_design_as_the_code_fixes_it():
    page = (ROOT / "docs" / "evidence" / "tasks.md").read_text()
    assert registration_markdown(tasks.design(quick=False), tasks.planned_mde()) in page


def test_help_starts_no_run(monkeypatch, capsys):
    monkeypatch.setitem(research_command.RUNS, "tasks", lambda args: pytest.fail("a run started"))
    with pytest.raises(SystemExit) as stopped:
        main(["tasks", "--help"])
    out = capsys.readouterr().out
    assert stopped.value.code == 0 and "--phase" in out and "tasks.py" in out
