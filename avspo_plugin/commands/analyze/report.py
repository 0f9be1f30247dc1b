"""The terminal summary of the analysed runs, one block per run and a side-by-side table."""

from __future__ import annotations

from typing import Any

from avspo_plugin.commands.analyze.regimes import REGIME_TITLES

from .analysis import RunResult
from .lab_evidence import LabEvidence, evidence_lines
from .signals import PAPER_FIT


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: control characters (escape sequences, NUL, ...) shown escaped."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _short(text: str, width: int) -> str:
    text = printable(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 3] + "..."


def run_block(result: RunResult) -> str:
    r = result.report
    lines = [f"== {printable(r['label'])}  ({r['format']}: {printable(r['source'])})", f"  ACR from: {r['basis']}"]
    steps = r["steps"]
    sizes = r.get("group_sizes")
    sizes_text = ""
    if sizes:
        sizes_text = "; group size " + ", ".join(f"{size} ({count} groups)" for size, count in sizes.items())
    lines.append(f"  steps {steps['first']}..{steps['last']} ({steps['count']} logged){sizes_text}")
    means = r["means"]
    interval = ""
    if means["acr_low"] is not None:
        interval = f" (between {_num(means['acr_low'])} and {_num(means['acr_high'])})"
    split = ""
    if means["acr_all_fail"] is not None:
        split = f": all-fail {_num(means['acr_all_fail'])}, all-pass {_num(means['acr_all_pass'])}"
    near = f"; near-collapse {_num(means['near_collapse'])}" if means["near_collapse"] is not None else ""
    lines.append(f"  ACR mean {_num(means['acr'])}{interval}{split}{near}")
    if r["reward_mean"] is not None:
        reward = r["reward_mean"]
        lines.append(f"  reward mean {_num(reward['first'])} at the start, {_num(reward['last'])} at the end")

    early = r["early_warning"]
    bounds = f" (between {_num(early['acr_low'])} and {_num(early['acr_high'])})" if early["acr_low"] is not None else ""
    done = "" if early["complete"] else f"  [run shorter than the window: {early['points']} logged steps]"
    lines.append(f"  early ACR, steps {early['window'][0]}-{early['window'][1]}: {_num(early['acr'])}{bounds}{done}")
    stall = r["stagnation"]
    rule = f"ACR > {stall['acr_above']} for more than {stall['more_than_steps']} consecutive steps"
    if not stall["enabled"]:
        lines.append("  stagnation signal: disabled")
    elif stall["fired"]:
        lines.append(f"  stagnation signal ({rule}): FIRED at step {stall['fired_at_step']}")
    else:
        longest = stall["longest_run_steps"]
        lines.append(f"  stagnation signal ({rule}): not fired (longest run above it: {longest} step(s))")
    projected = r["projection"]
    if projected is not None and projected["value"] is not None:
        span = ""
        if projected["low"] is not None and projected["low"] != projected["high"]:
            span = f" (between {projected['low']:.1f} and {projected['high']:.1f})"
        partial = "" if projected["complete"] else " [from an incomplete window]"
        outside = " [ACR outside the fitted range]" if projected.get("extrapolated") else ""
        lines.append(f"  projected {projected['fit']['target']}: {projected['value']:.1f}{span}{partial}{outside}")
        lines.append(f"    by {projected['fit']['label']}")
    validation = r.get("validation")
    if validation is not None:
        lines.append(
            f"  validation mean score: {_num(validation['last']['mean_score'])} at step {validation['last']['step']} "
            f"(best {_num(validation['best']['mean_score'])} at step {validation['best']['step']})"
        )
    prompts = r.get("prompts")
    if prompts and prompts["top"]:
        lines.append(f"  prompts that wasted the most rollouts ({prompts['prompts']} prompts seen):")
        lines.append(f"    {'wasted':>6} {'groups':>6} {'fail':>5} {'pass':>5}  prompt")
        for row in prompts["top"]:
            lines.append(
                f"    {row['wasted_rollouts']:>6} {row['groups']:>6} {row['all_fail']:>5} {row['all_pass']:>5}  "
                f"{_short(row['prompt'], 70)}"
            )
    chosen = r.get("selection")
    if chosen is not None:
        lines.append(
            f"  prompt selection replayed: would have skipped {chosen['skipped']} of {chosen['prompts']} prompt visits "
            f"({_pct(chosen['skipped_fraction'])}), {chosen['rollouts_saved']} of {chosen['rollouts']} rollouts "
            f"({_pct(chosen['rollouts_saved_fraction'])}); right on {_pct(chosen['skip_precision'])} of the skips "
            f"(they collapsed); prediction precision {_num(chosen['precision'])}, recall {_num(chosen['recall'])}"
        )
    if r["advice"]:
        lines.append("  advice (estimates):")
        lines += [f"    - {line}" for line in r["advice"]]
    for title, items in (("WARNINGS", r["warnings"]), ("notes", r["notes"]), ("caveats", r["caveats"])):
        if items:
            lines.append(f"  {title}:")
            lines += [f"    - {printable(item)}" for item in items]
    return "\n".join(lines)


COLUMNS = (
    ("run", "label", lambda v: _short(str(v), 24)),
    ("steps", "steps", str),
    ("early ACR", "acr_early", _num),
    ("mean ACR", "acr_mean", _num),
    ("all-fail", "all_fail", _pct),
    ("all-pass", "all_pass", _pct),
    ("regime", "regime", lambda v: "-" if v is None else REGIME_TITLES[v]),
    ("stagnation", "stagnation_at", lambda v: "-" if v is None else f"step {v}"),
    ("projected", "projected", lambda v: "n/a" if v is None else f"{v:.1f}"),
    ("reward end", "reward_last", _num),
    ("val end", "val_last", _num),
    ("exact", "exact", lambda v: "yes" if v else "proxy"),
)


def comparison_table(rows: list[dict[str, Any]]) -> str:
    projected = any(row["projected"] is not None for row in rows)
    columns = [column for column in COLUMNS if projected or column[1] != "projected"]
    cells = [[fmt(row[key]) for _, key, fmt in columns] for row in rows]
    widths = [max(len(title), *(len(line[i]) for line in cells)) for i, (title, _, _) in enumerate(columns)]
    header = "  ".join(title.ljust(width) for (title, _, _), width in zip(columns, widths))
    body = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)) for line in cells]
    return "\n".join(["== side by side", header, *body])


# Why no final score is projected by default: the paper's line measures the paper's runs; it forecasts no other.
NO_PROJECTION = (
    f"No final score projected: the paper's line (final MATH-500 accuracy = {PAPER_FIT.intercept} - "
    f"{-PAPER_FIT.slope} * ACR_100, over 245 GRPO configurations of Qwen2.5-Math) is the paper's measurement on "
    "its models, not a forecast for this run. --paper-fit applies it to a MATH-500 run like the paper's; "
    "--fit FILE applies a line fitted on runs like this one."
)


def summary(results: list[RunResult], rows: list[dict[str, Any]], evidence: LabEvidence) -> str:
    blocks = [run_block(result) for result in results]
    if len(results) > 1:
        blocks.append(comparison_table(rows))
    if all(result.report["projection"] is None for result in results):
        blocks.append(NO_PROJECTION)
    blocks.append("\n".join(evidence_lines(evidence)))
    return "\n\n".join(blocks)

