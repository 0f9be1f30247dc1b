"""The group step both routes share, the per-process session behind it, and the hook's version check."""

from __future__ import annotations

import types
from types import SimpleNamespace

import pytest
import torch

from avspo_plugin.config import AVSPOConfig
from avspo_plugin.core import ThresholdState, compute_group_advantages
from avspo_plugin.openrlhf import (
    SESSION,
    checkpoint_state,
    entropy_collapse_flag,
    group_advantages,
    load_checkpoint_state,
    rollout_stats,
)
from avspo_plugin.openrlhf.worker_setup import patch_experience_maker, patch_trainer


@pytest.fixture(autouse=True)
def fresh_session():
    SESSION.reset()
    yield
    SESSION.reset()


def openrlhf_args(**avspo) -> SimpleNamespace:
    advantage = SimpleNamespace(estimator="avspo", avspo=SimpleNamespace(**avspo))
    return SimpleNamespace(algo=SimpleNamespace(advantage=advantage), rollout=SimpleNamespace(n_samples_per_prompt=4))


def grouped_rewards(seed: int) -> torch.Tensor:
    rewards = (torch.rand(6, 4, generator=torch.Generator().manual_seed(seed)) < 0.5).float()
    rewards[0], rewards[1] = 0.0, 1.0
    return rewards


def test_group_step_is_the_core_on_prompt_rows():
    rewards = grouped_rewards(0)
    advantages = group_advantages(rewards, openrlhf_args(threshold_mode="always"))
    config = AVSPOConfig(threshold_mode="always", epsilon=1e-9)
    expected = compute_group_advantages(
        rewards.reshape(-1), torch.arange(6).repeat_interleave(4), config, ThresholdState.initial(config)
    )
    assert advantages.shape == rewards.shape and advantages.dtype == rewards.dtype
    assert torch.equal(advantages.reshape(-1), expected.advantages)
    assert bool((advantages[:2] != 0).all())  # the collapsed rows got virtual samples
    stats = rollout_stats()
    assert stats == {**{f"avspo/{name}": value for name, value in expected.metrics.items()}, "avspo/stagnation": 0.0}
    assert rollout_stats() == {}  # popped


def test_untriggered_group_step_is_openrlhf_group_norm_on_binary_rewards():
    rewards = grouped_rewards(1)
    group_norm = (rewards - rewards.mean(-1, keepdim=True)) / (rewards.std(-1, keepdim=True) + 1e-9)
    assert torch.equal(group_advantages(rewards, openrlhf_args(threshold_mode="never")), group_norm)


def test_state_carries_across_steps_and_through_a_checkpoint():
    args = openrlhf_args(threshold_mode="adaptive", threshold_init=0.2)
    assert checkpoint_state() == {}
    for seed in range(3):
        group_advantages(grouped_rewards(seed), args)
    saved = checkpoint_state()
    assert saved["avspo"]["threshold"]["step"] == 3
    metrics = rollout_stats()
    assert metrics["avspo/groups"] == 18  # three calls fold into one logged step
    SESSION.reset()
    load_checkpoint_state({"episode": 0, **saved})
    assert checkpoint_state() == saved
    load_checkpoint_state({"episode": 0})  # a checkpoint from before avspo: state kept
    assert checkpoint_state() == saved


def test_inert_avspo_warns_once_naming_its_numbers(caplog):
    """Four prompts, one all-fail: ACR 0.25 never exceeds tau_0 = 0.5, so no group is ever augmented."""
    args = openrlhf_args(threshold_mode="adaptive", stagnation_steps=2)
    rewards = torch.tensor([[0.0] * 4, [1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    for _ in range(4):
        group_advantages(rewards, args)
        assert rollout_stats()["avspo/augmented_groups"] == 0.0
    inert = [r.getMessage() for r in caplog.records if "AVSPO inert" in r.getMessage()]
    assert len(inert) == 1 and inert[0].startswith("AVSPO inert at step 3: virtual samples augmented no group on 3")
    assert "ACR 0.250" in inert[0] and "tau=0.500" in inert[0] and "threshold_mode=always augments" in inert[0]


def test_early_warnings_fire_once_and_stay_flagged(caplog):
    args = openrlhf_args(threshold_mode="never", stagnation_acr=0.2, stagnation_steps=1, entropy_floor=0.5)
    assert entropy_collapse_flag({"entropy_loss": 0.1}) == {}  # no avspo step yet: not an avspo run
    flags = []
    for seed in range(3):
        group_advantages(grouped_rewards(seed), args)  # ACR >= 2/6 every step
        stats = rollout_stats()
        flags.append((stats["avspo/stagnation"], entropy_collapse_flag({"entropy_loss": 0.1})))
    assert flags == [(0.0, {"avspo/entropy_collapse": 0.0}), (1.0, {"avspo/entropy_collapse": 1.0}),
                     (1.0, {"avspo/entropy_collapse": 1.0})]  # fmt: skip
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 2
    assert warnings[0].startswith("AVSPO stagnation at step 2") and warnings[1].startswith("Entropy collapse at step 2")
    assert entropy_collapse_flag({"policy_loss": 1.0}) == {}  # entropy not logged: nothing observed
    saved = checkpoint_state()
    SESSION.reset()
    load_checkpoint_state(saved)
    assert checkpoint_state() == saved  # streaks and fired steps resume too


def test_checkpoint_state_from_another_version_is_refused():
    with pytest.raises(ValueError, match=r"avspo checkpoint state lacks \['logged_steps', 'warnings'\]"):
        load_checkpoint_state({"avspo": {"threshold": None}})


@pytest.mark.parametrize("shape", [(24,), (24, 1)])
def test_group_step_needs_groups(shape):
    with pytest.raises(ValueError, match=r"n_samples_per_prompt >= 2, got shape"):
        group_advantages(torch.zeros(shape), openrlhf_args())


def summed_rewards() -> torch.Tensor:
    """A reward_func returning accuracy + format (each 0 or 1): rows collapsed at 2, 1 and 0, and a mixed one."""
    return torch.tensor([[2.0] * 4, [1.0] * 4, [0.0] * 4, [0.0, 1.0, 2.0, 1.0]])


def test_monitor_only_runs_summed_rewards_outside_the_bounds():
    rewards = summed_rewards()
    group_norm = (rewards - rewards.mean(-1, keepdim=True)) / (rewards.std(-1, keepdim=True) + 1e-9)
    advantages = group_advantages(rewards, openrlhf_args(threshold_mode="never"))
    torch.testing.assert_close(advantages, group_norm, atol=1e-6, rtol=0)
    stats = rollout_stats()
    assert stats["avspo/acr"] == 0.75
    # Named by the bounds [0, 1]: the row at 0 all-fail, the row at 1 all-pass, the row at 2 in neither.
    assert (stats["avspo/acr_all_fail"], stats["avspo/acr_all_pass"]) == (0.25, 0.25)


def test_avspo_on_names_the_reward_source_and_how_to_bound_a_sum():
    args = openrlhf_args(threshold_mode="adaptive")  # acting: virtual rewards need the bounds
    args.reward = SimpleNamespace(remote_url="reward_func.py", model_name_or_path=None, overlong_buffer_len=64.0,
                                  stop_properly_penalty_coef=None)  # fmt: skip
    with pytest.raises(ValueError) as error:
        group_advantages(summed_rewards(), args)
    message = str(error.value)
    assert message.startswith(
        "reward 2 of prompt row 0, sample 0 (5 in all) lies outside [--algo.advantage.avspo.reward_low, "
        "--algo.advantage.avspo.reward_high] = [0.0, 1.0], where strategy 'stratified' places virtual rewards; the "
        "reward is what --reward.remote_url reward_func.py returned, after OpenRLHF's length penalties "
        "(--reward.overlong_buffer_len 64.0)"
    )
    assert "the sum of their lowest and of their highest values" in message
    assert "--algo.advantage.avspo.threshold_mode=never to monitor ACR only" in message
    assert SESSION.state is None  # nothing computed
    # With the bounds of the sum the run goes on, and every collapsed row is augmented.
    group_advantages(summed_rewards(), openrlhf_args(reward_high=2.0, threshold_mode="always"))
    assert rollout_stats()["avspo/augmented_groups"] == 0.75


def test_bad_rewards_are_named_with_flat_flags_and_a_reward_model():
    rewards = grouped_rewards(0)
    rewards[2, 1] = 3.0
    args = SimpleNamespace(advantage_estimator="avspo", n_samples_per_prompt=4, reward_pretrain="my/rm", avspo_reward_high=1.0,
                           avspo_threshold_mode="always")
    expected = (r"^reward 3 of prompt row 2, sample 1 \(1 in all\) lies outside \[--avspo_reward_low, --avspo_reward_high\].*"
                r"the reward is the score of the reward model --reward_pretrain my/rm, ")  # fmt: skip
    with pytest.raises(ValueError, match=expected):
        group_advantages(rewards, args)


def test_hook_refuses_releases_without_the_methods_it_wraps():
    module = types.ModuleType("openrlhf.trainer.ppo_utils.experience_maker")
    with pytest.raises(RuntimeError, match=r"lacks RemoteExperienceMaker in .*supports OpenRLHF 0\.9\.9 to 0\.11\.2"):
        patch_experience_maker(module)
    module = types.ModuleType("openrlhf.trainer.ppo_trainer")
    module.BasePPOTrainer = type("BasePPOTrainer", (), {"_compute_rollout_stats": lambda self, e: {}})
    with pytest.raises(RuntimeError, match=r"BasePPOTrainer\.save_logs_and_checkpoints, "):
        patch_trainer(module)


class Experiences(SimpleNamespace):
    """What the wrapper reads of OpenRLHF's experiences: the rollout rows and their rewards."""


def maker_module(compute_reward_calls_per_experience: int) -> types.ModuleType:
    """An experience-maker module whose method calls compute_reward the given number of times per experience."""
    module = types.ModuleType("openrlhf.trainer.ppo_utils.experience_maker")
    module.compute_reward = lambda reward, *args, **kwargs: reward

    class RemoteExperienceMaker:
        def compute_advantages_and_returns(self, experiences):
            for experience in experiences:
                for _ in range(compute_reward_calls_per_experience):
                    experience.advantages = module.compute_reward(experience.rewards.clone())
            return experiences

    module.RemoteExperienceMaker = RemoteExperienceMaker
    return module


@pytest.mark.parametrize("calls,message", [(0, r"called compute_reward 0 time\(s\) for 2 experiences"),
                                           (2, r"called compute_reward a 3th time")])  # fmt: skip
def test_the_wrapper_refuses_a_method_that_does_not_call_compute_reward_once_per_experience(calls, message):
    module = maker_module(calls)
    patch_experience_maker(module)
    maker = module.RemoteExperienceMaker()
    maker.strategy, maker.advantage_estimator = SimpleNamespace(args=openrlhf_args()), "avspo"
    rewards = grouped_rewards(0).reshape(-1)
    experiences = [Experiences(index=list(range(12)), rewards=rewards[:12]),
                   Experiences(index=list(range(12, 24)), rewards=rewards[12:])]  # fmt: skip
    with pytest.raises(RuntimeError, match=message + r".*the runtime route supports OpenRLHF 0\.9\.9 to 0\.11\.2"):
        maker.compute_advantages_and_returns(experiences)
    assert maker.advantage_estimator == "avspo" and maker.strategy.args.algo.advantage.estimator == "avspo"
    assert module.compute_reward.__name__ == "<lambda>"  # the module's own function is back



def test_the_first_call_says_what_runs_once(capsys, monkeypatch):
    from avspo_plugin import launch

    monkeypatch.setattr(launch, "_ANNOUNCED", set())
    rewards = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0]])
    group_advantages(rewards, openrlhf_args(threshold_mode="always"))
    group_advantages(rewards, openrlhf_args(threshold_mode="always"))
    assert capsys.readouterr().err.count("avspo (OpenRLHF): acting: virtual samples in collapsed groups' mean and "
                                         "std, threshold_mode=always, every collapsed group at every step") == 1
