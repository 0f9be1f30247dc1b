"""verl's adapter against the host contract's test kit (tests/host_contract.py).

The run is verl's v1 trainer: its real ``PPOTrainer.step`` (two mini-batch updates per global step,
``parameter_sync_step=2``), ``_save_checkpoint``, ``_load_checkpoint`` and ``Tracking.log``, with the plugin's hooks, on
a stand-in whose local update computes each mini-batch's advantages with verl's ``compute_advantage``, as
tests/verl/test_checkpoint.py runs them.
"""

import json
import os
from types import SimpleNamespace

import pytest
from host_contract import AVSPO_KEYS, GROUP_SIZE, SAVED_STEP, HostContract, Run
from omegaconf import open_dict

from avspo_plugin.verl import HOST, session
from avspo_plugin.verl.plugin_process import DAPO_FILTERED_REWARD_COUNTS_KEY

ENTROPY = 1.0  # verl's actor/entropy of every step: below the kit's entropy floor


class WorkerGroup:
    def save_checkpoint(self, local_path, *args, **kwargs):
        os.makedirs(local_path, exist_ok=True)

    def load_checkpoint(self, local_path, **kwargs):
        pass


class Dataloader:
    def __len__(self):
        return 100

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


class VerlDriver:
    host = HOST
    calls_per_step = 2
    filters_groups = True  # verl's DAPO filter (algorithm.filter_groups)

    def __init__(self, base_config, checkpoint_dir, make_batch):
        self.host_keys = {}
        self.base_config = base_config
        self.checkpoint_dir = checkpoint_dir
        self.make_batch = make_batch

    def trainer(self, steps, keys, filtered):
        """A v1 trainer stand-in whose mini-batch ``m`` of global step ``g`` has the rewards ``steps[g - first][m]``,
        and whose group filtering evicted ``filtered`` groups (as verl's DAPO filter reports them) at each step."""
        from verl.trainer.ppo.checkpoint_callback import CheckpointCallback
        from verl.trainer.ppo.ray_trainer import compute_advantage
        from verl.utils.tracking import Tracking

        config = self.base_config.copy()
        with open_dict(config):
            config.trainer.default_local_dir = str(self.checkpoint_dir)
            config.trainer.resume_mode = "auto"
            config.algorithm.avspo.update(keys)
            config.data.train_batch_size = 4
            config.actor_rollout_ref.rollout.n = GROUP_SIZE
        trainer = SimpleNamespace(
            config=config, global_steps=0, actor_rollout_wg=WorkerGroup(), use_critic=False,
            train_dataloader=Dataloader(), trainer_mode="sync", checkpoint_callback=CheckpointCallback(config),
            parameter_sync_step=self.calls_per_step, prepare_step=lambda: {}, logged=[], advantages=[],
        )  # fmt: skip
        trainer.logger = Tracking("avspo-test", "host-contract", default_backend=[])
        trainer.logger.logger = {"recorder": SimpleNamespace(log=lambda data, step: trainer.logged.append(data),
                                                             finish=lambda: None)}  # fmt: skip

        def step_once(metrics, timing_raw, sample_batch_size):
            rows = steps[trainer.global_steps - trainer.first_step][trainer.local_trigger_step]
            uids = [f"{trainer.global_steps}-{trainer.local_trigger_step}-{row // 4}" for row in range(len(rows))]
            data = compute_advantage(self.make_batch(rows, uids), adv_estimator="avspo", config=config.algorithm)
            trainer.advantages[-1].append(data.batch["advantages"][:, 0])
            metrics["actor/entropy"] = ENTROPY  # as verl's _step_once reports it
            if filtered and trainer.local_trigger_step == 0:  # verl merges each mini-batch's counts into the step's
                metrics[DAPO_FILTERED_REWARD_COUNTS_KEY] = filtered
            keys = [f"{uid}_{row % 4}_0" for row, uid in enumerate(uids)]
            return SimpleNamespace(keys=keys, tags=[{}] * len(keys), partition_id="train")

        trainer._step_once = step_once
        return trainer

    def run(self, steps, save=False, resume=False, keys=AVSPO_KEYS, filtered=None):
        from verl.trainer.ppo.v1.trainer_base import PPOTrainer

        session().reset()  # a new trainer process
        trainer = self.trainer(steps, keys, filtered)
        if resume:
            PPOTrainer._load_checkpoint(trainer)
            assert trainer.global_steps == SAVED_STEP
        trainer.first_step = trainer.global_steps + 1
        for number in range(trainer.first_step, trainer.first_step + len(steps)):
            trainer.global_steps = number
            trainer.advantages.append([])
            metrics = {}
            PPOTrainer.step(trainer, metrics, {})
            if save and number == SAVED_STEP:  # verl saves, then logs
                PPOTrainer._save_checkpoint(trainer)
            trainer.logger.log(data=metrics, step=number)
        checkpointed = None
        if save:
            folder = HOST.step_folder(str(self.checkpoint_dir), SAVED_STEP)
            assert os.path.isfile(os.path.join(folder, "data.pt")), f"not the folder verl saved step {SAVED_STEP} into"
            with open(os.path.join(folder, HOST.state_name)) as state_file:
                checkpointed = json.load(state_file)
        return Run(trainer.advantages, trainer.logged, checkpointed)

    def session(self):
        return session()


@pytest.fixture(scope="module")
def base_config():
    from hydra import compose, initialize_config_module

    with initialize_config_module("avspo_plugin.verl.config", version_base=None):
        return compose("avspo_trainer")


class TestVerl(HostContract):
    @pytest.fixture
    def driver(self, base_config, tmp_path, make_batch):
        return VerlDriver(base_config, tmp_path / "checkpoints", make_batch)
