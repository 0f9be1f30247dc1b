"""A ``cpu`` platform for verl's platform registry, selected with ``VERL_PLATFORM=cpu``.

verl 0.9.1 knows nvidia, ascend and rocm platforms and falls back to nvidia when
none is found, which makes every device call a CUDA call. This platform answers
them for the host CPU: the device is ``cpu``, collectives use gloo, and the
device module is :data:`CPU_DEVICE_MODULE`, which stands in for ``torch.cuda``
in the calls verl makes through ``get_torch_device()``.
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


def _host_memory() -> tuple[int, int]:
    """(free, total) bytes of host memory, as ``torch.cuda.mem_get_info`` reports device memory."""
    memory = psutil.virtual_memory()
    return memory.available, memory.total


def _resident_bytes(*_args: Any, **_kwargs: Any) -> int:
    return psutil.Process().memory_info().rss


def _no_op(*_args: Any, **_kwargs: Any) -> None:
    return None


def _build_device_module() -> types.ModuleType:
    """A module with the ``torch.cuda`` functions verl calls, answered for the CPU.

    Streams, events and synchronisation come from ``torch.cpu``; the RNG is torch's
    global CPU generator; memory figures are the host's (free/total) and this
    process's resident set (allocated/reserved), so verl's memory logs stay meaningful.
    """
    module = types.ModuleType("avspo_cpu_device", "torch.cuda stand-in for verl's cpu platform")
    for name in ("Stream", "Event", "StreamContext", "current_stream", "stream", "synchronize", "device_count"):
        setattr(module, name, getattr(torch.cpu, name))
    module.is_available = lambda: True
    module.is_initialized = lambda: True
    module.current_device = lambda: torch.device("cpu")
    module.set_device = _no_op
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
    module.mem_get_info = lambda *_args: _host_memory()
    for name in ("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"):
        setattr(module, name, _resident_bytes)
    for name in ("empty_cache", "ipc_collect", "reset_peak_memory_stats", "set_per_process_memory_fraction"):
        setattr(module, name, _no_op)
    module.memory_stats = lambda *_args: {}
    return module


CPU_DEVICE_MODULE = _build_device_module()


@PlatformRegistry.register(platform=PLATFORM_NAME)
class PlatformCPU(PlatformBase):
    """verl platform for host CPUs (collectives over gloo)."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return CPU_DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Never auto-detected: a GPU host that imports this module keeps its own platform.
        return os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM_NAME

    def current_device(self) -> torch.device:
        # verl passes this to tensor.to(...) and init_device_mesh; an int would mean cuda:<int>.
        return torch.device("cpu")

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

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

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        # verl's resource pools always ask Ray for accelerators; a CPU run declares logical
        # GPUs (ray_init.num_gpus) so each worker is placed on one.
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
