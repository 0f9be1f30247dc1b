"""TRL on two CPU processes (torchrun, gloo): groups straddle the processes, both keep one AVSPO state.

distributed_run.py trains the tiny policy with 6 completions per process and groups of 4, so the
second group of each 12-completion generation batch has two completions on each process. Checked
against the core (through the TRL translation) on the gathered batch: every process's advantages,
its threshold state after each batch, and the size of the gathered batch, in an AVSPO run and in a
monitor-only run of two summed reward functions (rewards up to 2).
"""

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from avspo_plugin import AVSPOConfig
from avspo_plugin.core import AVSPOSession
from avspo_plugin.trl.conventions import trl_advantages

RUN = Path(__file__).with_name("distributed_run.py")
PROCESSES, PER_PROCESS, NUM_GENERATIONS = 2, 6, 4


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Each process's report (rank order), from one torchrun launch of distributed_run.py."""
    out = tmp_path_factory.mktemp("distributed")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    run = subprocess.run(  # torchrun
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={PROCESSES}", str(RUN),
         str(out)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(PROCESSES)]


@pytest.mark.parametrize("name", ["avspo", "monitor"])
def test_processes_share_the_gathered_batch_and_the_state(reports, name):
    runs = [report[name] for report in reports]
    assert [run["processes"] for run in runs] == [[0, 2], [1, 2]]
    assert {run["backend"] for run in runs} == {"gloo"}
    batches = list(zip(*(run["batches"] for run in runs)))
    assert len(batches) == 2  # one generation batch per step
    for per_process in batches:
        gathered = [batch["gathered"] for batch in per_process]
        # Every process scored the whole generation batch: a TRL that stopped gathering would give 6 rows.
        assert [len(rows) for rows in gathered] == [PROCESSES * PER_PROCESS] * PROCESSES
        assert gathered[0] == gathered[1]
        assert per_process[0]["state"] == per_process[1]["state"]
        prompts = per_process[0]["prompts"] + per_process[1]["prompts"]
        groups = [prompts[i : i + NUM_GENERATIONS] for i in range(0, len(prompts), NUM_GENERATIONS)]
        assert all(len(set(group)) == 1 for group in groups), groups
        # Group 1 (rows 4-7) has rows 4-5 on process 0 and rows 6-7 on process 1.
        assert per_process[0]["prompts"][4:] == per_process[1]["prompts"][:2]
    assert runs[0]["logged"] == runs[1]["logged"]


@pytest.mark.parametrize("name", ["avspo", "monitor"])
def test_advantages_and_state_are_the_cores_on_the_gathered_batch(reports, name):
    rank0, rank1 = (report[name] for report in reports)
    config = AVSPOConfig(**rank0["config"])
    session = AVSPOSession()  # the core's session replayed on the gathered rewards
    acr = []
    for batch0, batch1 in zip(rank0["batches"], rank1["batches"]):
        rewards = torch.tensor(batch0["gathered"]).nansum(dim=1)  # reward_weights are 1
        compute = functools.partial(trl_advantages, rewards, NUM_GENERATIONS, "group")
        expected = session.step_with(config, compute)
        session.close_step()  # one generation batch, one step of Eq. 12, as the adapter does
        acr.append(expected.metrics["acr"])
        used = torch.tensor(batch0["advantages"] + batch1["advantages"])
        if name == "avspo":  # AVSPO's advantages, sliced per process
            assert expected.metrics["augmented_groups"] > 0
            assert torch.equal(used, expected.advantages)
        else:  # monitor-only: GRPOTrainer's own advantages, which the untriggered translation reproduces
            assert expected.metrics["triggered"] == 0
            torch.testing.assert_close(used, expected.advantages, atol=1e-6, rtol=0)
        assert batch0["state"]["threshold"] == session.state_dict()["threshold"]
    # logging_steps=1, one generation batch per step: each log holds its batch's metrics.
    assert [entry["avspo/acr"] for entry in rank0["logged"]] == pytest.approx(acr)


def test_the_runs_exercise_collapsed_groups_and_rewards_above_one(reports):
    """Without these the comparisons above could pass on a trivial batch."""
    avspo, monitor = reports[0]["avspo"], reports[0]["monitor"]
    avspo_rewards = [row[0] for batch in avspo["batches"] for row in batch["gathered"]]
    assert 0.0 in avspo_rewards and 1.0 in avspo_rewards
    monitor_rewards = [sum(row) for batch in monitor["batches"] for row in batch["gathered"]]
    assert max(monitor_rewards) == 2.0  # outside [reward_low, reward_high] = [0, 1]: monitor-only runs anyway
    assert AVSPOConfig(**monitor["config"]).reward_high == 1.0
