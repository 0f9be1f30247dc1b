"""algorithm.avspo from verl's side: defaults, clear errors, norm_adv_by_std_in_grpo, and checks before any rollout."""

import re

import pytest
import torch
from main_ppo_config import main_ppo_in_process
from omegaconf import OmegaConf, open_dict

from avspo_plugin.config import AVSPOConfig, ConfigError
from avspo_plugin.names import PLUGIN_MODULE
from avspo_plugin.verl import avspo_config_from_algorithm, session
from avspo_plugin.verl.launch_guards import EXTERNAL_MODULES_ENV


@pytest.fixture(scope="module")
def verl_compute_advantage():
    from verl.trainer.ppo.ray_trainer import compute_advantage

    return compute_advantage


@pytest.fixture(scope="module")
def trainer_config():
    """verl's full ppo_trainer config as composed from the packaged avspo_trainer.yaml."""
    from hydra import compose, initialize_config_module

    with initialize_config_module("avspo_plugin.verl.config", version_base=None):
        return compose("avspo_trainer")


def with_avspo(config, **avspo):
    config = config.copy()
    with open_dict(config):
        for key, value in avspo.items():
            config.algorithm.avspo[key] = value
    return config


def test_missing_block_means_defaults():
    assert avspo_config_from_algorithm(OmegaConf.create({"adv_estimator": "avspo"})) == AVSPOConfig()
    assert avspo_config_from_algorithm(None) == AVSPOConfig()


def test_packaged_config_block_is_the_defaults(trainer_config):
    assert avspo_config_from_algorithm(trainer_config.algorithm) == AVSPOConfig()


def test_unknown_key_from_verl_names_it_and_lists_valid_keys(make_batch, verl_compute_advantage):
    algorithm = OmegaConf.create({"adv_estimator": "avspo", "avspo": {"alpah": 0.3}})
    with pytest.raises(ConfigError) as err:
        verl_compute_advantage(make_batch([1, 0], ["a", "a"]), adv_estimator="avspo", config=algorithm)
    message = str(err.value)
    assert "algorithm.avspo.alpah" in message
    assert "valid keys: " + ", ".join(AVSPOConfig.keys()) in message


@pytest.mark.parametrize(
    "key, value, allowed",
    [
        ("alpha", 2.0, "(0.0, 1.0]"),
        ("strategy", "nope", "one of stratified, stratified_observed"),
        ("num_virtual", 0, "'auto' or an integer >= 1"),
        ("stagnation_steps", -1, "an integer >= 0"),
    ],
)
def test_bad_value_from_verl_names_key_value_and_range(make_batch, verl_compute_advantage, key, value, allowed):
    algorithm = OmegaConf.create({"adv_estimator": "avspo", "avspo": {key: value}})
    with pytest.raises(ConfigError) as err:
        verl_compute_advantage(make_batch([1, 0], ["a", "a"]), adv_estimator="avspo", config=algorithm)
    assert f"algorithm.avspo: {key}={value!r} is invalid" in str(err.value) and allowed in str(err.value)


def test_block_that_is_not_a_mapping_is_an_error():
    with pytest.raises(ConfigError, match=r"algorithm.avspo must be a block of keys \(reward_low, reward_high, collapse_tol, strategy, "):
        avspo_config_from_algorithm(OmegaConf.create({"avspo": 3}))


@pytest.mark.parametrize("norm", [True, False])
def test_norm_adv_by_std_in_grpo_is_honoured(make_batch, verl_compute_advantage, norm):
    """With nothing augmented, avspo's advantages are verl's own GRPO's, with and without std normalisation."""
    scores = [1.0, 0.0, 0.5, 1.0, 0.2, 0.2, 0.9, 0.1]
    uids = list("aabbccdd")
    grpo = verl_compute_advantage(
        make_batch(scores, uids), adv_estimator="grpo", norm_adv_by_std_in_grpo=norm,
        config=OmegaConf.create({"norm_adv_by_std_in_grpo": norm}),
    )
    algorithm = OmegaConf.create(
        {"adv_estimator": "avspo", "norm_adv_by_std_in_grpo": norm, "avspo": {"threshold_mode": "never"}}
    )
    avspo = verl_compute_advantage(make_batch(scores, uids), adv_estimator="avspo", config=algorithm)
    assert session().config.norm_by_std is norm
    torch.testing.assert_close(avspo.batch["advantages"], grpo.batch["advantages"], rtol=0, atol=1e-6)


def test_launcher_check_fails_before_ray_starts(tmp_path, monkeypatch):
    """Stock `main_ppo` (verl's hydra application, in this process) with a bad key stops in the launcher: no Ray, no
    workers, no rollout."""
    import ray

    monkeypatch.chdir(tmp_path)
    assert not ray.is_initialized()
    try:
        with pytest.raises(ConfigError, match=re.escape("algorithm.avspo: alpha=2 is invalid: allowed a number in (0.0, 1.0]")):
            main_ppo_in_process([
                "--config-path", "pkg://avspo_plugin.verl.config", "--config-name", "avspo_trainer",
                "algorithm.avspo.alpha=2", "trainer.device=cpu",
            ])  # fmt: skip
        assert not ray.is_initialized()
    finally:
        ray.shutdown()


def test_v1_trainer_checks_config_and_registration_when_built(trainer_config):
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    with pytest.raises(ConfigError, match=re.escape("algorithm.avspo: threshold_min=0.95 is above threshold_max=0.9")):
        PPOTrainerSync(with_avspo(trainer_config, threshold_min=0.95))

    # verl's own registry tests clear the registry; building the trainer registers avspo again.
    saved = dict(core_algos.ADV_ESTIMATOR_REGISTRY)
    core_algos.ADV_ESTIMATOR_REGISTRY.pop("avspo")
    try:
        PPOTrainerSync(with_avspo(trainer_config, alpha=0.25))
        assert getattr(core_algos.get_adv_estimator_fn("avspo"), "avspo_estimator", False)
    finally:
        core_algos.ADV_ESTIMATOR_REGISTRY.clear()
        core_algos.ADV_ESTIMATOR_REGISTRY.update(saved)
    assert session().config == AVSPOConfig(alpha=0.25)


def test_legacy_trainer_checks_config_before_its_own_init(trainer_config):
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    bad = with_avspo(trainer_config, augmented_collapses="everything")
    with pytest.raises(ConfigError, match="augmented_collapses='everything' is invalid"):
        RayPPOTrainer(bad, tokenizer=None, role_worker_mapping={}, resource_pool_manager=None)


def test_ray_runtime_env_makes_the_trainer_process_import_the_plugin(trainer_config, monkeypatch):
    from verl.trainer import constants_ppo

    monkeypatch.setenv(EXTERNAL_MODULES_ENV, "my_pkg.cpu_support")
    env = constants_ppo.get_ppo_ray_runtime_env(trainer_config)["env_vars"]
    assert env[EXTERNAL_MODULES_ENV] == f"my_pkg.cpu_support,{PLUGIN_MODULE}"

    other = trainer_config.copy()
    other.algorithm.adv_estimator = "grpo"
    assert EXTERNAL_MODULES_ENV not in constants_ppo.get_ppo_ray_runtime_env(other)["env_vars"]
