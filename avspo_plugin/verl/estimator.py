"""The ``avspo`` advantage estimator as verl calls it, and the per-process state behind it.

verl calls a registered estimator with (token_level_rewards, response_mask, index, config)
and keeps only the two returned tensors, so the threshold state lives here, in
the process that computes advantages, and metrics wait here until the trainer's
logging hook (or a user's loop) collects them with :func:`pop_metrics`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

import torch
from omegaconf import OmegaConf
from verl.trainer.ppo import core_algos

from ..config import AVSPOConfig, ConfigError
from ..core import AVSPOResult, AVSPOSession, ThresholdState
from ..core.early_warnings import WARNING_FLAGS
from ..names import STATE_FILE

CONFIG_BLOCK = "algorithm.avspo"
# The process's one session hangs on verl's core_algos module, which every copy of this package
# imported in the process (two module objects of the same file, e.g. under two sys.path entries) sees.
_SESSION_ATTR = "_avspo_plugin_session"

logger = logging.getLogger("avspo_plugin.verl")
# As verl's own modules do: INFO (a restored state, the registration) shows in verl's default log.
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))


def avspo_config_from_algorithm(algorithm: Any) -> AVSPOConfig:
    """The AVSPO config of verl's ``algorithm`` block: ``algorithm.avspo.*`` plus ``norm_adv_by_std_in_grpo``.

    A missing block means the defaults. ``algorithm.norm_adv_by_std_in_grpo=False`` turns the std
    division off (Dr. GRPO), as it does for verl's own GRPO. Raises ConfigError naming the key.
    """
    block = to_plain(config_entry(algorithm, "avspo"))
    if block is not None and not isinstance(block, Mapping):
        raise ConfigError(
            f"{CONFIG_BLOCK} must be a block of keys ({', '.join(AVSPOConfig.keys())}), got {block!r}"
        )
    config = AVSPOConfig.from_mapping(block, where=CONFIG_BLOCK)
    if config_entry(algorithm, "norm_adv_by_std_in_grpo") is False and config.norm_by_std:
        config = config.replace(norm_by_std=False)
    return config


class EstimatorSession:
    """One process's :class:`AVSPOSession`, fed from verl's ``algorithm`` block.

    read_config: the AVSPO settings of an ``algorithm`` block (the estimator's ``algorithm.avspo``, or the
    monitor's); state_file: its state's file in each checkpoint folder; metric_names: the core metrics it
    logs (None: all; the early-warning flags always).
    """

    def __init__(
        self,
        read_config: Callable[[Any], AVSPOConfig] = avspo_config_from_algorithm,
        state_file: str = STATE_FILE,
        metric_names: tuple[str, ...] | None = None,
    ) -> None:
        self.read_config = read_config
        self.state_file = state_file
        self.metric_names = metric_names
        self._lock = threading.RLock()
        self.avspo = AVSPOSession(log=logger)
        self._kl_warned = False
        self._checkpoint_folder: str | None = None

    @property
    def config(self) -> AVSPOConfig | None:
        return self.avspo.config

    @property
    def state(self) -> ThresholdState | None:
        return self.avspo.state

    def reset(self) -> None:
        with self._lock:
            self.avspo.reset()
            self._kl_warned = False
            self._checkpoint_folder = None

    def configure(self, algorithm: Any) -> AVSPOConfig:
        """Read and check verl's ``algorithm`` block and put its AVSPO config in force; returns it.

        The adaptive threshold starts over only when its own settings change between two configs;
        a state restored from a checkpoint is kept.
        """
        config = self.read_config(algorithm)
        with self._lock:
            if config_entry(algorithm, "use_kl_in_reward") is True and not self._kl_warned:
                self._kl_warned = True
                logger.warning(
                    "algorithm.use_kl_in_reward=True: the rewards the advantage estimator receives include the KL "
                    "penalty, so ACR measures rewards with KL (a group whose task rewards are all equal is not "
                    "counted as collapsed unless its KL terms are equal too) and virtual samples are placed "
                    "against KL-shaped rewards. Use actor_rollout_ref.actor.use_kl_loss instead to measure "
                    "ACR on the task rewards."
                )
            self.avspo.configure(config)
        return config

    def step(
        self, token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any, algorithm: Any
    ) -> AVSPOResult:
        with self._lock:
            config = self.configure(algorithm)
            return self.avspo.step_tokens(token_level_rewards, response_mask, index, config)

    def close_step(self, step: int | None = None, entropy: float | None = None) -> None:
        """End the trainer's step: Eq. 12 once over its calls (see :meth:`AVSPOSession.close_step`)."""
        self.avspo.close_step(step=step, entropy=entropy)

    def pop_metrics(self, step: int | None = None, entropy: float | None = None) -> dict[str, float]:
        """The metrics of the calls since the last pop, folded into one step, plus warning flags
        (see :meth:`AVSPOSession.pop_metrics`); only ``metric_names`` of the core's."""
        metrics = self.avspo.pop_metrics(step=step, entropy=entropy)
        if self.metric_names is None:
            return metrics
        return {name: value for name, value in metrics.items() if name in self.metric_names or name in WARNING_FLAGS}

    def await_log(self, folder: str) -> None:
        """A checkpoint of the open step was saved in ``folder`` before the step was logged."""
        with self._lock:
            self._checkpoint_folder = folder

    def take_checkpoint_folder(self) -> str | None:
        """The folder saved since the last log, to hold the state once the step is logged; cleared."""
        with self._lock:
            folder, self._checkpoint_folder = self._checkpoint_folder, None
            return folder

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps: the threshold state (tau, J_{t-1}, t) and the warning streaks."""
        return self.avspo.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.avspo.load_state_dict(state)


def session() -> EstimatorSession:
    """This process's AVSPO session (threshold state, warnings, pending metrics), created on first use."""
    live = getattr(core_algos, _SESSION_ATTR, None)
    if live is None:
        live = EstimatorSession()
        setattr(core_algos, _SESSION_ATTR, live)
    return live


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


def config_entry(node: Any, key: str) -> Any:
    """``node``'s ``key`` in a verl config (DictConfig, dict or dataclass); None where either is missing."""
    if node is None:
        return None
    getter = getattr(node, "get", None)
    return getter(key) if getter is not None else getattr(node, key, None)


def to_plain(block: Any) -> Any:
    """A verl config block as plain Python containers (anything else as it is)."""
    return OmegaConf.to_container(block, resolve=True) if OmegaConf.is_config(block) else block
