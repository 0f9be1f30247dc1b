"""Running many lab runs: one warm-up, then (settings, method, seed) runs in worker processes.

Every run uses one torch thread, in the main process as in the workers, so a run's
numbers do not depend on how many runs go in parallel (``jobs``) or on the machine's
core count: the same seed gives the same series.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import resource
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Iterable, Optional

import torch

from .methods import Method
from .settings import LabSettings
from .train import evaluate, held_out, sampled_pass_rates, train, warm_up


@dataclass(frozen=True)
class RunSpec:
    """One run: settings, method and seed; ``key`` names it in the results; ``extra_final_evals`` as in train()."""

    key: str
    settings: LabSettings
    method: Method
    seed: int
    extra_final_evals: tuple[float, ...] = ()


def quiet_process() -> None:
    """One torch thread; no library chatter between progress lines (the lab records what it needs)."""
    torch.set_num_threads(1)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")
    # The verl adapter's stagnation / entropy warnings: the lab records ACR and entropy per step itself.
    logging.getLogger("avspo_plugin.verl").setLevel(logging.ERROR)
    logging.getLogger("transformers").setLevel(logging.ERROR)


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def prepare_base(settings: LabSettings) -> tuple[dict[str, torch.Tensor], dict]:
    """Warm up the base policy and describe it: held-out accuracy and per-tier pass rates at the temperature."""
    from .policy import build_policy

    quiet_process()
    started, cpu_started = time.perf_counter(), time.process_time()
    base_state = warm_up(settings)
    policy = build_policy(settings.shape, settings.task_seed)
    policy.load_state_dict(base_state)
    description = {
        "held_out": evaluate(policy, held_out(settings), settings, step=0),
        "sampled_by_tier": sampled_pass_rates(policy, settings, seed=settings.task_seed),
        "parameters": sum(p.numel() for p in policy.parameters()),
        "warmup_wall_s": time.perf_counter() - started,
        "warmup_cpu_s": time.process_time() - cpu_started,
    }
    return base_state, description


_BASE_STATE: Optional[dict[str, torch.Tensor]] = None


def _init_worker(base_state: dict[str, torch.Tensor]) -> None:
    global _BASE_STATE
    quiet_process()
    _BASE_STATE = base_state


def _run(spec: RunSpec) -> tuple[str, dict]:
    assert _BASE_STATE is not None
    return spec.key, train(spec.settings, spec.method, spec.seed, _BASE_STATE, extra_final_evals=spec.extra_final_evals)


def run_all(
    specs: list[RunSpec], base_state: dict[str, torch.Tensor], jobs: int, progress: bool = True
) -> dict[str, dict]:
    """Run every spec; results by key. jobs > 1 runs them in that many spawned worker processes."""
    from tqdm import tqdm

    total_steps = sum(s.settings.steps for s in specs)
    results: dict[str, dict] = {}
    with tqdm(total=total_steps, unit="step", disable=not progress, file=sys.stderr, dynamic_ncols=True) as bar:
        if jobs <= 1:
            _init_worker(base_state)
            for spec in specs:
                bar.set_postfix_str(spec.key)
                results[spec.key] = train(spec.settings, spec.method, spec.seed, base_state,
                                          on_step=lambda: bar.update(), extra_final_evals=spec.extra_final_evals)
            return results
        context = multiprocessing.get_context("spawn")
        with context.Pool(min(jobs, len(specs)), initializer=_init_worker, initargs=(base_state,)) as pool:
            by_key = {s.key: s for s in specs}
            for key, result in pool.imap_unordered(_run, specs):
                results[key] = result
                bar.update(by_key[key].settings.steps)
                bar.set_postfix_str(key)
    return {s.key: results[s.key] for s in specs}


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_keys(methods: Iterable[Method], seeds: Iterable[int]) -> list[tuple[str, Method, int]]:
    return [(f"{m.name}/seed{seed}", m, seed) for m in methods for seed in seeds]
