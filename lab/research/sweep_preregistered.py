"""The pre-registered analysis (lab/research/forecast_models.py) applied to a sweep's runs, and what
the sweep's fit file carries of it.

``python -m lab.research.sweep [DIR]`` (default docs/evidence/sweep, sweep.write_preregistered) is the exploratory
pass: it reads the runs of DIR/sweep.json (no run is made), fits the pre-registered models on them, labels the result
exploratory (the specification was chosen after looking at these runs) and writes it into DIR/fit.json under
``preregistered``; ``python -m lab sweep --confirm`` fills the same key's ``confirmation`` with the same table on its
own runs (``--confirmation CONFIRM_DIR`` takes it into DIR/fit.json). ``python -m renderer`` renders
docs/evidence/sweep.md's block between PREREGISTERED_BEGIN and PREREGISTERED_END, and the copy analyze reads, from it.

Every verdict a fit file holds is drawn from its numbers by :func:`with_verdicts`: each result's decision (adds, not
shown to add, cannot tell: forecast_models.decide), the confirmation's verdict, and whether the file's line of early
ACR alone supports a forecast (FORECAST_RULE: the line's own out-of-sample rule and the verdict "adds"), so that no fit
file offers a forecast the pre-registered test does not back. ``python -m renderer`` applies it to the fit files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import forecast_models as sm
from .forecast import BASELINE_WORDS, stagnation_within_cells, table_from_points

EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence"
PREREGISTERED_BEGIN = "<!-- preregistered: rendered from sweep/fit.json by sweep_report.preregistered_markdown -->"
PREREGISTERED_END = "<!-- /preregistered -->"
EXPLORATORY_WHY = ("the models were specified after the 96 runs were looked at (issue 40): a lead to confirm on new "
                   "bases, not a finding")
LINE_RULE = ("early ACR alone predicts the final gain of bases it was not fitted on: the bootstrap 95% interval of its "
             "leave-one-base-out R^2 lies above 0")
FORECAST_RULE = (f"{LINE_RULE}; and where the file holds the pre-registered test, its verdict is that early ACR adds to "
                 f"{BASELINE_WORDS}")


def result(points: Sequence[Mapping], status: str, source: str, why: str, reps: int = sm.REPS,
           seed: int = sm.SEED) -> dict[str, Any]:
    """The pre-registered table and the stagnation rule within lr x base cells on ``points`` (sweep.json's), with
    their status (``exploratory`` or ``confirmation``), where the runs are and why they have that status."""
    bases = list(dict.fromkeys(p["base"] for p in points))
    return {"status": status, "source": source, "why": why, "runs": len(points), "bases": bases,
            "table": sm.preregistered_table(table_from_points(points), reps, seed),
            "stagnation_within_cells": stagnation_within_cells(points, reps, seed)}


def verdict_of(confirmation: Mapping | None) -> str:
    """The pre-registered verdict (forecast_models.VERDICTS), which only the confirmation gives: ``pending`` until it
    has run at full budget (a quick, toy confirmation checks the pipeline)."""
    if confirmation is None or confirmation["status"] != "confirmation":
        return "pending"
    return confirmation["table"]["decision"]["verdict"]


def decided(outcome: Mapping | None) -> dict[str, Any] | None:
    """A result with its decision drawn again from its gains and baseline (forecast_models.decide)."""
    if outcome is None:
        return None
    table = outcome["table"]
    decision = sm.decide(table["added"][sm.PRIMARY], table["models"][sm.BASELINE_MODEL]["oos_r2"])
    return {**outcome, "table": {**table, "decision": decision}}


def line_why(oos: Mapping) -> str:
    """The out-of-sample result of a fit file's line of early ACR alone, in words."""
    value = "undefined" if oos["r2"] is None else f"{oos['r2']:.2f}"
    interval = "no interval" if oos["ci95"] is None else f"95% CI {oos['ci95'][0]:.2f} to {oos['ci95'][1]:.2f}"
    return f"leave-one-base-out R^2 of early ACR alone {value} ({interval}; bootstrap over {oos['bases']} bases)"


def with_verdicts(fit: Mapping) -> dict[str, Any]:
    """A sweep's fit.json with every verdict drawn from its numbers by the code in force (see the module docstring);
    a file without the pre-registered test keeps the line's own rule."""
    if fit.get("preregistered") is None:
        return dict(fit)
    prereg = fit["preregistered"]
    exploratory, confirmation = decided(prereg["exploratory"]), decided(prereg["confirmation"])
    verdict = verdict_of(confirmation)
    line_holds = fit["oos"]["ci95"] is not None and fit["oos"]["ci95"][0] > 0
    test = ("the pre-registered confirmation has not yet run" if confirmation is None or verdict == "pending" else
            "the pre-registered confirmation: " + sm.verdict_text(confirmation["table"]["decision"], BASELINE_WORDS))
    forecast = {"supported": line_holds and verdict == sm.ADDS, "rule": FORECAST_RULE,
                "why": f"{line_why(fit['oos'])}; {test}"}
    return {**fit, "forecast": forecast,
            "preregistered": {**prereg, "exploratory": exploratory, "confirmation": confirmation, "verdict": verdict}}


def preregistered(exploratory: Mapping | None, confirmation: Mapping | None, planned: Mapping) -> dict[str, Any]:
    """fit.json's ``preregistered``: the specification, the exploratory and confirmation results (None where not run),
    the confirmation's plan (``planned``: its command, runs, bases and estimated cost) and the verdict
    (:func:`verdict_of`)."""
    verdict = verdict_of(confirmation)
    return {"rule": sm.RULE, "min_gain": sm.MIN_GAIN, "models": {name: list(t) for name, t in sm.MODELS.items()},
            "schemes": list(sm.SCHEMES), "bootstrap": {"reps": sm.REPS, "seed": sm.SEED, "refitted": True,
                                                        "min_train_groups": sm.MIN_TRAIN_GROUPS},
            "exploratory": exploratory, "confirmation": confirmation, "planned_confirmation": dict(planned),
            "verdict": verdict}
