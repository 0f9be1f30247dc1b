"""The lab's policy: a tiny Hugging Face Qwen2ForCausalLM, its sampler, and its per-token log-probabilities.

Prompts are left-padded and responses right-padded, as in verl's batches: the
response of row i is response_ids[i], with response_mask[i] = 1 on its tokens up to
and including the end token. Log-probabilities and entropies are those of the
temperature-scaled distribution, as verl's actor computes them with the rollout
temperature, through verl's own helpers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM
from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits

from .settings import PolicyShape
from .task import VOCAB, Problems, rewards


def build_policy(shape: PolicyShape, seed: int) -> Qwen2ForCausalLM:
    """A randomly initialised Qwen2 over the lab vocabulary; the same weights for the same seed."""
    config = Qwen2Config(
        vocab_size=len(VOCAB),
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=shape.max_positions,
        tie_word_embeddings=True,
        pad_token_id=VOCAB.pad_id,
        bos_token_id=VOCAB.bos_id,
        eos_token_id=VOCAB.eos_id,
        attn_implementation="sdpa",
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return Qwen2ForCausalLM(config)


@dataclass
class Rollout:
    """A batch of prompts and sampled responses (N rows).

    prompt_ids, prompt_mask: (N, Lp), left-padded; response_ids, response_mask: (N, Lr), right-padded.
    """

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    response_ids: torch.Tensor
    response_mask: torch.Tensor

    def take(self, rows: torch.Tensor) -> Rollout:
        return Rollout(self.prompt_ids[rows], self.prompt_mask[rows], self.response_ids[rows], self.response_mask[rows])

    @staticmethod
    def concat(parts: list[Rollout]) -> Rollout:
        """Rows of several rollouts, re-padded to common prompt and response lengths."""
        lp = max(p.prompt_ids.shape[1] for p in parts)
        lr = max(p.response_ids.shape[1] for p in parts)

        def pad(t: torch.Tensor, width: int, left: bool, value: int) -> torch.Tensor:
            extra = torch.full((t.shape[0], width - t.shape[1]), value, dtype=t.dtype)
            return torch.cat([extra, t] if left else [t, extra], dim=1)

        return Rollout(
            torch.cat([pad(p.prompt_ids, lp, True, VOCAB.pad_id) for p in parts]),
            torch.cat([pad(p.prompt_mask, lp, True, 0) for p in parts]),
            torch.cat([pad(p.response_ids, lr, False, VOCAB.pad_id) for p in parts]),
            torch.cat([pad(p.response_mask, lr, False, 0) for p in parts]),
        )


def left_pad(prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists -> (ids (N, Lp), mask (N, Lp)), padded on the left."""
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[VOCAB.pad_id] * (width - len(p)) + p for p in prompts], dtype=torch.long)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], dtype=torch.long)
    return ids, mask


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that start at 0 on each row's first real token (left padding gets 0)."""
    return (mask.cumsum(dim=-1) - 1).clamp(min=0)


@torch.no_grad()
def generate(
    model: Qwen2ForCausalLM,
    prompts: list[list[int]],
    max_new_tokens: int,
    temperature: float,
    generator: torch.Generator | None,
) -> Rollout:
    """Sample one response per prompt (temperature 0: greedy), with a key/value cache.

    Each row stops at its end token; a row that reaches max_new_tokens without one is kept
    as it is (the verifier fails it).
    """
    model.eval()
    prompt_ids, prompt_mask = left_pad(prompts)
    rows = prompt_ids.shape[0]
    attention = prompt_mask
    out = model(input_ids=prompt_ids, attention_mask=attention, position_ids=positions(attention), use_cache=True)
    cache, logits = out.past_key_values, out.logits[:, -1]
    next_position = attention.sum(dim=-1, keepdim=True)
    tokens, alive = [], torch.ones(rows, dtype=torch.bool)
    for _ in range(max_new_tokens):
        if temperature > 0:
            probs = torch.softmax(logits.float() / temperature, dim=-1)
            token = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        else:
            token = logits.argmax(dim=-1)
        token = torch.where(alive, token, torch.full_like(token, VOCAB.pad_id))
        tokens.append(torch.stack([token, alive.long()], dim=1))
        alive = alive & (token != VOCAB.eos_id)
        if not bool(alive.any()):
            break
        attention = torch.cat([attention, torch.ones(rows, 1, dtype=attention.dtype)], dim=1)
        out = model(
            input_ids=token.unsqueeze(1),
            attention_mask=attention,
            position_ids=next_position,
            past_key_values=cache,
            use_cache=True,
        )
        cache, logits, next_position = out.past_key_values, out.logits[:, -1], next_position + 1
    stacked = torch.stack(tokens, dim=2)  # (N, 2, Lr): token ids and their mask
    return Rollout(prompt_ids, prompt_mask, stacked[:, 0], stacked[:, 1])


def response_log_probs(
    model: Qwen2ForCausalLM, rollout: Rollout, temperature: float, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log pi(y_t | x, y_<t) of the responses under logits / temperature, (N, Lr); entropy likewise."""
    ids = torch.cat([rollout.prompt_ids, rollout.response_ids], dim=1)
    mask = torch.cat([rollout.prompt_mask, rollout.response_mask], dim=1)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask), use_cache=False).logits
    start = rollout.prompt_ids.shape[1] - 1
    logits = logits[:, start : start + rollout.response_ids.shape[1]].float() / max(temperature, 1e-6)
    log_probs = logprobs_from_logits(logits, rollout.response_ids)
    entropy = entropy_from_logits(logits) if with_entropy else None
    return log_probs, entropy


def supervised_batch(problems: Problems, answers: list[str] | None = None) -> Rollout:
    """Prompts with their responses (answer + end token) for the warm-up: the given answers, else the correct ones."""
    prompt_ids, prompt_mask = left_pad(problems.prompts())
    answers = [[*VOCAB.encode(a), VOCAB.eos_id] for a in (problems.answers() if answers is None else answers)]
    width = max(len(a) for a in answers)
    response_ids = torch.tensor([a + [VOCAB.pad_id] * (width - len(a)) for a in answers], dtype=torch.long)
    response_mask = torch.tensor([[1] * len(a) + [0] * (width - len(a)) for a in answers], dtype=torch.long)
    return Rollout(prompt_ids, prompt_mask, response_ids, response_mask)


@torch.no_grad()
def greedy_accuracy(model: Qwen2ForCausalLM, problems: Problems, max_new_tokens: int) -> np.ndarray:
    """1/0 per problem: greedy decoding solves it.  (N,) float64."""
    rollout = generate(model, problems.prompts(), max_new_tokens, temperature=0.0, generator=None)
    return rewards(rollout.response_ids, problems.answers()).numpy().astype(np.float64)
