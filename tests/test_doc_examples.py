"""Every ```python example of README.md and docs/using/trl.md runs as written, so a page that drifts from the code fails.

The examples name a hub model, a hub dataset and a step cap on lines of their own, ``MODEL = "..."``, ``DATASET =
"..."`` and ``MAX_STEPS = ...``. The tests run without hub access, so those assignments, and nothing else, are
replaced: ``MODEL`` and ``DATASET`` by what ``avspo trl-offline`` writes (a tiny random Qwen2 with a chat template,
chat-format problems with their answers), ``MAX_STEPS`` by 3. A script that reads its options from the command line
(``parse_args_into_dataclasses``) runs as the pages' offline lines run it: ``avspo trl-offline --out DIR``, then its
``python <script>.py ...`` line, as written.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest
import torch

from avspo_plugin.commands.main import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/using/trl.md")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
# The assignments a page's example may name hub data and its step cap with; the test replaces each.
STAND_INS = ("MODEL", "DATASET", "MAX_STEPS")
STEPS = 3


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


def with_stand_ins(code: str, values: dict[str, str]) -> str:
    """``code`` with each ``NAME = ...`` line of STAND_INS set to the local value; other code stays as written."""
    for name, value in values.items():
        code, count = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", code, flags=re.MULTILINE)
        assert count <= 1, f"{name} is assigned {count} times in the example"
    return code


def offline_lines(script: str) -> tuple[list[str], list[str]]:
    """The arguments of the pages' offline lines for ``script``: ``avspo trl-offline ...``, then ``python <script> ...``
    in the same block."""
    for page in PAGES:
        for _, _, language, code in blocks(page):
            words = [shlex.split(line, comments=True) for line in code.splitlines()] if language == "bash" else []
            offline = [line[1:] for line in words if line[:2] == ["avspo", "trl-offline"]]
            run = [line[2:] for line in words if line[:2] == ["python", script]]
            if offline and run:
                return offline[0], run[0]
    raise AssertionError(f"no page gives `avspo trl-offline` and `python {script} ...` lines for its example {script}")


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stand_ins")
    assert main(["trl-offline", "--out", str(folder)]) == 0
    return {"MODEL": str(folder / "model"), "DATASET": str(folder / "data"), "MAX_STEPS": STEPS}


@pytest.mark.parametrize("page, line, code", [(page, line, code) for page, line, _, code in PYTHON_EXAMPLES],
                         ids=[f"{page}:{line}" for page, line, _, _ in PYTHON_EXAMPLES])
def test_example_runs_as_written(page, line, code, stand_ins, tmp_path, monkeypatch):
    script = re.match(r"# (\S+\.py)\n", code)
    if "AVSPOGRPOTrainer(" in code and not script:
        names = [name for name in STAND_INS if not re.search(rf"^{name} = ", code, re.MULTILINE)]
        assert not names, f"{page}:{line}: the example names no {' and no '.join(names)} on a line of its own " \
                          "(`MODEL = \"...\"`), which this test replaces by a local stand-in"
    monkeypatch.chdir(tmp_path)  # where the example's output_dir, and the offline lines' folder, go
    argv = ["example"]
    if script:
        offline, arguments = offline_lines(script.group(1))
        assert main(offline) == 0
        argv = [script.group(1), *arguments]
    monkeypatch.setattr(sys, "argv", argv)
    trained = keep_trainers(monkeypatch)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model's matrices are too small to split
    try:
        source = code if script else with_stand_ins(code, stand_ins)
        exec(compile(source, f"{page}:{line}", "exec"), {"__name__": "__main__"})
    finally:
        torch.set_num_threads(threads)
    assert len(trained) == code.count("AVSPOGRPOTrainer(")
    for trainer in trained:
        assert trainer.state.global_step == STEPS
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
