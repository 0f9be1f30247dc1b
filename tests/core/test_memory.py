"""Memory of one core call: linear in the batch whatever the group sizes (docs/using/config.md, num_virtual).

Virtual rewards are stored packed, one value per virtual sample; a (groups x K_max) matrix held 4,097 x 4,096
values (134 MB) for the 12,288 rows below and raised the process's peak by about 580 MB."""

import runpy
from pathlib import Path

import numpy as np
import pytest
import torch

from avspo_plugin import AVSPOConfig, ThresholdState, compute_group_advantages

CHECK = runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "device_check.py"))
# The stated bound (docs/method/performance.md): one call's peak growth over the bytes of its rewards and labels.
PEAK_MULTIPLE = 32


def skewed_batch():
    """One group of 4,096 rows beside 4,096 pairs, every group collapsed: each gets K_j = G_j virtual samples."""
    labels = np.concatenate([np.zeros(4096, dtype=np.int64), 1 + np.repeat(np.arange(4096), 2)])
    return torch.zeros(labels.shape[0]), labels


def call(scores, labels):
    config = AVSPOConfig(threshold_mode="adaptive")  # acting: virtual rewards are what is measured
    return compute_group_advantages(scores, labels, config, ThresholdState.initial(config))


def test_virtual_rewards_are_stored_one_value_per_virtual_sample():
    result = call(*skewed_batch())
    assert result.num_virtual.tolist()[:3] == [4096, 2, 2] and int(result.num_virtual.sum()) == 12288
    assert result.virtual_rewards.shape == (12288,)  # not (4097, 4096)
    # Packed group after group: the big group's 4,096 stratified values, then each pair's (1, 0.5).
    assert result.virtual_rewards[:2].tolist() == [1.0, 1.0 - 1 / 4096] and result.virtual_rewards[-2:].tolist() == [1.0, 0.5]


def test_peak_memory_of_a_call_is_a_bounded_multiple_of_the_batch_with_skewed_groups():
    scores, labels = skewed_batch()
    call(scores, labels)  # the allocator's first pages
    try:
        peak = CHECK["host_peak_growth"](lambda: call(scores, labels))
    except OSError as err:
        pytest.skip(f"this kernel offers no reset of the resident high-water mark: {err}")
    assert peak <= PEAK_MULTIPLE * (scores.nbytes + labels.nbytes), peak
