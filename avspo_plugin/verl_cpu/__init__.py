"""Opt-in CPU support for running verl 0.9.1's own trainer without a GPU.

Importing this module (in every Ray process: set ``VERL_USE_EXTERNAL_MODULES=avspo_plugin.verl_cpu``,
verl imports it on ``import verl``) does three things; ``VERL_PLATFORM=cpu`` then selects the CPU:

- registers the ``cpu`` platform in verl's platform registry (:mod:`.platform`);
- registers the rollout ``hf`` (``actor_rollout_ref.rollout.name=hf``): generation with
  transformers' ``generate`` in a Ray actor (:mod:`.rollout`);
- makes verl's Ray process groups plain ``gloo`` on the CPU platform: verl asks for
  ``cpu:gloo,<device>:<backend>``, which on the CPU names the cpu device twice.

It also selects verl's FSDP engine for the CPU (``VERL_ENGINE_DEVICE=cuda``,
``VERL_ENGINE_VENDOR=nvidia``, verl's own override; the engine runs on whatever device
the platform names) unless those are set already. The package's ``verl.plugins`` entry
point never imports this module. docs/using/verl-cpu.md lists the overrides a CPU run needs.
"""

from __future__ import annotations

import functools
import os
import sys

from verl.utils import distributed
from verl.workers.rollout import base as _rollout_base
from verl.workers.rollout.replica import RolloutReplicaRegistry

from avspo_plugin.verl_cpu.platform import PLATFORM_NAME, PlatformCPU
from avspo_plugin.verl_cpu.rollout import ROLLOUT_NAME, HFGenerateServer, HFReplica, HFServerAdapter


def cpu_platform_selected() -> bool:
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM_NAME


def _load_hf_replica() -> type:
    return HFReplica


RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_hf_replica)
_rollout_base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = f"{HFServerAdapter.__module__}.{HFServerAdapter.__name__}"


def _gloo_process_groups() -> None:
    """Wrap verl's ``initialize_global_process_group_ray`` to default to ``gloo`` on the CPU platform."""
    original = distributed.initialize_global_process_group_ray
    if getattr(original, "_avspo_cpu", False):
        return

    @functools.wraps(original)
    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        if backend is None and cpu_platform_selected():
            backend = "gloo"
        return original(timeout_second=timeout_second, backend=backend)

    initialize_global_process_group_ray._avspo_cpu = True
    distributed.initialize_global_process_group_ray = initialize_global_process_group_ray
    # Modules that imported the name before this one was loaded hold the original.
    for module_name in ("verl.workers.engine_workers", "verl.checkpoint_engine.base"):
        module = sys.modules.get(module_name)
        if module is not None and hasattr(module, "initialize_global_process_group_ray"):
            module.initialize_global_process_group_ray = initialize_global_process_group_ray


_gloo_process_groups()

if cpu_platform_selected():
    os.environ.setdefault("VERL_ENGINE_DEVICE", "cuda")
    os.environ.setdefault("VERL_ENGINE_VENDOR", "nvidia")

__all__ = ["HFGenerateServer", "HFReplica", "HFServerAdapter", "PlatformCPU", "cpu_platform_selected"]
