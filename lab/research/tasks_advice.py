"""What the tasks study (docs/evidence/tasks/tasks.json, ``python -m lab tasks``) lets the product say, worded at the
strength its tests carry. Issue 56 item 6; these rules were fixed in code before the study's look (the commit that
added this module precedes its tasks.json). ``python -m renderer`` renders them into avspo_plugin/default_evidence.json
(the doctor's and each host's launch line, analyze's case line), the README's sentence and results.md's decision
table. The named method stays the paper's whatever the study reads.

The rules:

- **The primary** (the paper's AVSPO minus GRPO, tasks as the unit, Holm over the real tests): the verdict the study's
  report gives (``helps``, ``hurts``, ``not shown``, ``did not act``, ``not distinct``), worded by
  :data:`PRIMARY_WORDS`, with its mean and 95% interval.
- **Per regime** (secondary, pre-declared, no Holm): each setting's paired t over that regime's tasks whose regime
  check passed and where the setting acted (:func:`regime_reading`): "helped" when its 95% interval lies above 0,
  "hurt" when below, "neither shown" when it holds 0; "one task" (no interval) or "not read" (no task). The advice of a
  regime names the settings that helped there as found to help, and those that hurt as found to hurt; a setting that
  neither helped nor hurt is named as neither; nothing is called safe that was not read.

Changed after the look, in presentation only (no rule, verdict or figure): the short sentences (:func:`findings`)
name the ablations' verdicts, tested with the primary under Holm, which the first wording left to the detail, how
many tasks each regime's advice rests on, and where a verdict on the registered greedy reading differs from the one
at T = 1 (the first wording reported T = 1 alone); the detail and the decision table give the greedy readings.
"""

from __future__ import annotations

import textwrap
from typing import Any

from .sharpening_report import interval
from .tasks import verdict
from .tasks_report import REGIMES

REPORT = "docs/evidence/tasks/tasks.json"
PAGE = "docs/evidence/tasks/tasks.md"
PRIMARY = "avspo"
# Each arm as the setting a user writes (verl's keys; TRL and OpenRLHF spell them their way).
SETTINGS = {
    "avspo": "the paper's AVSPO (threshold_mode=adaptive, every default)",
    "avspo_always_all_pass": "threshold_mode=always with augmented_collapses=all_pass",
    "avspo_always_all_fail": "threshold_mode=always with augmented_collapses=all_fail",
}
# The same settings in few words, for the README's sentences.
SHORT_SETTINGS = {
    "avspo": "the paper's AVSPO",
    "avspo_always_all_pass": "always on all-pass groups",
    "avspo_always_all_fail": "always on all-fail groups",
}
REGIME_WORDS = {"all_fail": "all-fail-dominant", "all_pass": "all-pass-dominant"}
PRIMARY_WORDS = {
    "helps": "beat GRPO",
    "hurts": "did worse than GRPO",
    "not shown": "showed neither help nor harm against GRPO",
    "did not act": "acted on too few tasks to be read",
    "not distinct": "ran the same as GRPO",
}


def _interval(test: dict[str, Any]) -> str:
    return interval(test, digits=3)


def regime_reading(test: dict[str, Any]) -> str:
    """A setting's reading in one regime (a by_regime entry of tasks.json): helped, hurt, neither shown, one task,
    not read."""
    if not test["tasks"]:
        return "not read"
    if "ci95" not in test:
        return "one task"
    low, high = test["ci95"]
    return "helped" if low > 0 else "hurt" if high < 0 else "neither shown"


def regime_tasks(report: dict[str, Any], regime: str) -> list[str]:
    """The tasks of ``regime`` whose regime check passed (where GRPO's early groups had the regime's kind)."""
    return [t for t, task in report["tasks"].items()
            if task["regime"] == regime and task["regime_check"]["passed"]]


def regime_case(report: dict[str, Any], regime: str) -> dict[str, Any]:
    """What the study read in ``regime``: GRPO's mean early all-fail and all-pass shares over its tasks (where
    ``avspo analyze`` places a run), each setting's reading, the settings found to help and to hurt, and one clause."""
    tasks = regime_tasks(report, regime)
    readings = {arm: regime_reading(by[regime]) for arm, by in report["by_regime"].items()}
    parts = []
    for arm, by in report["by_regime"].items():
        test, reading = by[regime], readings[arm]
        if reading == "not read":
            parts.append(f"{SETTINGS[arm]} not read (no task of the regime where it acted passed the check)")
        elif reading == "one task":
            parts.append(f"{SETTINGS[arm]} read on one task only ({test['mean']:+.3f}, no interval)")
        else:
            parts.append(f"{SETTINGS[arm]} {reading} ({_interval(test)}, {_count(len(test['tasks']), 'task')})")
    shares = [report["tasks"][t]["regime_check"] for t in tasks]
    return {
        "regime": regime,
        "tasks": len(tasks),
        "all_fail": sum(s["early_all_fail"] for s in shares) / len(shares) if shares else None,
        "all_pass": sum(s["early_all_pass"] for s in shares) / len(shares) if shares else None,
        "helped": [a for a, r in readings.items() if r == "helped"],
        "hurt": [a for a, r in readings.items() if r == "hurt"],
        "clause": f"in its {_count(len(tasks), REGIME_WORDS[regime] + ' task')} (secondary, uncorrected): "
                  + "; ".join(parts),
    }


def primary_clause(report: dict[str, Any], with_figures: bool) -> str:
    verdict = report["verdicts"][PRIMARY]
    test = report["comparison"]["primary"][PRIMARY]
    words = f"the paper's AVSPO {PRIMARY_WORDS[verdict]}"
    if with_figures and test["real"]:
        words += f" ({_interval(test)} frontier-tier test accuracy, tasks as the unit, Holm p {test['p_holm']:.3g})"
    return words


def advice_clause(case: dict[str, Any], names: dict[str, str] = SETTINGS) -> str:
    """Which settings the study found to help and to hurt in one regime, without figures, each named by ``names``."""
    where = f"where {case['regime'].replace('_', '-')} groups dominated ({_count(case['tasks'], 'task')})"
    if case["helped"]:
        found = f"it found {' and '.join(names[a] for a in case['helped'])} to help"
    else:
        found = "it found no setting to help"
    if case["hurt"]:
        found += f" and {' and '.join(names[a] for a in case['hurt'])} to hurt"
    return f"{where}, {found}"


def scope(report: dict[str, Any]) -> str:
    return f"{_count(len(report['tasks']), 'independent task')} (a tiny model learning addition)"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def findings(report: dict[str, Any], link: str = "") -> list[str]:
    """The findings in at most three sentences without figures, the settings in few words: the primary (followed by
    ``link``, where its figures are), the ablations' verdicts (tested with it, Holm over the family), then each
    checked regime's advice with how many tasks it rests on. The README's sentences, and with the link to results.md
    the packaged ``acting_evidence`` that the launch lines and analyze quote."""
    sentences = [f"In this project's CPU lab, over {scope(report)}, {primary_clause(report, False)}{link}."]
    parts = [f"{SHORT_SETTINGS[arm]} {PRIMARY_WORDS[report['verdicts'][arm]]}" for arm in SETTINGS if arm != PRIMARY]
    changed = greedy_changes(report)
    greedy = (f"; at greedy decoding, {' and '.join(f'{SHORT_SETTINGS[a]} {PRIMARY_WORDS[v]}' for a, v in changed)}"
              if changed else "; the same at greedy decoding")
    sentences.append(f"Of its parts, at T = 1, {' and '.join(parts)}{greedy}.")
    checked = [advice_clause(case, SHORT_SETTINGS) for case in cases(report)]
    if checked:
        sentences.append(f"Per regime (secondary, tasks whose regime check passed), {'; '.join(checked)}.")
    return sentences


def greedy_changes(report: dict[str, Any]) -> list[tuple[str, str]]:
    """(arm, greedy verdict) of each arm whose verdict on the greedy reading (registered beside the T = 1 primary,
    Holm over its own family) differs from its verdict at T = 1."""
    greedy = {arm: verdict(test) for arm, test in report["comparison"]["greedy"].items()}
    return [(arm, greedy[arm]) for arm in SETTINGS if greedy[arm] != report["verdicts"][arm]]


def acting_evidence(report: dict[str, Any]) -> str:
    return " ".join(findings(report, " (docs/evidence/results.md)"))


def recipe_comment(report: dict[str, Any]) -> str:
    """The comment of recipes/run_avspo_paper.sh on what the lab found of acting."""
    return "\n".join(f"# {line}" for line in textwrap.wrap(acting_evidence(report), 110, break_on_hyphens=False))


def readme_sentences(report: dict[str, Any]) -> str:
    return " ".join(findings(report))


def family_sentences(report: dict[str, Any]) -> list[str]:
    """The ablations at T = 1 and every arm on the greedy reading registered beside it, with figures."""
    def reading(arm: str, test: dict[str, Any]) -> str:
        figures = f" ({_interval(test)}, Holm p {test['p_holm']:.3g})" if test["real"] else f" ({test['why']})"
        return f"{SETTINGS[arm]}: {verdict(test)}{figures}"

    primary = report["comparison"]["primary"]
    return ([f"Secondary: {reading(arm, t)}." for arm, t in primary.items() if arm != PRIMARY]
            + ["Greedy decoding, beside: "
               + "; ".join(reading(arm, t) for arm, t in report["comparison"]["greedy"].items()) + "."])


def acting_evidence_detail(report: dict[str, Any]) -> str:
    """Every reading behind the sentences: the primary, its seed pairs and MDEs, the ablations, the greedy readings,
    each regime, the predictor."""
    parts = [f"Primary: {primary_clause(report, True)}."]
    test = report["comparison"]["primary"][PRIMARY]
    if test["real"]:
        planned = report["planned_mde"][PRIMARY]["with_tau"]["mde"]
        parts.append(f"Seed pairs beside: {_interval(test['seed_pairs'])}; realised MDE {test['mde']:.3f} against "
                     f"{planned:.3f} planned.")
    parts += family_sentences(report)
    parts += [f"By regime, {regime_case(report, r)['clause']}." for r in REGIMES]
    parts.append(f"Can a run's own early logs tell the sign of its task's effect? {report['predictor']['verdict']} "
                 f"({report['predictor']['why']}).")
    return " ".join(parts)


def cases(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The regimes with at least one task whose check passed, as analyze places a run among them."""
    return [regime_case(report, r) for r in REGIMES if regime_tasks(report, r)]


def decision_table(report: dict[str, Any]) -> str:
    """results.md's decision table: per regime, each setting's reading; the primary above it."""
    rows = []
    for regime in REGIMES:
        case = regime_case(report, regime)
        cells = []
        for by in report["by_regime"].values():
            test, reading = by[regime], regime_reading(by[regime])
            figures = _interval(test) if "ci95" in test else f"{test['mean']:+.3f}" if test["tasks"] else ""
            cells.append(f"{reading}: {figures}" if figures else reading)
        rows.append(f"| {REGIME_WORDS[regime]} ({_count(case['tasks'], 'task')} whose check passed) | "
                    + " | ".join(cells) + " |")
    header = "| regime (GRPO's early groups) | " + " | ".join(f"`{arm}`" for arm in report["by_regime"]) + " |"
    return "\n".join([
        f"**{' '.join(findings(report))}**", "",
        " ".join([f"Primary (tasks as the unit, one registered look): {primary_clause(report, True)}.",
                  *family_sentences(report)]), "",
        header, "|" + "---|" * (1 + len(report["by_regime"])), *rows, "",
        f"Settings: {'; '.join(f'`{arm}` is {text}' for arm, text in SETTINGS.items())}. Each cell: frontier-tier test "
        "accuracy at T = 1 minus GRPO's, a paired t over the regime's tasks where the setting acted (95%, no Holm: "
        f"secondary). Full report, every run's curve: [tasks/tasks.md](tasks/tasks.md).",
    ])
