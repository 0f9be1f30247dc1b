"""What a host's adapter declares once beside its :class:`~.session.AVSPOSession` (docs/method/hosts.md says the
whole contract; tests/host_contract.py is the test kit every adapter passes)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..names import METRIC_PREFIX
from .session import AVSPOSession


@dataclass(frozen=True)
class Host:
    """name: as ``avspo doctor --host`` names it; log: the logger every session of the host warns to;
    entropy_metric: the host's name of the policy's mean token entropy (for the entropy-collapse warning);
    checkpoint_folder: step N's checkpoint folder, a format of ``{step}`` (None where the host's checkpoint call
    carries the state); state_name: the state's file in that folder, or its key in what that call carries.
    """

    name: str
    log: logging.Logger
    entropy_metric: str
    checkpoint_folder: str | None
    state_name: str

    def new_session(self, metric_names: tuple[str, ...] | None = None) -> AVSPOSession:
        """A session warning to the host's logger (metric_names: as :class:`AVSPOSession` takes them)."""
        return AVSPOSession(log=self.log, metric_names=metric_names)

    def logged(self, metrics: Mapping[str, float]) -> dict[str, float]:
        """The session's ``metrics`` under the names the host logs them: ``avspo/<name>``."""
        return {METRIC_PREFIX + name: value for name, value in metrics.items()}

    def step_folder(self, checkpoint_dir: str, step: int) -> str:
        """Step ``step``'s checkpoint folder in ``checkpoint_dir`` (a host with a checkpoint_folder)."""
        return os.path.join(checkpoint_dir, self.checkpoint_folder.format(step=step))
