"""The speed benchmark still runs end to end (on a tiny batch: this checks that it works, not how fast), as
`python benchmarks/estimator_bench.py` runs it, in this process."""

import dataclasses
import json
import runpy
import sys
from pathlib import Path

import torch

from avspo_plugin import AVSPOConfig, ThresholdState, compute_token_advantages

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "estimator_bench.py"


def test_benchmark_prints_a_row_per_size(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(BENCH), "--sizes", "64x16,128x8", "--repeats", "1"])
    runpy.run_path(str(BENCH), run_name="__main__")
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("cpu ")]
    assert [(row[1], row[2]) for row in rows] == [("64", "16"), ("128", "8")]
    assert all(float(row[4]) > 0 for row in rows)  # avspo ms; the floor of so small a batch can print 0.00



CHECK = Path(__file__).resolve().parent.parent / "benchmarks" / "device_check.py"


def test_the_device_check_runs_on_the_cpu_with_the_same_code():
    """benchmarks/device_check.py as a GPU runs it, on two tiny CPU shapes: CPU equals CPU, syncs not applicable."""
    check = runpy.run_path(str(CHECK))
    records = check["run"]([(32, 8), (64, 4)], [8], "cpu", 1)
    assert [(r["B"], r["L"], r["G"], r["groups"]) for r in records] == [(32, 8, 8, 4), (64, 4, 8, 8)]
    for record in records:
        assert record["equal_to_cpu"] is True
        assert record["syncs"] is None and record["per_group_syncs"] is None  # no device to wait for on a CPU
        assert record["core_ms"] > 0 and record["verl_ms"] > 0  # verl imports here
        assert record["peak_ratio"] == record["peak_bytes"] / (2 * 4 * record["B"] * record["L"]) >= 0
    # The comparison it makes tells a result from one with a single bit of one advantage changed.
    token_rewards, mask, labels = check["make_batch"](32, 8, 8)
    config = AVSPOConfig()
    result = compute_token_advantages(token_rewards, mask, labels, config, ThresholdState.initial(config))
    nudged = result.advantages.clone()
    nudged[0, 0] = torch.nextafter(nudged[0, 0], torch.tensor(1.0))
    assert check["same_result"](result, result) and not check["same_result"](dataclasses.replace(result, advantages=nudged), result)


def test_the_benchmark_writes_its_run_as_json(monkeypatch, capsys, tmp_path):
    """What docs/method/performance.md renders from (renderer/performance_tables.py): the run's machine, versions and
    medians, and avspo's parts."""
    out = tmp_path / "bench.json"
    monkeypatch.setattr(sys, "argv", [str(BENCH), "--sizes", "64x16", "--repeats", "1", "--threads", "1",
                                      "--clock", "cpu", "--json", str(out)])
    runpy.run_path(str(BENCH), run_name="__main__")
    assert "avspo's parts: token_sum" in capsys.readouterr().out
    run = json.loads(out.read_text())
    assert run["command"].endswith("--sizes 64x16 --repeats 1 --threads 1 --clock cpu --json " + str(out))
    assert run["threads"] == 1 and run["repeats"] == 1 and run["clock"] == "cpu" and run["machine"]["cpus"] >= 1
    assert set(run["versions"]) == {"python", "avspo-plugin", "torch", "verl"}
    (row,) = run["rows"]
    assert (row["B"], row["L"]) == (64, 16)
    assert {f"{name}_ms" for name in ("floor", "avspo", "grpo_vectorized", "grpo", "monitor", "token_sum", "core",
                                      "broadcast")} == set(row) - {"B", "L"}
    assert all(row[key] >= 0 for key in row) and row["avspo_ms"] > 0


STEP_READING = Path(__file__).resolve().parent.parent / "benchmarks" / "step_reading.py"


def test_the_step_reading_finds_the_estimator_and_the_core_and_not_the_kits_reference():
    """benchmarks/step_reading.py on this checkout: verl's steps reach the estimator, the core's advantages and the
    tracker's wrapper; no command module (nothing of the doctor or analyze runs in a training step)."""
    step_reading = runpy.run_path(str(STEP_READING))
    result = step_reading["measure"](STEP_READING.parent.parent)
    files = result["per_file"]
    assert {"avspo_plugin/verl/estimator.py", "avspo_plugin/core/advantage.py",
            "avspo_plugin/verl/metric_routing.py"} <= set(files)
    assert not any(name.startswith("avspo_plugin/commands/") for name in files)
    assert all(0 < row["executed"] <= row["file_lines"] for row in files.values())
    assert result["file_lines"] == sum(row["file_lines"] for row in files.values())
