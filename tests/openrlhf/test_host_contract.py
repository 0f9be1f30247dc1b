"""OpenRLHF's adapter against the host contract's test kit (tests/host_contract.py).

OpenRLHF is not installed here (tests/openrlhf/conftest.py): the run calls the adapter's functions where
patches/openrlhf-0.11.2-avspo.patch has OpenRLHF's trainer call them, in its order (the group step in
``compute_advantages_and_returns``, ``rollout_stats`` in ``_compute_rollout_stats``, ``entropy_collapse_flag`` and
``checkpoint_state`` in ``save_logs_and_checkpoints``, ``load_checkpoint_state`` in ``restore_best_checkpoint_state``).
OpenRLHF's own code runs them in tests/openrlhf/test_routes.py.
"""

from types import SimpleNamespace

import pytest
import torch
from host_contract import AVSPO_KEYS, GROUP_SIZE, HostContract, Run

from avspo_plugin.openrlhf import (
    HOST,
    SESSION,
    checkpoint_state,
    entropy_collapse_flag,
    group_advantages,
    load_checkpoint_state,
    rollout_stats,
)

ENTROPY = 1.0  # the actor's entropy_loss of every step: below the kit's entropy floor


class OpenrlhfDriver:
    host = HOST
    calls_per_step = 1
    filters_groups = False  # no filtering evicts groups before the advantage call

    def __init__(self):
        # group_norm's advantage: (r - mean) / (unbiased std + 1e-9).
        self.host_keys = {"epsilon": 1e-9}
        self.args = self.arguments(AVSPO_KEYS)
        self.client_states = None

    @staticmethod
    def arguments(keys):
        advantage = SimpleNamespace(estimator="avspo", avspo=SimpleNamespace(**keys))
        return SimpleNamespace(algo=SimpleNamespace(advantage=advantage),
                               rollout=SimpleNamespace(n_samples_per_prompt=GROUP_SIZE))  # fmt: skip

    def run(self, steps, save=False, resume=False, keys=None, filtered=None):
        assert not filtered, "OpenRLHF evicts no group before its advantage calls"
        self.args = self.arguments(keys or AVSPO_KEYS)
        SESSION.reset()  # a new trainer actor
        if resume:
            load_checkpoint_state(self.client_states)
        advantages, logged = [], []
        for (rows,) in steps:
            rewards = torch.tensor(rows).reshape(-1, GROUP_SIZE)
            advantages.append([group_advantages(rewards, self.args).reshape(-1)])
            # The actor's status (its entropy as OpenRLHF reports it) with the rollout stats.
            logs = {"policy_loss": 0.0, "entropy_loss": ENTROPY, **rollout_stats()}
            logs.update(entropy_collapse_flag(logs))
            logged.append(logs)
        if save:
            self.client_states = {"episode": 0, "global_step": len(steps)}
            self.client_states.update(checkpoint_state())
        return Run(advantages, logged, self.client_states[HOST.state_name] if save else None)

    def session(self):
        return SESSION


class TestOpenrlhf(HostContract):
    @pytest.fixture
    def driver(self):
        yield OpenrlhfDriver()
        SESSION.reset()
