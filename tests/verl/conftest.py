"""Shared fixtures of the verl adapter tests: the plugin's sessions clean in each test, verl-shaped batches, and what a plain
`import verl` does in a fresh interpreter."""

import numpy as np
import pytest
import torch

import avspo_plugin.verl  # noqa: F401  (registers avspo and installs the hooks, as verl's entry point does)
from avspo_plugin.verl import hooks
from avspo_plugin.verl.plugin_process import this_process

# The tests here run verl's trainer methods on stand-in trainers, which skip verl's __init__ (where a run
# places the hooks its config uses): every hook is placed once for them. Which hooks a given config places
# is checked in fresh processes (tests/verl/test_hooks.py).
for _hook in hooks.HOOKS:
    _hook.place()


@pytest.fixture(autouse=True)
def clean_process():
    this_process().reset()
    yield
    this_process().reset()


@pytest.fixture
def make_batch():
    """scores (B,), uids (B,) -> a verl DataProto as the trainers hand it to compute_advantage."""
    from verl import DataProto

    def build(scores, uids, length=4, response_lengths=None):
        scores = torch.as_tensor(scores, dtype=torch.float32)
        batch_size = scores.shape[0]
        lengths = response_lengths if response_lengths is not None else [length] * batch_size
        mask = torch.zeros(batch_size, length)
        rewards = torch.zeros(batch_size, length)
        for row, n in enumerate(lengths):
            mask[row, :n] = 1.0
            if n:
                rewards[row, n - 1] = scores[row]  # outcome reward on the last response token
        return DataProto.from_dict(
            tensors={"token_level_rewards": rewards, "response_mask": mask},
            non_tensors={"uid": np.array(uids, dtype=object)},
        )

    return build
