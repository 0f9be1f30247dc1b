"""The OpenRLHF releases the runtime route supports, and the check of the installed one; no OpenRLHF import.

The runtime route wraps ``RemoteExperienceMaker.compute_advantages_and_returns`` and three methods of
``BasePPOTrainer`` (:mod:`.worker_setup`). Releases 0.9.9 to 0.11.2 have the structure the wrapper relies on
(tests/openrlhf/test_releases.py checks each release's source; 0.9.8 computes advantages otherwise);
0.11.2 and 0.10.1 run end to end in the test suite.
"""

from __future__ import annotations

import logging

from ..host_versions import OPENRLHF

ADAPTER = "the avspo runtime route (avspo_plugin.openrlhf)"

logger = logging.getLogger(__name__)


def check_openrlhf() -> str | None:
    """The installed OpenRLHF's version, by host_versions' policy: refused (UnsupportedHostVersion) when older than
    0.9.9, a warning when newer than the tested range.

    An OpenRLHF imported from a folder without distribution metadata (a source tree on PYTHONPATH) has
    no version to read: that is a warning, and the method checks of :mod:`.worker_setup` still apply.
    """
    version = OPENRLHF.installed()
    if version is None:
        logger.warning(
            "the installed OpenRLHF has no distribution metadata, so its version cannot be checked; %s supports %s",
            ADAPTER,
            OPENRLHF,
        )
        return None
    OPENRLHF.check(version, ADAPTER, logger)
    return version
