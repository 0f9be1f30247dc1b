"""What the lab's sweep measured of early ACR's predictive value, in the words the evidence pages quote.

The source is the sweep's own ``fit.json`` (``python -m lab sweep`` writes it; docs/evidence/sweep/fit.json). Nothing
here is a typed-in number: every figure printed comes from that file.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .forecast import BASELINE_WORDS
from .forecast_models import SCHEME_WORDS, VERDICTS, verdict_text

LAB_SWEEP_FIT = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "sweep" / "fit.json"
SWEEP_PAGE = "docs/evidence/sweep.md"
# The sweep's signals added to early reward + base accuracy, in the words of a sentence.
ADDED_TITLES = {
    "acr": "ACR",
    "acr_all_fail": "its all-fail share",
    "acr_all_pass": "its all-pass share",
    "near_collapse_success": "the lone-success share",
    "near_collapse_failure": "the lone-failure share",
}


class FitFileError(ValueError):
    """The lab sweep's fit file cannot be read; the message names the file and the key."""


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
    # fit.json's "preregistered" (lab/research/sweep_preregistered.py): the pre-registered
    # analysis's exploratory and confirmation results and its verdict ("pending" until the confirmation has run).
    preregistered: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        def plain(estimate: Estimate) -> dict[str, Any]:
            return {"value": estimate.value, "ci95": None if estimate.ci95 is None else list(estimate.ci95)}

        return {"source": self.source, "runs": self.runs, "bases": self.bases, "acr_alone_oos_r2": plain(self.alone),
                "baseline_oos_r2": plain(self.baseline),
                "added_oos_r2": {name: plain(estimate) for name, estimate in self.added.items()},
                "forecast_supported": self.forecast_supported,
                "adds_to_mean_reward": [name for name, estimate in self.added.items() if estimate.above_zero],
                "preregistered": None if self.preregistered is None else preregistered_summary(self.preregistered)}


def _estimate(data: Any, where: str, path: Path) -> Estimate:
    if not isinstance(data, dict) or "value" not in data or "ci95" not in data:
        raise FitFileError(f"{path}: {where} must be an object with 'value' and 'ci95', found {data!r}")
    value, ci95 = data["value"], data["ci95"]
    if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)):
        raise FitFileError(f"{path}: {where}.value must be a finite number or null, found {value!r}")
    if ci95 is not None and not (isinstance(ci95, list) and len(ci95) == 2
                                 and all(isinstance(v, (int, float)) and math.isfinite(v) for v in ci95)):
        raise FitFileError(f"{path}: {where}.ci95 must be [low, high] or null, found {ci95!r}")
    return Estimate(value, None if ci95 is None else (float(ci95[0]), float(ci95[1])))


def load_lab_evidence(path: Path = LAB_SWEEP_FIT) -> LabEvidence:
    """The sweep's out-of-sample results from its fit file; an error names the file and the key that is wrong."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise FitFileError(f"{path}: the lab sweep's fit file is missing (reinstall avspo-plugin)") from None
    except json.JSONDecodeError as err:
        raise FitFileError(f"{path}: not a fit file of `python -m lab sweep` ({err!r})") from None
    return lab_evidence(data, Path(path))


def lab_evidence(data: Any, path: Path) -> LabEvidence:
    """:func:`load_lab_evidence` of a fit file's content ``data``, read from ``path``."""
    try:
        oos = data["oos"]
        added = oos["added"]
        supported = data["forecast"]["supported"]
        runs, bases = int(oos["runs"]), int(oos["bases"])
        prereg = data["preregistered"]
        _check_preregistered(prereg)
    except (KeyError, TypeError, ValueError) as err:
        raise FitFileError(f"{path}: not a fit file of `python -m lab sweep` with 'oos.added' and 'preregistered' "
                           f"({err!r})") from None
    if not isinstance(added, dict) or set(added) - set(ADDED_TITLES):
        raise FitFileError(f"{path}: oos.added must map some of {', '.join(ADDED_TITLES)} to estimates")
    return LabEvidence(
        runs=runs, bases=bases,
        alone=_estimate({"value": oos["r2"], "ci95": oos["ci95"]}, "oos", path),
        baseline=_estimate(oos["baseline_r2"], "oos.baseline_r2", path),
        added={name: _estimate(added[name], f"oos.added.{name}", path) for name in ADDED_TITLES if name in added},
        forecast_supported=bool(supported), source=str(path), preregistered=prereg,
    )


def _check_preregistered(prereg: Any) -> None:
    """The keys evidence_lines reads of fit.json's ``preregistered``; a KeyError or TypeError names what is missing."""
    verdict = prereg["verdict"]
    if verdict not in ("pending", *VERDICTS):
        raise ValueError(f"preregistered.verdict must be one of pending, {', '.join(VERDICTS)}; found {verdict!r}")
    for status in ("exploratory", "confirmation"):
        result = prereg[status]
        if result is not None:
            decision = result["table"]["decision"]
            _ = (result["table"]["added"]["acr"], decision["verdict"], decision["by_scheme"], result["runs"],
                 result["bases"])
    if prereg["confirmation"] is None:
        _ = (prereg["planned_confirmation"]["runs"], prereg["planned_confirmation"]["command"])


def gain_text(gains: dict[str, Any]) -> str:
    """Each scheme's gain in out-of-sample R^2 with its interval, in words."""
    return ", ".join(f"{Estimate(g['value'], None if g['ci95'] is None else tuple(g['ci95'])).text(3)} "
                     f"{SCHEME_WORDS.get(scheme, scheme)}" for scheme, g in gains.items())


def preregistered_summary(prereg: dict[str, Any]) -> dict[str, Any]:
    """What analysis.json keeps of the pre-registered analysis: the verdict, the rule, and per result its status,
    runs, bases, ACR's gain per scheme and the rule's decision on those runs."""
    def result(outcome: dict[str, Any] | None) -> dict[str, Any] | None:
        if outcome is None:
            return None
        decision = outcome["table"]["decision"]
        return {"status": outcome["status"], "runs": outcome["runs"], "bases": len(outcome["bases"]),
                "acr_gain": outcome["table"]["added"]["acr"], "adds": decision["adds"], "verdict": decision["verdict"],
                "detectable_gain": decision["detectable_gain"]}

    return {"verdict": prereg["verdict"], "rule": prereg["rule"], "exploratory": result(prereg["exploratory"]),
            "confirmation": result(prereg["confirmation"])}


def preregistered_lines(prereg: dict[str, Any]) -> list[str]:
    """The pre-registered analysis in a few lines: the confirmation's verdict (or that it has not yet run) and what
    the exploratory pass found, labelled exploratory."""
    lines = []
    confirmation, exploratory = prereg["confirmation"], prereg["exploratory"]
    if confirmation is None:
        planned = prereg["planned_confirmation"]
        lines.append(f"  pre-registered test: its confirmation sweep ({planned['runs']} runs on bases no fit has seen) "
                     "has not yet run, so whether early ACR foretells how a run ends is open")
    else:
        lines.append(f"  pre-registered confirmation ({confirmation['runs']} runs from {len(confirmation['bases'])} "
                     f"bases no fit had seen): change in out-of-sample R^2 "
                     f"{gain_text(confirmation['table']['added']['acr'])}; verdict: "
                     f"{verdict_text(confirmation['table']['decision'], BASELINE_WORDS)}")
    if exploratory is not None:
        lines.append(f"  exploratory ({exploratory['runs']} runs from {len(exploratory['bases'])} bases, models chosen "
                     f"after looking at them): added to {BASELINE_WORDS}, early ACR changed out-of-sample R^2 by "
                     f"{gain_text(exploratory['table']['added']['acr'])}; the pre-registered rule ({prereg['rule']}) "
                     f"on these runs: {exploratory['table']['decision']['verdict']}")
    return lines


def evidence_lines(evidence: LabEvidence) -> list[str]:
    """What the lab's sweep supports of early ACR as a predictor of how a run ends, from its fit file: the
    pre-registered analysis (its confirmation, or that it has not yet run, and the exploratory pass) and what ACR
    certainly is. Every figure comes from the file."""
    lines = [f"What early ACR says about how a run ends, as measured on the avspo CPU lab (not this run's task; "
             f"{SWEEP_PAGE}):"]
    if evidence.preregistered is not None:
        lines += preregistered_lines(evidence.preregistered)
    lines.append("  what ACR certainly is: the share of rollouts that taught nothing (wasted_rollouts)")
    return lines
