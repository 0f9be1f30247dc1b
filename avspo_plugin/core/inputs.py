"""What the core's public functions take besides tensors, as docs/using/api.md lists it: rewards and masks as a torch
tensor, a numpy array or a list of numbers; the config as an AVSPOConfig or a mapping of its keys; the threshold
state as a ThresholdState, or None for a fresh one; the group labels (index) as a list, a tuple, a numpy array or a
tensor. Anything else is a TypeError naming the argument, the type given and the types taken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..config import AVSPOConfig, warn_inert_keys
from .threshold import ThresholdState

# What a reward or mask argument may be: a tensor, or what torch.as_tensor makes one of.
TensorLike = torch.Tensor | np.ndarray | Sequence[float]
TENSOR_TYPES = "a torch.Tensor, a numpy array or a list of numbers"


def as_tensor(value: Any, name: str) -> torch.Tensor:
    """``value`` as a tensor: a tensor as it is, a numpy array with its dtype (no copy), a list or tuple of numbers
    as ``torch.tensor`` makes it (float32 for floats, int64 for integers, bool for booleans)."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype == object or not (np.issubdtype(value.dtype, np.number) or value.dtype == np.bool_):
            raise TypeError(f"{name} must be {TENSOR_TYPES}; got a numpy array of dtype {value.dtype}")
        return torch.from_numpy(value)
    if isinstance(value, (list, tuple)):
        try:
            return torch.tensor(value)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"{name} must be {TENSOR_TYPES}; got a {type(value).__name__} torch cannot read as "
                            f"one ({err})") from None
    raise TypeError(f"{name} must be {TENSOR_TYPES}; got {type(value).__name__}")


def as_index(value: Any, name: str = "index") -> Any:
    """The group labels as given, where they are a list, a tuple, a numpy array or a tensor; anything else (a string
    would be read as its characters, one label each) is a TypeError naming the argument."""
    if isinstance(value, (list, tuple, np.ndarray, torch.Tensor)):
        return value
    raise TypeError(f"{name} must be a list, a numpy array or a tensor of group labels, one per row; got "
                    f"{type(value).__name__}")


def as_optional_tensor(value: Any, name: str) -> torch.Tensor | None:
    return None if value is None else as_tensor(value, name)


def as_config(config: Any) -> AVSPOConfig:
    """An AVSPOConfig as it is (one of another copy of the package as its keys); a mapping of its keys through
    :meth:`AVSPOConfig.from_mapping` (a bad key or value is its ConfigError), with a warning, once per process, for
    each of its keys that cannot act under the others (:func:`~avspo_plugin.config.warn_inert_keys`)."""
    if isinstance(config, AVSPOConfig):
        return config
    if type(config).__name__ == AVSPOConfig.__name__ and callable(getattr(config, "to_dict", None)):
        # The config of another copy of this package (imported under another name, it shares this one's session).
        return AVSPOConfig.from_mapping(config.to_dict())
    if isinstance(config, Mapping):
        built = AVSPOConfig.from_mapping(config)
        warn_inert_keys(built, config)  # the mapping's keys are the keys given
        return built
    raise TypeError(f"config must be an AVSPOConfig or a mapping of its keys (a dict); got {type(config).__name__}")


def as_state(state: Any, config: AVSPOConfig) -> ThresholdState:
    """A ThresholdState as it is; None: the fresh state of ``config`` (ThresholdState.initial)."""
    if state is None:
        return ThresholdState.initial(config)
    if isinstance(state, ThresholdState):
        return state
    raise TypeError(f"state must be a ThresholdState or None (a fresh state); got {type(state).__name__}")
