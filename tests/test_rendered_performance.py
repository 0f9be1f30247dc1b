"""docs/method/performance.md's measurements are the benchmarks' JSON (renderer/performance_tables.py): each run is a
table, where avspo's time goes, and its rows against the targets, met or not as its numbers say."""

import json
import re

import pytest

from renderer import performance_tables
from renderer.docs_pages import with_block

ROW = {"B": 8192, "L": 1024, "floor_ms": 16.0, "avspo_ms": 21.6, "grpo_vectorized_ms": 21.09, "grpo_ms": 91.6,
       "monitor_ms": 5.0, "token_sum_ms": 2.9, "core_ms": 2.5, "broadcast_ms": 13.3}


def bench_run(rows: list[dict], load: list[float]) -> dict:
    return {"command": "python benchmarks/estimator_bench.py --threads 1", "recorded": "2026-11-28 20:00 UTC",
            "device": "cpu", "where": "cpu, threads 1", "threads": 1, "repeats": 15, "group_size": 8,
            "clock": "wall", "machine": {"processor": "AMD EPYC", "cpus": 2, "nice": 0, "load_average": load},
            "versions": {"python": "3.11.7", "avspo-plugin": "0.1.0", "torch": "2.13.0+cpu", "verl": "0.9.1"},
            "rows": rows}


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setattr(performance_tables, "RUNS", tmp_path)
    return tmp_path


def test_a_run_is_a_table_its_parts_and_its_rows_against_the_targets(runs):
    small = {**ROW, "B": 1024, "avspo_ms": 1.78, "floor_ms": 0.45, "grpo_vectorized_ms": 1.06}
    (runs / "bench-1.json").write_text(json.dumps(bench_run([ROW, small], [0.5, 0.7])))
    page = performance_tables.measured()
    assert "| 8192 | 1024 | 16.00 | 21.60 | 21.09 | 91.6 | 1.02 | 1.35 | 5.00 | 0.24 |" in page
    # The parts: token sum, core, broadcast; the adapter and the rest is what avspo takes beyond them.
    assert "| 8192 | 1024 | 2.90 | 2.50 | 13.30 | 2.90 | 21.60 | 16.00 | 1.01 |" in page
    targets = page.split("## Against the targets")[1]
    assert "| bench-1.json | 1024 | 1.02 (not met) | 1.35 (not met) |" in targets
    assert "| 1024 |" not in targets.replace("| bench-1.json | 1024 |", "")  # only B = 8192 is held to the targets
    assert "a busy machine's" not in page


def test_a_run_that_meets_the_targets_says_so_and_a_busy_machine_is_named(runs):
    fast, even = {**ROW, "avspo_ms": 18.0}, {**ROW, "L": 4096, "avspo_ms": 21.0905}
    (runs / "bench-2.json").write_text(json.dumps(bench_run([fast, even], [4.3, 5.1])))
    page = performance_tables.measured()
    assert "| bench-2.json | 1024 | 0.85 (met) | 1.12 (met) |" in page
    assert "| bench-2.json | 4096 | 1.00 (met) | 1.32 (not met) |" in page  # met or not as the page reads it
    assert "Load average 4.3 at the start and 5.1 at the end" in page and "a busy machine's" in page


def test_the_page_holds_what_the_recorded_runs_render():
    text = performance_tables.PAGE.read_text(encoding="utf-8")
    for markers, body in performance_tables.blocks():
        assert with_block(text, *markers, body) == text, f"{performance_tables.PAGE} is stale: run `python -m renderer`"
    measured = text.split(performance_tables.MEASURED[0])[1].split(performance_tables.MEASURED[1])[0]
    assert len(re.findall(r"^### ", measured, flags=re.M)) == len(performance_tables.bench_runs()) >= 1
