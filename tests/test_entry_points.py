"""Every ``python -m`` entry point of the checkout answers ``--help`` with its usage, exit 0, and runs nothing; a
missing optional extra is one line naming the install command, not a traceback."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("avspo_plugin", "lab", "recipes", "renderer", "benchmarks")
MAIN_GUARD = re.compile(r"^if __name__ == ['\"]__main__['\"]:", re.MULTILINE)
# What --help may cost: the imports of the program's module (torch, verl, the lab), nothing it runs. Generous for a
# loaded 2-core machine, where importing verl alone takes tens of seconds; a program that starts its work on --help
# (the headroom pilot: ten minutes) exceeds it.
HELP_SECONDS = 90


def entry_points() -> list[str]:
    """Every module run by ``python -m``: a package's ``__main__.py``, a module with a ``__main__`` guard."""
    modules = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).with_suffix("")
            if path.name == "__main__.py":
                modules.append(".".join(relative.parts[:-1]))
            elif MAIN_GUARD.search(path.read_text(encoding="utf-8")):
                modules.append(".".join(relative.parts))
    return modules


def test_the_entry_points_are_found():
    found = entry_points()
    assert {"lab", "renderer", "lab.research.headroom_pilot", "recipes.math_data.prepare",
            "avspo_plugin.commands.main"} <= set(found)
    assert "avspo_plugin.math_reward.verify" not in found  # it names the guard in its docstring only


def help_of(module: str) -> tuple[str, subprocess.CompletedProcess | None, float]:
    started = time.monotonic()
    try:
        run = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, cwd=ROOT,
                             timeout=HELP_SECONDS)
    except subprocess.TimeoutExpired:
        run = None
    return module, run, time.monotonic() - started


def test_every_entry_point_answers_help_with_its_usage():
    with ThreadPoolExecutor(max_workers=2) as pool:
        answers = list(pool.map(help_of, entry_points()))
    for module, run, seconds in answers:
        assert run is not None, f"python -m {module} --help still running after {HELP_SECONDS} s"
        assert run.returncode == 0 and "usage:" in run.stdout, f"python -m {module} --help:\n{run.stdout}{run.stderr}"
        assert seconds < HELP_SECONDS


BLOCK_AND_RUN = textwrap.dedent("""
    import runpy, sys
    blocked, module = sys.argv[1], sys.argv[2]

    class MissingExtra:  # the extra's package, as if it were not installed
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == blocked:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, MissingExtra())
    sys.argv = [module, "--help"]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
""")


@pytest.mark.parametrize(("module", "blocked", "extra"), [
    ("recipes.math_data.prepare", "pyarrow", "math"),
    ("recipes.math_data.evaluate", "math_verify", "math"),
])
def test_a_missing_extra_is_one_line_naming_the_install_command(module, blocked, extra):
    run = subprocess.run([sys.executable, "-c", BLOCK_AND_RUN, blocked, module], capture_output=True, text=True,
                         cwd=ROOT, timeout=HELP_SECONDS)
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines() == [
        f"python -m {module}: error: needs the '{extra}' extra: pip install -c constraints.txt \".[{extra}]\" in the "
        f"avspo checkout (No module named '{blocked}')"]
