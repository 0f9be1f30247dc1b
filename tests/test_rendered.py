"""Every generated file of the checkout (renderer/files.py: reference pages, options tables, packaged YAML, samples,
quoted study figures, the packaged evidence) is exactly what its sources render now; and what the renderer's sources
promise of the product (every key documented, the packaged evidence in one plain sentence)."""

import difflib
import json
from pathlib import Path

import pytest

from avspo_plugin.config import AVSPOConfig
from avspo_plugin.core.metrics import METRIC_HELP, METRIC_REDUCTIONS
from renderer.docs_pages import PACKAGED_EVIDENCE, PAGES, VERL_DEMO_RECORD, demo_step_metrics
from renderer.files import generated_files, stale_files, with_block

ROOT = Path(__file__).resolve().parents[1]
GENERATED = generated_files()


@pytest.mark.parametrize("path", sorted(GENERATED), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_generated_file_is_what_its_sources_render(path):
    """A figure, key or sample edited by hand, or a source changed without rendering, fails here."""
    committed = path.read_text(encoding="utf-8")
    diff = "".join(list(difflib.unified_diff(committed.splitlines(True), GENERATED[path].splitlines(True)))[:30])
    assert committed == GENERATED[path], f"{path.relative_to(ROOT)} is stale: run `python -m renderer`\n{diff}"


def test_the_renderer_covers_every_generated_place():
    relative = {str(path.relative_to(ROOT)) for path in GENERATED}
    assert {"docs/using/config.md", "docs/using/metrics.md", "docs/using/trl.md",
            "docs/using/openrlhf.md", "docs/using/verl-cpu.md", "docs/using/recipes.md",
            "docs/evidence/results.md", "docs/evidence/sharpening.md", "docs/evidence/sweep.md",
            "docs/evidence/headroom.md",
            "recipes/run_avspo_paper.sh", "avspo_plugin/default_evidence.json",
            "docs/evidence/sweep/fit.json",
            "docs/evidence/sweep-confirm/fit.json", "docs/evidence/sweep-confirm/sweep.json",
            "docs/evidence/sweep-confirm/sweep.md", "avspo_plugin/verl/config/avspo_trainer.yaml",
            "avspo_plugin/verl/config/avspo_algorithm.yaml",
            "avspo_plugin/verl/config/avspo_monitor.yaml", "docs/using/verl.md",
            "docs/method/performance.md"} <= relative


def test_a_stale_file_is_named(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("head\n<!-- b -->\nold\n<!-- e -->\ntail\n")
    render = {page: with_block(page.read_text(), "<!-- b -->", "<!-- e -->", "new")}
    assert stale_files(lambda: render) == [page]
    page.write_text(render[page])
    assert stale_files(lambda: render) == []
    with pytest.raises(ValueError, match="lacks the markers"):
        with_block("no markers", "<!-- b -->", "<!-- e -->", "new")


def test_every_key_and_metric_is_documented():
    config_page, metrics_page = PAGES["config"](), PAGES["metrics"]()
    assert all(f"| `{key}` |" in config_page for key in AVSPOConfig.keys())
    assert set(METRIC_HELP) == set(METRIC_REDUCTIONS)
    assert all(f"| `{name}` |" in metrics_page for name in METRIC_REDUCTIONS)


def test_the_recorded_verl_demo_ran_under_the_current_defaults():
    """A change of an AVSPO default fails here until the demo is recorded again (its output would differ)."""
    record = json.loads(VERL_DEMO_RECORD.read_text())
    assert record["defaults"] == AVSPOConfig().to_dict(), \
        "the AVSPO defaults changed: python -m renderer record verl-demo"
    assert record["command"] == "avspo verl-demo --out /tmp/demo-out"
    steps = demo_step_metrics(record["output"])
    assert sorted(steps) == [1, 2, 3, 4]
    config = AVSPOConfig(**record["defaults"])
    for step, metrics in steps.items():
        # What the defaults do, step by step: under always every collapsed group is augmented (with
        # augmented_collapses all).
        if config.threshold_mode == "always":
            assert metrics["triggered"] == float(metrics["acr"] > 0) and metrics["threshold"] == 0, (step, metrics)
        if config.threshold_mode == "always" and config.augmented_collapses == "all":
            assert metrics["augmented_groups"] == metrics["acr"] and metrics["effective_acr"] == 0, (step, metrics)
        # Under the adaptive trigger a step is augmented only when its ACR exceeds the threshold it reports.
        if config.threshold_mode == "adaptive":
            assert metrics["triggered"] == float(metrics["acr"] > metrics["threshold"]), (step, metrics)
            if not metrics["triggered"]:
                assert metrics["augmented_groups"] == 0 and metrics["effective_acr"] == metrics["acr"], (step, metrics)


def test_readme_is_written_by_hand_but_for_the_lab_s_findings():
    """README.md's one generated block is the lab's findings in plain sentences: no figure, no interval, none over 300
    characters."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = readme.split("<!-- BEGIN EVIDENCE readme:")[1].split("-->", 1)[1].split("<!-- END EVIDENCE readme -->")[0]
    assert readme.count("<!-- BEGIN ") == 1 and found.strip()
    assert "[" not in found and all(len(sentence) <= 300 for sentence in found.split(". "))


def test_the_packaged_evidence_chose_no_default_and_says_what_the_lab_found_in_plain_sentences():
    """default_evidence.json names no default chosen by a study; acting_evidence is at most three plain sentences (no
    intervals, each under 300 characters) pointing to results.md, its figures in acting_evidence_detail."""
    packaged = json.loads(PACKAGED_EVIDENCE.read_text())
    assert "default_threshold_mode" not in packaged and packaged["source"] == "docs/evidence/tasks/tasks.json"
    acting = packaged["acting_evidence"]
    sentences = acting.split(". ")
    assert len(sentences) <= 3 and all(len(s) < 300 for s in sentences) and "[" not in acting
    assert "(docs/evidence/results.md)" in acting
    assert all(case["clause"] in packaged["acting_evidence_detail"] for case in packaged["cases"])
    assert "threshold_mode_reason" not in packaged  # the default is fixed in the design, not chosen by a study


@pytest.mark.parametrize("gains, verdict", [
    ({"leave_one_base_out": {"value": 0.2, "ci95": [0.06, 0.4]}, "leave_one_setting_out": {"value": 0.1, "ci95": [0.01, 0.2]}},
     "adds"),
    ({"leave_one_base_out": {"value": 0.01, "ci95": [-0.05, 0.08]},
      "leave_one_setting_out": {"value": 0.0, "ci95": [-0.03, 0.04]}}, "not shown to add"),
    (None, "cannot tell"),
], ids=["adds", "not-shown", "cannot-tell"])
def test_the_forecast_sentences_say_what_the_confirmation_says(gains, verdict):
    """README's and sweep.md's words on ACR as a forecast are the confirmation's verdict as forecast_models words it
    (forecast_models.verdict_text), with its runs, bases and gains; pending until it has run."""
    from lab.research import forecast_models as sm
    from renderer.forecast import KNOWN, readme_forecast, sweep_forecast

    prereg = json.loads((ROOT / "docs" / "evidence" / "sweep" / "fit.json").read_text())["preregistered"]
    pending = {**prereg, "confirmation": None, "verdict": "pending"}
    assert "has not yet run" in readme_forecast(pending) and "until the confirmation has run" in sweep_forecast(pending)
    confirmation = json.loads(json.dumps({**prereg["confirmation"], "runs": 96, "bases": list("abcdef")}))
    table = confirmation["table"]
    if gains is not None:
        table["added"]["acr"] = gains
    table["decision"] = sm.decide(table["added"]["acr"], table["models"]["baseline"]["oos_r2"])
    assert table["decision"]["verdict"] == verdict
    confirmed = {**prereg, "confirmation": confirmation, "verdict": verdict}
    readme, sweep = readme_forecast(confirmed), sweep_forecast(confirmed)
    words = sm.verdict_text(table["decision"], KNOWN)
    assert words in readme and words in sweep and "96 runs" in readme and "6 bases no fit had seen" in readme
    assert "has not yet run" not in readme and "following the confirmation" in sweep
    assert ("not sold as a forecast" in readme) == (verdict != "adds")
    assert ("could not have passed its own rule" in readme) == (verdict == "cannot tell")
