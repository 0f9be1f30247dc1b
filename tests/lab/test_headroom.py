"""The headroom study's rules (lab/research/headroom.py): its curve schedule, the testbed gate, the seeds from the
pilot's variance, the sustained crossing, stability, the verdicts and the default they decide, the per-tier signal
the training loop records, and the quick pipeline's report."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_in_process import captured
from scipy import stats

from lab.command import main
from lab.research.headroom import (
    CANDIDATES,
    LOOK_ALPHA,
    LR_GRID,
    MAX_PAIRS,
    MAX_SEEDS,
    PILOT_LR,
    PILOT_SEEDS,
    SECOND_LOOK_PAIRS,
    TUNING_SEEDS,
    WARMUP_FAMILY,
    WARMUP_FAMILY_2,
    WEIGHT_FAMILY,
    CurveEvaluation,
    comparison_seeds,
    decision,
    headroom_gate,
    seeds_for_mde,
    stability,
    sustained_crossing,
    verdict,
)
from lab.research.headroom_report import pilot_summary
from lab.research.statistics import minimum_detectable_effect, paired_test, t_interval
from lab.train import Groups, signal_by_tier


def test_curve_readings_fall_at_the_first_step_past_each_multiple():
    evaluation = CurveEvaluation((2,), 0, 8, 12, (3,), budget=10_000, read_every=4096, read_test=True)
    # GRPO's steps of 512 land on each multiple; DAPO's of up to 2048 cross them.
    assert evaluation.due(4096, False, 3584) and not evaluation.due(4608, False, 4096)
    assert evaluation.due(5120, False, 3584)  # crossed 4096 within one DAPO step
    assert not evaluation.due(6144, False, 5120)
    assert evaluation.due(10_000, False, 9_500) and evaluation.due(600, True, 100)


def _full(room: float, by_tier: dict[str, float]) -> dict:
    return {"accuracy": {"0.0": room}, "by_tier": {"0.0": by_tier}}


def _pilot_run(room: float, by_tier: dict[str, float], budget: int = 512, clip: float = 0.0) -> dict:
    return {"evals": [{"rollouts": budget, "full": {"validation": _full(room, by_tier)}}],
            "steps": {"rollouts_total": [budget], "clip_bound": [clip], "grad_norm": [1.0]}}


def test_the_headroom_gate_asks_gain_band_and_solved_tiers_kept():
    base = {"full": {"validation": _full(0.2, {"2": 0.98, "5": 0.2, "6": 0.0})}}
    good = headroom_gate(base, [_pilot_run(0.7, {"2": 0.97, "5": 0.7, "6": 0.05}),
                               _pilot_run(0.6, {"2": 0.96, "5": 0.6, "6": 0.05})], 512)
    assert good["passed"] and good["gain"] == pytest.approx(0.45)
    assert good["solved_tier_losses"] == {"2": pytest.approx(0.015)}  # only tier 2 was solved at the base
    dropped = headroom_gate(base, [_pilot_run(0.7, {"2": 0.90, "5": 0.7, "6": 0.05})], 512)
    assert not dropped["passed"] and dropped["checks"] == {"gain": True, "end_band": True, "solved_tiers_kept": False,
                                                           "clip": True}
    too_high = headroom_gate(base, [_pilot_run(0.9, {"2": 0.98, "5": 0.9, "6": 0.1})], 512)
    assert not too_high["checks"]["end_band"]
    flat = headroom_gate(base, [_pilot_run(0.25, {"2": 0.98, "5": 0.25, "6": 0.0})], 512)
    assert not flat["checks"]["gain"]


def test_seeds_follow_the_pilot_variance_and_stop_at_the_cap():
    few = seeds_for_mde({"a": [0.60, 0.62], "b": [0.50, 0.52], "c": [0.70, 0.71]}, 3)
    assert few["seeds"] == 2 and few["mde_at_seeds"] <= 0.03
    assert few["within_base_sd"] == pytest.approx(np.sqrt((2 * 0.01 ** 2 * 2 + 2 * 0.005 ** 2) / 3))
    many = seeds_for_mde({"a": [0.5, 0.6], "b": [0.5, 0.6], "c": [0.5, 0.6]}, 3)
    assert many["seeds"] == MAX_SEEDS and many["mde_at_seeds"] > 0.03  # the cap, with the MDE it leaves
    assert many["mde_at_seeds"] == pytest.approx(minimum_detectable_effect(np.sqrt(2) * many["within_base_sd"], 3 * MAX_SEEDS))
    two_bases = seeds_for_mde({"a": [0.5, 0.6], "b": [0.5, 0.6]}, 2)  # the planned pairs kept: 3 seeds each
    assert two_bases["seeds"] == MAX_PAIRS // 2 == 3 and two_bases["pairs"] == 6


def test_a_crossing_counts_only_while_later_readings_stay_near_the_target():
    assert sustained_crossing([(8, 0.5), (16, 0.71), (24, 0.69), (32, 0.72)], 0.7) == 16  # 0.69 is within 0.02
    assert sustained_crossing([(8, 0.72), (16, 0.6), (24, 0.71), (32, 0.7)], 0.7) == 24  # fell back: later one
    assert sustained_crossing([(8, 0.72), (16, 0.6)], 0.7) is None


def test_stability_counts_runs_that_end_below_their_own_best():
    def run(curve):
        return {"evals": [{"rollouts": 100 * (i + 1), "curve": {"test": {"greedy": g}}} for i, g in enumerate(curve)]}
    runs = {"grpo": {"b": {0: run([0.5, 0.7, 0.64]), 1: run([0.5, 0.7, 0.66, 0.2])}}}
    endpoints = {"grpo": {"b": {0: {"primary": 0.64}, 1: {"primary": 0.66}}}}
    out = stability(runs, endpoints, budget=300)  # the reading at 400 lies past the budget
    assert out["grpo"]["fell_share"] == 0.5 and out["grpo"]["runs"] == 2
    assert out["grpo"]["seed_sd"]["b"] == pytest.approx(np.std([0.64, 0.66], ddof=1))


def _test(mean, low, high, per_base, bases_mean=None):
    return {"mean": mean, "ci_look": [low, high], "bases": {"mean": mean if bases_mean is None else bases_mean},
            "per_base": per_base}


def test_verdicts_read_the_pooled_interval_and_the_worst_base():
    fine = {"a": {"mean": 0.02, "ci_look": [0.0, 0.04]}, "b": {"mean": 0.03, "ci_look": [0.01, 0.05]}}
    assert verdict(_test(0.025, 0.01, 0.04, fine)) == "helps"
    one_harmed = {**fine, "c": {"mean": -0.08, "ci_look": [-0.12, -0.04]}}
    assert verdict(_test(0.01, -0.01, 0.03, one_harmed)) == "hurts"  # the pooled mean hides a harmed base
    noisy = {**fine, "c": {"mean": -0.08, "ci_look": [-0.3, 0.1]}}
    assert verdict(_test(0.02, 0.005, 0.03, noisy)) == "not shown"  # a base below -HARM bars "helps"
    assert verdict(_test(-0.02, -0.03, -0.01, fine)) == "hurts"
    assert verdict(None) == "not tested"


def test_the_default_follows_the_verdicts():
    helps = _test(0.03, 0.01, 0.05, {"a": {"mean": 0.03, "ci_look": [0.0, 0.06]}})
    hurts = _test(-0.03, -0.05, -0.01, {"a": {"mean": -0.03, "ci_look": [-0.06, 0.0]}})
    unclear = _test(0.0, -0.02, 0.02, {"a": {"mean": 0.0, "ci_look": [-0.03, 0.03]}})
    assert decision({"avspo": unclear, "avspo_always": helps})["default_threshold_mode"] == "always"
    assert decision({"avspo": helps, "avspo_always": helps})["default_threshold_mode"] in ("adaptive", "always")
    assert decision({"avspo": unclear, "avspo_always": hurts})["default_threshold_mode"] == "adaptive"
    assert decision({"avspo": hurts, "avspo_always": unclear})["default_threshold_mode"] == "never"
    assert decision({"avspo_always": hurts})["verdicts"] == {"adaptive": "not tested", "always": "hurts"}


def test_the_look_interval_is_the_paired_t_interval_at_pococks_per_look_level():
    test = paired_test([-0.3, -0.1, 0.05, -0.2, -0.25, 0.0])
    low, high = t_interval(test["mean"], test["sd"], test["n"], LOOK_ALPHA)
    assert (low + high) / 2 == pytest.approx(test["mean"])
    assert low < test["ci95"][0] and high > test["ci95"][1]  # wider than 95%: two looks share 0.05
    assert stats.ttest_1samp([-0.3, -0.1, 0.05, -0.2, -0.25, 0.0], 0).confidence_interval(1 - LOOK_ALPHA).low \
        == pytest.approx(low)


def test_the_second_look_doubles_the_pairs_and_keeps_the_first_looks_seeds():
    found = {"seeds_for_mde": {"seeds": 3}}
    assert comparison_seeds(found, 2, quick=False) == SECOND_LOOK_PAIRS // 2 == 6
    assert comparison_seeds(found, 3, quick=False) == 4  # 12 pairs; each base keeps seeds 0-2 of the first look
    assert comparison_seeds(found, 2, quick=True) == 3


def test_signal_by_tier_splits_collapsed_groups_and_their_advantages_by_tier():
    # Four groups of 2: tier 2 all-fail (augmented), tier 2 mixed, tier 5 all-pass (not augmented), tier 5 all-fail.
    scores = torch.tensor([0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    uids = np.array(["a", "a", "b", "b", "c", "c", "d", "d"])
    tiers = np.array([2, 2, 2, 2, 5, 5, 5, 5])
    groups = Groups(None, scores, uids, tiers, np.arange(8))  # the rollout itself is not read
    advantages = torch.tensor([-0.5, -0.5, 1.0, -1.0, 0.0, 0.0, -0.25, -0.25])
    entropy = torch.tensor([1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 4.0])
    out = signal_by_tier(groups, advantages, entropy, (2, 5))
    assert out["augmented_tier2"] == 1.0 and out["augmented_tier5"] == 0.5
    assert out["collapsed_advantage_sum_tier2"] == -1.0 and out["collapsed_advantage_sum_tier5"] == -0.5
    assert out["collapsed_advantage_abs_sum_tier5"] == 0.5
    assert out["entropy_tier2"] == 1.0 and out["entropy_tier5"] == 2.5


def test_candidates_share_the_testbed_and_differ_by_task_seed_warmup_length_or_sixth_tier_weight():
    settings = [c.settings() for c in CANDIDATES]
    assert {s.tiers for s in settings} == {(2, 3, 4, 5, 6)} and {s.warmup_mix[:4] for s in settings} == {(4, 3, 2, 1)}
    assert len({(s.task_seed, s.warmup_steps, s.warmup_mix) for s in settings}) == len(CANDIDATES)
    by_name = dict(zip((c.name for c in CANDIDATES), settings))
    assert [by_name[f"wide0warm{n}"].warmup_steps for n in WARMUP_FAMILY] == list(WARMUP_FAMILY)
    assert [by_name[f"wide0sixth{w:g}"].warmup_mix[4] for w in WEIGHT_FAMILY] == list(WEIGHT_FAMILY)
    assert [by_name[f"wide0warm{n}"].warmup_steps for n in WARMUP_FAMILY_2] == list(WARMUP_FAMILY_2)
    family = [by_name[f"wide0warm{n}"] for n in WARMUP_FAMILY] + [by_name[f"wide0sixth{w:g}"] for w in WEIGHT_FAMILY]
    assert {s.task_seed for s in family} == {0}
    assert not any(c.screened for c in CANDIDATES if c.name.startswith("wide0"))


def test_pilot_seeds_are_the_tuning_seeds_so_grpo_tuning_reuses_the_pilot():
    assert TUNING_SEEDS == PILOT_SEEDS and PILOT_LR in LR_GRID


def test_quick_study_writes_curves_endpoints_and_a_decision(tmp_path):
    result = captured(main, "headroom", "--quick", "--jobs", "1", "--no-progress", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "headroom.json").read_text())
    assert report["pilot"]["accepted"] and set(report["tuning"]) == {"grpo", "avspo", "avspo_always"}
    curve = report["curves"]["grpo"][report["pilot"]["accepted"][0]]["0"]
    assert curve[-1]["rollouts"] == 384  # GRPO runs to 1.5 x the budget of 256
    assert {"validation", "test", "entropy", "rollouts", "step"} <= set(curve[0])
    assert {"greedy", "sampled"} == set(curve[0]["test"])
    assert set(report["comparison"]["primary"]) == {"avspo", "avspo_always", "dapo"}
    assert all("p_holm" in t for e in ("primary", "greedy") for t in report["comparison"][e].values())
    # Verdicts read the per-look interval, attached to every pooled test.
    for t in report["comparison"]["primary"].values():
        assert t["ci_look"] == pytest.approx(t_interval(t["mean"], t["sd"], t["n"], LOOK_ALPHA))
    assert report["decision"]["default_threshold_mode"] in ("adaptive", "always", "never")
    assert set(report["stability"]) == set(report["design"]["arms"])
    assert "## 5. Mechanism" in (tmp_path / "headroom.md").read_text()


def test_pilot_summary_tables_the_candidates_grpo_ran_from_and_names_those_screened_out():
    gate = {"base_greedy": 0.16, "end_greedy": 0.67, "gain": 0.51, "solved_tier_losses": {"2": 0.02},
            "clip_bound": 0.0, "checks": {"gain": True, "end_band": True}, "passed": True}
    screened_base = {"full": {"validation": {"accuracy": {"0.0": 0.9}}}}
    pilot = {"lr": 3e-4, "seeds": [998, 999], "accepted": ["wide0warm1150"],
             "candidates": {"wide0warm1150": {"task_seed": 0, "warmup_steps": 1150, "sixth_tier_weight": 0.05, "gate": gate},
                            "wide9": {"task_seed": 9, "warmup_steps": 1000, "base": screened_base,
                                      "screened_out": True}}}
    text = pilot_summary(pilot)
    assert "| wide0warm1150 | task seed 0, warm-up 1,150 steps, sixth-tier weight 0.05 | 0.160 | 0.670 | +0.510 | tier 2: +0.020 |" in text
    assert "Screened out at the base" in text and "wide9 0.900" in text and "| wide9 |" not in text
    assert "1 of the 1 candidates GRPO ran from" in text


def test_a_base_is_read_once_per_settings_and_evaluation(tmp_path, monkeypatch):
    import lab.research.headroom as headroom

    settings = CANDIDATES[0].settings()
    evaluation = headroom.evaluation_for(settings, (1, 1, 1, 1, 1), 8, False, 64)
    monkeypatch.setattr(headroom, "_read_base", lambda *_: {"step": 0, "read": "fresh"})
    assert headroom.base_reading(settings, {}, evaluation, tmp_path) == {"step": 0, "read": "fresh"}

    def read_again(*_):
        raise AssertionError("read again")

    monkeypatch.setattr(headroom, "_read_base", read_again)
    assert headroom.base_reading(settings, {}, evaluation, tmp_path) == {"step": 0, "read": "fresh"}
    other = dataclasses.replace(evaluation, read_test=True)
    with pytest.raises(AssertionError, match="read again"):
        headroom.base_reading(settings, {}, other, tmp_path)


def test_two_looks_as_run_reject_more_often_than_their_last_level():
    """A second look at Pocock's per-look 0.0294 added after a first read at 0.05 (6 then 12 pairs): with no true
    difference the two reject about 0.07 of the time, 0.034 for harm alone; seeded, so the same every render."""
    from lab.research.statistics import two_look_error_rate

    rate = two_look_error_rate(6, 0.05, 12, 0.0294, draws=20_000, seed=3)
    assert 0.06 < rate["two_sided"] < 0.078 and 0.028 < rate["harm"] < 0.041 and rate["nominal_harm"] == 0.025
    assert rate == two_look_error_rate(6, 0.05, 12, 0.0294, draws=20_000, seed=3)
    planned = two_look_error_rate(6, 0.0294, 12, 0.0294, draws=20_000, seed=3)["two_sided"]
    assert 0.04 < planned < 0.06  # Pocock's level at both looks keeps 0.05 in all
    with pytest.raises(ValueError):
        two_look_error_rate(12, 0.05, 6, 0.0294)


def test_the_record_is_computed_from_the_json():
    """What results.md, headroom.md and the packaged evidence quote of the looks, the bases, Holm, the horizons and
    DAPO's updates, from headroom.json and first_look.json (issue 56)."""
    from lab.research import headroom_report as h

    folder = Path(__file__).parents[2] / "docs" / "evidence" / "headroom"
    report = json.loads((folder / "headroom.json").read_text())
    first_look = json.loads((folder / "first_look.json").read_text())
    looks = h.looks(report, first_look)
    assert looks["first"]["n"] == 6 and looks["second"]["n"] == 12 and looks["new_seeds"] == [3, 4, 5]
    assert set(looks["first"]["verdicts"].values()) == {"not shown"}
    new = looks["new"]
    assert round(new["avspo"]["mean"], 3) == -0.081 and [round(x, 3) for x in new["avspo"]["ci95"]] == [-0.184, 0.022]
    assert round(new["avspo_always"]["mean"], 3) == -0.126
    assert h.task(report)["task_seeds"] == [0] and "one task (two warm-up lengths)" in h.acting_evidence(report, first_look)
    assert round(h.open_triggers(report)["wide0warm700"], 2) == 0.98
    distinct = h.distinct_holm(report)
    assert round(distinct["avspo"], 3) == round(distinct["avspo_always"], 3) == 0.022
    assert h.shared_budget(report) == 128_000
    within = h.rollouts_within(report)
    assert within["wide0"]["arms"]["grpo"]["reached"] == 3 and within["wide0warm700"]["arms"]["grpo"]["reached"] == 2
    assert within["wide0"]["arms"]["avspo_always"]["reached"] == 3
    shares = h.updates(report, "dapo")["shares"]
    assert round(min(shares), 2) == 0.32 and round(max(shares), 2) == 0.46
