"""Hostile model outputs cost the math reward bounded time and memory, and never raise.

The reward runs inside verl's reward workers on every rollout: a runaway output (nested boxes, a
page of thousands-separated numbers, a megabyte of digits) must score in well under a second per
100 KB and a few MiB of Python memory, however it is built. Before the linear extraction, 6 KB of
nested ``\\boxed{`` took 19 s and 728 MiB here, and 23 KB of "1,000 " in a box 1.2 s (quadratic).
"""

from __future__ import annotations

import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avspo_plugin.math.answer import EVALUATION_SOURCES, TRAINING_SOURCES, last_boxed
from avspo_plugin.math.reward import ANSWER_TOO_LONG, MAX_ANSWER_CHARS, score_answer

MEMORY_BOUND_MIB = 100
# CPU seconds per megabyte of output for everything but math-verify, which has its own time limit
# (verify.DEFAULT_TIMEOUT_S); measured about 2 s for the worst megabyte below, and 7.35 s on a slower machine
# (2026-11-28, `import verl` at 7-8 CPU s against 4.4-6.4), so bounded at 5x the first: a linear cost passes, a
# quadratic one (thousands of seconds for a megabyte) does not.
# CPU time, not wall time: the suite runs on two busy workers, where wall time is not the output's cost.
SECONDS_PER_MB = 10.0


def measured(text: str, sources=EVALUATION_SOURCES):
    """(score, CPU seconds, peak MiB of Python allocations) of scoring ``text`` against the reference 1."""
    tracemalloc.start()
    start = time.process_time()
    try:
        score = score_answer(text, "1", answer_sources=sources)
    finally:
        seconds = time.process_time() - start
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return score, seconds, peak


def assert_bounded(text: str, sources=EVALUATION_SOURCES):
    score, seconds, peak = measured(text, sources)
    limit = 1.0 + SECONDS_PER_MB * len(text) / 1e6
    assert seconds < limit, f"{len(text)} characters took {seconds:.2f} CPU s (limit {limit:.2f} s)"
    assert peak < MEMORY_BOUND_MIB, f"{len(text)} characters took {peak:.0f} MiB of Python memory"
    return score


@pytest.fixture(scope="module", autouse=True)
def math_verify_loaded():
    # The first call imports math-verify and sympy: not the cost of an output.
    score_answer("\\boxed{1}", "1", answer_sources=EVALUATION_SOURCES)


def test_twenty_kilobytes_of_nested_boxes():
    text = "\\boxed{" * 2600 + "1" + "}" * 2600
    assert assert_bounded(text).acc  # a box that holds only a box is unwrapped, as before
    assert last_boxed("\\boxed{x" * 2600 + "1" + "}" * 2600).startswith("x\\boxed{x")


def test_a_page_of_thousands_separated_numbers():
    boxed = "\\boxed{" + "1,000 " * 8200 + "}"  # 48 KB
    score = assert_bounded(boxed)
    assert (score.reason, score.detail) == (ANSWER_TOO_LONG, f"{len(('1,000 ' * 8200).strip())} characters")
    assert not assert_bounded("1,000 " * 8200).acc


@pytest.mark.parametrize(
    "text",
    [
        "\\boxed{" * 130_000 + "1" + "}" * 130_000,  # nested, closed
        "\\boxed{" * 150_000,  # unclosed
        "}" * 500_000 + "{" * 500_000,  # unbalanced
        "7" * 1_000_000,  # one number
        "The answer is " * 70_000 + "5.",
        "\\fbox{\\boxed 1 " * 60_000,
        "The answer is 5" + " ." * 32_000 + "x",  # 64 KB: an end-anchored strip was quadratic
        "\\boxed{1" + " " * 800 + "and 2}",  # a space run inside an answer: the "and" pattern was cubic
    ],
    ids=["nested", "unclosed", "unbalanced", "digits", "answer-is", "bare-arguments", "period-run", "space-run"],
)
def test_a_degenerate_output(text):
    for sources in (TRAINING_SOURCES, EVALUATION_SOURCES):
        assert_bounded(text, sources)


def test_answers_up_to_the_cap_are_graded_and_longer_ones_are_not():
    long_sum = "+".join(["1"] * (MAX_ANSWER_CHARS // 2))  # 999 characters, a real (if silly) expression
    assert len(long_sum) <= MAX_ANSWER_CHARS
    assert score_answer(f"\\boxed{{{long_sum}}}", "500", answer_sources=EVALUATION_SOURCES).reason != ANSWER_TOO_LONG
    assert score_answer(f"\\boxed{{{long_sum}+1}}", "501", answer_sources=EVALUATION_SOURCES).reason == ANSWER_TOO_LONG


PIECES = st.sampled_from(
    ["\\boxed{", "\\fbox{", "{", "}", "1,000", ",", "7", " ", "\n", "$", "\\text{m}", "\\left(", "\\right)",
     "The answer is ", ".", "\\frac{1}{2}", "\\!", "{,}", "and "]
)  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(PIECES, min_size=1, max_size=30), repeat=st.integers(1, 4000), nest=st.booleans())
def test_any_repetition_of_latex_pieces_is_bounded(pieces, repeat, nest):
    unit = "".join(pieces)
    text = unit * repeat if not nest else "\\boxed{" * repeat + unit + "}" * repeat
    score = assert_bounded(text[:400_000])
    assert score.score in (0.0, 1.0)
