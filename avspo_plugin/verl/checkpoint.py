"""The plugin's state beside verl's checkpoint: ``global_step_<N>/avspo_state.json`` and its siblings.

The hooks on the trainers' ``_save_checkpoint`` and ``_load_checkpoint`` write and read, in the step's folder, one
small JSON file per session with its ``state_dict()`` (tau, the previous batch reward J, the step counter t, the
warning streaks): ``avspo_state.json`` for the estimator, ``avspo_monitor_state.json`` for the monitor.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from ..core.session import checked_state
from ..names import STATE_FILE
from ..state_files import load_json, write_json
from .launch_guards import refuse_unsupported_trainer
from .plugin_process import HOST, this_process

logger = logging.getLogger("avspo_plugin.verl")


def write_state(step_folder: str, state: dict[str, Any], file_name: str = STATE_FILE) -> str:
    """Write ``state`` to ``step_folder/file_name`` (atomically, flushed to disk) and return the path."""
    return write_json(os.path.join(step_folder, file_name), state, indent=1)


def describe_state(state: dict[str, Any]) -> str:
    """One line of a state for the log: tau, J_{t-1}, t and the warning streaks."""
    threshold = state.get("threshold") or {}
    streaks = ", ".join(f"{name} streak {value['streak']}" for name, value in state.get("warnings", {}).items())
    return (
        f"tau={threshold.get('tau')}, previous reward mean={threshold.get('prev_reward_mean')}, "
        f"threshold step t={threshold.get('step')}, {streaks}, logged steps {state.get('logged_steps')}"
    )


def read_state(step_folder: str, file_name: str = STATE_FILE) -> dict[str, Any] | None:
    """The state saved as ``file_name`` in ``step_folder``, or None (with a warning) when the checkpoint has none.
    A damaged file is a StateFileError naming it and what to do."""
    path = os.path.join(step_folder, file_name)
    if not os.path.exists(path):
        logger.warning(
            "resuming from %s, which has no %s (a checkpoint written without the avspo plugin's hooks, or with "
            "another estimator or monitor setting): the adaptive threshold starts over from "
            "algorithm.avspo.threshold_init and the warning streaks from 0", step_folder, file_name,
        )
        return None
    remedy = (
        f"To start the AVSPO state afresh, delete {path} (the adaptive threshold restarts from "
        "algorithm.avspo.threshold_init, the warning streaks from 0); or resume from an earlier checkpoint "
        "(trainer.resume_mode=resume_path trainer.resume_from_path=<its global_step_N folder>)."
    )
    return dict(load_json(path, checked_state, remedy))


def save_with_state(original: Callable) -> Callable:
    """Wraps the trainers' ``_save_checkpoint``: the step closed and the plugin's state written into the step's
    folder before verl records the checkpoint as the latest (a run killed in between resumes from the previous one)."""

    def _save_checkpoint(self, *args, **kwargs):
        folder = HOST.step_folder(self.config.trainer.default_local_dir, self.global_steps)
        for live in this_process().sessions_of(self.config):
            live.session.close_step(step=self.global_steps)
            path = write_state(folder, live.session.state_dict(), live.state_file)
            live.unlogged_checkpoint = folder
            logger.info("AVSPO state saved to %s", path)
        return original(self, *args, **kwargs)

    return _save_checkpoint


def load_with_state(original: Callable) -> Callable:
    """Wraps the trainers' ``_load_checkpoint``: on resume, the plugin's state read back from the step's folder."""

    def _load_checkpoint(self, *args, **kwargs):
        refuse_unsupported_trainer(self.config)  # FullyAsyncTrainer inherits this method, not _save_checkpoint's hook
        result = original(self, *args, **kwargs)
        if not getattr(self, "global_steps", 0):  # a fresh start: nothing to restore
            return result
        trainer = self.config.trainer
        resumed = (trainer.resume_from_path if trainer.resume_mode == "resume_path"
                   else HOST.step_folder(trainer.default_local_dir, self.global_steps))
        folder = os.path.abspath(resumed)
        for live in this_process().sessions_of(self.config):
            saved = read_state(folder, live.state_file)
            if saved is not None:
                live.session.load_state_dict(saved, source=os.path.join(folder, live.state_file))
                logger.info("AVSPO state restored from %s: %s", folder, describe_state(live.session.state_dict()))
        return result

    return _load_checkpoint
