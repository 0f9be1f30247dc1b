"""The host contract's test kit (docs/method/hosts.md): the same tests for every host adapter.

A host's tests/<host>/test_host_contract.py subclasses :class:`HostContract` and gives it a ``driver`` fixture, a
:class:`HostDriver` that runs the host's own code: its trainer's step, log and checkpoint methods (on stand-ins where
a trainer needs workers). The oracle is the core: a bare AVSPOSession fed the same rewards, the same groups
(consecutive runs of GROUP_SIZE rows) and the same step boundaries.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pytest
import torch

from avspo_plugin.config import AVSPOConfig
from avspo_plugin.core import AVSPOSession
from avspo_plugin.core.host import Host
from avspo_plugin.threshold_modes import THRESHOLD_MODES

GROUP_SIZE = 4
# Every run's AVSPO keys: tau moves (adaptive, from 0.2, below every step's ACR, so collapsed groups get virtual
# samples), and both warnings fire at step 2 (ACR above 0.2, entropy below 5 nats, for more than one step).
AVSPO_KEYS = {"threshold_mode": "adaptive", "threshold_init": 0.2, "threshold_lr": 0.3, "stagnation_acr": 0.2,
              "stagnation_steps": 1, "entropy_floor": 5.0}  # fmt: skip
# The rewards of three steps, two calls each, four groups of four per call; a host whose step is one call takes the
# first. The steps' mean rewards differ, so Eq. 12 moves tau at step 3 (at step 2 it has no previous mean yet).
STEP_CALLS = [
    ([0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 1, 0, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1, 0, 0, 0]),
    ([1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1], [0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1]),
    ([0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1, 1, 0, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0]),
]
SAVED_STEP = 2
# The groups a host's filtering (verl's DAPO filter) evicts at each step before any call: {shared value: groups}.
FILTERED = {0.0: 2, 1.0: 1}


@dataclass
class Run:
    """What one run of a host gave back.

    advantages: per step, per call, the (B,) advantages the host trains on, in row order; logged: per step, what the
    host logged (its own keys beside the avspo/* ones); checkpointed: the session state found where the host declares
    it (Host.checkpoint_folder and Host.state_name) after its checkpoint of SAVED_STEP, when the run saved one.
    """

    advantages: list[list[torch.Tensor]]
    logged: list[dict[str, Any]]
    checkpointed: dict[str, Any] | None = None


class HostDriver(Protocol):
    """Runs a host's own code for the kit.

    host: the adapter's declared Host; calls_per_step: the advantage calls of one host step; host_keys: the AVSPO keys
    the host fixes (its std convention, its epsilon); filters_groups: whether the host's filtering can evict collapsed
    groups before its advantage calls (verl's DAPO filter), so that ``run`` takes ``filtered``.
    """

    host: Host
    calls_per_step: int
    host_keys: dict[str, Any]
    filters_groups: bool

    def run(self, steps: list[list[list[float]]], save: bool = False, resume: bool = False, **filtering: Any) -> Run:
        """A fresh run (a new trainer, or a new process) of ``steps`` (each a list of calls' rewards) under AVSPO_KEYS,
        numbered from 1, or from SAVED_STEP + 1 when it resumes from the checkpoint an earlier run saved; ``save``:
        checkpoint at SAVED_STEP, the last step; ``keys``: the AVSPO keys of the run, instead of AVSPO_KEYS. A host
        that filters groups also takes ``filtered`` (the groups its filtering evicts at each step, as FILTERED)."""

    def session(self) -> AVSPOSession:
        """The session the last run fed."""


@dataclass
class CoreRun:
    advantages: list[list[torch.Tensor]]
    logged: list[dict[str, float]]
    session: AVSPOSession


def core_run(
    config: AVSPOConfig, steps: list[list[list[float]]], entropies: list[float], filtered: dict[float, int] | None = None
) -> CoreRun:
    """The oracle: a bare session fed each call's rewards and groups (and the groups filtered, after the step's calls),
    closed and logged once per step."""
    session = AVSPOSession()
    advantages, logged = [], []
    for number, (calls, entropy) in enumerate(zip(steps, entropies), start=1):
        labels = np.arange(len(calls[0])) // GROUP_SIZE
        advantages.append([session.group_advantages(torch.tensor(rows, dtype=torch.float32), labels, config).advantages
                           for rows in calls])  # fmt: skip
        if filtered:
            session.observe_filtered_groups(filtered, GROUP_SIZE)
        logged.append(session.pop_metrics(step=number, entropy=entropy))
    return CoreRun(advantages, logged, session)


def avspo_logged(logged: dict[str, Any]) -> dict[str, float]:
    return {name: value for name, value in logged.items() if name.startswith("avspo/")}


class HostContract:
    """The contract's tests; a host's test file subclasses this class and defines the ``driver`` fixture."""

    def steps(self, driver: HostDriver) -> list[list[list[float]]]:
        return [[list(map(float, rows)) for rows in calls[: driver.calls_per_step]] for calls in STEP_CALLS]

    def oracle(self, driver: HostDriver, run: Run) -> CoreRun:
        # The entropy each step fed the warning is the one the host logged, under its declared name.
        entropies = [logged[driver.host.entropy_metric] for logged in run.logged]
        return core_run(AVSPOConfig(**AVSPO_KEYS, **driver.host_keys), self.steps(driver), entropies)

    def test_advantages_and_logged_metrics_are_the_cores(self, driver):
        run = driver.run(self.steps(driver))
        expected = self.oracle(driver, run)
        assert driver.session().config == AVSPOConfig(**AVSPO_KEYS, **driver.host_keys)
        assert [len(calls) for calls in run.advantages] == [driver.calls_per_step] * len(STEP_CALLS)
        for got_calls, want_calls in zip(run.advantages, expected.advantages):
            for got, want in zip(got_calls, want_calls):
                torch.testing.assert_close(got.double(), want.double(), rtol=1e-5, atol=1e-6)
        assert [avspo_logged(logged) for logged in run.logged] == [
            pytest.approx(driver.host.logged(metrics), rel=1e-6, abs=1e-9) for metrics in expected.logged
        ]
        assert [logged["avspo/augmented_groups"] > 0 for logged in run.logged] == [True] * len(STEP_CALLS)
        assert [logged["avspo/entropy_collapse"] for logged in run.logged] == [0.0, 1.0, 1.0]

    def test_a_step_moves_the_threshold_once_however_many_calls_it_takes(self, driver):
        run = driver.run(self.steps(driver))
        expected = self.oracle(driver, run)
        thresholds = [logged["avspo/threshold"] for logged in run.logged]
        assert thresholds == [metrics["threshold"] for metrics in expected.logged]
        assert thresholds[0] == thresholds[1] == AVSPO_KEYS["threshold_init"] != thresholds[2]
        assert driver.session().state == expected.session.state and driver.session().state.step == len(STEP_CALLS)

    def test_warnings_go_to_the_adapters_logger_naming_the_hosts_step(self, driver, caplog):
        with caplog.at_level(logging.WARNING):
            driver.run(self.steps(driver))
        assert driver.session().log is driver.host.log
        assert driver.host.log.name.split(".")[:2] == ["avspo_plugin", driver.host.name]
        warnings = [(record.name, record.getMessage()[:26]) for record in caplog.records
                    if record.name.startswith("avspo_plugin")]  # fmt: skip
        assert sorted(warnings) == [(driver.host.log.name, "AVSPO stagnation at step 2"),
                                    (driver.host.log.name, "Entropy collapse at step 2")]  # fmt: skip

    @pytest.mark.parametrize("mode", THRESHOLD_MODES)
    def test_a_filtered_step_logs_the_threshold_in_force(self, driver, mode):
        """Groups the host's filtering evicted count in the step's ACR; the threshold logged is the one the step's calls
        compared against: 1 under never, 0 under always (as every call reports), tau under adaptive and fixed. A host
        that evicts no group (TRL, OpenRLHF) runs the same steps unfiltered: the same threshold, no filtered groups."""
        keys = {**AVSPO_KEYS, "threshold_mode": mode}
        filtered = FILTERED if driver.filters_groups else {}
        run = driver.run(self.steps(driver), keys=keys, filtered=filtered)
        entropies = [logged[driver.host.entropy_metric] for logged in run.logged]
        expected = core_run(AVSPOConfig(**keys, **driver.host_keys), self.steps(driver), entropies, filtered)
        assert [avspo_logged(logged) for logged in run.logged] == [
            pytest.approx(driver.host.logged(metrics), rel=1e-6, abs=1e-9) for metrics in expected.logged
        ]
        first = {"never": 1.0, "always": 0.0}.get(mode, AVSPO_KEYS["threshold_init"])
        assert run.logged[0]["avspo/threshold"] == first
        assert [logged.get("avspo/filtered_groups", 0) for logged in run.logged] == \
            [sum(filtered.values())] * len(STEP_CALLS)

    def test_the_state_round_trips_through_the_hosts_checkpoint(self, driver):
        steps = self.steps(driver)
        whole = driver.run(steps)
        whole_state = driver.session().state_dict()
        first = driver.run(steps[:SAVED_STEP], save=True)
        assert first.checkpointed == driver.session().state_dict()
        assert first.checkpointed["threshold"]["step"] == SAVED_STEP
        resumed = driver.run(steps[SAVED_STEP:], resume=True)
        assert [avspo_logged(logged) for logged in first.logged + resumed.logged] == [
            pytest.approx(avspo_logged(logged), rel=1e-6, abs=1e-9) for logged in whole.logged
        ]
        for got_calls, want_calls in zip(first.advantages + resumed.advantages, whole.advantages):
            for got, want in zip(got_calls, want_calls):
                torch.testing.assert_close(got, want)
        assert driver.session().state_dict() == whole_state
