"""`avspo analyze` states what the lab's sweep measured of early ACR as a predictor, read from the sweep's own file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from analyze.generated_runs import avspo_rows, draw_run, truth, write_verl_file_log

from avspo_plugin.tools.analyze import lab_evidence
from avspo_plugin.tools.analyze.records import AnalyzeError

ROOT = Path(__file__).parents[2]
SWEEP_FIT = ROOT / "docs" / "evidence" / "sweep" / "fit.json"


def test_the_packaged_file_is_the_sweeps_own():
    assert lab_evidence.LAB_SWEEP_FIT.read_bytes() == SWEEP_FIT.read_bytes()


def test_analyze_prints_the_sweeps_numbers_from_its_file(tmp_path, analyze, monkeypatch):
    """Every figure printed comes from the file: change the file and the printed figures follow."""
    run = write_verl_file_log(tmp_path / "train.metrics.jsonl", avspo_rows(truth(draw_run(12))))
    fit = json.loads(SWEEP_FIT.read_text())
    code, document, out, _ = analyze(run)
    assert code == 0
    oos = fit["oos"]
    shown = document["acr_predictive_value_in_the_lab"]
    assert shown["acr_alone_oos_r2"] == {"value": oos["r2"], "ci95": oos["ci95"]}
    assert shown["added_oos_r2"] == oos["added"] and (shown["runs"], shown["bases"]) == (oos["runs"], oos["bases"])
    assert f"({oos['runs']} GRPO runs from {oos['bases']} base policies" in out
    alone = "undefined" if oos["r2"] is None else f"{oos['r2']:+.2f}"
    assert f"early ACR alone: out-of-sample R^2 {alone}" in out

    # The same command on an edited copy: ACR alone and its all-fail share now predict.
    edited = json.loads(SWEEP_FIT.read_text())
    edited["oos"].update(runs=7, bases=3, r2=0.61, ci95=[0.2, 0.8])
    edited["oos"]["added"]["acr_all_fail"] = {"value": 0.25, "ci95": [0.05, 0.4]}
    copy = tmp_path / "fit.json"
    copy.write_text(json.dumps(edited))
    monkeypatch.setattr(lab_evidence, "LAB_SWEEP_FIT", copy)
    code, document, out, _ = analyze(run, out=tmp_path / "edited")
    assert code == 0
    assert "(7 GRPO runs from 3 base policies" in out and "early ACR alone: out-of-sample R^2 +0.61 (95% CI +0.20" in out
    assert "its all-fail share +0.250 (95% CI +0.050 to +0.400)" in out
    assert "so: its all-fail share added to what early reward and base accuracy predict there" in out
    assert "acr_all_fail" in document["acr_predictive_value_in_the_lab"]["adds_to_mean_reward"]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda fit: fit["oos"].pop("added"), "not a fit file of `avspo lab sweep` with 'oos.added'"),
        (lambda fit: fit["oos"]["added"].update(entropy={"value": 0.1, "ci95": None}), "oos.added must map some of"),
        (lambda fit: fit["oos"]["added"].update(acr={"value": "high", "ci95": None}),
         "oos.added.acr.value must be a finite number or null"),
        (lambda fit: fit["oos"].update(baseline_r2={"value": 0.1, "ci95": [0.0]}), "oos.baseline_r2.ci95 must be"),
    ],
)
def test_a_damaged_fit_file_is_named_with_the_key(tmp_path, change, message):
    fit = json.loads(SWEEP_FIT.read_text())
    change(fit)
    path = tmp_path / "fit.json"
    path.write_text(json.dumps(fit))
    with pytest.raises(AnalyzeError, match=f"^{re.escape(str(path))}: .*{re.escape(message)}"):
        lab_evidence.load_lab_evidence(path)
