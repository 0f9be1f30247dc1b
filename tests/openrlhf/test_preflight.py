"""The runtime route's preflight on a local Ray cluster it starts: one actor per node, before any model loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from avspo_plugin.openrlhf.launch import with_setup_hook
from avspo_plugin.openrlhf.preflight import check_nodes, problems, versions
from avspo_plugin.openrlhf.worker_setup import EXPERIENCE_MAKER_MODULE, TRAINER_MODULE


def preflight_on_local_cluster(runtime_env: dict):
    """check_nodes() on a fresh local Ray cluster started with ``runtime_env`` (shut down after)."""
    import ray

    ray.init(
        address="local", num_cpus=1, object_store_memory=128 * 1024**2, include_dashboard=False,
        log_to_driver=False, runtime_env=runtime_env,
    )  # fmt: skip
    try:
        return check_nodes(timeout_s=120)
    finally:
        ray.shutdown()


def test_every_node_has_the_plugin_and_its_hook():
    """The job's runtime_env as ``avspo openrlhf`` gives it: a worker on each node has the hook waiting."""
    (report,) = preflight_on_local_cluster(with_setup_hook(None))
    assert report["pid"] != os.getpid()  # a Ray worker, not this process
    assert report["hook"] == {EXPERIENCE_MAKER_MODULE: "waiting for import", TRAINER_MODULE: "waiting for import"}
    assert report["versions"] == versions()
    assert report["node_ip"] and report["node_id"]


def test_a_node_whose_workers_cannot_import_the_hook_stops_the_launch():
    """What a node without avspo-plugin looks like to Ray: its worker setup hook does not import."""
    with pytest.raises(RuntimeError) as error:
        preflight_on_local_cluster({"worker_process_setup_hook": "avspo_plugin.not_installed_here.setup_worker"})
    message = str(error.value)
    assert message.startswith("avspo preflight failed before any model was loaded:\n  node ")
    assert "no worker could start there" in message and "is avspo-plugin installed in that node's Python" in message


def test_a_worker_without_the_setup_hook_is_reported():
    """A process that did not run the setup hook (Ray initialised before ``avspo openrlhf``'s ray.init)."""
    code = "import json; from avspo_plugin.openrlhf.preflight import node_report; print(json.dumps(node_report()))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    report = json.loads(run.stdout)
    assert set(report["hook"].values()) == {"missing"}
    (problem,) = problems(report, versions())
    assert problem.startswith(f"the avspo hook is not installed for {EXPERIENCE_MAKER_MODULE}, {TRAINER_MODULE}")


def test_other_versions_on_a_node_are_reported():
    report = {"hook": {EXPERIENCE_MAKER_MODULE: "patched"}, "versions": {"avspo-plugin": "0.0.9", "openrlhf": "0.11.2"}}
    expected = {"avspo-plugin": "0.1.0", "openrlhf": "0.11.2"}
    assert problems(report, expected) == ["avspo-plugin 0.0.9 there, 0.1.0 here"]
