"""`python -m lab`'s command line: the demo's options, then actions with options of their own; every `python -m lab` line
of the docs parses as written; a demo option given before an action's name applies to the action or is refused,
never ignored."""

import re
import shlex
from pathlib import Path

import pytest

from avspo_plugin.commands.main import command_parser
from lab import command
from lab.command import demo_options_not_taken, main
from lab.research.command import RUNS, SHARED_WITH_DEMO

ROOT = Path(__file__).resolve().parents[2]
# Each of the demo's options as given: OPTION=VALUE, so that --methods takes no action's name for a method.
DEMO_OPTIONS = {
    "--quick": "--quick", "--methods": "--methods=grpo", "--seeds": "--seeds=2", "--steps": "--steps=5",
    "--prompts": "--prompts=4", "--group-size": "--group-size=4", "--temperature": "--temperature=0.5",
    "--lr": "--lr=1e-3", "--mix": "--mix=1,1,1,1", "--warmup-steps": "--warmup-steps=5", "--eval-every": "--eval-every=2",
    "--dapo-max-gen-batches": "--dapo-max-gen-batches=2", "--task-seed": "--task-seed=1", "--jobs": "--jobs=1",
    "--out": "--out=x", "--train-per-tier": "--train-per-tier=3", "--no-progress": "--no-progress",
}
ACTION_OPTIONS = {
    "study": {"--quick", "--methods", "--bases", "--seeds", "--jobs", "--out", "--no-progress"},
    "tune": {"--set", "--label", "--candidates", "--seeds", "--jobs", "--out", "--no-progress"},
    "sweep": {"--quick", "--confirm", "--seeds", "--jobs", "--out", "--no-progress"},
}


def parse(argv: list[str]):
    return command_parser(command.PROG, command).parse_args(argv)


def usage_options(argv: list[str], capsys) -> set[str]:
    """The options the usage line of ``python -m lab ARGV --help`` names."""
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    usage = capsys.readouterr().out.split("\n\n")[0]
    return set(re.findall(r"\[(--?[a-z-]+)", usage)) - {"-h", "--debug"}


def documented_lines() -> list[tuple[str, str]]:
    """(file, command line) of every `python -m lab` command in README.md, the Makefile and docs/: inline code, the lines
    of code blocks and the Makefile's recipes, trailing comments left out."""
    found = []
    for path in [ROOT / "README.md", ROOT / "Makefile", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        spans = re.findall(r"`(python -m lab(?![.:\w])[^`]*)`", text)
        lines = re.findall(r"^(?:\t\$\(VENV\)/bin/)?(python -m lab(?![.:\w])[^#\n]*)", text, re.MULTILINE)
        found += [(str(path.relative_to(ROOT)), line.strip()) for line in spans + lines]
    return found


def test_the_docs_name_every_action_with_options():
    lines = {line for _, line in documented_lines()}
    assert {"python -m lab --out build/lab", "python -m lab --quick", "python -m lab study --quick --out /tmp/q",
            "python -m lab sweep --out build/sweep --jobs 2", "python -m lab tune --set lr=3e-4"} <= lines


@pytest.mark.parametrize("where, line", documented_lines())
def test_every_documented_command_line_parses_as_written(where, line, capsys):
    argv = shlex.split(line)[3:]  # after `python -m lab`
    action = next((word for word in argv if word in ("run", *RUNS)), None)
    if "--help" in argv:
        with pytest.raises(SystemExit) as stop:
            parse(argv)
        assert stop.value.code == 0 and capsys.readouterr().out.startswith(f"usage: python -m lab {action or ''}".strip())
    else:
        assert parse(argv).action == action, where


def test_the_lab_names_every_action_and_each_action_shows_only_its_options(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    listing = capsys.readouterr().out
    assert all(re.search(rf"^    {action} ", listing, re.MULTILINE) for action in ("run", *RUNS))
    assert usage_options([], capsys) == set(DEMO_OPTIONS)
    assert usage_options(["run"], capsys) == set(DEMO_OPTIONS)
    for action, options in ACTION_OPTIONS.items():
        assert usage_options([action], capsys) == options, action


@pytest.mark.parametrize("action", ["run", *RUNS])
@pytest.mark.parametrize("option", list(DEMO_OPTIONS))
def test_a_demo_option_before_an_actions_name_applies_to_it_or_is_refused(action, option):
    given = DEMO_OPTIONS[option]
    before = parse([given, action])
    if action == "run" or option.lstrip("-").replace("-", "_") in SHARED_WITH_DEMO[action]:
        assert vars(before) == vars(parse([action, given]))
        assert action == "run" or demo_options_not_taken(before) == []
    else:
        assert demo_options_not_taken(before) == [option]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--methods", "ppo", "--quick"], "python -m lab: error: unknown method 'ppo'"),
        (["--mix", "1,2", "--quick"], "mix has 2 weights for 4 tiers"),
        (["--lr", "1e-3", "--quick", "tune"],
         "`python -m lab tune` does not take --quick, --lr, given before its name: options of the demo"),
    ],
)
def test_bad_options_are_named(args, message, capsys):
    assert main(args) == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, unrecognized",
    [
        (["sweep", "--temperature", "0.5", "--lr", "1e-3"], "--temperature 0.5 --lr 1e-3"),
        (["sweep", "--bases", "2"], "--bases 2"),
        (["study", "--candidates", "carrydrop25"], "--candidates carrydrop25"),
        (["tune", "--quick"], "--quick"),
    ],
)
def test_an_option_after_an_actions_name_that_it_does_not_take_is_refused(args, unrecognized, capsys):
    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code == 2 and f"error: unrecognized arguments: {unrecognized}" in capsys.readouterr().err
