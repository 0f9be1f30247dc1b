"""Where does GRPO leave room at greedy decoding? The pilot behind the learning-or-sharpening study's evaluation set.

GRPO alone (lr 6e-4, pilot seed 999, the earlier study's budget) reads greedy accuracy after the budget, by tier and
carry count (:func:`lab.task.carry_counts`), on fresh problems:

- ``carry_classes``: on the two bases whose greedy accuracy ended highest in the earlier study (carrydrop15,
  warmup730), every (tier, carries) class with at least 20 problems;
- ``wider_fields``: a testbed with a sixth tier (fields of 6 digits, warm-up of 1,000 steps), the sixth tier's
  warm-up weight 0, 0.05 or 0.25 of the first's 4: greedy and T = 1 accuracy by tier, of the base and after GRPO.

    python -m lab.research.headroom_pilot docs/evidence/sharpening/headroom_pilot.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..experiment import RunSpec, prepare_base, quiet_process, run_all
from ..methods import parse_method
from ..policy import generate, greedy_accuracy
from ..task import Problems, carry_counts, draw_operands, max_response_length, rewards
from ..train import load_policy
from .study import BASE_CANDIDATES, BUDGET_STEPS, STUDY_SETTINGS

PILOT_SEED = 999
PILOT_LR = 6e-4
PROBLEMS_PER_TIER = 3000
WIDE_PROBLEMS_PER_TIER = 400
LEAST_PER_CLASS = 20
WIDE_TIERS = (2, 3, 4, 5, 6)
WIDE_WARMUP_STEPS = 1000
SIXTH_TIER_WEIGHTS = (0.0, 0.05, 0.25)


@dataclass(frozen=True)
class FinalReading:
    """train.Evaluation: one reading at the run's last step (carry classes, or accuracy by tier)."""

    tiers: tuple[int, ...]
    by_carries: bool

    def due(self, rollouts_total: int, final: bool, rollouts_before: int) -> bool:
        return final

    def evaluate(self, policy, step: int, rollouts_total: int, final: bool) -> dict:
        return read(policy, self.tiers, self.by_carries)


def read(policy, tiers: tuple[int, ...], by_carries: bool) -> dict:
    """Greedy accuracy by tier and carry count (by_carries), or greedy and T = 1 (4 samples) accuracy by tier."""
    rng = np.random.default_rng(123)
    out: dict[str, dict] = {}
    for d in tiers if not by_carries else [d for d in tiers if d >= 3]:
        tier = np.full(PROBLEMS_PER_TIER if by_carries else WIDE_PROBLEMS_PER_TIER, d)
        problems = Problems(draw_operands(rng, tier), draw_operands(rng, tier), tier, max(tiers))
        greedy = greedy_accuracy(policy, problems, max_response_length(tiers))
        if by_carries:
            carries = carry_counts(problems.a, problems.b)
            out[str(d)] = {str(k): {"greedy": float(greedy[carries == k].mean()), "problems": int((carries == k).sum())}
                           for k in range(d + 1) if (carries == k).sum() >= LEAST_PER_CLASS}
            continue
        prompts = [p for p in problems.prompts() for _ in range(4)]
        answers = [a for a in problems.answers() for _ in range(4)]
        rollout = generate(policy, prompts, max_response_length(tiers), 1.0, torch.Generator().manual_seed(1))
        out[str(d)] = {"greedy": float(greedy.mean()), "t1": float(rewards(rollout.response_ids, answers).double().mean())}
    return out


def grpo_after(settings, state, reading: FinalReading) -> dict:
    spec = RunSpec("pilot", dataclasses.replace(settings, lr=PILOT_LR), parse_method("grpo"), PILOT_SEED,
                   evaluation=reading)
    return run_all([spec], state, 1, progress=False)["pilot"]["evals"][-1]


def main(out: Path) -> None:
    quiet_process()
    known = {c.name: c for c in BASE_CANDIDATES}
    report: dict = {"pilot_seed": PILOT_SEED, "lr": PILOT_LR, "budget_steps": BUDGET_STEPS,
                    "carry_classes": {}, "wider_fields": {}}
    with tempfile.TemporaryDirectory() as cache:
        for name in ("carrydrop15", "warmup730"):
            settings = dataclasses.replace(STUDY_SETTINGS, **known[name].warmup)
            state, _ = prepare_base(settings, Path(cache))
            report["carry_classes"][name] = grpo_after(settings, state, FinalReading(settings.tiers, True))
        for weight in SIXTH_TIER_WEIGHTS:
            settings = dataclasses.replace(
                STUDY_SETTINGS, tiers=WIDE_TIERS, mix=(1,) * len(WIDE_TIERS), warmup_mix=(4, 3, 2, 1, weight),
                warmup_steps=WIDE_WARMUP_STEPS, train_per_tier=BUDGET_STEPS * STUDY_SETTINGS.prompts // len(WIDE_TIERS) // 2)
            state, _ = prepare_base(settings, Path(cache))
            reading = FinalReading(WIDE_TIERS, False)
            report["wider_fields"][repr(weight)] = {"base": read(load_policy(settings, state), WIDE_TIERS, False),
                                                    "after_grpo": grpo_after(settings, state, reading)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m lab.research.headroom_pilot",
                                     description=__doc__.split("\n\n")[0] + " (several CPU-minutes)")
    parser.add_argument("out", type=Path, help="the pilot's JSON report, e.g. docs/evidence/sharpening/headroom_pilot.json")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_arguments().out)

