"""lab/research/lab_evidence.py states what the lab's sweep measured of early ACR as a predictor, read from the sweep's
own file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lab.research import forecast_models as sm
from lab.research import lab_evidence
from lab.research.forecast import BASELINE_WORDS

ROOT = Path(__file__).parents[2]
SWEEP_FIT = ROOT / "docs" / "evidence" / "sweep" / "fit.json"


def confirmation_line(prereg: dict) -> str:
    """What the evidence lines say of the confirmation in ``prereg``, as its figures and verdict make it."""
    confirmation = prereg["confirmation"]
    if confirmation is None:
        return (f"its confirmation sweep ({prereg['planned_confirmation']['runs']} runs on bases no fit has seen) has "
                "not yet run")
    return (f"pre-registered confirmation ({confirmation['runs']} runs from {len(confirmation['bases'])} bases no fit "
            f"had seen): change in out-of-sample R^2 {lab_evidence.gain_text(confirmation['table']['added']['acr'])}; "
            f"verdict: {sm.verdict_text(confirmation['table']['decision'], BASELINE_WORDS)}")


def said(path: Path) -> tuple[dict, str]:
    evidence = lab_evidence.load_lab_evidence(path)
    return evidence.to_dict(), "\n".join(lab_evidence.evidence_lines(evidence))


def test_the_sweeps_numbers_come_from_its_file(tmp_path):
    """Every figure said comes from the sweep's file: the confirmation's verdict (or that it has not yet run) and
    the exploratory pass, labelled exploratory; change the file and the figures and verdict follow."""
    fit = json.loads(SWEEP_FIT.read_text())
    prereg = fit["preregistered"]
    shown, out = said(SWEEP_FIT)
    oos = fit["oos"]
    assert shown["acr_alone_oos_r2"] == {"value": oos["r2"], "ci95": oos["ci95"]}
    assert shown["preregistered"]["verdict"] == prereg["verdict"]
    assert (prereg["verdict"] == "pending") == (prereg["confirmation"] is None)
    assert confirmation_line(prereg) in out
    exploratory = prereg["exploratory"]
    assert shown["preregistered"]["exploratory"]["acr_gain"] == exploratory["table"]["added"]["acr"]
    gain = exploratory["table"]["added"]["acr"]["leave_one_base_out"]
    assert (f"exploratory ({exploratory['runs']} runs from {len(exploratory['bases'])} bases, models chosen after "
            f"looking at them)") in out and f"by {gain['value']:+.3f} (95% CI {gain['ci95'][0]:+.3f}" in out

    # The same command on edited copies: the confirmation not yet run; run, with early ACR adding there.
    pending = json.loads(SWEEP_FIT.read_text())
    pending["preregistered"].update(confirmation=None, verdict="pending")
    pending["preregistered"].setdefault("planned_confirmation", {"runs": 96, "command": "python -m lab sweep --confirm"})
    copy = tmp_path / "pending.json"
    copy.write_text(json.dumps(pending))
    _, out = said(copy)
    assert confirmation_line(pending["preregistered"]) in out and "has not yet run" in out
    assert "not a forecast" not in out.split("What early ACR says")[1]

    edited = json.loads(SWEEP_FIT.read_text())
    confirmation = json.loads(json.dumps(exploratory))
    confirmation.update(status="confirmation", runs=48, bases=["n1", "n2", "n3", "n4"])
    confirmation["table"]["added"]["acr"] = {"leave_one_base_out": {"value": 0.2, "ci95": [0.06, 0.4]},
                                             "leave_one_setting_out": {"value": 0.1, "ci95": [0.01, 0.2]}}
    confirmation["table"]["decision"] = sm.decide(confirmation["table"]["added"]["acr"],
                                                  confirmation["table"]["models"]["baseline"]["oos_r2"])
    edited["preregistered"].update(confirmation=confirmation, verdict="adds")
    copy = tmp_path / "fit.json"
    copy.write_text(json.dumps(edited))
    shown, out = said(copy)
    assert "has not yet run" not in out
    assert ("pre-registered confirmation (48 runs from 4 bases no fit had seen): change in out-of-sample R^2 +0.200 "
            "(95% CI +0.060 to +0.400) leaving one base out, +0.100 (95% CI +0.010 to +0.200) leaving one setting out; "
            "verdict: early ACR adds to the run's settings + early reward + base accuracy") in out
    assert shown["preregistered"]["verdict"] == "adds"


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda fit: fit["oos"].pop("added"), "not a fit file of `python -m lab sweep` with 'oos.added'"),
        (lambda fit: fit["oos"]["added"].update(entropy={"value": 0.1, "ci95": None}), "oos.added must map some of"),
        (lambda fit: fit["oos"]["added"].update(acr={"value": "high", "ci95": None}),
         "oos.added.acr.value must be a finite number or null"),
        (lambda fit: fit["oos"].update(baseline_r2={"value": 0.1, "ci95": [0.0]}), "oos.baseline_r2.ci95 must be"),
        (lambda fit: fit.pop("preregistered"), "with 'oos.added' and 'preregistered' (KeyError('preregistered')"),
        (lambda fit: fit["preregistered"].update(verdict="does not add"),
         "preregistered.verdict must be one of pending, adds, not shown to add, cannot tell; found 'does not add'"),
    ],
)
def test_a_damaged_fit_file_is_named_with_the_key(tmp_path, change, message):
    fit = json.loads(SWEEP_FIT.read_text())
    change(fit)
    path = tmp_path / "fit.json"
    path.write_text(json.dumps(fit))
    with pytest.raises(lab_evidence.FitFileError, match=f"^{re.escape(str(path))}: .*{re.escape(message)}"):
        lab_evidence.load_lab_evidence(path)


def test_no_fit_file_offers_a_forecast_the_preregistered_verdict_does_not_back(tmp_path):
    """Every fit file the project holds (the sweep's, the confirmation's) says the verdict the confirmation's numbers
    give, and supports a forecast only where that verdict is adds. Before, sweep-confirm/fit.json said
    `supported: true` while README said ACR does not add."""
    files = [SWEEP_FIT, ROOT / "docs/evidence/sweep-confirm/fit.json"]
    fits = [json.loads(path.read_text()) for path in files]
    confirmation = fits[0]["preregistered"]["confirmation"]
    verdict = sm.decide(confirmation["table"]["added"]["acr"], confirmation["table"]["models"]["baseline"]["oos_r2"])
    for path, fit in zip(files, fits):
        assert fit["preregistered"]["verdict"] == verdict["verdict"] == sm.CANNOT_TELL, path
        assert fit["preregistered"]["confirmation"]["table"]["decision"] == verdict, path
        assert fit["forecast"]["supported"] is False and sm.verdict_text(verdict, BASELINE_WORDS) in \
            fit["forecast"]["why"], path
