"""AVSPOGRPOTrainer's scoring step against GRPOTrainer's own, on the same rewards (no training)."""

import logging

import numpy as np
import pytest
import torch
from trl import GRPOConfig, GRPOTrainer

from avspo_plugin.core.metrics import CALL_METRICS
from avspo_plugin.trl import AVSPOGRPOTrainer
from avspo_plugin.trl.conventions import local_rows, trl_advantages, weighted_rewards


def score(trainer, rewards, rows, inputs, parent=False):
    """One scoring call of the trainer (or of GRPOTrainer's method on it) with the given reward rows."""
    rewards.queue.append(rows)
    method = GRPOTrainer._generate_and_score_completions if parent else type(trainer)._generate_and_score_completions
    return method(trainer, inputs)


def continuous_rows(seed, collapsed_groups=()):
    values = np.random.default_rng(seed).random(16)
    for j in collapsed_groups:
        values[4 * j : 4 * j + 4] = 0.0
    return [float(v) for v in values]


@pytest.mark.parametrize("scale_rewards", ["group", "batch", "none"])
def test_without_virtual_samples_the_advantages_are_grpo_trainers_bit_for_bit(
    kit, make_trainer, generation_inputs, scale_rewards
):
    rewards = kit.PresetRewards()
    # fixed threshold 0.5: ACR 1/4 does not trigger; ACR 3/4 triggers only all_pass groups, and there are none.
    trainer = make_trainer(rewards, scale_rewards=scale_rewards, avspo_threshold_mode="fixed", avspo_augmented_collapses="all_pass")
    trainer.model.train()
    for seed, collapsed in [(0, ()), (1, (0,)), (2, (0, 1, 2))]:
        rows = continuous_rows(seed, collapsed)
        expected = score(trainer, rewards, rows, generation_inputs, parent=True)["advantages"]
        logged_by_parent = list(trainer._logs["advantages"])[-16:]
        ours = score(trainer, rewards, rows, generation_inputs)["advantages"]
        assert torch.equal(ours, expected)
        assert list(trainer._logs["advantages"])[-16:] == logged_by_parent
    assert trainer.avspo_session.state.step == 3
    metrics = trainer.avspo_session.pop_metrics()  # the three calls folded: rates averaged
    assert metrics["acr"] == pytest.approx((0.0 + 0.25 + 0.75) / 3)
    assert metrics["triggered"] == pytest.approx(1 / 3)  # ACR 3/4 > 0.5 in the third call only
    assert metrics["augmented_groups"] == 0.0


def test_collapsed_groups_get_the_translated_avspo_advantages(kit, make_trainer, generation_inputs):
    rewards = kit.PresetRewards()
    trainer = make_trainer(rewards, avspo_threshold_mode="fixed", avspo_threshold_init=0.2)
    trainer.model.train()
    rows = continuous_rows(3, collapsed_groups=(0,))
    rows[12:16] = [1.0] * 4
    state_before = trainer.avspo_session.state
    output = score(trainer, rewards, rows, generation_inputs)

    gathered = weighted_rewards(torch.tensor([[r] for r in rows]), torch.ones(1))
    expected = trl_advantages(gathered, 4, "group", trainer.avspo_config, state_before)
    assert torch.equal(output["advantages"], local_rows(expected.advantages, 0, 1))
    assert output["advantages"][:4].max() < 0 and output["advantages"][12:].min() > 0  # all-fail down, all-pass up
    # The completions table shows these advantages, not the parent's zeros.
    assert list(trainer._logs["advantages"])[-16:] == expected.advantages.tolist()
    assert trainer.avspo_session.state == expected.state and expected.state.step == 1
    metrics = trainer.avspo_session.pop_metrics()
    assert {name: metrics[name] for name in CALL_METRICS} == expected.metrics
    assert expected.metrics["augmented_groups"] == 0.5


def test_log_puts_aggregated_avspo_metrics_next_to_trls(kit, make_trainer, generation_inputs):
    rewards = kit.PresetRewards()
    trainer = make_trainer(rewards, avspo_threshold_mode="always")
    trainer.model.train()
    score(trainer, rewards, [0.0] * 16, generation_inputs)
    score(trainer, rewards, [0.0] * 4 + [0.0, 1.0] * 6, generation_inputs)
    logs = {"loss": 0.0}
    trainer.log(logs)
    assert logs["frac_reward_zero_std"] == pytest.approx((1.0 + 0.25) / 2)
    assert logs["avspo/acr"] == pytest.approx((1.0 + 0.25) / 2)  # rates: mean over the two calls
    assert logs["avspo/groups"] == 8  # counts: summed
    assert logs["avspo/acr_all_fail"] == pytest.approx((1.0 + 0.25) / 2)
    # Eq. 9: K = 4 at ACR 1 (4 groups augmented), 2 at ACR 1/4 (1 group); pooled over the augmented groups.
    assert logs["avspo/num_virtual"] == pytest.approx((4 * 4 + 2 * 1) / 5)
    assert trainer.state.log_history[-1]["avspo/threshold"] == 0.0
    assert trainer.avspo_session.pop_metrics() == {}
    logs = {"loss": 0.0}
    trainer.log(logs)
    assert not any(key.startswith("avspo/") for key in logs), "metrics leaked into the next log"


def test_evaluation_scores_with_the_current_threshold_without_moving_it(kit, make_trainer, generation_inputs):
    rewards = kit.PresetRewards()
    trainer = make_trainer(rewards, avspo_threshold_mode="adaptive", avspo_threshold_lr=0.5)
    trainer.model.train()
    score(trainer, rewards, continuous_rows(4, (0, 1)), generation_inputs)
    score(trainer, rewards, continuous_rows(5, (0, 1, 2)), generation_inputs)
    trained = trainer.avspo_session.state
    assert trained.tau != trainer.avspo_config.threshold_init
    trainer.model.eval()
    output = score(trainer, rewards, [0.0] * 16, generation_inputs)
    assert trainer.avspo_session.state == trained
    assert trainer._avspo_eval_metrics[0]["threshold"] == trained.tau
    assert output["advantages"].max() < 0  # ACR 1 > tau: every all-fail group augmented in evaluation too
    logs = {"eval_loss": 0.0}
    trainer.log(logs)
    assert logs["eval_avspo/acr"] == 1.0


def test_early_warnings_fire_once_and_flag_every_later_log(kit, make_trainer, generation_inputs, caplog):
    rewards = kit.PresetRewards()
    trainer = make_trainer(rewards, avspo_stagnation_acr=0.3, avspo_stagnation_steps=1, avspo_entropy_floor=2.0)
    trainer.model.train()
    flags = []
    for entropy in (1.0, 1.5, 1.0):
        score(trainer, rewards, [0.0] * 16, generation_inputs)  # ACR 1 > 0.3
        trainer._metrics["train"]["entropy"] = [entropy]
        logs = {"loss": 0.0}
        trainer.log(logs)
        flags.append((logs["avspo/stagnation"], logs["avspo/entropy_collapse"]))
    # Both streaks (one observation per logged step) exceed stagnation_steps=1 at their second observation.
    assert flags == [(0.0, 0.0), (1.0, 1.0), (1.0, 1.0)]
    messages = [record.getMessage() for record in caplog.records if record.name == "avspo_plugin.trl.trainer"]
    assert len(messages) == 2
    # No optimizer step ran: the logged step is global step 0.
    # Stagnation counts generation batches, named by the step they train (global_step + 1); the entropy
    # streak counts logged steps, named by global_step.
    assert messages[0].startswith("AVSPO stagnation at step 1") and messages[1].startswith("Entropy collapse at step 0")


def test_inert_avspo_warns_once_naming_its_numbers(kit, make_trainer, generation_inputs, caplog):
    """Four groups, one all-fail: ACR 0.25 never exceeds tau_0 = 0.5, so the trigger never opens."""
    rewards = kit.PresetRewards()
    trainer = make_trainer(rewards, avspo_threshold_mode="adaptive", avspo_stagnation_steps=2)
    trainer.model.train()
    for _ in range(4):
        score(trainer, rewards, continuous_rows(0, collapsed_groups=(1,)), generation_inputs)
        logs = {"loss": 0.0}
        trainer.log(logs)
        assert logs["avspo/augmented_groups"] == 0.0 and logs["avspo/acr"] == 0.25
    inert = [r.getMessage() for r in caplog.records if "AVSPO inert" in r.getMessage()]
    assert len(inert) == 1 and "virtual samples augmented no group on 3" in inert[0]
    assert "ACR 0.250" in inert[0] and "tau=0.500" in inert[0]


# Accuracy and format, each 0 or 1, summed by GRPOTrainer (rewards up to 2): groups collapsed at 2, 1 and 1,
# and a mixed one.
ACCURACY = [1.0] * 4 + [0.0] * 4 + [1.0, 0.0, 1.0, 0.0] + [1.0] * 4
FORMAT = [1.0] * 4 + [1.0] * 4 + [1.0, 1.0, 0.0, 0.0] + [0.0] * 4


def summed_reward_funcs(kit):
    accuracy, format_ = kit.PresetRewards(), kit.PresetRewards()
    accuracy.__name__, format_.__name__ = "accuracy", "format"
    return accuracy, format_


def score_summed(trainer, funcs, inputs, parent=False):
    for func, rows in zip(funcs, (ACCURACY, FORMAT)):
        func.queue.append(rows)
    method = GRPOTrainer._generate_and_score_completions if parent else type(trainer)._generate_and_score_completions
    return method(trainer, inputs)


@pytest.mark.parametrize("bounds", [{}, {"avspo_reward_high": 2.0}])
def test_monitor_only_runs_summed_rewards_outside_the_bounds(kit, make_trainer, generation_inputs, bounds):
    funcs = summed_reward_funcs(kit)
    trainer = make_trainer(list(funcs), use_avspo=False, **bounds)
    trainer.model.train()
    expected = score_summed(trainer, funcs, generation_inputs, parent=True)["advantages"]
    output = score_summed(trainer, funcs, generation_inputs)
    assert torch.equal(output["advantages"], expected)
    metrics = trainer.avspo_session.pop_metrics()
    assert metrics["acr"] == 0.75 and metrics["reward_mean"] == pytest.approx(20 / 16)
    # The kinds of collapse are named by the bounds: a group collapsed at another value is of neither.
    if bounds:  # [0, 2]: the group at 2 is all-pass, the two at 1 of neither kind
        assert (metrics["acr_all_fail"], metrics["acr_all_pass"]) == (0.0, 0.25)
    else:  # [0, 1]: the two groups at 1 count as all-pass, the one at 2 in neither
        assert (metrics["acr_all_fail"], metrics["acr_all_pass"]) == (0.0, 0.5)


def test_avspo_on_names_the_reward_functions_and_the_bounds_of_their_sum(kit, make_trainer, generation_inputs):
    funcs = summed_reward_funcs(kit)
    trainer = make_trainer(list(funcs), avspo_threshold_mode="adaptive")  # acting: virtual rewards need the bounds
    trainer.model.train()
    with pytest.raises(ValueError) as error:
        score_summed(trainer, funcs, generation_inputs)
    message = str(error.value)
    assert message.startswith(
        "AVSPO (train, global step 0): reward 2 of completion 0 in group 0 (5 in all) lies outside "
        "[avspo_reward_low, avspo_reward_high] = [0.0, 1.0], where strategy 'stratified' places virtual rewards"
    )
    assert "weighted sum of reward_funcs (reward_weights), 1 * accuracy (1) + 1 * format (1)," in message
    assert "with every function in [0, 1]: 0 to 2" in message and "avspo_threshold_mode=never" in message
    assert trainer.avspo_session.state.step == 0  # nothing was computed
    # With the bounds of the sum the same rewards run, and the collapsed groups are augmented.
    trainer = make_trainer(list(funcs), avspo_reward_high=2.0, avspo_threshold_mode="always")
    trainer.model.train()
    output = score_summed(trainer, funcs, generation_inputs)
    assert trainer.avspo_session.pop_metrics()["augmented_groups"] == 0.75
    assert output["advantages"][:4].min() > 0  # the group collapsed at 2 = reward_high is pushed up


def test_a_plain_grpo_config_is_refused_by_name(kit, tmp_path):
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to=[])
    with pytest.raises(TypeError, match=r"AVSPOGRPOConfig.*got GRPOConfig"):
        AVSPOGRPOTrainer(model=kit.build_model(), reward_funcs=kit.PresetRewards(), args=args)


# ------------------------------------------------------------------ the AVSPO state in checkpoints


def constant_reward(prompts, completions, **kwargs):
    return [0.0] * len(prompts)


def test_the_state_rides_on_transformers_callbacks_not_a_private_override(make_trainer):
    from transformers import TrainerCallback

    from avspo_plugin.trl.trainer import AVSPOStateCallback

    assert not {"_save_checkpoint", "_load_optimizer_and_scheduler", "_load_from_checkpoint"} & set(vars(AVSPOGRPOTrainer))
    trainer = make_trainer(constant_reward)
    assert issubclass(AVSPOStateCallback, TrainerCallback)
    assert trainer.avspo_state_callback in trainer.callback_handler.callbacks


@pytest.fixture
def checkpoint_1(make_trainer, tmp_path):
    """One training step saved as checkpoint-1 (with its avspo_state.json, written atomically)."""
    make_trainer(constant_reward, max_steps=1, save_strategy="steps", save_steps=1).train()
    checkpoint = tmp_path / "out" / "checkpoint-1"
    assert (checkpoint / "avspo_state.json").is_file()
    assert not [path.name for path in checkpoint.iterdir() if ".tmp" in path.name]
    return checkpoint


@pytest.mark.parametrize(
    "damage, problem",
    [
        (lambda text: "", "is empty: it is damaged or was cut short while written"),
        (lambda text: text[: len(text) // 2], "is not valid JSON"),
        (lambda text: text.replace('"streak": 0', '"streak": "0"', 1),
         r"cannot be resumed: avspo checkpoint state: field warnings\.\w+\.streak should be an integer, found str '0'"),
    ],
    ids=["empty", "cut short", "wrong type"],
)
def test_a_damaged_state_file_stops_the_resume_naming_it_and_what_to_do(make_trainer, checkpoint_1, damage, problem):
    from avspo_plugin.state_files import StateFileError

    path = checkpoint_1 / "avspo_state.json"
    path.write_text(damage(path.read_text()))
    resumed = make_trainer(constant_reward, max_steps=2)
    with pytest.raises(StateFileError, match=rf"^{path} {problem}.* delete {path} .*resume_from_checkpoint="):
        resumed.train(resume_from_checkpoint=str(checkpoint_1))
    assert resumed.state.global_step == 1  # stopped before any step of the resumed run


def test_a_resume_under_another_threshold_init_starts_over_and_names_the_file(make_trainer, checkpoint_1, caplog):
    path = checkpoint_1 / "avspo_state.json"
    resumed = make_trainer(constant_reward, max_steps=1, avspo_threshold_init=0.7)
    with caplog.at_level(logging.WARNING, logger="avspo_plugin.trl.trainer"):
        resumed.train(resume_from_checkpoint=str(checkpoint_1))
    (warning,) = [r.getMessage() for r in caplog.records if "was made under" in r.getMessage()]
    assert warning.startswith(f"AVSPO threshold state read from {path} was made under threshold_init=0.5; the config "
                              "in force has threshold_init=0.7: the threshold starts over")
    assert resumed.avspo_session.state.tau == 0.7


def test_the_trainer_says_at_construction_what_will_run(kit, make_trainer, capsys, monkeypatch):
    from avspo_plugin import launch

    monkeypatch.setattr(launch, "_ANNOUNCED", set())
    make_trainer(kit.PresetRewards())
    err = capsys.readouterr().err
    assert "avspo (TRL): acting (the paper's AVSPO): virtual samples in collapsed groups' mean and std, " \
           "threshold_mode=adaptive" in err and launch.evidence_sentence() in err
