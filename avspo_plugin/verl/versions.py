"""The check of the imported verl against host_versions.VERL."""

from __future__ import annotations

import logging

import verl

from ..host_versions import VERL, UnsupportedHostVersion
from ..names import PLUGIN_MODULE

logger = logging.getLogger("avspo_plugin.verl")

KNOWN_GOOD_VERL = VERL.tested  # what the test suite or compat/check_verl.sh exercised


def verl_version() -> str:
    """The version of the verl this process imported (a source checkout on PYTHONPATH included)."""
    return str(getattr(verl, "__version__", None) or "(unknown)")


def untested_verl(version: str) -> str | None:
    """Why ``version`` of verl is outside the tested range (None when inside, or known broken)."""
    try:
        return None if VERL.known_broken(version) else VERL.untested(version)
    except ValueError:
        return f"verl {version} is not a version number; the plugin is tested with verl {VERL.tested_range()}"


def refused_verl(version: str) -> str | None:
    """Why ``version`` of verl is refused (older than host_versions.VERL.broken_below), None when it is not."""
    try:
        VERL.require(version, PLUGIN_MODULE)
    except UnsupportedHostVersion as err:
        return str(err)
    except ValueError:  # not a version number: untested_verl says so
        return None
    return None


_warned_versions: set[str] = set()


def check_verl_release() -> None:
    """Raise UnsupportedHostVersion for a known-broken verl; warn once per process about an untested one."""
    version = verl_version()
    refused = refused_verl(version)
    if refused is not None:
        raise UnsupportedHostVersion(refused)
    problem = untested_verl(version)
    if problem is not None and version not in _warned_versions:
        _warned_versions.add(version)
        logger.warning("avspo_plugin: %s", problem)
