"""verl 0.9.1 beside trl >= 1.0 (this package's own extras): verl's model patching must not reach for trl's removed class."""

import importlib

import verl  # noqa: F401  loads the plugin through its entry point

from avspo_plugin.verl.model_build_fix import trl_value_head_available


def test_verl_sees_trl_only_where_trl_has_the_value_head_class():
    import trl

    monkey_patch = importlib.import_module("verl.models.transformers.monkey_patch")
    assert not hasattr(trl, "AutoModelForCausalLMWithValueHead")  # trl 1.x removed it
    assert trl_value_head_available() is False
    assert monkey_patch.is_trl_available() is False
