"""The check of the installed OpenRLHF against host_versions.OPENRLHF (tests/openrlhf/test_releases.py checks each
release's source for the structure :mod:`.worker_setup` wraps)."""

from __future__ import annotations

import logging

from ..host_versions import OPENRLHF

ADAPTER = "the avspo runtime route (avspo_plugin.openrlhf)"

logger = logging.getLogger(__name__)


def check_openrlhf() -> str | None:
    """The installed OpenRLHF's version, checked by host_versions' policy; None, with a warning, for an OpenRLHF
    without distribution metadata (a source tree on PYTHONPATH: :mod:`.worker_setup`'s checks still apply)."""
    version = OPENRLHF.installed()
    if version is None:
        logger.warning("the installed OpenRLHF has no distribution metadata, so its version cannot be checked; "
                       "%s supports %s", ADAPTER, OPENRLHF)
        return None
    return OPENRLHF.check(version, ADAPTER, logger)
