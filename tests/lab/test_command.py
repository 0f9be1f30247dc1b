"""`avspo lab --quick` and a short `avspo lab sweep --quick` end to end (about a minute in all)."""

import json
import subprocess
import sys

import pytest

from avspo_plugin.tools.analyze.signals import load_fit
from avspo_plugin.tools.cli import main
from avspo_plugin.tools.lab.methods import DEFAULT_METHODS


def avspo(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "avspo_plugin.tools.cli", *args], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def series(report: dict) -> dict:
    return {m: {s: {"steps": r["steps"], "evals": r["evals"]} for s, r in by_seed.items()}
            for m, by_seed in report["runs"].items()}


@pytest.fixture(scope="module")
def quick_reports(tmp_path_factory):
    first, second = tmp_path_factory.mktemp("first"), tmp_path_factory.mktemp("second")
    shown = avspo("lab", "--quick", "--out", str(first), "--no-progress", "--jobs", "2")
    # The same seeds in one process, for the method with virtual samples: series must not depend on the workers.
    avspo("lab", "--quick", "--out", str(second), "--no-progress", "--jobs", "1", "--methods", "avspo")
    return first, second, shown.stdout


def test_quick_lab_writes_every_output(quick_reports):
    out, _, stdout = quick_reports
    report = json.loads((out / "report.json").read_text())
    assert report["kind"] == "lab" and report["seeds"] == [0, 1]
    assert list(report["runs"]) == list(DEFAULT_METHODS)
    steps = report["settings"]["steps"]
    for by_seed in report["runs"].values():
        for run in by_seed.values():
            for key in ("acr", "effective_acr", "acr_all_fail", "acr_all_pass", "reward", "entropy", "rollouts"):
                assert len(run["steps"][key]) == steps
            assert run["evals"]["step"][0] == 0 and run["evals"]["step"][-1] == steps
    summary = report["summary"]["methods"]
    # Two seeds: means without t(1) intervals, and the report says so.
    assert summary["avspo"]["final_accuracy"]["ci95"] is None
    assert summary["avspo"]["final_accuracy"]["ci95_reason"].startswith("too few seeds for an interval")
    assert "final_accuracy_vs_grpo" in summary["dapo"]
    assert summary["dapo"]["rollouts_total"]["mean"] >= summary["grpo"]["rollouts_total"]["mean"]
    markdown = (out / "report.md").read_text()
    assert "## Same number of rollouts" in markdown and "| dapo |" in markdown
    # The report says whether RL learned: base and final held-out accuracy, sampled and greedy, per method.
    base = report["base"]["held_out"]
    final = summary["grpo"]["final_accuracy"]["mean"]
    assert f"| grpo | {base['accuracy']:.3f} → {final:.3f} ({final - base['accuracy']:+.3f})" in markdown
    assert "too few seeds for an interval" in markdown and "±" not in markdown
    assert "## Same number of steps" in stdout
    for name in ("acr.png", "accuracy.png", "entropy.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_quick_lab_describes_the_base_policy_per_tier(quick_reports):
    report = json.loads((quick_reports[0] / "report.json").read_text())
    sampled = report["base"]["sampled_by_tier"]
    assert list(sampled) == [str(d) for d in report["settings"]["tiers"]]
    for tier in sampled.values():
        assert 0 <= tier["pass_rate"] <= 1 and tier["all_fail"] + tier["all_pass"] <= 1


def test_same_seeds_give_the_same_series_whatever_the_number_of_workers(quick_reports):
    first, second, _ = quick_reports
    one = json.loads((first / "report.json").read_text())
    two = json.loads((second / "report.json").read_text())
    assert list(two["runs"]) == ["avspo"]
    assert {m: series(one)[m] for m in two["runs"]} == series(two)
    assert one["base"] == {**two["base"], "warmup_wall_s": one["base"]["warmup_wall_s"],
                           "warmup_cpu_s": one["base"]["warmup_cpu_s"]}


def test_quick_sweep_fits_lines_that_analyze_reads(tmp_path):
    # One seed and 4 steps keep it short (36 runs); fits over several seeds are tested in test_sweep.py.
    avspo("lab", "sweep", "--quick", "--seeds", "1", "--steps", "4", "--warmup-steps", "50", "--out", str(tmp_path),
          "--no-progress", "--jobs", "2")
    report = json.loads((tmp_path / "sweep.json").read_text())
    assert len(report["points"]) == len(report["configurations"]) == 36 and report["seeds"] == [0]
    for point in report["points"]:
        run = report["runs"][f"{point['label']} seed=0"]
        final = point["final_pct"]
        # Temperature 1.0 is also the runs' evaluation temperature: the extra reading is that evaluation.
        assert final["temperature_1.0"] == pytest.approx(100 * run["evals"]["accuracy"][-1])
        assert final["greedy"] == pytest.approx(100 * run["evals"]["greedy"][-1])
    assert report["base"]["sweep_readings_pct"]["1.0"] == pytest.approx(100 * report["base"]["held_out"]["accuracy"])
    for by_unit in report["fits"].values():
        # One seed per configuration: the configuration means are the runs.
        assert by_unit["configurations"] == by_unit["runs"]
        assert 0.0 <= by_unit["runs"]["r2"] <= 1.0 and by_unit["runs"]["n"] == 36
        assert by_unit["runs"]["partial"]["dof"] == 32
    fit = report["fits"]["temperature_1.0"]["configurations"]
    loaded = load_fit(tmp_path / "fit.json")
    assert loaded.intercept == pytest.approx(fit["intercept"]) and loaded.slope == pytest.approx(fit["slope"])
    assert loaded.early_steps == report["fit"]["early_steps"] == 1
    assert loaded.acr_range == tuple(fit["acr_range"])
    assert (tmp_path / "sweep_scatter.png").read_bytes()[:4] == b"\x89PNG"
    markdown = (tmp_path / "sweep.md").read_text()
    assert "R^2 [95% CI]" in markdown and "partial R^2 given lr, G" in markdown


@pytest.mark.parametrize(
    "args, message",
    [
        (["lab", "--methods", "ppo", "--quick"], "unknown method 'ppo'"),
        (["lab", "--mix", "1,2", "--quick"], "mix has 2 weights for 4 tiers"),
        (["lab", "sweep", "--temperature", "0.5"], "the sweep sets --temperature itself"),
    ],
)
def test_bad_options_are_named(args, message, capsys):
    assert main(args) == 2 and message in capsys.readouterr().err
