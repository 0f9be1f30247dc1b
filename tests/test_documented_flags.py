"""Every command-line flag the docs spell is an option of that command's parser.

A flag is "spelled" in ``avspo <command> [ACTION] ... --flag`` or ``python -m <program> [ACTION] ... --flag`` (the
checkout's programs: the lab, the recipes' data preparation) inside a code block or inline code of README.md or
docs/**/*.md; it must be an option of the parser that reads it: ``avspo`` itself before the command, the command's
after it, and for ``python -m lab`` the action's (study, tune, sweep, ...) after the action's name. The parsers are
built in this process as the programs build them (no subprocess).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from avspo_plugin.commands.main import SUBCOMMANDS, build_parser, command_parser
from lab import command as lab_command
from recipes.math_data import evaluate, prepare

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

FENCED_BLOCK = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
INLINE_CODE = re.compile(r"`([^`\n]+)`")
# An option as the docs spell it, with what may hug it in prose or usage lines: [--flag], --flag=VALUE, --flag,
OPTION = re.compile(r"^[\[(]*(--?[A-Za-z][\w-]*)")
# The checkout's programs run as `python -m MODULE`, by the name the scan gives them (as a command of their own).
MODULE_PROGRAMS = {"lab": lab_command, "recipes.math_data.prepare": prepare, "recipes.math_data.evaluate": evaluate}
# Where one shell command ends and the next begins.
COMMAND_ENDS = {"|", "||", "&&", ";", "&"}


def command_texts(markdown: str) -> Iterator[str]:
    """The code of a markdown text, one shell line at a time: the lines of its fenced blocks (continuations joined,
    comments dropped) and its inline code spans."""
    for block in FENCED_BLOCK.findall(markdown):
        for line in block.replace("\\\n", " ").splitlines():
            yield line.split(" #")[0]
    prose = FENCED_BLOCK.sub("", markdown)
    yield from INLINE_CODE.findall(prose)


def spelled_flags(code: str) -> Iterator[tuple[str, str | None, str]]:
    """(command, action or None, flag) for each flag of each ``avspo <command>`` and ``python -m <program>`` (command:
    the program's MODULE_PROGRAMS name) in a line of code.

    ``avspo --debug <command>``'s --debug is ``avspo``'s own (command ""). Text that is not a command of ``avspo``
    (a placeholder such as ``avspo <command>``) is passed over.
    """
    tokens = code.split()
    for start, token in enumerate(tokens):
        program = tokens[start + 2].strip("`") if token.startswith("python") and tokens[start + 1:start + 2] == ["-m"] \
            and start + 2 < len(tokens) else None
        if program in MODULE_PROGRAMS:
            yield from program_flags(program, tokens[start + 3:])
            continue
        if token != "avspo" and not token.endswith("/avspo"):
            continue
        if start and tokens[start - 1].startswith("-"):  # a value: `--algo.advantage.estimator avspo`
            continue
        command, action = None, None
        for word in tokens[start + 1:]:
            word = word.strip("`")
            if word in COMMAND_ENDS or word.endswith((";", ":", ",")):  # a shell command's end, or prose
                break
            option = OPTION.match(word)
            if option:
                yield (command or "", action, option.group(1))
            elif command is None:
                if word not in SUBCOMMANDS:
                    break
                command = word
            elif action is None and word in actions(command):
                action = word


def program_flags(program: str, words: list[str]) -> Iterator[tuple[str, str | None, str]]:
    """(program, action or None, flag) for each flag of ``python -m <program> WORDS``."""
    action = None
    for word in words:
        word = word.strip("`")
        if word in COMMAND_ENDS or word.endswith((";", ":", ",")):
            break
        option = OPTION.match(word)
        if option:
            yield (program, action, option.group(1))
        elif action is None and word in actions(program):
            action = word


def subparser_choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(
        (action.choices for action in parser._actions if isinstance(action, argparse._SubParsersAction)), {}
    )


@cache
def parser_of(command: str) -> argparse.ArgumentParser:
    """``avspo`` itself for "", a checkout's program's own parser (MODULE_PROGRAMS), else the command's parser with its
    arguments, as ``avspo <command>`` builds it."""
    if command in MODULE_PROGRAMS:
        return command_parser(f"python -m {command}", MODULE_PROGRAMS[command])
    parser, missing = build_parser([command] if command else [])
    assert missing is None, missing
    return subparser_choices(parser)[command] if command else parser


def actions(command: str) -> dict[str, argparse.ArgumentParser]:
    return subparser_choices(parser_of(command))


def passes_its_arguments_on(parser: argparse.ArgumentParser) -> bool:
    """Whether the parser hands every argument to another program (``avspo openrlhf``: train_ppo_ray's)."""
    return any(action.nargs == argparse.REMAINDER and not action.option_strings for action in parser._actions)


def unknown_flags(markdown: str) -> list[str]:
    """Each spelled flag its parser does not have, as ``avspo <command> [action] --flag``."""
    unknown = []
    for code in command_texts(markdown):
        for command, action, flag in spelled_flags(code):
            parser = actions(command)[action] if action else parser_of(command)
            if passes_its_arguments_on(parser) or flag in parser._option_string_actions:
                continue
            program = ("python", "-m", command) if command in MODULE_PROGRAMS else ("avspo", command)
            unknown.append(" ".join(word for word in (*program, action, flag) if word))
    return unknown


def test_the_scan_reads_commands_and_actions():
    """The scan finds flags in blocks, continuations and inline code, and reads lab's actions as their own parsers."""
    markdown = (
        "Run `avspo analyze --logs run.log`.\n\n"
        "```bash\n"
        "python -m lab study \\\n  --seeds 4  # comment --not-a-flag\n"
        "avspo --debug doctor --no-ray && echo --echoed\n"
        "run --estimator avspo --lr 1\n"
        "```\n"
        "`avspo analyze reads logs as UTF-8: convert them, e.g. iconv -f latin1`\n"
    )
    found = [spelled for code in command_texts(markdown) for spelled in spelled_flags(code)]
    assert sorted(found) == [("", None, "--debug"), ("analyze", None, "--logs"), ("doctor", None, "--no-ray"),
                             ("lab", "study", "--seeds")]


def test_a_flag_no_parser_has_is_reported():
    markdown = (
        "```bash\navspo doctor --no-ray --no-such-flag\npython -m lab sweep --no-such-sweep-flag\n```\n"
        "Or `avspo verl-demo --steps 2 --stepz 2`; `avspo openrlhf --any.train_ppo_ray.flag` passes it on.\n"
    )
    assert unknown_flags(markdown) == [
        "avspo doctor --no-such-flag", "python -m lab sweep --no-such-sweep-flag", "avspo verl-demo --stepz",
    ]


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_flag_the_docs_spell_exists(doc):
    assert unknown_flags(doc.read_text()) == []


def test_the_docs_spell_flags_of_commands_and_of_lab_actions():
    """The check has something to check: the scan reads the docs' commands, a lab action's among them."""
    spelled = {
        (command, action)
        for doc in DOC_FILES for code in command_texts(doc.read_text()) for command, action, _ in spelled_flags(code)
    }
    assert {("analyze", None), ("doctor", None), ("lab", "study"), ("lab", "sweep")} <= spelled
