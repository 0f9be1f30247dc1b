"""The ACR monitor: collapse metrics beside any advantage estimator, ``algorithm.avspo_monitor.enable=true``.

The monitor reads what verl hands its estimator (``token_level_rewards``, ``response_mask`` and the
``uid`` of each row, in the legacy ``compute_advantage`` and the v1
``compute_advantage_for_multi_trajectories``), measures each prompt's group as AVSPO's monitor-only
mode does (:class:`~avspo_plugin.config.MonitorConfig`), and logs the reward-side metrics
(:data:`~avspo_plugin.core.metrics.MONITOR_METRICS`) and the early warnings as ``avspo/*`` through
the same hooks as the estimator. It only reads: every advantage is the estimator's, untouched.
Its state (the warning streaks) rides in each checkpoint as ``avspo_monitor_state.json``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from verl.trainer.ppo import core_algos

from ..config import ConfigError, MonitorConfig
from ..core.metrics import MONITOR_METRICS
from ..names import ESTIMATOR, MONITOR_STATE_FILE
from .estimator import EstimatorSession, config_entry, to_plain

CONFIG_BLOCK = "algorithm.avspo_monitor"
# The monitor's session hangs on core_algos, as the estimator's does (one per process, whichever copy asks).
_SESSION_ATTR = "_avspo_plugin_monitor"

# verl's registered estimators whose advantages do not come from the group of a prompt's responses.
UNGROUPED_ESTIMATORS = {
    "gae": "its advantages come from a critic's values",
    "reinforce_plus_plus": "it whitens returns over the whole batch",
    "remax": "its baseline is the reward of a greedy response",
}

logger = logging.getLogger("avspo_plugin.verl")


def monitor_config_from_algorithm(algorithm: Any) -> MonitorConfig:
    """The monitor's config in verl's ``algorithm`` block (``algorithm.avspo_monitor``; missing: off).

    Raises ConfigError naming the key."""
    block = to_plain(config_entry(algorithm, "avspo_monitor"))
    if block is not None and not isinstance(block, Mapping):
        raise ConfigError(f"{CONFIG_BLOCK} must be a block of keys ({', '.join(MonitorConfig.keys())}), got {block!r}")
    return MonitorConfig.from_mapping(block, where=CONFIG_BLOCK)


def monitor_avspo_config(algorithm: Any):
    """The AVSPO settings the monitor measures with, from verl's ``algorithm`` block."""
    return monitor_config_from_algorithm(algorithm).avspo_config()


def monitors(algorithm: Any, adv_estimator: Any = None) -> bool:
    """Whether the monitor runs for this ``algorithm`` block: enabled, and the estimator is not ``avspo``
    (which logs the same metrics itself)."""
    estimator = config_entry(algorithm, "adv_estimator") if adv_estimator is None else adv_estimator
    return str(estimator) != ESTIMATOR and monitor_config_from_algorithm(algorithm).enable


def uses_monitor(config: Any) -> bool:
    """Whether a full verl config runs the monitor."""
    return monitors(config_entry(config, "algorithm"))


def monitor() -> EstimatorSession:
    """This process's monitor session (created on first use; configured by the trainer's hook)."""
    live = getattr(core_algos, _SESSION_ATTR, None)
    if live is None:
        live = EstimatorSession(monitor_avspo_config, MONITOR_STATE_FILE, MONITOR_METRICS)
        setattr(core_algos, _SESSION_ATTR, live)
    return live


def launch_notes(config: Any) -> list[str]:
    """What a user of the monitor should know about this full verl config (empty when nothing)."""
    algorithm = config_entry(config, "algorithm")
    if not monitor_config_from_algorithm(algorithm).enable:
        return []
    estimator = str(config_entry(algorithm, "adv_estimator"))
    if estimator == ESTIMATOR:
        return [
            f"{CONFIG_BLOCK}.enable=true has no effect with algorithm.adv_estimator={ESTIMATOR}: the estimator "
            "logs the same avspo/* metrics itself"
        ]
    notes = []
    n = config_entry(config_entry(config_entry(config, "actor_rollout_ref"), "rollout"), "n")
    if n is not None and int(n) < 2:
        notes.append(
            f"{CONFIG_BLOCK}: actor_rollout_ref.rollout.n={n}: each prompt has a single response, so no group can "
            "collapse; the monitor logs avspo/groups 0 (every rate 0), avspo/reward_mean and avspo/samples only"
        )
    if estimator in UNGROUPED_ESTIMATORS:
        notes.append(
            f"{CONFIG_BLOCK} with algorithm.adv_estimator={estimator}: {UNGROUPED_ESTIMATORS[estimator]}, not from "
            "the group of a prompt's responses, so a collapsed group does not zero its advantages. avspo/acr and "
            "its split still say how often every response to a prompt got the same reward, and "
            "avspo/wasted_rollouts how many responses a group estimator (grpo, rloo, ...) would have learnt "
            "nothing from"
        )
    return notes


def observe(data: Any, algorithm: Any, adv_estimator: Any) -> None:
    """Count the batch verl's ``compute_advantage`` is about to estimate, as one call of the monitor's open step.

    data: verl's DataProto with ``token_level_rewards``, ``response_mask`` (B, L) and ``uid`` (B,), the
    rows the estimator gets (in the v1 trainer, each agent-loop session's final output for GRPO). A
    batch the monitor cannot read is a warning naming why; the estimator runs either way.
    """
    if not monitors(algorithm, adv_estimator):
        return
    try:
        if "uid" not in data.non_tensor_batch:
            raise ValueError("the batch has no uid column, so its rows cannot be grouped by prompt")
        live = monitor()
        live.configure(algorithm)
        live.avspo.step(
            data.batch["token_level_rewards"].sum(dim=-1), data.non_tensor_batch["uid"], live.config,
            response_mask=data.batch["response_mask"],
        )  # fmt: skip
    except (KeyError, ValueError) as err:
        logger.warning("%s skipped a batch of %d rows (its advantages are unaffected): %s", CONFIG_BLOCK, len(data), err)
