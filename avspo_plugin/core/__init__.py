"""Framework-free AVSPO/ACR: pure tensor functions and the per-process session; no host framework imported."""

from .advantage import AVSPOResult, compute_group_advantages, compute_token_advantages
from .metrics import METRIC_HELP, METRIC_REDUCTIONS, aggregate_metrics
from .selection import SELECTION_METRIC_HELP, PromptSelector
from .session import AVSPOSession
from .threshold import ThresholdState

__all__ = [
    "AVSPOResult",
    "AVSPOSession",
    "METRIC_HELP",
    "METRIC_REDUCTIONS",
    "PromptSelector",
    "SELECTION_METRIC_HELP",
    "ThresholdState",
    "aggregate_metrics",
    "compute_group_advantages",
    "compute_token_advantages",
]
