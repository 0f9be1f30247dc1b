"""The verl functions the plugin wraps: all in place on the installed verl; a missing or changed one
is a warning naming it and verl's version, and a run that selects avspo refuses to start."""

import logging
import re
import sys
import types

import pytest
from hydra import compose, initialize_config_module

from avspo_plugin.config import ConfigError
from avspo_plugin.verl import checkpoint, hooks, launch_guards, plugin_process, versions
from avspo_plugin.verl.run_config import AVSPO, MONITOR, misspelt_block_problem


@pytest.fixture(scope="module")
def avspo_run_config():
    with initialize_config_module("avspo_plugin.verl.config", version_base=None):
        return compose("avspo_trainer")


def test_every_hook_is_in_place_on_the_installed_verl():
    status = hooks.hook_status(load=True)
    assert len(status) == len(hooks.HOOKS) == 12
    assert set(status.values()) == {"in place"}, status
    for trainer in ("v1", "legacy"):
        hooks.require_hooks(trainer, AVSPO)
        hooks.require_hooks(trainer, MONITOR)


def test_a_run_places_only_the_hooks_its_config_uses(fresh_verl_process):
    """In a fresh verl process (tests/fresh_interpreter.py, FRESH_VERL_PROCESS): importing the plugin places the
    launcher's and the trainers' entry hooks; a grpo run places nothing more; the monitor beside grpo places its own
    hooks and nothing of AVSPO's, and verl's v1 binding of compute_advantage (imported by name)
    is wrapped too."""
    steps = fresh_verl_process["placement"]
    always = sorted(hook.name for hook in hooks.HOOKS if hook.always)
    assert steps["imported"] == steps["grpo"] == always
    monitor = sorted({hook.name for hook in hooks.hooks_for("v1", MONITOR)})
    assert steps["monitor"] == sorted(set(always) | set(monitor)) and set(monitor) - set(always) == {
        "verl.utils.tracking.Tracking.log", "verl.trainer.ppo.v1.trainer_base.PPOTrainer._save_checkpoint",
        "verl.trainer.ppo.v1.trainer_base.PPOTrainer.step", "verl.trainer.ppo.ray_trainer.compute_advantage",
    }  # fmt: skip
    assert steps["v1_binding_wrapped"]


def changed_verl_module(name):
    """A stand-in for a verl module whose function was renamed / re-shaped by a verl release."""
    module = types.ModuleType(name)

    def step(self, batch, timing_raw):  # verl's PPOTrainer.step takes (self, metrics, timing_raw)
        return batch

    module.Trainer = type("Trainer", (), {"step": step})
    return module


def test_a_changed_target_warns_naming_it_and_refuses_avspo_runs(monkeypatch, caplog, avspo_run_config):
    name = "verl_release_with_a_changed_trainer"
    module = changed_verl_module(name)
    monkeypatch.setitem(sys.modules, name, module)
    changed = hooks.Hook(name, "Trainer", "step", plugin_process.close_v1_step, "one step of Eq. 12 per global step",
                         ("self", "metrics"), trainer="v1", when="end of each step", why="no callback")  # fmt: skip
    absent = hooks.Hook(name, "Trainer", "_save_checkpoint", checkpoint.save_with_state, "saves the AVSPO state",
                        ("self",), trainer="legacy", when="each checkpoint", why="no callback")  # fmt: skip
    monkeypatch.setattr(hooks, "HOOKS", (*hooks.HOOKS, changed, absent))
    monkeypatch.setattr(hooks, "HOOK_PROBLEMS", {})
    with caplog.at_level(logging.WARNING, logger="avspo_plugin.verl"):
        changed.check(module)
        absent.check(module)
    messages = [record.getMessage() for record in caplog.records]
    assert f"cannot hook {name}.Trainer.step (one step of Eq. 12 per global step) in verl 0.9.1" in messages[0]
    assert "takes ('self', 'batch', 'timing_raw'), not the ('self', 'metrics')" in messages[0]
    assert f"{name}.Trainer._save_checkpoint does not exist" in messages[1]
    assert not hasattr(module.Trainer.step, "__avspo_patch__")  # a changed function is left as it is

    with pytest.raises(launch_guards.HookError, match=rf"verl 0.9.1 with the v1 trainer: 1 verl function\(s\).*{name}.Trainer.step"):
        hooks.check_launch_config(avspo_run_config)
    legacy = avspo_run_config.copy()
    legacy.trainer.use_v1 = False
    with pytest.raises(launch_guards.HookError, match=rf"legacy trainer.*{name}.Trainer._save_checkpoint does not exist"):
        hooks.prepare_trainer(legacy)
    # Runs of other estimators are not checked.
    grpo = avspo_run_config.copy()
    grpo.algorithm.adv_estimator = "grpo"
    hooks.check_launch_config(grpo)


@pytest.mark.parametrize("estimator, key, meant", [("avspo", "avpso", "avspo"), ("grpo", "avspo_monitr", "avspo_monitor")])
def test_a_misspelt_block_name_is_refused_by_verls_launch_check_naming_the_block_meant(estimator, key, meant):
    """`+algorithm.avpso.threshold_mode=always` passes verl (its algorithm block takes extra keys) and would train
    under algorithm.avspo's defaults: verl's own validate_config (the plugin's launch check wraps it) refuses it, in
    runs of avspo and of other estimators alike, as does the trainer's entry check."""
    from verl.utils.config import validate_config

    with initialize_config_module("verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=[f"algorithm.adv_estimator={estimator}",
                                                   f"+algorithm.{key}.threshold_mode=always"])
    message = (f"algorithm.{key} is not a block of the avspo plugin: did you mean algorithm.{meant}? Its keys would be "
               f"ignored and the run would go on under algorithm.{meant}'s defaults")
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_config(config, use_reference_policy=False, use_critic=False)
    with pytest.raises(ConfigError, match=re.escape(message)):
        hooks.prepare_trainer(config)


def test_block_names_close_to_the_plugins_are_read_as_the_block_meant_and_verls_own_keys_are_not():
    meant = {"avpso": "avspo", "AVSPO": "avspo", "avso": "avspo", "avspo_monitr": "avspo_monitor",
             "avspo-monitor": "avspo_monitor", "avspomonitor": "avspo_monitor", "avspo_config": "avspo"}
    for key, block in meant.items():
        assert f"did you mean algorithm.{block}?" in misspelt_block_problem({key: {}}), key
    with initialize_config_module("verl.trainer.config", version_base=None):
        algorithm = compose("ppo_trainer").algorithm
    assert misspelt_block_problem(algorithm) is None and len(algorithm) > 5
    assert misspelt_block_problem({"avspo": {}, "avspo_monitor": {}, "monitor_extra": 1}) is None
    # A block the plugin no longer reads is refused with why.
    assert misspelt_block_problem({"avspo_selection": {"enable": True}}) == (
        "algorithm.avspo_selection: prompt selection is no longer part of the plugin (not shown to help in the lab); "
        "remove the block")


def test_verls_experimental_fully_async_trainer_is_refused_before_ray_starts():
    from hydra import initialize_config_dir
    from verl.experimental import fully_async_policy
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    # verl's own config of that trainer, as its fully_async_main composes it.
    config_dir = f"{fully_async_policy.__path__[0]}/config"
    with initialize_config_dir(config_dir, version_base=None):
        config = compose("fully_async_ppo_trainer", overrides=["algorithm.adv_estimator=avspo"])
    assert "async_training" in config
    with pytest.raises(launch_guards.HookError, match="does not run in verl's experimental fully-async trainer"):
        get_ppo_ray_runtime_env(config)
    with pytest.raises(launch_guards.HookError, match=re.escape("trainer.v1.trainer_mode=separate_async")):
        hooks.check_launch_config(config)
    config.algorithm.adv_estimator = "grpo"
    get_ppo_ray_runtime_env(config)


def test_trl_patch_applies_only_where_trl_lacks_the_value_head(monkeypatch):
    from avspo_plugin.verl import model_build_fix

    stand_in = types.ModuleType("monkey_patch")
    stand_in.is_trl_available = lambda: True
    monkeypatch.setattr(model_build_fix, "trl_patch_needed", lambda: False)
    model_build_fix.skip_missing_trl_value_head(stand_in)
    assert stand_in.is_trl_available() is True  # trl absent or complete: verl's own check stays
    monkeypatch.setattr(model_build_fix, "trl_patch_needed", lambda: True)
    model_build_fix.skip_missing_trl_value_head(stand_in)
    assert stand_in.is_trl_available is model_build_fix.trl_value_head_available


def with_filtering(config, threshold_mode):
    config = config.copy()
    config.algorithm.filter_groups.enable = True
    config.algorithm.avspo.threshold_mode = threshold_mode
    return config


@pytest.mark.parametrize("threshold_mode", ["adaptive", "fixed", "always"])
def test_augmentation_with_dapo_group_filtering_is_refused_in_launcher_and_trainer(avspo_run_config, threshold_mode):
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from avspo_plugin.config import ConfigError

    config = with_filtering(avspo_run_config, threshold_mode)
    why = (
        rf"threshold_mode={threshold_mode} cannot run with algorithm.filter_groups.enable=true .*verl evicts the "
        r"zero-variance groups .* so it would never trigger and the run would silently be GRPO.*"
        r"threshold_mode=never \(monitor only\), which works with filtering: collapse is then counted .* before filtering"
    )
    with pytest.raises(ConfigError, match=why):
        hooks.check_launch_config(config)
    with pytest.raises(ConfigError, match=why):
        PPOTrainerSync(config)  # verl's own trainer, through the hooked __init__


def test_monitor_only_with_dapo_group_filtering_is_accepted(avspo_run_config):
    config = with_filtering(avspo_run_config, "never")
    hooks.check_launch_config(config)
    hooks.prepare_trainer(config)
    assert launch_guards.group_filtering_problem(config) is None


@pytest.mark.parametrize("version, side", [("0.10.0", "newer than"), ("0.10.0.dev0", "newer than"), ("0.6.0", "older than")])
def test_verl_outside_the_tested_range_warns_once_at_launch(monkeypatch, caplog, avspo_run_config, version, side):
    monkeypatch.setattr(versions, "verl_version", lambda: version)
    monkeypatch.setattr(versions, "_warned_versions", set())
    with caplog.at_level(logging.WARNING, logger="avspo_plugin.verl"):
        hooks.check_launch_config(avspo_run_config)
        hooks.check_launch_config(avspo_run_config)
    warnings = [record.getMessage() for record in caplog.records if "tested range" in record.getMessage()]
    assert warnings == [
        f"avspo_plugin: verl {version} is {side} the tested range (verl 0.6.1 to 0.9.1 (0.6.1, 0.7.1, 0.8.0, 0.9.1)): "
        "the plugin's hooks are in place, but whether they still see everything they need is untested; "
        "report any difference you notice"
    ]


def test_verl_older_than_0_6_is_refused_at_launch_naming_both_versions(monkeypatch, avspo_run_config):
    """The policy every host shares (host_versions): verl 0.5's trainer raises for an estimator it does not know."""
    from avspo_plugin.host_versions import UnsupportedHostVersion

    monkeypatch.setattr(versions, "verl_version", lambda: "0.5.0")
    with pytest.raises(UnsupportedHostVersion, match=r"avspo_plugin.verl supports verl 0.6.1 to 0.9.1; the installed "
                                                     r"verl is 0.5.0. Releases before 0.6.0 differ"):
        hooks.check_launch_config(avspo_run_config)


def test_verl_inside_the_tested_range_does_not_warn():
    assert versions.verl_version() == "0.9.1"
    assert [versions.untested_verl(v) for v in ("0.6.1", "0.8.5", "0.9.1")] == [None, None, None]


def test_a_trainer_subclass_that_bypasses_a_hooked_method_is_refused_at_start(avspo_run_config):
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    class SilentTrainer(PPOTrainerSync):
        def _save_checkpoint(self):  # saves its own way, never the parent's
            return None

    with pytest.raises(launch_guards.HookError, match=(
        r"algorithm.adv_estimator=avspo cannot run with the trainer class .*SilentTrainer: .*SilentTrainer._save_checkpoint "
        r"overrides verl.trainer.ppo.v1.trainer_base.PPOTrainer._save_checkpoint without calling it, so the plugin's hook "
        r"\(saves the AVSPO state with the checkpoint\) would never run. Call super\(\)._save_checkpoint\(...\)"
    )):
        SilentTrainer(avspo_run_config)  # verl's own __init__, hooked, sees the subclass

    class LegacyTrainer(RayPPOTrainer):
        def _load_checkpoint(self):
            return 0

    with pytest.raises(launch_guards.HookError, match=r"LegacyTrainer._load_checkpoint overrides .*RayPPOTrainer._load_checkpoint"):
        hooks.refuse_unhooked_overrides(LegacyTrainer, avspo_run_config, hooks.HOOKS)

    class PoliteTrainer(PPOTrainerSync):
        def _save_checkpoint(self):
            print("saving")
            return super()._save_checkpoint()

    hooks.refuse_unhooked_overrides(PoliteTrainer, avspo_run_config, hooks.HOOKS)
    hooks.refuse_unhooked_overrides(PPOTrainerSync, avspo_run_config, hooks.HOOKS)
    grpo = avspo_run_config.copy()
    grpo.algorithm.adv_estimator = "grpo"
    hooks.refuse_unhooked_overrides(SilentTrainer, grpo, hooks.HOOKS)  # runs without the plugin are not its concern


def test_the_touch_point_table_lists_every_verl_function_the_plugin_touches():
    """docs/using/verl.md: one row per hook of the registry, and the trl patch, each naming the module of its wrapper."""
    import re
    from pathlib import Path

    from avspo_plugin.verl.model_build_fix import TRL_PATCH_NAME, skip_missing_trl_value_head

    expected = {hook.name: hook.make_wrapper.__module__ for hook in hooks.HOOKS}
    expected[TRL_PATCH_NAME] = skip_missing_trl_value_head.__module__
    expected = {name: module.removeprefix("avspo_plugin.verl.") for name, module in expected.items()}
    docs = (Path(__file__).resolve().parents[2] / "docs" / "using" / "verl.md").read_text()
    rows = re.findall(r"^\| `(verl\.[\w.]+)` \| [^|]+ \| [^|]+ \| `(\w+)` \| [^|]+ \|$", docs, flags=re.M)
    assert len(rows) == len(expected) and dict(rows) == expected, set(dict(rows).items()) ^ set(expected.items())
