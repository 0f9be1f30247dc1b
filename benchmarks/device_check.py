"""Run the avspo core on a device and check it there: the same result as on the CPU, the host
synchronisations of one call, its peak memory, and its time against verl's grpo_vectorized on the
same device (where verl imports).

For each batch of B responses of L tokens and each group size G (binary outcome rewards, both
kinds of collapse present, uuid group labels, float32 rewards and mask, the default config: every
collapsed group gets virtual samples) it records:

- ``equal_to_cpu``: the core's advantages, K per group, virtual rewards and metrics on the device are
  those of the same batch on the CPU, bit for bit (binary rewards: every group statistic is exact in
  float64, so the two devices have nothing to round differently);
- ``syncs``: the host synchronisations of one call, counted with torch.cuda.set_sync_debug_mode
  (None on a CPU, where there is no device to wait for); ``per_group_syncs`` is False when the count is
  the same for every B of one G, i.e. it does not grow with the number of groups;
- ``peak_bytes``: the memory one call adds at its peak (CUDA: torch.cuda.max_memory_allocated; CPU: the
  growth of the process's resident high-water mark, Linux), and ``peak_ratio``, that over the bytes of
  the batch's own tensors (token_level_rewards and response_mask);
- ``core_ms`` and ``verl_ms``: median wall time of the core's call and of verl's grpo_vectorized
  (verl.trainer.ppo.core_algos) on the same tensors, ``verl_ms`` None where verl does not import.

    python benchmarks/device_check.py [--device cpu|cuda] [--sizes BxL,...] [--groups 8,16] [--repeats 5] [--json OUT]

On a GPU the defaults are B x L up to 32768 x 16384 and G 8 and 16; on a CPU, small shapes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from avspo_plugin import AVSPOConfig, ThresholdState, compute_token_advantages

GPU_SIZES = "1024x1024,8192x4096,32768x16384"
CPU_SIZES = "64x16,256x32"


def make_batch(batch: int, length: int, group_size: int, seed: int = 0):
    """Binary outcome rewards on each response's last token (B, L), its mask (B, L), uuid labels (B,) (CPU)."""
    rng = np.random.default_rng(seed)
    prompts = batch // group_size
    pass_rate = rng.choice([0.0, 1.0, 0.3, 0.6], size=prompts, p=[0.3, 0.1, 0.3, 0.3])
    rewards = (rng.random((prompts, group_size)) < pass_rate[:, None]).reshape(-1)
    lengths = torch.as_tensor(rng.integers(max(1, length // 4), length + 1, prompts * group_size))
    mask = (torch.arange(length)[None, :] < lengths[:, None]).to(torch.float32)
    token_rewards = torch.zeros(prompts * group_size, length)
    token_rewards[torch.arange(prompts * group_size), lengths - 1] = torch.as_tensor(rewards, dtype=torch.float32)
    labels = np.repeat([str(uuid.UUID(int=int(x))) for x in rng.integers(0, 2**63, prompts)], group_size)
    return token_rewards, mask, labels.astype(object)


def same_result(device_result, cpu_result) -> bool:
    """Whether two AVSPOResults are equal bit for bit: advantages, K, virtual rewards, metrics, next state."""
    return (
        all(torch.equal(getattr(device_result, name).cpu(), getattr(cpu_result, name))
            for name in ("advantages", "num_virtual", "virtual_rewards"))
        and device_result.metrics == cpu_result.metrics
        and device_result.state == cpu_result.state
    )  # fmt: skip


def count_syncs(fn: Callable[[], Any]) -> int:
    """The synchronising CUDA operations of ``fn()`` (torch.cuda.set_sync_debug_mode warns once per each)."""
    torch.cuda.synchronize()
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    return sum("synchronizing" in str(warning.message) for warning in caught)


def _status_bytes(key: str) -> int:
    with open("/proc/self/status") as handle:
        return int(re.search(rf"^{key}:\s+(\d+) kB", handle.read(), re.MULTILINE).group(1)) * 1024


def host_peak_growth(fn: Callable[[], Any]) -> int:
    """How far ``fn()`` raises the process's resident memory at its peak, in bytes (Linux).

    Writing 5 to /proc/self/clear_refs resets the high-water mark (VmHWM) to the current resident size;
    VmHWM after the call, less the size before, is the call's peak growth: every allocator counted (torch,
    numpy, Python), memory the process already held and reuses not counted. OSError where the kernel
    offers no reset.
    """
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")
    before = _status_bytes("VmRSS")
    fn()
    return max(0, _status_bytes("VmHWM") - before)


def peak_growth(fn: Callable[[], Any], device: str) -> int:
    """The memory ``fn()`` adds at its peak on ``device``: CUDA's allocator peak, or the host's (:func:`host_peak_growth`)."""
    if device != "cuda":
        return host_peak_growth(fn)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def median_ms(fn: Callable[[], Any], device: str, repeats: int) -> float:
    """Median wall time of ``fn()`` in ms, after one warm-up call; the device drained around each call."""
    def once() -> float:
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    fn()
    return statistics.median(once() for _ in range(repeats)) * 1e3


def verl_grpo_vectorized() -> Callable | None:
    """verl's grpo_vectorized estimator, or None where verl does not import (a GPU machine without it)."""
    try:
        from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    except ImportError:
        return None
    return get_adv_estimator_fn("grpo_vectorized")


def check(batch: int, length: int, group_size: int, device: str, repeats: int, grpo: Callable | None) -> dict[str, Any]:
    """One record (see the module docstring) for a batch of B x L at group size G on ``device``."""
    token_rewards, mask, labels = make_batch(batch, length, group_size)
    config = AVSPOConfig()
    state = ThresholdState.initial(config)
    cpu_result = compute_token_advantages(token_rewards, mask, labels, config, state)
    on_device = token_rewards.to(device), mask.to(device)

    def core():
        return compute_token_advantages(*on_device, labels, config, state)

    device_result = core()
    own_bytes = token_rewards.nbytes + mask.nbytes
    peak = peak_growth(core, device)
    record = {
        "device": device, "B": token_rewards.shape[0], "L": length, "G": group_size,
        "groups": int(device_result.num_virtual.shape[0]),
        "equal_to_cpu": same_result(device_result, cpu_result),
        "syncs": count_syncs(core) if device == "cuda" else None,
        "peak_bytes": peak, "peak_ratio": peak / own_bytes,
        "core_ms": median_ms(core, device, repeats), "verl_ms": None,
    }  # fmt: skip
    del cpu_result, device_result
    if grpo is not None:
        record["verl_ms"] = median_ms(
            lambda: grpo(token_level_rewards=on_device[0], response_mask=on_device[1], index=labels,
                         config=None, norm_adv_by_std_in_grpo=True),
            device, repeats,
        )  # fmt: skip
    return record


def run(sizes: list[tuple[int, int]], groups: list[int], device: str, repeats: int) -> list[dict[str, Any]]:
    """A record per (B, L, G), each with ``per_group_syncs``: whether its G's sync count varies with B."""
    grpo = verl_grpo_vectorized()
    records = [check(batch, length, g, device, repeats, grpo) for g in groups for batch, length in sizes]
    for g in groups:
        counts = {record["syncs"] for record in records if record["G"] == g}
        for record in records:
            if record["G"] == g:
                record["per_group_syncs"] = None if device != "cuda" else len(counts) > 1
    return records


def _shown(value: Any, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda, cuda:N or cpu")
    parser.add_argument("--sizes", help=f"BxL list (default: {GPU_SIZES} on a GPU, {CPU_SIZES} on a CPU)")
    parser.add_argument("--groups", default="8,16", help="group sizes G")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="also write the records to this file")
    args = parser.parse_args()
    device = args.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        parser.error(f"--device {device}: no CUDA device is available to torch here")
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
        device = "cuda"
    sizes = [tuple(int(x) for x in size.split("x")) for size in (args.sizes or (GPU_SIZES if device == "cuda" else CPU_SIZES)).split(",")]
    records = run(sizes, [int(g) for g in args.groups.split(",")], device, args.repeats)
    where = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(f"torch {torch.__version__}, device {device} ({where}), median of {args.repeats} calls")
    if device != "cuda":
        print("host synchronisations: not applicable on a CPU (no device to wait for)")
    columns = ("device", "B", "L", "G", "groups", "equal_to_cpu", "syncs", "per_group_syncs", "peak_bytes", "peak_ratio",
               "core_ms", "verl_ms")  # fmt: skip
    print(" ".join(f"{name:>15}" for name in columns))
    for record in records:
        print(" ".join(f"{_shown(record[name]):>15}" for name in columns))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"command": " ".join(["python", "benchmarks/device_check.py", *sys.argv[1:]]),
                       "recorded": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                       "cpus": os.cpu_count(), "torch": torch.__version__, "device_name": where, "records": records},
                      handle, indent=1)  # fmt: skip


if __name__ == "__main__":
    main()
