"""Hostile model outputs cost the math reward bounded time and memory, and never raise.

The reward runs inside verl's reward workers on every rollout: a runaway output (nested boxes, a
page of thousands-separated numbers, a megabyte of digits) must score in time linear in its length and
a few MiB of Python memory, however it is built. Before the linear extraction, 6 KB of nested ``\\boxed{``
took 19 s and 728 MiB here, and 23 KB of "1,000 " in a box 1.2 s (quadratic). Time is asserted as growth
(tests/cost_growth.py: the input doubled costs at most 3 times as much), never as an absolute limit, which
a loaded machine fails by chance.
"""

from __future__ import annotations

import tracemalloc

import pytest
from cost_growth import assert_linear
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avspo_plugin.math_reward.answer import EVALUATION_SOURCES, TRAINING_SOURCES, last_boxed
from avspo_plugin.math_reward.reward import ANSWER_TOO_LONG, MAX_ANSWER_CHARS, score_answer

MEMORY_BOUND_MIB = 100


def scored(text: str, sources=EVALUATION_SOURCES):
    return score_answer(text, "1", answer_sources=sources)


def assert_bounded(build, size: int, sources=EVALUATION_SOURCES):
    """``build(size)`` scores (against the reference 1) in time linear in its length and bounded Python memory;
    returns its score."""
    text = build(size)
    tracemalloc.start()
    try:
        score = scored(text, sources)
    finally:
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    assert peak < MEMORY_BOUND_MIB, f"{len(text)} characters took {peak:.0f} MiB of Python memory"
    assert_linear(build, size, lambda text: scored(text, sources))
    return score


@pytest.fixture(scope="module", autouse=True)
def math_verify_loaded():
    # The first call imports math-verify and sympy: not the cost of an output.
    score_answer("\\boxed{1}", "1", answer_sources=EVALUATION_SOURCES)


def nested_boxes(n: int) -> str:
    return "\\boxed{" * n + "1" + "}" * n


def test_twenty_kilobytes_of_nested_boxes():
    assert assert_bounded(nested_boxes, 2600).acc  # a box that holds only a box is unwrapped, as before
    assert last_boxed("\\boxed{x" * 2600 + "1" + "}" * 2600).startswith("x\\boxed{x")


def test_a_page_of_thousands_separated_numbers():
    score = assert_bounded(lambda n: "\\boxed{" + "1,000 " * n + "}", 8200)  # 48 KB
    assert (score.reason, score.detail) == (ANSWER_TOO_LONG, f"{len(('1,000 ' * 8200).strip())} characters")
    assert not assert_bounded(lambda n: "1,000 " * n, 8200).acc


@pytest.mark.parametrize(
    "build,size",
    [
        (nested_boxes, 130_000),  # nested, closed
        (lambda n: "\\boxed{" * n, 150_000),  # unclosed
        (lambda n: "}" * n + "{" * n, 500_000),  # unbalanced
        (lambda n: "7" * n, 1_000_000),  # one number
        (lambda n: "The answer is " * n + "5.", 70_000),
        (lambda n: "\\fbox{\\boxed 1 " * n, 60_000),
        (lambda n: "The answer is 5" + " ." * n + "x", 32_000),  # 64 KB: an end-anchored strip was quadratic
        (lambda n: "\\boxed{1" + " " * n + "and 2}", 800),  # a space run inside an answer: the "and" pattern was cubic
    ],
    ids=["nested", "unclosed", "unbalanced", "digits", "answer-is", "bare-arguments", "period-run", "space-run"],
)
def test_a_degenerate_output(build, size):
    for sources in (TRAINING_SOURCES, EVALUATION_SOURCES):
        assert_bounded(build, size, sources)


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

    def build(n: int) -> str:
        return (unit * n if not nest else "\\boxed{" * n + unit + "}" * n)[:400_000]

    score = assert_bounded(build, max(repeat, 2))
    assert score.score in (0.0, 1.0)
