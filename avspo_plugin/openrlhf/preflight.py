"""Before any model loads (``avspo openrlhf``, right after OpenRLHF's ``ray.init``): one actor per alive node reports
its Python, avspo-plugin and OpenRLHF versions and the hook's state; a node whose worker cannot start, lacks the hook,
or has other versions than the launching process stops the launch with every finding."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import avspo_plugin

from ..host_versions import installed_version
from .worker_setup import SETUP_HOOK, hook_state

logger = logging.getLogger(__name__)

PLUGIN_DISTRIBUTION = "avspo-plugin"


def versions() -> dict[str, str | None]:
    """The avspo-plugin and OpenRLHF distributions this process finds (None: not found)."""
    return {distribution: installed_version(distribution) for distribution in (PLUGIN_DISTRIBUTION, "openrlhf")}


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
            f"environment? Ray imports the worker setup hook {SETUP_HOOK} in every worker"
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


def check_nodes(timeout_s: float = 300) -> list[dict[str, Any]]:
    """The reports of :class:`NodeCheck` on every alive node, each with its ``node_id`` and ``node_ip``; RuntimeError
    on any problem, such as versions other than this process's."""
    expected = versions()
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
                reports.append({"error": f"{type(err).__name__}: {next(iter(str(err).splitlines()), '')}", **where})
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
