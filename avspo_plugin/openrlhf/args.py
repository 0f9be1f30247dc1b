"""The avspo options as OpenRLHF flags, one per AVSPOConfig key, and reading them back from OpenRLHF's ``args``:
``--algo.advantage.avspo.<key>`` since 0.10.2 (dotted flags), ``--avspo_<key>`` up to 0.10.1 (flat flags).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from ..allowed import AutoOrInteger, Boolean, Integer, Number, OneOf
from ..config import AVSPOConfig, NotGiven, key_help, meant_key, warn_inert_keys
from ..names import ESTIMATOR

# The one key whose OpenRLHF default differs from AVSPOConfig's: OpenRLHF's group_norm divides by
# (std + 1e-9), so with nothing augmented avspo gives group_norm's advantages exactly.
HOST_DEFAULTS: dict[str, Any] = {"epsilon": 1e-9}

_REQUIRED = object()  # read_arg without a default raises

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArgLayout:
    """Where one OpenRLHF release keeps the arguments the adapter reads (dotted attribute paths)."""

    name: str
    estimator: str
    n_samples_per_prompt: str
    reward_remote_url: str
    reward_model: str
    overlong_buffer_len: str
    stop_properly_penalty_coef: str
    avspo_prefix: str

    def avspo_dest(self, key: str) -> str:
        return self.avspo_prefix + key

    def flag(self, dest: str) -> str:
        return "--" + dest


DOTTED = ArgLayout(
    name="dotted (OpenRLHF >= 0.10.2)",
    estimator="algo.advantage.estimator",
    n_samples_per_prompt="rollout.n_samples_per_prompt",
    reward_remote_url="reward.remote_url",
    reward_model="reward.model_name_or_path",
    overlong_buffer_len="reward.overlong_buffer_len",
    stop_properly_penalty_coef="reward.stop_properly_penalty_coef",
    avspo_prefix="algo.advantage.avspo.",
)
FLAT = ArgLayout(
    name="flat (OpenRLHF <= 0.10.1)",
    estimator="advantage_estimator",
    n_samples_per_prompt="n_samples_per_prompt",
    reward_remote_url="remote_rm_url",
    reward_model="reward_pretrain",
    overlong_buffer_len="overlong_buffer_len",
    stop_properly_penalty_coef="stop_properly_penalty_coef",
    avspo_prefix="avspo_",
)
LAYOUTS = (DOTTED, FLAT)


def arg_holder(args: Any, name: str) -> tuple[Any, str]:
    """The object holding ``args.<name>`` and the attribute there: a parsed namespace keeps a dest's dots, a
    hierarchized one nests it (None when a parent is missing)."""
    if hasattr(args, name):
        return args, name
    *parents, last = name.split(".")
    for part in parents:
        args = getattr(args, part, None)
    return args, last


def read_arg(args: Any, name: str, default: Any = _REQUIRED) -> Any:
    holder, attribute = arg_holder(args, name)
    if default is _REQUIRED and not hasattr(holder, attribute):
        raise AttributeError(f"OpenRLHF's arguments have no {name!r}")
    return getattr(holder, attribute, default)


def layout_of(args: Any) -> ArgLayout:
    """The flag layout of the release that parsed ``args``."""
    for layout in LAYOUTS:
        if read_arg(args, layout.estimator, None) is not None:
            return layout
    raise ValueError(
        "OpenRLHF's arguments have neither algo.advantage.estimator nor advantage_estimator; "
        "is this train_ppo_ray's namespace?"
    )


def default_of(key: str) -> Any:
    return HOST_DEFAULTS.get(key, AVSPOConfig.__dataclass_fields__[key].default)


def given_values(args: Any) -> dict[str, Any]:
    """The avspo options the user gave in OpenRLHF's ``args`` ({key: value}): a flag left out holds
    its NotGiven default (:func:`add_avspo_arguments`), or is not there at all."""
    layout = layout_of(args)
    values = {key: read_arg(args, layout.avspo_dest(key), None) for key in AVSPOConfig.keys()}
    return {key: value for key, value in values.items() if not isinstance(value, NotGiven | None)}


def avspo_config_from_args(args: Any) -> AVSPOConfig:
    """The AVSPO config in OpenRLHF's ``args``; keys not given there take their OpenRLHF default."""
    layout = layout_of(args)
    values = {key: default_of(key) for key in AVSPOConfig.keys()} | given_values(args)
    return AVSPOConfig.from_mapping(values, where=layout.flag(layout.avspo_prefix).rstrip("._"))


def misspelt_flag(flag: str, layout: ArgLayout) -> str | None:
    """The avspo flag that ``flag`` (unrecognised by argparse) most likely misspells (``--avpso_alpha``,
    ``--algo.advantage.avspo.alpah``, :func:`~avspo_plugin.config.meant_key`); None for any other flag."""
    outer, separator = layout.avspo_prefix[: -len(ESTIMATOR) - 1], layout.avspo_prefix[-1]
    name = flag.split("=", 1)[0]
    if not name.startswith("--" + outer):
        return None
    block, found, key = name[2 + len(outer):].partition(separator)
    meant = meant_key(block, key, AVSPOConfig.keys()) if found else None
    return None if meant is None else layout.flag(layout.avspo_dest(meant))


def check_avspo_args(args: Any) -> None:
    """Reject, before any Ray actor starts, what the avspo estimator cannot run with; warn of each avspo option given
    that cannot act under the others (:func:`~avspo_plugin.config.inert_keys`)."""
    layout = layout_of(args)
    if read_arg(args, layout.estimator) != ESTIMATOR:
        return
    n_samples = read_arg(args, layout.n_samples_per_prompt)
    if n_samples < 2:
        raise ValueError(
            f"{layout.flag(layout.estimator)} {ESTIMATOR} groups the samples of each prompt: it needs "
            f"{layout.flag(layout.n_samples_per_prompt)} >= 2, got {n_samples}"
        )
    warn_inert_keys(avspo_config_from_args(args), given_values(args), logger, lambda key: layout.flag(layout.avspo_dest(key)))


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean: use true or false")


def parse_num_virtual(text: str) -> str | int:
    """'auto' or a positive integer, as AVSPOConfig.num_virtual takes it."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither 'auto' nor an integer") from None


# How argparse reads each kind of value a key allows.
ARGUMENT_TYPES: dict[type, dict[str, Any]] = {
    Boolean: {"type": parse_bool, "metavar": "{true,false}"},
    AutoOrInteger: {"type": parse_num_virtual, "metavar": "{auto,K}"},
    Integer: {"type": int},
    Number: {"type": float},
    OneOf: {"type": str},
}


def add_avspo_arguments(parser: argparse.ArgumentParser, layout: ArgLayout = DOTTED) -> None:
    """One flag per AVSPOConfig key, named in the layout's convention, with its default (NotGiven, so that a value
    given equal to it is told from it) and help."""
    for field in dataclasses.fields(AVSPOConfig):
        default = default_of(field.name)
        help_text = key_help(field)
        if field.name in HOST_DEFAULTS:
            help_text += f" Under OpenRLHF the default is {default!r}, as in its group_norm."
        parser.add_argument(
            layout.flag(layout.avspo_dest(field.name)), default=NotGiven(default), choices=field.metadata.get("choices"),
            help=f"avspo estimator: {help_text} (default: {default!r})".replace("%", "%%"),  # argparse %-formats help
            **ARGUMENT_TYPES[type(field.metadata["allowed"])],
        )
