"""Symbolic answer checking with math-verify, safe in the threads where verl computes rewards.

math-verify's timeouts (``signal.alarm``) work only in the main thread, and verl 0.9 scores in a worker thread: there
the check runs in a small forkserver pool with a wall-clock limit (a script scoring from threads needs the
``if __name__ == "__main__":`` guard). The reference is always math-verify's ``gold`` (``verify`` is not symmetric).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from math_verify import parse, verify
from math_verify.errors import TimeoutException

DEFAULT_TIMEOUT_S = 5
WORKERS_ENV = "AVSPO_MATH_VERIFY_WORKERS"


def _pool_workers() -> int:
    """Worker processes per reward process (verl already runs several reward workers): default 2."""
    text = os.environ.get(WORKERS_ENV, "2")
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{WORKERS_ENV}={text!r} is invalid: a positive integer")
    return int(text)


@dataclass(frozen=True)
class Verdict:
    """``equal`` is None when math-verify could not decide (unparsable reference, timeout, error)."""

    equal: bool | None
    note: str


def as_latex(answer: str) -> str:
    """An answer string as math-verify's LaTeX extraction expects it: inside math delimiters."""
    stripped = answer.strip()
    if "$" in stripped or "\\boxed" in stripped or stripped.startswith(("\\(", "\\[")):
        return stripped
    return f"${stripped}$"


def verify_here(gold: str, answer: str, timeout_s: int = DEFAULT_TIMEOUT_S) -> Verdict:
    """math-verify in this thread. Needs the main thread when ``timeout_s`` > 0 (signal-based timeouts)."""
    try:
        gold_parsed = parse(as_latex(gold), parsing_timeout=timeout_s, raise_on_error=True)
        if not gold_parsed:
            return Verdict(None, "reference not parsable")
        answer_parsed = parse(as_latex(answer), parsing_timeout=timeout_s, raise_on_error=True)
        if not answer_parsed:
            return Verdict(False, "answer not parsable")
        equal = verify(gold_parsed, answer_parsed, timeout_seconds=timeout_s, raise_on_error=True)
        return Verdict(bool(equal), "math-verify")
    except TimeoutException:
        return Verdict(None, "math-verify timed out")
    except Exception as err:  # sympy raises a wide variety of errors on odd input
        return Verdict(None, f"math-verify error: {type(err).__name__}")


def worker_context() -> multiprocessing.context.BaseContext:
    """The start method of the scoring pools: forkserver, its server preloading the math reward (math-verify,
    sympy). The preload list is the process's; a server already running keeps its own."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["avspo_plugin.math_reward.reward"])
    return context


class WorkerPool:
    """A lazily started process pool whose stuck workers get killed: a call that overruns its wall-clock
    limit kills the pool's processes and the next call starts a fresh pool."""

    def __init__(self, workers: int) -> None:
        self._workers = max(1, workers)
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def _get_pool(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(self._workers, mp_context=worker_context())
            return self._pool

    def _discard(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        # ProcessPoolExecutor has no public way to stop a running task; its worker processes are killed.
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def run(self, fn: Callable[..., Any], args: tuple, wall_limit_s: float) -> tuple[bool, Any]:
        """``(True, fn(*args))`` from a worker process, or ``(False, None)`` when it overran the limit."""
        for _attempt in range(2):
            pool = self._get_pool()
            try:
                future: Future = pool.submit(fn, *args)
                return True, future.result(timeout=wall_limit_s)
            except FutureTimeout:
                self._discard(pool)
                return False, None
            except BrokenProcessPool:
                # Another call's overrun killed this pool under us: once more on a fresh one.
                self._discard(pool)
        raise RuntimeError("math-verify worker pool broke twice in a row")

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


WORKER_POOL = WorkerPool(_pool_workers())


def math_verify_equal(gold: str, answer: str, timeout_s: int = DEFAULT_TIMEOUT_S) -> Verdict:
    """Whether ``answer`` equals the reference ``gold`` by math-verify, from any thread."""
    if threading.current_thread() is threading.main_thread():
        return verify_here(gold, answer, timeout_s)
    # Both parses and the comparison each get timeout_s in the worker; the slack covers a pool start.
    finished, verdict = WORKER_POOL.run(verify_here, (gold, answer, timeout_s), 3 * timeout_s + 30)
    return verdict if finished else Verdict(None, "math-verify overran its time limit (worker killed)")
