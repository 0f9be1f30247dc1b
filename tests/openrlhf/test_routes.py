"""Both routes on OpenRLHF's real code: the patched 0.11.2 release, and the runtime route on the
unmodified 0.11.2 and 0.10.1 releases inside a Ray actor whose worker got avspo's setup hook.

Reports come from host.py; here they are compared with the core, with OpenRLHF's own group_norm,
and with each other.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from avspo_plugin.config import AVSPOConfig, NotGiven
from avspo_plugin.core import ThresholdState, compute_group_advantages
from avspo_plugin.core.metrics import CALL_METRICS
from avspo_plugin.openrlhf.args import HOST_DEFAULTS
from avspo_plugin.openrlhf.worker_setup import SETUP_HOOK

EXPERIENCE_FIELDS = ("advantages", "returns", "return", "group_reward_std", "reward", "action_mask")


@pytest.fixture(scope="module", params=["patched", "runtime"])
def route(request, patched_report, runtime_report) -> dict:
    """The 0.11.2 report of one route."""
    return patched_report if request.param == "patched" else runtime_report["dotted"]


def core_steps(host, config: AVSPOConfig, batches) -> list:
    """The core on the scenario's rewards in prompt order, one call per batch, state carried."""
    state, results = ThresholdState.initial(config), []
    for kind, prompts, seed in batches:
        rewards = host.prompt_rewards(kind, prompts, seed)
        index = torch.arange(prompts).repeat_interleave(host.SAMPLES)
        result = compute_group_advantages(rewards, index, config, state)
        state = result.state
        results.append(result)
    return results


def assert_core_advantages(step: dict, expected: torch.Tensor) -> None:
    """Every response token of row i carries A_i (KL coefficient 0: the return is the advantage)."""
    for experience in step["experiences"]:
        per_row = expected[experience["index"]].unsqueeze(1)
        assert torch.equal(experience["advantages"], per_row * experience["action_mask"])
        assert torch.equal(experience["returns"], experience["advantages"])


def assert_same_experiences(ours: list, theirs: list, exact: bool = True) -> None:
    assert [e["index"] for e in ours] == [e["index"] for e in theirs]
    for mine, other in zip(ours, theirs):
        for field in EXPERIENCE_FIELDS:
            if exact or field in ("group_reward_std", "reward", "action_mask"):
                assert torch.equal(mine[field], other[field]), field
            else:
                torch.testing.assert_close(mine[field], other[field], rtol=1e-6, atol=1e-6)


def avspo_metrics(stats: dict) -> dict:
    """The core's metrics in a status dict (the early-warning flags left out)."""
    return {name: stats[f"avspo/{name}"] for name in CALL_METRICS if f"avspo/{name}" in stats}


def test_triggered_advantages_are_the_cores(route, host):
    _argv, batches, _ = host.DOTTED_SCENARIOS["trigger"]
    (expected,) = core_steps(host, AVSPOConfig(**HOST_DEFAULTS, threshold_mode="always"), batches)
    (step,) = route["scenarios"]["trigger"]
    assert expected.metrics["augmented_groups"] > 0  # collapsed groups got virtual samples
    assert_core_advantages(step, expected.advantages)
    assert avspo_metrics(step["stats"]) == expected.metrics


def test_untriggered_avspo_is_group_norm_bit_for_bit_on_binary_rewards(route):
    (avspo,) = route["scenarios"]["never"]
    (group_norm,) = route["scenarios"]["group_norm"]
    assert avspo_metrics(avspo["stats"])["acr"] > 0  # collapsed groups were there to augment
    assert_same_experiences(avspo["experiences"], group_norm["experiences"], exact=True)


def test_untriggered_avspo_is_group_norm_with_reward_shaping(route):
    """Length penalty, KL penalty and reward clip around the group step: equal up to float32 rounding."""
    (avspo,) = route["scenarios"]["shaped_never"]
    (group_norm,) = route["scenarios"]["shaped_group_norm"]
    assert avspo_metrics(avspo["stats"])["acr"] > 0
    assert_same_experiences(avspo["experiences"], group_norm["experiences"], exact=False)


def test_shaped_trigger_changes_only_collapsed_groups(route, host):
    (avspo,) = route["scenarios"]["shaped_trigger"]
    (group_norm,) = route["scenarios"]["shaped_group_norm"]
    changed = set()
    for mine, other in zip(avspo["experiences"], group_norm["experiences"]):
        for row, a, b in zip(mine["index"], mine["advantages"], other["advantages"]):
            if not torch.allclose(a, b, atol=1e-6):
                changed.add(row // host.SAMPLES)
    # The host gives prompts 0 and 1 collapsed groups that survive the length penalty.
    assert changed == {0, 1}
    assert avspo_metrics(avspo["stats"])["augmented_groups"] == pytest.approx(2 / 6)


def test_adaptive_threshold_state_carries_across_steps(route, host):
    _argv, batches, _ = host.DOTTED_SCENARIOS["adaptive"]
    config = AVSPOConfig(**HOST_DEFAULTS, threshold_mode="adaptive", threshold_init=0.2)
    expected = core_steps(host, config, batches)
    steps = route["scenarios"]["adaptive"]
    assert [avspo_metrics(step["stats"]) for step in steps] == [result.metrics for result in expected]
    for step, result in zip(steps, expected):
        assert_core_advantages(step, result.advantages)
    assert len({step["stats"]["avspo/threshold"] for step in steps}) > 1  # Eq. 12 moved tau
    saved = route["checkpoint"]["saved"]
    assert saved["threshold"] == expected[-1].state.state_dict()
    assert saved["logged_steps"] == len(batches)


def test_metrics_join_the_status_dict_and_reach_tensorboard(route):
    (step,) = route["scenarios"]["trigger"]
    assert {f"avspo/{name}" for name in CALL_METRICS} <= set(step["stats"])
    assert step["stats"]["avspo/stagnation"] == 0.0  # the early warning's flag, not fired
    assert "rollout/reward_mean" in step["stats"]  # OpenRLHF's own rollout stats are kept
    assert route["logged"]["avspo/entropy_collapse"] == 0.0  # from the actor's entropy_loss
    names = [*CALL_METRICS, "stagnation", "entropy_collapse"]
    assert set(route["tensorboard_tags"]) >= {f"train/avspo/{name}" for name in names}
    (group_norm,) = route["scenarios"]["group_norm"]
    assert not [key for key in group_norm["stats"] if key.startswith("avspo/")]  # other estimators: none


def test_threshold_state_goes_through_checkpoint_client_states(route):
    checkpoint = route["checkpoint"]
    assert checkpoint["client_states"]["avspo"] == checkpoint["saved"]
    assert checkpoint["restored"] == checkpoint["saved"]
    assert checkpoint["saved"]["warnings"]["entropy_collapse"]["streak"] == 1  # entropy 0.2 < entropy_floor 0.5


def test_options_are_parsed_with_avspo_config_defaults(route):
    assert route["estimator"] == "avspo"
    options = route["options"]
    # every key's flag
    assert set(options) == set(AVSPOConfig.keys())
    given = {"strategy": "opposite", "num_virtual": 2, "norm_by_std": False}
    for field in dataclasses.fields(AVSPOConfig):
        # a flag left out holds NotGiven(its default), told from a value given equal to it
        expected = given.get(field.name, NotGiven(HOST_DEFAULTS.get(field.name, field.default)))
        assert options[field.name] == expected and type(options[field.name]) is type(expected), field.name
    assert options["epsilon"] == NotGiven(1e-9)  # OpenRLHF's group_norm epsilon, not AVSPOConfig's 1e-6


def test_help_lists_the_estimator_and_every_option(route):
    help_ = route["help"]
    assert help_["exit"] == 0
    assert "flash_reinforce,avspo}" in help_["stdout"]
    for key in AVSPOConfig.keys():
        assert f"--algo.advantage.avspo.{key}" in help_["stdout"]


def test_argument_parser_is_left_as_found(route):
    assert route["argument_parser_restored"]


def test_patched_route_rejects_bad_options(patched_report):
    assert patched_report["bad_alpha"] == {
        "error": "ConfigError",
        "message": "--algo.advantage.avspo: alpha=2.0 is invalid: allowed a number in (0.0, 1.0]",
    }
    assert patched_report["one_sample"] == {
        "error": "AssertionError",
        "message": "avspo requires n_samples_per_prompt > 1",
    }


def test_runtime_route_rejects_bad_options_before_ray_starts(runtime_report):
    bad_alpha, one_sample = runtime_report["dotted"]["bad_alpha"], runtime_report["dotted"]["one_sample"]
    assert bad_alpha["exit"] == 2
    assert "error: --algo.advantage.avspo: alpha=2.0 is invalid" in bad_alpha["stderr"]
    assert one_sample["exit"] == 2
    assert "it needs --rollout.n_samples_per_prompt >= 2, got 1" in one_sample["stderr"]


def test_runtime_route_installs_in_every_worker_through_ray_init(runtime_report, patched_report):
    assert runtime_report["checked_versions"] == ["0.11.2", "0.10.1"]  # each release's version checked for real
    assert runtime_report["hooked_before_import"]  # the worker's setup hook ran before OpenRLHF was imported
    assert all(runtime_report["installed"].values()), runtime_report["installed"]
    (patched_init,) = patched_report["ray_init"]
    runtime_init, preflight = runtime_report["dotted"]["ray_init"]
    assert preflight == "preflight"  # run right after ray.init, before get_strategy (any model)
    # OpenRLHF's own runtime_env is kept; the setup hook is added.
    assert runtime_init["runtime_env"] == {**patched_init["runtime_env"], "worker_process_setup_hook": SETUP_HOOK}


@pytest.mark.parametrize("scenario", ["trigger", "never", "group_norm", "shaped_never", "shaped_group_norm",
                                      "shaped_trigger", "adaptive"])  # fmt: skip
def test_runtime_route_equals_patched_release(scenario, patched_report, runtime_report):
    patched, runtime = patched_report["scenarios"][scenario], runtime_report["dotted"]["scenarios"][scenario]
    assert len(patched) == len(runtime)
    for ours, theirs in zip(runtime, patched):
        assert ours["stats"] == theirs["stats"]
        assert_same_experiences(ours["experiences"], theirs["experiences"], exact=True)


def test_flat_flag_release_runtime_route(runtime_report, host):
    flat = runtime_report["flat"]
    assert flat["threshold_mode"] == "always"  # --avspo_threshold_mode
    _argv, batches, _ = host.FLAT_SCENARIOS["trigger"]
    (expected,) = core_steps(host, AVSPOConfig(**HOST_DEFAULTS, threshold_mode="always"), batches)
    (step,) = flat["scenarios"]["trigger"]
    assert_core_advantages(step, expected.advantages)
    assert avspo_metrics(step["stats"]) == expected.metrics
    (avspo,) = flat["scenarios"]["never"]
    (group_norm,) = flat["scenarios"]["group_norm"]
    assert_same_experiences(avspo["experiences"], group_norm["experiences"], exact=True)


def test_documented_command_parses(runtime_report):
    """The ``avspo openrlhf`` command of docs/using/openrlhf.md passes OpenRLHF's own argument checks."""
    assert runtime_report["documented_command"] == {
        "estimator": "avspo",
        "n_samples_per_prompt": 8,
        "threshold_mode": "always",
    }
