"""What a verl run's config asks of the plugin: its two blocks, read and checked, and the features it uses.

``algorithm.avspo`` (with ``algorithm.adv_estimator=avspo``): the estimator's settings; ``algorithm.avspo_monitor``:
the ACR monitor beside another estimator. A missing block means its defaults (the monitor off); a block's reader
raises ConfigError naming the key.
"""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from ..config import AVSPOConfig, MonitorConfig, misspelt_name
from ..names import ESTIMATOR

AVSPO_BLOCK = "algorithm.avspo"
MONITOR_BLOCK = "algorithm.avspo_monitor"
# The plugin's blocks, by their key in verl's algorithm block.
BLOCKS = {"avspo": AVSPO_BLOCK, "avspo_monitor": MONITOR_BLOCK}
# A block the plugin no longer reads: refused with why, never read as a misspelling of another.
REMOVED_BLOCKS = {"avspo_selection": "prompt selection is no longer part of the plugin (not shown to help in the lab)"}

# What of the plugin a run uses, and how each is turned on (as a refusal of a run that uses it names it).
AVSPO = "avspo"
MONITOR = "monitor"
FEATURES = (AVSPO, MONITOR)
FEATURE_SETTING = {AVSPO: "algorithm.adv_estimator=avspo", MONITOR: "algorithm.avspo_monitor.enable=true"}


def config_entry(node: Any, key: str) -> Any:
    """``node``'s ``key`` in a verl config (DictConfig, dict or dataclass); None where either is missing."""
    if node is None:
        return None
    getter = getattr(node, "get", None)
    return getter(key) if getter is not None else getattr(node, key, None)


def _block(algorithm: Any, key: str) -> Any:
    """The ``key`` block of verl's ``algorithm`` block as plain containers (None when missing)."""
    block = config_entry(algorithm, key)
    return OmegaConf.to_container(block, resolve=True) if OmegaConf.is_config(block) else block


def misspelt_block_problem(algorithm: Any) -> str | None:
    """Why a key of verl's ``algorithm`` block close to one of BLOCKS (``avpso``) cannot run, or None. verl takes
    such a key, and the run would train under the block's defaults."""
    keys = list(algorithm.keys()) if hasattr(algorithm, "keys") else list(vars(algorithm)) if algorithm else []
    for key in keys:
        if key in REMOVED_BLOCKS:
            return f"algorithm.{key}: {REMOVED_BLOCKS[key]}; remove the block"
        meant = misspelt_name(str(key), BLOCKS)
        if meant is not None:
            return (f"algorithm.{key} is not a block of the avspo plugin: did you mean {BLOCKS[meant]}? Its keys would "
                    f"be ignored and the run would go on under {BLOCKS[meant]}'s defaults. The plugin's blocks: "
                    f"{', '.join(BLOCKS.values())} (docs/using/config.md)")
    return None


def avspo_config_from_algorithm(algorithm: Any) -> AVSPOConfig:
    """The AVSPO config of verl's ``algorithm`` block: ``algorithm.avspo.*``, with the std division off where
    ``algorithm.norm_adv_by_std_in_grpo=False`` (Dr. GRPO, as for verl's GRPO)."""
    config = AVSPOConfig.from_mapping(_block(algorithm, "avspo"), where=AVSPO_BLOCK)
    if config_entry(algorithm, "norm_adv_by_std_in_grpo") is False and config.norm_by_std:
        config = config.replace(norm_by_std=False)
    return config


def given_avspo_keys(algorithm: Any) -> set[str]:
    """The keys of ``algorithm.avspo`` the user wrote. The packaged YAML gives every key at its default, so in a
    block that holds every key, a key at its default counts as not written."""
    block = _block(algorithm, "avspo") or {}
    if not set(AVSPOConfig.keys()) <= set(block):
        return set(block)
    defaults = AVSPOConfig().to_dict()
    return {key for key in AVSPOConfig.keys() if block[key] != defaults[key]}


def avspo_key_name(key: str) -> str:
    return f"{AVSPO_BLOCK}.{key}"


def monitor_config_from_algorithm(algorithm: Any) -> MonitorConfig:
    return MonitorConfig.from_mapping(_block(algorithm, "avspo_monitor"), where=MONITOR_BLOCK)


def uses_avspo(config: Any) -> bool:
    return str(config_entry(config_entry(config, "algorithm"), "adv_estimator")) == ESTIMATOR


def monitors(algorithm: Any, adv_estimator: Any = None) -> bool:
    """Whether the monitor runs: enabled, and the estimator is not ``avspo`` (which logs the same metrics)."""
    estimator = config_entry(algorithm, "adv_estimator") if adv_estimator is None else adv_estimator
    return str(estimator) != ESTIMATOR and monitor_config_from_algorithm(algorithm).enable


def uses_monitor(config: Any) -> bool:
    return monitors(config_entry(config, "algorithm"))


def features_of(config: Any) -> tuple[str, ...]:
    """What of the plugin a full verl config uses (AVSPO, MONITOR)."""
    used = {AVSPO: uses_avspo(config), MONITOR: uses_monitor(config)}
    return tuple(name for name in FEATURES if used[name])


def trainer_of(config: Any) -> str:
    """Which verl trainer a full config runs: ``v1`` (``trainer.use_v1``, verl 0.9's default) or ``legacy``."""
    return "v1" if config_entry(config_entry(config, "trainer"), "use_v1") else "legacy"
