"""Time the avspo estimator against verl's grpo and grpo_vectorized and a memory-bound floor.

For each batch of B responses of L tokens (G = 8 per prompt, binary outcome rewards
with both kinds of collapse present, uuid group labels) it reports the median wall
time of: avspo (as verl calls it, through the registry, metrics included), verl's
grpo (a Python loop over samples), grpo_vectorized, and the floor, a masked copy of
token_level_rewards (every estimator must at least read the rewards and write a
(B, L) result), and the ratios avspo / grpo_vectorized and avspo / floor. It also times the
ACR monitor (``algorithm.avspo_monitor``) on the same batch, as verl's ``compute_advantage``
calls it beside another estimator, and its cost relative to grpo_vectorized: what it adds to
``timing_s/adv``. And the parts of avspo's time: the token sum (the sequence rewards, a (B, L) pass verl's own
estimators make too), the core's per-sample work on those rewards (``compute_group_advantages``: labels, statistics,
virtual samples, metrics) and the final broadcast of the advantages over the response mask (the other (B, L) pass);
what is left of avspo's time beyond the three is the adapter's (config parsing, session bookkeeping).

The candidates are timed in interleaved rounds (each round runs each of them once, in
rotating order), so that a change in the load of a shared machine falls on all of them
alike and the ratios of one run stay comparable. ``--clock cpu`` times each call by the
process's CPU time instead of the wall clock: on a CPU shared with other work (with
``--threads 1``, where the one thread does all the work) the time the process waits for a
core is then left out, though not the caches the other work evicts.

    python benchmarks/estimator_bench.py [--device cpu|cuda] [--sizes 1024x1024,8192x4096] [--repeats 7] [--json FILE]

``--json FILE`` also writes the run as JSON: the command, the machine (processor, cores, load average, the
process's nice level), the versions, and per size the median milliseconds of each candidate; docs/method/performance.md's
tables are rendered from such files (docs/method/performance/, ``python -m renderer``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf
from verl.trainer.ppo.core_algos import get_adv_estimator_fn

from avspo_plugin import AVSPOConfig, ThresholdState, compute_group_advantages
from avspo_plugin.verl import session  # registers "avspo" (stock verl loads it through the entry point as well)
from avspo_plugin.verl.monitor import monitor, observe

GROUP_SIZE = 8


def make_batch(batch: int, length: int, device: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    prompts = batch // GROUP_SIZE
    pass_rate = rng.choice([0.0, 1.0, 0.3, 0.6], size=prompts, p=[0.3, 0.1, 0.3, 0.3])
    rewards = (rng.random((prompts, GROUP_SIZE)) < pass_rate[:, None]).reshape(-1)
    lengths = torch.as_tensor(rng.integers(length // 4, length + 1, batch))
    mask = (torch.arange(length)[None, :] < lengths[:, None]).to(torch.float32)
    token_rewards = torch.zeros(batch, length)
    token_rewards[torch.arange(batch), lengths - 1] = torch.as_tensor(rewards, dtype=torch.float32)
    labels = np.repeat([str(uuid.UUID(int=int(x))) for x in rng.integers(0, 2**63, prompts)], GROUP_SIZE).astype(object)
    return token_rewards.to(device), mask.to(device), labels


def timed_rounds(candidates: dict[str, tuple[Callable[[], object], int]], device: str,
                 clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Median seconds of each candidate: (fn, repeats) each, timed in interleaved, rotating rounds by ``clock``."""
    def once(fn: Callable[[], object]) -> float:
        if device == "cuda":
            torch.cuda.synchronize()
        start = clock()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        return clock() - start

    names = list(candidates)
    for fn, _ in candidates.values():
        fn()  # warm-up: allocator, lazy init
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_number in range(max(repeats for _, repeats in candidates.values())):
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            fn, repeats = candidates[name]
            if len(times[name]) < repeats:
                times[name].append(once(fn))
    return {name: statistics.median(values) for name, values in times.items()}


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def bench(batch: int, length: int, device: str, repeats: int, with_loop_grpo: bool,
          clock: str = "wall") -> dict[str, float]:
    token_rewards, mask, labels = make_batch(batch, length, device)
    algorithm = OmegaConf.create({"adv_estimator": "avspo", "norm_adv_by_std_in_grpo": True, "avspo": {}})
    avspo, grpo, grpo_vec = (get_adv_estimator_fn(n) for n in ("avspo", "grpo", "grpo_vectorized"))

    def estimator(fn):
        return lambda: fn(token_level_rewards=token_rewards, response_mask=mask, index=labels, config=algorithm)

    from verl import DataProto

    data = DataProto.from_dict(
        tensors={"token_level_rewards": token_rewards, "response_mask": mask}, non_tensors={"uid": labels}
    )
    beside = OmegaConf.create({"adv_estimator": "grpo_vectorized", "avspo_monitor": {"enable": True}})
    scores, config = token_rewards.sum(dim=-1), AVSPOConfig()
    advantages = compute_group_advantages(scores, labels, config, ThresholdState.initial(config), response_mask=mask)
    candidates = {
        "floor": (lambda: token_rewards * mask, repeats),
        "avspo": (estimator(avspo), repeats),
        "grpo_vectorized": (estimator(grpo_vec), repeats),
        "monitor": (lambda: observe(data, beside, "grpo_vectorized"), repeats),
        # The parts of avspo's time (the adapter's is what avspo takes beyond them).
        "token_sum": (lambda: token_rewards.sum(dim=-1), repeats),
        "core": (lambda: compute_group_advantages(scores, labels, config, ThresholdState.initial(config),
                                                  response_mask=mask), repeats),
        "broadcast": (lambda: advantages.advantages.unsqueeze(-1) * mask, repeats),
    }
    if with_loop_grpo:
        candidates["grpo"] = (estimator(grpo), max(1, repeats // 2))
    session().reset()
    results = timed_rounds(candidates, device, CLOCKS[clock])
    session().reset()
    monitor().reset()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu",
        help="where the tensors live (default: cuda when a GPU is present, else cpu)",
    )
    parser.add_argument("--sizes", default="1024x1024,1024x4096,8192x1024,8192x4096", help="BxL list")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--skip-loop-grpo", action="store_true", help="leave out verl's looped grpo (slow)")
    parser.add_argument("--json", type=Path, help="also write the run to this JSON file")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="wall",
                        help="time each call by the wall clock (default) or by the process's CPU time (cpu only)")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is available to torch here")
    if args.device == "cuda" and args.clock == "cpu":
        parser.error("--clock cpu: a GPU's time is not the process's CPU time")
    if args.threads:
        torch.set_num_threads(args.threads)
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"cpu, threads {torch.get_num_threads()}"
    print(f"torch {torch.__version__}, device {args.device} ({where}), G = {GROUP_SIZE}, median of {args.repeats} "
          f"interleaved rounds, {args.clock} clock")
    header = f"{'device':<6} {'B':>5} {'L':>5} {'floor ms':>9} {'avspo ms':>9} {'grpo_vec ms':>11} {'grpo ms':>9}"
    header += f" {'avspo/grpo':>10} {'avspo/vec':>9} {'avspo/floor':>11} {'monitor ms':>10} {'monitor/vec':>11}"
    print(header)
    load_before, rows = os.getloadavg(), []
    for size in args.sizes.split(","):
        batch, length = (int(x) for x in size.split("x"))
        r = bench(batch, length, args.device, args.repeats, not args.skip_loop_grpo, args.clock)
        rows.append({"B": batch, "L": length, **{f"{name}_ms": round(seconds * 1e3, 4) for name, seconds in r.items()}})
        grpo = r.get("grpo", float("nan"))
        print(
            f"{args.device:<6} {batch:>5} {length:>5} {r['floor'] * 1e3:>9.2f} {r['avspo'] * 1e3:>9.2f} "
            f"{r['grpo_vectorized'] * 1e3:>11.2f} {grpo * 1e3:>9.1f} {r['avspo'] / grpo:>10.3f} "
            f"{r['avspo'] / r['grpo_vectorized']:>9.2f} {r['avspo'] / r['floor']:>11.2f} "
            f"{r['monitor'] * 1e3:>10.2f} {r['monitor'] / r['grpo_vectorized']:>11.3f}"
        )
        parts = ("token_sum", "core", "broadcast")
        print(f"  avspo's parts: {', '.join(f'{name} {r[name] * 1e3:.2f} ms' for name in parts)}, the adapter and the "
              f"rest {(r['avspo'] - sum(r[name] for name in parts)) * 1e3:.2f} ms")
    if args.json:
        args.json.write_text(json.dumps(run_record(args, where, load_before, rows), indent=1) + "\n")


def run_record(args: argparse.Namespace, where: str, load_before: tuple[float, ...], rows: list[dict]) -> dict:
    """What --json writes: the run's settings, machine and versions, and its rows (median ms per candidate)."""
    return {
        "command": " ".join(["python", "benchmarks/estimator_bench.py", *sys.argv[1:]]),
        "recorded": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "device": args.device, "where": where, "threads": torch.get_num_threads(), "repeats": args.repeats,
        "clock": args.clock,
        "group_size": GROUP_SIZE,
        "machine": {"processor": processor(), "cpus": os.cpu_count(), "nice": os.nice(0),
                    "load_average": [round(load_before[0], 2), round(os.getloadavg()[0], 2)]},
        "versions": {"python": platform.python_version(),
                     **{name: metadata.version(name) for name in ("avspo-plugin", "torch", "verl")}},
        "rows": rows,
    }  # fmt: skip


def processor() -> str:
    """The processor's model name (Linux's /proc/cpuinfo), else what the platform says."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


if __name__ == "__main__":
    main()
