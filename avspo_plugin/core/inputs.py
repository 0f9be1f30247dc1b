"""The arguments the core's public functions take (docs/using/api.md), as the types the core works on; anything
else is a TypeError naming the argument, the type given and the types taken."""

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
        if not (np.issubdtype(value.dtype, np.number) or value.dtype == np.bool_):
            raise TypeError(f"{name} must be {TENSOR_TYPES}; got a numpy array of dtype {value.dtype}")
        return torch.from_numpy(value)
    if isinstance(value, (list, tuple)):
        try:
            return torch.tensor(value)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"{name} must be {TENSOR_TYPES}; got a {type(value).__name__} torch cannot read as "
                            f"one ({err})") from None
    raise TypeError(f"{name} must be {TENSOR_TYPES}; got {type(value).__name__}")


def as_index(value: Any) -> Any:
    """The group labels as given, where they are a list, a tuple, a numpy array or a tensor (not a string, which
    would be read as its characters)."""
    if isinstance(value, (list, tuple, np.ndarray, torch.Tensor)):
        return value
    raise TypeError(f"index must be a list, a numpy array or a tensor of group labels, one per row; got "
                    f"{type(value).__name__}")


def as_config(config: Any) -> AVSPOConfig:
    """An AVSPOConfig as it is (one of another copy of the package as its keys); a mapping of its keys through
    :meth:`AVSPOConfig.from_mapping`, warning once per process of keys that cannot act (``warn_inert_keys``)."""
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
