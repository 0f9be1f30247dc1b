"""Test kinds: ``e2e`` marks the tests that launch something (verl's trainer, a Ray cluster, a host's
released code in its own process, the CPU lab, a download); the rest are unit tests.

``make test-fast`` runs ``-m "not e2e"``: the core, the config, each adapter's equality with its host,
the reward and the tools' logic, in under 2 minutes. ``make test`` runs both kinds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from filelock import FileLock
from fresh_interpreter import FRESH_VERL_PROCESS, run_python

TESTS = Path(__file__).parent

# The Ray clusters the tests start (in the test process or in a launch it makes) start no workers ahead for
# their first driver: no test's actors use them, and each costs one to two seconds of CPU on 2 cores.
os.environ.setdefault("RAY_prestart_worker_first_driver", "0")

# Files whose every test is end to end.
E2E_FILES = {
    "verl/test_e2e.py",  # verl's main_ppo on CPU, several launches
    "verl/test_e2e_cpu_support.py",  # verl's workers on the CPU platform
    "verl/test_upstream_patches.py",  # applies the proposed verl patches (patches/) to verl's released source and runs their tests
    "lab/test_command.py",  # the quick lab and sweep
    "recipes/test_recipes.py",  # recipes through verl's validation, shellcheck, a local Ray cluster
    "openrlhf/test_routes.py",  # OpenRLHF's releases run in processes of their own
    "openrlhf/test_preflight.py",
    "openrlhf/test_doctor.py",
    "openrlhf/test_releases.py",  # downloads every supported release
    "trl/test_releases.py",
    "trl/test_distributed.py",  # several processes
    "commands/doctor/test_ray_cluster.py",  # Ray connection bounds
}
# Single end-to-end tests in files of unit tests.
E2E_TESTS = {
    "verl/test_registration.py::test_not_registered_in_a_ray_actor_without_a_route",
    "verl/test_registration.py::test_run_ppo_gives_the_trainer_process_the_plugin_through_rays_runtime_env",
    "verl/test_registration.py::test_doctor_beside_a_running_cluster_checks_in_that_cluster",
    "test_doc_examples.py::test_example_runs_as_written",  # TRL trains a tiny model per example of the docs
    "lab/test_study.py::test_quick_study_writes_the_gates_and_the_paired_differences",  # the CPU lab's quick study
    "lab/test_study.py::test_a_warmed_up_base_is_kept_and_read_back_not_warmed_up_again",  # the lab's warm-up
    "test_entry_points.py::test_every_entry_point_answers_help_with_its_usage",  # a process per program, each importing torch or verl
}


# The slowest files, slowest first (`make test` with `--durations`, fresh clone, 2026-11-27 01:50: 265, 65, 45, 34, 30
# and 25 s), start first, so that the two xdist workers finish together. The Makefile passes
# `--no-loadscope-reorder`: xdist's default order, by number of tests, starts these few-test files last.
SLOWEST_FILES = (
    "verl/test_e2e.py",
    "verl/test_registration.py",
    "lab/test_command.py",
    "openrlhf/test_routes.py",
    "recipes/test_recipes.py",
    "openrlhf/test_preflight.py",
)


def pytest_collection_modifyitems(config, items):
    listed = E2E_FILES | {name.split("::")[0] for name in E2E_TESTS} | set(SLOWEST_FILES)
    missing = sorted(name for name in listed if not (TESTS / name).is_file())
    if missing:
        raise pytest.UsageError(f"tests/conftest.py lists test files that do not exist: {missing}")
    for item in items:
        path = Path(str(item.path)).relative_to(TESTS).as_posix()
        if path in E2E_FILES or f"{path}::{item.originalname}" in E2E_TESTS:
            item.add_marker(pytest.mark.e2e)
    rank = {name: i for i, name in enumerate(SLOWEST_FILES)}
    items.sort(key=lambda item: rank.get(Path(str(item.path)).relative_to(TESTS).as_posix(), len(rank)))


@pytest.fixture(scope="session")
def fresh_verl_process(request, tmp_path_factory) -> dict:
    """FRESH_VERL_PROCESS's report: run once per `make test`, its report shared by the xdist workers through a file
    in their common temporary folder (several test files read it)."""
    workerinput = getattr(request.config, "workerinput", None)
    if workerinput is None:  # one test process: nothing to share
        return run_python(FRESH_VERL_PROCESS, {})
    report = tmp_path_factory.getbasetemp().parent / f"fresh_verl_process-{workerinput['testrunuid']}.json"
    with FileLock(f"{report}.lock"):
        if not report.is_file():
            report.write_text(json.dumps(run_python(FRESH_VERL_PROCESS, {})))
        return json.loads(report.read_text())
