"""The check of the installed TRL against host_versions.TRL (tests/trl/test_releases.py checks each release's source).
No TRL import."""

from __future__ import annotations

import importlib
import logging

from ..host_versions import TRL

ADAPTER = "avspo_plugin.trl"

logger = logging.getLogger(__name__)


def installed_trl() -> str | None:
    """The installed TRL's version: its distribution metadata, else ``trl.__version__``; None when absent."""
    try:
        return TRL.installed() or importlib.import_module("trl").__version__
    except ImportError:
        return None


def require_supported_trl() -> str:
    """The installed TRL's version, checked by host_versions' policy (UnsupportedHostVersion when refused)."""
    return TRL.check(installed_trl(), ADAPTER, logger)
