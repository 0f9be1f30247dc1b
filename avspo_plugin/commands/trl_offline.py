"""``avspo trl-offline --out DIR``: a tiny model and dataset on disk, to run docs/using/trl.md's examples without the hub.

DIR/model: a random 2-layer Qwen2, one token per printable ASCII character, with a chat template; DIR/data/train.jsonl:
addition problems in the hub dataset's columns (``prompt`` chat messages, ``solution`` for TRL's ``accuracy_reward``).
A run on them shows that the pipeline runs, never what AVSPO does to learning.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

# Printable ASCII and a newline: every character of the chat template and of the prompts has a token.
VOCAB = ["<pad>", "<eos>", "\n", *map(chr, range(32, 127))]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)
PROBLEMS = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True,
                        help="folder to write model/ and data/ into (created; files already there are replaced)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the model's random weights (default 0)")


def save_tiny_model(folder: Path, seed: int = 0) -> Path:
    """The random Qwen2 and its character tokenizer with a chat template, as ``from_pretrained`` reads them."""
    tokenizer = Tokenizer(models.WordLevel({token: i for i, token in enumerate(VOCAB)}, unk_token="<pad>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tokenizer.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    config = Qwen2Config(vocab_size=len(VOCAB), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512, pad_token_id=0,
                         bos_token_id=None, eos_token_id=1, tie_word_embeddings=True)
    torch.manual_seed(seed)
    Qwen2ForCausalLM(config).save_pretrained(folder)
    return folder


def save_problems(folder: Path) -> Path:
    """``load_dataset(folder, split="train")`` reads train.jsonl: chat-format addition problems and their answers."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"prompt": [{"role": "user", "content": f"What is {a} + {a + 3}? Put the answer in \\boxed{{}}."}],
             "solution": str(2 * a + 3)} for a in range(2, 2 + PROBLEMS)]
    (folder / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return folder


def run(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.out.is_dir():
        raise NotADirectoryError(f"--out {args.out} exists and is not a folder")
    model, data = save_tiny_model(args.out / "model", args.seed), save_problems(args.out / "data")
    print(f"wrote {model} (a random 2-layer Qwen2, one token per character, a chat template) and {data / 'train.jsonl'} "
          f"({PROBLEMS} chat-format addition problems with their answers)")
    print(f"the TRL example on them (docs/using/trl.md): --model {model} --dataset {data}")
    return 0
