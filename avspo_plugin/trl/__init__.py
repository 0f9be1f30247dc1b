"""TRL adapter: :class:`AVSPOGRPOTrainer` (a GRPOTrainer subclass) and :class:`AVSPOGRPOConfig`.

Importing this package imports no TRL (``avspo doctor --host trl`` runs without it); the two classes
load on first use, after the installed TRL's version is checked (:mod:`.versions`).
"""

__all__ = ["AVSPOGRPOConfig", "AVSPOGRPOTrainer"]


def __getattr__(name: str):
    if name in __all__:
        from . import bases  # noqa: F401  (first: an unsupported TRL is refused by name before any module of the adapter loads)
    if name == "AVSPOGRPOConfig":
        from .config import AVSPOGRPOConfig

        return AVSPOGRPOConfig
    if name == "AVSPOGRPOTrainer":
        from .trainer import AVSPOGRPOTrainer

        return AVSPOGRPOTrainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
