"""The packaged hydra config: generated from AVSPOConfig, composed by verl's own entry point."""

import pytest
import yaml
from main_ppo_config import composed_job
from omegaconf import OmegaConf

from avspo_plugin.config import AVSPOConfig, config_help
from avspo_plugin.verl.run_config import avspo_config_from_algorithm
from renderer.verl_hydra_configs import ALGORITHM_CONFIG_NAME, CONFIG_DIR, yaml_scalar


def test_yaml_block_reads_back_as_the_defaults_with_every_help_text():
    algorithm_yaml = CONFIG_DIR / f"{ALGORITHM_CONFIG_NAME}.yaml"
    loaded = OmegaConf.load(algorithm_yaml)
    assert loaded.algorithm.adv_estimator == "avspo"
    block = OmegaConf.to_container(loaded.algorithm.avspo)
    assert list(block) == list(AVSPOConfig.keys())
    assert block == AVSPOConfig().to_dict()
    assert avspo_config_from_algorithm(loaded.algorithm) == AVSPOConfig()
    text = algorithm_yaml.read_text()
    flat_comments = " ".join(line.strip().lstrip("#").strip() for line in text.splitlines() if line.strip().startswith("#"))
    for key, _, help_text in config_help():
        assert " ".join(help_text.split()) in flat_comments, f"help of {key} missing from the YAML"


@pytest.mark.parametrize("value", [1e-6, 1e-12, 2.5e20, 0.5, 0.0, -3.0, 7, True, False, "auto"])
def test_yaml_scalar_round_trips_through_yaml_and_omegaconf(value):
    text = yaml_scalar(value)
    assert yaml.safe_load(text) == value and type(yaml.safe_load(text)) is type(value)
    assert OmegaConf.create(f"x: {text}").x == value


def test_main_ppo_cfg_job_prints_avspo_estimator_and_block():
    composed = composed_job([
        "--config-path", "pkg://avspo_plugin.verl.config", "--config-name", "avspo_trainer",
        "algorithm.avspo.alpha=0.25", "algorithm.avspo.threshold_mode=fixed",
    ])  # fmt: skip
    config = yaml.safe_load(composed)
    assert config["algorithm"]["adv_estimator"] == "avspo"
    expected = {**AVSPOConfig().to_dict(), "alpha": 0.25, "threshold_mode": "fixed"}
    assert config["algorithm"]["avspo"] == expected
    # The rest is verl's ppo_trainer, untouched.
    assert config["algorithm"]["norm_adv_by_std_in_grpo"] is True
    assert "actor_rollout_ref" in config and "trainer" in config


def composed_recipe(tmp_path, defaults: str, algorithm: str, overrides: list[str]):
    """A recipe in the form docs/using/verl.md shows (both searchpaths) with these defaults and ``algorithm`` block,
    composed with ``overrides``."""
    from hydra import compose, initialize_config_dir

    (tmp_path / "recipe.yaml").write_text(
        "hydra:\n"
        "  searchpath: [pkg://verl.trainer.config, pkg://avspo_plugin.verl.config]\n"
        f"defaults: [{defaults}]\n"
        "algorithm:\n"
        f"  {algorithm}\n"
    )
    with initialize_config_dir(str(tmp_path), version_base=None):
        return compose("recipe", overrides=overrides)


def test_a_recipe_composes_on_the_packaged_config(tmp_path):
    """The recipe form docs/using/verl.md shows: both searchpaths, defaults [ppo_trainer, avspo_algorithm, _self_]."""
    config = composed_recipe(tmp_path, "ppo_trainer, avspo_algorithm, _self_", "avspo: {threshold_init: 0.4}",
                             ["algorithm.avspo.strategy=opposite"])
    assert config.algorithm.adv_estimator == "avspo"
    assert avspo_config_from_algorithm(config.algorithm) == AVSPOConfig(threshold_init=0.4, strategy="opposite")
    assert config.trainer.total_epochs is not None  # verl's ppo_trainer underneath


def test_a_recipe_of_an_earlier_key_name_is_a_one_line_error_naming_the_key_now(tmp_path):
    """A recipe or an override written before apply_to was renamed: refused, naming augmented_collapses."""
    from avspo_plugin.config import ConfigError

    config = composed_recipe(tmp_path, "ppo_trainer, avspo_algorithm, _self_", "avspo: {apply_to: all_fail}", [])
    with pytest.raises(ConfigError, match=r"^algorithm\.avspo\.apply_to is now algorithm\.avspo\.augmented_collapses: "
                                          r"rename it$"):
        avspo_config_from_algorithm(config.algorithm)


@pytest.mark.parametrize(
    "config_name, override, outcome",
    [
        # verl's stock ppo_trainer has no algorithm.avspo block: a key is added with + (or ++).
        ("ppo_trainer", "algorithm.avspo.alpha=0.25", "fails"),
        ("ppo_trainer", "+algorithm.avspo.alpha=0.25", 0.25),
        ("ppo_trainer", "++algorithm.avspo.alpha=0.25", 0.25),
        # The packaged avspo_trainer (and recipes composing avspo_algorithm) list every key: no prefix.
        ("avspo_trainer", "algorithm.avspo.alpha=0.25", 0.25),
        ("avspo_trainer", "+algorithm.avspo.alpha=0.25", "fails"),
        ("avspo_trainer", "++algorithm.avspo.alpha=0.25", 0.25),
    ],
)
def test_which_override_prefix_each_config_takes(config_name, override, outcome):
    """The table in docs/using/verl.md: when algorithm.avspo.* needs +, ++ or nothing."""
    from hydra import compose, initialize_config_module
    from hydra.errors import ConfigCompositionException

    module = "verl.trainer.config" if config_name == "ppo_trainer" else "avspo_plugin.verl.config"
    with initialize_config_module(module, version_base=None):
        if outcome == "fails":
            with pytest.raises(ConfigCompositionException):
                compose(config_name, overrides=["algorithm.adv_estimator=avspo", override])
            return
        config = compose(config_name, overrides=["algorithm.adv_estimator=avspo", override])
    assert avspo_config_from_algorithm(config.algorithm).alpha == outcome


