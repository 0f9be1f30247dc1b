"""Plain-Python references and shared cases for the core's tests."""

import statistics

import numpy as np
import torch

from avspo_plugin import AVSPOConfig, ThresholdState, compute_group_advantages


def run(scores, labels, state=None, valid=None, **config):
    """One core call on plain Python rewards; returns the AVSPOResult."""
    cfg = AVSPOConfig(**config)
    scores = torch.as_tensor(scores, dtype=torch.float32)
    labels = np.asarray(labels, dtype=object)
    return compute_group_advantages(scores, labels, cfg, state or ThresholdState.initial(cfg), valid=valid)


def reference_advantages(real, virtual, epsilon=1e-6, population=False, norm_by_std=True):
    """Eq. 14 computed the plain way, over the explicit list of G real and K virtual rewards."""
    values = list(real) + list(virtual)
    mean = statistics.fmean(values)
    std = statistics.pstdev(values) if population else statistics.stdev(values)
    if not norm_by_std:
        return [r - mean for r in real]
    return [(r - mean) / (std + epsilon) for r in real]


def three_groups():
    """An all-fail, an all-pass and a mixed group of four: ACR = 2/3, so Eq. 9 gives K = ceil(4 * sqrt(2/3)) = 4."""
    scores = [0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 0, 1]
    labels = ["fail"] * 4 + ["pass"] * 4 + ["mixed"] * 4
    return scores, labels
