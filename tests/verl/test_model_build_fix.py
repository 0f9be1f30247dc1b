"""verl 0.9.1 beside trl >= 1.0 (this package's own extras): verl's model patching must not reach for trl's removed
class; beside a trl that has it, or without trl, verl's own check stays."""

import importlib
import importlib.machinery
import importlib.util
import types

import verl
import verl.utils.import_utils

from avspo_plugin.verl import hooks, model_build_fix
from avspo_plugin.verl.model_build_fix import trl_patch_status, trl_value_head_available

MONKEY_PATCH = "verl.models.transformers.monkey_patch"


def fresh_monkey_patch_module():
    """A new copy of verl's own monkey_patch module, as verl's model build imports it."""
    copy = importlib.util.spec_from_file_location("verl_monkey_patch_copy", importlib.util.find_spec(MONKEY_PATCH).origin)
    module = importlib.util.module_from_spec(copy)
    copy.loader.exec_module(module)
    return module


def test_verl_sees_trl_only_where_trl_has_the_value_head_class():
    import trl

    monkey_patch = importlib.import_module(MONKEY_PATCH)
    assert not hasattr(trl, "AutoModelForCausalLMWithValueHead")  # trl 1.x removed it
    assert trl_value_head_available() is False
    assert monkey_patch.is_trl_available() is False
    assert trl_patch_status().startswith("in place (trl lacks AutoModelForCausalLMWithValueHead")


def test_a_trl_with_the_value_head_class_keeps_verls_own_check(monkeypatch):
    complete_trl = types.ModuleType("trl")
    complete_trl.__spec__ = importlib.machinery.ModuleSpec("trl", None)
    complete_trl.AutoModelForCausalLMWithValueHead = type("AutoModelForCausalLMWithValueHead", (), {})
    monkeypatch.setitem(importlib.sys.modules, "trl", complete_trl)
    monkey_patch = fresh_monkey_patch_module()
    model_build_fix.skip_missing_trl_value_head(monkey_patch)
    assert monkey_patch.is_trl_available is verl.utils.import_utils.is_trl_available
    assert monkey_patch.is_trl_available() is True
    assert trl_patch_status() == "not needed (trl has AutoModelForCausalLMWithValueHead, which verl's model build patches)"


def test_without_trl_the_fix_is_not_installed(monkeypatch):
    watched = []
    monkeypatch.setattr(model_build_fix.importlib.util, "find_spec", lambda name, *a: None if name == "trl" else object())
    monkeypatch.setattr(hooks, "after_import", lambda name, callback: watched.append(name))
    hooks.install()
    assert MONKEY_PATCH not in watched and "verl.trainer.ppo.core_algos" in watched
    assert trl_patch_status() == "not needed (trl is not installed: verl's model build does not reach for it)"
    monkeypatch.undo()
    watched.clear()
    monkeypatch.setattr(hooks, "after_import", lambda name, callback: watched.append(name))
    hooks.install()
    assert MONKEY_PATCH in watched  # trl is installed here
