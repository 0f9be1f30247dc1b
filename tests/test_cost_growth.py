"""tests/cost_growth.py's assertion tells a linear cost from a quadratic one, by their ratio within one run."""

import pytest
from cost_growth import assert_linear


def scan(text: str) -> int:
    return sum(1 for _ in text)


def pairs(text: str) -> int:
    return sum(1 for _ in text for _ in text)


def test_a_linear_cost_passes_and_a_quadratic_one_fails():
    assert_linear(lambda n: "x" * n, 400_000, scan)
    with pytest.raises(AssertionError, match=r"doubling the input multiplied the cost by [3-9]"):
        # Large enough (16 million pairs) that a stall of the machine cannot shrink the ratio of 4 below 3.
        assert_linear(lambda n: "x" * n, 4000, pairs)
