"""What the lab's sweep measured of early ACR's predictive value, as `avspo analyze` states it beside every run.

The source is the sweep's own ``fit.json`` (``avspo lab sweep`` writes it; docs/evidence/sweep/fit.json), packaged
beside this module as ``lab_sweep_fit.json`` so that a regular install reads it (a test checks the two files are
the same). Nothing here is a typed-in number: every figure printed comes from that file.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .records import AnalyzeError

LAB_SWEEP_FIT = Path(__file__).with_name("lab_sweep_fit.json")
SWEEP_PAGE = "docs/evidence/sweep/sweep.md"
# The sweep's signals added to early reward + base accuracy, in the words of a sentence.
ADDED_TITLES = {
    "acr": "ACR",
    "acr_all_fail": "its all-fail share",
    "acr_all_pass": "its all-pass share",
    "near_collapse_success": "the lone-success share",
    "near_collapse_failure": "the lone-failure share",
}


@dataclass(frozen=True)
class Estimate:
    """A value measured on the sweep's runs and its bootstrap 95% interval over bases (None where undefined)."""

    value: float | None
    ci95: tuple[float, float] | None

    @property
    def above_zero(self) -> bool:
        return self.ci95 is not None and self.ci95[0] > 0

    def text(self, digits: int = 2) -> str:
        value = "undefined" if self.value is None else f"{self.value:+.{digits}f}"
        interval = "" if self.ci95 is None else f" (95% CI {self.ci95[0]:+.{digits}f} to {self.ci95[1]:+.{digits}f})"
        return value + interval


@dataclass(frozen=True)
class LabEvidence:
    """Early ACR's out-of-sample R^2 alone, the baseline's (early reward + base accuracy) and what each of ACR and
    its parts adds to it, over ``runs`` GRPO runs from ``bases`` base policies, whole bases held out."""

    runs: int
    bases: int
    alone: Estimate
    baseline: Estimate
    added: dict[str, Estimate]
    forecast_supported: bool
    source: str

    def to_dict(self) -> dict[str, Any]:
        def plain(estimate: Estimate) -> dict[str, Any]:
            return {"value": estimate.value, "ci95": None if estimate.ci95 is None else list(estimate.ci95)}

        return {"source": self.source, "runs": self.runs, "bases": self.bases, "acr_alone_oos_r2": plain(self.alone),
                "baseline_oos_r2": plain(self.baseline),
                "added_oos_r2": {name: plain(estimate) for name, estimate in self.added.items()},
                "forecast_supported": self.forecast_supported,
                "adds_to_mean_reward": [name for name, estimate in self.added.items() if estimate.above_zero]}


def _estimate(data: Any, where: str, path: Path) -> Estimate:
    if not isinstance(data, dict) or "value" not in data or "ci95" not in data:
        raise AnalyzeError(f"{path}: {where} must be an object with 'value' and 'ci95', found {data!r}")
    value, ci95 = data["value"], data["ci95"]
    if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)):
        raise AnalyzeError(f"{path}: {where}.value must be a finite number or null, found {value!r}")
    if ci95 is not None and not (isinstance(ci95, list) and len(ci95) == 2
                                 and all(isinstance(v, (int, float)) and math.isfinite(v) for v in ci95)):
        raise AnalyzeError(f"{path}: {where}.ci95 must be [low, high] or null, found {ci95!r}")
    return Estimate(value, None if ci95 is None else (float(ci95[0]), float(ci95[1])))


def load_lab_evidence(path: Path = LAB_SWEEP_FIT) -> LabEvidence:
    """The sweep's out-of-sample results from its fit file; an error names the file and the key that is wrong."""
    try:
        data = json.loads(Path(path).read_text())
        oos = data["oos"]
        added = oos["added"]
        supported = data["forecast"]["supported"]
        runs, bases = int(oos["runs"]), int(oos["bases"])
    except FileNotFoundError:
        raise AnalyzeError(f"{path}: the lab sweep's fit file is missing (reinstall avspo-plugin)") from None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise AnalyzeError(f"{path}: not a fit file of `avspo lab sweep` with 'oos.added' ({err!r})") from None
    if not isinstance(added, dict) or set(added) - set(ADDED_TITLES):
        raise AnalyzeError(f"{path}: oos.added must map some of {', '.join(ADDED_TITLES)} to estimates")
    return LabEvidence(
        runs=runs, bases=bases,
        alone=_estimate({"value": oos["r2"], "ci95": oos["ci95"]}, "oos", path),
        baseline=_estimate(oos["baseline_r2"], "oos.baseline_r2", path),
        added={name: _estimate(added[name], f"oos.added.{name}", path) for name in ADDED_TITLES if name in added},
        forecast_supported=bool(supported), source=str(path),
    )


def evidence_lines(evidence: LabEvidence) -> list[str]:
    """What the sweep supports, in a few lines: early ACR alone, what it and its parts add to mean reward, the verdict."""
    # A change in R^2 is small beside an R^2: one more digit.
    added = "; ".join(f"{ADDED_TITLES[name]} {estimate.text(3)}" for name, estimate in evidence.added.items())
    adding = [name for name, estimate in evidence.added.items() if estimate.above_zero]
    if adding:
        verdict = (f"{', '.join(ADDED_TITLES[name] for name in adding)} added to what early reward and base accuracy "
                   "predict there: a relation measured on the lab, not a forecast for this run")
    else:
        verdict = ("there, neither ACR nor any part of it added to what early reward and base accuracy predict: read "
                   "ACR as the share of rollouts that taught nothing (wasted_rollouts), not as a forecast")
    return [
        f"What early ACR says about how a run ends, as measured on the avspo CPU lab's sweep ({evidence.runs} GRPO "
        f"runs from {evidence.bases} base policies, each base held out in turn; not this run's task; {SWEEP_PAGE}):",
        f"  early ACR alone: out-of-sample R^2 {evidence.alone.text()}",
        f"  early mean reward + base accuracy: out-of-sample R^2 {evidence.baseline.text()}; added to them, change in "
        f"R^2: {added}",
        f"  so: {verdict}.",
    ]
