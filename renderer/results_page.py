"""docs/evidence/results.md below its top block: the earlier decision table, the study where AVSPO acts, the sweep, the
morning study and the old testbed's study and sweep, every figure drawn from the JSON the lab wrote for them
(:data:`SOURCES`). Words are written here; each number, and each claim that rests on a number (significant or not,
on every base or on some), is computed from the reports.

The top blocks (the headroom study's decision table, ``<!-- BEGIN EVIDENCE results ... -->``, and the
learning-or-sharpening study, ``results-sharpening``) are rendered by renderer/docs_pages.py from their studies' JSON;
this module renders the text between :data:`BEGIN` and :data:`END`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from lab.research.statistics import paired_test

EVIDENCE = Path(__file__).resolve().parents[1] / "docs" / "evidence"
PAGE = EVIDENCE / "results.md"
SOURCES = {
    "afternoon": "study/study.json",
    "morning": "study-history/study-2026-11-26/study.json",
    "old": "study-history/study-2026-11-22/study.json",
    "sweep": "sweep/sweep.json",
    "fit": "sweep/fit.json",
    "old_sweep": "sweep-history/sweep.json",
}
BEGIN = ("<!-- BEGIN GENERATED results: rendered by `python -m renderer` (renderer/results_page.py) from docs/evidence/: "
         + ", ".join(SOURCES.values()) + " -->")
END = "<!-- END GENERATED results -->"
# Cited, not measured here: the AVSPO paper's R^2 of final accuracy on early ACR, and over how many configurations.
PAPER_ACR_FIT = (0.62, 245)
REGIME_WORDS = {"all_fail": "all-fail dominant", "mixed": "mixed", "all_pass": "all-pass dominant"}
# The afternoon study's arms as its pooled table names them.
ARM_WORDS = {
    "avspo_always": "every collapsed group, K by Eq. 9",
    "avspo_paper_point": "every collapsed group, K = G",
    "avspo_paper_point_all_pass": "all-pass groups only",
    "avspo_paper_point_all_fail": "all-fail groups only",
    "avspo_released": "the authors' rule, opposite bound, K = 1",
    "ngrpo": "one virtual sample at the maximum reward in every group",
    "random_variance": "the control, random artificial variance in collapsed groups",
}
# The old testbed's methods in words, where the text names them.
OLD_WORDS = {"dapo": "DAPO", "avspo": "AVSPO", "select_grpo": "selection with GRPO",
             "drgrpo": "Dr. GRPO (its loss is scaled smaller)"}


def load(name: str) -> dict:
    return json.loads((EVIDENCE / SOURCES[name]).read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------------------------
# Figures as the page writes them


def signed(value: float, digits: int = 4) -> str:
    return f"{value:+.{digits}f}"


def interval(test: dict, digits: int = 4) -> str:
    low, high = test["ci95"]
    return f"{signed(test['mean'], digits)} [{signed(low, digits)}, {signed(high, digits)}]"


def bold_if(text: str, condition: bool) -> str:
    return f"**{text}**" if condition else text


def significant(test: dict) -> str:
    return bold_if(interval(test), test["significant"])


def percent(share: float) -> str:
    return f"{share * 100:.1f}".removesuffix(".0") + "%"


def rate(value: float) -> str:
    """A learning rate as the page writes it: 1.5e-4, 6e-4."""
    mantissa, exponent = f"{value:e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def p_value(value: float) -> str:
    return f"{value:.1e}" if value < 1e-3 else f"{value:.2g}"


def span(values, digits: int = 2, unit: str = "") -> str:
    """``low to high`` (one value when they print the same)."""
    low, high = f"{min(values):.{digits}f}{unit}", f"{max(values):.{digits}f}{unit}"
    return low if low == high else f"{low} to {high}"


def percent_span(shares) -> str:
    return f"{min(shares) * 100:.0f}-{max(shares) * 100:.0f}%"


def times(factor: float) -> str:
    return "twice" if factor == 2 else f"{factor:g} times"


def listed(items: list[str]) -> str:
    """a, b and c."""
    return ", ".join(items[:-1]) + f" and {items[-1]}" if len(items) > 1 else "".join(items)


def on_every(flags: list[bool], what: str) -> str:
    return f"{what} every base" if all(flags) else f"{what} {sum(flags)} of {len(flags)} bases"


def series_mean(summary: dict, key: str) -> float:
    values = [value for value in summary["series"][key] if value is not None]
    return float(np.mean(values))


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(row) + " |" for row in rows)]


def final_accuracy(report: dict, method: str, base: str) -> float:
    return float(np.mean([seed["accuracy"] for seed in report["endpoints"][method][base].values()]))


def candidate(report: dict, name: str) -> dict:
    return next(c for c in report["candidates"] if c["name"] == name)


def same_as_grpo(report: dict, method: str, base: str) -> bool:
    return report["endpoints"][method][base] == report["endpoints"]["grpo"][base]


# ----------------------------------------------------------------------------------------------
# The afternoon study (docs/evidence/study/): the earlier decision table and the study itself


def decision_table(study: dict) -> list[str]:
    design, settings, analysis = study["design"], study["settings"], study["analysis"]
    per_base, bases = analysis["per_base"], [b for b, v in study["bases"].items() if v["compared"]]
    order = {regime: index for index, regime in enumerate(REGIME_WORDS)}
    bases.sort(key=lambda b: order[study["bases"][b]["training"]["regime"]])
    seeds = len(design["seeds"][design["baseline"]])
    arms = len(per_base[bases[0]]["accuracy"])

    def trigger_cell(base: str) -> str:
        check = study["manipulation"]["avspo"][base]
        if check["acted"]:
            return interval(per_base[base]["accuracy"]["avspo"])
        summary = study["summaries"]["avspo"][base]
        return (f"did not act (trigger rate {percent(check['trigger_rate'])}, ACR {series_mean(summary, 'acr'):.2f} "
                f"under tau_0 {summary['series']['threshold'][0]:g})")

    def setting(base: str) -> str:
        low, high = per_base[base]["accuracy"]["avspo_always"]["ci95"]
        if low > 0:
            return "`always`"
        return "`always` (no harm measured; no significant gain)" if high > 0 else "`never` (always lost accuracy)"

    rows = []
    for base in bases:
        accuracy = per_base[base]["accuracy"]
        rows.append([
            REGIME_WORDS[study["bases"][base]["training"]["regime"]],
            f"{base} ({candidate(study, base)['description']['held_out']['accuracy']:.3f} → "
            f"{final_accuracy(study, 'grpo', base):.3f})",
            trigger_cell(base), significant(accuracy["avspo_always"]),
            f"{significant(accuracy['avspo_paper_point_all_fail'])} / {significant(accuracy['avspo_paper_point_all_pass'])}",
            f"{significant(accuracy['ngrpo'])} / {significant(accuracy['random_variance'])}", setting(base),
        ])  # fmt: skip
    pooled = analysis["pooled"]
    always = {key: pooled[key]["avspo_always"] for key in ("accuracy", "auc", "greedy")}
    acr = [series_mean(study["summaries"]["avspo"][b], "acr") for b in bases]
    tau0 = study["summaries"]["avspo"][bases[0]]["series"]["threshold"][0]
    trigger = [study["manipulation"]["avspo"][b]["trigger_rate"] for b in bases]
    identical = sum(same_as_grpo(study, "avspo", b) for b in bases)
    best, at_best = study["best_lr"]["best"], study["at_best_lr"]["analysis"]["pooled"]["accuracy"]["avspo_always"]
    lost = [pooled["accuracy"][arm] for arm in ("ngrpo", "random_variance")]
    return [
        f"## The earlier decision table (avg@{settings['eval_samples']} at T = {settings['eval_temperature']:g}, which "
        "may be sharpening)",
        "",
        "The tables below read held-out accuracy sampled at the training temperature, on the held-out set that also chose",
        "the study's bases, gates and learning rates; the study above replaces them for the choice of the default.",
        "",
        "Find your run's regime in its logs (`avspo analyze` names it: all-fail dominant when the share of rollouts in "
        f"all-fail groups is at least {times(design['dominance'])} the share in all-pass groups, all-pass dominant the "
        "other way round, mixed otherwise), then read its row. The regimes are the ones GRPO's first half of training "
        "showed on each base (the study of 2026-11-26 afternoon, [study/study.md](study/study.md)); Δ is held-out "
        f"accuracy at the rollout budget minus GRPO's, paired by seed ({seeds} seeds per base, GRPO's frozen lr "
        f"{rate(design['frozen_grpo']['lr'])}), with its 95% interval; a method counts only where the manipulation check "
        f"says it acted. Bold: Holm-significant at {design['alpha']:g} within its base (Holm over the {arms} arms "
        "compared with GRPO).",
        "",
        *table(["regime (in your logs)", f"base (GRPO 0 → {settings['steps']} steps)",
                "AVSPO, paper's trigger (`threshold_mode=adaptive`)", "AVSPO acting (`threshold_mode=always`)",
                "acting on all-fail groups only / all-pass groups only (K = G)", "NGRPO / random variance",
                "what to set"], rows),
        "",
        "**Reading (measured on this lab).** AVSPO with the paper's equations and its adaptive trigger did not act in a "
        f"verl-sized batch ({settings['prompts']} prompts per step): its mean batch ACR stayed below tau_0 = {tau0:g} "
        f"on {'every base' if max(acr) < tau0 else 'some bases'} ({span(acr)}; trigger rate at most "
        f"{percent(max(trigger))}), so it trained as GRPO, bit for bit on {identical} of the {len(bases)} bases. Acting "
        f"on every collapsed group at every step raised held-out accuracy by {interval(always['accuracy'])} pooled over "
        f"the {len(bases)} bases ({always['accuracy']['n']} pairs, Holm p {p_value(always['accuracy']['p_holm'])}; AUC "
        f"{interval(always['auc'])}; greedy {interval(always['greedy'])}, "
        f"{'significant' if always['greedy']['significant'] else 'not significant'}), with a positive point estimate "
        f"on {on_every([per_base[b]['accuracy']['avspo_always']['mean'] > 0 for b in bases], '')[1:]}. The gain comes "
        f"from the all-pass groups: augmenting only them gave {interval(pooled['accuracy']['avspo_paper_point_all_pass'])}, "
        f"only the all-fail groups {interval(pooled['accuracy']['avspo_paper_point_all_fail'])}. Against GRPO at its "
        f"own accuracy-best learning rate ({rate(best)}, tuned for GRPO alone) the acting AVSPO gained "
        f"{'more, not less' if at_best['mean'] > always['accuracy']['mean'] else 'less'}: see phase 3 below. The "
        "methods that give collapsed groups a signal that says nothing about their responses lost accuracy: NGRPO "
        f"{interval(lost[0])}, random variance {interval(lost[1])}, "
        f"{'both Holm-significant' if all(t['significant'] for t in lost) else 'not both Holm-significant'}. Caveat of "
        "scale: a tiny model on addition, on CPU, is evidence about the mechanism, not a forecast for a 7B model on "
        "math.",
        "",
        "**What this table said to set, and why it no longer decides.** It read `threshold_mode=always` as the best "
        "setting in every regime, and `augmented_collapses=all_pass` (then `apply_to`) as a candidate; its endpoint, accuracy sampled at "
        f"T = {settings['eval_temperature']:g} on the set that chose everything, cannot tell learning from sharpening, "
        "so the default follows the study at the top of this page.",
    ]


def afternoon_study(study: dict) -> list[str]:
    design, settings, analysis, timing = study["design"], study["settings"], study["analysis"], study["timing"]
    bases = [b for b, v in study["bases"].items() if v["compared"]]
    frozen, seeds = design["frozen_grpo"], len(design["seeds"][design["baseline"]])
    gates_passed = all(gate["passed"] for by_name in study["gates"].values() for gate in by_name.values())
    training = {b: study["bases"][b]["training"] for b in bases}
    added = [b for b in bases if study["bases"][b].get("added_for")]
    by_rule = [b for b in bases if b not in added]
    adaptive = study["manipulation"]["avspo"]
    others = [m for m in study["manipulation"] if m != "avspo"]
    worst_other = max(study["manipulation"][m][b]["effective_acr_ratio"] for m in others for b in bases)
    pooled, per_base = analysis["pooled"], analysis["per_base"]
    arms = list(pooled["accuracy"])
    acting_per_base = [(per_base[b]["accuracy"][m]["mde"], m, b) for b in bases for m in arms
                       if study["manipulation"][m][b]["acted"]]  # fmt: skip
    worst_mde, worst_arm, worst_base = max(acting_per_base)
    avspo_mde = max(mde for mde, m, _ in acting_per_base if m.startswith("avspo"))
    best, at = study["best_lr"], study["at_best_lr"]
    at_pooled, at_per_base = at["analysis"]["pooled"], at["analysis"]["per_base"]
    gains = [at["gates"][b]["grpo_gain"]["value"] for b in at["compared"]]
    spread = {b: [seed["accuracy"] for seed in at["endpoints"]["grpo"][b].values()] for b in at["compared"]}
    widest = max(spread, key=lambda b: max(spread[b]) - min(spread[b]))
    at_mde = [at_per_base[b]["accuracy"][design["acting_avspo"]]["mde"] for b in at["compared"]]
    acting = at_pooled["accuracy"][design["acting_avspo"]]
    under_measured = [b for b in at["compared"]
                      if abs(at_per_base[b]["accuracy"][design["acting_avspo"]]["mean"]) < at_per_base[b]["accuracy"][design["acting_avspo"]]["mde"]]  # fmt: skip
    under_words = [f"{b} ({REGIME_WORDS[training[b]['regime']]})" for b in under_measured]
    lrs = [float(lr) for lr in best["mean_final_accuracy"]]
    pooled_rows = [[f"`{arm}`: {ARM_WORDS[arm]}", interval(pooled["accuracy"][arm]), p_value(pooled["accuracy"][arm]["p_holm"]),
                    interval(pooled["auc"][arm]), interval(pooled["greedy"][arm])] for arm in ARM_WORDS]  # fmt: skip
    per_base_words = ", ".join(
        f"{interval(at_per_base[b]['accuracy'][design['acting_avspo']])} ({REGIME_WORDS[training[b]['regime']]})"
        for b in at["compared"])  # fmt: skip
    return [
        "## The study where AVSPO acts (2026-11-26 afternoon, measured)",
        "",
        f"`python -m lab study --jobs {timing['jobs']}` ([study/study.md](study/study.md), "
        f"[study/study.json](study/study.json)), design in [study.md](study.md), fixed in code before the run: "
        f"{len(design['methods'])} arms on {len(bases)} bases, {seeds} seeds each, every run to "
        f"{settings['rollout_budget']:,} rollouts at GRPO's frozen settings (lr {rate(frozen['lr'])}, clip "
        f"{frozen['grad_clip']:g}, G = {frozen['group_size']} x {frozen['prompts']} prompts), then phase 3 at GRPO's "
        f"best learning rate. Run on an Intel Xeon machine with {timing['jobs']} workers, resumed from its run cache "
        "across invocations (docs/evidence/study.md, \"Cost\"); the report's timing is its last invocation's, "
        f"{timing['wall_s'] / 60:.0f} min of wall time and {timing['cpu_s'] / 3600:.2f} CPU-hours. The design planned "
        f"{design['planned_runs']} runs; a run took "
        f"{np.mean([s['cpu_s'] for m in study['summaries'].values() for s in m.values()]):.0f} CPU-seconds on "
        "average.",
        "",
        f"1. **GRPO {'passed every gate' if gates_passed else 'failed a gate'} on all {len(bases)} bases**: held-out "
        "accuracy " + ", ".join(f"{candidate(study, b)['description']['held_out']['accuracy']:.3f} → "
                                f"{final_accuracy(study, 'grpo', b):.3f}" for b in bases)
        + ". In training, by `avspo analyze`'s rule (all-fail / all-pass shares in the first half), the bases were "
        + listed([f"{REGIME_WORDS[training[b]['regime']]} ({training[b]['all_fail_first_half']:.3f} / "
                  f"{training[b]['all_pass_first_half']:.3f})" for b in bases])
        + f": the base rule had named the first {len(by_rule)} "
        + listed([REGIME_WORDS[study["bases"][b]["regime"]] for b in by_rule])
        + " from step 0" + "".join(f"; `{b}` was added by the design's rule for a regime no chosen base showed in "
                                   "training" for b in added) + ".",
        f"2. **The manipulation check** (fixed before the run: a method acted where its effective ACR of the groups it "
        f"targets is at most {design['manipulation_ratio']:g} x GRPO's): AVSPO with the adaptive trigger "
        f"{'did not act on any base' if not any(c['acted'] for c in adaptive.values()) else 'acted on some bases'} "
        "(effective ACR " + ", ".join(f"{adaptive[b]['effective_acr_ratio']:.2f}" for b in bases) + " x GRPO's; "
        "trigger rate " + ", ".join(percent(adaptive[b]["trigger_rate"]) for b in bases)
        + "), so it is left out of the pooled comparison. "
        + ("Every other arm acted on every base" if all(study["manipulation"][m][b]["acted"] for m in others for b in bases)
           else "Not every other arm acted on every base")
        + (" (effective ACR of its targets 0)." if worst_other == 0 else
           f" (effective ACR of its targets at most {worst_other:.2f} x GRPO's)."),
        f"3. **Pooled over the {len(bases)} bases** ({pooled['accuracy'][arms[0]]['n']} pairs each; Holm over the "
        f"{len(arms)} arms that acted):",
        "",
        *("   " + line for line in table(["arm", "Δ held-out accuracy [95% CI]", "Holm p", "AUC", "greedy"], pooled_rows)),
        "",
        f"   Every MDE at 80% power is at most {max(pooled['accuracy'][a]['mde'] for a in arms):.4f} pooled and "
        f"{worst_mde:.4f} per base ({worst_arm} on {worst_base}; the AVSPO arms at most {avspo_mde:.4f}), against the "
        f"{design['mde_target']:g} target.",
        "4. **Phase 3: against GRPO at its own best learning rate.** GRPO alone on tuning seed "
        f"{', '.join(str(s) for s in best['seeds'])}, mean final held-out accuracy over the {len(bases)} bases: "
        + ", ".join(bold_if(f"{best['mean_final_accuracy'][lr]:.3f} at {rate(float(lr))}", float(lr) == best["best"])
                    for lr in best["mean_final_accuracy"])
        + f" (the best{', and the largest candidate: a larger one may be better still' if best['best'] == max(lrs) else ''}). "
        f"At {rate(at['lr'])} GRPO "
        f"{'passes every learning gate on every base' if all(g['passed'] for by in at['gates'].values() for g in by.values()) else 'fails a learning gate'} "
        f"(gains {signed(min(gains), 2)} to {signed(max(gains), 2)}), and `{design['acting_avspo']}` "
        f"{'beats it' if acting['ci95'][0] > 0 else 'does not beat it'}: {significant(acting)} held-out accuracy pooled "
        f"({acting['n']} pairs, p {p_value(acting['p'])}; AUC {interval(at_pooled['auc'][design['acting_avspo']])}; "
        f"greedy {interval(at_pooled['greedy'][design['acting_avspo']])}); per base {per_base_words}. At this learning "
        f"rate GRPO's seeds spread widely ({widest}: {span(spread[widest], 3)}), so the MDE is {acting['mde']:.3f} "
        f"pooled and {min(at_mde):.3f} to {max(at_mde):.3f} per base, against the {design['mde_target']:g} target: the "
        f"pooled gain is {'larger' if abs(acting['mean']) > acting['mde'] else 'smaller'} than its MDE"
        + (f"; on {listed(under_words)} it is not measured to that precision" if under_words else "")
        + ". The gain does not exist only against an under-tuned GRPO: it is "
        + ("larger" if acting["mean"] > pooled["accuracy"][design["acting_avspo"]]["mean"] else "smaller")
        + " against the tuned one.",
        "5. **Not rerun** (study.NOT_RERUN): Dr. GRPO, DAPO, RL-ZVP and prompt selection, whose questions AVSPO's trigger",
        "   does not touch; their runs stand in the morning study below.",
        "",
        "Measured, with a hypothesis apart. *Measured:* virtual rewards help on this testbed when they act, through the",
        "all-pass groups; signals without information in collapsed groups (NGRPO's one-sided virtual sample, random",
        "variance) hurt. *Hypothesis (not tested):* an all-pass group's real responses get one equal positive advantage",
        "when virtual rewards below 1 lower the group mean, which reinforces what the policy already solves (its",
        "sampled correct answers) and sharpens it; an all-fail group's responses get one equal negative advantage,",
        "which pushes away from every sampled answer alike and carries no information about which is closer to right.",
    ]


# ----------------------------------------------------------------------------------------------
# The sweep on the tuned testbed (docs/evidence/sweep/)


def sweep_section(sweep: dict, fit: dict) -> list[str]:
    design, oos, stagnation = sweep["design"], fit["oos"], sweep["analysis"]["stagnation"]
    parts = {"acr_all_fail": "all-fail", "acr_all_pass": "all-pass", "near_collapse_success": "lone success",
             "near_collapse_failure": "lone failure"}
    added = oos["added"]
    none_adds = all(added[key]["ci95"][0] <= 0 for key in parts if key in added)
    gain = oos["gain_over_baseline"]
    worse = stagnation["ci95"][0] > 0 or stagnation["ci95"][1] < 0
    return [
        "## Does early ACR predict how a run ends? (the sweep, 2026-11-26 evening, measured)",
        "",
        f"{oos['runs']} GRPO runs on the tuned testbed ({len(design['bases'])} bases x {len(design['learning_rates'])} "
        f"learning rates x {len(design['group_sizes'])} G x {len(design['mixes'])} tier mixes x {len(design['seeds'])} "
        f"seeds, temperature {design['temperature']:.1f}; [sweep.md](sweep.md)). "
        f"**{'No' if not fit['forecast']['supported'] else 'Yes'}**: out of sample, whole bases held out, early ACR "
        f"alone has R^2 {oos['r2']:.2f} [{oos['ci95'][0]:.2f}, {oos['ci95'][1]:.2f}], and added to early mean reward "
        f"+ base accuracy it changes R^2 by {signed(gain['value'], 3)} [{signed(gain['ci95'][0], 3)}, "
        f"{signed(gain['ci95'][1], 3)}]; {'none' if none_adds else 'not all'} of its parts "
        f"({', '.join(word for key, word in parts.items() if key in added)}) adds either. The paper's stagnation rule "
        f"fired on {percent(round(stagnation['share'], 2))} of the runs, which did "
        f"{'not end worse' if not worse else 'end differently'} ({signed(stagnation['difference'], 1)} "
        f"[{signed(stagnation['ci95'][0], 1)}, {signed(stagnation['ci95'][1], 1)}] points). So the product keeps ACR as "
        "the count of rollouts that taught nothing, and `avspo analyze` prints these figures instead of a forecast.",
    ]


# ----------------------------------------------------------------------------------------------
# The morning study (docs/evidence/study-history/study-2026-11-26/)


def morning_study(study: dict) -> list[str]:
    design, settings, timing, summaries = study["design"], study["settings"], study["timing"], study["summaries"]
    pooled, per_base = study["analysis"]["pooled"], study["analysis"]["per_base"]
    bases = [b for b, v in study["bases"].items() if v["compared"]]
    regimes = {b: study["bases"][b]["regime"] for b in bases}
    frozen = design["frozen_grpo"]
    runs = sum(len(seeds) for by_base in study["endpoints"].values() for seeds in by_base.values())
    gates_passed = all(g["passed"] for by in study["gates"].values() for g in by.values())
    greedy_up = all(study["gates"][b]["greedy_change"]["value"] > 0 for b in bases)
    closest = min(bases, key=lambda b: study["gates"][b]["both_regimes"]["value"] - study["gates"][b]["both_regimes"]["bound"])
    hair = study["gates"][closest]["both_regimes"]
    avspo = {key: pooled[key]["avspo"] for key in ("accuracy", "auc", "greedy")}
    triggered = {m: [series_mean(summaries[m][b], "triggered") for b in bases] for m in ("avspo", "avspo_fixed_threshold")}
    never = [b for b in bases if triggered["avspo"][bases.index(b)] == 0]
    effective = np.mean([series_mean(summaries["avspo"][b], "effective_acr") for b in bases])
    grpo_acr = [series_mean(summaries["grpo"][b], "acr") for b in bases]
    ablations = ["avspo_all_fail", "avspo_all_pass", "avspo_fixed_threshold", "avspo_fixed_k", "avspo_opposite"]
    ablation = [pooled["accuracy"][m] for m in ablations]
    control, rlzvp = pooled["accuracy"]["random_variance"], pooled["accuracy"]["rlzvp"]
    select = {m: pooled["accuracy"][m] for m in ("select_grpo", "select_avspo")}
    skipped = np.mean([series_mean(summaries["select_grpo"][b], "skipped_prompts") for b in bases])
    dapo, ngrpo = pooled["accuracy"]["dapo"], pooled["accuracy"]["ngrpo"]
    dapo_steps = np.mean([summaries["dapo"][b]["steps"] for b in bases])
    cpu = {m: np.mean([summaries[m][b]["cpu_s"] for b in bases]) for m in design["methods"]}
    others = [value for m, value in cpu.items() if m != "dapo"]

    def holm(test: dict) -> str:
        return "Holm significant" if test["significant"] else f"Holm p = {p_value(test['p_holm'])}"

    return [
        "## The study of 2026-11-26 morning: AVSPO's trigger seldom fired (measured)",
        "",
        f"`python -m lab study --jobs {timing['jobs']}` (report: [study-2026-11-26/study.md](study-history/study-2026-11-26/study.md),",
        "[study-2026-11-26/study.json](study-history/study-2026-11-26/study.json), plots in [study-2026-11-26/](study-history/study-2026-11-26/)),",
        "run on an AMD EPYC machine, whose warm-ups gave other bases than the Intel Xeon machine of the afternoon",
        f"(docs/evidence/study.md, \"Reproducibility across machines\"): {len(design['methods'])} methods on "
        f"{len(bases)} bases chosen by the regime rule, every run to the same {settings['rollout_budget']:,} rollouts, "
        f"GRPO's settings frozen by tuning (lr {rate(frozen['lr'])}, clip {frozen['grad_clip']:g}, G = "
        f"{frozen['group_size']} x {frozen['prompts']} prompts; [tuning/tuning.md](tuning/tuning.md)). {runs} runs, "
        f"{timing['wall_s'] / 60:.0f} min of wall time, {timing['cpu_s'] / 3600:.2f} CPU-hours.",
        "",
        f"1. **GRPO {'passed every gate' if gates_passed else 'failed a gate'} on all {len(bases)} bases with the "
        "study's own seeds**: held-out accuracy "
        + ", ".join(f"{candidate(study, b)['description']['held_out']['accuracy']:.3f} → "
                    f"{final_accuracy(study, 'grpo', b):.3f}" for b in bases)
        + f" ({', '.join(REGIME_WORDS[regimes[b]] for b in bases)}), greedy accuracy "
        + ("up on each" if greedy_up else "not up on each") + f". The {REGIME_WORDS[regimes[closest]]} base's "
        f"{min(hair['detail'], key=hair['detail'].get).replace('_', '-')} share was {hair['value']:.4f} against the "
        f"gate's {hair['bound']:g} floor"
        + (": it passed by a hair." if hair["value"] - hair["bound"] < 1e-3 else "."),
        f"2. **AVSPO as in the paper**: pooled {interval(avspo['accuracy'])} at the budget ({avspo['accuracy']['n']} "
        f"pairs, Holm p = {p_value(avspo['accuracy']['p_holm'])}), AUC {signed(avspo['auc']['mean'])}, greedy "
        f"{signed(avspo['greedy']['mean'])}. It seldom triggered: on "
        + listed([percent(t) for t in triggered["avspo"]])
        + f" of steps ({', '.join(REGIME_WORDS[regimes[b]].removesuffix(' dominant') for b in bases)} base; a fixed "
        "threshold: " + ", ".join(percent(t) for t in triggered["avspo_fixed_threshold"])
        + f"), so its effective ACR was {effective:.3f} against GRPO's {np.mean(grpo_acr):.3f} (mean over bases)"
        + "".join(f"; on the {REGIME_WORDS[regimes[b]].removesuffix(' dominant')} base (ACR about "
                  f"{series_mean(summaries['avspo'][b], 'acr'):.2f}, under the adaptive threshold) it never did, and "
                  f"there it equals GRPO {'bit for bit' if same_as_grpo(study, 'avspo', b) else 'in its mean'}"
                  for b in never) + ".",
        "3. **Ablations** (`augmented_collapses` all-fail / all-pass, fixed threshold, constant K, opposite-side virtual "
        "rewards): "
        f"pooled between {signed(min(t['mean'] for t in ablation))} and {signed(max(t['mean'] for t in ablation))}, "
        + ("none significant" if not any(t["significant"] for t in ablation) else "some significant")
        + f" (MDE {min(t['mde'] for t in ablation):.4f} to {max(t['mde'] for t in ablation):.4f}).",
        f"4. **Random virtual rewards** (the control: artificial variance in collapsed groups): {interval(control)}, "
        f"p = {p_value(control['p'])}, {'significant' if control['significant'] else 'not significant'} after Holm "
        f"({p_value(control['p_holm'])}); below GRPO on "
        + on_every([per_base[b]["accuracy"]["random_variance"]["mean"] < 0 for b in bases], "")[1:] + ".",
        f"5. **RL-ZVP-style signed advantages** for collapsed groups: {interval(rlzvp)}, "
        f"{'significant' if rlzvp['significant'] else 'not significant'}.",
        f"6. **Prompt selection** with GRPO: {interval(select['select_grpo'])} ({select['select_grpo']['n']} pairs), "
        f"skipping {skipped:.1f} prompts per step; with AVSPO {interval(select['select_avspo'])}. "
        + ("Neither significant." if not any(t["significant"] for t in select.values()) else "One is significant."),
        f"7. **Peers**: DAPO dynamic sampling at exactly GRPO's rollout budget {interval(dapo)} ({holm(dapo)}; it "
        f"spends the budget in {dapo_steps:.0f} steps instead of {settings['steps']}, so it makes "
        f"{'half the' if round(settings['steps'] / dapo_steps) == 2 else 'fewer'} updates); NGRPO {interval(ngrpo)} "
        f"({holm(ngrpo)}; AUC {'significant' if pooled['auc']['ngrpo']['significant'] else 'not significant'}); "
        f"Dr. GRPO {signed(pooled['accuracy']['drgrpo']['mean'])}.",
        f"8. **Cost**: every method took {min(others):.0f}-{max(others):.0f} CPU-seconds per run except DAPO "
        f"({cpu['dapo']:.0f}). Wall seconds per run are not comparable between methods here: GRPO's runs shared the "
        "machine with the test suite, and some were paused while it ran (its "
        f"{np.mean([summaries['grpo'][b]['wall_s'] for b in bases]):.0f} s per run).",
        "",
        "Hypothesis (not tested here): AVSPO's adaptive threshold starts above the ACR this testbed shows "
        f"({span(grpo_acr)}, GRPO's mean per base), so the method mostly stays off; a testbed, or a run, with ACR above "
        "the threshold for long stretches is where it could matter, and this study did not have one.",
    ]


# ----------------------------------------------------------------------------------------------
# The old testbed (2026-11-22): its study and sweep


def old_testbed(study: dict, sweep: dict) -> list[str]:
    design, settings, summaries, analysis = study["design"], study["settings"], study["summaries"], study["analysis"]
    pooled, per_base, means = analysis["pooled"], analysis["per_base"], analysis["means"]
    candidates = {str(c["task_seed"]): c for c in study["candidates"]}
    bases = list(summaries["grpo"])
    seeds, methods, baseline = len(design["seeds"]), design["methods"], design["baseline"]
    train_size = settings["train_per_tier"] * len(settings["tiers"])
    epochs = settings["rollout_budget"] / (settings["group_size"] * train_size)
    held_out = sum(settings["held_out_per_tier"])
    pairs = seeds * len(bases)

    def over_bases(method: str, pick) -> float:
        return float(np.mean([pick(summaries[method][b]) for b in bases]))

    def mean_of(key: str):
        return lambda summary: series_mean(summary, key)

    gap = paired_test([seed["accuracy"] - candidates[b]["description"]["held_out"]["accuracy"]
                       for b in bases for seed in study["endpoints"][baseline][b].values()])  # fmt: skip
    greedy_base = np.mean([candidates[b]["description"]["held_out"]["greedy"] for b in bases])
    greedy_end = over_bases(baseline, lambda s: s["greedy"][-1])
    last_base = bases[-1]
    reward = summaries[baseline][last_base]["series"]["reward"]
    base_accuracy = [candidates[b]["description"]["held_out"]["accuracy"] for b in bases]
    demo = sweep["base"]
    clip = {m: over_bases(m, lambda s: s["clip_bound"]) for m in methods}
    avspo = {key: pooled[key]["avspo"] for key in ("accuracy", "auc")}
    applied = {m: pooled["accuracy"][m] for m in ("avspo_all_fail", "avspo_all_pass")}
    select = pooled["accuracy"]["select_grpo"]
    skipped = over_bases("select_grpo", mean_of("skipped_prompts"))
    precision = [series_mean(summaries["select_grpo"][b], "selection/precision") for b in bases]
    recall = [series_mean(summaries["select_grpo"][b], "selection/recall") for b in bases]
    select_per_base = {b: per_base[b]["accuracy"]["select_grpo"] for b in bases}
    goal = analysis["selection_goal"]["select_grpo"]
    grpo_at_70 = paired_test([study["endpoints"][baseline][b][s]["accuracy_at_70"] - study["endpoints"][baseline][b][s]["accuracy_at_100"]
                              for b in bases for s in study["endpoints"][baseline][b]])  # fmt: skip
    dapo = {key: pooled[key]["dapo"] for key in ("accuracy", "auc")}
    drgrpo = pooled["accuracy"]["drgrpo"]
    mdes = [pooled["accuracy"][m]["mde"] for m in pooled["accuracy"]]
    pilot = study["pilot"]
    grpo_grad = over_bases(baseline, lambda s: s["grad_norm_median"])
    fits = sweep["fits"]
    t1 = fits["temperature_1.0"]["configurations"]
    tier5_base = np.mean([candidates[b]["description"]["held_out"]["answer_without_end_by_tier"]["5"] for b in bases])
    tier5_end = over_bases(baseline, lambda s: s["answer_without_end_by_tier"]["5"][-1])
    accuracy_mean = np.mean([means[m]["accuracy"]["mean"] for m in methods])
    significant_auc = [m for m in pooled["auc"] if pooled["auc"][m]["significant"]]
    other_auc = [m for m in pooled["auc"] if not pooled["auc"][m]["significant"]]
    rejected = [c for c in study["candidates"] if not c["accepted"]]
    accepted = [c for c in study["candidates"] if c["accepted"]]
    timing = study["timing"]
    runs = sum(len(seeds) for by_base in study["endpoints"].values() for seeds in by_base.values())
    tiers = [str(t) for t in settings["tiers"]]
    readings = demo["sweep_readings_pct"]
    configurations = sweep["configurations"]

    def fit_row(reading: str, words: str) -> list[str]:
        fit = fits[reading]["configurations"]
        partial = fit["partial"]
        return [words, f"{fit['intercept']:.1f} {'-' if fit['slope'] < 0 else '+'} {abs(fit['slope']):.1f} x early ACR",
                f"{fit['r']:+.2f}", f"{fit['r2']:.2f} [{fit['r2_ci95'][0]:.2f}, {fit['r2_ci95'][1]:.2f}]",
                f"{partial['r2']:.2f} [{partial['r2_ci95'][0]:.2f}, {partial['r2_ci95'][1]:.2f}]"]

    held_out_rows = [[m, f"{means[m]['accuracy']['mean']:.4f} ± {means[m]['accuracy']['ci95']:.4f}",
                      *(["", "", ""] if m == baseline else
                        [interval(pooled["accuracy"][m]), p_value(pooled["accuracy"][m]["p_holm"])
                         + (" *" if pooled["accuracy"][m]["significant"] else ""), f"{pooled['accuracy'][m]['mde']:.4f}"])]
                     for m in methods]  # fmt: skip
    collapse_rows = [[m, f"{over_bases(m, lambda s: s['steps']):.1f}",
                      *(f"{over_bases(m, mean_of(k)):.3f}" for k in ("acr", "effective_acr", "acr_all_fail", "acr_all_pass")),
                      f"{over_bases(m, mean_of('skipped_prompts')):.2f}".removesuffix(".00"),
                      f"{clip[m]:.2f}", f"{over_bases(m, lambda s: s['grad_norm_median']):.2f}"] for m in methods]  # fmt: skip
    trigger = {b: series_mean(summaries["avspo"][b], "triggered") for b in bases}
    all_fail_share = over_bases(baseline, mean_of("acr_all_fail"))
    all_pass_share = over_bases(baseline, mean_of("acr_all_pass"))
    lines = [
        "## The earlier study (2026-11-22): a testbed where RL did not learn",
        "",
        "Kept for the record. Everything in this section was measured on the lab before it was rebuilt (weak base "
        f"policies, a {train_size}-problem training set reused for about {epochs:.0f} epochs, G = "
        f"{settings['group_size']}, a clip that bound on most updates): there, RL lowered held-out accuracy for "
        f"{'every method' if all(means[m]['accuracy']['mean'] < np.mean(base_accuracy) for m in methods) else 'most methods'}, "
        "so its comparisons rank methods by how much they lose. The sweep below ran on that testbed too.",
        "",
        "Three things were run, all described in [lab.md](lab.md):",
        "",
        f"* **The powered study** (`python -m lab study`, [study.md](study.md)): {len(methods)} methods x {len(bases)} "
        f"base policies x {seeds} seeds, every run to the same rollout budget, with a design fixed in code before the "
        "first run. Every method comparison on this page comes from it. Its full report is "
        "[study-2026-11-22/study.md](study-history/study-2026-11-22/study.md), with "
        "[study-2026-11-22/study.json](study-history/study-2026-11-22/study.json) and the plots.",
        f"* **The sweep** (`python -m lab sweep`): GRPO over {len(configurations)} configurations x "
        f"{len(sweep['seeds'])} seeds, final accuracy against early ACR.",
        "* **`make demo`** (`python -m lab`) is a demonstration of collapse in both regimes. Its paired intervals are "
        "too wide to compare methods, and no claim here rests on it.",
        "",
        "Below, **Measured** means read from these runs. **Hypothesis** means an explanation that no run here has "
        "tested.",
        "",
        "### Summary (measured)",
        "",
        f"1. **In the study's design, RL lowered held-out accuracy for {'every method' if all(means[m]['accuracy']['mean'] < np.mean(base_accuracy) for m in methods) else 'most methods'}.**",
        f"   * GRPO ended {-gap['mean']:.4f} [{-gap['ci95'][1]:.4f}, {-gap['ci95'][0]:.4f}] below its base policy, "
        f"paired over the {gap['n']} runs.",
        f"   * Greedy accuracy fell from {greedy_base:.2f} to {greedy_end:.2f} (mean over the bases).",
        f"   * Train reward rose a little over the same runs (for example {np.mean(reward[:10]):.3f} to "
        f"{np.mean(reward[-10:]):.3f} over the first and last 10 steps on base {last_base}).",
        "   * So every comparison below ranks methods by **how much held-out accuracy they lose**. No method made RL "
        "gain held-out accuracy here.",
        f"   * The bases the pre-registered rule accepted are weak: held-out avg@{settings['eval_samples']} of "
        f"{', '.join(f'{a:.3f}' for a in base_accuracy[:-1])} and {base_accuracy[-1]:.3f}, against "
        f"{readings['1.0'] / 100:.2f} for the demo's base.",
        f"2. **AVSPO as in the paper ended {'below' if avspo['accuracy']['mean'] < 0 else 'above'} GRPO**:",
        f"   * Δ = {interval(avspo['accuracy'])}, Holm-adjusted p = {p_value(avspo['accuracy']['p_holm'])}.",
        f"   * Area under the accuracy curve (AUC): {interval(avspo['auc'])}.",
        "   * The ablations locate this in the **all-fail** augmentation:",
        *(f"     * `augmented_collapses={m.removeprefix('avspo_')}`: {interval(test)} "
          f"({'significant' if test['significant'] else 'not significant'}){';' if m.endswith('fail') else '.'}"
          for m, test in applied.items()),
        f"   * The effect is {f'below zero on each of the {len(bases)} bases separately' if all(per_base[b]['accuracy']['avspo']['mean'] < 0 for b in bases) else 'not below zero on every base'}.",
        "3. **Collapse-aware prompt selection with GRPO was "
        + ("the best method" if max(pooled["accuracy"], key=lambda m: pooled["accuracy"][m]["mean"]) == "select_grpo"
           else "not the best method") + " at equal rollouts**:",
        f"   * Δ = {interval(select)}, Holm p = {p_value(select['p_holm'])}; AUC {interval(pooled['auc']['select_grpo'])}.",
        f"   * It skipped {skipped:.1f} prompts per step ({skipped / (settings['prompts'] + skipped):.0%} of the "
        "candidates) before generation.",
        f"   * Its skips were right {percent_span(precision)} of the time (precision, by base), and it caught "
        f"{percent_span(recall)} of the collapses (recall).",
        "   * Per base: " + "; ".join(f"{interval(select_per_base[b])} on base {b}" for b in bases)
        + f" (base {bases[0]}'s accuracy is near {base_accuracy[0]:.2f}).",
        f"   * Combined with AVSPO: {interval(pooled['accuracy']['select_avspo'])}, "
        f"{'significant' if pooled['accuracy']['select_avspo']['significant'] else 'not significant'}.",
        "4. **Selection's goal** was \"GRPO's final accuracy with at least "
        f"{1 - design['selection_fraction']:.0%} fewer rollouts\".",
        f"   * It was {'met' if goal['reached'] else 'not met'} by the pre-registered criterion. At "
        f"{design['selection_fraction']:.0%} of the budget, selection was {interval(goal)} from GRPO's final accuracy, "
        f"{'above' if goal['ci95'][0] > -design['selection_margin'] else 'not above'} the "
        f"{-design['selection_margin']:g} margin.",
        f"   * GRPO's own accuracy at {design['selection_fraction']:.0%} of the budget was "
        f"{abs(grpo_at_70['mean']):.4f} [{min(abs(x) for x in grpo_at_70['ci95']):.4f}, "
        f"{max(abs(x) for x in grpo_at_70['ci95']):.4f}] *{'above' if grpo_at_70['mean'] > 0 else 'below'}* its final "
        "accuracy (paired over its runs): "
        + ("**this criterion says little here**, since accuracy fell as training went on." if grpo_at_70["mean"] > 0
           else "at that point selection stood above GRPO's own accuracy there."),
        "   * The direct reading is point 3, at equal rollouts.",
        f"5. **DAPO at exactly GRPO's rollout budget** was {'ahead of' if dapo['accuracy']['mean'] > 0 else 'behind'} GRPO:",
        f"   * Δ = {interval(dapo['accuracy'])}, Holm p = {p_value(dapo['accuracy']['p_holm'])}; AUC {interval(dapo['auc'])}.",
        f"   * It took {over_bases('dapo', lambda s: s['steps']):.1f} steps on average to spend the budget that GRPO "
        f"spends in {over_bases(baseline, lambda s: s['steps']):.0f}.",
        f"6. **Dr. GRPO**, with verl's `seq-mean-token-sum-norm` aggregation, was {interval(drgrpo)}: p = "
        f"{p_value(drgrpo['p'])}, {'significant' if drgrpo['significant'] else 'not significant'} after Holm "
        f"({p_value(drgrpo['p_holm'])}).",
        "7. **Power.**",
        f"   * Every minimum detectable paired effect at 80% power is at most {max(mdes):.4f} at alpha = "
        f"{design['alpha']:g}, and at most {max(pooled['accuracy'][m]['mde_holm'] for m in pooled['accuracy']):.4f} at "
        f"Holm's strictest level (AUC: at most {max(pooled['auc'][m]['mde'] for m in pooled['auc']):.4f}).",
        f"   * Part of the reason is that accuracies here are small (about {accuracy_mean:.2f}), and so are their "
        "differences.",
        "8. **Gradient clipping.**",
        f"   * The GRPO pilot's clip ({pilot['grad_clip']:g}) bound on {clip[baseline]:.0%} of GRPO's updates over "
        f"whole runs, not the {'tenth' if design['pilot']['quantile'] == 0.9 else 'share'} the rule aimed at: gradient "
        f"norms grew after the pilot's {pilot['steps']} steps (median {grpo_grad:.2f}, against "
        f"{pilot['median_norm']:.2f} in the pilot).",
        "   * By method, it bound on:",
        "",
        *("     " + line for line in table(["method", "updates clipped"],
                                           [[words, f"{clip[m]:.0%}"] for m, words in OLD_WORDS.items()])),
        "9. **Tier 5's end token.**",
        f"   * On the demo's base (task seed {sweep['settings']['task_seed']}), "
        f"{demo['held_out']['answer_without_end_by_tier']['5']:.0%} of tier-5 held-out samples have every answer digit "
        "right and fail only because no end token follows (the sweep's base policy, "
        "[sweep-history/sweep.json](sweep-history/sweep.json)).",
        "   * So tier 5 is not \"no nearby correct response\": the failures are near misses that sampling never turns "
        "into a reward.",
        f"   * On the study's bases the same fraction is {tier5_base:.1%} at the base and {tier5_end:.1%} at the "
        "budget, since these weaker bases rarely get the digits right.",
        f"10. **Early ACR predicts final accuracy at temperature 1.0** over {t1['n']} GRPO configurations "
        f"({len(sweep['seeds'])} seeds each): R^2 = {t1['r2']:.2f} [{t1['r2_ci95'][0]:.2f}, {t1['r2_ci95'][1]:.2f}], "
        f"and {t1['partial']['r2']:.2f} [{t1['partial']['r2_ci95'][0]:.2f}, {t1['partial']['r2_ci95'][1]:.2f}] with "
        "lr and G held fixed. Read at each run's own training temperature the sign "
        + ("reverses" if np.sign(fits["training_temperature"]["configurations"]["slope"]) != np.sign(t1["slope"])
           else "holds")
        + ", because that reading changes with the temperature. Details below.",
        "",
        "### Hypotheses (not tested here)",
        "",
        f"* **Why RL lowered held-out accuracy.** The training set is small: {train_size} problems, about {epochs:.0f} "
        f"epochs in {over_bases(baseline, lambda s: s['steps']):.0f} steps. The policy may fit it at the held-out "
        "problems' expense; train reward rose while held-out accuracy fell. Untested: a larger training set, a smaller "
        "learning rate, or a KL term.",
        "* **Why all-fail augmentation hurts.** Virtual rewards above 0 give every sampled response of an all-fail "
        "group a negative advantage. This pushes probability away from what was sampled, and on these bases what was "
        "sampled is most of what the policy knows. Point 9 fits this reading: the near misses of tier 5 are pushed "
        "away along with the rest. This is a reading of the numbers, not a measurement of the mechanism.",
        "* **Why selection helps.** Skipping prompts that stay collapsed puts more mixed groups into each step at the "
        "same rollout cost, the same lever as DAPO's but without paying for the collapsed groups. Per step, ACR fell "
        f"from {over_bases(baseline, mean_of('acr')):.3f} (GRPO) to {over_bases('select_grpo', mean_of('acr')):.3f}. "
        "That selection's gain exceeds DAPO's at equal rollouts fits this, but no run separates the two causes.",
        "* **Whether any of this carries over to LLM-scale RL**, where collapsed prompts may be nearly solved and base "
        "policies are stronger, is neither shown nor ruled out by a "
        f"{candidates[bases[0]]['description']['parameters']:,}-parameter model on addition.",
        "",
        "### The study, in numbers",
        "",
        f"From [study-2026-11-22/study.md](study-history/study-2026-11-22/study.md): {pairs} pairs per comparison "
        f"({len(bases)} bases x {seeds} seeds), {settings['rollout_budget']:,} rollouts per run, "
        f"avg@{settings['eval_samples']} on {held_out} held-out problems.",
        "",
        "**Base policies.** The rule was applied to the candidates in order: task seeds "
        f"{', '.join(str(c['task_seed']) for c in accepted[:-1])} and {accepted[-1]['task_seed']} were accepted and "
        + " and ".join(f"{c['task_seed']} was rejected ({c['why']})" for c in rejected)
        + ". Tier pass rates at the RL temperature:",
        "",
        *table(["task seed", *(f"tier {t}" for t in tiers), f"held-out avg@{settings['eval_samples']}"],
               [[str(c["task_seed"]), *(f"{c['description']['sampled_by_tier'][t]['pass_rate']:.3f}" for t in tiers),
                 f"{c['description']['held_out']['accuracy']:.3f}"] for c in accepted]),
        "",
        "The lab's warm-up is sensitive to its data and initialisation. At the demo's "
        f"{sweep['settings']['held_out_per_tier']} held-out problems per tier, task seed {sweep['settings']['task_seed']} "
        "gives a base with pass rates of "
        + " to ".join(f"{demo['sampled_by_tier'][t]['pass_rate']:.2f}" for t in ("1", "4"))
        + " on tiers 1-4; at the study's held-out size, which changes the warm-up's data, it gives the weak base above.",
        "",
        f"**Held-out accuracy at the budget** (primary endpoint), Holm over the {len(pooled['accuracy'])} comparisons:",
        "",
        *table(["method", "accuracy", f"Δ vs {baseline} [95% CI]", "p (Holm)", "MDE 80%"], held_out_rows),
        "",
        "**Mean accuracy over the budget (AUC)**: "
        + ", ".join(f"{m} {signed(pooled['auc'][m]['mean'])}" for m in significant_auc[:-1])
        + f" and {significant_auc[-1]} {signed(pooled['auc'][significant_auc[-1]]['mean'])} "
        f"({'all' if len(significant_auc) > 2 else 'both'} {len(significant_auc)} significant after Holm); "
        + ", ".join(f"{m} {signed(pooled['auc'][m]['mean'])}" for m in other_auc[:-1])
        + f" and {other_auc[-1]} {signed(pooled['auc'][other_auc[-1]]['mean'])} (not significant).",
        "",
        "![paired differences to GRPO](study-history/study-2026-11-22/paired_differences.png)",
        "",
        "**Collapse, clipping and cost** (mean over bases and seeds):",
        "",
        *table(["method", "steps", "ACR", "effective ACR", "all-fail", "all-pass", "skipped / step", "clip binds",
                "median grad norm"], collapse_rows),
        "",
        f"These bases make the all-fail regime {'dominant' if all_fail_share > 2 * all_pass_share else 'common'} "
        f"({all_fail_share:.2f} of groups) and the all-pass regime rare ({all_pass_share:.2f}). AVSPO's adaptive "
        "threshold triggered on "
        + listed([f"{percent(round(trigger[b], 2))}{' of steps' if b == bases[0] else ''} on base {b}" for b in bases])
        + ". Per-tier accuracy over rollouts, per-tier "
        "ACR over steps, and tau, ACR and triggers over steps are in "
        "[study-2026-11-22/accuracy_by_tier.png](study-history/study-2026-11-22/accuracy_by_tier.png),",
        "[study-2026-11-22/collapse_by_tier.png](study-history/study-2026-11-22/collapse_by_tier.png) and",
        "[study-2026-11-22/avspo_threshold.png](study-history/study-2026-11-22/avspo_threshold.png).",
        "",
        "### Early ACR as a predictor (the sweep)",
        "",
        "History from the old testbed ([sweep-history/](sweep-history/README.md)); on the tuned testbed the sweep found no",
        "predictive value ([above](#does-early-acr-predict-how-a-run-ends-the-sweep-2026-11-26-evening-measured)).",
        "",
        f"`python -m lab sweep` ran GRPO over a grid of {len(configurations)} configurations, with "
        f"{len(sweep['seeds'])} seeds each ({len(configurations) * len(sweep['seeds'])} runs of "
        f"{sweep['settings']['steps']} steps), all from the demo's base policy:",
        "",
        *(f"* {words} {{{', '.join(values)}}}{end}" for words, values, end in (
            ("temperature", [f"{t:.1f}" for t in sorted({c["temperature"] for c in configurations})], ";"),
            ("G", [str(g) for g in sorted({c["group_size"] for c in configurations})], ";"),
            ("tier mix", list(dict.fromkeys(c["mix"] for c in configurations)), ";"),
            ("learning rate", [rate(lr) for lr in sorted({c["lr"] for c in configurations})], "."))),
        "",
        f"Early ACR is the mean over the first {sweep['fit']['early_steps']} steps. Final held-out accuracy was read "
        "three ways, and the full tables are in [sweep-history/sweep.md](sweep-history/sweep.md).",
        "",
        f"**Measured** (fits over the {t1['n']} configuration means, with Fisher 95% intervals):",
        "",
        *table(["final accuracy read", "line", "r", "R^2 [95% CI]", "partial R^2 given lr and G [95% CI]"],
               [fit_row("temperature_1.0", "at temperature 1.0"), fit_row("greedy", "greedy"),
                fit_row("training_temperature", "at the run's training temperature")]),
        "",
        f"* At temperature 1.0, the reading that measures every run the same way, early ACR explains {t1['r2']:.0%} of "
        f"the variance across configurations. That is R^2 = {t1['r2']:.2f} [{t1['r2_ci95'][0]:.2f}, "
        f"{t1['r2_ci95'][1]:.2f}], against the paper's {PAPER_ACR_FIT[0]} over {PAPER_ACR_FIT[1]} LLM configurations. "
        f"With lr and G held fixed, it explains {t1['partial']['r2']:.0%} "
        f"[{t1['partial']['r2_ci95'][0]:.0%}, {t1['partial']['r2_ci95'][1]:.0%}] of what they leave.",
        f"* Over greedy accuracy the link is weak: its interval reaches {fits['greedy']['configurations']['r2_ci95'][0]:.0f}.",
        "* **At the training temperature the sign reverses.** The reading itself moves with temperature: the base "
        "policy alone scores " + ", ".join(f"{readings[t]:.1f}% at T = {t}" for t in ("0.7", "1.0"))
        + f" and {readings['1.3']:.1f}% at T = 1.3, and low temperature also raises early ACR.",
        f"* Intervals over the {fits['temperature_1.0']['runs']['n']} runs (in sweep.md) treat seeds of one "
        "configuration as independent and are too narrow. The configuration means are the ones to read.",
        "* `fit.json`, the fitted line for the since-removed `--fit` of `avspo analyze`, is the temperature-1.0 fit over configuration means: "
        "[sweep-history/fit.json](sweep-history/fit.json).",
        "",
        "![the sweep: early ACR against final accuracy, three readings](sweep-history/sweep_scatter.png)",
        "",
        "### How these numbers were produced, and what they cost",
        "",
        "```",
        f"python -m lab study --out build/study     # {timing['wall_s'] / 60:.0f} min wall, {timing['cpu_s'] / 3600:.2f} "
        f"CPU-hours ({timing['jobs']} workers, one torch thread each)",
        f"python -m lab sweep --out build/sweep     # the old sweep's code: {sweep['timing']['wall_s'] / 60:.0f} min wall, "
        f"{sweep['timing']['cpu_s']:,.0f} CPU-seconds ({sweep['timing']['jobs']} workers)",
        "```",
        "",
        f"* The study's {runs} runs took about {timing['cpu_s'] / runs:.0f} CPU-seconds each.",
        "* It ran from commit 2ea5a22. Later commits changed the lab's code without changing what a run computes: two "
        "of its runs (`select_grpo` and `dapo`, base 1, seed 0) re-run with the final code gave identical endpoints. "
        "study.md was rendered again from study.json by the final code.",
        "* The sweep's sweep.json is committed without the per-run series; the same command reproduces them.",
        "* The lab's runs depend only on their settings and seeds, not on `--jobs` (a test checks it).",
        "* The base policies' warm-up uses the lab's clip of "
        f"{sweep['settings']['grad_clip']:.1f}; the pilot's clip applies to the RL phase.",
    ]
    return lines


def results_history() -> str:
    """The generated part of results.md."""
    afternoon = load("afternoon")
    return "\n".join([
        "", *decision_table(afternoon), "", *afternoon_study(afternoon), "", *sweep_section(load("sweep"), load("fit")),
        "", *morning_study(load("morning")), "", *old_testbed(load("old"), load("old_sweep")), "",
    ])  # fmt: skip
