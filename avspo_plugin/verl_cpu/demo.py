"""``avspo verl-demo``: AVSPO inside verl's own trainer (``python -m verl.trainer.main_ppo``), on CPU.

Builds in ``--out`` a byte-level BPE tokenizer, a randomly initialised tiny Qwen2 and a verifiable task (the last
digit of a sum of two numbers below 100: hard for a random model, so most groups collapse, the regime AVSPO is
for); then runs stock ``main_ppo`` with ``algorithm.adv_estimator=avspo`` on :mod:`avspo_plugin.verl_cpu` and prints
the ``avspo/*`` metrics verl's tracker logged at each step. It is also the reward module verl loads (``pkg://``).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from transformers.utils import logging as transformers_logging

from avspo_plugin.argument_types import positive_int
from avspo_plugin.names import METRIC_PREFIX
from avspo_plugin.verl_cpu.main_ppo import avspo_metrics_by_step, run_main_ppo

TASK_NAME = "avspo_last_digit"
REWARD_MODULE = "pkg://avspo_plugin.verl_cpu.demo"
REWARD_FUNCTION = "compute_score"
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# The prompt as the tokenizer's chat template renders it: the user's text, then "A:".
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['content'] }}\n{% endfor %}{% if add_generation_prompt %}A:{% endif %}"
)
MODEL_DIMENSIONS = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    max_position_embeddings=128,
)
PROMPT_LENGTH = 64
RESPONSE_LENGTH = 16
GROUP_SIZE = 4
PROMPTS_PER_STEP = 4
LOGGERS = ("console", "file", "tensorboard")
DEFAULT_OUT = Path(tempfile.gettempdir()) / "avspo-verl-demo"
PACKAGED_CONFIG = ("--config-path", "pkg://avspo_plugin.verl.config", "--config-name", "avspo_trainer")


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
    pairs = [(rng.randint(0, 99), rng.randint(0, 99)) for _ in range(count)]
    return [{"data_source": TASK_NAME, "prompt": [{"role": "user", "content": task_prompt(a, b)}],
             "ability": "arithmetic", "reward_model": {"style": "rule", "ground_truth": str((a + b) % 10)},
             "extra_info": {"split": split, "index": index, "a": a, "b": b}} for index, (a, b) in enumerate(pairs)]


@dataclass(frozen=True)
class DemoFiles:
    model_dir: Path
    train_file: Path
    test_file: Path


def build_demo_files(out: Path, train_prompts: int = 256, test_prompts: int = 16, seed: int = 0) -> DemoFiles:
    """A byte-level BPE of about 300 tokens trained on the task's own text, a randomly initialised Qwen2 and the
    train/test parquet files (verl's RL dataset format), under ``out`` (rebuilt each call; about a second)."""
    out = Path(out)
    files = DemoFiles(out / "model", out / "data" / "train.parquet", out / "data" / "test.parquet")
    files.model_dir.mkdir(parents=True, exist_ok=True)
    files.train_file.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    corpus = [task_prompt(rng.randint(0, 99), rng.randint(0, 99)) + "\nA:" for _ in range(2000)]
    corpus += [" ".join(str(rng.randint(0, 99)) for _ in range(8)) for _ in range(500)]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    backend.train_from_iterator(corpus, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                        unk_token=None, chat_template=CHAT_TEMPLATE)
    tokenizer.save_pretrained(files.model_dir)
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tokenizer), tie_word_embeddings=True, bos_token_id=eos,
                                         eos_token_id=eos, pad_token_id=pad, **MODEL_DIMENSIONS))
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad, bos_token_id=eos)
    model.save_pretrained(files.model_dir)
    rng = random.Random(seed)
    pd.DataFrame(task_rows(train_prompts, "train", rng)).to_parquet(files.train_file)
    pd.DataFrame(task_rows(test_prompts, "test", rng)).to_parquet(files.test_file)
    return files


def main_ppo_command(files: DemoFiles, out: Path, steps: int, loggers: Sequence[str] = ("console", "file"),
                     use_v1: bool = True, resume: bool = False, extra_overrides: Sequence[str] = ()) -> list[str]:
    """``python -m verl.trainer.main_ppo`` on the package's hydra config (verl's ppo_trainer with
    ``algorithm.adv_estimator: avspo`` and the ``algorithm.avspo`` block) with the CPU overrides (docs/using/verl-cpu.md
    says why each is there); ``extra_overrides`` come last and win."""
    mini = GROUP_SIZE * PROMPTS_PER_STEP
    overrides = [
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
        f"trainer.total_training_steps={steps}",
        f"trainer.logger=[{','.join(loggers)}]",
        f"trainer.use_v1={str(use_v1).lower()}",
        "trainer.project_name=avspo_verl_demo",
        "trainer.experiment_name=cpu",
        f"trainer.default_local_dir={Path(out) / 'checkpoints'}",
        "trainer.save_freq=-1",
        f"trainer.resume_mode={'auto' if resume else 'disable'}",
    ]
    return [sys.executable, "-m", "verl.trainer.main_ppo", *PACKAGED_CONFIG, *overrides, *extra_overrides]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"output folder (default {DEFAULT_OUT}, in the system's temporary folder, so that the demo "
                             "writes nothing into the folder it runs in; the first line printed names it)")
    parser.add_argument("--steps", type=positive_int, default=4, help="training steps, at least 1 (default 4)")
    parser.add_argument("--logger", action="append", choices=LOGGERS,
                        help="verl tracker backend; repeat for several (default: console and file; the file backend is "
                             "always on)")
    parser.add_argument("--trainer", choices=("v1", "legacy"), default="v1",
                        help="verl's default trainer (trainer.use_v1=true) or the legacy RayPPOTrainer (use_v1=false); "
                             "default v1")
    parser.add_argument("--seed", type=int, default=0, help="seed of the model, tokenizer and task (default 0)")
    parser.add_argument("--timeout", type=float, default=1800, help="stop the run after this many seconds (default 1800)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="hydra overrides passed on to main_ppo after the demo's own, e.g. "
                             "algorithm.avspo.strategy=opposite, or algorithm.adv_estimator=grpo "
                             "algorithm.avspo_monitor.enable=true (the ACR monitor beside grpo)")


def run(args: argparse.Namespace) -> int:
    out = args.out.resolve()
    loggers = list(dict.fromkeys((args.logger or ["console"]) + ["file"]))
    print(f"[1/3] Building a tiny Qwen2, a byte-level BPE tokenizer and the last-digit task in {out} ...", flush=True)
    started = time.monotonic()
    transformers_logging.disable_progress_bar()  # one save of a 400 kB model needs no progress bar
    files = build_demo_files(out, seed=args.seed)
    print(f"      model and tokenizer: {files.model_dir}; data: {files.train_file.parent} "
          f"({time.monotonic() - started:.1f} s)", flush=True)
    command = main_ppo_command(files, out, args.steps, loggers, args.trainer == "v1", extra_overrides=args.overrides)
    overridden = dict(item.lstrip("+").split("=", 1) for item in args.overrides if "=" in item)  # the last one wins
    estimator = overridden.get("algorithm.adv_estimator", "avspo")
    print(f"[2/3] Training {args.steps} steps with stock verl.trainer.main_ppo on CPU (algorithm.adv_estimator="
          f"{estimator}, trainer {args.trainer}). Starting Ray and verl's workers takes one to two minutes on 2 cores; "
          "full log in train.log ...", flush=True)
    result = run_main_ppo(command, out, run_name="train", timeout=args.timeout)
    if result.returncode != 0:
        print(f"main_ppo failed (exit code {result.returncode}) after {result.seconds:.0f} s; see {result.log_file}",
              file=sys.stderr)
        return 1
    print(f"[3/3] Done in {result.seconds:.0f} s (peak memory {result.peak_memory_bytes / 2**30:.1f} GiB). "
          f"avspo/* metrics as verl's tracker logged them ({result.metrics_file}):")
    metrics = avspo_metrics_by_step(result.metrics_file)
    if not any(metrics.values()):
        hint = ("add algorithm.avspo_monitor.enable=true to see collapse beside that estimator"
                if estimator != "avspo" and overridden.get("algorithm.avspo_monitor.enable") != "true"
                else "run `avspo doctor` to see whether the plugin is loaded")
        print(f"No avspo/* metric reached verl's tracker: {hint}.", file=sys.stderr)
        return 1
    for step in sorted(metrics):
        values = ", ".join(f"{key[len(METRIC_PREFIX):]}={value:.4g}" for key, value in sorted(metrics[step].items()))
        print(f"  step {step}: {values}")
    return 0
