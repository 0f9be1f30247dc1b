"""TRL's adapter against the host contract's test kit (tests/host_contract.py).

The run is transformers' and TRL's own training loop (``train()``) of AVSPOGRPOTrainer on the tiny policy of
tests/trl/conftest.py: one generation batch of the four prompts per step, a reward function returning the kit's
rewards, TRL's own logs, checkpoints and resume.
"""

import json
import os

import pytest
from host_contract import AVSPO_KEYS, SAVED_STEP, HostContract, Run

from avspo_plugin.trl import HOST, AVSPOGRPOTrainer


class RecordingTrainer(AVSPOGRPOTrainer):
    """Keeps the advantages of each training generation batch, as handed on to the loss."""

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        self.used.append([output["advantages"].clone()])
        return output


class TrlDriver:
    host = HOST
    calls_per_step = 1
    filters_groups = False  # no filtering evicts groups before the advantage call

    def __init__(self, kit, make_trainer):
        # GRPOTrainer's advantage: (r - mean) / (unbiased std + 1e-4) under scale_rewards="group".
        self.host_keys = {"epsilon": 1e-4, "std": "unbiased", "norm_by_std": True}
        self.kit = kit
        self.make_trainer = make_trainer
        self.trainer = None

    def run(self, steps, save=False, resume=False, keys=None, filtered=None):
        assert not filtered, "TRL evicts no group before its advantage calls"
        done = SAVED_STEP if resume else 0  # the steps the checkpoint resumed holds
        rewards = self.kit.PresetRewards()
        rewards.queue.extend(rows for calls in steps for rows in calls)
        saving = {"save_strategy": "steps", "save_steps": SAVED_STEP} if save else {}
        fields = {f"avspo_{key}": value for key, value in (keys or AVSPO_KEYS).items()}
        self.trainer = self.make_trainer(rewards, trainer_class=RecordingTrainer, max_steps=done + len(steps), **saving,
                                         **fields)  # fmt: skip
        self.trainer.used = []
        checkpoint = HOST.step_folder(self.trainer.args.output_dir, SAVED_STEP)
        self.trainer.train(resume_from_checkpoint=checkpoint if resume else None)
        assert rewards.queue == []
        logged = [entry for entry in self.trainer.state.log_history if "loss" in entry and entry["step"] > done]
        checkpointed = None
        if save:
            assert os.path.isfile(os.path.join(checkpoint, "trainer_state.json")), f"not the folder TRL saved step {SAVED_STEP} into"
            with open(os.path.join(checkpoint, HOST.state_name)) as state_file:
                checkpointed = json.load(state_file)
        return Run(self.trainer.used, logged, checkpointed)

    def session(self):
        return self.trainer.avspo_session


class TestTrl(HostContract):
    @pytest.fixture
    def driver(self, kit, make_trainer):
        return TrlDriver(kit, make_trainer)
