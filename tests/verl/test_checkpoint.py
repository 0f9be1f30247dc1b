"""The AVSPO state rides along verl's own checkpoint save and resume, in both trainers, exactly.

verl's real ``_save_checkpoint`` / ``_load_checkpoint`` run here (with the plugin's hooks) on a
stand-in trainer whose worker groups and dataloader only record what they are asked; the full
trainer resume runs in tests/verl/test_e2e*.py.
"""

import json
import logging
import os
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf, open_dict

from avspo_plugin.names import STATE_FILE
from avspo_plugin.verl import pop_metrics, session

# Rewards of four steps (two prompts of four samples each): ACR and J move, so tau moves.
STEP_SCORES = [
    [1, 1, 1, 1, 0, 1, 0, 0],
    [0, 0, 0, 0, 1, 1, 0, 1],
    [1, 1, 1, 1, 1, 1, 1, 1],
    [0, 1, 0, 1, 0, 0, 0, 0],
]
UIDS = list("aaaabbbb")
AVSPO = {"strategy": "uniform", "threshold_mode": "adaptive", "threshold_lr": 0.3, "threshold_init": 0.2,
         "threshold_min": 0.05}


class WorkerGroup:
    def __init__(self):
        self.calls = []

    def save_checkpoint(self, local_path, *args, **kwargs):
        os.makedirs(local_path, exist_ok=True)
        self.calls.append(("save", local_path))

    def load_checkpoint(self, local_path, **kwargs):
        self.calls.append(("load", local_path))


class Dataloader:
    def __len__(self):
        return 100

    def state_dict(self):
        return {"position": 7}

    def load_state_dict(self, state):
        self.loaded = state


@pytest.fixture(scope="module")
def trainers():
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    return {"v1": PPOTrainer, "legacy": RayPPOTrainer}


@pytest.fixture(scope="module")
def base_config():
    from hydra import compose, initialize_config_module

    with initialize_config_module("avspo_plugin.verl.config", version_base=None):
        return compose("avspo_trainer")


def trainer_for(base_config, checkpoint_dir, global_steps=0, **trainer_keys):
    from verl.trainer.ppo.checkpoint_callback import CheckpointCallback

    config = base_config.copy()
    with open_dict(config):
        config.trainer.default_local_dir = str(checkpoint_dir)
        config.trainer.resume_mode = "auto"
        config.trainer.update(trainer_keys)
        config.algorithm.avspo.update(AVSPO)
    return SimpleNamespace(
        config=config,
        global_steps=global_steps,
        actor_rollout_wg=WorkerGroup(),
        use_critic=False,
        train_dataloader=Dataloader(),
        trainer_mode="sync",
        checkpoint_callback=CheckpointCallback(config),
    )


def run_step(trainer, step, make_batch, compute_advantage):
    data = compute_advantage(make_batch(STEP_SCORES[step - 1], UIDS), adv_estimator="avspo", config=trainer.config.algorithm)
    return pop_metrics()["threshold"], data.batch["advantages"]


@pytest.mark.parametrize("kind", ["v1", "legacy"])
@pytest.mark.parametrize("resume_mode", ["auto", "resume_path"])
def test_checkpoint_at_2_resume_to_4_logs_the_uninterrupted_thresholds(
    tmp_path, trainers, base_config, make_batch, kind, resume_mode
):
    from verl.trainer.ppo.ray_trainer import compute_advantage

    trainer_cls = trainers[kind]
    uninterrupted = trainer_for(base_config, tmp_path / "unused")
    expected = [run_step(uninterrupted, step, make_batch, compute_advantage) for step in range(1, 5)]
    expected_state = session().state_dict()
    assert len({threshold for threshold, _ in expected}) >= 3, "the threshold should move in this sequence"

    session().reset()
    first = trainer_for(base_config, tmp_path / "ckpt")
    got = [run_step(first, step, make_batch, compute_advantage) for step in (1, 2)]
    first.global_steps = 2
    trainer_cls._save_checkpoint(first)
    step_folder = tmp_path / "ckpt" / "global_step_2"
    assert (step_folder / "data.pt").exists() and (step_folder / STATE_FILE).exists()
    assert json.loads((step_folder / STATE_FILE).read_text())["threshold"]["step"] == 2

    session().reset()  # a new trainer process
    keys = {"resume_mode": resume_mode}
    if resume_mode == "resume_path":
        keys["resume_from_path"] = str(step_folder)
    resumed = trainer_for(base_config, tmp_path / "ckpt", **keys)
    trainer_cls._load_checkpoint(resumed)
    assert resumed.global_steps == 2 and resumed.actor_rollout_wg.calls == [("load", str(step_folder / "actor"))]
    got += [run_step(resumed, step, make_batch, compute_advantage) for step in (3, 4)]

    assert [t for t, _ in got] == [t for t, _ in expected]
    for (_, advantages), (_, want) in zip(got, expected):
        assert torch.equal(advantages, want)
    assert session().state_dict() == expected_state


@pytest.mark.parametrize("kind", ["v1", "legacy"])
def test_fresh_start_and_other_estimators_leave_no_state(tmp_path, trainers, base_config, kind):
    trainer_cls = trainers[kind]
    fresh = trainer_for(base_config, tmp_path / "empty")
    trainer_cls._load_checkpoint(fresh)
    assert fresh.global_steps == 0 and session().state is None

    grpo = trainer_for(base_config, tmp_path / "grpo", global_steps=1)
    grpo.config.algorithm.adv_estimator = "grpo"
    trainer_cls._save_checkpoint(grpo)
    assert (tmp_path / "grpo" / "global_step_1" / "data.pt").exists()
    assert not (tmp_path / "grpo" / "global_step_1" / STATE_FILE).exists()


def test_resuming_a_checkpoint_without_avspo_state_warns(tmp_path, trainers, base_config, caplog):
    folder = tmp_path / "old" / "global_step_3"
    folder.mkdir(parents=True)
    (tmp_path / "old" / "latest_checkpointed_iteration.txt").write_text("3")
    resumed = trainer_for(base_config, tmp_path / "old")
    with caplog.at_level(logging.WARNING, logger="avspo_plugin.verl"):
        trainers["v1"]._load_checkpoint(resumed)
    assert resumed.global_steps == 3 and session().state is None
    assert any("has no avspo_state.json" in r.getMessage() and "threshold_init" in r.getMessage() for r in caplog.records)


def test_a_resume_under_another_threshold_init_starts_over_and_names_the_file(
    tmp_path, trainers, base_config, make_batch, caplog
):
    """Saved under threshold_init 0.2, resumed under 0.6: one warning naming the file and both values, and the run
    continues from tau = 0.6 as a fresh run would. A file of the format saved before states recorded their settings
    still resumes, its tau kept."""
    from verl.trainer.ppo.ray_trainer import compute_advantage

    trainer = trainer_for(base_config, tmp_path / "ckpt", global_steps=2)
    for step in (1, 2):
        run_step(trainer, step, make_batch, compute_advantage)
    trainers["v1"]._save_checkpoint(trainer)
    state_file = tmp_path / "ckpt" / "global_step_2" / STATE_FILE
    saved = json.loads(state_file.read_text())
    assert saved["settings"]["threshold_init"] == 0.2 and saved["threshold"]["tau"] != 0.6

    session().reset()
    resumed = trainer_for(base_config, tmp_path / "ckpt")
    resumed.config.algorithm.avspo.threshold_init = 0.6
    with caplog.at_level(logging.WARNING, logger="avspo_plugin.verl"):
        trainers["v1"]._load_checkpoint(resumed)
        threshold, _ = run_step(resumed, 3, make_batch, compute_advantage)
    (warning,) = [r.getMessage() for r in caplog.records if "was made under" in r.getMessage()]
    assert warning.startswith(f"AVSPO threshold state read from {state_file} was made under threshold_init=0.2; the "
                              "config in force has threshold_init=0.6: the threshold starts over")
    assert threshold == 0.6

    session().reset()
    old_format = {key: value for key, value in saved.items() if key != "settings"}
    state_file.write_text(json.dumps(old_format))
    trainers["v1"]._load_checkpoint(trainer_for(base_config, tmp_path / "ckpt"))
    assert session().state.tau == saved["threshold"]["tau"]


def test_state_dict_round_trips_through_json(make_batch):
    from verl.trainer.ppo.ray_trainer import compute_advantage

    algorithm = OmegaConf.create({"adv_estimator": "avspo", "avspo": {**AVSPO, "stagnation_steps": 1}})
    for scores in STEP_SCORES:
        compute_advantage(make_batch(scores, UIDS), adv_estimator="avspo", config=algorithm)
        pop_metrics()
    state = session().state_dict()
    session().reset()
    session().load_state_dict(json.loads(json.dumps(state)))
    assert session().state_dict() == state
    with pytest.raises(ValueError, match="format 99"):
        session().load_state_dict({**state, "format": 99})


# ----------------------------------------------------------------------------------------------
# A step of the v1 trainer split into mini-batch updates, its checkpoint saved before it is logged.

ENTROPY = 0.2  # below entropy_floor: the entropy streak grows every step
MINI_BATCHES = [  # per global step, the two mini-batches of parameter_sync_step=2 (rewards of prompts a, b)
    ([1, 1, 1, 1, 0, 0, 0, 0], [0, 1, 0, 1, 1, 1, 1, 1]),
    ([0, 0, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 0, 1, 1, 1]),
    ([1, 0, 1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0]),
    ([1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 0, 0, 0, 0]),
]
WARNINGS = {"stagnation_acr": 0.3, "stagnation_steps": 2, "entropy_floor": 0.5}


def v1_stand_in(base_config, checkpoint_dir, make_batch, **trainer_keys):
    """verl's PPOTrainer.step and checkpoint methods run on a stand-in whose local update computes the
    mini-batch's advantages with verl's compute_advantage and reports actor/entropy, as _step_once does."""
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.tracking import Tracking

    trainer = trainer_for(base_config, checkpoint_dir, **trainer_keys)
    trainer.config.algorithm.avspo.update(WARNINGS)
    trainer.parameter_sync_step = 2
    trainer.config.data.train_batch_size = 4
    trainer.prepare_step = lambda: {}
    trainer.logged = []
    trainer.logger = Tracking("avspo-test", "v1-steps", default_backend=[])
    trainer.logger.logger = {"recorder": SimpleNamespace(log=lambda data, step: trainer.logged.append((step, data)), finish=lambda: None)}

    def step_once(metrics, timing_raw, sample_batch_size):
        scores = MINI_BATCHES[trainer.global_steps - 1][trainer.local_trigger_step]
        uids = [f"{u}{trainer.global_steps}-{trainer.local_trigger_step}" for u in UIDS]
        compute_advantage(make_batch(scores, uids), adv_estimator="avspo", config=trainer.config.algorithm)
        metrics["actor/entropy"] = ENTROPY
        keys = [f"{uid}_{row % 4}_0" for row, uid in enumerate(uids)]
        return SimpleNamespace(keys=keys, tags=[{}] * len(keys), partition_id="train")

    trainer._step_once = step_once
    return trainer


def fit_v1(trainer, steps, save_at=None):
    """verl's v1 fit loop for ``steps``: step, checkpoint (before the log, as verl does), log."""
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    for step in steps:
        trainer.global_steps = step
        metrics = {}
        PPOTrainer.step(trainer, metrics, {})
        if step == save_at:
            PPOTrainer._save_checkpoint(trainer)
        trainer.logger.log(data=metrics, step=step)


def test_v1_step_of_two_mini_batches_is_one_step_of_eq_12_and_resume_loses_no_streak_step(
    tmp_path, base_config, make_batch, caplog
):
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    with caplog.at_level(logging.WARNING, logger="avspo_plugin.verl"):
        uninterrupted = v1_stand_in(base_config, tmp_path / "whole", make_batch)
        fit_v1(uninterrupted, range(1, 5))
    whole_state = session().state_dict()
    whole_warnings = [r.getMessage()[:40] for r in caplog.records]
    assert session().state.step == 4  # four global steps, eight estimator calls
    # Every call of a step ran under the same tau: Eq. 12 moved it once per step.
    thresholds = [data["avspo/threshold"] for _, data in uninterrupted.logged]
    assert len(set(thresholds)) >= 2 and [step for step, _ in uninterrupted.logged] == [1, 2, 3, 4]
    assert [data["avspo/groups"] for _, data in uninterrupted.logged] == [4.0] * 4
    assert whole_warnings == ["AVSPO stagnation at step 3: ACR (fractio", "Entropy collapse at step 3: the policy's"]

    caplog.clear()
    session().reset()
    with caplog.at_level(logging.WARNING, logger="avspo_plugin.verl"):
        first = v1_stand_in(base_config, tmp_path / "ckpt", make_batch)
        fit_v1(first, (1, 2), save_at=2)
        session().reset()  # the process ends; a new trainer resumes from step 2
        resumed = v1_stand_in(base_config, tmp_path / "ckpt", make_batch)
        PPOTrainer._load_checkpoint(resumed)
        fit_v1(resumed, (3, 4))
    assert session().state_dict() == whole_state
    assert [data["avspo/threshold"] for _, data in first.logged + resumed.logged] == thresholds
    assert [r.getMessage()[:40] for r in caplog.records if r.levelno == logging.WARNING] == whole_warnings


def test_legacy_checkpoint_holds_the_step_before_the_marker_and_its_entropy_after_the_log(
    tmp_path, trainers, base_config, make_batch
):
    # The legacy trainer saves before it logs and reports actor/entropy only in the log: the state is
    # written before verl's latest-checkpoint marker, and again once the step's entropy is known.
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.tracking import Tracking

    trainer = trainer_for(base_config, tmp_path / "ckpt", global_steps=1)
    trainer.config.algorithm.avspo.update(WARNINGS)
    state_file = tmp_path / "ckpt" / "global_step_1" / STATE_FILE
    marker = tmp_path / "ckpt" / "latest_checkpointed_iteration.txt"
    seen_at_actor_save = []
    save_actor = trainer.actor_rollout_wg.save_checkpoint
    trainer.actor_rollout_wg.save_checkpoint = lambda *a, **k: (seen_at_actor_save.append(state_file.exists()), save_actor(*a, **k))

    compute_advantage(make_batch(STEP_SCORES[1], UIDS), adv_estimator="avspo", config=trainer.config.algorithm)
    trainers["legacy"]._save_checkpoint(trainer)
    assert seen_at_actor_save == [True] and marker.read_text().strip() == "1"
    saved = json.loads(state_file.read_text())
    assert saved["threshold"]["step"] == 1 and saved["warnings"]["stagnation"]["streak"] == 1
    assert saved["warnings"]["entropy_collapse"]["streak"] == 0

    tracking = Tracking("avspo-test", "legacy", default_backend=[])
    tracking.log(data={"actor/entropy": ENTROPY}, step=1)
    logged = json.loads(state_file.read_text())
    assert logged["warnings"]["entropy_collapse"]["streak"] == 1 and logged["threshold"] == saved["threshold"]


def test_restored_state_is_reported_at_verls_default_level(
    tmp_path, trainers, base_config, make_batch, caplog, fresh_verl_process
):
    from verl.trainer.ppo.ray_trainer import compute_advantage

    trainer = trainer_for(base_config, tmp_path / "ckpt", global_steps=1)
    compute_advantage(make_batch(STEP_SCORES[0], UIDS), adv_estimator="avspo", config=trainer.config.algorithm)
    trainers["v1"]._save_checkpoint(trainer)
    session().reset()
    # verl's modules log at VERL_LOGGING_LEVEL (INFO by default) through the root handler verl sets up;
    # the adapter's logger does too, as a trainer process imports it (other tests here may silence it).
    assert fresh_verl_process["verl_import"]["adapter_log_level"] == logging.INFO
    with caplog.at_level(logging.INFO, logger="avspo_plugin.verl"):
        trainers["v1"]._load_checkpoint(trainer_for(base_config, tmp_path / "ckpt"))
    restored = [r.getMessage() for r in caplog.records if r.getMessage().startswith("AVSPO state restored from")]
    assert len(restored) == 1 and "tau=0.2" in restored[0] and "stagnation streak" in restored[0]


def test_groups_evicted_by_verls_group_filtering_count_in_the_steps_acr(tmp_path, base_config, make_batch):
    """With algorithm.filter_groups, verl's replay buffer evicts zero-variance groups before the estimator;
    the {shared value: groups} breakdown it reports per mini-batch, merged by verl's own PPOTrainer.step,
    puts them back in the step's ACR and its all-fail / all-pass split (rates over groups as generated)."""
    from verl.trainer.ppo.v1.replay_buffer import DAPO_FILTERED_REWARD_COUNTS_KEY as VERLS_KEY

    from avspo_plugin.verl.plugin_process import DAPO_FILTERED_REWARD_COUNTS_KEY

    assert DAPO_FILTERED_REWARD_COUNTS_KEY == VERLS_KEY
    evicted = ({0.0: 2}, {1.0: 1, 0.0: 1})  # what replay_buffer.sample reports with each mini-batch
    filtered = v1_stand_in(base_config, tmp_path / "filtered", make_batch)
    filtered.config.algorithm.avspo.threshold_mode = "never"  # what the launcher allows with filtering
    step_once = filtered._step_once

    def step_once_with_eviction(metrics, timing_raw, sample_batch_size):
        metrics[VERLS_KEY] = evicted[filtered.local_trigger_step]
        return step_once(metrics, timing_raw, sample_batch_size)

    filtered._step_once = step_once_with_eviction
    fit_v1(filtered, (1,))
    (_, logged), = filtered.logged
    # Step 1 seen by the estimator: a all-pass, b all-fail, then a mixed, b all-pass (4 groups, 3
    # collapsed); evicted: 3 all-fail groups and 1 all-pass one.
    assert (logged["avspo/groups"], logged["avspo/filtered_groups"]) == (8.0, 4.0)
    assert logged["avspo/acr"] == pytest.approx(7 / 8)
    assert (logged["avspo/acr_all_fail"], logged["avspo/acr_all_pass"]) == (pytest.approx(4 / 8), pytest.approx(3 / 8))
    assert logged["avspo/samples"] == 16.0  # the evicted groups add no sample

    session().reset()
    unfiltered = v1_stand_in(base_config, tmp_path / "unfiltered", make_batch)
    unfiltered.config.algorithm.avspo.threshold_mode = "never"
    fit_v1(unfiltered, (1,))
    (_, plain), = unfiltered.logged
    assert (plain["avspo/groups"], plain["avspo/acr"]) == (4.0, 0.75) and "avspo/filtered_groups" not in plain


def test_v1_trainer_warns_once_when_avspo_augments_nothing(tmp_path, base_config, make_batch, caplog):
    """verl's v1 PPOTrainer.step closes each global step once: a trigger that never opens (fixed threshold 1.0,
    ACR at most 1) is named after stagnation_steps=2 steps with collapsed groups, with its numbers."""
    session().reset()
    trainer = v1_stand_in(base_config, tmp_path, make_batch)
    trainer.config.algorithm.avspo.update({"threshold_mode": "fixed", "threshold_init": 1.0, "stagnation_acr": 0.0})
    with caplog.at_level(logging.WARNING, logger="avspo_plugin.verl"):
        fit_v1(trainer, range(1, 5))
    assert [data["avspo/augmented_groups"] for _, data in trainer.logged] == [0.0] * 4
    inert = [r.getMessage() for r in caplog.records if "AVSPO inert" in r.getMessage()]
    assert len(inert) == 1 and inert[0].startswith("AVSPO inert at step 3: virtual samples augmented no group on 3")
    assert "tau=1.000" in inert[0] and "threshold_mode=fixed" in inert[0]
    session().reset()
