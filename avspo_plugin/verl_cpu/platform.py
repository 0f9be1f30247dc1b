"""A ``cpu`` platform for verl's platform registry, selected with ``VERL_PLATFORM=cpu``.

verl 0.9.1 falls back to nvidia when it finds no platform, which makes every device call a CUDA call. This one
answers them for the host CPU: the device is ``cpu``, collectives use gloo, and :data:`CPU_DEVICE_MODULE` stands in
for ``torch.cuda`` in the calls verl makes through ``get_torch_device()``.
"""

from __future__ import annotations

import os
import types
from contextlib import contextmanager
from typing import Any

import psutil
import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry

PLATFORM_NAME = "cpu"


def cpu_platform_selected() -> bool:
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM_NAME


def _host_memory(*_args: Any) -> tuple[int, int]:
    """(free, total) bytes of host memory, as ``torch.cuda.mem_get_info`` reports device memory."""
    memory = psutil.virtual_memory()
    return memory.available, memory.total


def _resident_bytes(*_args: Any, **_kwargs: Any) -> int:
    return psutil.Process().memory_info().rss


def _no_op(*_args: Any, **_kwargs: Any) -> None:
    return None


def _build_device_module() -> types.ModuleType:
    """A module with the ``torch.cuda`` functions verl calls, answered for the CPU: streams, events and
    synchronisation from ``torch.cpu``, torch's global generator, the host's memory (free/total) and this process's
    resident set (allocated/reserved), so verl's memory logs stay meaningful."""
    module = types.ModuleType("avspo_cpu_device", "torch.cuda stand-in for verl's cpu platform")
    for name in ("Stream", "Event", "StreamContext", "current_stream", "stream", "synchronize", "device_count"):
        setattr(module, name, getattr(torch.cpu, name))
    module.is_available = lambda: True
    module.is_initialized = lambda: True
    module.current_device = lambda: torch.device("cpu")
    module.get_device_name = lambda *_args: "cpu"
    module.get_device_capability = lambda *_args: (None, None)
    module.manual_seed = torch.manual_seed
    module.manual_seed_all = torch.manual_seed
    module.seed = torch.seed
    module.initial_seed = torch.initial_seed
    module.get_rng_state = lambda *_args: torch.get_rng_state()
    module.set_rng_state = lambda state, *_args: torch.set_rng_state(state)
    module.get_rng_state_all = lambda: [torch.get_rng_state()]
    module.set_rng_state_all = lambda states: torch.set_rng_state(states[0])
    module.mem_get_info = _host_memory
    for name in ("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"):
        setattr(module, name, _resident_bytes)
    no_ops = ("set_device", "empty_cache", "ipc_collect", "reset_peak_memory_stats", "set_per_process_memory_fraction")
    for name in no_ops:
        setattr(module, name, _no_op)
    module.memory_stats = lambda *_args: {}
    return module


CPU_DEVICE_MODULE = _build_device_module()


@PlatformRegistry.register(platform=PLATFORM_NAME)
class PlatformCPU(PlatformBase):
    """verl platform for host CPUs (collectives over gloo)."""

    device_name = vendor_name = "cpu"
    device_module = CPU_DEVICE_MODULE
    set_device = synchronize = set_allocator_settings = empty_cache = profiler_start = profiler_stop = cudart = _no_op

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Never auto-detected: a GPU host that imports this module keeps its own platform.
        return cpu_platform_selected()

    def current_device(self) -> torch.device:
        # verl passes this to tensor.to(...) and init_device_mesh; an int would mean cuda:<int>.
        return torch.device("cpu")

    def device_count(self) -> int:
        return 1

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray sets this for the logical GPU each worker is given; nothing reads it on CPU.
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def ray_resource_name(self) -> str:
        # verl's resource pools always ask Ray for accelerators; a CPU run declares logical
        # GPUs (ray_init.num_gpus) so each worker is placed on one.
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False
