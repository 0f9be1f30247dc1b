"""avspo_plugin: ACR (Advantage Collapse Rate) and AVSPO for verl, OpenRLHF and TRL.

What a user imports is in ``__all__`` here and in each adapter's package (docs/using/api.md).
"""

from .config import AVSPOConfig, ConfigError
from .core import (
    AVSPOResult,
    AVSPOSession,
    ThresholdState,
    aggregate_metrics,
    compute_group_advantages,
    compute_token_advantages,
)
from .names import ESTIMATOR, METRIC_PREFIX, STATE_FILE

__version__ = "0.1.0"

__all__ = [
    "ESTIMATOR",
    "METRIC_PREFIX",
    "STATE_FILE",
    "AVSPOConfig",
    "AVSPOResult",
    "AVSPOSession",
    "ConfigError",
    "ThresholdState",
    "aggregate_metrics",
    "compute_group_advantages",
    "compute_token_advantages",
]
