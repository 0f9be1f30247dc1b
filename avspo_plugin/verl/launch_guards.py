"""Launch-time guards: what would run but silently not be what the config asks is refused (HookError, ConfigError)
before Ray starts and again before any worker starts; and the Ray runtime env that makes the trainer process import
the plugin with its errors raised.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..config import ConfigError
from ..names import PLUGIN_MODULE
from ..threshold_modes import MEASURE_ONLY_MODE, THRESHOLD_MODES
from .run_config import (
    avspo_config_from_algorithm,
    config_entry,
    features_of,
    misspelt_block_problem,
    monitor_config_from_algorithm,
    uses_avspo,
)

EXTERNAL_MODULES_ENV = "VERL_USE_EXTERNAL_MODULES"


class HookError(RuntimeError):
    """A verl function the run needs could not be hooked (absent, or not the shape the plugin knows)."""


def refuse_unsupported_trainer(config: Any) -> None:
    """verl's experimental fully-async trainer (configs with ``async_training``) is refused for avspo."""
    if uses_avspo(config) and config_entry(config, "async_training") is not None:
        raise HookError(
            "algorithm.adv_estimator=avspo does not run in verl's experimental fully-async trainer "
            "(verl.experimental.fully_async_policy): its FullyAsyncTrainer saves checkpoints without the trainer "
            "method that keeps the AVSPO state (tau, warning streaks), so a resumed run would silently restart the "
            "adaptive threshold. Use verl's default trainer (trainer.use_v1=true), whose "
            "trainer.v1.trainer_mode=separate_async is asynchronous too."
        )


def uses_group_filtering(config: Any) -> bool:
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


def refuse_unrunnable(config: Any) -> None:
    """Raise ConfigError or HookError for a full verl config the plugin cannot run as it asks."""
    algorithm = config_entry(config, "algorithm")
    # First: a misspelt block name would otherwise pass as a run that uses nothing of the plugin.
    problem = misspelt_block_problem(algorithm)
    if problem is not None:
        raise ConfigError(problem)
    refuse_unsupported_trainer(config)
    if uses_avspo(config):
        avspo_config_from_algorithm(algorithm)
    # Read even when off: a misspelt key of a block the user wrote is an error, not a silent default.
    monitor_config_from_algorithm(algorithm)
    problem = group_filtering_problem(config)
    if problem is not None:
        raise ConfigError(problem)


def runtime_env_with_plugin(original: Callable) -> Callable:
    """Wraps ``get_ppo_ray_runtime_env``: a run that uses the plugin imports it in the trainer process through
    ``VERL_USE_EXTERNAL_MODULES``, with errors raised (verl swallows those of its entry points)."""

    def get_ppo_ray_runtime_env(*args, **kwargs):
        runtime_env = original(*args, **kwargs)
        config = kwargs.get("config", args[0] if args else None)
        if config is not None and features_of(config):
            refuse_unsupported_trainer(config)
            env_vars = runtime_env.setdefault("env_vars", {})
            current = env_vars.get(EXTERNAL_MODULES_ENV, os.environ.get(EXTERNAL_MODULES_ENV, ""))
            names = [name.strip() for name in current.split(",") if name.strip()]
            env_vars[EXTERNAL_MODULES_ENV] = ",".join(dict.fromkeys([*names, PLUGIN_MODULE]))
        return runtime_env

    return get_ppo_ray_runtime_env
