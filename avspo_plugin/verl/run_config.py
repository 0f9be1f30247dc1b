"""What a verl run's config asks of the plugin: its two blocks, read and checked, and the features it uses.

* ``algorithm.avspo`` (with ``algorithm.adv_estimator=avspo``): the estimator's settings;
* ``algorithm.avspo_monitor``: the ACR monitor beside another estimator.

A missing block means its defaults (the monitor off). A block's reader raises
ConfigError naming the key. Every other module of the adapter reads verl's config through these.
"""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from ..config import AVSPOConfig, ConfigError, MonitorConfig, misspelt_name
from ..names import ESTIMATOR

AVSPO_BLOCK = "algorithm.avspo"
MONITOR_BLOCK = "algorithm.avspo_monitor"
# The plugin's blocks, by their key in verl's algorithm block.
BLOCKS = {"avspo": AVSPO_BLOCK, "avspo_monitor": MONITOR_BLOCK}
# A block the plugin no longer reads: refused with why, never read as a misspelling of another.
REMOVED_BLOCKS = {"avspo_selection": "prompt selection is no longer part of the plugin (not shown to help in the lab)"}

# What of the plugin a run uses: the estimator (algorithm.adv_estimator=avspo), the ACR monitor.
AVSPO = "avspo"
MONITOR = "monitor"
FEATURES = (AVSPO, MONITOR)
# How each feature is turned on, as a refusal of a run that uses it names it.
FEATURE_SETTING = {
    AVSPO: "algorithm.adv_estimator=avspo",
    MONITOR: "algorithm.avspo_monitor.enable=true",
}


def config_entry(node: Any, key: str) -> Any:
    """``node``'s ``key`` in a verl config (DictConfig, dict or dataclass); None where either is missing."""
    if node is None:
        return None
    getter = getattr(node, "get", None)
    return getter(key) if getter is not None else getattr(node, key, None)


def to_plain(block: Any) -> Any:
    """A verl config block as plain Python containers (anything else as it is)."""
    return OmegaConf.to_container(block, resolve=True) if OmegaConf.is_config(block) else block


def _block(algorithm: Any, key: str) -> Any:
    """The ``key`` block of verl's ``algorithm`` block as plain containers (None when missing; its reader checks it)."""
    return to_plain(config_entry(algorithm, key))


def misspelt_block_problem(algorithm: Any) -> str | None:
    """Why a key of verl's ``algorithm`` block close to one of the plugin's BLOCKS (``avpso``, ``avspo_monitr``) cannot run, naming it and the block it probably means; None when there is none. Such a key
    would pass verl (an ``algorithm`` block takes extra keys) and the run would train under the block's defaults."""
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


def refuse_misspelt_blocks(algorithm: Any) -> None:
    """Raise ConfigError for a key of verl's ``algorithm`` block close to one of the plugin's (:func:`misspelt_block_problem`)."""
    problem = misspelt_block_problem(algorithm)
    if problem is not None:
        raise ConfigError(problem)


def avspo_config_from_algorithm(algorithm: Any) -> AVSPOConfig:
    """The AVSPO config of verl's ``algorithm`` block: ``algorithm.avspo.*`` plus ``norm_adv_by_std_in_grpo``.

    A missing block means the defaults. ``algorithm.norm_adv_by_std_in_grpo=False`` turns the std
    division off (Dr. GRPO), as it does for verl's own GRPO. Raises ConfigError naming the key.
    """
    config = AVSPOConfig.from_mapping(_block(algorithm, "avspo"), where=AVSPO_BLOCK)
    if config_entry(algorithm, "norm_adv_by_std_in_grpo") is False and config.norm_by_std:
        config = config.replace(norm_by_std=False)
    return config


def given_avspo_keys(algorithm: Any) -> set[str]:
    """The keys of ``algorithm.avspo`` the user wrote. verl's packaged YAML
    (avspo_algorithm.yaml) gives every key at its default, so in a block that holds every key a key at its default
    counts as not written (hydra keeps no trace of which wrote it); in any other block every key there was written."""
    block = _block(algorithm, "avspo") or {}
    if not set(AVSPOConfig.keys()) <= set(block):
        return set(block)
    defaults = AVSPOConfig().to_dict()
    return {key for key in AVSPOConfig.keys() if block[key] != defaults[key]}


def avspo_key_name(key: str) -> str:
    """How verl's config names an AVSPO key: algorithm.avspo.<key>."""
    return f"{AVSPO_BLOCK}.{key}"


def monitor_config_from_algorithm(algorithm: Any) -> MonitorConfig:
    """The monitor's config in verl's ``algorithm`` block (``algorithm.avspo_monitor``; missing: off).

    Raises ConfigError naming the key."""
    block = _block(algorithm, "avspo_monitor")
    return MonitorConfig.from_mapping(block, where=MONITOR_BLOCK)


def monitor_avspo_config(algorithm: Any) -> AVSPOConfig:
    """The AVSPO settings the monitor measures with, from verl's ``algorithm`` block."""
    return monitor_config_from_algorithm(algorithm).avspo_config()


def uses_avspo(config: Any) -> bool:
    """Whether a full verl config (DictConfig or dict) selects ``algorithm.adv_estimator=avspo``."""
    algorithm = config_entry(config, "algorithm")
    return str(config_entry(algorithm, "adv_estimator")) == ESTIMATOR


def monitors(algorithm: Any, adv_estimator: Any = None) -> bool:
    """Whether the monitor runs for this ``algorithm`` block: enabled, and the estimator is not ``avspo``
    (which logs the same metrics itself)."""
    estimator = config_entry(algorithm, "adv_estimator") if adv_estimator is None else adv_estimator
    return str(estimator) != ESTIMATOR and monitor_config_from_algorithm(algorithm).enable


def uses_monitor(config: Any) -> bool:
    """Whether a full verl config runs the monitor."""
    return monitors(config_entry(config, "algorithm"))


def features_of(config: Any) -> tuple[str, ...]:
    """What of the plugin a full verl config uses: AVSPO (the estimator),
    MONITOR (the ACR monitor beside another estimator)."""
    used = {AVSPO: uses_avspo(config), MONITOR: uses_monitor(config)}
    return tuple(name for name in FEATURES if used[name])


def trainer_of(config: Any) -> str:
    """Which verl trainer a full config runs: ``v1`` (``trainer.use_v1``, verl 0.9's default) or ``legacy``."""
    return "v1" if config_entry(config_entry(config, "trainer"), "use_v1") else "legacy"
