"""TRL adapter: :class:`AVSPOGRPOTrainer` and :class:`AVSPOGRPOConfig`, and :data:`HOST`, loaded on first use once the
installed TRL's version is checked (importing this package imports no TRL).
"""

import importlib

# Each lazily loaded name: its module.
_MODULES = {"AVSPOGRPOConfig": "config", "AVSPOGRPOTrainer": "trainer", "HOST": "trainer"}
__all__ = ["HOST", "AVSPOGRPOConfig", "AVSPOGRPOTrainer"]


def __getattr__(name: str):
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # First: an unsupported TRL is refused by name before any module of the adapter loads.
    importlib.import_module(".checked_imports", __name__)
    return getattr(importlib.import_module(f".{_MODULES[name]}", __name__), name)
