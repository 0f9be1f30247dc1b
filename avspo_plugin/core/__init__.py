"""Framework-free AVSPO/ACR: pure tensor functions and the per-process session; no host framework imported."""

from .advantage import AVSPOResult, compute_group_advantages, compute_token_advantages
from .metrics import aggregate_metrics
from .session import AVSPOSession
from .threshold import ThresholdState

__all__ = [
    "AVSPOResult",
    "AVSPOSession",
    "ThresholdState",
    "aggregate_metrics",
    "compute_group_advantages",
    "compute_token_advantages",
]
