"""The verl adapter's packaged hydra configs, generated from :class:`AVSPOConfig` and
:class:`MonitorConfig`. ``python -m renderer`` (:func:`write_configs`) writes these three
files of avspo_plugin/verl/config/, and nothing else:

* ``avspo_algorithm.yaml``: ``algorithm.adv_estimator: avspo`` and the full ``algorithm.avspo``
  block, each key with its default and help text (a global-package config that any verl
  config can list in its defaults).
* ``avspo_monitor.yaml``: the ``algorithm.avspo_monitor`` block of the ACR monitor (off); it sets no
  estimator, so it composes on any run.
* ``avspo_trainer.yaml``: verl's own ``ppo_trainer`` with ``avspo_algorithm`` and ``avspo_monitor`` on
  top; the primary config for verl's stock entry point::

    python -m verl.trainer.main_ppo --config-path pkg://avspo_plugin.verl.config --config-name avspo_trainer ...

Hydra accepts ``hydra.searchpath`` only in a primary config, so a recipe (itself primary)
composes the block, not the trainer file: ``hydra: {searchpath: [pkg://verl.trainer.config,
pkg://avspo_plugin.verl.config]}`` and ``defaults: [ppo_trainer, avspo_algorithm, _self_]``.

No training process imports this module: verl reads the YAML files. A test checks that the committed files equal
what :func:`render_configs` returns, so the YAML never drifts from the dataclasses.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import Any

from avspo_plugin.config import AVSPOConfig, ConfigBlock, MonitorConfig, config_sections

# The configs sit in the verl adapter, where pkg://avspo_plugin.verl.config finds them.
CONFIG_DIR = Path(__file__).resolve().parents[1] / "avspo_plugin" / "verl" / "config"
TRAINER_CONFIG_NAME = "avspo_trainer"
ALGORITHM_CONFIG_NAME = "avspo_algorithm"
MONITOR_CONFIG_NAME = "avspo_monitor"

_GENERATED = """\
# GENERATED from avspo_plugin.config.{source} by renderer/verl_hydra_configs.py: do not edit by hand;
# regenerate with `python -m renderer`.
"""

_TRAINER = _GENERATED.format(source="AVSPOConfig and MonitorConfig") + f"""\
#
# verl's ppo_trainer with the AVSPO advantage estimator (the block of {ALGORITHM_CONFIG_NAME}.yaml). Run it
# with verl's stock entry point:
#   python -m verl.trainer.main_ppo --config-path pkg://avspo_plugin.verl.config --config-name {TRAINER_CONFIG_NAME} [overrides]
# (or --config-path <this directory>), overriding keys as usual, e.g. algorithm.avspo.threshold_mode=fixed.

hydra:
  searchpath:
    - pkg://verl.trainer.config

defaults:
  - ppo_trainer
  - {ALGORITHM_CONFIG_NAME}
  - {MONITOR_CONFIG_NAME}
  - _self_
"""

_ALGORITHM_HEADER = _GENERATED.format(source="AVSPOConfig") + f"""\
#
# The AVSPO advantage estimator and every key of algorithm.avspo with its default (a missing block
# means these defaults). A recipe composes it on verl's ppo_trainer:
#   hydra: {{searchpath: [pkg://verl.trainer.config, pkg://avspo_plugin.verl.config]}}
#   defaults: [ppo_trainer, {ALGORITHM_CONFIG_NAME}, _self_]
# @package _global_

algorithm:
  # The registered estimator of avspo_plugin.verl (entry point verl.plugins: avspo).
  adv_estimator: avspo

  # AVSPO and ACR settings (avspo_plugin.config.AVSPOConfig).
  avspo:
"""

_MONITOR_HEADER = _GENERATED.format(source="MonitorConfig") + f"""\
#
# The ACR monitor (docs/using/verl.md): every key of algorithm.avspo_monitor with its default (a missing block
# means these: off). It sets no estimator and changes no advantage, so it composes on any run:
#   hydra: {{searchpath: [pkg://verl.trainer.config, pkg://avspo_plugin.verl.config]}}
#   defaults: [ppo_trainer, {MONITOR_CONFIG_NAME}, _self_]
# or, without a recipe, on the command line: +algorithm.avspo_monitor.enable=true
# @package _global_

algorithm:
  # ACR monitor settings (avspo_plugin.config.MonitorConfig).
  avspo_monitor:
"""

_INDENT = " " * 4
_WIDTH = 110


def yaml_scalar(value: Any) -> str:
    """A default as a YAML scalar that OmegaConf reads back to the same Python value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot write non-finite default {value!r} to YAML")
        text = repr(value)
        # YAML 1.1 reads 1e-06 as a string: give the mantissa a dot.
        if "e" in text and "." not in text.split("e")[0]:
            mantissa, exponent = text.split("e")
            text = f"{mantissa}.0e{exponent}"
        return text
    if isinstance(value, str):
        return json.dumps(value)
    raise TypeError(f"no YAML form for default {value!r} of type {type(value).__name__}")


def render_block(header: str, config_class: type[ConfigBlock]) -> str:
    """A packaged block config: ``header`` and every key of ``config_class`` with its help and default."""
    lines = [header.rstrip("\n")]
    for section, keys in config_sections(config_class):
        lines += ["", f"{_INDENT}# --- {section} ---"]
        for key, default, help_text in keys:
            lines.append("")
            lines.extend(textwrap.wrap(help_text, _WIDTH, initial_indent=_INDENT + "# ", subsequent_indent=_INDENT + "# ",
                                       break_on_hyphens=False))
            lines.append(f"{_INDENT}{key}: {yaml_scalar(default)}")
    return "\n".join(lines) + "\n"


def render_configs() -> dict[Path, str]:
    """Each packaged config file and its text."""
    return {
        CONFIG_DIR / f"{TRAINER_CONFIG_NAME}.yaml": _TRAINER,
        CONFIG_DIR / f"{ALGORITHM_CONFIG_NAME}.yaml": render_block(_ALGORITHM_HEADER, AVSPOConfig),
        CONFIG_DIR / f"{MONITOR_CONFIG_NAME}.yaml": render_block(_MONITOR_HEADER, MonitorConfig),
    }
