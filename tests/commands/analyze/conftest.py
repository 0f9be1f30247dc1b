"""Fixtures of the analyser's tests; the generated runs live in generated_runs.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avspo_plugin.commands.main import main


@pytest.fixture
def analyze(tmp_path, capsys):
    """Run ``avspo analyze ARGS --out tmp/out`` in-process; returns (exit code, analysis.json or None, stdout, stderr)."""

    def run(*args: str, out: Path | None = None, plots: bool = False):
        out = out or tmp_path / "out"
        argv = ["analyze", *map(str, args), "--out", str(out)] + ([] if plots else ["--no-plots"])
        code = main(argv)
        captured = capsys.readouterr()
        report = out / "analysis.json"
        document = json.loads(report.read_text()) if code == 0 else None
        return code, document, captured.out, captured.err

    return run
