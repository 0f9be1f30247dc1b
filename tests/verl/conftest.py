"""Shared fixtures of the verl adapter tests: a clean AVSPO session per test, verl-shaped batches, and what a plain
`import verl` does in a fresh interpreter."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import avspo_plugin.verl  # noqa: F401  (registers avspo and installs the hooks, as verl's entry point does)
from avspo_plugin.verl import hooks, session

# The tests here run verl's trainer methods on stand-in trainers, which skip verl's __init__ (where a run
# places the hooks its config uses): every hook is placed once for them. Which hooks a given config places
# is checked in fresh processes (tests/verl/test_patches.py).
for _hook in hooks.HOOKS:
    _hook.place()


@pytest.fixture(autouse=True)
def clean_session():
    session().reset()
    yield
    session().reset()


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


# A fresh interpreter, no VERL_* variable set: what `import verl` alone loads and registers (verl's entry point).
PLAIN_VERL_IMPORT = """
import json, logging, sys
import verl
from verl.plugin.platform import PlatformRegistry
from verl.trainer.ppo import core_algos
from verl.workers.rollout import base
from verl.workers.rollout.replica import RolloutReplicaRegistry
fn = core_algos.ADV_ESTIMATOR_REGISTRY.get("avspo")
print(json.dumps({
    "registered": bool(getattr(fn, "avspo_estimator", False)),
    "function": None if fn is None else fn.__module__ + "." + fn.__qualname__,
    "cpu_support_loaded": "avspo_plugin.tools.verl_cpu" in sys.modules,
    "cpu_support_registered": ["cpu" in PlatformRegistry.registered_names(), "hf" in RolloutReplicaRegistry._registry,
                               ("hf", "async") in base._ROLLOUT_REGISTRY],
    "adapter_log_level": logging.getLogger("avspo_plugin.verl").getEffectiveLevel(),
}))
"""


@pytest.fixture(scope="session")
def plain_verl_import() -> dict:
    """The report of PLAIN_VERL_IMPORT, run once per test process (several tests read it)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("VERL_")}
    run = subprocess.run([sys.executable, "-c", PLAIN_VERL_IMPORT], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])
