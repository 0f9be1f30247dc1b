"""TRL adapter: :class:`AVSPOGRPOTrainer` (a GRPOTrainer subclass) and :class:`AVSPOGRPOConfig`.

Importing this package imports no TRL (``avspo doctor --host trl`` runs without it); the two classes,
and :data:`HOST` (TRL's side of the host contract, docs/method/hosts.md), load on first use, after the
installed TRL's version is checked (:mod:`.versions`).
"""

__all__ = ["HOST", "AVSPOGRPOConfig", "AVSPOGRPOTrainer"]


def __getattr__(name: str):
    if name in __all__:
        from . import checked_imports  # noqa: F401  (first: an unsupported TRL is refused by name before any module of the adapter loads)
    if name == "AVSPOGRPOConfig":
        from .config import AVSPOGRPOConfig

        return AVSPOGRPOConfig
    if name == "AVSPOGRPOTrainer":
        from .trainer import AVSPOGRPOTrainer

        return AVSPOGRPOTrainer
    if name == "HOST":
        from .trainer import HOST

        return HOST
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
