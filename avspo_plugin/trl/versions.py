"""The TRL releases the adapter supports; no TRL import.

AVSPOGRPOTrainer overrides GRPOTrainer's private ``_calculate_rewards`` and
``_generate_and_score_completions`` and reads its ``_metrics`` and ``_logs``. The advantage code
between the reward gathering and the per-process slice is the same (same syntax tree) in every
release from 1.6.0 to 1.16.0, and ``_calculate_rewards`` returns the rewards gathered over all
processes in each of them (tests/trl/test_releases.py checks both on each release's source);
1.16.0 is the release the test suite runs. 1.5 and older handle unscorable completions otherwise.
"""

from __future__ import annotations

import importlib
import logging

from ..host_versions import TRL

ADAPTER = "avspo_plugin.trl"

logger = logging.getLogger(__name__)


def installed_trl() -> str | None:
    """The installed TRL's version: its distribution metadata, else ``trl.__version__``; None when absent."""
    version = TRL.installed()
    if version is not None:
        return version
    try:
        return importlib.import_module("trl").__version__
    except ImportError:
        return None


def require_supported_trl() -> str:
    """The installed TRL's version, by host_versions' policy: refused (UnsupportedHostVersion) when missing or
    older than 1.6.0, a warning when newer than the tested range."""
    version = installed_trl()
    TRL.check(version, ADAPTER, logger)
    return version
