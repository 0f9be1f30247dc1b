"""``python -m lab tune``: tune GRPO's own settings on the study's bases, with seeds the study does not use.

Only GRPO runs here: no other method is compared while GRPO's settings are chosen. A round runs GRPO with the
study's settings plus the given changes (only TUNABLE keys) from every base the study's rule chooses, on
TUNING_SEEDS, and computes each base's gates. Every round is appended to ``tuning.json`` in the output
directory and ``tuning.md`` is written from all rounds: the record of how the study's frozen GRPO settings
(study.FROZEN_GRPO) were found.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..experiment import default_jobs, quiet_process, run_timing
from ..methods import PRESETS
from ..report import markdown_table
from ..settings import LabSettings
from .gates import GATE_NAMES, first_half, grpo_gates
from .statistics import pairs_for_mde
from .study import MDE_TARGET, STUDY_SETTINGS, choose_bases, run_base, training_regime

# GRPO's settings that tuning may change; prompts follow group_size so that a step samples the same rollouts.
TUNABLE = ("lr", "group_size", "temperature", "kl_coef", "grad_clip", "clip_ratio")
TUNING_SEEDS = tuple(range(1000, 1100))  # never study seeds (0, 1, ...)


def parse_changes(items: list[str] | None, settings: LabSettings) -> dict[str, Any]:
    """``key=value`` items -> changes of LabSettings; only TUNABLE keys. group_size also sets prompts (same
    rollouts per step), temperature also the evaluation temperature (the gates read at the training one)."""
    changes: dict[str, Any] = {}
    for item in items or []:
        key, eq, raw = item.partition("=")
        if not eq or key not in TUNABLE:
            raise ValueError(f"--set {item!r}: give key=value with key one of {', '.join(TUNABLE)}")
        try:
            changes[key] = int(raw) if key == "group_size" else float(raw)
        except ValueError:
            raise ValueError(f"--set {item!r}: {raw!r} is not a number") from None
    if "group_size" in changes:
        rows = settings.prompts * settings.group_size
        if rows % changes["group_size"]:
            raise ValueError(f"--set group_size={changes['group_size']}: {rows} rollouts per step are not a multiple")
        changes["prompts"] = rows // changes["group_size"]
    if "temperature" in changes:
        changes["eval_temperature"] = changes["temperature"]
    return changes


def run_summary(run: dict, base_eval: Mapping) -> dict[str, Any]:
    """One tuning run in figures: base and final accuracy (sampled at the training temperature, and greedy),
    first-half ACR and its all-fail / all-pass split, clip rate, cost."""
    steps, evals = run["steps"], run["evals"]
    bound = [b for b in steps["clip_bound"] if b is not None]
    return {
        "seed": run["seed"],
        "base_accuracy": base_eval["accuracy"], "final_accuracy": evals["accuracy"][-1],
        "base_greedy": base_eval["greedy"], "final_greedy": evals["greedy"][-1],
        "acr_first_half": float(np.mean(first_half(steps["acr"]))),
        "all_fail_first_half": float(np.mean(first_half(steps["acr_all_fail"]))),
        "all_pass_first_half": float(np.mean(first_half(steps["acr_all_pass"]))),
        "clip_rate": float(np.mean(bound)) if bound else 0.0,
        "final_by_tier": evals["by_tier"][-1],
        "cpu_s": run["cpu_s"], "wall_s": run["wall_s"],
    }


def seeds_needed(rounds: list[dict], target: float) -> dict[str, Any]:
    """Pairs a comparison with GRPO needs for an MDE of ``target``, from a round's spread of GRPO's final accuracy
    over seeds (pooled within bases): a paired difference of two runs that share only their seed has sd about
    sqrt(2) x that spread, an upper estimate where paired runs agree more than independent ones."""
    last = rounds[-1]
    deviations = [r["final_accuracy"] - np.mean([x["final_accuracy"] for x in base["runs"]])
                  for base in last["bases"].values() for r in base["runs"]]
    dof = sum(len(base["runs"]) - 1 for base in last["bases"].values())
    if dof < 1:
        return {"sd_final": None, "sd_difference": None, "pairs": None, "dof": dof}
    sd = float(np.sqrt(np.sum(np.square(deviations)) / dof))
    return {"sd_final": sd, "sd_difference": float(np.sqrt(2) * sd), "dof": dof,
            "pairs": pairs_for_mde(float(np.sqrt(2) * sd), target)}


def tuning_markdown(rounds: list[dict]) -> str:
    lines = ["# Tuning GRPO on the study's bases", "",
             "Only GRPO runs here, on tuning seeds (1000 on) that the study never uses; every round is kept. "
             "Accuracy: held-out avg@k at the training temperature; greedy: greedy decoding; ACR, all-fail and "
             "all-pass: means over the first half of the steps; clip: fraction of updates the gradient clip bound.",
             ""]
    for i, record in enumerate(rounds, start=1):
        lines += [f"## Round {i}: {record['label']}", "",
                  f"Changes from the study's settings: `{json.dumps(record['changes'])}`; seeds "
                  f"{record['seeds']}; {record['timing']['cpu_s'] / 60:.1f} CPU-minutes.", ""]
        if record.get("candidates"):
            lines += ["Candidate bases: " + "; ".join(
                f"{c['name']}: {c['why']}, greedy {c['greedy']:.2f}" + (" (chosen)" if c["name"] in record["bases"] else "")
                for c in record["candidates"]) + ".", ""]
        rows = []
        for name, base in record["bases"].items():
            for r in base["runs"]:
                in_training = base["training"]["regime"] if "training" in base else "(not recorded)"
                rows.append([name, base["regime"] or "", in_training, str(r["seed"]),
                             f"{r['base_accuracy']:.3f} → {r['final_accuracy']:.3f} ({r['final_accuracy'] - r['base_accuracy']:+.3f})",
                             f"{r['base_greedy']:.3f} → {r['final_greedy']:.3f} ({r['final_greedy'] - r['base_greedy']:+.3f})",
                             f"{r['acr_first_half']:.3f}", f"{r['all_fail_first_half']:.3f}",
                             f"{r['all_pass_first_half']:.3f}", f"{r['clip_rate']:.2f}", f"{r['cpu_s']:.0f}"])
        lines += markdown_table(["base", "regime", "regime in training", "seed", "accuracy base → final (Δ)",
                                 "greedy base → final (Δ)",
                                 "ACR", "all-fail", "all-pass", "clip", "CPU s"], rows)
        lines += ["", "Gates (✔ passed, ✘ failed):", ""]
        rows = [[name, *(_gate_cell(base["gates"][g]) for g in GATE_NAMES)] for name, base in record["bases"].items()]
        lines += markdown_table(["base", *GATE_NAMES], rows)
        need = record["seeds_needed"]
        if need["pairs"] is not None:
            lines += ["", f"Spread of GRPO's final accuracy over seeds (pooled within bases, {need['dof']} degrees of "
                          f"freedom): sd {need['sd_final']:.4f}; a paired difference's sd is at most about "
                          f"{need['sd_difference']:.4f}, so an MDE of {record['mde_target']} at 80% power needs "
                          f"{need['pairs']} pairs."]
        lines.append("")
    return "\n".join(lines)


def _gate_cell(gate: Mapping) -> str:
    value = gate["value"]
    text = f"{value:.3f}" if isinstance(value, float) else str(value)
    return f"{'✔' if gate['passed'] else '✘'} {text}"


def run(args) -> int:
    """One tuning round; appends it to OUT/tuning.json and writes OUT/tuning.md."""
    quiet_process()
    started = time.perf_counter()
    changes = parse_changes(args.set, STUDY_SETTINGS)
    settings = dataclasses.replace(STUDY_SETTINGS, **changes)
    count = args.seeds if args.seeds is not None else 2
    seeds = list(TUNING_SEEDS[:count])
    out = args.out or Path("docs/evidence/tuning")
    out.mkdir(parents=True, exist_ok=True)
    jobs = args.jobs or default_jobs()
    progress = not args.no_progress
    candidates = choose_bases(settings, progress, named=args.candidates)
    bases = [c for c in candidates if c["chosen"]]
    record: dict[str, Any] = {"label": args.label or ", ".join(args.set or ["the study's settings"]),
                              "changes": changes, "seeds": seeds, "mde_target": MDE_TARGET,
                              "candidates": [{"name": c["name"], "regime": c["regime"], "why": c["why"],
                                              "greedy": c["description"]["held_out"]["greedy"]} for c in candidates],
                              "bases": {}}
    for base in bases:
        runs = run_base(base, [PRESETS["grpo"]], seeds, jobs, progress)["grpo"]
        base_eval = base["description"]["held_out"]
        record["bases"][base["name"]] = {
            "regime": base["regime"], "why": base["why"],
            "runs": [run_summary(runs[s], base_eval) for s in seeds],
            "training": training_regime(list(runs.values())),
            "gates": grpo_gates(base_eval, list(runs.values()), settings.grad_clip),
        }
    path = out / "tuning.json"
    rounds = json.loads(path.read_text(encoding="utf-8"))["rounds"] if path.exists() else []
    record["timing"] = run_timing(started, jobs)
    rounds.append(record)
    record["seeds_needed"] = seeds_needed(rounds, MDE_TARGET)
    path.write_text(json.dumps({"rounds": rounds}, indent=1) + "\n", encoding="utf-8")
    markdown = tuning_markdown(rounds)
    (out / "tuning.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    print(f"python -m lab tune: round {len(rounds)} appended to {path}", file=sys.stderr)
    return 0
