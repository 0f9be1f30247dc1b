"""The ACR monitor: collapse metrics beside any advantage estimator, ``algorithm.avspo_monitor.enable=true``.

It reads the rows verl's ``compute_advantage`` hands the estimator (both trainers), measures each prompt's group as
AVSPO's monitor-only mode does, and logs :data:`~avspo_plugin.core.metrics.MONITOR_METRICS` and the early warnings
as ``avspo/*`` through the estimator's hooks. Every advantage stays the estimator's.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from ..core import AVSPOSession
from ..names import ESTIMATOR
from .plugin_process import this_process
from .run_config import MONITOR_BLOCK, config_entry, monitor_config_from_algorithm, monitors

# verl's registered estimators whose advantages do not come from the group of a prompt's responses.
UNGROUPED_ESTIMATORS = {
    "gae": "its advantages come from a critic's values",
    "reinforce_plus_plus": "it whitens returns over the whole batch",
    "remax": "its baseline is the reward of a greedy response",
}

logger = logging.getLogger("avspo_plugin.verl")


def monitor() -> AVSPOSession:
    """This process's ACR monitor session (configured by the trainer's hook)."""
    return this_process().monitor.session


def launch_notes(config: Any) -> list[str]:
    """What a user of the monitor should know about this full verl config (empty when nothing)."""
    algorithm = config_entry(config, "algorithm")
    if not monitor_config_from_algorithm(algorithm).enable:
        return []
    estimator = str(config_entry(algorithm, "adv_estimator"))
    if estimator == ESTIMATOR:
        return [
            f"{MONITOR_BLOCK}.enable=true has no effect with algorithm.adv_estimator={ESTIMATOR}: the estimator "
            "logs the same avspo/* metrics itself"
        ]
    notes = []
    n = config_entry(config_entry(config_entry(config, "actor_rollout_ref"), "rollout"), "n")
    if n is not None and int(n) < 2:
        notes.append(
            f"{MONITOR_BLOCK}: actor_rollout_ref.rollout.n={n}: each prompt has a single response, so no group can "
            "collapse; the monitor logs avspo/groups 0 (every rate 0), avspo/reward_mean and avspo/samples only"
        )
    if estimator in UNGROUPED_ESTIMATORS:
        notes.append(
            f"{MONITOR_BLOCK} with algorithm.adv_estimator={estimator}: {UNGROUPED_ESTIMATORS[estimator]}, not from "
            "the group of a prompt's responses, so a collapsed group does not zero its advantages. avspo/acr and "
            "its split still say how often every response to a prompt got the same reward, and "
            "avspo/wasted_rollouts how many responses a group estimator (grpo, rloo, ...) would have learnt "
            "nothing from"
        )
    return notes


def observe(data: Any, algorithm: Any, adv_estimator: Any) -> None:
    """Count the batch verl's ``compute_advantage`` is about to estimate as one call of the monitor's open step.

    data: verl's DataProto with ``token_level_rewards``, ``response_mask`` (B, L) and ``uid`` (B,). A batch the
    monitor cannot read is a warning naming why; the estimator runs either way.
    """
    if not monitors(algorithm, adv_estimator):
        return
    try:
        if "uid" not in data.non_tensor_batch:
            raise ValueError("the batch has no uid column, so its rows cannot be grouped by prompt")
        this_process().warn_kl_in_reward(algorithm)
        monitor().group_advantages(
            data.batch["token_level_rewards"].sum(dim=-1), data.non_tensor_batch["uid"],
            monitor_config_from_algorithm(algorithm).avspo_config(),
            response_mask=data.batch["response_mask"],
        )  # fmt: skip
    except (KeyError, ValueError) as err:
        logger.warning("%s skipped a batch of %d rows (its advantages are unaffected): %s", MONITOR_BLOCK, len(data), err)


def observe_advantage_step(original: Callable) -> Callable:
    """Wraps ``compute_advantage``: the monitor (both trainers) sees the rows the estimator gets, before it runs."""
    signature = inspect.signature(original)

    def compute_advantage(*args, **kwargs):
        arguments = signature.bind(*args, **kwargs).arguments
        observe(arguments["data"], arguments.get("config"), arguments["adv_estimator"])
        return original(*args, **kwargs)

    return compute_advantage
