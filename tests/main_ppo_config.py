"""What ``python -m verl.trainer.main_ppo ARGS --cfg job`` prints, from verl's own entry point called in this process.

``verl.trainer.main_ppo.main`` is the hydra application the command runs; with ``--cfg job`` hydra composes the
config, prints it and returns without training; without it, main_ppo launches (where the launcher's checks stop a
bad config before Ray starts). Called here, it saves a fresh interpreter per call (about 8 CPU-seconds of imports
each on 2 cores, where composing takes about 1); a test that needs a fresh interpreter for another reason runs one.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from hydra.core.singleton import Singleton
from verl.trainer import main_ppo


def main_ppo_in_process(arguments: Sequence[str]) -> str:
    """``python -m verl.trainer.main_ppo ARGUMENTS`` (no interpreter, no ``-m``) run by verl's hydra application in
    this process; what it printed. An error raises, with its traceback, as with HYDRA_FULL_ERROR=1."""
    # hydra.main leaves its singletons set (HydraConfig holds the composed config, JobRuntime the job's name):
    # restored, so that later tests find hydra as it was.
    state = Singleton.get_state()
    printed = io.StringIO()
    try:
        with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
            patch.setattr(sys, "argv", [main_ppo.__file__, *arguments])  # as `python -m` sets it
            patch.setenv("HYDRA_FULL_ERROR", "1")
            patch.chdir(Path.cwd())  # back here afterwards, whatever hydra does
            main_ppo.main()
    finally:
        Singleton.set_state(state)
    return printed.getvalue()


def composed_job(arguments: Sequence[str]) -> str:
    """main_ppo's arguments -> the YAML that ``--cfg job`` prints."""
    return main_ppo_in_process([*arguments, "--cfg", "job"])
