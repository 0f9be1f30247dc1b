"""End to end: TRL trains the tiny policy on CPU with AVSPOGRPOTrainer; logs, completions table, resume."""

import json

import pandas as pd
import pytest
import torch

from avspo_plugin.core import AVSPOSession
from avspo_plugin.names import STATE_FILE
from avspo_plugin.openrlhf import SESSION as OPENRLHF_SESSION
from avspo_plugin.openrlhf import load_checkpoint_state
from avspo_plugin.trl import AVSPOGRPOTrainer


def task_reward(prompts, completions, **kwargs):
    """0 on the 'hard' prompts, whatever the completion (their groups always collapse); else the share of
    distinct characters in a 6-character budget, which varies between completions."""
    return [
        0.0 if prompt.startswith("hard") else len(set(completion)) / 6
        for prompt, completion in zip(prompts, completions)
    ]


class RecordingTrainer(AVSPOGRPOTrainer):
    """Keeps the advantages handed on to the loss, with their prompts, per generation batch."""

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        self.used = getattr(self, "used", []) + [([row["prompt"] for row in inputs], output["advantages"].clone())]
        return output


def test_training_logs_avspo_metrics_and_pushes_collapsed_groups(make_trainer, tmp_path):
    trainer = make_trainer(
        task_reward,
        trainer_class=RecordingTrainer,
        avspo_threshold_mode="fixed",
        avspo_threshold_init=0.2,
        log_completions=True,
    )
    trainer.train()

    steps = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert [entry["step"] for entry in steps] == [1, 2, 3]
    assert len(trainer.used) == 3
    pushed = 0
    for entry, (prompts, advantages) in zip(steps, trainer.used):
        assert "frac_reward_zero_std" in entry
        is_hard = torch.tensor([prompt.startswith("hard") for prompt in prompts])
        hard_groups = int(is_hard.sum()) // 4
        assert entry["avspo/groups"] == 4
        assert hard_groups / 4 <= entry["avspo/acr_all_fail"] <= entry["avspo/acr"] <= 1.0
        assert entry["avspo/threshold"] == 0.2
        assert entry["avspo/triggered"] == float(entry["avspo/acr"] > 0.2)
        if entry["avspo/triggered"]:
            assert entry["avspo/augmented_groups"] == entry["avspo/acr"]
            assert entry["avspo/num_virtual"] >= 2  # Eq. 9: ceil(4 * ACR**0.5) with ACR >= 1/4
            # Collapsed all-fail groups are pushed down, where GRPO would give them 0.
            assert bool((advantages[is_hard] < 0).all())
            pushed += int(is_hard.sum())
    assert pushed > 0, "no step sampled a hard prompt: the test would prove nothing"

    # The completions table of each step shows the advantages that the loss received.
    for step, (prompts, advantages) in enumerate(trainer.used, start=1):
        table = pd.read_parquet(tmp_path / "out" / "completions" / f"completions_{step:05d}.parquet")
        assert table["prompt"].tolist() == prompts
        assert table["advantage"].tolist() == advantages.tolist()
        assert (table.loc[table["prompt"].str.startswith("hard"), "task_reward"] == 0).all()


SAVING = dict(avspo_threshold_mode="adaptive", avspo_threshold_init=0.3, avspo_threshold_lr=0.5, save_strategy="steps",
              save_steps=2)


@pytest.fixture
def straight_run(make_trainer, tmp_path):
    """Three steps with a checkpoint at step 2: (the run's avspo/threshold per step, checkpoint-2)."""
    straight = make_trainer(task_reward, **SAVING)
    straight.train()
    thresholds = {entry["step"]: entry["avspo/threshold"] for entry in straight.state.log_history if "loss" in entry}
    assert thresholds[3] != 0.3, "the threshold should have moved by step 3 for this test to mean anything"
    return thresholds, tmp_path / "out" / "checkpoint-2"


def resume(make_trainer, checkpoint):
    resumed = make_trainer(task_reward, **SAVING)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    # log_history comes back from the checkpoint with steps 1-2; step 3 is the resumed run's own.
    steps = [entry for entry in resumed.state.log_history if "loss" in entry]
    assert [entry["step"] for entry in steps] == [1, 2, 3]
    return resumed, steps


def test_resumed_training_restores_the_adaptive_threshold(make_trainer, straight_run):
    thresholds, checkpoint = straight_run
    saved = json.loads((checkpoint / STATE_FILE).read_text())
    assert saved["threshold"]["step"] == 2 and saved["threshold"]["tau"] == thresholds[3]
    assert set(saved["warnings"]) == {"stagnation", "entropy_collapse", "inert_trigger"}

    resumed, steps = resume(make_trainer, checkpoint)
    assert resumed.avspo_session.state.step == 3
    assert steps[-1]["avspo/threshold"] == thresholds[3]


def test_the_state_file_is_the_schema_of_every_host(straight_run):
    """avspo_state.json is AVSPOSession.state_dict(): what verl's avspo_state.json and OpenRLHF's client_states hold."""
    _, checkpoint = straight_run
    saved = json.loads((checkpoint / STATE_FILE).read_text())
    assert (saved["format"], saved["logged_steps"]) == (1, 2)
    session = AVSPOSession()
    session.load_state_dict(saved)
    assert session.state_dict() == saved
    OPENRLHF_SESSION.reset()
    try:
        load_checkpoint_state({"avspo": saved})
        assert OPENRLHF_SESSION.state_dict() == saved
    finally:
        OPENRLHF_SESSION.reset()


def test_a_state_file_of_the_earlier_trl_schema_is_refused_naming_the_key_now(make_trainer, straight_run):
    _, checkpoint = straight_run
    saved = json.loads((checkpoint / STATE_FILE).read_text())
    # What the TRL adapter wrote before it shared the core's session: threshold and streaks, no format.
    (checkpoint / STATE_FILE).write_text(json.dumps({"threshold": saved["threshold"], "monitor": saved["warnings"]}))
    message = rf"{checkpoint / STATE_FILE} cannot be resumed: avspo checkpoint state: 'monitor' is now 'warnings'"
    with pytest.raises(ValueError, match=message):
        make_trainer(task_reward, **SAVING).train(resume_from_checkpoint=str(checkpoint))


def test_a_state_file_of_an_unknown_format_is_refused_by_path(make_trainer, straight_run):
    _, checkpoint = straight_run
    saved = json.loads((checkpoint / STATE_FILE).read_text())
    (checkpoint / STATE_FILE).write_text(json.dumps({**saved, "format": 2}))
    message = rf"{checkpoint / STATE_FILE} cannot be resumed: avspo checkpoint state has format 2; .* reads format 1"
    with pytest.raises(ValueError, match=message):
        make_trainer(task_reward, **SAVING).train(resume_from_checkpoint=str(checkpoint))
