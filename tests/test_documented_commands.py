"""Every command the docs name exists: ``avspo <subcommand>`` where README.md and docs/**/*.md give a command (a
command line of a code block, an inline code span that starts with it) and in the evidence's recorded commands
(docs/evidence/**/*.json); ``python -m <module>`` names a module of the checkout or of an installed package."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from avspo_plugin.commands.main import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RECORDS = sorted((ROOT / "docs" / "evidence").rglob("*.json"))
FENCE = re.compile(r"^```\w*\n(.*?)^```", re.DOTALL | re.MULTILINE)
INLINE = re.compile(r"`([^`\n]+)`")
# A command line of a code block: `avspo CMD`, after a prompt, variables or --debug.
COMMAND_LINE = re.compile(r"^\s*(?:\$\s+)?(?:\w+=\S*\s+)*avspo\s+(?:--debug\s+)?([a-z][\w-]*)")
# In recorded text, a command starts the text or follows a parenthesis or backquote: "... (avspo lab sweep)".
RECORDED_COMMAND = re.compile(r"(?:^|[(`])avspo\s+(?:--debug\s+)?([a-z][\w-]*)")
MODULE = re.compile(r"\bpython3?\s+-m\s+([A-Za-z_][\w.]*)")
# Hosts the test environment does not install (OpenRLHF needs CUDA: deepspeed, flash-attn, vLLM): their modules are
# checked on the released source by tests/openrlhf, not here.
NOT_INSTALLED_HOSTS = {"openrlhf"}


def page_commands(text: str) -> Iterator[tuple[str, str]]:
    """(what kind, text) of each place a page gives a command: command lines of code blocks, inline code."""
    for block in FENCE.findall(text):
        yield from (("line", line) for line in block.splitlines())
    prose = FENCE.sub("", text)
    yield from (("inline", span) for span in INLINE.findall(prose))


def record_strings(node) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from record_strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from record_strings(value)


def named_commands(path: Path) -> Iterator[tuple[str, str]]:
    """(subcommand or module, where) of every ``avspo CMD`` and ``python -m MODULE`` the file names."""
    if path.suffix == ".json":
        for text in record_strings(json.loads(path.read_text(encoding="utf-8"))):
            yield from ((f"avspo {name}", text[:80]) for name in RECORDED_COMMAND.findall(text))
            yield from ((f"python -m {name}", text[:80]) for name in MODULE.findall(text))
        return
    for kind, text in page_commands(path.read_text(encoding="utf-8")):
        command = COMMAND_LINE.match(text) if kind == "line" else re.match(r"avspo\s+(?:--debug\s+)?([a-z][\w-]*)", text)
        if command:
            yield f"avspo {command.group(1)}", text[:80]
        yield from ((f"python -m {name}", text[:80]) for name in MODULE.findall(text))


def module_exists(name: str) -> bool:
    """Whether ``python -m name`` finds a module, from the checkout's root, without importing it."""
    top, *rest = name.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None:
        return False
    folders = [Path(folder) for folder in spec.submodule_search_locations or []]
    for part in rest:
        found = [folder / part for folder in folders if (folder / part).is_dir()]
        if not found:
            return any((folder / f"{part}.py").is_file() for folder in folders) and part == rest[-1]
        folders = found
    return True


def exists(command: str) -> bool:
    kind, name = command.rsplit(" ", 1)
    if kind == "avspo":
        return name in SUBCOMMANDS
    return name.split(".")[0] in NOT_INSTALLED_HOSTS or module_exists(name)


@pytest.mark.parametrize("path", PAGES + RECORDS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_command_a_page_or_record_names_exists(path):
    missing = sorted({(command, where) for command, where in named_commands(path) if not exists(command)})
    assert not missing, f"{path.relative_to(ROOT)} names commands that do not exist: {missing}"


def test_the_check_finds_what_it_looks_for(tmp_path):
    """Commands in each place the test reads are found, prose is not, and one that does not exist fails."""
    page = tmp_path / "page.md"
    page.write_text("```bash\n$ avspo doctor --host trl\npython -m lab sweep\n[ok] avspo registered\n```\n"
                    "Run `avspo lab sweep`, or `avspo/acr`; avspo brings ACR.\n")
    record = tmp_path / "record.json"
    record.write_text(json.dumps({"measured_on": "the avspo CPU lab (avspo math-eval)", "runs": [{"command": "avspo x"}]}))
    assert {command for command, _ in named_commands(page)} == {"avspo doctor", "python -m lab", "avspo lab"}
    assert {command for command, _ in named_commands(record)} == {"avspo math-eval", "avspo x"}
    assert exists("avspo doctor") and exists("avspo advantages") and not exists("avspo lab")
    assert exists("python -m lab") and exists("python -m recipes.math_data.prepare") and exists("python -m verl.model_merger")
    assert not exists("python -m recipes.math_data.nothing") and not exists("python -m avspo_plugin.lab")


def test_the_pages_list_of_subcommands_is_the_console_scripts():
    """Where a page lists every subcommand by name (bad input, analyze.md), the list is the console script's."""
    lists = [re.search(r"\*\*Every subcommand\*\* \(([^)]*)\)", path.read_text(encoding="utf-8")) for path in PAGES]
    (listed,) = [match.group(1) for match in lists if match]
    assert set(re.findall(r"`([\w-]+)`", listed)) == set(SUBCOMMANDS)
