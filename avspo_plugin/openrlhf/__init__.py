"""OpenRLHF adapter: the ``avspo`` estimator in place of group_norm, called by ``patches/openrlhf-0.11.2-avspo.patch``
or installed by ``avspo openrlhf`` (:mod:`.launch`) in an unmodified OpenRLHF. Imports no OpenRLHF module.
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
