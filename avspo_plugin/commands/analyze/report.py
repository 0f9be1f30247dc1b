"""The terminal summary of the analysed runs, one block per run and a side-by-side table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from avspo_plugin.evidence.regimes import REGIME_TITLES

from .advice import mode_text, percent
from .run_analysis import RunResult


def number(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: control characters (escape sequences, NUL, ...) shown escaped."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _between(values: dict[str, Any]) -> str:
    """' (between LOW and HIGH)' where ACR is an interval, else ''."""
    return "" if values["acr_low"] is None else f" (between {number(values['acr_low'])} and {number(values['acr_high'])})"


def _short(text: str, width: int) -> str:
    text = printable(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 3] + "..."


def run_block(result: RunResult) -> str:
    r = result.report
    lines = [f"== {printable(r['label'])}  ({r['format']}: {printable(r['source'])})", f"  ACR from: {r['basis']}"]
    mode = r["avspo"]["mode"]
    if mode is not None:
        lines.append(f"  AVSPO in this run: {mode_text(mode)}; {mode['evidence']}")
    steps, sizes, means = r["steps"], r.get("group_sizes"), r["means"]
    sizes_text = "; group size " + ", ".join(f"{size} ({count} groups)" for size, count in sizes.items()) if sizes else ""
    lines.append(f"  steps {steps['first']}..{steps['last']} ({steps['count']} logged){sizes_text}")
    split = "" if means["acr_all_fail"] is None else (
        f": all-fail {number(means['acr_all_fail'])}, all-pass {number(means['acr_all_pass'])}")
    near = f"; near-collapse {number(means['near_collapse'])}" if means["near_collapse"] is not None else ""
    lines.append(f"  ACR mean {number(means['acr'])}{_between(means)}{split}{near}")
    reward = r["reward_mean"]
    if reward is not None:
        lines.append(f"  reward mean {number(reward['first'])} at the start, {number(reward['last'])} at the end")
    early = r["early_warning"]
    done = "" if early["complete"] else f"  [run shorter than the window: {early['points']} logged steps]"
    window = f"{early['window'][0]}-{early['window'][1]}"
    lines.append(f"  early ACR, steps {window}: {number(early['acr'])}{_between(early)}{done}")
    stall = r["stagnation"]
    rule = f"ACR > {stall['acr_above']} for more than {stall['more_than_steps']} consecutive steps"
    state = (f"FIRED at step {stall['fired_at_step']}" if stall["fired"] else
             f"not fired (longest run above it: {stall['longest_run_steps']} step(s))")
    lines.append(f"  stagnation signal ({rule}): {state}" if stall["enabled"] else "  stagnation signal: disabled")
    validation = r.get("validation")
    if validation is not None:
        lines.append(
            f"  validation mean score: {number(validation['last']['mean_score'])} at step {validation['last']['step']} "
            f"(best {number(validation['best']['mean_score'])} at step {validation['best']['step']})"
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
    ("early ACR", "acr_early", number),
    ("mean ACR", "acr_mean", number),
    ("effective ACR", "effective_acr", number),
    ("all-fail", "all_fail", percent),
    ("all-pass", "all_pass", percent),
    ("regime", "regime", lambda v: "-" if v is None else REGIME_TITLES[v]),
    ("stagnation", "stagnation_at", lambda v: "-" if v is None else f"step {v}"),
    ("reward end", "reward_last", number),
    ("val end", "val_last", number),
    ("exact", "exact", lambda v: "yes" if v else "proxy"),
)


def comparison_cells(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """(column titles, one row of cells per run) of the side-by-side table."""
    return [title for title, _, _ in COLUMNS], [[fmt(row[key]) for _, key, fmt in COLUMNS] for row in rows]


def _aligned(titles: list[str], cells: list[list[str]]) -> list[str]:
    widths = [max(len(title), *(len(line[i]) for line in cells)) for i, title in enumerate(titles)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in [titles, *cells]]


def _point(point: dict[str, Any]) -> str:
    return f"{point['accuracy']:.3f} at step {point['step']}"


def accuracy_cells(accuracy: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(titles, cells) of the accuracy comparison: each run's first, final and best value, and when it first reached
    the reference run's final value."""
    reference = accuracy["reference_final"]
    reach = f"reached {accuracy['reference']}'s final {reference['accuracy']:.3f}"
    cells = []
    for run in accuracy["runs"]:
        rollouts = run["rollouts_to_reference_final"]
        reached = ("not reached" if run["reached_at_step"] is None else f"at step {run['reached_at_step']}, "
                   + ("rollouts not logged" if rollouts is None else f"{rollouts:,} rollouts"))
        cells.append([_short(run["label"], 24), _point(run["first"]), _point(run["final"]), _point(run["best"]), reached])
    return ["run", "first", "final", "best", reach], cells


def paired_cells(paired: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(titles, cells) of the seed-paired comparison: each seed's final values and their difference."""
    reference, other = paired["reference"], paired["other"]
    return (["seed", reference, other, f"{other} - {reference}"],
            [[row["seed"], f"{row[reference]:.3f}", f"{row[other]:.3f}", f"{row['difference']:+.3f}"]
             for row in paired["per_seed"]])


def summary(results: list[RunResult], rows: list[dict[str, Any]], accuracy: dict[str, Any] | None = None) -> str:
    blocks = [run_block(result) for result in results]
    if len(results) > 1:
        blocks.append("\n".join(["== side by side", *_aligned(*comparison_cells(rows))]))
    if accuracy is not None:
        blocks.append("\n".join([f"== accuracy: {printable(accuracy['key'])}", *_aligned(*accuracy_cells(accuracy)),
                                 accuracy["caveat"]]))
    return "\n\n".join(blocks)


def _markdown_table(titles: list[str], cells: list[list[str]]) -> list[str]:
    def row(items: list[str]) -> str:
        return "| " + " | ".join(item.replace("|", "\\|") for item in items) + " |"

    return [row(titles), "|" + "---|" * len(titles), *(row(line) for line in cells)]


def markdown(results: list[RunResult], rows: list[dict[str, Any]], accuracy: dict[str, Any] | None, summary_text: str,
             document: dict[str, Any]) -> str:
    """analysis.md: the comparison in tables, the plots by their file names (beside it in --out), and the terminal
    summary in full."""
    labels = ", ".join(printable(result.label) for result in results)
    lines = [f"# avspo analyze: {labels}", "",
             "Written by `avspo analyze` beside `analysis.json` (every number below, and more) and the plots.", ""]
    lines += ["## Side by side", "",
              "ACR: the mean share of a step's groups whose rewards were all equal. Effective ACR: the mean share whose "
              "advantages were all zero, what the run's advantages wasted (AVSPO's own metric where the run logged "
              "it; else its ACR, as GRPO's advantages are zero in exactly the collapsed groups).", "",
              *_markdown_table(*comparison_cells(rows)), ""]
    if accuracy is not None:
        lines += [f"## Accuracy: `{printable(accuracy['key'])}`", "", *_markdown_table(*accuracy_cells(accuracy)), ""]
        if accuracy["paired"] is not None:
            lines += ["### Seed by seed", "", *_markdown_table(*paired_cells(accuracy["paired"])), ""]
        lines += [accuracy["caveat"], ""]
    plots = [Path(path).name for run in document["runs"] for name, path in run["files"].items() if name != "prompts_csv"]
    plots += [Path(document[key]).name for key in ("comparison_plot", "accuracy_plot") if key in document]
    if plots:
        lines += ["## Plots", "", *(f"![{name}]({name})" for name in plots), ""]
    lines += ["## The full summary", "", "```", summary_text, "```", ""]
    return "\n".join(lines)
