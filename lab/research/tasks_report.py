"""What ``python -m lab tasks`` writes: tasks.md, from the report it built (tasks.json); and the registration section of
docs/evidence/tasks.md, rendered from the design in tasks.py (tests/lab/research/test_tasks.py checks the page holds it)."""

from __future__ import annotations

from typing import Any

from . import tasks as design
from .headroom_report import _f, _signed, markdown_table


def _interval(test: dict[str, Any]) -> str:
    low, high = test["ci95"]
    return f"{test['mean']:+.4f} [{low:+.4f}, {high:+.4f}]"


def registration_markdown() -> str:
    """The design in words, from tasks.py's constants."""
    mde = design.planned_mde()
    seeds = design.TASK_SEEDS
    lines = [
        "## Registration",
        "",
        "Fixed in `lab/research/tasks.py` before any of its runs; one look, run by "
        "`python -m lab tasks --out docs/evidence/tasks --jobs 2` (resumable from its run cache).",
        "",
        f"1. **Tasks with room by construction.** Task seeds {seeds[0]}-{seeds[-1]} in order (no earlier study used "
        f"them: the headroom study used 0-{design.EARLIER_TASK_SEEDS[-1]}, the others 0), on the headroom testbed "
        f"(tiers {design.TIERS[0]}-{design.TIERS[-1]}, sixth-tier warm-up weight {design.SIXTH_TIER_WEIGHT:g}); one "
        f"warm-up of {design.WARMUP_STEPS:,} steps per task, its weights kept at steps "
        f"{design.CHECKPOINTS[0]}, {design.CHECKPOINTS[1]}, ..., {design.CHECKPOINTS[-1]}. On validation only, a "
        f"checkpoint's frontier is the lowest tier with greedy accuracy below {design.SOLVED:g}, kept when it is tier "
        f"{', '.join(map(str, design.FRONTIER_TIERS))} with accuracy in [{design.LOW_WINDOW[0]:g}, "
        f"{design.LOW_WINDOW[1]:g}]; of the qualifying checkpoints the one nearest the window's middle (a tie: the "
        f"later). The first {design.N_TASKS} qualifying task seeds are the tasks (at least {design.MIN_TASKS}, else no "
        f"comparison). The gate reads the base only.",
        f"2. **Regimes on purpose.** The i-th task trains on a frontier-heavy fixed training set "
        f"({design.FRONTIER_SHARE['all_fail']:.0%} of {design.TRAIN_PROBLEMS:,} problems on the frontier, the rest "
        f"over the lower tiers) when i is even, on a mostly-solved one ({design.FRONTIER_SHARE['all_pass']:.0%} on the "
        f"frontier) when i is odd. Check per task: over GRPO's first {design.EARLY_SHARE:.0%} of steps the all-fail "
        f"share exceeds the all-pass share (frontier-heavy), or the reverse (mostly solved).",
        f"3. **Arms** at lr {design.LR:g} (the headroom study's tuned lr, on another task): "
        f"{', '.join(f'`{a}`' for a in design.ARMS)}; seeds {', '.join(map(str, design.SEEDS))} per task. An acting "
        f"arm acted on a task when it augmented at least {design.MIN_AUGMENTED_SHARE:.0%} of the collapsed groups it "
        f"targets; else \"did not act\" there, and no verdict below {design.MIN_TEST_TASKS} acting tasks.",
        f"4. **Endpoint.** Frontier-tier test accuracy at T = 1, {design.T1_SAMPLES} samples per problem, mean of the "
        f"last {design.ENDPOINT_READINGS} readings (every {design.READ_EVERY:,} rollouts; budget "
        f"{design.Sizes().budget:,} rollouts, every arm); greedy beside. Primary: `{design.PRIMARY_ARM}` minus "
        f"`{design.BASELINE}`, tasks as the unit (paired t, tasks - 1 df), seed pairs beside; the ablations secondary; "
        f"Holm over the real tests only. Per regime: secondary, pre-declared.",
        f"5. **Planned MDE** ({design.N_TASKS} tasks, 80% power, alpha {design.ALPHA:g}; headroom seed SDs, spread "
        f"of the true effect across tasks {design.PLANNING_TAU:g}): primary "
        f"{mde[design.PRIMARY_ARM]['with_tau']['mde']:.3f} (Holm's strictest level "
        f"{mde[design.PRIMARY_ARM]['with_tau']['mde_holm']:.3f}; with no spread "
        f"{mde[design.PRIMARY_ARM]['seed_noise_only']['mde']:.3f}); ablations "
        f"{mde['ablations']['with_tau']['mde']:.3f}.",
        "6. **Test lock.** The analysis reads the runs from the run cache and refuses unless every registered run is "
        "there.",
        f"7. **What a run's logs tell.** From an acting run's first {design.EARLY_SHARE:.0%} of steps "
        f"({', '.join(design.FEATURES)}), an L2 logistic regression predicts the sign of its task's effect, left one "
        f"task out; it tells when it beats the majority sign and a {design.PERMUTATIONS}-permutation p is below "
        f"{design.PREDICTOR_ALPHA:g}, else the report says it cannot tell.",
        f"8. **Cost.** {design.COST_NOTE}.",
    ]
    return "\n".join(lines) + "\n"


def tasks_markdown(report: dict[str, Any]) -> str:
    """tasks.md: the tasks and their checks, the manipulation checks, the comparison, the regimes, the predictor."""
    tasks = report["tasks"]
    out = ["# Tasks as the unit (`python -m lab tasks`)", ""]
    registration = report.get("registration", {})
    out += [f"Registered design: commit `{registration.get('design_commit') or 'n/a'}`; ran at "
            f"`{registration.get('head') or 'n/a'}`" + (" (quick pipeline check)" if report["design"]["quick"] else "")
            + ".", ""]
    out += ["## Tasks", "", markdown_table(
        ["task", "checkpoint", "frontier tier", "base greedy (validation)", "regime", "early all-fail", "early all-pass",
         "regime check"],
        [[t, v["checkpoint"], v["frontier"], _f(v["base_validation_greedy"][str(v["frontier"])]), v["regime"],
          _f(v["regime_check"]["early_all_fail"]), _f(v["regime_check"]["early_all_pass"]),
          "passed" if v["regime_check"]["passed"] else "failed"] for t, v in tasks.items()]), ""]
    out += ["## Did each arm act?", "", markdown_table(
        ["arm", *tasks], [[arm, *(f"{_f(m[t]['augmented_share'], 2)}{'' if m[t]['acted'] else ' (did not act)'}"
                                  for t in tasks)] for arm, m in report["manipulation"].items()]), ""]
    out += ["## Against GRPO (frontier-tier T = 1 test accuracy, mean of the last readings)", ""]
    rows = []
    for arm, test in report["comparison"]["primary"].items():
        if not test["real"]:
            rows.append([arm, report["verdicts"][arm], test["why"], "", "", "", ""])
            continue
        rows.append([arm, report["verdicts"][arm], _interval(test), f"{test['p']:.3g}", f"{test['p_holm']:.3g}",
                     f"{test['mde']:.3f}", _interval(test["seed_pairs"])])
    out += [markdown_table(["arm", "verdict", "tasks as the unit: mean [95%]", "p", "Holm p", "realised MDE",
                            "seed pairs: mean [95%]"], rows), ""]
    shipped = report["comparison"]["as_shipped"]
    if shipped:
        out += [f"`{design.PRIMARY_ARM}` on every task, acting or not: {_interval(shipped)}.", ""]
    out += ["## Per regime (secondary)", "", markdown_table(
        ["arm", *design.REGIMES],
        [[arm, *(_interval(r[g]) if "ci95" in r[g] else f"{_signed(r[g].get('mean'))} ({len(r[g]['tasks'])} tasks)"
                 for g in design.REGIMES)] for arm, r in report["by_regime"].items()]), ""]
    pred = report["predictor"]
    out += ["## What a run's logs tell", "", f"{pred['verdict']}: {pred['why']}.", ""]
    cost = report["run_cost"]
    out += ["## Cost", "", ", ".join(f"{arm} {c['cpu_s']:.0f} CPU-s" for arm, c in cost.items()) + " per run.", ""]
    return "\n".join(out)
