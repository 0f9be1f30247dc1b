"""Opt-in CPU support for running verl 0.9.1's own trainer without a GPU (docs/using/verl-cpu.md).

Imported in every Ray process through ``VERL_USE_EXTERNAL_MODULES=avspo_plugin.verl_cpu`` (never by the ``verl.plugins``
entry point): registers the ``cpu`` platform (``VERL_PLATFORM=cpu``) and the rollout ``hf``, makes verl's Ray process
groups plain ``gloo`` there (verl's ``cpu:gloo,<device>:<backend>`` names the cpu device twice), and there selects
verl's FSDP engine (``VERL_ENGINE_DEVICE=cuda``, ``VERL_ENGINE_VENDOR=nvidia``) unless those are set.
"""

from __future__ import annotations

import os

from verl.utils import distributed
from verl.workers.rollout import base as _rollout_base
from verl.workers.rollout.replica import RolloutReplicaRegistry

from avspo_plugin.import_patching import rebind, wrap
from avspo_plugin.verl_cpu.platform import PlatformCPU, cpu_platform_selected
from avspo_plugin.verl_cpu.rollout import ROLLOUT_NAME, HFGenerateServer, HFReplica, HFServerAdapter

RolloutReplicaRegistry.register(ROLLOUT_NAME, lambda: HFReplica)
_rollout_base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = f"{HFServerAdapter.__module__}.{HFServerAdapter.__name__}"


def _gloo_on_cpu(original):
    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        if backend is None and cpu_platform_selected():
            backend = "gloo"
        return original(timeout_second=timeout_second, backend=backend)

    return initialize_global_process_group_ray


_original = distributed.initialize_global_process_group_ray
# Also where verl's modules imported the name before this one loaded.
if wrap(distributed, "initialize_global_process_group_ray", _gloo_on_cpu):
    rebind(_original, distributed.initialize_global_process_group_ray, "verl")

if cpu_platform_selected():
    os.environ.setdefault("VERL_ENGINE_DEVICE", "cuda")
    os.environ.setdefault("VERL_ENGINE_VENDOR", "nvidia")

__all__ = ["HFGenerateServer", "HFReplica", "HFServerAdapter", "PlatformCPU", "cpu_platform_selected"]
