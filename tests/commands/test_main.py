"""The ``avspo`` console script: every subcommand ends bad input with one error line and exit status 2, and a bug with its traceback."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from avspo_plugin.commands.main import EXTRAS, SUBCOMMANDS, main


def test_listing_names_the_commands_not_their_former_names(capsys):
    try:
        main(["--help"])
    except SystemExit:
        pass
    listing = capsys.readouterr().out
    assert "advantages" in listing and "demo " not in listing.replace("verl-demo", "")


def test_listing_loads_no_subcommand_and_no_host():
    probe = (
        "import json, sys\n"
        "from avspo_plugin.commands.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('verl', 'trl', 'ray', 'matplotlib') or m.startswith('avspo_plugin.commands.'))))\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == ["avspo_plugin.commands.main"]


# ------------------------------------------------------------------ errors


def run_main(argv):
    """``main(argv)`` as the console script runs it: (exit status, stderr); argparse's own exits included."""
    try:
        return main(argv)
    except SystemExit as stop:
        return stop.code


def _without_openrlhf(monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openrlhf" else find_spec(name, *a))


# One bad input per subcommand: (argv, the message after "avspo <command>: error: ").
BAD_INPUTS = {
    "advantages": (["advantages", "--prompts", "0"], "argument --prompts: 0 is not a positive integer"),
    "analyze": (["analyze", "{tmp}/missing.jsonl", "--out", "{tmp}/out"], "{tmp}/missing.jsonl: no such file or directory"),
    "doctor": (["doctor", "--host", "nope"], "argument --host: invalid choice: 'nope'"),
    "openrlhf": (["openrlhf", "--algo.advantage.estimator", "avspo"], "needs the 'openrlhf' extra"),
    "verl-demo": (["verl-demo", "--steps", "0", "--out", "{tmp}/demo"], "argument --steps: 0 is not a positive integer"),
    "trl-offline": (["trl-offline"], "the following arguments are required: --out"),
}


def test_every_subcommand_has_a_bad_input_case():
    assert set(BAD_INPUTS) == set(SUBCOMMANDS)


@pytest.mark.parametrize("command", sorted(BAD_INPUTS))
def test_bad_input_is_one_error_line_and_exit_status_2(command, tmp_path, capsys, monkeypatch):
    _without_openrlhf(monkeypatch)  # where OpenRLHF is installed, `avspo openrlhf` would start training
    argv, message = BAD_INPUTS[command]
    code = run_main([arg.format(tmp=tmp_path) for arg in argv])
    err = capsys.readouterr().err
    assert code == 2
    assert f"avspo {command}: error: {message.format(tmp=tmp_path)}" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_debug_shows_the_traceback_of_an_input_error(tmp_path, capsys):
    assert run_main(["--debug", "analyze", str(tmp_path / "missing"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "AnalyzeError" in err
    assert err.rstrip().endswith(f"avspo analyze: error: {tmp_path / 'missing'}: no such file or directory")


@pytest.mark.parametrize("bug", [KeyError("threshold"), ModuleNotFoundError("no avspo_plugin.x", name="avspo_plugin.x")])
def test_a_bug_keeps_its_traceback_and_says_internal_error(bug, capsys, monkeypatch):
    import avspo_plugin.commands.advantages as advantages

    def broken(args):
        raise bug

    monkeypatch.setattr(advantages, "run", broken)
    assert run_main(["advantages"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "in broken" in err
    assert f"avspo advantages: internal error: {type(bug).__name__}: " in err and "this is a bug in avspo" in err


def test_the_console_script_exits_2_with_one_line(tmp_path):
    """Through a real process: status 2, one stderr line, nothing on stdout."""
    run = subprocess.run(
        [sys.executable, "-m", "avspo_plugin.commands.main", "analyze", str(tmp_path / "none.jsonl"), "--out",
         str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120,
    )
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == f"avspo analyze: error: {tmp_path / 'none.jsonl'}: no such file or directory\n"


def test_verl_demo_writes_outside_the_folder_it_runs_in_by_default(tmp_path, monkeypatch):
    import argparse
    import tempfile

    from avspo_plugin.verl_cpu.demo import add_arguments

    monkeypatch.chdir(tmp_path)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out = parser.parse_args([]).out
    assert out == Path(tempfile.gettempdir()) / "avspo-verl-demo" and not out.resolve().is_relative_to(tmp_path)


# Each case: a package hidden (it cannot import) and the commands whose extra it belongs to. One process runs the cases
# in this order, each hiding only its own package: no case loads a later case's package (checked before each case),
# so each command meets its package missing as in an install without that extra.
HIDDEN_CASES = (
    ("transformers", ["trl-offline"]),
    ("verl", ["verl-demo"]),
    ("openrlhf", ["openrlhf"]),
    ("matplotlib", ["analyze"]),
)
# The extra each command names (setup.cfg's extras_require).
EXTRA_OF = {"verl-demo": "verl", "openrlhf": "openrlhf", "analyze": "analyze", "trl-offline": "trl"}
# Runs `avspo CMD --help` and `avspo CMD` for each case's commands with that case's package hidden.
HIDDEN_PACKAGES = """
import contextlib, importlib.abc, io, json, sys
hidden = set()
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)
sys.meta_path.insert(0, Hide())
from avspo_plugin.commands.main import main
results = {}
for case in json.loads(sys.argv[1]):
    package, commands = case
    if package in sys.modules:
        raise SystemExit(f"{package} was loaded by an earlier case: it cannot be hidden now")
    hidden.clear()
    hidden.add(package)
    for command in commands:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                help_code = main([command, "--help"])
            except SystemExit as stop:
                help_code = stop.code
        help_text = out.getvalue()
        runs = []
        # Bare, and with options the command would take once its extra is installed.
        for argv in ([command], [command, "--out", "somewhere", "--steps", "2"]):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(argv)
                except SystemExit as stop:
                    code = stop.code
            runs.append([code, err.getvalue()])
        results[command] = [help_code, help_text, runs]
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def hidden_package_results() -> dict:
    run = subprocess.run([sys.executable, "-c", HIDDEN_PACKAGES, json.dumps(HIDDEN_CASES)], capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


def test_the_hidden_cases_cover_every_command_with_an_extra():
    assert sorted(command for _, commands in HIDDEN_CASES for command in commands) == sorted(EXTRAS)
    assert EXTRA_OF == EXTRAS


@pytest.mark.parametrize("command", [command for _, commands in HIDDEN_CASES for command in commands])
def test_a_missing_extra_is_one_line_and_help_still_works(hidden_package_results, command):
    help_code, help_text, runs = hidden_package_results[command]
    message = f"needs the '{EXTRA_OF[command]}' extra: pip install -c constraints.txt \".[{EXTRA_OF[command]}]\" in the avspo checkout"
    # argparse wraps the help at the terminal's width: compare the words.
    assert help_code == 0 and "".join(message.split()) in "".join(help_text.split()), (command, help_text)
    for code, error in runs:
        assert code == 2 and error.startswith(f"avspo {command}: error: {message}"), (command, error)
        assert len(error.strip().splitlines()) == 1 and "Traceback" not in error
