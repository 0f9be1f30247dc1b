"""Everything the plugin keeps in one verl process, in one object: :func:`process_state`.

verl calls a registered estimator with (token_level_rewards, response_mask, index, config) and
keeps only the two returned tensors, so the threshold state lives in the process that computes
advantages, and metrics wait there until the trainer's logging hook (or a user's loop) collects
them. One :class:`ProcessState` per process holds the estimator's session, the monitor's, and the
prompt selection of the process's trainer; every copy of this package loaded in the process (the
same files as two module objects) gets the same one. A trainer's step closes in one place,
:meth:`ProcessState.close_step`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import torch

from ..config import AVSPOConfig
from ..core import AVSPOResult, AVSPOSession, ThresholdState
from ..core.early_warnings import WARNING_FLAGS
from ..core.metrics import MONITOR_METRICS
from ..import_patching import process_wide
from ..names import MONITOR_STATE_FILE, PLUGIN_MODULE, STATE_FILE
from .run_config import avspo_config_from_algorithm, config_entry, monitor_avspo_config, uses_avspo, uses_monitor

if TYPE_CHECKING:
    from .selection import SelectionRun

logger = logging.getLogger("avspo_plugin.verl")
# As verl's own modules do: INFO (a restored state, the registration) shows in verl's default log.
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))


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


class ProcessState:
    """The plugin's state in one verl process.

    estimator: the ``avspo`` estimator's session (``algorithm.avspo``); monitor: the ACR monitor's beside
    another estimator (``algorithm.avspo_monitor``); selection: the prompt selection of this process's
    trainer, None until a trainer with ``algorithm.avspo_selection.enable=true`` builds its dataloader.
    """

    def __init__(self) -> None:
        self.estimator = EstimatorSession()
        self.monitor = EstimatorSession(monitor_avspo_config, MONITOR_STATE_FILE, MONITOR_METRICS)
        self.selection: SelectionRun | None = None

    def sessions_of(self, config: Any) -> list[EstimatorSession]:
        """The sessions a full verl config feeds: the estimator's (avspo), the monitor's (another estimator)."""
        return [live for live, used in ((self.estimator, uses_avspo(config)), (self.monitor, uses_monitor(config))) if used]

    def close_step(self, sessions: Iterable[EstimatorSession], step: int | None, entropy: float | None = None) -> None:
        """End the trainer's step ``step`` in each of ``sessions``: one step of Eq. 12 over its calls, the
        warnings fed (with the step's ``actor/entropy`` when known); a session with no open step is left as it is.

        verl reaches it at the end of the v1 trainer's global step (however many mini-batch updates it
        took), before a checkpoint is saved (so the state saved holds the step), and when the step is
        logged (the legacy trainer's step has no other end the plugin can see).
        """
        for live in sessions:
            live.avspo.close_step(step=step, entropy=entropy)


def process_state() -> ProcessState:
    """This process's :class:`ProcessState`, created on first use."""
    return process_wide(PLUGIN_MODULE, ProcessState)
