"""What ``avspo lab study`` writes: study.md and the plots, from the report it built (study.json)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .report import markdown_table, method_colors, smooth


def _interval(test: dict) -> str:
    low, high = test["ci95"]
    return f"{test['mean']:+.4f} [{low:+.4f}, {high:+.4f}]"


def _p(value: float) -> str:
    return f"{value:.2g}" if value >= 1e-4 else "<1e-4"


def comparison_table(family: dict[str, dict], means: dict, key: str, baseline: str) -> list[str]:
    from .study import MDE_TARGET

    header = ["method", f"{key} (mean ± 95% CI)", f"Δ vs {baseline} [95% CI]", "p", "p (Holm)",
              f"MDE 80% (≤ {MDE_TARGET}?)", "MDE 80% at Holm's strictest level"]
    rows = [[baseline, f"{means[baseline][key]['mean']:.4f} ± {means[baseline][key]['ci95']:.4f}", "", "", "", "", ""]]
    for name, test in family.items():
        rows.append([name, f"{means[name][key]['mean']:.4f} ± {means[name][key]['ci95']:.4f}", _interval(test),
                     _p(test["p"]), _p(test["p_holm"]) + (" *" if test["significant"] else ""),
                     f"{test['mde']:.4f} ({'yes' if test['mde'] <= MDE_TARGET else 'no'})", f"{test['mde_holm']:.4f}"])
    return markdown_table(header, rows)


def study_markdown(report: dict) -> str:
    design, settings, analysis = report["design"], report["settings"], report["analysis"]
    baseline = design["baseline"]
    bases = [c for c in report["candidates"] if c["accepted"]]
    n_pairs = len(design["seeds"]) * len(bases)
    budget = settings["rollout_budget"]
    lines = [
        "# AVSPO CPU lab: the powered study",
        "",
        f"{len(design['methods'])} methods x {len(bases)} base policies (task seeds "
        f"{', '.join(str(b['task_seed']) for b in bases)}) x {len(design['seeds'])} seeds, every run to exactly "
        f"{budget:,} rollouts ({settings['prompts']} prompts x G = {settings['group_size']} per generation batch), "
        f"evaluated at {', '.join(f'{f:.0%}' for f in settings['eval_fractions'])} of that budget: avg@"
        f"{settings['eval_samples']} at temperature {settings['eval_temperature']} on {settings['held_out_per_tier']} "
        f"held-out problems per tier. Training set: {settings['train_per_tier']} problems per tier, shuffled epochs. "
        f"Gradient clip {settings['grad_clip']} (GRPO pilot). The design was fixed before any result: docs/study.md.",
        "",
        f"Δ is the difference to {baseline} paired by base and seed ({n_pairs} pairs); p from a paired t-test; Holm's "
        f"correction over the {len(design['methods']) - 1} methods compared with {baseline} (* : significant at "
        f"{design['alpha']}); MDE: the smallest true paired difference detected with {design['power']:.0%} power.",
        "",
        "## Base policies",
        "",
        "Candidates in order, judged by the rule on base-policy statistics only (pass rate of G samples per "
        "held-out prompt at the RL temperature):",
        "",
    ]
    tiers = [str(d) for d in settings["tiers"]]
    rows = [[str(c["task_seed"]), "yes" if c["accepted"] else "no",
             *(f"{c['description']['sampled_by_tier'][t]['pass_rate']:.3f}" for t in tiers),
             f"{c['description']['held_out']['accuracy']:.3f}", c["why"]]
            for c in report["candidates"]]
    lines += markdown_table(["task seed", "accepted", *(f"tier {t} pass" for t in tiers), "held-out avg@k", "rule"], rows)
    pilot = report["pilot"]
    lines += [
        "",
        f"Gradient clip: GRPO alone without a clip, seed {pilot['seed']}, {pilot['steps']} steps on base "
        f"{pilot['task_seed']}: median gradient norm {pilot['median_norm']:.3g}, {design['pilot']['quantile']:.0%} "
        f"quantile {pilot['quantile']:.3g} over its {pilot['updates']} steps (each step's norm: the mean over its "
        f"mini-batch updates); clip set to {pilot['grad_clip']}. How often it bound in the study's runs: the "
        "collapse and clipping table below.",
        "",
        "## Held-out accuracy at the rollout budget (primary endpoint)",
        "",
        *comparison_table(analysis["pooled"]["accuracy"], analysis["means"], "accuracy", baseline),
        "",
        "## Mean accuracy over the rollout budget (AUC)",
        "",
        *comparison_table(analysis["pooled"]["auc"], analysis["means"], "auc", baseline),
        "",
    ]
    if analysis["selection_goal"]:
        fraction = design["selection_fraction"]
        lines += [
            f"## Prompt selection: {baseline}'s final accuracy with {1 - fraction:.0%} fewer rollouts?",
            "",
            f"Held-out accuracy of the selection method at {fraction:.0%} of the budget minus {baseline}'s at 100%, "
            f"paired; reached when the interval's lower end is above -{design['selection_margin']}.",
            "",
        ]
        rows = [[name, _interval(goal), f"{goal['mde']:.4f}", "yes" if goal["reached"] else "no"]
                for name, goal in analysis["selection_goal"].items()]
        lines += markdown_table(["method", "Δ [95% CI]", "MDE 80%", "reached"], rows)
        lines.append("")
    lines += ["## Per base: Δ held-out accuracy at the budget vs " + baseline, ""]
    per_base = analysis["per_base"]
    methods = list(analysis["pooled"]["accuracy"])
    rows = [[name, *(_interval(per_base[str(b['task_seed'])]["accuracy"][name]) for b in bases)] for name in methods]
    lines += markdown_table(["method", *(f"base {b['task_seed']}" for b in bases)], rows)
    lines += ["", "## Collapse, clipping and cost (mean over bases and seeds)", ""]
    summaries = report["summaries"]

    def over_bases(name: str, pick) -> float:
        values = [pick(summaries[name][str(b["task_seed"])]) for b in bases]
        values = [v for v in values if v is not None]
        return float(np.mean(values)) if values else float("nan")

    def series_mean(key: str):
        def pick(summary: dict) -> float | None:
            values = [v for v in summary["series"].get(key, []) if v is not None]
            return float(np.mean(values)) if values else None
        return pick

    header = ["method", "steps", "ACR", "effective ACR", "all-fail", "all-pass", "skipped prompts / step",
              "clip binds", "median grad norm"]
    rows = [[name, f"{over_bases(name, lambda s: s['steps']):.1f}",
             *(f"{over_bases(name, series_mean(k)):.3f}" for k in ("acr", "effective_acr", "acr_all_fail",
                                                                   "acr_all_pass", "skipped_prompts")),
             f"{over_bases(name, lambda s: s['clip_bound']):.2f}", f"{over_bases(name, lambda s: s['grad_norm_median']):.3g}"]
            for name in design["methods"]]
    lines += markdown_table(header, rows)
    lines += [
        "",
        "## Answers right but never ended",
        "",
        f"Fraction of held-out samples whose answer digits are all right but are not followed by the end token "
        f"(they score 0), {baseline}, mean over bases and seeds, at the base policy and at the budget:",
        "",
    ]
    rows = [[f"tier {t}",
             f"{over_bases(baseline, lambda s, t=t: s['answer_without_end_by_tier'][t][0]):.3f}",
             f"{over_bases(baseline, lambda s, t=t: s['answer_without_end_by_tier'][t][-1]):.3f}",
             f"{over_bases(baseline, lambda s, t=t: s['accuracy_by_tier'][t][-1]):.3f}"] for t in tiers]
    lines += markdown_table(["tier", "base: right but not ended", "budget: right but not ended", "budget: accuracy"], rows)
    timing = report["timing"]
    lines += [
        "",
        "## Methods",
        "",
        *(f"- `{name}`: {text}" for name, text in report["method_descriptions"].items()),
        "",
        f"Wall time {timing['wall_s'] / 60:.1f} min; CPU time {timing['cpu_s'] / 3600:.2f} h ({timing['jobs']} worker "
        "processes, one torch thread each).",
        "",
        "Plots: paired_differences.png (Δ vs the baseline with 95% intervals, pooled and per base), "
        "accuracy_by_tier.png, collapse_by_tier.png, avspo_threshold.png (means over seeds; no bands).",
        "",
    ]
    return "\n".join(lines)


def plot_study(report: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    design, analysis, summaries = report["design"], report["analysis"], report["summaries"]
    bases = [str(c["task_seed"]) for c in report["candidates"] if c["accepted"]]
    methods = design["methods"]
    colors = method_colors(methods)
    tiers = [str(d) for d in report["settings"]["tiers"]]
    written = []

    compared = list(analysis["pooled"]["accuracy"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.5 * len(compared) + 2), sharey=True)
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
    plt.close(fig)

    def grid(title: str, filename: str, draw) -> None:
        fig, axes = plt.subplots(len(tiers), len(bases), figsize=(4 * len(bases), 2.2 * len(tiers)),
                                 sharex="col", squeeze=False)
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
        plt.close(fig)

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
        fig, axes = plt.subplots(3, len(bases), figsize=(4 * len(bases), 7), sharex=True, squeeze=False)
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
        plt.close(fig)
    return written
