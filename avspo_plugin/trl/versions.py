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

from ..host_versions import SupportedReleases

TRL = SupportedReleases(name="TRL", distribution="trl", oldest="1.6.0", newest="1.16.0")
ADAPTER = "avspo_plugin.trl"


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
    """The installed TRL's version; :class:`~avspo_plugin.host_versions.UnsupportedHostVersion` outside TRL."""
    version = installed_trl()
    TRL.require(version, ADAPTER)
    return version
