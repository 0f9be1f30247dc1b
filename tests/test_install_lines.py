"""Every install line of the docs and recipes is pinned: torch at constraints.txt's version, everything else under
``-c constraints.txt`` (what the test suite ran against), or a GPU stack's line as its constraints file gives it
(constraints-vllm.txt, constraints-sglang.txt: verl's own pins for its rollout engine, torch with them); a page that
installs under constraints.txt names the torch line first. A page or recipe that installs unpinned fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from renderer.gpu_constraints import INSTALL_PREFIX, STACKS

ROOT = Path(__file__).resolve().parents[1]
PIP_INSTALL = re.compile(r"\bpip install(?=\s)([^`\n]*)")
CONSTRAINED = "-c constraints.txt"
# What follows `pip install` on each GPU stack's line, as its constraints file gives it (and install_lines reads it).
GPU_LINES = {stack.install_line.removeprefix("pip install ").strip("'\"") for stack in STACKS}


def pages() -> list[Path]:
    """README.md, every page under docs/, every file of recipes/."""
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found += sorted(path for path in (ROOT / "recipes").rglob("*") if path.is_file() and path.suffix in (".sh", ".py",
                                                                                                          ".yaml", ".md"))
    return found


def torch_pin() -> str:
    (line,) = [line for line in (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("torch==")]
    return line


def install_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, what follows `pip install`, up to a comment) of every install in the file."""
    lines = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for match in PIP_INSTALL.finditer(line):
            arguments = re.split(r"\s#|, |; ", match.group(1))[0]  # up to a comment or the end of a clause of prose
            lines.append((number, arguments.strip().strip("'\"")))
    return lines


def unpinned(arguments: str, torch: str) -> bool:
    """An install that is neither the pinned torch, nor under the constraints file, nor a GPU stack's line."""
    return not (arguments == torch or CONSTRAINED in arguments or arguments in GPU_LINES)


def test_the_rule_tells_pinned_from_unpinned():
    torch = torch_pin()
    assert torch == "torch==2.13.0"
    for line in ("torch", "torch==2.12.0", '".[verl]"', "vllm", '"openrlhf[vllm]==0.11.2"', "avspo-plugin[verl]"):
        assert unpinned(line, torch), line
    for line in (torch, '-c constraints.txt ".[verl]"', "-c constraints.txt vllm", *GPU_LINES):
        assert not unpinned(line, torch), line
    # A GPU line counts as written, whole: another package or extra beside it is not the stack that was checked.
    assert unpinned('-c constraints-vllm.txt ".[verl,math]" "verl[vllm]" vllm', torch)
    assert [arguments for _, arguments in install_lines(ROOT / "README.md")[:2]] == [torch, '-c constraints.txt ".[verl]']


@pytest.mark.parametrize("path", pages(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_install_line_is_pinned_and_torch_comes_first(path):
    torch = torch_pin()
    lines = install_lines(path)
    bad = [(number, arguments) for number, arguments in lines if unpinned(arguments, torch)]
    assert not bad, f"{path.relative_to(ROOT)}: unpinned installs (use `pip install {torch}` first, then " \
                    f"`pip install {CONSTRAINED} ...`): {bad}"
    constrained = [number for number, arguments in lines if CONSTRAINED in arguments]
    torch_lines = [number for number, arguments in lines if arguments == torch]
    if constrained:
        assert torch_lines and torch_lines[0] < constrained[0], \
            f"{path.relative_to(ROOT)}: `pip install {torch}` must come before line {constrained[0]}"


def test_each_gpu_constraints_file_gives_the_line_the_docs_print():
    """README and docs/using/recipes.md print each stack's line as its file does (the file's `# install:` line)."""
    pages = {path: (ROOT / path).read_text(encoding="utf-8") for path in ("README.md", "docs/using/recipes.md")}
    for stack in STACKS:
        assert f"{INSTALL_PREFIX}{stack.install_line}\n" in stack.path.read_text(encoding="utf-8")
        for path, text in pages.items():
            assert stack.install_line in text, f"{path} lacks the {stack.extra} stack's line: {stack.install_line}"
