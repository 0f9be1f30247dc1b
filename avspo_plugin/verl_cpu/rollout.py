"""Rollout ``hf``: token-in/token-out generation with transformers' ``generate``, for CPU runs.

verl 0.9.1's server rollouts (vllm, sglang, trtllm) need a GPU; this has their three-part shape: a named Ray actor
holding an HF copy of the policy (:class:`HFGenerateServer`, called by verl's agent loop), the ``RolloutReplica``
that launches it (:class:`HFReplica`), and the ``BaseRollout`` of each hybrid actor worker that pushes the trained
weights and their step to it (:class:`HFServerAdapter`).

Each request's seed derives from the rollout seed, the weights' step, the prompt and how many identical requests
this step has seen, so a run resumed from a checkpoint draws the samples of the uninterrupted run.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections import Counter
from typing import Any

import ray
import torch
from torch.distributed.tensor import DTensor
from transformers import AutoModelForCausalLM
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.config import HFModelConfig
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

ROLLOUT_NAME = "hf"
# What verl's agent loops put in sampling_params (vLLM's names); anything else is refused.
SAMPLING_KEYS = frozenset(
    {"temperature", "top_p", "top_k", "repetition_penalty", "logprobs", "max_tokens", "max_new_tokens",
     "ignore_eos", "stop_token_ids"}
)  # fmt: skip


def server_actor_name(replica_rank: int) -> str:
    return f"{ROLLOUT_NAME}_server_{replica_rank}"


async def _nothing_to_do(self, *args: Any, **kwargs: Any) -> None:
    """The model stays in host memory and every request completes before the next starts: nothing to free,
    abort, resume or profile."""


class HFGenerateServer:
    """One replica's generation server (a Ray actor): an HF model, weights pushed by the trainer."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int) -> None:
        self.config = omega_conf_to_dataclass(config)
        self.model_config: HFModelConfig = omega_conf_to_dataclass(model_config, dataclass_type=HFModelConfig)
        self.replica_rank = replica_rank
        self.model = AutoModelForCausalLM.from_pretrained(
            self.model_config.local_path, config=self.model_config.hf_config, dtype=torch.float32
        ).eval()
        tokenizer = self.model_config.tokenizer
        eos = getattr(self.model_config.generation_config, "eos_token_id", None)
        eos = tokenizer.eos_token_id if eos is None else eos
        self.eos_token_ids = [int(token) for token in (eos if isinstance(eos, list) else [eos])]
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.max_model_len = self.config.max_model_len or self.config.prompt_length + self.config.response_length
        self.global_steps: int | None = None
        self._requests_this_step: Counter = Counter()
        # One generate at a time: requests arrive concurrently, the model is not reentrant.
        self._lock = asyncio.Lock()

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       image_data: list[Any] | None = None, video_data: list[Any] | None = None,
                       audio_data: list[Any] | None = None, mm_processor_kwargs: dict[str, Any] | None = None,
                       priority: int = 0) -> TokenOutput:
        """Token ids in, token ids and log-probs out, as verl's agent loop asks a vLLM server (one request at a
        time, so ``priority`` changes nothing)."""
        if image_data is not None or video_data is not None or audio_data is not None or mm_processor_kwargs:
            raise ValueError(f"rollout '{ROLLOUT_NAME}' generates text only; request {request_id} carries media")
        unknown = set(sampling_params) - SAMPLING_KEYS
        if unknown:
            raise ValueError(f"rollout '{ROLLOUT_NAME}': request {request_id} has sampling params it does not "
                             f"implement: {sorted(unknown)} (it takes {sorted(SAMPLING_KEYS)})")
        prompt_ids = [int(token) for token in prompt_ids]
        room = self.max_model_len - len(prompt_ids)
        if room < 1:
            raise ValueError(f"request {request_id}: prompt of {len(prompt_ids)} tokens leaves no room in "
                             f"max_model_len {self.max_model_len}")
        params = dict(sampling_params)
        max_tokens = params.pop("max_tokens", params.pop("max_new_tokens", self.config.response_length))
        max_tokens = max(1, min(int(max_tokens), room))
        async with self._lock:
            seed = self._request_seed(prompt_ids)
            return await asyncio.to_thread(self._generate, prompt_ids, params, max_tokens, seed)

    def _request_seed(self, prompt_ids: list[int]) -> int:
        key = tuple(prompt_ids)
        occurrence = self._requests_this_step[key]
        self._requests_this_step[key] += 1
        text = f"{self.config.seed}:{self.global_steps}:{occurrence}:{','.join(map(str, prompt_ids))}"
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")

    @torch.no_grad()
    def _generate(self, prompt_ids: list[int], params: dict[str, Any], max_tokens: int, seed: int) -> TokenOutput:
        temperature = float(params.get("temperature", 1.0))
        do_sample = temperature > 0
        # A repetition penalty of 1.0 is generate's "none".
        generate_kwargs = {"do_sample": do_sample, "repetition_penalty": float(params.get("repetition_penalty", 1.0))}
        if do_sample:
            top_k = max(int(params.get("top_k", -1)), 0)
            generate_kwargs.update(temperature=temperature, top_p=float(params.get("top_p", 1.0)), top_k=top_k)
        stop_ids = None if params.get("ignore_eos") else [*self.eos_token_ids, *(params.get("stop_token_ids") or ())]
        torch.manual_seed(seed)
        input_ids = torch.tensor([prompt_ids], dtype=torch.long)
        output = self.model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                     max_new_tokens=max_tokens, eos_token_id=stop_ids, pad_token_id=self.pad_token_id,
                                     output_logits=True, return_dict_in_generate=True, **generate_kwargs)
        token_ids = output.sequences[0, len(prompt_ids) :].tolist()  # one sequence: no padding after eos
        log_probs = None
        if params.get("logprobs"):
            # The log-probability the trainer recomputes: logits scaled by the temperature.
            logits = torch.stack(output.logits, dim=1)[0, : len(token_ids)].float()
            scale = temperature if do_sample else 1.0
            token_log_probs = torch.log_softmax(logits / scale, dim=-1)
            log_probs = token_log_probs.gather(-1, torch.tensor(token_ids).unsqueeze(-1)).squeeze(-1).tolist()
        return TokenOutput(token_ids=token_ids, log_probs=log_probs, stop_reason="completed",
                           extra_fields={"global_steps": self.global_steps})

    def update_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        missing, unexpected = self.model.load_state_dict(state_dict, strict=False)
        # Tied output embeddings are absent from the trainer's state dict; anything else is an error.
        tied = getattr(self.model.config, "tie_word_embeddings", False)
        missing = [name for name in missing if not (tied and name == "lm_head.weight")]
        if missing or unexpected:
            raise ValueError(f"weights pushed to rollout '{ROLLOUT_NAME}' do not fit the model: "
                             f"missing {missing}, unexpected {unexpected}")

    def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps
        self._requests_this_step.clear()

    wake_up = sleep = clear_kv_cache = release_kv_cache = resume_kv_cache = _nothing_to_do
    abort_all_requests = resume_generation = start_profile = stop_profile = _nothing_to_do


class HFReplica(RolloutReplica):
    """Launches one :class:`HFGenerateServer` per replica, on the node of the replica's workers."""

    async def launch_servers(self) -> None:
        if self.world_size != 1:
            raise ValueError(
                f"rollout '{ROLLOUT_NAME}' runs one process per replica: set "
                "actor_rollout_ref.rollout.tensor_model_parallel_size=1 (and data/pipeline parallel size 1); "
                f"got a replica world size of {self.world_size}"
            )
        node_id = await self.workers[0].__ray_call__.remote(lambda worker: ray.get_runtime_context().get_node_id())
        on_node = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        options = {"num_cpus": 1, "max_concurrency": self.max_concurrency, "scheduling_strategy": on_node}
        server = ray.remote(HFGenerateServer).options(name=server_actor_name(self.replica_rank), **options).remote(
            config=self.config, model_config=self.model_config, replica_rank=self.replica_rank
        )
        self.servers = [server]
        self._server_handle = server
        # No HTTP endpoint: the address only names the server for verl's load balancer.
        self._server_address = f"{ROLLOUT_NAME}://{server_actor_name(self.replica_rank)}"


class HFServerAdapter(BaseRollout):
    """The rollout side of a hybrid actor worker: pushes the trained weights to its replica's server."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1) -> None:
        super().__init__(config, model_config, device_mesh)
        self.replica_rank = int(os.environ["RANK"]) if replica_rank == -1 else replica_rank
        self._server: ray.actor.ActorHandle | None = None

    @property
    def server(self) -> ray.actor.ActorHandle:
        # Looked up on first use: the server starts after the hybrid workers.
        if self._server is None:
            self._server = ray.get_actor(server_actor_name(self.replica_rank))
        return self._server

    resume = release = _nothing_to_do

    async def update_weights(
        self, weights: Any, global_steps: int | None = None, wire_format: str = "named_tensors", **kwargs: Any
    ) -> None:
        if wire_format != "named_tensors":
            raise ValueError(f"rollout '{ROLLOUT_NAME}' takes wire_format='named_tensors', got {wire_format!r}")
        if kwargs.get("peft_config") is not None:
            raise ValueError(f"rollout '{ROLLOUT_NAME}' takes full weights; LoRA adapters need lora.merge=True")
        # Every rank must walk the generator: gathering a DTensor is a collective.
        state_dict = {}
        for name, tensor in weights:
            if isinstance(tensor, DTensor):
                tensor = tensor.full_tensor()
            state_dict[name] = tensor.detach().to("cpu", torch.float32)
        await self.server.update_weights.remote(state_dict)
        if global_steps is not None:
            await self.server.set_global_steps.remote(global_steps)
