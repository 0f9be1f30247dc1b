"""AVSPOGRPOConfig: TRL's GRPOConfig with every AVSPO key as an ``avspo_<key>`` field.

The fields are generated from AVSPOConfig, each defaulting to NotGiven (a key given is told from one left out), but
the keys TRL's GRPO fixes (:func:`.conventions.host_settings`); the paper README's names are aliases.
"""

import dataclasses
import inspect
import logging
from dataclasses import dataclass, field
from typing import Any

from ..allowed import AutoOrInteger, Boolean, Integer, Number, OneOf
from ..config import (
    AVSPOConfig,
    ConfigError,
    NotGiven,
    earlier_name_error,
    key_help,
    meant_key,
    warn_inert_keys,
)
from ..threshold_modes import MEASURE_ONLY_MODE, PAPER_MODE, THRESHOLD_MODES
from .checked_imports import GRPOConfig
from .conventions import host_settings

logger = logging.getLogger(__name__)
FIELD_PREFIX = "avspo_"
# Set by TRL's GRPO conventions, not by the user.
HOST_KEYS = tuple(host_settings("group"))
# The paper README's names -> the AVSPO key each one sets (use_avspo is handled on its own).
ALIASES = {"acr_threshold_init": "threshold_init", "virtual_sample_alpha": "alpha"}
SUPPORTED_AGGREGATION = "sum_then_normalize"
FIELD_TYPES = {Boolean: bool, AutoOrInteger: str, Integer: int, Number: float, OneOf: str}


def exposed_keys() -> tuple[dataclasses.Field, ...]:
    """The AVSPOConfig fields that AVSPOGRPOConfig exposes, in declaration order."""
    return tuple(f for f in dataclasses.fields(AVSPOConfig) if f.name not in HOST_KEYS)


AVSPO_FIELDS = frozenset(FIELD_PREFIX + key.name for key in exposed_keys())


def _with_avspo_fields(cls: type) -> type:
    """Add one ``avspo_<key>`` dataclass field per exposed AVSPOConfig key, before the class's own fields."""
    inherited = {f.name for f in dataclasses.fields(GRPOConfig)}
    generated = {}
    for key in exposed_keys():
        name = FIELD_PREFIX + key.name
        if name in inherited:
            raise TypeError(f"GRPOConfig already has a field {name!r}; AVSPO's key {key.name!r} cannot take that name")
        metadata = {"help": key_help(key).replace("%", "%%"), "choices": key.metadata.get("choices")}
        setattr(cls, name, field(default=NotGiven(key.default), metadata=metadata))
        # HfArgumentParser takes one type per field: num_virtual ('auto' or an integer) is read as text.
        generated[name] = FIELD_TYPES[type(key.metadata["allowed"])]
    cls.__annotations__ = {**generated, **inspect.get_annotations(cls)}
    return cls


@dataclass
@_with_avspo_fields
class AVSPOGRPOConfig(GRPOConfig):
    """GRPOConfig plus the AVSPO keys as ``avspo_<key>`` fields (see the module docstring)."""

    use_avspo: bool | None = field(
        default=None,
        metadata={
            "help": "Alias from the paper's README: false sets avspo_threshold_mode=never (ACR metrics only, "
            "GRPO's own advantages); true sets avspo_threshold_mode=adaptive (the paper's trigger) where it is not "
            "given, and keeps a mode given that acts."
        },
    )
    acr_threshold_init: float | None = field(
        default=None, metadata={"help": "Alias from the paper's README for avspo_threshold_init."}
    )
    virtual_sample_alpha: float | None = field(
        default=None, metadata={"help": "Alias from the paper's README for avspo_alpha."}
    )

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # A key's earlier name given to the constructor (config.EARLIER_NAMES): the field now, not Python's TypeError.
        given = [name.removeprefix(FIELD_PREFIX) for name in kwargs if name.startswith(FIELD_PREFIX)]
        earlier = earlier_name_error(given, AVSPOConfig.keys(), FIELD_PREFIX.__add__)
        if earlier is not None:
            raise ConfigError(earlier)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        # The fields given, then each field not given at the default it stands for (before GRPOConfig reads any).
        given = {name for name in AVSPO_FIELDS if not isinstance(getattr(self, name), NotGiven | None)}
        for name in AVSPO_FIELDS - given:
            setattr(self, name, getattr(self, name).default)
        self._avspo_given = given
        super().__post_init__()
        if self.multi_objective_aggregation != SUPPORTED_AGGREGATION:
            raise ConfigError(
                f"multi_objective_aggregation={self.multi_objective_aggregation!r} is not supported with AVSPO: "
                f"it needs {SUPPORTED_AGGREGATION!r}, where the group statistics are those of one summed reward"
            )
        self._resolve_aliases()
        # Built here, at launch (the trainer builds it again): each key given that cannot act is a warning.
        warn_inert_keys(self.avspo_config(), self.given_keys(), logger, lambda key: FIELD_PREFIX + key)

    def __setattr__(self, name: str, value: Any) -> None:
        # A misspelt field given to the constructor is Python's TypeError; set afterwards, it would be a new attribute
        # that nothing reads, and the run would go on under the field's default.
        meant = None if name in self.__dataclass_fields__ or name == "_avspo_given" else misspelt_field(name)
        if meant is not None:
            raise ConfigError(
                f"{type(self).__name__} has no field {name!r}: did you mean {meant!r}? Set as it is, nothing would "
                f"read it and the run would go on under {meant}={getattr(self, meant)!r} (docs/using/trl.md lists "
                f"the {FIELD_PREFIX}<key> fields)"
            )
        super().__setattr__(name, value)
        if name in AVSPO_FIELDS and hasattr(self, "_avspo_given"):
            self._avspo_given.add(name)  # set once built (or by an alias): given

    def given_keys(self) -> set[str]:
        """The AVSPO keys given (an alias counts as its key)."""
        return {name.removeprefix(FIELD_PREFIX) for name in self._avspo_given}

    def _resolve_aliases(self) -> None:
        for alias, key in ALIASES.items():
            value = getattr(self, alias)
            if value is None:
                continue
            name = FIELD_PREFIX + key
            current = getattr(self, name)
            if name in self._avspo_given and current != value:
                raise ConfigError(
                    f"{alias}={value!r} and {name}={current!r} both set AVSPO's {key}, to different values: set one"
                )
            setattr(self, name, value)
        if self.use_avspo is None:
            return
        name = FIELD_PREFIX + "threshold_mode"
        mode, given = getattr(self, name), name in self._avspo_given
        if self.use_avspo and given and mode in THRESHOLD_MODES and not THRESHOLD_MODES[mode].augments:
            raise ConfigError(f"use_avspo=True contradicts {name}={mode!r} (monitoring only): set one")
        if not self.use_avspo and given and mode != MEASURE_ONLY_MODE:
            raise ConfigError(
                f"use_avspo=False (threshold_mode {MEASURE_ONLY_MODE!r}) contradicts {name}={mode!r}: set one"
            )
        if not given:  # the paper's README switch: on, the paper's trigger; off, ACR metrics only
            setattr(self, name, PAPER_MODE if self.use_avspo else MEASURE_ONLY_MODE)

    def avspo_config(self) -> AVSPOConfig:
        """The core's config: the ``avspo_<key>`` fields plus the keys TRL's ``scale_rewards`` decides."""
        values = {key.name: getattr(self, FIELD_PREFIX + key.name) for key in exposed_keys()}
        if isinstance(values["num_virtual"], str) and values["num_virtual"].strip().isdigit():  # from a command line
            values["num_virtual"] = int(values["num_virtual"])
        try:
            values.update(host_settings(self.scale_rewards))
        except ValueError as err:
            raise ConfigError(str(err)) from None
        return AVSPOConfig.from_mapping(values, where=f"{type(self).__name__} (fields {FIELD_PREFIX}<key>)")


def misspelt_field(name: str) -> str | None:
    """The ``avspo_<key>`` field that ``name`` (no field of the config) most likely misspells: a name whose first word
    is ``avspo`` or close to it (``avpso_threshold_mode``, ``AVSPO_alpha``, ``avspo_treshold_mode``); None for any other
    name (GRPOConfig's own attributes)."""
    head, _, rest = name.partition("_")
    meant = meant_key(head, rest, [key.name for key in exposed_keys()])
    return None if meant is None else FIELD_PREFIX + meant

