"""Before any model loads: on every Ray node, does avspo-plugin import and is the estimator's hook in place?

``avspo openrlhf`` runs :func:`check_nodes` right after OpenRLHF's ``ray.init``. One actor per alive node
(pinned there, no CPU reserved) reports, from a worker process that Ray started with the job's
runtime_env: the Python it runs, the avspo-plugin and OpenRLHF it finds, and whether the worker setup
hook registered the patches of :mod:`.worker_setup` (or applied them, where OpenRLHF is imported already).
A node whose worker cannot start (the setup hook failed to import), lacks the hook, or has other
avspo-plugin or OpenRLHF versions than the launching process stops the launch with every finding.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from importlib import metadata
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import avspo_plugin

from .worker_setup import hook_state

logger = logging.getLogger(__name__)

PLUGIN_DISTRIBUTION = "avspo-plugin"


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    """The avspo-plugin and OpenRLHF distributions this process finds (None: not found)."""
    return {PLUGIN_DISTRIBUTION: _version(PLUGIN_DISTRIBUTION), "openrlhf": _version("openrlhf")}


def node_report() -> dict[str, Any]:
    """This process's findings (what each node's preflight actor returns)."""
    return {
        "host": os.uname().nodename,
        "pid": os.getpid(),
        "python": sys.executable,
        "avspo_plugin": os.path.dirname(avspo_plugin.__file__),
        "versions": versions(),
        "hook": hook_state(),
    }


class NodeCheck:
    """The preflight actor: :func:`node_report` in a worker process of its node."""

    def report(self) -> dict[str, Any]:
        return node_report()


def problems(report: Mapping[str, Any], expected: Mapping[str, str | None]) -> list[str]:
    """What is wrong on one node, given the launching process's versions."""
    if "error" in report:
        return [
            f"no worker could start there ({report['error']}): is avspo-plugin installed in that node's Python "
            "environment? Ray imports the worker setup hook avspo_plugin.openrlhf.worker_setup.setup_worker in every worker"
        ]
    found = []
    missing = [name for name, state in report["hook"].items() if state == "missing"]
    if missing:
        found.append(
            f"the avspo hook is not installed for {', '.join(missing)} (its worker setup hook did not run: was "
            "Ray initialised before avspo openrlhf called ray.init?)"
        )
    for name, version in expected.items():
        if report["versions"].get(name) != version:
            found.append(f"{name} {report['versions'].get(name) or 'not found'} there, {version or 'not found'} here")
    return found


def check_nodes(expected: Mapping[str, str | None] | None = None, timeout_s: float = 300) -> list[dict[str, Any]]:
    """Run :class:`NodeCheck` on every alive node of the connected Ray cluster; raise RuntimeError on any problem.

    expected: the versions every node must have (default: this process's, :func:`versions`).
    Returns the node reports, each with its node's ``node_id`` and ``node_ip``.
    """
    expected = versions() if expected is None else expected
    nodes = [node for node in ray.nodes() if node["Alive"]]
    actor_class = ray.remote(num_cpus=0)(NodeCheck)
    actors = [
        actor_class.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)).remote()
        for node in nodes
    ]
    reports = []
    try:
        for node, actor in zip(nodes, actors):
            where = {"node_id": node["NodeID"], "node_ip": node["NodeManagerAddress"]}
            try:
                reports.append({**ray.get(actor.report.remote(), timeout=timeout_s), **where})
            except Exception as err:
                reports.append({"error": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}", **where})
    finally:
        for actor in actors:
            ray.kill(actor)
    findings = [
        f"node {report['node_ip']} ({report['node_id'][:12]}): {problem}"
        for report in reports
        for problem in problems(report, expected)
    ]
    if findings:
        raise RuntimeError("avspo preflight failed before any model was loaded:\n  " + "\n  ".join(findings))
    logger.info("avspo preflight: the estimator's hook is in place on %d Ray node(s)", len(reports))
    return reports
