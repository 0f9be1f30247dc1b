"""The ``avspo`` advantage estimator as verl calls it, its registration, and the end of a v1 step.

verl calls a registered estimator with (token_level_rewards, response_mask, index, config) and
keeps only the two returned tensors; the estimator's session (threshold state, warnings, pending
metrics) is this process's (:mod:`avspo_plugin.verl.state`), and the metrics wait there until the
trainer's logging hook (or a user's loop, :func:`pop_metrics`) collects them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import torch
from verl.trainer.ppo import core_algos

from ..names import ESTIMATOR
from .metric_routing import step_entropy
from .state import EstimatorSession, process_state

# verl.trainer.ppo.v1.replay_buffer.DAPO_FILTERED_REWARD_COUNTS_KEY: {shared value: groups} of the groups
# its group filtering evicted in the step, in the step's metrics until the trainer logs them.
DAPO_FILTERED_REWARD_COUNTS_KEY = "_dapo_filtered_reward_counts"


class RegistrationError(RuntimeError):
    """The name ``avspo`` is taken in verl's registry by an estimator that is not this package's."""


def session() -> EstimatorSession:
    """This process's AVSPO session (threshold state, warnings, pending metrics)."""
    return process_state().estimator


def compute_avspo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator ``avspo``: GRPO outcome advantages with ACR monitoring and virtual samples.

    token_level_rewards, response_mask: (B, L); index: (B,) uids; config: verl's ``algorithm`` block.
    Returns (advantages, returns), both (B, L) and equal, as verl's GRPO returns them.
    """
    if index is None:
        raise ValueError("the avspo estimator needs the batch's uid (index) to form groups; verl passed none")
    result = session().step(token_level_rewards, response_mask, index, config)
    return result.advantages, result.advantages


# Marks this package's estimator in verl's registry, whichever copy of the package registered it.
compute_avspo_outcome_advantage.avspo_estimator = True


def pop_metrics() -> dict[str, float]:
    """The metrics gathered since the last call, aggregated as one step, and clears them.

    Names are the core's (acr, threshold, ...) without the ``avspo/`` prefix the trainer hook adds;
    ``stagnation`` is included while that warning is enabled. For users with their own training loop.
    """
    return session().pop_metrics()


def register_estimator() -> None:
    """Register ``avspo`` in verl's registry, unless this package's estimator already holds the name.

    verl raises when a name is registered twice with different function objects, which happens
    when this file is imported as two module objects; any copy's estimator is equivalent (they
    share the process's session), so the first one stays.
    """
    registry = core_algos.ADV_ESTIMATOR_REGISTRY
    existing = registry.get(ESTIMATOR)
    if existing is None:
        core_algos.register_adv_est(ESTIMATOR)(compute_avspo_outcome_advantage)
    elif not getattr(existing, "avspo_estimator", False):
        raise RegistrationError(
            f"verl already has an advantage estimator named {ESTIMATOR!r}: "
            f"{getattr(existing, '__module__', '?')}.{getattr(existing, '__qualname__', existing)}, "
            "which is not avspo_plugin's; remove the other plugin or rename its estimator"
        )


def close_v1_step(original: Callable) -> Callable:
    """Wraps ``PPOTrainer.step``: one global step of the v1 trainer is one step of Eq. 12 (and of the warnings)."""

    @functools.wraps(original)
    def step(self, metrics, *args, **kwargs):
        batch = original(self, metrics, *args, **kwargs)
        state = process_state()
        sessions = state.sessions_of(self.config)
        # Groups verl's group filtering evicted never reach the estimator: counted here, so the
        # step's ACR and its split are over the groups as generated.
        filtered = metrics.get(DAPO_FILTERED_REWARD_COUNTS_KEY)
        if isinstance(filtered, Mapping) and filtered:
            for live in sessions:
                live.avspo.observe_filtered_groups(filtered, int(self.config.actor_rollout_ref.rollout.n))
        # However many parameter_sync_step updates the step took; it closes before verl saves its checkpoint.
        state.close_step(sessions, self.global_steps, step_entropy(metrics))
        return batch

    return step
