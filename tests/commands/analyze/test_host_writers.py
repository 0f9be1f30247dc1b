"""Files written by the hosts' own writers, read back to the ACR they carry.

verl's dump writers (the v1 PPOTrainer's and the legacy RayPPOTrainer's
``_write_generations``), verl's ``Tracking`` with the file and tensorboard backends, and
transformers' ``TrainerState.save_to_json`` (TRL's trainer_state.json) produce the inputs
here, so a format change in a host release shows up as a failure.
"""

from __future__ import annotations

import uuid

import numpy as np
from commands.analyze.generated_runs import avspo_rows, draw_run, truth

from avspo_plugin.commands.analyze.run_logs import load
from avspo_plugin.commands.analyze.timeline import sample_timeline, scalar_timeline
from avspo_plugin.config import AVSPOConfig

MONITOR = AVSPOConfig(threshold_mode="never")
RUN = draw_run(8, seed=31)
TRUTH = truth(RUN)


def flat(groups):
    inputs = [prompt for prompt, rewards in groups for _ in rewards]
    scores = [reward for _, rewards in groups for reward in rewards]
    return inputs, scores


def acr_of(path):
    loaded = load(path)
    if loaded.samples is not None:
        return sample_timeline(loaded.samples, MONITOR, AVSPOConfig(), str(path))[0], loaded
    return scalar_timeline(loaded.scalars, None, MONITOR, str(path)), loaded


def test_verl_v1_rollout_dump(tmp_path):
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    for step, groups in RUN.items():
        inputs, scores = flat(groups)
        uids = [uuid.uuid4().hex for _ in groups]  # v1 draws a uid each time a prompt is sampled
        keys = [f"{uid}_{session}_0" for uid, (_, rewards) in zip(uids, groups) for session in range(len(rewards))]
        # One padding row, as upsample_batch_to_divisible_size adds in the v1 trainer.
        inputs, scores = inputs + [""], scores + [0.0]
        keys.append("pad" + uuid.uuid4().hex + "_0_0")
        PPOTrainer._write_generations(inputs, [f"out {i}" for i in range(len(inputs))], [None] * len(inputs),
                                      scores, {"uid": keys}, str(tmp_path / "rollouts"), step)
    timeline, loaded = acr_of(tmp_path / "rollouts")
    np.testing.assert_allclose(timeline.series["acr"], TRUTH.acr)
    np.testing.assert_allclose(timeline.series["acr_all_pass"], TRUTH.all_pass)
    assert "8 padding row(s)" in " ".join(loaded.notes)


def test_verl_legacy_rollout_dump_has_no_uid(tmp_path):
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    for step, groups in RUN.items():
        inputs, scores = flat(groups)
        RayPPOTrainer._write_generations(inputs, ["x"] * len(inputs), ["7"] * len(inputs), scores,
                                         {"acc": [s > 0 for s in scores]}, str(tmp_path / "rollouts"), step)
    timeline, loaded = acr_of(tmp_path / "rollouts")
    assert loaded.samples.grouping.startswith("prompt text")
    np.testing.assert_allclose(timeline.series["acr"], TRUTH.acr)
    np.testing.assert_allclose(timeline.series["acr_all_fail"], TRUTH.all_fail)


def test_verl_tracking_file_and_tensorboard_backends(tmp_path, monkeypatch):
    from verl.utils.tracking import Tracking

    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "metrics.jsonl"))
    monkeypatch.setenv("TENSORBOARD_DIR", str(tmp_path / "tensorboard"))
    tracker = Tracking("project", "experiment", default_backend=["file", "tensorboard"])
    for step, data in avspo_rows(TRUTH).items():
        tracker.log(data, step)
    tracker.finish()
    for path in (tmp_path / "metrics.jsonl", tmp_path / "tensorboard"):
        timeline, _ = acr_of(path)
        assert timeline.exact and timeline.steps.tolist() == TRUTH.steps
        np.testing.assert_allclose(timeline.series["acr"], TRUTH.acr, rtol=1e-6)


def test_transformers_trainer_state(tmp_path):
    from transformers import TrainerState

    history = [{"step": step, "loss": 0.1, "reward": r, "frac_reward_zero_std": a}
               for step, a, r in zip(TRUTH.steps, TRUTH.acr, TRUTH.reward_mean)]
    TrainerState(global_step=TRUTH.steps[-1], log_history=history).save_to_json(str(tmp_path / "trainer_state.json"))
    timeline, loaded = acr_of(tmp_path)
    assert loaded.format == "TRL trainer_state.json"
    np.testing.assert_allclose(timeline.series["acr"], TRUTH.acr)
