"""The ``avspo`` advantage estimator as verl calls it, and its registration; its session is this process's
(:mod:`avspo_plugin.verl.plugin_process`)."""

from __future__ import annotations

from typing import Any

import torch
from verl.trainer.ppo import core_algos

from ..config import warn_inert_keys
from ..core import AVSPOSession
from ..names import ESTIMATOR
from .plugin_process import HOST, this_process
from .run_config import avspo_config_from_algorithm, avspo_key_name, given_avspo_keys


class RegistrationError(RuntimeError):
    """The name ``avspo`` is taken in verl's registry by an estimator that is not this package's."""


def session() -> AVSPOSession:
    """This process's session of the verl estimator."""
    return this_process().estimator.session


def compute_avspo_outcome_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                                    config: Any = None, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator ``avspo``: GRPO outcome advantages with ACR monitoring and virtual samples.

    token_level_rewards, response_mask: (B, L); index: (B,) uids; config: verl's ``algorithm`` block.
    Returns (advantages, returns), both (B, L) and equal, as verl's GRPO returns them.
    """
    if index is None:
        raise ValueError("the avspo estimator needs the batch's uid (index) to form groups; verl passed none")
    avspo = avspo_config_from_algorithm(config)
    warn_inert_keys(avspo, given_avspo_keys(config), HOST.log, avspo_key_name)  # once per process
    this_process().warn_kl_in_reward(config)
    result = session().token_advantages(token_level_rewards, response_mask, index, avspo)
    return result.advantages, result.advantages


# Marks this package's estimator in verl's registry, whichever copy of the package registered it.
compute_avspo_outcome_advantage.avspo_estimator = True


def pop_metrics() -> dict[str, float]:
    """The metrics gathered since the last call as one step (names without ``avspo/``), cleared; for users with
    their own training loop."""
    return session().pop_metrics()


def register_estimator() -> None:
    """Register ``avspo`` in verl's registry, unless this package's estimator already holds the name (any copy of
    this package's: they share the process's session)."""
    existing = core_algos.ADV_ESTIMATOR_REGISTRY.get(ESTIMATOR)
    if existing is None:
        core_algos.register_adv_est(ESTIMATOR)(compute_avspo_outcome_advantage)
    elif not getattr(existing, "avspo_estimator", False):
        raise RegistrationError(
            f"verl already has an advantage estimator named {ESTIMATOR!r}: "
            f"{getattr(existing, '__module__', '?')}.{getattr(existing, '__qualname__', existing)}, "
            "which is not avspo_plugin's; remove the other plugin or rename its estimator"
        )
