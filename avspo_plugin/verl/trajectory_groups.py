"""Agent-loop trajectories with several outputs, grouped for ``avspo`` exactly as verl groups them for GRPO.

An agent loop of verl's v1 trainer may put several outputs of one trajectory into the batch, keyed
``{uid}_{session_id}_{index}``. verl's ``compute_advantage_for_multi_trajectories`` computes GRPO on each
trajectory's final output and broadcasts it to the trajectory's other outputs; every other estimator gets all rows.
``avspo`` takes GRPO's route, so a group is a prompt's trajectories (tests/verl/test_paths.py checks it bit for bit).
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable

import torch

from ..names import ESTIMATOR


def final_output_rows(batch_keys: list[str]) -> tuple[list[int], list[int]]:
    """Each trajectory's final output, by verl's rule.

    batch_keys: (B,) keys ``{uid}_{session_id}_{index}`` (the uid may contain underscores).
    Returns (final_rows: the row of each trajectory's largest index, in order of first appearance;
    row_to_trajectory: (B,) for each row, its trajectory's position in final_rows).
    """
    final: dict[str, tuple[int, int]] = {}
    row_trajectories = []
    for row, key in enumerate(batch_keys):
        fields = str(key).rsplit("_", 2)
        if len(fields) != 3 or not fields[2].lstrip("-").isdigit():
            raise ValueError(
                f"batch key {key!r} (row {row}) is not of verl's form '{{uid}}_{{session_id}}_{{index}}': "
                "the avspo estimator cannot tell which outputs belong to one agent-loop trajectory"
            )
        trajectory, index = f"{fields[0]}_{fields[1]}", int(fields[2])
        row_trajectories.append(trajectory)
        if trajectory not in final or final[trajectory][0] < index:
            final[trajectory] = (index, row)
    position = {trajectory: place for place, trajectory in enumerate(final)}
    return [row for _, row in final.values()], [position[trajectory] for trajectory in row_trajectories]


def trajectory_advantages(data, batch_keys: list[str], compute_final: Callable):
    """Advantages of every row from its trajectory's final output, as verl's GRPO route forms them.

    data: verl's DataProto with ``response_mask`` (B, L); compute_final: verl's ``compute_advantage``
    bound to the run's estimator settings, called on the final outputs alone. Each trajectory's
    advantage is read at the final output's first response token and broadcast over the trajectory's
    rows' response masks. Returns data with ``advantages`` and ``returns`` (B, L).
    """
    final_rows, row_to_trajectory = final_output_rows(batch_keys)
    final = compute_final(data.select_idxs(final_rows))
    first_token = final.batch["response_mask"].argmax(dim=1)
    per_trajectory = final.batch["advantages"][torch.arange(len(final)), first_token]
    advantages = per_trajectory[row_to_trajectory].unsqueeze(-1) * data.batch["response_mask"]
    data.batch["advantages"] = data.batch["returns"] = advantages
    return data


def group_trajectories_for_avspo(original: Callable) -> Callable:
    """Wraps v1 ``compute_advantage_for_multi_trajectories``: ``avspo`` takes GRPO's route (one row per agent-loop
    trajectory); other estimators pass through."""
    signature = inspect.signature(original)

    def compute_advantage_for_multi_trajectories(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        if str(arguments["adv_estimator"]) != ESTIMATOR:
            return original(*args, **kwargs)
        data, batch_keys = arguments.pop("data"), arguments.pop("batch_keys")
        # verl's own compute_advantage, as its GRPO route calls it, on each trajectory's final output.
        compute = sys.modules[original.__module__].compute_advantage
        return trajectory_advantages(data, batch_keys, functools.partial(compute, **arguments))

    return compute_advantage_for_multi_trajectories
