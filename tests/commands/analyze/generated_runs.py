"""Generated runs for the analyser's tests: rollout dumps and tracker logs whose ACR is known.

The expected numbers come from a plain-Python oracle over the generated reward lists
(collapsed = one distinct value; all-fail = all 0; all-pass = all 1), independent of the core.
"""

from __future__ import annotations

import csv
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

G = 4
PROMPTS = [f"Compute {i} * {i + 3}." for i in range(6)]


@dataclass
class Truth:
    """Per step (ascending): ACR, all-fail rate, all-pass rate, near-collapse rate, reward mean."""

    steps: list[int]
    acr: list[float]
    all_fail: list[float]
    all_pass: list[float]
    near: list[float]
    reward_mean: list[float]


def draw_run(num_steps: int, seed: int = 0, first_step: int = 1) -> dict[int, list[tuple[str, list[float]]]]:
    """Per step: every prompt once with G binary rewards; prompt 0 always fails, prompt 5 always passes."""
    rng = np.random.default_rng(seed)
    pass_rates = np.array([0.0, 0.15, 0.4, 0.6, 0.85, 1.0])
    run = {}
    for step in range(first_step, first_step + num_steps):
        run[step] = [(prompt, (rng.random(G) < p).astype(float).tolist()) for prompt, p in zip(PROMPTS, pass_rates)]
    return run


def truth(run: dict[int, list[tuple[str, list[float]]]]) -> Truth:
    result = Truth([], [], [], [], [], [])
    for step in sorted(run):
        groups = [rewards for _, rewards in run[step]]
        n = len(groups)
        result.steps.append(step)
        result.acr.append(sum(len(set(r)) == 1 for r in groups) / n)
        result.all_fail.append(sum(set(r) == {0.0} for r in groups) / n)
        result.all_pass.append(sum(set(r) == {1.0} for r in groups) / n)
        result.near.append(sum(len(r) >= 3 and sorted(r.count(v) for v in set(r)) == [1, len(r) - 1] for r in groups) / n)
        result.reward_mean.append(sum(map(sum, groups)) / sum(map(len, groups)))
    return result


def write_dump(directory: Path, run: dict, with_uid: bool = True) -> Path:
    """verl's rollout dump: {step}.jsonl, samples of a prompt together; v1 uid keys unless with_uid=False."""
    directory.mkdir(parents=True, exist_ok=True)
    for step, groups in run.items():
        with open(directory / f"{step}.jsonl", "w") as handle:
            for prompt, rewards in groups:
                uid = uuid.uuid4().hex
                for session, reward in enumerate(rewards):
                    record = {"input": prompt, "output": f"answer {session}", "gts": "42", "score": reward,
                              "step": step}
                    if with_uid:
                        record["uid"] = f"{uid}_{session}_0"
                    handle.write(json.dumps(record) + "\n")
    return directory


def avspo_rows(t: Truth) -> dict[int, dict[str, float]]:
    """What a run made with the plugin logs per step (avspo/* keys) next to host metrics."""
    return {
        step: {"avspo/acr": acr, "avspo/acr_all_fail": fail, "avspo/acr_all_pass": passed,
               "avspo/near_collapse": near, "avspo/reward_mean": reward, "critic/score/mean": reward,
               "actor/entropy": 1.0}
        for step, acr, fail, passed, near, reward in zip(t.steps, t.acr, t.all_fail, t.all_pass, t.near,
                                                          t.reward_mean)
    }


def write_verl_file_log(path: Path, rows: dict[int, dict[str, float]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        for step, data in rows.items():
            handle.write(json.dumps({"step": step, "data": data}) + "\n")
    return path


def write_tensorboard(directory: Path, rows: dict[int, dict[str, float]]) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(directory))
    for step, data in rows.items():
        for key, value in data.items():
            writer.add_scalar(key, value, step)
    writer.close()
    return directory


def write_wandb_csv(path: Path, rows: dict[int, dict[str, float]], step_column: str = "_step") -> Path:
    keys = sorted({key for data in rows.values() for key in data})
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([step_column, "_runtime", *keys])
        for step, data in rows.items():
            writer.writerow([step, 1.5 * step, *(data.get(key, "") for key in keys)])
    return path


def write_trl_state(path: Path, t: Truth, logging_steps: int = 1) -> Path:
    """TRL's trainer_state.json: a train entry per logged step, an eval entry now and then, a summary at the end."""
    history = []
    for step, acr, reward in zip(t.steps, t.acr, t.reward_mean):
        history.append({"step": step, "epoch": step / 100, "loss": 0.01, "reward": reward,
                        "frac_reward_zero_std": acr, "learning_rate": 1e-6})
        if step % 20 == 0:
            history.append({"step": step, "epoch": step / 100, "eval_reward": 0.3, "eval_frac_reward_zero_std": 0.9})
    history.append({"step": t.steps[-1], "train_runtime": 12.0, "train_loss": 0.01})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"global_step": t.steps[-1], "logging_steps": logging_steps, "log_history": history},
                               indent=2))
    return path
