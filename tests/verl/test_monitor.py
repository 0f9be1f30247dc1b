"""The ACR monitor (algorithm.avspo_monitor.enable=true) beside verl's own estimators.

verl's own functions are the oracle: its ``compute_advantage`` (reached by both trainers, hooked) and
``compute_advantage_for_multi_trajectories`` give every estimator's advantages, with the monitor on and
off, and the unhooked originals give them without the plugin at all.
"""

import json
import logging
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf, open_dict

from avspo_plugin.config import ConfigError
from avspo_plugin.names import MONITOR_STATE_FILE, STATE_FILE
from avspo_plugin.verl.hooks import hooks_for, prepare_trainer
from avspo_plugin.verl.monitor import UNGROUPED_ESTIMATORS, launch_notes, monitor
from avspo_plugin.verl.run_config import MONITOR, features_of, monitor_config_from_algorithm

# Three prompts of four responses and verl's padding: a all-pass, b mixed (one odd one out), c all-fail
# with one rejected row (rollout correction empties its mask; it keeps its reward in the group), and
# two padding rows sharing one uid with empty masks.
SCORES = [1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]
UIDS = ["a"] * 4 + ["b"] * 4 + ["c"] * 4 + ["pad"] * 2
LENGTHS = [3, 1, 4, 2, 4, 4, 1, 2, 3, 0, 2, 4, 0, 0]
# What the monitor must log for one such batch.
EXPECTED = {
    "avspo/groups": 3.0, "avspo/acr": 2 / 3, "avspo/acr_all_fail": 1 / 3, "avspo/acr_all_pass": 1 / 3,
    "avspo/near_collapse": 1 / 3, "avspo/samples": 12.0, "avspo/wasted_rollouts": 8.0, "avspo/reward_mean": 5 / 12,
}  # fmt: skip


@pytest.fixture(autouse=True)
def clean_monitor():
    monitor().reset()
    yield
    monitor().reset()


@pytest.fixture(scope="module")
def trainer_config():
    from hydra import compose, initialize_config_module

    with initialize_config_module("avspo_plugin.verl.config", version_base=None):
        return compose("avspo_trainer")


def config_with(trainer_config, estimator, **monitor_keys):
    config = trainer_config.copy()
    with open_dict(config):
        config.algorithm.adv_estimator = estimator
        config.algorithm.avspo_monitor.update({"enable": True, **monitor_keys})
        config.algorithm.gdpo_reward_keys = ["correct", "format"]
        config.actor_rollout_ref.rollout.n = 4
    return config


def verl_batch(scores=SCORES, uids=UIDS, lengths=LENGTHS, length=5, seed=0, estimator=None):
    """A batch with every field ``estimator`` (any registered verl estimator) reads."""
    from verl import DataProto

    generator = torch.Generator().manual_seed(seed)
    rows = len(scores)
    mask = (torch.arange(length) < torch.tensor(lengths).unsqueeze(1)).float()
    rewards = torch.zeros(rows, length)
    last = (torch.tensor(lengths) - 1).clamp(min=0)
    rewards[torch.arange(rows), last] = torch.tensor(scores, dtype=torch.float32) * (torch.tensor(lengths) > 0)
    tensors = {
        "token_level_rewards": rewards, "response_mask": mask,
        "values": torch.randn(rows, length, generator=generator),
        "old_log_probs": -torch.rand(rows, length, generator=generator),
        "sum_pi_squared": torch.rand(rows, length, generator=generator),
        # GDPO places its per-dimension rewards by the prompt length and attention mask.
        "prompts": torch.zeros(rows, 2, dtype=torch.long),
        "attention_mask": torch.cat([torch.ones(rows, 2), mask], dim=1).long(),
    }  # fmt: skip
    if estimator == "remax":  # verl hands reward_baselines to every estimator when the batch has them
        tensors["reward_baselines"] = torch.rand(rows, generator=generator)
    correct = np.array(scores, dtype=np.float32)
    non_tensors = {"uid": np.array(uids, dtype=object), "correct": correct, "format": np.ones(rows, np.float32)}
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


def registered_estimators():
    from verl.trainer.ppo import core_algos

    return sorted(name for name in core_algos.ADV_ESTIMATOR_REGISTRY if name != "avspo")


def grouping_estimators():
    return [name for name in registered_estimators() if name not in UNGROUPED_ESTIMATORS]


def advantages_of(compute, data, config):
    out = compute(data, adv_estimator=config.algorithm.adv_estimator, config=config.algorithm)
    return out.batch["advantages"].clone(), out.batch["returns"].clone()


def test_every_grouping_estimator_verl_registers_is_covered():
    # The identity test below runs every registered estimator but these three, whose advantages come
    # from elsewhere than a prompt's group (they get the reward-side metrics and a note at launch).
    assert set(registered_estimators()) - set(grouping_estimators()) == {"gae", "reinforce_plus_plus", "remax"}
    assert len(grouping_estimators()) >= 10


@pytest.mark.parametrize("estimator", grouping_estimators() + sorted(UNGROUPED_ESTIMATORS))
def test_the_monitor_never_changes_an_advantage(trainer_config, estimator):
    from verl.trainer.ppo.ray_trainer import compute_advantage

    config = config_with(trainer_config, estimator)
    off = config.copy()
    off.algorithm.avspo_monitor.enable = False
    with_monitor = advantages_of(compute_advantage, verl_batch(estimator=estimator), config)
    assert monitor().pop_metrics()["groups"] == 3.0  # the monitor did count this batch
    without = advantages_of(compute_advantage, verl_batch(estimator=estimator), off)
    unhooked = advantages_of(compute_advantage.__wrapped__, verl_batch(estimator=estimator), off)
    for got, oracle in ((with_monitor, without), (with_monitor, unhooked)):
        for tensor, expected in zip(got, oracle):  # bit for bit; some estimators give padding rows NaN
            torch.testing.assert_close(tensor, expected, rtol=0, atol=0, equal_nan=True)


def test_v1_agent_loop_sessions_several_mini_batches_and_filtering(trainer_config, tmp_path):
    """verl's v1 route: GRPO on each session's final output, two mini-batch calls in one global step, and
    groups evicted by DAPO's group filtering; advantages equal verl's, metrics pooled over the step."""
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    from avspo_plugin.verl.plugin_process import DAPO_FILTERED_REWARD_COUNTS_KEY

    config = config_with(trainer_config, "grpo")
    # Each prompt's first response is a session of two outputs (an earlier turn, index 0, then the final
    # one, index 1, which alone counts): the earlier turn's reward (1) must not count.
    scores = [1] + SCORES[:4] + [1] + SCORES[4:12]
    lengths = [2] + LENGTHS[:4] + [2] + LENGTHS[4:12]
    sessions = [("a", 0, 0), ("a", 0, 1), ("a", 1, 0), ("a", 2, 0), ("a", 3, 0), ("b", 0, 0), ("b", 0, 1)]
    sessions += [("b", s, 0) for s in (1, 2, 3)] + [("c", s, 0) for s in range(4)]

    def mini_batch(call):
        """The rows and keys of one mini-batch call (uids are per call, as the v1 trainer's are per sample)."""
        uids = [f"{prompt}{call}" for prompt, _, _ in sessions]
        keys = [f"{prompt}{call}_{session}_{index}" for prompt, session, index in sessions]
        return verl_batch(scores, uids, lengths), keys

    calls = []
    trainer = SimpleNamespace(config=config, global_steps=1, parameter_sync_step=2, prepare_step=lambda: {})
    trainer.config.data.train_batch_size = 6

    def step_once(metrics, timing_raw, sample_batch_size):
        data, keys = mini_batch(trainer.local_trigger_step)
        result = compute_advantage_for_multi_trajectories(
            data, keys, config.algorithm.adv_estimator, config=config.algorithm, num_repeat=4
        )
        calls.append(result.batch["advantages"].clone())
        metrics[DAPO_FILTERED_REWARD_COUNTS_KEY] = {0.0: 1}
        metrics["actor/entropy"] = 1.0
        return SimpleNamespace(keys=keys, tags=[{}] * len(keys), partition_id="train")

    trainer._step_once = step_once
    PPOTrainer.step(trainer, {}, {})
    logged = monitor().pop_metrics()
    # Per call: 3 groups of sessions (a all-pass, b odd one out, c all-fail), 1 evicted all-fail group.
    assert logged["groups"] == 2 * 3 + 2 and logged["filtered_groups"] == 2
    assert logged["acr"] == pytest.approx(6 / 8) and logged["acr_all_fail"] == pytest.approx(4 / 8)
    assert logged["wasted_rollouts"] == 2 * 8 + 2 * 4 and logged["samples"] == 2 * 12

    config.algorithm.avspo_monitor.enable = False
    data, keys = mini_batch(0)
    plain = compute_advantage_for_multi_trajectories(data, keys, "grpo", config=config.algorithm)
    assert len(calls) == 2 and all(torch.equal(advantages, plain.batch["advantages"]) for advantages in calls)


def test_legacy_run_logs_through_verls_tracker_and_resumes_the_warning_streaks(trainer_config, tmp_path):
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer, compute_advantage
    from verl.utils.tracking import Tracking

    from avspo_plugin.verl import session

    config = config_with(trainer_config, "rloo", stagnation_acr=0.5, stagnation_steps=1)
    with open_dict(config):
        config.trainer.default_local_dir = str(tmp_path)
        config.trainer.resume_mode = "auto"
    logged = []
    tracking = Tracking("avspo-test", "monitor", default_backend=[])
    tracking.logger = {"recorder": SimpleNamespace(log=lambda data, step: logged.append(data), finish=lambda: None)}

    class WorkerGroup:
        def save_checkpoint(self, local_path, *args, **kwargs):
            pass

        def load_checkpoint(self, *args, **kwargs):
            pass

    class Dataloader:
        def __len__(self):
            return 10

        def state_dict(self):
            return {}

        def load_state_dict(self, state):
            pass

    from verl.trainer.ppo.checkpoint_callback import CheckpointCallback

    def stand_in(step):
        return SimpleNamespace(
            config=config, global_steps=step, actor_rollout_wg=WorkerGroup(), use_critic=False,
            train_dataloader=Dataloader(),
            trainer_mode="sync", checkpoint_callback=CheckpointCallback(config),
        )  # fmt: skip

    for step in (1, 2):
        compute_advantage(verl_batch(), adv_estimator="rloo", config=config.algorithm)
        if step == 2:
            RayPPOTrainer._save_checkpoint(stand_in(step))
        tracking.log(data={"actor/entropy": 2.0}, step=step)
    assert [data["avspo/stagnation"] for data in logged] == [0.0, 1.0]  # ACR 2/3 > 0.5 for more than 1 step
    assert all(data[name] == pytest.approx(value) for data in logged for name, value in EXPECTED.items())
    assert not any("threshold" in name or "virtual" in name for name in logged[0])  # AVSPO's own, not a monitor's
    assert session().state is None  # the estimator's session untouched
    saved = json.loads((tmp_path / "global_step_2" / MONITOR_STATE_FILE).read_text())
    assert saved["warnings"]["stagnation"] == {"streak": 2, "fired_step": 2}
    assert not (tmp_path / "global_step_2" / STATE_FILE).exists()

    monitor().reset()  # a new process resumes from step 2
    RayPPOTrainer._load_checkpoint(stand_in(0))
    assert monitor().state_dict()["warnings"] == saved["warnings"]


def test_the_monitors_config_block_is_checked_and_its_hooks_are_the_monitors(trainer_config):
    config = config_with(trainer_config, "grpo")
    assert features_of(config) == (MONITOR,)
    with pytest.raises(ConfigError, match=r"algorithm\.avspo_monitor\.reward_hi"):
        monitor_config_from_algorithm(OmegaConf.create({"avspo_monitor": {"reward_hi": 2}}))
    with pytest.raises(ConfigError, match=r"reward_low=1\.0 is not below reward_high=1\.0"):
        monitor_config_from_algorithm(OmegaConf.create({"avspo_monitor": {"reward_low": 1.0}}))
    names = {hook.name for hook in hooks_for("v1", MONITOR)}
    assert "verl.trainer.ppo.v1.utils.compute_advantage_for_multi_trajectories" not in names  # the estimator's alone
    assert "verl.utils.tracking.Tracking.log" in names


def test_notes_at_launch_say_what_the_monitor_cannot_measure(trainer_config, caplog):
    gae = config_with(trainer_config, "gae")
    gae.actor_rollout_ref.rollout.n = 1
    notes = launch_notes(gae)
    assert len(notes) == 2 and "rollout.n=1" in notes[0] and "from a critic's values" in notes[1]
    assert launch_notes(config_with(trainer_config, "grpo")) == []
    assert "has no effect" in launch_notes(config_with(trainer_config, "avspo"))[0]
    assert features_of(config_with(trainer_config, "avspo")) == ("avspo",)  # the estimator logs them itself
    with caplog.at_level(logging.WARNING, logger="avspo_plugin.verl"):
        prepare_trainer(gae)
    assert [r.getMessage() for r in caplog.records] == notes


def test_a_batch_the_monitor_cannot_read_is_a_warning_and_the_estimator_runs(trainer_config, caplog):
    from verl.trainer.ppo.ray_trainer import compute_advantage

    config = config_with(trainer_config, "grpo")
    data = verl_batch()
    data.batch["token_level_rewards"][0, 0] = float("nan")
    with caplog.at_level(logging.WARNING, logger="avspo_plugin.verl"):
        out = compute_advantage(data, adv_estimator="grpo", config=config.algorithm)
    assert "advantages" in out.batch.keys()
    (message,) = [r.getMessage() for r in caplog.records]
    assert "algorithm.avspo_monitor skipped a batch of 14 rows" in message and "uid 'a'" in message
