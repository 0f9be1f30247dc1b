"""The pre-registered analysis (avspo_plugin/commands/analyze/forecast_models.py) applied to a sweep's runs, and what
the sweep's fit file carries of it.

``python -m lab.research.sweep [DIR]`` (default docs/evidence/sweep, sweep.write_preregistered) is the exploratory
pass: it reads the runs of DIR/sweep.json (no run is made), fits the pre-registered models on them, labels the result
exploratory (the specification was chosen after looking at these runs) and writes it into DIR/fit.json under
``preregistered``; ``python -m lab sweep --confirm`` fills the same key's ``confirmation`` with the same table on its
own runs (``--confirmation CONFIRM_DIR`` takes it into DIR/fit.json). ``python -m renderer`` renders
docs/evidence/sweep.md's block between PREREGISTERED_BEGIN and PREREGISTERED_END, and the copy analyze reads, from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from avspo_plugin.commands.analyze import forecast_models as sm

EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence"
PREREGISTERED_BEGIN = "<!-- preregistered: rendered from sweep/fit.json by sweep_report.preregistered_markdown -->"
PREREGISTERED_END = "<!-- /preregistered -->"
EXPLORATORY_WHY = ("the models were specified after the 96 runs were looked at (issue 40): a lead to confirm on new "
                   "bases, not a finding")


def result(points: Sequence[Mapping], status: str, source: str, why: str, reps: int = sm.REPS,
           seed: int = sm.SEED) -> dict[str, Any]:
    """The pre-registered table and the stagnation rule within lr x base cells on ``points`` (sweep.json's), with
    their status (``exploratory`` or ``confirmation``), where the runs are and why they have that status."""
    bases = list(dict.fromkeys(p["base"] for p in points))
    return {"status": status, "source": source, "why": why, "runs": len(points), "bases": bases,
            "table": sm.preregistered_table(sm.table_from_points(points), reps, seed),
            "stagnation_within_cells": sm.stagnation_within_cells(points, reps, seed)}


def preregistered(exploratory: Mapping | None, confirmation: Mapping | None, planned: Mapping) -> dict[str, Any]:
    """fit.json's ``preregistered``: the specification, the exploratory and confirmation results (None where not run),
    the confirmation's plan (``planned``: its command, runs, bases and estimated cost) and the verdict, which only
    the confirmation gives (``pending`` until it has run at full budget)."""
    # A quick (toy) confirmation checks the pipeline: it gives no verdict.
    verdict = "pending" if confirmation is None or confirmation["status"] != "confirmation" else (
        "adds" if confirmation["table"]["decision"]["adds"] else "does not add")
    return {"rule": sm.RULE, "min_gain": sm.MIN_GAIN, "models": {name: list(t) for name, t in sm.MODELS.items()},
            "schemes": list(sm.SCHEMES), "bootstrap": {"reps": sm.REPS, "seed": sm.SEED, "refitted": True,
                                                        "min_train_groups": sm.MIN_TRAIN_GROUPS},
            "exploratory": exploratory, "confirmation": confirmation, "planned_confirmation": dict(planned),
            "verdict": verdict}
