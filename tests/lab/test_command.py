"""`python -m lab --quick` and `python -m lab sweep --quick` end to end, in this process (about a minute in all)."""

import json

import numpy as np
import pytest
from cli_in_process import captured

from avspo_plugin.config import AVSPOConfig
from lab import experiment
from lab.command import main
from lab.methods import DEFAULT_METHODS
from lab.research.sweep import QUICK_SWEEP
from lab.research.sweep_analysis import SIGNALS


def lab_ok(*args: str) -> str:
    """``python -m lab ARGS`` in this process (as the sweep test below runs it); what it printed on stdout."""
    run = captured(main, *args)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def series(report: dict) -> dict:
    return {m: {s: {"steps": r["steps"], "evals": r["evals"]} for s, r in by_seed.items()}
            for m, by_seed in report["runs"].items()}


@pytest.fixture(scope="module")
def quick_reports(tmp_path_factory):
    first, second = tmp_path_factory.mktemp("first"), tmp_path_factory.mktemp("second")
    shown = lab_ok("--quick", "--out", str(first), "--no-progress", "--jobs", "2")
    # The same seeds in one process, for the method with virtual samples: series must not depend on the workers.
    lab_ok("--quick", "--out", str(second), "--no-progress", "--jobs", "1", "--methods", "avspo")
    return first, second, shown


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
    assert "## Same number of rollouts" in markdown and "| dapo (adv_estimator=grpo, + dynamic sampling) |" in markdown
    # The report says whether RL learned: base and final held-out accuracy, sampled and greedy, per method.
    base = report["base"]["held_out"]
    final = summary["grpo"]["final_accuracy"]["mean"]
    assert f"| grpo (adv_estimator=grpo) | {base['accuracy']:.3f} → {final:.3f} ({final - base['accuracy']:+.3f})" in markdown
    assert "too few seeds for an interval" in markdown and "±" not in markdown
    assert "## Same number of steps" in stdout
    for name in ("acr.png", "accuracy.png", "entropy.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_demo_shows_what_adv_estimator_avspo_runs_beside_grpo_and_dapo(quick_reports):
    """make demo's AVSPO arm is what algorithm.adv_estimator=avspo runs, the paper's method at its defaults (the
    adaptive trigger); each arm's label says its setting, and the report says what the run can and cannot tell
    apart, with the share of steps the trigger opened on."""
    report = json.loads((quick_reports[0] / "report.json").read_text())
    methods = report["methods"]
    assert list(methods) == ["grpo", "dapo", "avspo"]
    assert AVSPOConfig().threshold_mode == "adaptive"
    assert methods["avspo"]["algorithm"]["avspo"]["threshold_mode"] == "adaptive"
    assert methods["avspo"]["label"] == "avspo (threshold_mode=adaptive, the default, the paper's trigger)"
    assert methods["grpo"]["label"] == "grpo (adv_estimator=grpo)"
    markdown = (quick_reports[0] / "report.md").read_text()
    assert "## What this run can and cannot tell apart" in markdown
    for name, spec in methods.items():
        assert f"| {spec['label']} |" in markdown, name
    # Two seeds: the report says that no accuracy difference can be told apart.
    assert f"- {methods['avspo']['label']}: effective ACR " in markdown
    assert "too few seeds for an interval: no difference can be told apart from seed noise" in markdown
    # The report says on which share of steps the adaptive arm's trigger was open.
    steps = [s for run in report["runs"]["avspo"].values() for s in run["steps"]["triggered"]]
    assert f"trigger open on {sum(steps) / len(steps):.0%} of steps" in markdown


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


def test_quick_sweep_writes_its_files_and_resumes_from_its_runs(tmp_path, capsys, monkeypatch):
    """The sweep's pipeline on its toy budget, in this process (the toy bases learn nothing, so the analysis is
    mostly undefined there; test_sweep.py tests it on synthetic data), then again from the kept runs and bases."""
    command = ["sweep", "--quick", "--out", str(tmp_path), "--no-progress", "--jobs", "1"]
    assert main(command) == 0
    plan = "12 GRPO configurations (3 bases x 1 learning rates x 2 G x 2 tier mixes) x 2 seeds = 24 runs"
    assert plan in capsys.readouterr().err
    report = json.loads((tmp_path / "sweep.json").read_text())
    assert report["kind"] == "sweep" and report["design"]["quick"] and report["design"]["temperature"] == 1.0
    assert list(report["bases"]) == list(QUICK_SWEEP.bases) and all(b["eligible"] for b in report["bases"].values())
    points = report["points"]
    assert len(points) == 24 and len(report["configurations"]) == 12
    assert {(p["group_size"], p["prompts"]) for p in points} == {(4, 16), (8, 8)}
    assert {(tuple(c["mix_weights"]), tuple(c["train_per_tier"])) for c in report["configurations"]} == {
        ((1, 1, 1, 1), (12, 12, 12, 12)), ((1, 2, 3, 4), (5, 10, 14, 19))}
    for point in points:
        run = json.loads((tmp_path / point["run_file"]).read_text())["result"]
        steps, evals = run["steps"], run["evals"]
        window = report["fit"]["early_steps"]
        assert point["steps"] == len(steps["acr"]) == 6 and window == 2
        for name, value in point["signals"].items():
            expected = evals["accuracy"][0] if name == "base_accuracy" else np.mean(steps[name][:window])
            assert value == pytest.approx(expected), name
        assert point["final_gain"] == pytest.approx(100 * (evals["accuracy"][-1] - evals["accuracy"][0]))
        assert point["stagnation"] == {"fired": False, "fired_at_step": None, "longest_streak": 6}
    analysis = report["analysis"]
    assert set(analysis["prediction"]["alone"]) == set(SIGNALS) and analysis["stagnation"]["runs"] == 24
    fit = json.loads((tmp_path / "fit.json").read_text())
    assert fit == report["fit"] and "measured on the avspo CPU lab" in fit["label"]
    assert isinstance(fit["forecast"]["supported"], bool) and fit["forecast"]["why"]
    markdown = (tmp_path / "sweep.md").read_text()
    for section in ("## Which early signal predicts the final gain", "## What collapse adds to early reward",
                    "## Across seeds of one configuration", "## The paper's stagnation rule", "fit.json"):
        assert section in markdown
    assert (tmp_path / "sweep_signals.png").read_bytes()[:4] == b"\x89PNG"
    assert report["timing"]["runs_run"] == 24 and report["timing"]["runs_from_cache"] == 0

    assert len(list((tmp_path / "bases").glob("*.pt"))) == len(QUICK_SWEEP.bases)

    def warm_up_again(settings):
        raise AssertionError("the rerun warmed up a base that its first run kept")

    monkeypatch.setattr(experiment, "warm_up", warm_up_again)
    assert main(command) == 0
    again = json.loads((tmp_path / "sweep.json").read_text())
    assert (again["timing"]["runs_run"], again["timing"]["runs_from_cache"]) == (0, 24)
    assert again["points"] == points

