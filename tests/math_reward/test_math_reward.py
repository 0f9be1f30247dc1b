"""The math reward: answer extraction, math-verify with the reference as gold, the string fallback,
and never raising on malformed model output, in the main thread and in verl's reward threads."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from cost_growth import assert_linear

from avspo_plugin.math_reward import reward, verify
from avspo_plugin.math_reward.answer import (
    EVALUATION_SOURCES,
    TRAINING_SOURCES,
    Extraction,
    answer_parts,
    extract_answer,
    grading_form,
    last_boxed,
    normalize_answer,
)
from avspo_plugin.math_reward.reward import compute_score

# (model output, reference answer, expected score, expected reason) under the training rule (compute_score's
# default); tests/recipes/fixtures/reward_pairs.yaml holds the broader labelled set.
ANSWER_PAIRS = [
    # fractions and equivalent forms
    ("So the probability is $\\boxed{\\frac{1}{6}}$.", "\\frac{1}{6}", 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{\\dfrac{6}{36}}", "\\frac{1}{6}", 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{0.5}", "\\frac12", 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{2\\sqrt{2}}", "\\sqrt{8}", 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{(x+1)^2}", "x^2+2x+1", 1.0, reward.CORRECT_MATH_VERIFY),
    ("The final answer is $\\frac{\\pi}{3}$.", "\\frac{\\pi}{3}", 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", "\\left( 3, \\frac{\\pi}{2} \\right)", 1.0, reward.CORRECT_MATH_VERIFY),
    # units, degrees, percent, thousands separators, currency
    ("The answer is 10 cm.", "10", 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{54 \\text{ square centimeters}}", "54", 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{45^\\circ}", "45", 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{50\\%}", "50", 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{1,000}", "1000", 1.0, reward.CORRECT_MATH_VERIFY),
    ("Change is 2000-1200 = 800 dollars. \\boxed{\\$800}", "800", 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{\\$18.00}", "18", 1.0, reward.CORRECT_MATH_VERIFY),
    ("The answer is 10 dollars.", "10", 1.0, reward.CORRECT_MATH_VERIFY),
    # intervals and sets
    ("\\boxed{[1,3)}", "[1,3)", 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{(1,3)}", "[1,3)", 0.0, reward.WRONG),
    ("\\boxed{(-\\infty, 2) \\cup (5, \\infty)}", "(-\\infty,2)\\cup(5,\\infty)", 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{3, 1, 2}", "1,2,3", 1.0, reward.CORRECT_MATH_VERIFY),
    # several parts, in one box or in several
    ("\\boxed{3} and \\boxed{-2}", "3, -2", 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{-2}", "3, -2", 0.0, reward.WRONG),
    # answer sources of the training rule: the last complete \\boxed, a finished "The answer is" sentence
    ("Adding up, the answer is: 26.", "26", 1.0, reward.CORRECT_MATH_VERIFY),
    ("We get 12 apples, then 18. Final: 18", "18", 0.0, reward.NO_ANSWER),
    ("... Step 3: 14-", "14", 0.0, reward.NO_ANSWER),
    ("First \\boxed{3}, no wait: \\boxed{4", "3", 0.0, reward.NO_ANSWER),
    ("\\boxed{x=2}", "2", 1.0, reward.CORRECT_MATH_VERIFY),
    # text answers
    ("\\boxed{\\text{Monday}}", "\\text{Monday}", 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{\\textbf{(B)}}", "B", 1.0, reward.CORRECT_MATH_VERIFY),
    # numeric references as datasets store them (AMC floats, AIME ints, OlympiadBench lists)
    ("\\boxed{23}", 23.0, 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{130}", 130, 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{\\frac{\\pi}{4}}", ["\\frac{\\pi}{4}"], 1.0, reward.CORRECT_MATH_VERIFY),
    ("\\boxed{-2, 3}", ["3", "-2"], 1.0, reward.CORRECT_MATH_VERIFY),
    # wrong answers
    ("\\boxed{3}", "4", 0.0, reward.WRONG),
    ("I think the answer is \\boxed{131}.", "130", 0.0, reward.WRONG),
    ("\\boxed{\\frac{2}{3}}", "\\frac{3}{2}", 0.0, reward.WRONG),
    ("The answer is 5,200 km.", "5000", 0.0, reward.WRONG),
    # empty and malformed output
    ("", "5", 0.0, reward.EMPTY_OUTPUT),
    ("   \n ", "5", 0.0, reward.EMPTY_OUTPUT),
    ("\\boxed{}", "5", 0.0, reward.NO_ANSWER),
    ("I cannot solve this problem.", "5", 0.0, reward.NO_ANSWER),
    ("\\boxed{\\frac{1}{", "\\frac{1}{2}", 0.0, reward.NO_ANSWER),
    ("$$\\boxed{\\sqrt{}}$$ }}{{ \\left( \\right", "2", 0.0, reward.WRONG),
    (None, "4", 0.0, reward.MALFORMED_OUTPUT),
    (b"\\boxed{4}", "4", 0.0, reward.MALFORMED_OUTPUT),
    # unusable references
    ("\\boxed{4}", "", 0.0, reward.BAD_REFERENCE),
    ("\\boxed{4}", None, 0.0, reward.BAD_REFERENCE),
]

KEYS = {"score", "acc", "pred", "answer_source", "reason", "detail"}


@pytest.mark.parametrize("output, reference, score, reason", ANSWER_PAIRS)
def test_answer_pairs(output, reference, score, reason):
    result = compute_score("math", output, reference, extra_info={"index": 0})
    assert set(result) == KEYS
    assert (result["score"], result["reason"]) == (score, reason), result
    assert result["acc"] is (score == 1.0)


def test_reference_is_gold_in_math_verify():
    # math-verify is asymmetric: an interval answer matches an inequality reference, not the other way
    # round. The reference must be passed as gold.
    assert compute_score("math", "\\boxed{(1,2)}", "1<x<2")["score"] == 1.0
    assert compute_score("math", "\\boxed{1<x<2}", "(1,2)")["score"] == 0.0
    assert verify.verify_here("1<x<2", "(1,2)").equal is True
    assert verify.verify_here("(1,2)", "1<x<2").equal is False


def test_string_fallback_when_math_verify_cannot_decide():
    # A reference math-verify cannot parse still matches a normalised equal answer.
    result = compute_score("minerva", "\\boxed{\\text{Sun-like star}}", "\\text{Sun-like star}")
    assert result["score"] == 1.0
    assert result["reason"] in (reward.CORRECT_MATH_VERIFY, reward.CORRECT_STRING)
    assert normalize_answer("$\\dfrac{1}{2}$.") == normalize_answer("\\frac{1}{2}")
    assert normalize_answer("\\text{ Monday }") == "monday"
    assert normalize_answer("45^{\\circ}") == "45"
    assert normalize_answer("-2, 3") == normalize_answer("3 \\text{ and } -2")  # several values: a set


@pytest.mark.parametrize(
    "answer, form",
    [
        # currency: the escaped dollar is a currency sign, the others math delimiters
        ("\\$18.00", "18.00"),
        ("$\\$1,250$", "1250"),
        # thousands separators, plain and LaTeX; lists and bracketed pairs keep their commas
        ("1,000,000", "1000000"),
        ("10{,}000", "10000"),
        ("10,\\!000", "10000"),
        ("10\\,000", "10000"),
        ("1,000, 2,000", "1000, 2000"),
        ("1,2,3", "1, 2, 3"),
        ("(1,000)", "(1,000)"),
        # units as text or words, percent, degrees
        ("54 \\text{ square centimeters}", "54"),
        ("5\\text{ cm}^2", "5"),
        ("7\\mathrm{~m/s}", "7"),
        ("10 dollars", "10"),
        ("60 km/h", "60"),
        ("12.5\\%", "12.5"),
        ("20%", "20"),
        ("45^{\\circ}", "45"),
        # what is mathematics stays
        ("2 \\pi", "2 \\pi"),
        ("\\text{Monday}", "\\text{Monday}"),
        ("2\\mathrm{e}", "2\\mathrm{e}"),
        ("x \\rightarrow 0", "x \\rightarrow 0"),
        # several parts, a short left side dropped as in Hendrycks' strip_string
        ("$3$, $-2$", "3, -2"),
        ("x = 1 \\text{ or } x = 5", "1, 5"),
        ("1 \\text{ and } 5", "1, 5"),
        ("y = 2x + 1", "2x + 1"),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "( 3, \\frac{\\pi}{2} )"),
    ],
)
def test_grading_form(answer, form):
    assert grading_form(answer) == form


def test_parts_of_an_answer():
    assert answer_parts(grading_form("3, -2")) == ["3", "-2"]
    assert answer_parts(grading_form("(-\\infty, 2) \\cup (5, \\infty)")) == ["(-\\infty, 2) \\cup (5, \\infty)"]
    assert answer_parts(grading_form("\\{1, 2\\}")) == ["\\{1, 2\\}"]
    assert answer_parts(grading_form("1,000")) == ["1000"]
    # Boxes are joined from the end until they have the reference's number of parts.
    text = "check \\boxed{7}; the roots are \\boxed{1} and \\boxed{5}"
    assert last_boxed(text, parts=2) == "1, 5"
    assert last_boxed(text, parts=3) == "7, 1, 5"
    assert last_boxed(text) == "5"
    assert last_boxed("\\boxed{1, 5}", parts=2) == "1, 5"
    assert last_boxed("\\boxed{1} \\boxed{5}", parts=3) == "5"  # too few parts: the last box, scored wrong


def test_extraction_rules():
    # Training: the last complete box, or a finished "The answer is" sentence; nothing else.
    assert extract_answer("so \\boxed{7}. The answer is 8", TRAINING_SOURCES) == Extraction("7", "boxed")
    assert extract_answer("The answer is $x = 3$.", TRAINING_SOURCES) == Extraction("x = 3", "answer_sentence")
    assert extract_answer("The answer is 3.5\nCheck", TRAINING_SOURCES).answer == "3.5"
    assert extract_answer("The answer is 3.5", TRAINING_SOURCES).source == "none"  # unfinished
    assert extract_answer("The answer is 3.", TRAINING_SOURCES).answer == "3"
    assert extract_answer("The answer is 3.5. Done", TRAINING_SOURCES).answer == "3.5"
    assert extract_answer("The answer is 5. Hmm, the answer is 6", TRAINING_SOURCES).source == "none"
    assert extract_answer("... Step 3: 14-", TRAINING_SOURCES).source == "none"
    assert extract_answer("\\boxed{3} then \\boxed{4", TRAINING_SOURCES).source == "none"
    # Evaluation (the paper's): "The answer is" to the end of the line, then the last number.
    assert extract_answer("The answer is 3.5", EVALUATION_SOURCES) == Extraction("3.5", "answer_is")
    assert extract_answer("... Step 3: 14-", EVALUATION_SOURCES) == Extraction("14", "last_number")
    assert extract_answer("got 1/2 then -3.5", EVALUATION_SOURCES).answer == "-3.5"
    assert extract_answer("total 1,234 items", EVALUATION_SOURCES).answer == "1234"
    assert extract_answer("no digits", EVALUATION_SOURCES).source == "none"
    assert last_boxed("\\boxed{\\frac{a}{b}} and \\fbox{c}") == "c"
    assert last_boxed("\\boxed 5$") == "5"
    # The training reward is compute_score's default; reward_kwargs can narrow it further.
    assert compute_score("math", "The answer is 5.", "5")["score"] == 1.0
    strict = compute_score("math", "The answer is 5.", "5", answer_sources=["boxed"])
    assert (strict["score"], strict["reason"]) == (0.0, reward.NO_ANSWER)
    with pytest.raises(ValueError, match="answer_sources"):
        compute_score("math", "\\boxed{5}", "5", answer_sources=["boxed", "guess"])


def test_degenerate_outputs_are_scored_quickly():
    # Repetition loops are common in RL rollouts: thousands of unclosed boxes or words must not make
    # extraction quadratic (3,000 unclosed boxes took seconds when each box was matched on its own).
    # Time is asserted as growth (tests/cost_growth.py), which a loaded machine cannot fail.
    def unclosed(n):
        return "\\boxed{" * n + "1"

    def words(n):
        return "The answer is 5 " + "ab " * n + "."

    assert compute_score("math", unclosed(3000), "1")["reason"] == reward.NO_ANSWER
    assert extract_answer(unclosed(3000), EVALUATION_SOURCES).source == "last_number"
    assert grading_form(words(5000)[14:]) and extract_answer(words(5000), TRAINING_SOURCES).source == "answer_sentence"
    assert_linear(unclosed, 3000, lambda text: compute_score("math", text, "1"))
    assert_linear(unclosed, 3000, lambda text: extract_answer(text, EVALUATION_SOURCES))
    assert_linear(words, 5000, lambda text: (grading_form(text[14:]), extract_answer(text, TRAINING_SOURCES)))
    # Nested boxes are one box; a box that holds only a box is unwrapped.
    assert last_boxed("\\boxed{\\boxed{\\boxed{7}}}") == "7"
    assert last_boxed("\\boxed{3} and \\boxed{\\boxed{-2}}", parts=2) == "3, -2"


def test_truncated_output_earns_nothing_in_training():
    # The last-number fallback rewards an output cut off at the length limit; the training rule does not.
    truncated = "Let me compute: 7 + 7 = 14, then Step 3: 14-"
    assert compute_score("math", truncated, "14")["score"] == 0.0
    assert reward.score_answer(truncated, "14", answer_sources=EVALUATION_SOURCES).acc is True


def test_pred_is_the_extracted_answer():
    result = compute_score("gsm8k", "3 boxes of 12 is 36, minus 10: \\boxed{26}", "26")
    assert (result["pred"], result["answer_source"]) == ("26", "boxed")


def test_internal_errors_score_zero_with_a_reason(monkeypatch):
    def broken(*args, **kwargs):
        raise RecursionError("deep sympy tree")

    monkeypatch.setattr(reward, "math_verify_equal", broken)
    result = compute_score("math", "\\boxed{5}", "5")
    assert (result["score"], result["reason"]) == (0.0, reward.INTERNAL_ERROR)
    assert "RecursionError" in result["detail"]


def test_reward_threads_score_like_the_main_thread():
    # verl 0.9 calls the reward function through run_in_executor, i.e. in a worker thread, where
    # math-verify's signal-based timeouts cannot run; the worker pool must give the same scores.
    pairs = [(output, reference) for output, reference, _, _ in ANSWER_PAIRS[:12]]
    expected = [compute_score("math", output, reference) for output, reference in pairs]
    with ThreadPoolExecutor(4) as threads:
        threaded = list(threads.map(lambda pair: compute_score("math", *pair), pairs))
    assert threaded == expected
    assert all(result["score"] == 1.0 for result in threaded)


SLEEP_S = 120


def test_worker_pool_kills_an_overrunning_call_and_recovers():
    pool = verify.WorkerPool(1)
    try:
        # Killed: back before the call would have ended (no absolute limit, which a loaded machine could pass).
        started = time.monotonic()
        assert pool.run(time.sleep, (SLEEP_S,), wall_limit_s=3) == (False, None)
        assert time.monotonic() - started < SLEEP_S
        assert pool.run(verify.verify_here, ("\\frac{1}{2}", "0.5"), wall_limit_s=60) == (
            True,
            verify.Verdict(True, "math-verify"),
        )
    finally:
        pool.close()


def test_score_many_matches_one_by_one():
    pairs = [(output, reference) for output, reference, _, _ in ANSWER_PAIRS[:6]] + [("\\boxed{9}", "8")]
    one_by_one = [reward.score_answer(output, reference, answer_sources=TRAINING_SOURCES) for output, reference in pairs]
    assert reward.score_many(pairs, answer_sources=TRAINING_SOURCES, workers=2) == one_by_one
    assert [score.acc for score in one_by_one] == [True] * 6 + [False]


def test_score_many_sizes_its_pool_by_the_cpus_it_may_use(monkeypatch):
    sized = []

    class RecordingPool:
        def __init__(self, workers, mp_context=None):
            sized.append(workers)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def map(self, fn, items, chunksize=1):
            return map(fn, items)

    monkeypatch.setattr(reward, "ProcessPoolExecutor", RecordingPool)
    monkeypatch.setattr(reward.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(reward.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    pairs = [("\\boxed{1}", "1"), ("\\boxed{2}", "2")]
    reward.score_many(pairs, answer_sources=TRAINING_SOURCES)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "2")
    reward.score_many(pairs, answer_sources=TRAINING_SOURCES)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "16")  # the affinity mask is the tighter bound
    reward.score_many(pairs, answer_sources=TRAINING_SOURCES)
    assert sized == [3, 2, 3]
