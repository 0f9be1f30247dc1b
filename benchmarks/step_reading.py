"""How much of the package a reader follows to read verl training steps: the files of avspo_plugin whose functions
run, and which of their lines, while verl's v1 trainer runs three steps with the plugin's hooks (tests/verl/
test_host_contract.py's first case: trainer start, six advantage calls, three step closes, Tracking.log), its import
time and the test kit's own reference computation (host_contract.core_run) left out.

    python benchmarks/step_reading.py [--checkout DIR] [--out FILE.json]

--checkout reads another checkout's package (a git worktree of an earlier commit) with this environment's verl.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASE = "tests/verl/test_host_contract.py::TestVerl::test_advantages_and_logged_metrics_are_the_cores"


def trace_plugin():
    """The pytest plugin (loaded in the child by ``-p step_reading``): records each executed line of avspo_plugin
    inside the test call and writes the per-file counts to STEP_READING_OUT at the session's end."""
    import pytest

    hits: dict[str, set[int]] = {}

    def tracer(frame, event, arg):
        code = frame.f_code
        if "avspo_plugin" not in code.co_filename or code.co_name == "<module>":
            return None
        caller = frame.f_back
        while caller is not None:  # the kit's reference run is the core called by the test, not by verl
            if caller.f_code.co_name == "core_run":
                return None
            caller = caller.f_back
        lines = hits.setdefault(code.co_filename, {frame.f_lineno})

        def line_tracer(frame, event, arg):
            if event == "line":
                lines.add(frame.f_lineno)
            return line_tracer
        return line_tracer

    class Plugin:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_call(self, item):
            sys.settrace(tracer)
            yield
            sys.settrace(None)

        def pytest_sessionfinish(self, session):
            files = {name[name.index("avspo_plugin"):]: {"executed": len(lines),
                                                           "file_lines": len(Path(name).read_text().splitlines())}
                     for name, lines in hits.items()}
            Path(os.environ["STEP_READING_OUT"]).write_text(json.dumps(dict(sorted(files.items())), indent=1))
    return Plugin()


def pytest_configure(config):
    config.pluginmanager.register(trace_plugin(), "step_reading_tracer")


def measure(checkout: Path) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "files.json"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), str(ROOT / "benchmarks")]),
               "STEP_READING_OUT": str(out)}
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                               "-p", "step_reading", CASE], cwd=checkout, env=env, capture_output=True, text=True)
        if done.returncode != 0 or not out.exists():
            raise SystemExit(f"step_reading: {CASE} failed in {checkout}:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
        files = json.loads(out.read_text())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True,
                            text=True).stdout.strip()
    return {"commit": commit, "case": CASE, "files": len(files),
            "file_lines": sum(row["file_lines"] for row in files.values()),
            "executed_lines": sum(row["executed"] for row in files.values()), "per_file": files}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose package is read")
    parser.add_argument("--out", type=Path, default=None, help="also write the measurement here (JSON)")
    args = parser.parse_args()
    result = measure(args.checkout.resolve())
    for name, row in result["per_file"].items():
        print(f"{name:45s} {row['executed']:5d} of {row['file_lines']:5d}")
    print(f"{result['commit']}: {result['files']} files, {result['file_lines']} lines, "
          f"{result['executed_lines']} of them run")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
