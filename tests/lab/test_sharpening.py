"""The learning-or-sharpening study's machinery: carries, the evaluation split, unbiased pass@k (against the
binomial definition), rollouts to a target, the decision rule, and the quick pipeline's report."""

import json
import math

import numpy as np
import pytest
from cli_in_process import captured

from lab.command import main
from lab.research.sharpening import (
    Design,
    SplitEvaluation,
    decision,
    evaluation_parts,
    pass_at_k,
    rollouts_to_target,
)
from lab.research.study import STUDY_SETTINGS
from lab.task import carry_counts, held_out_split, stratified_split, training_set


def test_carry_counts_match_column_addition():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 10**5, 500), rng.integers(0, 10**5, 500)

    def carries(x: int, y: int) -> int:
        count, carry = 0, 0
        while x or y:
            carry = (x % 10 + y % 10 + carry) // 10
            count += carry
            x, y = x // 10, y // 10
        return count

    assert carry_counts(a, b).tolist() == [carries(x, y) for x, y in zip(a.tolist(), b.tolist())]
    assert carry_counts(np.array([99999, 0, 5]), np.array([1, 0, 5])).tolist() == [5, 0, 1]


@pytest.mark.parametrize("n,k", [(16, 8), (8, 8), (5, 1), (16, 3)])
def test_pass_at_k_is_one_minus_the_binomial_ratio(n, k):
    rng = np.random.default_rng(n * 31 + k)
    correct = (rng.random((200, n)) < rng.random((200, 1))).astype(float)
    c = correct.sum(axis=1).astype(int)
    expected = [1 - math.comb(n - ci, k) / math.comb(n, k) for ci in c]
    np.testing.assert_allclose(pass_at_k(correct, k), expected, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="needs 1 <= k <= n"):
        pass_at_k(correct, n + 1)


def test_the_evaluation_split_is_new_stratified_and_fixed():
    design = Design(per_tier=(10, 20, 30, 40))
    settings = STUDY_SETTINGS
    evaluation = SplitEvaluation(settings.tiers, settings.task_seed, settings.held_out_per_tier,
                                 settings.train_per_tier, design.per_tier, settings.rollout_budget, True)
    validation, test = evaluation_parts(evaluation)
    earlier = held_out_split(settings.tiers, settings.held_out_per_tier, settings.task_seed)
    training = training_set(settings.tiers, settings.train_per_tier, settings.task_seed, earlier)
    keys = np.concatenate([validation.keys(), test.keys()])
    assert len(set(keys.tolist())) == keys.size == 100  # distinct, and validation and test apart
    assert not np.isin(keys, earlier.keys()).any() and not np.isin(keys, training.keys()).any()
    assert [int((validation.tier == d).sum()) for d in settings.tiers] == [4, 8, 12, 16]
    again = stratified_split(validation, 0.5, 1)
    assert sorted(np.concatenate([again[0].keys(), again[1].keys()]).tolist()) == sorted(validation.keys().tolist())
    np.testing.assert_array_equal(evaluation_parts.__wrapped__(evaluation)[1].keys(), test.keys())


def _run(greedy_by_rollouts: dict[int, float], budget: int) -> dict:
    evals = [{"rollouts": r, "test": {"greedy": g}} for r, g in greedy_by_rollouts.items() if r != budget]
    evals.append({"rollouts": budget, "validation": {}, "test": {"accuracy": {"0.0": greedy_by_rollouts[budget]}}})
    return {"evals": sorted(evals, key=lambda e: e["rollouts"])}


def test_rollouts_to_target_reads_the_first_crossing_and_counts_not_reached():
    budget = 100
    grpo = {0: _run({50: 0.5, 100: 0.6, 150: 0.75}, budget), 1: _run({50: 0.5, 100: 0.8, 150: 0.8}, budget)}
    avspo = {0: _run({50: 0.72, 100: 0.9}, budget), 1: _run({50: 0.6, 100: 0.65}, budget)}
    out = rollouts_to_target({"grpo": {"b": grpo}, "avspo_always": {"b": avspo}}, budget)["b"]
    assert out["target_greedy"] == pytest.approx(0.7)
    assert out["arms"]["grpo"]["per_seed"] == [150, 100]
    assert out["arms"]["avspo_always"]["per_seed"] == [50, None]
    assert out["arms"]["avspo_always"]["reached"] == 0.5
    assert out["arms"]["avspo_always"]["median"] is None  # half not reached: the median is not reached either
    assert out["arms"]["avspo_always"]["ci95"] == [50.0, None]


def test_the_decision_needs_the_seed_interval_above_zero_and_the_bases_mean_positive():
    assert decision({"ci95": [0.001, 0.02], "bases": {"mean": 0.01}}) == {
        "verdict": "learning", "learning": True, "default_threshold_mode": "always"}
    assert decision({"ci95": [-0.02, -0.001], "bases": {"mean": -0.01}})["default_threshold_mode"] == "adaptive"
    assert decision({"ci95": [-0.001, 0.02], "bases": {"mean": 0.01}})["verdict"] == "not_shown_beyond_sharpening"
    assert decision({"ci95": [0.001, 0.02], "bases": {"mean": -0.01}})["verdict"] == "not_shown_beyond_sharpening"
    assert decision(None)["verdict"] == "not_compared"


def test_quick_study_writes_what_the_report_promises(tmp_path):
    result = captured(main, "sharpening", "--quick", "--jobs", "1", "--no-progress", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "sharpening.json").read_text())
    assert report["split"]["sizes"] == {"validation": 4, "test": 8}
    for tuning in report["tuning"].values():
        assert tuning["best"] in tuning["grid"] and isinstance(tuning["interior"], bool)
        assert all(len(s["per_run"]) == 1 and s["temperature"] in (0.0, 0.3, 0.6, 0.8, 1.0)
                   for s in tuning["scores"].values())
    assert set(report["comparison"]) == {"primary", "T=0.0", "T=0.3", "T=0.6", "T=0.8", "T=1.0", "pass@8"}
    assert set(report["comparison"]["primary"]["avspo_always"]) >= {"mean", "ci95", "p_holm", "bases", "error_ratio"}
    (base,) = report["rollouts_to_target"]
    grpo = report["rollouts_to_target"][base]["arms"]["grpo"]
    assert grpo["max_rollouts"] == 576 and len(grpo["per_seed"]) == 2  # GRPO runs to 1.5 x the budget of 384
    series = report["mechanism"]["avspo_always"][base]["series"]
    assert {"ppo_kl", "clip_fraction", "advantage_abs_sum", "advantage_sum", "update_norm", "entropy"} <= set(series)
    assert len(series["update_norm"]) == 6
    tracking = report["mechanism_tracking"]["avspo_always"]
    assert set(tracking) >= {"ppo_kl", "advantage_abs_sum", "update_norm", "entropy"}
    assert all(t["n"] == 2 for t in tracking.values())
    assert report["decision"]["verdict"] in ("learning", "not_shown_beyond_sharpening")
    assert "## Rollouts to GRPO's greedy test accuracy at the budget" in (tmp_path / "sharpening.md").read_text()
