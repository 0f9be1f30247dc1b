"""Which Ray cluster a doctor check joins: the one a training run started here would use."""

from __future__ import annotations

import os
from typing import Optional


def connect_ray(address: Optional[str], runtime_env: Optional[dict] = None) -> str:
    """Join the Ray cluster the check belongs in, with ``runtime_env`` for this job; returns where.

    ``address`` (``--ray-address``) or ``RAY_ADDRESS``: that cluster. Else a cluster already running
    on this machine (``ray start --head``: the one a training run here would join); else a private
    instance started for the check. Never passes resources when joining a running cluster (Ray
    refuses them there).
    """
    import ray

    common = {"include_dashboard": False, "log_to_driver": False, "runtime_env": runtime_env}
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address == "local":
        ray.init(address="local", num_cpus=1, **common)
        return "a private Ray instance started for the check"
    if address:
        ray.init(address=address, **common)
        return f"the Ray cluster at {address}"
    try:
        ray.init(address="auto", **common)
        return "the Ray cluster running on this machine"
    except ConnectionError:
        ray.init(address="local", num_cpus=1, **common)
        return "a private Ray instance started for the check"
