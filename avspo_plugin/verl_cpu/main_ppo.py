"""Run verl's ``main_ppo`` on CPU as a watched subprocess, and read what its file backend logged.

What ``avspo verl-demo`` and the end-to-end tests need: the run (its command line the caller's), in the CPU
environment, with its phases and steps echoed, a timeout, its whole process tree (Ray's cluster and workers)
measured and ended afterwards, and the ``avspo/*`` metrics of each step.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from avspo_plugin.names import METRIC_PREFIX


@dataclass
class TrainingRun:
    returncode: int
    seconds: float
    log_file: Path
    metrics_file: Path
    peak_memory_bytes: int


# Lines of main_ppo's output that mark a phase: (pattern, what to tell the user).
PHASES = (
    (re.compile(r"Started a local Ray instance"), "Ray cluster up; starting verl's trainer process"),
    (re.compile(r"Using dataset class"), "trainer up; loading the parquet files"),
    (re.compile(r"Qwen2ForCausalLM contains"), "FSDP actor built on CPU"),
    (re.compile(r"checkpoint engine manager initialized"), "starting the hf rollout server and agent loop"),
    (re.compile(r"Training Progress:"), "training; the first step also starts the agent-loop and reward workers"),
)
STEP_LINE = re.compile(r"(?:^|\s)step:(\d+) - ")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_main_ppo(command: Sequence[str], out: Path, run_name: str = "train", echo: bool = True,
                 timeout: float | None = None, extra_env: dict[str, str] | None = None) -> TrainingRun:
    """Run main_ppo as a subprocess; its output goes to ``out/<run_name>.log`` (lines prefixed with seconds since
    launch) and its file-backend metrics to ``out/<run_name>.metrics.jsonl``. With ``echo``, phases and finished
    steps are printed; ``extra_env`` overrides the CPU environment. What the run started is ended whatever happens."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    log_file, metrics_file = out / f"{run_name}.log", out / f"{run_name}.metrics.jsonl"
    # The CPU support loaded in every Ray process, no hub, no wandb, Ray's log lines not folded together, no Ray
    # workers started ahead for the driver (verl's actors never use them; on 2 cores each costs a second of CPU);
    # one metrics file per run (verl's file backend truncates its file: a resumed run must not erase the steps of
    # the run it continues).
    env = {
        **os.environ,
        "VERL_USE_EXTERNAL_MODULES": "avspo_plugin.verl_cpu",
        "VERL_PLATFORM": "cpu",
        "HF_HUB_OFFLINE": "1",
        "WANDB_MODE": "disabled",
        "TOKENIZERS_PARALLELISM": "false",
        "RAY_DEDUP_LOGS": "0",
        "RAY_prestart_worker_first_driver": "0",
        **(extra_env or {}),
        "VERL_FILE_LOGGER_PATH": str(metrics_file),
        "TENSORBOARD_DIR": str(out / f"{run_name}.tensorboard"),
    }
    started = time.monotonic()
    phases = list(PHASES)
    with open(log_file, "w") as log:
        log.write("$ " + shlex.join(command) + "\n")
        log.flush()
        process = subprocess.Popen(list(command), cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
        processes = ProcessTree(process.pid)
        # A watchdog rather than a check between lines: a hung run prints nothing.
        watchdog = threading.Timer(timeout, process.terminate) if timeout is not None else None
        if watchdog is not None:
            watchdog.start()
        try:
            for raw in process.stdout:
                line = ANSI.sub("", raw)
                elapsed = time.monotonic() - started
                log.write(f"[{elapsed:7.1f}s] {line}")
                if not echo:
                    continue
                if phases and phases[0][0].search(line):
                    print(f"      {elapsed:6.1f} s  {phases.pop(0)[1]}", flush=True)
                step = STEP_LINE.search(line)
                if step:
                    print(f"      {elapsed:6.1f} s  step {step.group(1)} done", flush=True)
        finally:
            if watchdog is not None:
                watchdog.cancel()
            if process.poll() is None:
                process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            elapsed = time.monotonic() - started
            if timeout is not None and elapsed > timeout:
                log.write(f"[stopped: the run exceeded {timeout:.0f} s]\n")
            log.write(f"[{elapsed:7.1f}s] main_ppo exited with code {process.returncode}\n")
            # main_ppo shuts its Ray cluster down when it exits, but not always all of it (and
            # nothing of it after a crash or a timeout): what is left is ended here.
            leftover = processes.stop()
            if leftover:
                log.write(f"[{time.monotonic() - started:7.1f}s] ended what the run left running: "
                          f"{', '.join(leftover)}\n")
            log.write(f"peak memory of the run (PSS, all its processes): {processes.peak_memory / 2**30:.2f} GiB\n")
    return TrainingRun(process.returncode, time.monotonic() - started, log_file, metrics_file, processes.peak_memory)


class ProcessTree:
    """The processes a run started: main_ppo and its descendants (Ray's cluster and workers).

    Samples their memory every ``interval`` seconds (proportional set size, so that pages shared between processes
    count once) and remembers each process seen, so that :meth:`stop` ends exactly those still running, even ones
    orphaned by a crash, and no other Ray cluster on the machine. A sample reads the process table once.
    """

    def __init__(self, pid: int, interval: float = 2.0) -> None:
        self.root = psutil.Process(pid)
        self.interval, self.peak_memory = interval, 0
        self.seen: dict[int, Any] = {pid: self.root}
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _descendants(self) -> list[Any]:
        """Every process seen so far that still runs, after adding the children of those seen (a process whose
        parent died is still found, as it was seen before)."""
        children: dict[int, list[Any]] = {}
        for process in psutil.process_iter():
            try:
                children.setdefault(process.ppid(), []).append(process)
            except psutil.NoSuchProcess:
                pass
        pending = list(self.seen)
        while pending:
            for child in children.get(pending.pop(), ()):
                if child.pid not in self.seen:
                    self.seen[child.pid] = child
                    pending.append(child.pid)
        return [process for process in self.seen.values() if process.is_running()]

    def _sample(self) -> None:
        while not self._stopped.wait(self.interval):
            total = 0
            for process in self._descendants():
                try:
                    total += process.memory_full_info().pss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    pass
            self.peak_memory = max(self.peak_memory, total)

    def stop(self, grace: float = 10.0) -> list[str]:
        """Stop sampling and end the processes still running (terminate, then kill); returns their names."""
        self._stopped.set()
        self._thread.join()
        alive, names = self._descendants(), []
        for process in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                names.append(f"{process.name()} ({process.pid})")
        for end in (psutil.Process.terminate, psutil.Process.kill):
            for process in alive:
                with contextlib.suppress(psutil.NoSuchProcess):
                    end(process)
            _, alive = psutil.wait_procs(alive, timeout=grace)
        return names


def avspo_metrics_by_step(metrics_file: Path) -> dict[int, dict[str, float]]:
    """{step: {avspo metric: value}} from verl's file backend output (one ``{"step", "data"}`` record a line)."""
    steps: dict[int, dict[str, float]] = {}
    with open(metrics_file) as handle:
        for record in (json.loads(line) for line in handle if line.strip()):
            avspo = {key: value for key, value in record["data"].items() if key.startswith(METRIC_PREFIX)}
            steps.setdefault(int(record["step"]), {}).update(avspo)
    return steps
