"""How the ``avspo/*`` metrics reach verl's tracker: merged into what the trainer logs by a hook on
``Tracking.log`` (the estimator's go through verl's estimator metrics channel instead where the installed verl has
it, ``patches/verl-estimator-metrics.patch``; the monitor's always take the hook, since the channel calls the
metrics function of the run's estimator, which is not the plugin's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from verl.trainer.ppo import core_algos

from ..names import ESTIMATOR
from . import checkpoint
from .plugin_process import HOST, CheckpointedSession, step_entropy, this_process

# Name of the upstream channel (patches/verl-estimator-metrics.patch) in verl's core_algos.
METRICS_CHANNEL = "register_adv_est_metrics"


def step_metrics(data: Mapping, step: int | None, live: CheckpointedSession | None = None) -> dict[str, float]:
    """The ``avspo/*`` metrics of the step being logged: the calls of ``live`` (default: the estimator's session)
    since the last log, folded into one step, with the warning flags (fed ``actor/entropy``). A checkpoint saved
    during this step (verl saves before it logs) gets the state again, with the step's entropy observed."""
    live = this_process().estimator if live is None else live
    entropy = step_entropy(data)
    live.session.close_step(step=step, entropy=entropy)
    metrics = live.session.pop_metrics(step=step, entropy=entropy)
    folder, live.unlogged_checkpoint = live.unlogged_checkpoint, None
    if folder is not None:
        checkpoint.write_state(folder, live.session.state_dict(), live.state_file)
    return HOST.logged(metrics)


def verl_metrics_channel() -> Callable | None:
    return getattr(core_algos, METRICS_CHANNEL, None)


def metrics_route() -> str:
    """How ``avspo/*`` metrics reach verl's tracker in this process."""
    if verl_metrics_channel() is not None:
        return f"verl's estimator metrics channel (core_algos.{METRICS_CHANNEL})"
    return "the Tracking.log hook"


def collect_for_verl(metrics: Mapping, global_step: int | None = None, **kwargs: Any) -> dict[str, float]:
    """The metrics function given to verl's channel: called once per logged step, before logging."""
    return step_metrics(metrics, global_step)


collect_for_verl.avspo_estimator = True


def use_metrics_channel(module) -> None:
    """Once verl's ``core_algos`` loads: give the estimator's metrics to verl's channel, where this verl has one."""
    channel = verl_metrics_channel()
    if channel is None:
        return
    registered = getattr(module, "ADV_ESTIMATOR_METRICS_REGISTRY", {}).get(ESTIMATOR)
    if not getattr(registered, "avspo_estimator", False):
        channel(ESTIMATOR)(collect_for_verl)


def log_with_avspo_metrics(original: Callable) -> Callable:
    """Wraps ``Tracking.log``: the step's ``avspo/*`` metrics merged into the trainer's log."""

    def log(self, data, step, *args, **kwargs):
        backend = kwargs.get("backend", args[0] if args else None)
        # A log to a subset of backends is not the step's main log: leave the metrics pending.
        if backend is None and isinstance(data, Mapping):
            extra = {
                **(step_metrics(data, step) if verl_metrics_channel() is None else {}),
                **step_metrics(data, step, this_process().monitor),
            }
            if extra:
                data = {**data, **extra}
        return original(self, data, step, *args, **kwargs)

    return log
