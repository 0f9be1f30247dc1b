"""``avspo doctor``: does the avspo adapter apply to the framework installed here? One module per host (``--host``),
here rather than in the adapters: importing :mod:`avspo_plugin.verl` registers the estimator the checks look for."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator

from avspo_plugin.commands.doctor import verl

HOSTS = ("verl", "trl", "openrlhf")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", choices=HOSTS, default="verl",
        help="the framework to check (default: verl). trl and openrlhf: installed versions, supported or not, "
        "whether the adapter applies. Every host: exit 0 READY, 1 NOT READY (not installed, unsupported, a check "
        "failed)",
    )
    verl.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """The host's checks, the verdict line first; what the libraries they import write on stderr is one line, shown
    in full only when a check failed."""
    findings = io.StringIO()
    try:
        with third_party_output() as third_party, contextlib.redirect_stdout(findings):
            status = importlib.import_module(f"{__name__}.{args.host}").run(args)
    except BaseException:
        sys.stdout.write(findings.getvalue())  # what was found before the error, then the error as it is
        raise
    detail = findings.getvalue()
    print(verdict(status, detail))
    sys.stdout.write(detail)
    lines = [line for line in third_party.getvalue().splitlines() if line.strip()]
    if lines and status == 0:
        warnings = sum(bool(WARNING.search(line)) for line in lines)
        print(f"  ({warnings} third-party warning(s) on stderr while the checks imported verl, trl, ray and the like, "
              f"{len(lines)} lines, e.g. \"{_first_warning(lines)}\": not about avspo, not shown)")
    elif lines:
        print("  third-party output on stderr during the checks (it may bear on the failure):")
        print("\n".join(f"    {line}" for line in lines))
    return status


# A warning's first line: Python's "path:line: UserWarning: text", or a logger's "WARNING..."
WARNING = re.compile(r"^\S.*?(\b\w*Warning: .*)|^(WARNING\b.*)")


def verdict(status: int, detail: str) -> str:
    """The first line: ready or not, and why not (the first [FAIL] finding)."""
    failed = [line.split("[FAIL]", 1)[1].strip() for line in detail.splitlines() if "[FAIL]" in line]
    warned = sum("[warn]" in line for line in detail.splitlines())
    if status == 0 and not failed:
        return f"avspo doctor: READY ({warned} warning(s) below)" if warned else "avspo doctor: READY"
    reason = failed[0] if failed else f"exit status {status}"
    more = f"; {len(failed) - 1} more failed check(s) below" if len(failed) > 1 else ""
    return f"avspo doctor: NOT READY: {reason.rstrip(':.')}{more}"


def _first_warning(lines: list[str]) -> str:
    match = next((match for match in map(WARNING.search, lines) if match), None)
    text = (match.group(1) or match.group(2)) if match else lines[0].strip()
    return text if len(text) <= 90 else text[:87] + "..."


@contextlib.contextmanager
def third_party_output() -> Iterator[io.StringIO]:
    """Everything written on stderr while the block runs (sys.stderr, file descriptor 2, and every Python warning,
    written as Python would), into the StringIO yielded, filled once the block ends."""
    captured, python_level = io.StringIO(), io.StringIO()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            with contextlib.redirect_stderr(python_level), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("default")
                yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            shown = "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line) for w in caught)
            captured.write(shown + python_level.getvalue() + sink.read().decode(errors="replace"))
