"""``avspo verl-demo``: AVSPO inside verl's own trainer (``python -m verl.trainer.main_ppo``), on CPU.

Builds everything locally in ``--out``: a byte-level BPE tokenizer trained with
``tokenizers``, a randomly initialised tiny Qwen2 (hidden 64, 2 layers), and a
generated verifiable task (the last digit of a sum of two numbers below 100: hard
for a random model, so most groups collapse, the regime AVSPO is for). Then runs stock ``main_ppo`` with ``algorithm.adv_estimator=avspo``
on the CPU support of :mod:`avspo_plugin.verl.cpu` and prints the ``avspo/*``
metrics verl's tracker logged at each step.

The builders, the reward function and the command are public so tests and
users can reuse them. This module imports only the standard library at load
time (it is also the reward module verl loads, by ``pkg://`` path).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

TASK_NAME = "avspo_last_digit"
REWARD_MODULE = "pkg://avspo_plugin.verl.demo"
REWARD_FUNCTION = "compute_score"
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# The prompt as the tokenizer's chat template renders it: the user's text, then "A:".
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['content'] }}\n{% endfor %}{% if add_generation_prompt %}A:{% endif %}"
)
MODEL_DIMENSIONS = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
}
PROMPT_LENGTH = 64
RESPONSE_LENGTH = 16
GROUP_SIZE = 4
PROMPTS_PER_STEP = 4
LOGGERS = ("console", "file", "tensorboard")
PACKAGED_CONFIG = ("--config-path", "pkg://avspo_plugin.verl.config", "--config-name", "avspo_trainer")


# ----------------------------------------------------------------------------------------------
# The task and its reward
# ----------------------------------------------------------------------------------------------


def task_prompt(a: int, b: int) -> str:
    return f"What is the last digit of {a}+{b}? Answer with one digit."


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None, **_: Any) -> float:
    """1.0 when the first digit in the response is ``ground_truth`` (one digit), else 0.0."""
    if not (isinstance(ground_truth, str) and len(ground_truth) == 1 and ground_truth.isdigit()):
        raise ValueError(f"{TASK_NAME}: ground truth must be one digit, got {ground_truth!r}")
    match = re.search(r"\d", solution_str)
    return 1.0 if match is not None and match.group() == ground_truth else 0.0


def task_rows(count: int, split: str, rng: random.Random) -> list[dict[str, Any]]:
    """Rows in verl's RL dataset format (prompt as chat messages, reward_model.ground_truth)."""
    rows = []
    for index in range(count):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        rows.append(
            {
                "data_source": TASK_NAME,
                "prompt": [{"role": "user", "content": task_prompt(a, b)}],
                "ability": "arithmetic",
                "reward_model": {"style": "rule", "ground_truth": str((a + b) % 10)},
                "extra_info": {"split": split, "index": index, "a": a, "b": b},
            }
        )
    return rows


# ----------------------------------------------------------------------------------------------
# Building the model, tokenizer and data
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoFiles:
    model_dir: Path
    train_file: Path
    test_file: Path


def build_tokenizer(model_dir: Path, seed: int = 0):
    """A byte-level BPE of about 300 tokens trained on the task's own text, saved as an HF tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(seed)
    corpus = [task_prompt(rng.randint(0, 99), rng.randint(0, 99)) + "\nA:" for _ in range(2000)]
    corpus += [" ".join(str(rng.randint(0, 99)) for _ in range(8)) for _ in range(500)]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(corpus, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        chat_template=CHAT_TEMPLATE,
    )
    tokenizer.save_pretrained(model_dir)
    return tokenizer


def build_model(model_dir: Path, tokenizer: Any, seed: int = 0) -> int:
    """A randomly initialised Qwen2ForCausalLM sized by MODEL_DIMENSIONS; returns its parameter count."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        tie_word_embeddings=True,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **MODEL_DIMENSIONS,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.eos_token_id
    )
    model.save_pretrained(model_dir)
    return sum(parameter.numel() for parameter in model.parameters())


def build_demo_files(out: Path, train_prompts: int = 256, test_prompts: int = 16, seed: int = 0) -> DemoFiles:
    """Model, tokenizer and train/test parquet files under ``out`` (rebuilt each call; about a second)."""
    import pandas as pd

    out = Path(out)
    model_dir, data_dir = out / "model", out / "data"
    model_dir.mkdir(parents=True, exist_ok=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(model_dir, seed)
    build_model(model_dir, tokenizer, seed)
    rng = random.Random(seed)
    files = DemoFiles(model_dir, data_dir / "train.parquet", data_dir / "test.parquet")
    pd.DataFrame(task_rows(train_prompts, "train", rng)).to_parquet(files.train_file)
    pd.DataFrame(task_rows(test_prompts, "test", rng)).to_parquet(files.test_file)
    return files


# ----------------------------------------------------------------------------------------------
# The main_ppo command
# ----------------------------------------------------------------------------------------------


def cpu_overrides(files: DemoFiles) -> list[str]:
    """Hydra overrides for a CPU run of main_ppo on the demo files; docs/verl-cpu.md says why each is there."""
    mini = GROUP_SIZE * PROMPTS_PER_STEP
    return [
        f"data.train_files={files.train_file}",
        f"data.val_files={files.test_file}",
        f"data.train_batch_size={PROMPTS_PER_STEP}",
        f"data.max_prompt_length={PROMPT_LENGTH}",
        f"data.max_response_length={RESPONSE_LENGTH}",
        "data.shuffle=False",
        "data.dataloader_num_workers=0",
        f"actor_rollout_ref.model.path={files.model_dir}",
        "actor_rollout_ref.model.use_remove_padding=False",
        "actor_rollout_ref.model.enable_gradient_checkpointing=False",
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.actor.strategy=fsdp2",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={PROMPTS_PER_STEP}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={mini}",
        "actor_rollout_ref.actor.use_kl_loss=False",
        "actor_rollout_ref.actor.optim.lr=1e-3",
        "actor_rollout_ref.rollout.name=hf",
        f"actor_rollout_ref.rollout.n={GROUP_SIZE}",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={mini}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={mini}",
        "reward.num_workers=1",
        f"reward.custom_reward_function.path={REWARD_MODULE}",
        f"reward.custom_reward_function.name={REWARD_FUNCTION}",
        "algorithm.use_kl_in_reward=False",
        "trainer.device=cpu",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        "trainer.total_epochs=1000",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        "+ray_kwargs.ray_init.address=local",
        "+ray_kwargs.ray_init.include_dashboard=False",
        "+ray_kwargs.ray_init.num_cpus=16",
        "+ray_kwargs.ray_init.num_gpus=1",
    ]


def cpu_environment() -> dict[str, str]:
    """This process's environment plus what a CPU run needs: the CPU support loaded in every Ray
    process, no hub, no wandb, Ray's log lines not folded together."""
    env = dict(os.environ)
    env.update(
        VERL_USE_EXTERNAL_MODULES="avspo_plugin.verl.cpu",
        VERL_PLATFORM="cpu",
        HF_HUB_OFFLINE="1",
        WANDB_MODE="disabled",
        TOKENIZERS_PARALLELISM="false",
        RAY_DEDUP_LOGS="0",
    )
    return env


def main_ppo_command(
    files: DemoFiles,
    out: Path,
    steps: int,
    loggers: Sequence[str] = ("console", "file"),
    use_v1: bool = True,
    save_freq: int = -1,
    resume: bool = False,
    extra_overrides: Sequence[str] = (),
) -> list[str]:
    """``python -m verl.trainer.main_ppo`` on the package's hydra config (verl's ppo_trainer with
    ``algorithm.adv_estimator: avspo`` and the ``algorithm.avspo`` block) with the CPU overrides;
    ``extra_overrides`` come last and win."""
    out = Path(out)
    overrides = cpu_overrides(files) + [
        f"trainer.total_training_steps={steps}",
        f"trainer.logger=[{','.join(loggers)}]",
        f"trainer.use_v1={str(use_v1).lower()}",
        "trainer.project_name=avspo_verl_demo",
        "trainer.experiment_name=cpu",
        f"trainer.default_local_dir={out / 'checkpoints'}",
        f"trainer.save_freq={save_freq}",
        f"trainer.resume_mode={'auto' if resume else 'disable'}",
    ]
    return [sys.executable, "-m", "verl.trainer.main_ppo", *PACKAGED_CONFIG, *overrides, *extra_overrides]


@dataclass
class TrainingRun:
    """What :func:`run_main_ppo` saw: exit code, wall time, peak memory, and when each step ended
    (``step_seconds[n]``, seconds since launch; ``step_seconds[0]``: when training started)."""

    returncode: int
    seconds: float
    log_file: Path
    metrics_file: Path
    step_seconds: dict[int, float]
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


def run_main_ppo(
    command: Sequence[str],
    out: Path,
    run_name: str = "train",
    echo: bool = True,
    timeout: Optional[float] = None,
    extra_env: Optional[dict[str, str]] = None,
) -> TrainingRun:
    """Run main_ppo as a subprocess; its output goes to ``out/<run_name>.log`` (lines prefixed with
    seconds since launch) and its file-backend metrics to ``out/<run_name>.metrics.jsonl``. With
    ``echo``, phases and finished steps are printed; ``extra_env`` overrides the CPU environment.
    The Ray cluster it starts is stopped whatever happens."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    log_file, metrics_file = out / f"{run_name}.log", out / f"{run_name}.metrics.jsonl"
    env = {**cpu_environment(), **(extra_env or {})}
    # verl's file backend truncates its file when it opens it: one file per run keeps a resumed
    # run from erasing the steps of the run it continues.
    env["VERL_FILE_LOGGER_PATH"] = str(metrics_file)
    env["TENSORBOARD_DIR"] = str(out / f"{run_name}.tensorboard")
    started = time.monotonic()
    step_seconds: dict[int, float] = {}
    phases = list(PHASES)
    with open(log_file, "w") as log:
        log.write("$ " + shlex.join(command) + "\n")
        log.flush()
        process = subprocess.Popen(
            list(command), cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        processes = _ProcessTree(process.pid)
        # A watchdog rather than a check between lines: a hung run prints nothing.
        watchdog = threading.Timer(timeout, process.terminate) if timeout is not None else None
        if watchdog is not None:
            watchdog.start()
        try:
            for raw in process.stdout:
                line = ANSI.sub("", raw)
                elapsed = time.monotonic() - started
                log.write(f"[{elapsed:7.1f}s] {line}")
                if phases and phases[0][0].search(line):
                    if phases[0][0] is PHASES[-1][0]:
                        step_seconds[0] = elapsed
                    if echo:
                        print(f"      {elapsed:6.1f} s  {phases[0][1]}", flush=True)
                    phases.pop(0)
                step = STEP_LINE.search(line)
                if step:
                    step_seconds[int(step.group(1))] = elapsed
                    if echo:
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
    return TrainingRun(
        process.returncode, time.monotonic() - started, log_file, metrics_file, step_seconds, processes.peak_memory
    )


class _ProcessTree:
    """The processes a run started: main_ppo and its descendants (Ray's cluster and workers).

    Samples their memory every ``interval`` seconds (proportional set size: pages shared between
    processes, such as torch's libraries in every Ray worker, are divided among them, so the sum
    is what the run takes from the machine) and remembers each process seen, so that
    :meth:`stop` can end exactly those still running, even ones orphaned by a crash, and no
    other Ray cluster on the machine.
    """

    def __init__(self, pid: int, interval: float = 1.0) -> None:
        import psutil

        self.root = psutil.Process(pid)
        self.interval, self.peak_memory = interval, 0
        self.seen: dict[int, Any] = {pid: self.root}
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _descendants(self) -> list[Any]:
        import psutil

        processes = []
        for process in list(self.seen.values()):
            try:
                processes.extend(process.children(recursive=True))
            except psutil.NoSuchProcess:
                pass
        for process in processes:
            self.seen.setdefault(process.pid, process)
        return [process for process in self.seen.values() if process.is_running()]

    def _sample(self) -> None:
        import psutil

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
        import psutil

        self._stopped.set()
        self._thread.join()
        alive = self._descendants()
        names = []
        for process in alive:
            try:
                names.append(f"{process.name()} ({process.pid})")
            except psutil.NoSuchProcess:
                pass
        for process in alive:
            try:
                process.terminate()
            except psutil.NoSuchProcess:
                pass
        _, still_alive = psutil.wait_procs(alive, timeout=grace)
        for process in still_alive:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(still_alive, timeout=grace)
        return names


def read_logged_steps(metrics_file: Path) -> list[dict[str, Any]]:
    """The records of verl's file backend: one ``{"step": int, "data": {metric: value}}`` per logged step."""
    with open(metrics_file) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def avspo_metrics_by_step(metrics_file: Path) -> dict[int, dict[str, float]]:
    """{step: {avspo metric: value}} from verl's file backend output."""
    steps: dict[int, dict[str, float]] = {}
    for record in read_logged_steps(metrics_file):
        avspo = {key: value for key, value in record["data"].items() if key.startswith("avspo/")}
        steps.setdefault(int(record["step"]), {}).update(avspo)
    return steps


# ----------------------------------------------------------------------------------------------
# The subcommand
# ----------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("avspo-verl-demo"), help="output folder (default ./avspo-verl-demo)")
    parser.add_argument("--steps", type=int, default=4, help="training steps, at least 1 (default 4)")
    parser.add_argument(
        "--logger",
        action="append",
        choices=LOGGERS,
        help="verl tracker backend; repeat for several (default: console and file; the file backend is always on)",
    )
    parser.add_argument(
        "--trainer",
        choices=("v1", "legacy"),
        default="v1",
        help="verl's default trainer (trainer.use_v1=true) or the legacy RayPPOTrainer (use_v1=false); default v1",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the model, tokenizer and task (default 0)")
    parser.add_argument("--timeout", type=float, default=1800, help="stop the run after this many seconds (default 1800)")
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="hydra overrides passed on to main_ppo after the demo's own, e.g. algorithm.avspo.strategy=opposite",
    )


def run(args: argparse.Namespace) -> int:
    if args.steps < 1:
        print("avspo verl-demo: --steps must be at least 1", file=sys.stderr)
        return 2
    out = args.out.resolve()
    loggers = list(dict.fromkeys((args.logger or ["console"]) + ["file"]))
    print(f"[1/3] Building a tiny Qwen2, a byte-level BPE tokenizer and the last-digit task in {out} ...", flush=True)
    started = time.monotonic()
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # one save of a 400 kB model needs no progress bar
    files = build_demo_files(out, seed=args.seed)
    print(f"      model and tokenizer: {files.model_dir}; data: {files.train_file.parent} "
          f"({time.monotonic() - started:.1f} s)", flush=True)
    command = main_ppo_command(
        files, out, args.steps, loggers=loggers, use_v1=args.trainer == "v1", extra_overrides=args.overrides
    )
    print(
        f"[2/3] Training {args.steps} steps with stock verl.trainer.main_ppo on CPU "
        f"(algorithm.adv_estimator=avspo, trainer {args.trainer}). Starting Ray and verl's workers takes "
        "one to two minutes on 2 cores; full log in train.log ...",
        flush=True,
    )
    result = run_main_ppo(command, out, run_name="train", timeout=args.timeout)
    if result.returncode != 0:
        print(f"main_ppo failed (exit code {result.returncode}) after {result.seconds:.0f} s; see {result.log_file}",
              file=sys.stderr)
        return 1
    print(f"[3/3] Done in {result.seconds:.0f} s (peak memory {result.peak_memory_bytes / 2**30:.1f} GiB). "
          f"avspo/* metrics as verl's tracker logged them ({result.metrics_file}):")
    metrics = avspo_metrics_by_step(result.metrics_file)
    if not any(metrics.values()):
        print("No avspo/* metric reached verl's tracker: run `avspo doctor` to see whether the plugin is loaded.",
              file=sys.stderr)
        return 1
    for step in sorted(metrics):
        values = ", ".join(f"{key[len('avspo/'):]}={value:.4g}" for key, value in sorted(metrics[step].items()))
        print(f"  step {step}: {values}")
    return 0
