"""The TRL releases the adapter supports: 1.6.0 to 1.16.0, where the advantage code between the reward gathering and
the per-process slice is the same and ``_calculate_rewards`` returns the gathered rewards (tests/trl/test_releases.py
checks both on each release's source). No TRL import.
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
