"""The advice rules of lab/research/tasks_advice.py, fixed before the tasks study's look: what each reading lets the
product say, on reports built to land on each side of each rule."""

from __future__ import annotations

import re

import pytest

from lab.research import tasks_advice as advice

ARMS = ("avspo", "avspo_always_all_pass", "avspo_always_all_fail")


def regime_test(mean: float, low: float, high: float, tasks: list[str]) -> dict:
    return {"mean": mean, "ci95": [low, high], "p": 0.01, "n": len(tasks), "tasks": tasks}


def report(primary_verdict: str = "helps") -> dict:
    tasks = {
        "task1": {"regime": "all_fail", "regime_check": {"passed": True, "early_all_fail": 0.6, "early_all_pass": 0.1}},
        "task2": {"regime": "all_fail", "regime_check": {"passed": True, "early_all_fail": 0.4, "early_all_pass": 0.1}},
        "task3": {"regime": "all_fail", "regime_check": {"passed": False, "early_all_fail": 0.1, "early_all_pass": 0.5}},
        "task4": {"regime": "all_pass", "regime_check": {"passed": True, "early_all_fail": 0.1, "early_all_pass": 0.7}},
        "task5": {"regime": "all_pass", "regime_check": {"passed": True, "early_all_fail": 0.0, "early_all_pass": 0.5}},
    }
    real = {"real": True, "mean": 0.05, "ci95": [0.01, 0.09], "p": 0.02, "p_holm": 0.04, "mde": 0.06,
            "seed_pairs": {"mean": 0.05, "ci95": [0.02, 0.08]}}
    return {
        "tasks": tasks,
        "verdicts": {"avspo": primary_verdict, "avspo_always_all_pass": "not shown", "avspo_always_all_fail": "did not act"},
        "comparison": {
            "primary": {"avspo": real, "avspo_always_all_pass": {**real, "p_holm": 0.3},
                        "avspo_always_all_fail": {"real": False, "status": "did not act", "why": "acted on 2 tasks (< 3)"}},
            "greedy": {"avspo": {**real, "p_holm": 0.3}, "avspo_always_all_pass": {**real, "p_holm": 0.3},
                       "avspo_always_all_fail": {"real": False, "status": "did not act", "why": "acted on 2 tasks (< 3)"}},
        },
        "by_regime": {
            "avspo": {"all_fail": regime_test(-0.02, -0.05, 0.01, ["task1", "task2"]),
                      "all_pass": regime_test(0.04, 0.01, 0.07, ["task4", "task5"])},
            "avspo_always_all_pass": {"all_fail": {"n": 0, "tasks": []},
                                      "all_pass": regime_test(0.06, 0.02, 0.10, ["task4", "task5"])},
            "avspo_always_all_fail": {"all_fail": regime_test(-0.08, -0.12, -0.04, ["task1", "task2"]),
                                      "all_pass": {"mean": 0.01, "n": 1, "tasks": ["task4"]}},
        },
        "planned_mde": {"avspo": {"with_tau": {"mde": 0.055}}},
        "predictor": {"verdict": "cannot tell", "why": "its accuracy did not beat the majority sign's"},
    }


@pytest.mark.parametrize("test, reading", [
    (regime_test(0.02, 0.001, 0.04, ["a", "b"]), "helped"),
    (regime_test(-0.02, -0.04, -0.001, ["a", "b"]), "hurt"),
    (regime_test(0.02, -0.001, 0.04, ["a", "b"]), "neither shown"),
    (regime_test(0.0, 0.0, 0.0, ["a", "b"]), "neither shown"),
    ({"mean": 0.3, "n": 1, "tasks": ["a"]}, "one task"),
    ({"n": 0, "tasks": []}, "not read"),
])
def test_a_regime_reading_is_worded_by_where_its_interval_lies(test, reading):
    assert advice.regime_reading(test) == reading


def test_each_regime_names_what_helped_and_what_hurt_there_and_nothing_else():
    fail, pass_ = advice.regime_case(report(), "all_fail"), advice.regime_case(report(), "all_pass")
    assert (fail["helped"], fail["hurt"]) == ([], ["avspo_always_all_fail"])
    assert pass_["helped"] == ["avspo", "avspo_always_all_pass"]
    assert pass_["hurt"] == []
    # GRPO's early shares over the regime's tasks whose check passed (task3's failed check is left out).
    assert (fail["tasks"], fail["all_fail"], fail["all_pass"]) == (2, pytest.approx(0.5), pytest.approx(0.1))
    assert "not read (no task of the regime where it acted passed the check)" in fail["clause"] and "read on one task only (+0.010" in pass_["clause"]


@pytest.mark.parametrize("verdict, words", sorted(advice.PRIMARY_WORDS.items()))
def test_the_sentence_carries_the_primary_verdict_and_figures_only_for_a_real_test(verdict, words):
    r = report(verdict)
    if verdict in ("did not act", "not distinct"):
        r["comparison"]["primary"]["avspo"] = {"real": False, "status": verdict, "why": "acted on 2 tasks (< 3)"}
    sentence, detail = advice.acting_evidence(r), advice.acting_evidence_detail(r)
    assert f"the paper's AVSPO {words} (docs/evidence/results.md). Of its parts, at T = 1, always on all-pass groups " \
           "showed neither help nor harm against GRPO and always on all-fail groups acted on too few tasks to be read" \
           in sentence and "[" not in sentence
    assert ". Per regime (secondary, tasks whose regime check passed), " in sentence
    primary = detail.split(" Secondary: ")[0]
    assert ("+0.050 [+0.010, +0.090]" in primary) == (verdict not in ("did not act", "not distinct"))
    assert "where all-fail groups dominated (2 tasks), it found no setting to help and always on all-fail groups to " \
           "hurt" in sentence


def test_the_readme_sentences_have_no_figure_and_none_is_over_300_characters():
    text = advice.readme_sentences(report())
    assert not re.search(r"\[|\d\.\d", text)
    sentences = text.split(". ")
    assert len(sentences) == 3 and max(map(len, sentences)) <= 300
    assert sentences[0] == "In this project's CPU lab, over 5 independent tasks (a tiny model learning addition), the paper's AVSPO beat GRPO"
    assert sentences[2] == ("Per regime (secondary, tasks whose regime check passed), where all-fail groups dominated (2 "
                            "tasks), it found no setting to help and always on all-fail groups to hurt; where all-pass "
                            "groups dominated (2 tasks), it found the paper's AVSPO and always on all-pass groups to help.")


def test_the_cases_analyze_places_a_run_among_are_the_regimes_with_a_checked_task():
    r = report()
    for name in ("task4", "task5"):
        r["tasks"][name]["regime_check"]["passed"] = False
    assert [case["regime"] for case in advice.cases(r)] == ["all_fail"]
    assert "all-pass groups dominated" not in advice.acting_evidence(r)


def test_a_greedy_verdict_is_named_where_it_differs_from_the_one_at_t1():
    r = report("helps")  # greedy: not shown for the paper's AVSPO, the same as at T = 1 for the ablations
    assert advice.greedy_changes(r) == [("avspo", "not shown")]
    assert "; at greedy decoding, the paper's AVSPO showed neither help nor harm against GRPO." in advice.acting_evidence(r)
    r["comparison"]["greedy"]["avspo"]["p_holm"] = 0.01
    assert advice.greedy_changes(r) == []
    assert "; the same at greedy decoding." in advice.acting_evidence(r)
    assert "Greedy decoding, beside: the paper's AVSPO (threshold_mode=adaptive, every default): helps (+0.050 " \
           "[+0.010, +0.090], Holm p 0.01)" in advice.acting_evidence_detail(r)
