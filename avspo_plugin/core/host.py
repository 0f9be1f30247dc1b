"""The host contract: what a training framework (a host) gives the AVSPO session and what it gets back.

Each call of the host's advantage step gives :class:`~.session.AVSPOSession` the rewards (B,) or (B, L) with their
response mask, a group label per row (B,), a validity mask where some rows hold no reward, and the config in force
(``group_advantages``, ``token_advantages``, ``step_with``); it gets back the advantages in the rewards' shape and dtype
(:class:`~.advantage.AVSPOResult`). The host's step boundary is ``close_step(step, entropy)``: one step of Eq. 12
however many calls the step took. Its log gets ``pop_metrics(step, entropy)`` named as :meth:`Host.logged` names
them; its checkpoints hold ``state_dict()`` and give it back to ``load_state_dict``. The rest, fixed per host, its
adapter declares once in a :class:`Host`. docs/method/hosts.md says it in full, with a new host's checklist;
tests/host_contract.py is the test kit every adapter passes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..names import METRIC_PREFIX
from .session import AVSPOSession


@dataclass(frozen=True)
class Host:
    """What one host's adapter declares once.

    name: the host, as ``avspo doctor --host`` names it; log: the adapter's logger, which every session of the host
    warns to (users filter the plugin's warnings by it); entropy_metric: the name under which the host logs the
    policy's mean token entropy, which feeds the entropy-collapse warning; checkpoint_folder: step N's checkpoint
    folder in the run's checkpoint directory, a format of ``{step}`` (None where the host's own checkpoint call
    carries the state); state_name: the session state's file in that folder, or its key in what the host's
    checkpoint call carries.
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
        """Step ``step``'s checkpoint folder in ``checkpoint_dir``."""
        if self.checkpoint_folder is None:
            raise ValueError(
                f"{self.name} keeps the AVSPO state in what its checkpoint call carries ({self.state_name!r}), "
                "not in a folder of its own"
            )
        return os.path.join(checkpoint_dir, self.checkpoint_folder.format(step=step))
