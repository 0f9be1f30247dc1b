"""``avspo ARGS`` through the console script's own ``main()`` in the test process, its output captured: for tests
where a fresh interpreter is not what they test (one costs several CPU-seconds of imports on 2 cores)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from dataclasses import dataclass

from avspo_plugin.commands.main import main


@dataclass(frozen=True)
class CliRun:
    returncode: int
    stdout: str
    stderr: str


def avspo(*args: str) -> CliRun:
    return captured(main, *args)


def captured(program: Callable[[list[str]], int], *args: str) -> CliRun:
    """``program(args)`` (a command's main: the console script's, ``python -m lab``'s) with its output captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        returncode = program(list(args))
    return CliRun(returncode, out.getvalue(), err.getvalue())
