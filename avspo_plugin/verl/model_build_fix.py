"""verl 0.9.1 with trl >= 1.0 installed: a model build that does not fail on trl's removed PPO classes.

verl's ``apply_monkey_patch`` (run for every FSDP model it builds) patches ``AutoModelForCausalLMWithValueHead``
whenever trl is importable, and trl 1.x no longer has that class: the build stops with an ImportError wherever both
are installed (as in this package's extras). The patch is skipped when trl does not provide the class; installed
by :func:`avspo_plugin.verl.hooks.install` only where trl is, and reported by ``avspo doctor``.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging

TRL_PATCH_NAME = "verl.models.transformers.monkey_patch.is_trl_available"

logger = logging.getLogger("avspo_plugin.verl")


def trl_value_head_available() -> bool:
    """Whether trl provides ``AutoModelForCausalLMWithValueHead`` (where verl looks for it)."""
    for module_name in ("trl.experimental.ppo", "trl"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, "AutoModelForCausalLMWithValueHead"):
            return True
    return False


# Marks the replacement, whichever copy of this package installed it.
trl_value_head_available.avspo_trl_patch = True


def trl_installed() -> bool:
    """Whether trl is importable (found without importing it)."""
    try:
        return importlib.util.find_spec("trl") is not None
    except (ImportError, ValueError):
        return False


def trl_patch_needed() -> bool:
    return trl_installed() and not trl_value_head_available()


def skip_missing_trl_value_head(monkey_patch_module) -> None:
    """Make ``verl.models.transformers.monkey_patch`` see trl only where trl has the class it patches."""
    if not trl_patch_needed():
        return
    if not hasattr(monkey_patch_module, "is_trl_available"):
        logger.warning(
            "avspo_plugin: %s does not exist in this verl, so the fix for trl >= 1.0 (which lacks "
            "AutoModelForCausalLMWithValueHead) is not applied; verl's FSDP model build may fail beside this trl",
            TRL_PATCH_NAME,
        )
        return
    monkey_patch_module.is_trl_available = trl_value_head_available


def trl_patch_status() -> str:
    """The patch in this process: applied, not needed, or why it is missing (for ``avspo doctor``)."""
    if not trl_installed():
        return "not needed (trl is not installed: verl's model build does not reach for it)"
    if trl_value_head_available():
        return "not needed (trl has AutoModelForCausalLMWithValueHead, which verl's model build patches)"
    module = importlib.import_module(TRL_PATCH_NAME.rpartition(".")[0])
    if getattr(getattr(module, "is_trl_available", None), "avspo_trl_patch", False):
        return "in place (trl lacks AutoModelForCausalLMWithValueHead, which verl's model build patches)"
    return f"missing: {TRL_PATCH_NAME} is not the plugin's; verl's FSDP model build will fail beside this trl"
