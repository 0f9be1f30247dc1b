"""The avspo options as OpenRLHF command-line flags, and reading them back from OpenRLHF's ``args``.

OpenRLHF has named its flags two ways. Since 0.10.2 they are dotted and ``hierarchize`` turns the
parsed namespace into nested namespaces (``--algo.advantage.estimator`` -> ``args.algo.advantage.estimator``);
up to 0.10.1 they are flat (``--advantage_estimator``). The avspo flags follow the installed
release's convention: ``--algo.advantage.avspo.<key>`` or ``--avspo_<key>``, one per AVSPOConfig key,
with AVSPOConfig's default and help text; a key's earlier name (config.EARLIER_NAMES) is refused, naming the flag now.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import logging
import types
import typing
from dataclasses import dataclass
from typing import Any, Union

from ..config import EARLIER_NAMES, AVSPOConfig, NotGiven, key_help, misspelt_name, warn_inert_keys
from ..names import ESTIMATOR

# The one key whose OpenRLHF default differs from AVSPOConfig's: OpenRLHF's group_norm divides by
# (std + 1e-9), so with nothing augmented avspo gives group_norm's advantages exactly.
HOST_DEFAULTS: dict[str, Any] = {"epsilon": 1e-9}

_REQUIRED = object()  # read_arg without a default raises
_MISSING = object()  # a default that stands for "no such argument"

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


def read_arg(args: Any, name: str, default: Any = _REQUIRED) -> Any:
    """``args.<name>`` from a parsed namespace (dests may contain dots) or a hierarchized one."""
    if hasattr(args, name):
        return getattr(args, name)
    node = args
    for part in name.split("."):
        if not hasattr(node, part):
            if default is _REQUIRED:
                raise AttributeError(f"OpenRLHF's arguments have no {name!r}")
            return default
        node = getattr(node, part)
    return node


def write_arg(args: Any, name: str, value: Any) -> None:
    """Set ``args.<name>`` where :func:`read_arg` reads it."""
    if hasattr(args, name):
        setattr(args, name, value)
        return
    *parents, last = name.split(".")
    node = args
    for part in parents:
        node = getattr(node, part)
    setattr(node, last, value)


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
    values = {}
    for key in AVSPOConfig.keys():
        value = read_arg(args, layout.avspo_dest(key), _MISSING)
        if value is not _MISSING and value is not None and not isinstance(value, NotGiven):
            values[key] = value
    return values


def avspo_config_from_args(args: Any) -> AVSPOConfig:
    """The AVSPO config in OpenRLHF's ``args``; keys not given there take their OpenRLHF default."""
    layout = layout_of(args)
    values = {key: default_of(key) for key in AVSPOConfig.keys()} | given_values(args)
    return AVSPOConfig.from_mapping(values, where=layout.flag(layout.avspo_prefix).rstrip("._"))


def misspelt_flag(flag: str, layout: ArgLayout) -> str | None:
    """The avspo flag that ``flag`` (one argparse did not recognise) most likely misspells: its block close to
    ``avspo`` (``--algo.advantage.avpso.alpha``, ``--avpso_alpha``) or its key misspelt
    (``--algo.advantage.avspo.alpah``), or its key's name now for an earlier name (``...avspo.apply_to``); None for
    any other flag."""
    outer, separator = layout.avspo_prefix[: -len(ESTIMATOR) - 1], layout.avspo_prefix[-1]
    name = flag.split("=", 1)[0]
    if not name.startswith("--" + outer):
        return None
    block, found, key = name[2 + len(outer):].partition(separator)
    if not found or (block.lower() != ESTIMATOR and misspelt_name(block, [ESTIMATOR]) is None):
        return None
    if EARLIER_NAMES.get(key) in AVSPOConfig.keys():
        return layout.flag(layout.avspo_dest(EARLIER_NAMES[key]))
    meant = max(AVSPOConfig.keys(), key=lambda known: difflib.SequenceMatcher(None, key.lower(), known).ratio())
    return layout.flag(layout.avspo_dest(meant))


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


def add_avspo_arguments(parser: argparse.ArgumentParser, layout: ArgLayout = DOTTED) -> None:
    """One flag per AVSPOConfig key, named in the layout's convention, with its default (NotGiven, so that a value
    given equal to it is told from it) and help."""
    hints = typing.get_type_hints(AVSPOConfig)
    for field in dataclasses.fields(AVSPOConfig):
        default = default_of(field.name)
        help_text = key_help(field)
        if field.name in HOST_DEFAULTS:
            help_text += f" Under OpenRLHF the default is {default!r}, as in its group_norm."
        # argparse %-formats help text.
        help_text = f"avspo estimator: {help_text} (default: {default!r})".replace("%", "%%")
        kwargs: dict[str, Any] = {"default": NotGiven(default), "help": help_text}
        hint = hints[field.name]
        if "choices" in field.metadata:
            kwargs.update(type=str, choices=field.metadata["choices"])
        elif hint is bool:
            kwargs.update(type=parse_bool, metavar="{true,false}")
        elif typing.get_origin(hint) in (Union, types.UnionType):
            kwargs.update(type=parse_num_virtual, metavar="{auto,K}")
        else:
            kwargs["type"] = hint
        parser.add_argument(layout.flag(layout.avspo_dest(field.name)), **kwargs)


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
