"""Running many lab runs: one warm-up, then (settings, method, seed) runs in worker processes.

Every run uses one torch thread, in the main process as in the workers, so a run's
numbers do not depend on how many runs go in parallel (``jobs``) or on the machine's
core count: the same seed gives the same series.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import multiprocessing
import os
import pickle
import resource
import sys
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from avspo_plugin.state_files import StateFileError, read_json, write_json

from .methods import Method
from .policy import build_policy
from .settings import LabSettings
from .train import Evaluation, evaluate, held_out, sampled_pass_rates, train, warm_up


@dataclass(frozen=True)
class RunSpec:
    """One run: settings, method and seed; ``key`` names it in the results."""

    key: str
    settings: LabSettings
    method: Method
    seed: int
    extra_final_evals: tuple[float, ...] = ()  # temperatures of further readings at the last evaluation
    evaluation: Evaluation | None = None  # a study's own evaluation in place of the lab's (train.Evaluation)


def quiet_process() -> None:
    """One torch thread; no library chatter between progress lines (the lab records what it needs)."""
    torch.set_num_threads(1)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")
    # The AVSPO session's stagnation / entropy warnings: the lab records ACR and entropy per step itself.
    logging.getLogger("lab.avspo").setLevel(logging.ERROR)
    logging.getLogger("transformers").setLevel(logging.ERROR)


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def prepare_base(settings: LabSettings, cache: Path | None = None) -> tuple[dict[str, torch.Tensor], dict]:
    """Warm up the base policy and describe it: held-out accuracy and per-tier pass rates at the temperature.

    cache: a folder where each warmed-up base is kept under a fingerprint of its settings (its parameters and its
    description); a base found there is read back instead of warmed up again (deterministic on one machine, as
    the runs of :func:`run_all`)."""
    fingerprint = content_fingerprint(settings.to_dict())
    if cache is not None and (cache / f"{fingerprint}.json").exists():
        description = read_json(str(cache / f"{fingerprint}.json"), "Delete it to warm that base up again.")
        parameters = cache / f"{fingerprint}.pt"
        try:
            return torch.load(parameters, weights_only=True), description
        except (OSError, RuntimeError, pickle.UnpicklingError) as err:
            raise StateFileError(f"{parameters}: the parameters of a warmed-up base cannot be read ({err}). Delete it "
                                 f"and {fingerprint}.json beside it to warm that base up again.") from None
    quiet_process()
    started, cpu_started = time.perf_counter(), time.process_time()
    base_state = warm_up(settings)
    policy = build_policy(settings.shape, settings.task_seed)
    policy.load_state_dict(base_state)
    description = {
        "held_out": {**evaluate(policy, held_out(settings), settings, step=0), "settings": evaluation_settings(settings)},
        "sampled_by_tier": sampled_pass_rates(policy, settings, seed=settings.task_seed),
        "parameters": sum(p.numel() for p in policy.parameters()),
        "warmup_wall_s": time.perf_counter() - started,
        "warmup_cpu_s": time.process_time() - cpu_started,
    }
    if cache is not None:  # the parameters first: a description on disk means its parameters are there
        cache.mkdir(parents=True, exist_ok=True)
        torch.save(base_state, cache / f"{fingerprint}.pt.tmp")
        os.replace(cache / f"{fingerprint}.pt.tmp", cache / f"{fingerprint}.pt")
        write_json(str(cache / f"{fingerprint}.json"), description)
    return base_state, description


def prepare_bases(settings: list[LabSettings], cache: Path, jobs: int) -> None:
    """Warm up into ``cache`` every base of ``settings`` not there yet, ``jobs`` at a time (each in a worker process
    forked as :func:`run_all`'s are); :func:`prepare_base` then reads each back."""
    todo = [s for s in settings if not (cache / f"{content_fingerprint(s.to_dict())}.json").exists()]
    in_workers(prepare_base, [(s, cache) for s in todo], jobs)


def in_workers(function, arguments: list[tuple], jobs: int) -> list:
    """``function(*a)`` for each ``a`` of ``arguments``, in order; with jobs > 1 (and more than one call) in that many
    worker processes forked as :func:`run_all`'s are (``function`` must be a module-level function)."""
    if jobs <= 1 or len(arguments) <= 1:
        return [function(*a) for a in arguments]
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    with context.Pool(min(jobs, len(arguments))) as pool:
        return pool.starmap(function, arguments)


_BASE: tuple[dict[str, torch.Tensor], dict | None] | None = None


def _init_worker(base_state: dict[str, torch.Tensor], initial_eval: dict | None) -> None:
    global _BASE
    quiet_process()
    _BASE = (base_state, initial_eval)


def _train(spec: RunSpec) -> dict:
    assert _BASE is not None
    base_state, initial_eval = _BASE
    initial = initial_eval if _same_evaluation(spec.settings, initial_eval) else None
    return train(spec.settings, spec.method, spec.seed, base_state,
                 extra_final_evals=spec.extra_final_evals, initial_eval=initial, evaluation=spec.evaluation)


def _same_evaluation(settings: LabSettings, initial_eval: dict | None) -> bool:
    """The base's step-0 evaluation stands for a run's own when it was taken with the run's evaluation settings."""
    return initial_eval is not None and initial_eval.get("settings") == evaluation_settings(settings)


def evaluation_settings(settings: LabSettings) -> dict:
    """What a step-0 evaluation depends on besides the base policy."""
    return {key: settings.to_dict()[key] for key in ("tiers", "task_seed", "held_out_per_tier", "eval_samples",
                                                     "eval_temperature")}


def planned_steps(settings: LabSettings) -> int:
    """Steps of a run that samples P x G rollouts per step (in budget mode, DAPO takes fewer)."""
    return settings.rollout_budget // (settings.prompts * settings.group_size) if settings.rollout_budget else settings.steps


def _run(spec: RunSpec) -> tuple[str, dict]:
    return spec.key, _train(spec)


def run_all(
    specs: list[RunSpec], base_state: dict[str, torch.Tensor], jobs: int, progress: bool = True,
    initial_eval: dict | None = None, cache: Path | None = None,
) -> dict[str, dict]:
    """Run every spec; results by key. jobs > 1 runs them in that many worker processes, forked from one
    server process that imported this module (and torch) once, instead of each importing it again.

    initial_eval: the base policy's step-0 evaluation (prepare_base's ``held_out``); a run whose evaluation
    settings match uses it instead of evaluating the same policy with the same random numbers again.
    cache: a folder where each finished run is kept under its :func:`run_fingerprint`; a run found there is read
    back instead of run again (a stopped study resumes where it stopped). Runs are deterministic on one machine.
    """
    base_digest = state_digest(base_state)
    cached = {s.key: _read_cached(cache, run_fingerprint(s, base_digest)) for s in specs} if cache else {}
    results: dict[str, dict] = {key: result for key, result in cached.items() if result is not None}
    todo = [s for s in specs if s.key not in results]
    total_steps = sum(planned_steps(s.settings) for s in todo)

    def keep(spec: RunSpec, result: dict) -> None:
        results[spec.key] = result
        if cache:  # atomically: a study stopped mid-write leaves no half file to resume from
            write_json(str(cache / f"{run_fingerprint(spec, base_digest)}.json"), {"key": spec.key, "result": result})

    with tqdm(total=total_steps, unit="step", disable=not progress, file=sys.stderr, dynamic_ncols=True) as bar:
        if jobs <= 1 or len(todo) <= 1:
            _init_worker(base_state, initial_eval)
            for spec in todo:
                bar.set_postfix_str(spec.key)
                keep(spec, _train(spec))
                bar.update(planned_steps(spec.settings))
        else:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload([__name__])
            with context.Pool(min(jobs, len(todo)), initializer=_init_worker,
                              initargs=(base_state, initial_eval)) as pool:
                by_key = {s.key: s for s in todo}
                for key, result in pool.imap_unordered(_run, todo):
                    keep(by_key[key], result)
                    bar.update(planned_steps(by_key[key].settings))
                    bar.set_postfix_str(key)
    return {s.key: results[s.key] for s in specs}


def state_digest(state: dict[str, torch.Tensor]) -> str:
    """SHA-256 of a policy's parameters, in name order."""
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode())
        digest.update(state[name].detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def run_fingerprint(spec: RunSpec, base_digest: str) -> str:
    """What a run's result depends on: settings, method, seed, extra evaluations and the base policy (and a study's
    own evaluation, by its settings, when it has one: runs without one keep the fingerprints they had)."""
    what = {"settings": spec.settings.to_dict(), "method": dataclasses.asdict(spec.method), "seed": spec.seed,
            "extra_final_evals": list(spec.extra_final_evals), "base": base_digest}
    if spec.evaluation is not None:
        what["evaluation"] = {"kind": type(spec.evaluation).__name__, **dataclasses.asdict(spec.evaluation)}
    return content_fingerprint(what)


def content_fingerprint(what: dict) -> str:
    """The first 32 hex digits of the SHA-256 of ``what`` as canonical JSON (sorted keys)."""
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _read_cached(cache: Path, fingerprint: str) -> dict | None:
    path = cache / f"{fingerprint}.json"
    if not path.exists():
        return None
    return read_json(str(path), "Delete it to run that run again.")["result"]


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def write_report(out: Path, name: str, report: dict, markdown: str) -> None:
    """``name``.json and ``name``.md in ``out`` (before any plot, so that a plotting error loses no run); the
    markdown also goes to stdout."""
    (out / f"{name}.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (out / f"{name}.md").write_text(markdown, encoding="utf-8")
    print(markdown)


def run_timing(started: float, jobs: int) -> dict:
    """Wall seconds since ``started``, CPU seconds of this process and of the children it waited for, and the worker
    count. The pool's workers are the forkserver's children, not this process's: a run's own CPU seconds are its
    ``cpu_s``, summed by the caller as ``runs_cpu_s``."""
    return {"wall_s": time.perf_counter() - started, "cpu_s": own_cpu_s() + children_cpu_s(), "jobs": jobs}


def run_keys(methods: Iterable[Method], seeds: Iterable[int]) -> list[tuple[str, Method, int]]:
    return [(f"{m.name}/seed{seed}", m, seed) for m in methods for seed in seeds]
