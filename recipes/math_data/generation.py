"""Sampling from a model with vLLM (GPU), for the Level3-500 selection and for evaluation.

vLLM is imported only here, inside :func:`generate_chat`, so everything else in the pipeline runs
without it. The prompt is the model's own chat template applied to the rows' messages, as verl's
rollout does in training, so selection and evaluation see the prompts training sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Sampling:
    n: int
    temperature: float
    max_tokens: int
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"samples per prompt n={self.n} must be >= 1")
        if self.temperature < 0:
            raise ValueError(f"temperature={self.temperature} must be >= 0")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens={self.max_tokens} must be >= 1")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p={self.top_p} must be in (0, 1]")


@dataclass(frozen=True)
class Engine:
    """Where and how vLLM runs the model."""

    model: str
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    dtype: str = "bfloat16"


def generate_chat(engine: Engine, conversations: Sequence[Sequence[dict]], sampling: Sampling) -> list[list[str]]:
    """``sampling.n`` completions for every conversation, in input order."""
    try:
        from vllm import LLM, SamplingParams
    except ImportError as err:
        # A missing package: the CLI shows this as one error line, not as a bug.
        raise ModuleNotFoundError(
            "generation needs vLLM on a GPU machine (installed as verl documents it, beside its CUDA torch); scoring "
            "precomputed generations does not (evaluate --generations FILE; prepare level3-500 --pass-rates FILE)",
            name="vllm",
        ) from err

    llm = LLM(
        model=engine.model,
        tensor_parallel_size=engine.tensor_parallel_size,
        gpu_memory_utilization=engine.gpu_memory_utilization,
        max_model_len=engine.max_model_len,
        dtype=engine.dtype,
        seed=sampling.seed,
    )
    tokenizer = llm.get_tokenizer()
    prompts = [
        tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        for messages in conversations
    ]
    params = SamplingParams(
        n=sampling.n,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        max_tokens=sampling.max_tokens,
        seed=sampling.seed,
    )
    outputs = llm.generate(prompts, params)
    return [[completion.text for completion in output.outputs] for output in outputs]
