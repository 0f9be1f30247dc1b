"""What ``python -m lab study`` writes: study.md and the plots, from the report it built (study.json)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from ..report import markdown_table, method_colors, smooth


def _interval(test: dict) -> str:
    low, high = test["ci95"]
    return f"{test['mean']:+.4f} [{low:+.4f}, {high:+.4f}]"


def _p(value: float) -> str:
    return f"{value:.2g}" if value >= 1e-4 else "<1e-4"


def comparison_table(family: dict[str, dict], means: dict, key: str, baseline: str, mde_target: float) -> list[str]:
    header = ["method", f"{key} (mean ± 95% CI)", f"Δ vs {baseline} [95% CI]", "pairs", "p", "p (Holm)",
              f"MDE 80% (≤ {mde_target}?)", "MDE 80% at Holm's strictest level"]

    def mean(name: str) -> str:
        m = means[name][key]
        return f"{m['mean']:.4f}" + (f" ± {m['ci95']:.4f}" if m["ci95"] is not None else "")

    rows = [[baseline, mean(baseline), "", "", "", "", "", ""]]
    for name, test in family.items():
        rows.append([name, mean(name), _interval(test), str(test["n"]), _p(test["p"]),
                     _p(test["p_holm"]) + (" *" if test["significant"] else ""),
                     f"{test['mde']:.4f} ({'yes' if test['mde'] <= mde_target else 'no'})", f"{test['mde_holm']:.4f}"])
    return markdown_table(header, rows)


def _value(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return str(value)


def gates_table(gates: dict[str, dict[str, dict]]) -> list[str]:
    """One row per base and gate: value, bound, passed."""
    rows = [[base, name, _value(g["value"]), _value(g["bound"]), "pass" if g["passed"] else "**FAIL**"]
            for base, by_name in gates.items() for name, g in by_name.items()]
    return markdown_table(["base", "gate", "value", "bound", "result"], rows)


def study_markdown(report: dict) -> str:
    design, settings, analysis = report["design"], report["settings"], report["analysis"]
    baseline = design["baseline"]
    compared = [name for name, b in report["bases"].items() if b["compared"]]
    budget = settings["rollout_budget"]
    seeds = design["seeds"]
    lines = [
        "# AVSPO CPU lab: the study",
        "",
        f"{len(design['methods'])} methods, bases chosen by regime, every run to exactly {budget:,} rollouts "
        f"({settings['prompts']} prompts x G = {settings['group_size']} per generation batch), evaluated at "
        f"{', '.join(f'{f:.1%}' for f in settings['eval_fractions'])} of that budget: avg@{settings['eval_samples']} "
        f"at temperature {settings['eval_temperature']} on {settings['held_out_per_tier']} held-out problems per "
        f"tier, and greedy. GRPO's settings frozen by tuning: `{design['frozen_grpo']}`. Seeds per base: "
        + ", ".join(f"{len(v)} for {m}" for m, v in seeds.items()) + ". The design is fixed in code: docs/evidence/study.md.",
        "",
        "## Gates",
        "",
        "GRPO must clearly learn on a base before any method is compared there (docs/evidence/study.md). "
        + ("A base that fails a gate is not used." if design["gates_enforced"] else
           "**Gates not enforced: a quick run checks the pipeline on a toy budget, it compares nothing.**"),
        "",
        *gates_table(report["gates"]),
        "",
        "## Base policies",
        "",
        "Candidates in order, judged by the rule on base-policy statistics only (all-fail share F and all-pass "
        "share P of G-sample groups over the held-out prompts, weighted by the RL tier mix):",
        "",
    ]
    rows = [[c["name"], c["regime"] or "not eligible",
             (f"yes, for {c['added_for']} in training" if c.get("added_for") else "yes") if c["chosen"] else "no",
             f"{c['description']['held_out']['accuracy']:.3f}", f"{c['description']['held_out']['greedy']:.3f}", c["why"]]
            for c in report["candidates"]]
    lines += markdown_table(["candidate", "regime", "chosen", "held-out accuracy", "greedy", "rule"], rows)
    lines += ["", "## Regimes as training shows them", "",
              "The rule `avspo analyze` applies to a user's logs, on GRPO's first half of training (all-fail and "
              "all-pass shares of groups, mean over steps and seeds): the decision table's rows are these regimes. "
              "A regime no rule-chosen base shows in training gets the candidate that tuning found to show it "
              f"({', '.join(f'{r}: {n}' for r, n in design.get('training_regime_bases', {}).items())}), as one more "
              "base.", ""]
    rows = [[name, b["regime"], b["training"]["regime"], f"{b['training']['all_fail_first_half']:.3f}",
             f"{b['training']['all_pass_first_half']:.3f}"] for name, b in report["bases"].items()]
    lines += markdown_table(["base", "by base statistics", "in training", "all-fail (first half)",
                             "all-pass (first half)"], rows)
    lines.append("")
    if not compared or analysis is None:
        lines += ["**No method was compared: no base passes the gates.**", ""]
        return "\n".join(lines + _timing(report))
    lines += manipulation_section(report["manipulation"], compared, design)
    lines += [
        "Compared on: " + ", ".join(f"{b} ({training_title(report, b)})" for b in compared) + ". Δ is the difference "
        f"to {baseline} paired by base and seed; p from a paired t-test; Holm's correction over the "
        f"{len(design['methods']) - 1} methods compared with {baseline} (* : significant at {design['alpha']}); MDE: "
        f"the smallest true paired difference detected with {design['power']:.0%} power. Pooled comparisons take "
        "only the bases where the method acted: "
        + "; ".join(f"{m}: {', '.join(on) or 'none (left out)'}" for m, on in analysis["pooled_bases"].items()) + ".",
        "",
    ]
    for key, title in (("accuracy", "Held-out accuracy at the rollout budget (primary endpoint)"),
                       ("auc", "Mean accuracy over the rollout budget (AUC)"),
                       ("greedy", "Greedy accuracy at the rollout budget")):
        lines += [f"## {title}", "",
                  *comparison_table(analysis["pooled"][key], analysis["means"], key, baseline, design["mde_target"]),
                  ""]
    lines += [f"## Per base (regime): Δ held-out accuracy at the budget vs {baseline}", ""]
    per_base = analysis["per_base"]
    methods = [m for m in design["methods"] if m != baseline]
    rows = [[name, *(_per_base_cell(per_base[b]["accuracy"][name], report["manipulation"][name].get(b))
                     for b in compared)] for name in methods]
    lines += markdown_table(["method", *(f"{b} ({training_title(report, b)})" for b in compared)], rows)
    lines += ["", f"## Rollouts to reach {baseline}'s final accuracy", "",
              f"First crossing of the method's mean accuracy curve (over seeds) with {baseline}'s mean final accuracy "
              "on the same base, linear between evaluations; \"never\" when it stays below.", ""]
    reach = report["rollouts_to_grpo_final"]
    rows = [[name, *("never" if reach[name].get(b) is None else f"{reach[name][b]:,.0f}" for b in compared)]
            for name in design["methods"]]
    lines += markdown_table(["method", *compared], rows)
    lines += ["", "## Collapse, clipping and cost (mean over compared bases and seeds)", ""]
    summaries = report["summaries"]

    def over_bases(name: str, pick) -> float:
        values = [pick(summaries[name][b]) for b in compared if b in summaries[name]]
        values = [v for v in values if v is not None]
        return float(np.mean(values)) if values else float("nan")

    def series_mean(key: str):
        def pick(summary: dict) -> float | None:
            values = [v for v in summary["series"].get(key, []) if v is not None]
            return float(np.mean(values)) if values else None
        return pick

    header = ["method", "steps", "ACR", "effective ACR", "all-fail", "all-pass", "skipped prompts / step",
              "clip binds", "median grad norm", "wall s / run", "CPU s / run"]
    rows = [[name, f"{over_bases(name, lambda s: s['steps']):.1f}",
             *(f"{over_bases(name, series_mean(k)):.3f}" for k in ("acr", "effective_acr", "acr_all_fail",
                                                                   "acr_all_pass", "skipped_prompts")),
             f"{over_bases(name, lambda s: s['clip_bound']):.2f}", f"{over_bases(name, lambda s: s['grad_norm_median']):.3g}",
             f"{over_bases(name, lambda s: s['wall_s']):.0f}", f"{over_bases(name, lambda s: s['cpu_s']):.0f}"]
            for name in design["methods"]]
    lines += markdown_table(header, rows)
    lines += best_lr_section(report, design)
    lines += ["", "## Methods", "", *(f"- `{name}`: {text}" for name, text in report["method_descriptions"].items()), ""]
    if report["not_rerun"]:
        lines += ["Arms of the earlier study not run here:", "",
                  *(f"- `{name}`: {why}" for name, why in report["not_rerun"].items()), ""]
    lines += ["Plots: paired_differences.png (Δ vs the baseline with 95% intervals, pooled and per base), "
              "accuracy_by_tier.png, collapse_by_tier.png, avspo_threshold.png (means over seeds; no bands).", ""]
    return "\n".join(lines + _timing(report))


def training_title(report: dict, base: str) -> str:
    return f"{report['bases'][base]['training']['regime']} in training"


def _check_words(check: dict | None) -> str:
    if check is None:
        return "no claim to check"
    if "skipped_share" in check:
        return f"skipped {check['skipped_share']:.1%} of candidate prompts"
    ratio = "no such group in GRPO's run" if check["effective_acr_ratio"] is None else \
        f"effective ACR {check['effective_acr_ratio']:.2f} x GRPO's"
    trigger = "" if check["trigger_rate"] is None else f", trigger rate {check['trigger_rate']:.1%}"
    return ratio + trigger


def _per_base_cell(test: dict, check: dict | None) -> str:
    if check is not None and not check["acted"]:
        return f"did not act ({_check_words(check)})"
    return _interval(test)


def manipulation_section(checks: dict, compared: list[str], design: dict) -> list[str]:
    """Did each method act on each base (design point 5)?"""
    lines = ["## Manipulation check: where each method acted", "",
             f"A method acted on a base when its effective ACR of the collapsed groups it targets is at most "
             f"{design['manipulation_ratio']} x GRPO's there (selection: at least {design['min_skipped_share']:.0%} of "
             "candidate prompts skipped). Where it did not act, this study says nothing of its effect there.", ""]
    rows = [[name, *((("acted: " if c["acted"] else "**did not act**: ") + _check_words(c)) if c is not None
                     else "no claim" for c in (by_base.get(b) for b in compared))] for name, by_base in checks.items()]
    return lines + markdown_table(["method", *compared], rows) + [""]


def best_lr_section(report: dict, design: dict) -> list[str]:
    """Phase 3: GRPO's accuracy-best learning rate, and the acting AVSPO arm against GRPO there."""
    best = report["best_lr"]
    if best is None:
        return ["", "## At GRPO's accuracy-best learning rate", "", "**Phase 3 has not run yet.**", ""]
    lines = ["", "## At GRPO's accuracy-best learning rate", "",
             f"GRPO alone at learning rates {', '.join(str(lr) for lr in design['lr_candidates'])} on tuning seeds "
             f"{best['seeds']}, every compared base; mean final held-out accuracy:", ""]
    lines += markdown_table(["learning rate", "mean final accuracy", *best["final_accuracy"][next(iter(best["final_accuracy"]))]],
                            [[lr, f"{best['mean_final_accuracy'][lr]:.4f}",
                              *(", ".join(f"{a:.3f}" for a in accs) for accs in by_base.values())]
                             for lr, by_base in best["final_accuracy"].items()])
    at = report["at_best_lr"]
    if at is None:
        return lines + ["", f"Best: {best['best']}, the study's own: phases 1-2 are the comparison there.", ""]
    lines += ["", f"Best: {best['best']}. GRPO and `{design['acting_avspo']}` at it, the study's seeds; GRPO's learning "
              f"gates ({', '.join(design['learning_gates'])}) there:", "", *gates_table(at["gates"]), ""]
    if at["analysis"] is None:
        return lines + ["**No base passes GRPO's learning gates at this learning rate: nothing compared.**", ""]
    lines += [f"Compared on {', '.join(at['compared'])}; manipulation: " + "; ".join(
        f"{b}: {'acted' if c['acted'] else 'did not act'} ({_check_words(c)})"
        for b, c in at["manipulation"][design["acting_avspo"]].items()) + ".", ""]
    for key in ("accuracy", "auc", "greedy"):
        lines += [f"{key}:", "", *comparison_table(at["analysis"]["pooled"][key], at["analysis"]["means"], key,
                                                   design["baseline"], design["mde_target"]), ""]
    per_base = at["analysis"]["per_base"]
    lines += markdown_table(["base", "Δ accuracy vs grpo"],
                            [[b, _interval(per_base[b]["accuracy"][design["acting_avspo"]])] for b in at["compared"]])
    return lines + [""]


def _timing(report: dict) -> list[str]:
    timing = report["timing"]
    return [f"Wall time {timing['wall_s'] / 60:.1f} min; CPU time {timing['cpu_s'] / 3600:.2f} h ({timing['jobs']} "
            f"worker processes, one torch thread each); {report['design']['planned_runs']} runs planned.", ""]


def plot_study(report: dict, out: Path) -> list[Path]:
    design, analysis, summaries = report["design"], report["analysis"], report["summaries"]
    bases = [name for name, b in report["bases"].items() if b["compared"]]
    methods = [m for m in design["methods"] if all(b in summaries.get(m, {}) for b in bases)]
    colors = method_colors(methods)
    tiers = [str(d) for d in report["settings"]["tiers"]]
    written: list[Path] = []
    if not bases or analysis is None:
        return written

    compared = list(analysis["pooled"]["accuracy"])
    fig = Figure(figsize=(11, 0.5 * len(compared) + 2))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, key in zip(axes, ("accuracy", "auc")):
        for i, name in enumerate(compared):
            test = analysis["pooled"][key][name]
            ax.errorbar(test["mean"], i, xerr=[[test["mean"] - test["ci95"][0]], [test["ci95"][1] - test["mean"]]],
                        fmt="o", color=colors[name], capsize=3, label="pooled" if i == 0 else None)
            for j, b in enumerate(bases):
                per = analysis["per_base"][b][key][name]
                ax.plot(per["mean"], i + 0.15 + 0.08 * j, marker="x", color="grey", markersize=4,
                        label="per base" if i == 0 and j == 0 else None)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_title(f"Δ {key} vs {design['baseline']} (paired mean, 95% CI)")
        ax.grid(alpha=0.3)
    axes[0].set_yticks(range(len(compared)), compared)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    written.append(out / "paired_differences.png")
    fig.savefig(written[-1], dpi=90)

    def grid(title: str, filename: str, draw) -> None:
        fig = Figure(figsize=(4 * len(bases), 2.2 * len(tiers)))
        axes = fig.subplots(len(tiers), len(bases), sharex="col", squeeze=False)
        for r, tier in enumerate(tiers):
            for c, base in enumerate(bases):
                ax = axes[r][c]
                for name in methods:
                    draw(ax, summaries[name][base], tier, name)
                ax.set_title(f"base {base}, tier {tier}", fontsize=9)
                ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=6)
        fig.suptitle(title)
        fig.tight_layout()
        written.append(out / filename)
        fig.savefig(written[-1], dpi=80)

    def accuracy(ax, summary: dict, tier: str, name: str) -> None:
        ax.plot(summary["eval_rollouts"], summary["accuracy_by_tier"][tier], marker="o", markersize=3,
                color=colors[name], label=name)

    def collapse(ax, summary: dict, tier: str, name: str) -> None:
        values = np.asarray([np.nan if v is None else v for v in summary["series"].get(f"acr_tier{tier}", [])])
        ax.plot(np.arange(1, values.size + 1), values, color=colors[name], label=name, linewidth=1)

    grid("Held-out accuracy per tier over rollouts (mean over seeds)", "accuracy_by_tier.png", accuracy)
    grid("ACR per tier over steps (mean over seeds)", "collapse_by_tier.png", collapse)

    avspo = [m for m in methods if "threshold" in summaries[m][bases[0]]["series"]]
    if avspo:
        fig = Figure(figsize=(4 * len(bases), 7))
        axes = fig.subplots(3, len(bases), sharex=True, squeeze=False)
        for c, base in enumerate(bases):
            for r, key in enumerate(("threshold", "acr", "triggered")):
                ax = axes[r][c]
                for name in avspo:
                    values = np.asarray([np.nan if v is None else v for v in summaries[name][base]["series"][key]])
                    window = max(1, values.size // 20)
                    ax.plot(np.arange(1, values.size + 1), smooth(values, window), color=colors[name], label=name)
                ax.set_title(f"base {base}: {key}", fontsize=9)
                ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=7)
        fig.suptitle("AVSPO: threshold tau, ACR and trigger rate over steps (mean over seeds, moving average)")
        fig.tight_layout()
        written.append(out / "avspo_threshold.png")
        fig.savefig(written[-1], dpi=80)
    return written
