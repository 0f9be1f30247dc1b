"""GRPOConfig and GRPOTrainer, for every module of the adapter, imported only after the installed TRL's release is
checked (:func:`.versions.require_supported_trl`): an older release may not even import the way the adapter expects.
"""

from .versions import require_supported_trl

require_supported_trl()

from trl import GRPOConfig, GRPOTrainer  # noqa: E402

__all__ = ["GRPOConfig", "GRPOTrainer"]
