"""Every ```python example of README.md and docs/using/trl.md runs as written, so a page that drifts from the code fails.

The examples name a hub model and a hub dataset on lines of their own, ``MODEL = "..."`` and ``DATASET = "..."``.
The tests run without hub access, so those two assignments, and nothing else, are replaced: ``MODEL`` by a tiny
random Qwen2 model and a character tokenizer with a chat template, saved to a folder; ``DATASET`` by a folder
holding one chat-format prompt with its solution (the columns of the hub dataset the examples name). One prompt
is one step of 8 generations, so an example trains TRL's default 3 epochs in 3 steps, on CPU. A script that reads
its options from the command line (``parse_args_into_dataclasses``) gets the arguments of the pages' own
``python <script>.py ...`` line.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/using/trl.md")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
# The two assignments a page's example may name hub data with; the test replaces each by a local stand-in.
STAND_INS = ("MODEL", "DATASET")


def blocks(page: str) -> list[tuple[str, int, str, str]]:
    """(page, first line, language, code) of each fenced block of a page."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return [(page, text[: match.start()].count("\n") + 2, match.group(1), match.group(2))
            for match in FENCE.finditer(text)]


PYTHON_EXAMPLES = [block for page in PAGES for block in blocks(page) if block[2] == "python"]


def test_the_pages_hold_the_examples_this_test_runs():
    """docs/using/trl.md's two TRL examples are found, so that the test below cannot pass by finding none."""
    found = [(page, code.count("AVSPOGRPOTrainer(")) for page, _, _, code in PYTHON_EXAMPLES]
    assert sum(count for page, count in found if page == "docs/using/trl.md") == 2, found


# Printable ASCII and a newline: every character of the chat template and of the stand-in prompt has a token.
VOCAB = ["<pad>", "<eos>", "\n", *map(chr, range(32, 127))]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def save_tiny_model(folder: Path) -> Path:
    """A random 2-layer Qwen2 and a one-token-per-character tokenizer with a chat template, as from_pretrained reads
    them (tests/trl/conftest.py builds the same kind in memory)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tokenizer = Tokenizer(models.WordLevel({token: i for i, token in enumerate(VOCAB)}, unk_token="<pad>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tokenizer.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    config = Qwen2Config(vocab_size=len(VOCAB), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512, pad_token_id=0,
                         bos_token_id=None, eos_token_id=1, tie_word_embeddings=True)
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(folder)
    return folder


def save_one_prompt_dataset(folder: Path) -> Path:
    """``load_dataset(folder, split="train")`` reads train.jsonl: a chat-format prompt and its solution."""
    folder.mkdir()
    row = {"prompt": [{"role": "user", "content": "What is 2 + 3? Put the answer in \\boxed{}."}], "solution": "5"}
    (folder / "train.jsonl").write_text(json.dumps(row) + "\n")
    return folder


def with_stand_ins(code: str, values: dict[str, str]) -> str:
    """``code`` with each ``NAME = ...`` line of STAND_INS set to the local value; other code stays as written."""
    for name, value in values.items():
        code, count = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", code, flags=re.MULTILINE)
        assert count <= 1, f"{name} is assigned {count} times in the example"
    return code


def command_line(script: str) -> list[str]:
    """The arguments of the pages' ``python <script> ...`` line, the one given for a machine without a GPU."""
    for page in PAGES:
        for _, _, language, code in blocks(page):
            for line in code.splitlines():
                if language == "bash" and line.split()[:2] == ["python", script]:
                    return shlex.split(line, comments=True)[2:]
    raise AssertionError(f"no page gives a `python {script} ...` line for its example {script}")


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stand_ins")
    return {"MODEL": str(save_tiny_model(folder / "model")), "DATASET": str(save_one_prompt_dataset(folder / "data"))}


@pytest.mark.parametrize("page, line, code", [(page, line, code) for page, line, _, code in PYTHON_EXAMPLES],
                         ids=[f"{page}:{line}" for page, line, _, _ in PYTHON_EXAMPLES])
def test_example_runs_as_written(page, line, code, stand_ins, tmp_path, monkeypatch):
    if "AVSPOGRPOTrainer(" in code:
        names = [name for name in STAND_INS if not re.search(rf"^{name} = ", code, re.MULTILINE)]
        assert not names, f"{page}:{line}: the example names no {' and no '.join(names)} on a line of its own " \
                          "(`MODEL = \"...\"`), which this test replaces by a local stand-in"
    script = re.match(r"# (\S+\.py)\n", code)
    argv = [script.group(1), *command_line(script.group(1))] if script else ["example"]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.chdir(tmp_path)  # where the example's output_dir goes
    trained = keep_trainers(monkeypatch)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model's matrices are too small to split
    try:
        exec(compile(with_stand_ins(code, stand_ins), f"{page}:{line}", "exec"), {"__name__": "__main__"})
    finally:
        torch.set_num_threads(threads)
    assert len(trained) == code.count("AVSPOGRPOTrainer(")
    for trainer in trained:
        assert trainer.state.global_step == 3  # one prompt of 8 generations a step, TRL's 3 epochs
        logged = [entry for entry in trainer.state.log_history if "avspo/acr" in entry]
        assert logged and all("rewards/accuracy_reward/mean" in entry for entry in logged), trainer.state.log_history


def keep_trainers(monkeypatch) -> list:
    """The AVSPOGRPOTrainers an example trains, kept as train() starts, for the test to read their logs."""
    from avspo_plugin.trl import AVSPOGRPOTrainer

    trained = []
    train = AVSPOGRPOTrainer.train

    def keeping(self, *args, **kwargs):
        trained.append(self)
        return train(self, *args, **kwargs)

    monkeypatch.setattr(AVSPOGRPOTrainer, "train", keeping)
    return trained
