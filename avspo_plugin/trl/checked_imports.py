"""The TRL classes the adapter subclasses, imported only after the installed TRL's release is checked.

Every module of the adapter takes GRPOConfig and GRPOTrainer from here, so that an unsupported release is refused
by name (:func:`.versions.require_supported_trl`) before any of its classes load: a release older than the range
may not even import the way the adapter expects.
"""

from .versions import require_supported_trl

require_supported_trl()

from trl import GRPOConfig, GRPOTrainer  # noqa: E402

__all__ = ["GRPOConfig", "GRPOTrainer"]
