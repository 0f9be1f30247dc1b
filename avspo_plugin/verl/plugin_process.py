"""What the plugin keeps in one verl process, in one object (:func:`this_process`), and the v1 trainer's step hook.

verl keeps only the two tensors an estimator returns, so the estimator's session (threshold state, early warnings,
metrics not yet logged) lives in the process that computes advantages until the trainer's logging hook collects its
metrics; the ACR monitor's likewise. Every copy of this package loaded in the process gets the same
:class:`PluginProcess`. A session's step closes at the end of the v1 trainer's global step, before a checkpoint is
saved, and when the step is logged (the legacy trainer's step has no other end the plugin can see).
"""

from __future__ import annotations

import logging
import numbers
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core import AVSPOSession
from ..core.host import Host
from ..core.metrics import MONITOR_METRICS
from ..import_patching import process_wide
from ..names import MONITOR_STATE_FILE, PLUGIN_MODULE, STATE_FILE
from .run_config import config_entry, uses_avspo, uses_monitor

logger = logging.getLogger("avspo_plugin.verl")
# As verl's own modules do: INFO (a restored state, the registration) shows in verl's default log.
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))

# verl's side of the host contract (docs/method/hosts.md): its trainers log the policy's entropy as actor/entropy and
# write step N's checkpoint into global_step_<N> of trainer.default_local_dir.
HOST = Host(name="verl", log=logger, entropy_metric="actor/entropy", checkpoint_folder="global_step_{step}",
            state_name=STATE_FILE)

# verl.trainer.ppo.v1.replay_buffer.DAPO_FILTERED_REWARD_COUNTS_KEY: {shared value: groups} of the groups
# its group filtering evicted in the step, in the step's metrics until the trainer logs them.
DAPO_FILTERED_REWARD_COUNTS_KEY = "_dapo_filtered_reward_counts"


@dataclass
class CheckpointedSession:
    """A session of the process and its state file in each ``global_step_<N>`` folder. unlogged_checkpoint: the
    folder of a checkpoint saved in the open step before it was logged (verl saves, then logs), written again then."""

    session: AVSPOSession
    state_file: str
    unlogged_checkpoint: str | None = None


class PluginProcess:
    """The plugin's sessions in one verl process: the estimator's (``algorithm.avspo``) and the ACR monitor's
    (``algorithm.avspo_monitor``)."""

    def __init__(self) -> None:
        self.estimator = CheckpointedSession(HOST.new_session(), HOST.state_name)
        self.monitor = CheckpointedSession(HOST.new_session(metric_names=MONITOR_METRICS), MONITOR_STATE_FILE)
        self.kl_in_reward_warned = False

    def reset(self) -> None:
        """Forget every session's config, state and metrics, and what was said (a new run in this process)."""
        self.__init__()

    def warn_kl_in_reward(self, algorithm: Any) -> None:
        """Once per process: rewards with verl's KL penalty (``algorithm.use_kl_in_reward``) change what ACR measures."""
        if config_entry(algorithm, "use_kl_in_reward") is True and not self.kl_in_reward_warned:
            self.kl_in_reward_warned = True
            logger.warning(
                "algorithm.use_kl_in_reward=True: the rewards the advantage estimator receives include the KL "
                "penalty, so ACR measures rewards with KL (a group whose task rewards are all equal is not "
                "counted as collapsed unless its KL terms are equal too) and virtual samples are placed "
                "against KL-shaped rewards. Use actor_rollout_ref.actor.use_kl_loss instead to measure "
                "ACR on the task rewards."
            )

    def sessions_of(self, config: Any) -> list[CheckpointedSession]:
        """The sessions a full verl config feeds: the estimator's (avspo), the monitor's (another estimator)."""
        return [live for live, used in ((self.estimator, uses_avspo(config)), (self.monitor, uses_monitor(config))) if used]


def this_process() -> PluginProcess:
    return process_wide(PLUGIN_MODULE, PluginProcess)


def step_entropy(metrics: Mapping) -> float | None:
    """The step's ``actor/entropy`` among verl's metrics, as a float (None when absent or not a number)."""
    value = metrics.get(HOST.entropy_metric)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    try:  # 0-d tensors and numpy scalars
        return float(value.item())
    except (AttributeError, TypeError, ValueError, RuntimeError):
        return None


def close_v1_step(original: Callable) -> Callable:
    """Wraps ``PPOTrainer.step``: one global step of the v1 trainer (however many parameter_sync_step updates it
    took) is one step of Eq. 12 and of the warnings; it closes before verl saves its checkpoint."""

    def step(self, metrics, *args, **kwargs):
        batch = original(self, metrics, *args, **kwargs)
        # Groups verl's group filtering evicted never reach the estimator: counted here, so the
        # step's ACR and its split are over the groups as generated.
        filtered = metrics.get(DAPO_FILTERED_REWARD_COUNTS_KEY)
        for live in this_process().sessions_of(self.config):
            if isinstance(filtered, Mapping) and filtered:
                live.session.observe_filtered_groups(filtered, int(self.config.actor_rollout_ref.rollout.n))
            live.session.close_step(step=self.global_steps, entropy=step_entropy(metrics))
        return batch

    return step
