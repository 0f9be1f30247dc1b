"""What ``python -m verl.trainer.main_ppo ARGS --cfg job`` prints, from verl's own entry point called in this process.

``verl.trainer.main_ppo.main`` is the hydra application the command runs; with ``--cfg job`` hydra composes the
config, prints it and returns without training. Called here, it saves a fresh interpreter per config (about
9 CPU-seconds of imports each on 2 cores); a test that needs a fresh interpreter for another reason runs one.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Sequence

from verl.trainer import main_ppo


def composed_job(arguments: Sequence[str]) -> str:
    """main_ppo's arguments (no interpreter, no ``-m``) -> the YAML that ``--cfg job`` prints."""
    printed, saved_argv, saved_cwd = io.StringIO(), sys.argv, os.getcwd()
    sys.argv = [main_ppo.__file__, *arguments, "--cfg", "job"]
    try:
        with contextlib.redirect_stdout(printed):
            main_ppo.main()
    finally:
        sys.argv = saved_argv
        os.chdir(saved_cwd)
    return printed.getvalue()
