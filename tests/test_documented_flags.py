"""Every command-line flag the docs spell is an option of that command's parser.

A flag is "spelled" in ``avspo <command> [ACTION] ... --flag`` inside a code block or inline code of README.md or
docs/**/*.md; it must be an option of the parser that reads it: ``avspo`` itself before the command, the command's
after it, and for ``avspo lab`` the action's (study, tune, sweep, ...) after the action's name. The parsers are
built in this process as ``avspo`` builds them (no subprocess).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from avspo_plugin.tools.cli import MOVED, SUBCOMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

FENCED_BLOCK = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
INLINE_CODE = re.compile(r"`([^`\n]+)`")
# An option as the docs spell it, with what may hug it in prose or usage lines: [--flag], --flag=VALUE, --flag,
OPTION = re.compile(r"^[\[(]*(--?[A-Za-z][\w-]*)")
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
    """(command, action or None, flag) for each flag of each ``avspo <command>`` in a line of code.

    ``avspo --debug <command>``'s --debug is ``avspo``'s own (command ""). Text that is not a command of ``avspo``
    (a placeholder such as ``avspo <command>``) is passed over.
    """
    tokens = code.split()
    for start, token in enumerate(tokens):
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
                if word not in SUBCOMMANDS and word not in MOVED:
                    break
                command = word
            elif action is None and word in actions(command):
                action = word


def subparser_choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(
        (action.choices for action in parser._actions if isinstance(action, argparse._SubParsersAction)), {}
    )


@cache
def parser_of(command: str) -> argparse.ArgumentParser:
    """``avspo`` itself for "", else the command's parser with its arguments, as ``avspo <command>`` builds it."""
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
            unknown.append(" ".join(word for word in ("avspo", command, action, flag) if word))
    return unknown


def test_the_scan_reads_commands_and_actions():
    """The scan finds flags in blocks, continuations and inline code, and reads lab's actions as their own parsers."""
    markdown = (
        "Run `avspo analyze --logs run.log`.\n\n"
        "```bash\n"
        "avspo lab study \\\n  --seeds 4  # comment --not-a-flag\n"
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
        "```bash\navspo doctor --no-ray --no-such-flag\navspo lab sweep --no-such-sweep-flag\n```\n"
        "Or `avspo verl-demo --steps 2 --stepz 2`; `avspo openrlhf --any.train_ppo_ray.flag` passes it on.\n"
    )
    assert unknown_flags(markdown) == [
        "avspo doctor --no-such-flag", "avspo lab sweep --no-such-sweep-flag", "avspo verl-demo --stepz",
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
