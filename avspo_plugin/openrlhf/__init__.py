"""OpenRLHF adapter: the ``avspo`` advantage estimator in place of group_norm, and its metrics.

``patches/openrlhf-0.11.2-avspo.patch`` edits OpenRLHF's source to call it; ``avspo openrlhf`` (:mod:`.launch`) runs
an unmodified OpenRLHF and installs it in every Ray worker (:mod:`.worker_setup`). Imports no OpenRLHF module.
"""

from ..names import ESTIMATOR
from .args import DOTTED, FLAT, add_avspo_arguments, avspo_config_from_args, check_avspo_args
from .group_norm import (
    HOST,
    SESSION,
    checkpoint_state,
    entropy_collapse_flag,
    group_advantages,
    load_checkpoint_state,
    rollout_stats,
)

__all__ = [
    "DOTTED", "ESTIMATOR", "FLAT", "HOST", "SESSION", "add_avspo_arguments", "avspo_config_from_args",
    "check_avspo_args", "checkpoint_state", "entropy_collapse_flag", "group_advantages", "load_checkpoint_state",
    "rollout_stats",
]
