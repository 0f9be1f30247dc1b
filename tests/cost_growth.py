"""How a cost grows with the size of its input, measured so that a loaded machine cannot fail a test.

An absolute time limit fails whenever the machine is busy (CI runs the suite on two shared workers). What a test of
a linear algorithm can assert instead is the ratio of two CPU times taken in one run: the input doubled costs at most
GROWTH_LIMIT times the input (a linear cost doubles, a quadratic one quadruples). Load slows both measures alike, and
each is the least of its tries, the two sizes taken in turn: at least MIN_TRIES before any verdict (one stall of the
machine during the smaller input's try would otherwise pass a quadratic cost), more up to REPEATS only while the ratio
is above the limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

# Doubling a linear cost doubles it, a quadratic one quadruples it: 3 tells them apart with room for noise.
GROWTH_LIMIT = 3.0
MIN_TRIES = 2
REPEATS = 4
# Below this the two times are the timer's and the interpreter's noise, not the input's cost.
NOISE_FLOOR_S = 0.005


def cpu_seconds(call: Callable[[], Any]) -> float:
    start = time.process_time()
    call()
    return time.process_time() - start


def assert_linear(build: Callable[[int], str], size: int, cost: Callable[[str], Any]) -> None:
    """``cost(build(size))`` takes at most GROWTH_LIMIT times ``cost(build(size // 2))`` (plus NOISE_FLOOR_S)."""
    half, full = build(size // 2), build(size)
    least_half = least_full = math.inf
    for tries in range(1, REPEATS + 1):
        least_half = min(least_half, cpu_seconds(lambda: cost(half)))
        least_full = min(least_full, cpu_seconds(lambda: cost(full)))
        if tries >= MIN_TRIES and least_full <= GROWTH_LIMIT * least_half + NOISE_FLOOR_S:
            return
    raise AssertionError(
        f"{len(full)} characters took {least_full:.3f} CPU s and {len(half)} took {least_half:.3f} CPU s: doubling "
        f"the input multiplied the cost by {least_full / max(least_half, 1e-9):.1f} (a linear cost doubles; limit "
        f"{GROWTH_LIMIT:g}), the least of {REPEATS} tries each"
    )
