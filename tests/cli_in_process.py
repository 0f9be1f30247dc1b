"""``avspo ARGS`` through the console script's own ``main()`` in the test process, its output captured: for tests
where a fresh interpreter is not what they test (one costs several CPU-seconds of imports on 2 cores)."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

from avspo_plugin.tools.cli import main


@dataclass(frozen=True)
class CliRun:
    returncode: int
    stdout: str
    stderr: str


def avspo(*args: str) -> CliRun:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        returncode = main(list(args))
    return CliRun(returncode, out.getvalue(), err.getvalue())
