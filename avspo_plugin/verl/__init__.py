"""verl adapter: the ``avspo`` advantage estimator, registered in verl's registry on import.

verl loads this module in every process that imports verl, through the ``verl.plugins`` entry
point (verl >= 0.9) or ``VERL_USE_EXTERNAL_MODULES=avspo_plugin.verl`` (verl 0.6.1 - 0.8.x).
Importing it registers the estimator and installs the patches of :mod:`avspo_plugin.verl.patches`
(config check before the first rollout, ``avspo/*`` metrics in verl's tracker, state in verl's
checkpoints, the ACR monitor beside other estimators). See docs/verl.md.
"""

from ..names import ESTIMATOR
from .estimator import avspo_config_from_algorithm, compute_avspo_outcome_advantage, pop_metrics, session
from .monitor import monitor
from .patches import install as _install

_install()

__all__ = [
    "ESTIMATOR", "avspo_config_from_algorithm", "compute_avspo_outcome_advantage", "monitor", "pop_metrics", "session",
]  # fmt: skip
