"""The speed benchmark still runs end to end (on a tiny batch: this checks that it works, not how fast), as
`python benchmarks/estimator_bench.py` runs it, in this process."""

import runpy
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "estimator_bench.py"


def test_benchmark_prints_a_row_per_size(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(BENCH), "--sizes", "64x16,128x8", "--repeats", "1"])
    runpy.run_path(str(BENCH), run_name="__main__")
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("cpu ")]
    assert [(row[1], row[2]) for row in rows] == [("64", "16"), ("128", "8")]
    assert all(float(row[4]) > 0 for row in rows)  # avspo ms; the floor of so small a batch can print 0.00
