"""AVSPO in place of OpenRLHF's group_norm ((r - mean) / (std + 1e-9) per row of (prompts, n_samples_per_prompt)),
for the patched OpenRLHF and the runtime route alike; the trainer's process keeps one :data:`SESSION`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ..core.advantage import reward_range_problem
from ..core.host import Host
from ..launch import announce
from .args import ArgLayout, avspo_config_from_args, layout_of, read_arg

logger = logging.getLogger(__name__)

# OpenRLHF's side of the host contract (docs/method/hosts.md): its actor reports the policy's mean token entropy as
# entropy_loss in the status dict, and its checkpoints carry the avspo state as client_states["avspo"].
HOST = Host(name="openrlhf", log=logger, entropy_metric="entropy_loss", checkpoint_folder=None, state_name="avspo")

SESSION = HOST.new_session()


def group_advantages(rewards: torch.Tensor, args: Any) -> torch.Tensor:
    """The avspo estimator in place of group_norm: rewards (prompts, n_samples_per_prompt) -> advantages, same shape
    and dtype (rows not augmented get group_norm's); the avspo options are read from OpenRLHF's ``args``."""
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ValueError(
            f"avspo needs rewards of shape (prompts, n_samples_per_prompt) with n_samples_per_prompt >= 2, "
            f"got shape {tuple(rewards.shape)}"
        )
    config = avspo_config_from_args(args)
    prompts, samples = rewards.shape
    layout = layout_of(args)
    flat = rewards.detach().reshape(-1).to(torch.float64)
    problem = reward_range_problem(
        flat, torch.isfinite(flat), config, lambda row: f"prompt row {row // samples}, sample {row % samples}",
        tuple(layout.flag(layout.avspo_dest(key)) for key in ("reward_low", "reward_high", "threshold_mode")),
        lambda row: f"; the reward is {_reward_source(args, layout)}, and an overlong penalty lowers its lowest value "
        "by up to its factor",
    )  # fmt: skip
    if problem is not None:
        raise ValueError(problem)
    announce(config, prompts, samples, "OpenRLHF")
    # Group labels name the prompt's row in the rollout batch, as errors about a reward show them.
    index = np.array([f"prompt {row}" for row in range(prompts) for _ in range(samples)], dtype=object)
    advantages = SESSION.group_advantages(rewards.reshape(-1), index, config).advantages.reshape(prompts, samples)
    # One rollout batch is one step of Eq. 12 (OpenRLHF computes its advantages in one call).
    SESSION.close_step()
    return advantages


def _reward_source(args: Any, layout: ArgLayout) -> str:
    """Where OpenRLHF's reward comes from, in the run's own flags."""
    remote = read_arg(args, layout.reward_remote_url, None)
    model = read_arg(args, layout.reward_model, None)
    if remote:
        source = f"what {layout.flag(layout.reward_remote_url)} {remote} returned"
    elif model:
        source = f"the score of the reward model {layout.flag(layout.reward_model)} {model}"
    else:
        source = "OpenRLHF's reward"
    shaping = [
        f"{layout.flag(name)} {read_arg(args, name, None)}"
        for name in (layout.overlong_buffer_len, layout.stop_properly_penalty_coef)
        if read_arg(args, name, None) is not None
    ]
    return source + (f", after OpenRLHF's length penalties ({', '.join(shaping)})" if shaping else "")


def rollout_stats() -> dict[str, float]:
    """The ``avspo/*`` metrics of the batch (or batches) since the last call, for OpenRLHF's status dict."""
    return HOST.logged(SESSION.pop_metrics())


def entropy_collapse_flag(logs: Mapping[str, Any]) -> dict[str, float]:
    """``avspo/entropy_collapse`` from the step's logged policy entropy; {} when it was not logged (OpenRLHF's actor
    logs it as ``entropy_loss`` when --actor.entropy_coef is set, 0 included)."""
    entropy = logs.get(HOST.entropy_metric)
    if entropy is None:
        return {}
    return HOST.logged(SESSION.observe_entropy(float(entropy)))


def checkpoint_state() -> dict[str, Any]:
    """What OpenRLHF's checkpoint client_states carry for avspo; {} outside an avspo run."""
    state = SESSION.state_dict()
    return {} if state["threshold"] is None else {HOST.state_name: state}


def load_checkpoint_state(client_states: Mapping[str, Any] | None) -> None:
    """Resume the threshold state from a checkpoint's client_states (a no-op when it holds none)."""
    if client_states and HOST.state_name in client_states:
        SESSION.load_state_dict(client_states[HOST.state_name],
                                source=f"OpenRLHF's checkpoint (its client_states[{HOST.state_name!r}])")
        logger.info("avspo: state resumed from the checkpoint: %s", client_states[HOST.state_name])
