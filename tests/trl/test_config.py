"""AVSPOGRPOConfig: fields generated from AVSPOConfig, TRL's fixed keys, the README aliases, the command line."""

import dataclasses
from pathlib import Path

import pytest
from transformers import HfArgumentParser

from avspo_plugin.config import AVSPOConfig, ConfigError, NotGiven, key_help
from avspo_plugin.threshold_modes import MEASURE_ONLY_MODE, THRESHOLD_MODES
from avspo_plugin.trl import AVSPOGRPOConfig
from avspo_plugin.trl.config import FIELD_PREFIX, HOST_KEYS

DOC = Path(__file__).resolve().parents[2] / "docs" / "using" / "trl.md"
CPU = dict(use_cpu=True, bf16=False, report_to=[])


def make(tmp_path, **values):
    return AVSPOGRPOConfig(output_dir=str(tmp_path), **CPU, **values)


def test_every_avspo_key_but_trls_own_is_a_field_with_the_cores_default_help_and_choices():
    fields = {f.name: f for f in dataclasses.fields(AVSPOGRPOConfig)}
    for key in dataclasses.fields(AVSPOConfig):
        name = FIELD_PREFIX + key.name
        if key.name in HOST_KEYS:
            assert name not in fields
            continue
        # NotGiven(default): a value given equal to the default is told from it, and read as the default once built
        assert fields[name].default == NotGiven(key.default)
        assert fields[name].metadata["help"] == key_help(key)
        assert fields[name].metadata.get("choices") == key.metadata.get("choices")


@pytest.mark.parametrize("scale_rewards,norm_by_std", [("group", True), ("batch", False), ("none", False), (False, False)])
def test_defaults_give_the_cores_defaults_under_trls_conventions(tmp_path, scale_rewards, norm_by_std):
    config = make(tmp_path, scale_rewards=scale_rewards).avspo_config()
    assert config == AVSPOConfig(epsilon=1e-4, std="unbiased", norm_by_std=norm_by_std)


def test_readme_aliases_set_their_keys(tmp_path):
    assert AVSPOConfig().threshold_mode == "adaptive"  # the paper's trigger, which use_avspo=True names too
    config = make(tmp_path, use_avspo=True, acr_threshold_init=0.3, virtual_sample_alpha=0.8)
    assert (config.avspo_threshold_init, config.avspo_alpha, config.avspo_threshold_mode) == (0.3, 0.8, "adaptive")
    core = config.avspo_config()
    assert (core.threshold_init, core.alpha, core.threshold_mode) == (0.3, 0.8, "adaptive")
    assert make(tmp_path, use_avspo=True, avspo_threshold_mode="always").avspo_config().threshold_mode == "always"
    assert make(tmp_path, use_avspo=True, avspo_threshold_mode="fixed").avspo_config().threshold_mode == "fixed"
    assert make(tmp_path, use_avspo=False).avspo_config().threshold_mode == "never"
    # An alias agreeing with an explicitly set key is fine.
    assert make(tmp_path, acr_threshold_init=0.3, avspo_threshold_init=0.3).avspo_threshold_init == 0.3


@pytest.mark.parametrize(
    "values,message",
    [
        ({"acr_threshold_init": 0.3, "avspo_threshold_init": 0.4}, "acr_threshold_init=0.3 and avspo_threshold_init=0.4"),
        ({"virtual_sample_alpha": 0.8, "avspo_alpha": 0.7}, "virtual_sample_alpha=0.8 and avspo_alpha=0.7"),
        (
            {"use_avspo": False, "avspo_threshold_mode": "fixed"},
            "use_avspo=False .* contradicts avspo_threshold_mode='fixed'",
        ),
    ],
)
def test_an_alias_conflicting_with_its_key_is_an_error(tmp_path, values, message):
    with pytest.raises(ConfigError, match=message):
        make(tmp_path, **values)


ACTING_MODES = [name for name, mode in THRESHOLD_MODES.items() if mode.augments]


@pytest.mark.parametrize(
    "values,message",
    [
        ({"use_avspo": True, "avspo_threshold_mode": MEASURE_ONLY_MODE},
         f"use_avspo=True contradicts avspo_threshold_mode='{MEASURE_ONLY_MODE}'"),
        *[({"use_avspo": False, "avspo_threshold_mode": mode}, f"use_avspo=False .* contradicts avspo_threshold_mode='{mode}'")
          for mode in ACTING_MODES],
        ({"acr_threshold_init": 0.3, "avspo_threshold_init": AVSPOConfig().threshold_init},
         f"acr_threshold_init=0.3 and avspo_threshold_init={AVSPOConfig().threshold_init}"),
        ({"virtual_sample_alpha": 0.8, "avspo_alpha": AVSPOConfig().alpha},
         f"virtual_sample_alpha=0.8 and avspo_alpha={AVSPOConfig().alpha}"),
    ],
)  # fmt: skip
def test_a_value_given_equal_to_the_default_is_given(tmp_path, values, message):
    """Whatever the defaults: a field written is told from one left out, so a contradiction is refused."""
    with pytest.raises(ConfigError, match=message):
        make(tmp_path, **values)
    arguments = [f"--{name}={str(value).lower() if isinstance(value, bool) else value}" for name, value in values.items()]
    with pytest.raises(ConfigError, match=message):
        HfArgumentParser(AVSPOGRPOConfig).parse_args_into_dataclasses(
            ["--output_dir", str(tmp_path), "--use_cpu", "true", "--bf16", "false", *arguments]
        )


def test_given_keys_are_those_written_whatever_their_value(tmp_path):
    config = make(tmp_path, avspo_seed=AVSPOConfig().seed, avspo_threshold_lr=0.05)
    assert config.given_keys() == {"seed", "threshold_lr"}
    assert (config.avspo_seed, config.avspo_strategy) == (AVSPOConfig().seed, AVSPOConfig().strategy)
    assert make(tmp_path).given_keys() == set()
    parsed, = HfArgumentParser(AVSPOGRPOConfig).parse_args_into_dataclasses(
        ["--output_dir", str(tmp_path), "--use_cpu", "true", "--bf16", "false", f"--avspo_alpha={AVSPOConfig().alpha}"]
    )
    assert parsed.given_keys() == {"alpha"} and parsed.avspo_alpha == AVSPOConfig().alpha


@pytest.mark.parametrize(
    "values,message",
    [
        ({"avspo_alpha": 2.0}, r"fields avspo_<key>\): alpha=2\.0 is invalid"),
        ({"virtual_sample_alpha": 0.0}, r"alpha=0\.0 is invalid"),
        ({"avspo_num_virtual": "many"}, "num_virtual='many' is invalid"),
        ({"avspo_reward_low": 1.0}, "reward_low=1.0 is not below reward_high=1.0"),
        ({"scale_rewards": "global"}, "scale_rewards='global' is invalid"),
        ({"multi_objective_aggregation": "normalize_then_sum"}, "normalize_then_sum.*not supported"),
    ],
)
def test_bad_values_are_rejected_when_the_config_is_built(tmp_path, values, message):
    with pytest.raises(ConfigError, match=message):
        make(tmp_path, **values)


def test_a_key_under_its_earlier_field_is_a_one_line_error_naming_the_field_now(tmp_path):
    with pytest.raises(ConfigError, match=r"^avspo_apply_to is now avspo_augmented_collapses: rename it$"):
        make(tmp_path, avspo_apply_to="all_fail")
    config = make(tmp_path)
    with pytest.raises(ConfigError, match=r"has no field 'avspo_apply_to': did you mean 'avspo_augmented_collapses'\?"):
        config.avspo_apply_to = "all_fail"


def test_the_command_line_reads_every_form(tmp_path):
    parser = HfArgumentParser(AVSPOGRPOConfig)
    (config,) = parser.parse_args_into_dataclasses(
        ["--output_dir", str(tmp_path), "--use_cpu", "--bf16", "false", "--report_to", "none",
         "--avspo_strategy", "opposite", "--avspo-num-virtual", "3", "--acr_threshold_init", "0.25",
         "--use_avspo", "false", "--scale_rewards", "none"]
    )
    core = config.avspo_config()
    assert (core.strategy, core.num_virtual, core.threshold_init, core.threshold_mode, core.norm_by_std) == (
        "opposite", 3, 0.25, "never", False
    )
    with pytest.raises(SystemExit):
        parser.parse_args_into_dataclasses(["--output_dir", str(tmp_path), "--avspo_strategy", "bogus"])


def test_a_misspelt_avspo_field_is_refused_however_it_is_given(tmp_path, capsys):
    """TRL's own ways of taking fields refuse a misspelt one (the constructor, HfArgumentParser, TrlParser's YAML);
    the one that would pass silently, an attribute set after the config is built, is refused naming the field
    meant. GRPOConfig's own attributes are set as before."""
    from trl import TrlParser

    with pytest.raises(TypeError, match="unexpected keyword argument 'avspo_treshold_mode'"):
        make(tmp_path, avspo_treshold_mode="always")
    with pytest.raises(ValueError, match="not used by the HfArgumentParser: \\['--avpso_threshold_mode', 'always'"):
        HfArgumentParser(AVSPOGRPOConfig).parse_args_into_dataclasses(
            ["--output_dir", str(tmp_path), "--use_cpu", "--bf16", "false", "--report_to", "none",
             "--avpso_threshold_mode", "always"])
    yaml = tmp_path / "grpo.yaml"
    yaml.write_text(f"output_dir: {tmp_path}\nuse_cpu: true\nbf16: false\navpso_threshold_mode: always\n")
    with pytest.raises(ValueError, match="Unknown arguments from config file: \\['--avpso_threshold_mode'"):
        TrlParser(AVSPOGRPOConfig).parse_args_and_config(["--config", str(yaml)])
    capsys.readouterr()

    config = make(tmp_path)
    for name, meant in (("avspo_treshold_mode", "avspo_threshold_mode"), ("avpso_threshold_mode", "avspo_threshold_mode"),
                        ("AVSPO_alpha", "avspo_alpha"), ("avspo_numvirtual", "avspo_num_virtual")):
        with pytest.raises(ConfigError, match=f"AVSPOGRPOConfig has no field '{name}': did you mean '{meant}'"):
            setattr(config, name, "always")
    config.avspo_threshold_mode, config.learning_rate, config.some_attribute = "always", 1e-5, 1
    assert config.avspo_config().threshold_mode == "always"


def test_a_grpo_config_field_named_like_an_avspo_key_is_refused(monkeypatch):
    from avspo_plugin.trl import config as trl_config

    @dataclasses.dataclass
    class TakenGRPOConfig:
        avspo_alpha: float = 1.0

    monkeypatch.setattr(trl_config, "GRPOConfig", TakenGRPOConfig)
    with pytest.raises(TypeError, match="GRPOConfig already has a field 'avspo_alpha'; AVSPO's key 'alpha' cannot"):
        trl_config._with_avspo_fields(type("Config", (TakenGRPOConfig,), {}))
