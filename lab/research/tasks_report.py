"""What ``python -m lab tasks`` writes: tasks.md, from the report it built (tasks.json); and the registration section of
docs/evidence/tasks.md, rendered from the design tasks.py fixes (tasks.design and tasks.planned_mde; the test
tests/lab/research/test_tasks.py checks the page holds it)."""

from __future__ import annotations

from typing import Any

from .headroom_report import _f, _signed, markdown_table
from .sharpening_report import interval

REGIMES = ("all_fail", "all_pass")  # tasks.REGIMES (tasks.py imports this module)


def registration_markdown(d: dict[str, Any], mde: dict[str, Any]) -> str:
    """The design in words: ``d`` is tasks.design(quick=False), ``mde`` tasks.planned_mde()."""
    seeds = d["task_seeds"]
    lines = [
        "## Registration",
        "",
        "Fixed in `lab/research/tasks.py` before any of its runs; one look, run by "
        "`python -m lab tasks --out docs/evidence/tasks --jobs 2` (resumable from its run cache).",
        "",
        f"1. **Tasks with room by construction.** Task seeds {seeds[0]}-{seeds[-1]} in order (no earlier study used "
        f"them: the headroom study used 0-{d['earlier_task_seeds'][-1]}, the others 0), on the headroom testbed "
        f"(tiers {d['tiers'][0]}-{d['tiers'][-1]}, sixth-tier warm-up weight {d['sixth_tier_weight']:g}); one "
        f"warm-up of {d['warmup_steps']:,} steps per task, its weights kept at steps "
        f"{d['checkpoints'][0]}, {d['checkpoints'][1]}, ..., {d['checkpoints'][-1]}. On validation only, a "
        f"checkpoint's frontier is the lowest tier with greedy accuracy below {d['solved']:g}, kept when it is tier "
        f"{', '.join(map(str, d['frontier_tiers']))} with accuracy in [{d['low_window'][0]:g}, "
        f"{d['low_window'][1]:g}]; of the qualifying checkpoints the one nearest the window's middle (a tie: the "
        f"later). The first {d['tasks']} qualifying task seeds are the tasks (at least {d['min_tasks']}, else no "
        f"comparison). The gate reads the base only.",
        f"2. **Regimes on purpose.** The i-th task trains on a frontier-heavy fixed training set "
        f"({d['frontier_share']['all_fail']:.0%} of {d['train_problems']:,} problems on the frontier, the rest "
        f"over the lower tiers) when i is even, on a mostly-solved one ({d['frontier_share']['all_pass']:.0%} on the "
        f"frontier) when i is odd. Check per task: over GRPO's first {d['early_share']:.0%} of steps the all-fail "
        f"share exceeds the all-pass share (frontier-heavy), or the reverse (mostly solved).",
        f"3. **Arms** at lr {d['lr']:g} (the headroom study's tuned lr, on another task): "
        f"{', '.join(f'`{a}`' for a in d['arms'])}; seeds {', '.join(map(str, d['seeds']))} per task. An acting "
        f"arm acted on a task when it augmented at least {d['min_augmented_share']:.0%} of the collapsed groups it "
        f"targets; else \"did not act\" there, and no verdict below {d['min_test_tasks']} acting tasks.",
        f"4. **Endpoint.** Frontier-tier test accuracy at T = 1, {d['t1_samples']} samples per problem, mean of the "
        f"last {d['endpoint_readings']} readings (every {d['read_every']:,} rollouts; budget "
        f"{d['budget']:,} rollouts, every arm); greedy beside. Primary: `{d['primary_arm']}` minus "
        f"`{d['baseline']}`, tasks as the unit (paired t, tasks - 1 df), seed pairs beside; the ablations secondary; "
        f"Holm over the real tests only. Per regime: secondary, pre-declared.",
        f"5. **Planned MDE** ({d['tasks']} tasks, 80% power, alpha {d['alpha']:g}; headroom seed SDs, spread "
        f"of the true effect across tasks {mde['tau']:g}): primary "
        f"{mde[d['primary_arm']]['with_tau']['mde']:.3f} (Holm's strictest level "
        f"{mde[d['primary_arm']]['with_tau']['mde_holm']:.3f}; with no spread "
        f"{mde[d['primary_arm']]['seed_noise_only']['mde']:.3f}); ablations "
        f"{mde['ablations']['with_tau']['mde']:.3f}.",
        "6. **Test lock.** The analysis reads the runs from the run cache and refuses unless every registered run is "
        "there.",
        f"7. **What a run's logs tell.** From an acting run's first {d['early_share']:.0%} of steps "
        f"({', '.join(d['features'])}), an L2 logistic regression predicts the sign of its task's effect, left one "
        f"task out; it tells when it beats the majority sign and a {d['permutations']}-permutation p is below "
        f"{d['predictor_alpha']:g}, else the report says it cannot tell.",
        f"8. **Cost.** {d['cost']}.",
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
        rows.append([arm, report["verdicts"][arm], interval(test), f"{test['p']:.3g}", f"{test['p_holm']:.3g}",
                     f"{test['mde']:.3f}", interval(test["seed_pairs"])])
    out += [markdown_table(["arm", "verdict", "tasks as the unit: mean [95%]", "p", "Holm p", "realised MDE",
                            "seed pairs: mean [95%]"], rows), ""]
    shipped = report["comparison"]["as_shipped"]
    if shipped:
        out += [f"`{report['design']['primary_arm']}` on every task, acting or not: {interval(shipped)}.", ""]
    out += ["## Per regime (secondary)", "", markdown_table(
        ["arm", *REGIMES],
        [[arm, *(interval(r[g]) if "ci95" in r[g] else f"{_signed(r[g].get('mean'))} ({len(r[g]['tasks'])} tasks)"
                 for g in REGIMES)] for arm, r in report["by_regime"].items()]), ""]
    pred = report["predictor"]
    out += ["## What a run's logs tell", "", f"{pred['verdict']}: {pred['why']}.", ""]
    cost = report["run_cost"]
    out += ["## Cost", "", ", ".join(f"{arm} {c['cpu_s']:.0f} CPU-s" for arm, c in cost.items()) + " per run.", ""]
    return "\n".join(out)
