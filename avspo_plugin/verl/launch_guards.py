"""Launch-time guards: what a run's trainer and config must be for the plugin to run as promised.

Each check refuses (HookError, ConfigError) what would run but silently not be what the config asks:
verl's experimental fully-async trainer, AVSPO's augmentation under DAPO's group filtering (the verl
release is checked by :mod:`avspo_plugin.verl.versions`). The launcher's and the trainer's entry hooks
(:mod:`avspo_plugin.verl.hooks`) run them before Ray starts and again before any worker starts (a trainer class that overrides a hooked method
without calling it is refused there, beside the hook registry). The Ray runtime env is changed here too,
so that the trainer process imports the plugin with its errors raised.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from ..config import ConfigError
from ..names import PLUGIN_MODULE
from ..threshold_modes import MEASURE_ONLY_MODE, THRESHOLD_MODES
from .run_config import avspo_config_from_algorithm, config_entry, features_of, uses_avspo

EXTERNAL_MODULES_ENV = "VERL_USE_EXTERNAL_MODULES"


class HookError(RuntimeError):
    """A verl function the run needs could not be hooked (absent, or not the shape the plugin knows)."""


def refuse_unsupported_trainer(config: Any) -> None:
    """verl's experimental fully-async trainer (configs with ``async_training``) is refused for avspo (it saves
    checkpoints without the trainer's method)."""
    if uses_avspo(config) and config_entry(config, "async_training") is not None:
        raise HookError(
            "algorithm.adv_estimator=avspo does not run in verl's experimental fully-async trainer "
            "(verl.experimental.fully_async_policy): its FullyAsyncTrainer saves checkpoints without the trainer "
            "method that keeps the AVSPO state (tau, warning streaks), so a resumed run would silently restart the "
            "adaptive threshold. Use verl's default trainer (trainer.use_v1=true), whose "
            "trainer.v1.trainer_mode=separate_async is asynchronous too."
        )


def uses_group_filtering(config: Any) -> bool:
    """Whether a full verl config turns DAPO's group filtering on (``algorithm.filter_groups.enable``)."""
    return bool(config_entry(config_entry(config_entry(config, "algorithm"), "filter_groups"), "enable"))


def group_filtering_problem(config: Any) -> str | None:
    """Why a config that augments with AVSPO under DAPO's group filtering cannot run (None when it can)."""
    if not (uses_avspo(config) and uses_group_filtering(config)):
        return None
    mode = avspo_config_from_algorithm(config_entry(config, "algorithm")).threshold_mode
    if not THRESHOLD_MODES[mode].augments:
        return None
    return (
        f"algorithm.adv_estimator=avspo with algorithm.avspo.threshold_mode={mode} cannot run with "
        "algorithm.filter_groups.enable=true (DAPO's group filtering): verl evicts the zero-variance groups "
        "(every response rewarded alike) before the advantage estimator sees them, and AVSPO's augmentation acts "
        "only on those collapsed groups, so it would never trigger and the run would silently be GRPO. Either turn "
        f"filtering off, or keep it with algorithm.avspo.threshold_mode={MEASURE_ONLY_MODE} (monitor only), which works "
        "with filtering: collapse is then counted on the groups as generated, before filtering."
    )


def refuse_with_group_filtering(config: Any) -> None:
    """Raise ConfigError for AVSPO's augmentation combined with DAPO's group filtering."""
    problem = group_filtering_problem(config)
    if problem is not None:
        raise ConfigError(problem)


def with_plugin_module(modules: str) -> str:
    """A ``VERL_USE_EXTERNAL_MODULES`` value that also imports this plugin (kept once, order kept)."""
    names = [name.strip() for name in modules.split(",") if name.strip()]
    if PLUGIN_MODULE not in names:
        names.append(PLUGIN_MODULE)
    return ",".join(names)


def runtime_env_with_plugin(original: Callable) -> Callable:
    """Wraps ``get_ppo_ray_runtime_env``: a run that uses the plugin imports it in the trainer process through
    ``VERL_USE_EXTERNAL_MODULES``, with errors raised (verl swallows those of its entry points)."""

    @functools.wraps(original)
    def get_ppo_ray_runtime_env(*args, **kwargs):
        runtime_env = original(*args, **kwargs)
        config = kwargs.get("config", args[0] if args else None)
        if config is not None and features_of(config):
            refuse_unsupported_trainer(config)
            env_vars = runtime_env.setdefault("env_vars", {})
            current = env_vars.get(EXTERNAL_MODULES_ENV, os.environ.get(EXTERNAL_MODULES_ENV, ""))
            env_vars[EXTERNAL_MODULES_ENV] = with_plugin_module(current)
        return runtime_env

    return get_ppo_ray_runtime_env
