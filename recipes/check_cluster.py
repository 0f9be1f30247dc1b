"""Check every node of a running Ray cluster before a recipe spends GPU time on it.

verl places its workers, reward workers and trainer on any node of the cluster, and a node without
the plugin fails only when work first lands there (or, with plugin loading switched off, trains
with an estimator that is not registered). So on each alive node a task imports what the recipes
need (avspo_plugin with its math reward, math-verify, verl), checks that verl's estimator registry
has ``avspo``, and reports the GPUs Ray sees there; ``--wandb`` also checks that wandb can log in.

submit_ray_job.sh and run_slurm.sh run it as a Ray job before the recipe (its driver joins the
job's cluster and runs with the job's runtime env)::

    ray job submit --address http://head:8265 -- python recipes/check_cluster.py [--nodes 2 --gpus-per-node 8]

Exit status 0 when every node is ready, 1 with each node's problem otherwise. Only ``ray`` is
imported here: the script must run where the plugin is missing.
"""

from __future__ import annotations

import argparse
import importlib
import netrc
import os
import socket
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import Any

# module -> its distribution (for the version shown), None for a submodule
REQUIRED_MODULES = {"avspo_plugin": "avspo-plugin", "avspo_plugin.math_reward.reward": None, "math_verify": "math-verify", "verl": "verl"}
ESTIMATOR = "avspo"
WANDB_HOST = "api.wandb.ai"
INSTALL_HINT = ("install the same environment on every node, from the checkout: pip install torch==2.13.0, then "
                "pip install -c constraints.txt '.[verl,math]'")


def wandb_login_problem() -> str | None:
    """Why wandb could not log in from this process (None when it can): an API key in the environment,
    an offline/disabled mode, or a netrc entry written by `wandb login`."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_MODE", "").lower() in ("offline", "disabled", "dryrun"):
        return None
    path = os.environ.get("NETRC") or os.path.expanduser("~/.netrc")
    host = os.environ.get("WANDB_BASE_URL", WANDB_HOST).split("://")[-1].split("/")[0]
    try:
        if netrc.netrc(path).authenticators(host):
            return None
    except (FileNotFoundError, netrc.NetrcParseError):
        pass
    return f"no wandb login (WANDB_API_KEY unset, no {host} entry in {path}, WANDB_MODE not offline)"


def node_report(check_wandb: bool) -> dict[str, Any]:
    """This node's view: host, each required module's version or import error, registration, wandb."""
    report: dict[str, Any] = {"host": socket.gethostname(), "python": sys.executable, "modules": {}, "problems": []}
    for name, distribution in REQUIRED_MODULES.items():
        try:
            module = importlib.import_module(name)
        except Exception as err:  # any import failure is this node's problem to report
            report["problems"].append(f"cannot import {name}: {type(err).__name__}: {err}")
            continue
        version = getattr(module, "__version__", None)
        if version is None and distribution is not None:
            try:
                version = metadata.version(distribution)
            except metadata.PackageNotFoundError:
                pass
        report["modules"][name] = version or "ok"
    if "verl" in report["modules"]:
        try:
            from verl.trainer.ppo import core_algos

            if ESTIMATOR not in core_algos.ADV_ESTIMATOR_REGISTRY:
                report["problems"].append(
                    f"verl has no {ESTIMATOR!r} estimator: the plugin was not loaded (run `avspo doctor` on this node)"
                )
        except Exception as err:
            report["problems"].append(f"cannot read verl's estimator registry: {type(err).__name__}: {err}")
    if check_wandb:
        problem = wandb_login_problem()
        if problem:
            report["problems"].append(problem)
    return report


def cluster_problems(nodes: Sequence[dict[str, Any]], min_nodes: int, gpus_per_node: float) -> list[str]:
    """Problems of the cluster as a whole, from Ray's node table and the per-node reports."""
    problems = []
    ready = [node for node in nodes if node["gpus"] >= gpus_per_node]
    if len(ready) < min_nodes:
        counts = ", ".join(f"{node['host']}: {node['gpus']:g}" for node in nodes)
        problems.append(
            f"{len(ready)} node(s) with at least {gpus_per_node:g} GPUs, {min_nodes} needed (GPUs per node as Ray sees them: {counts})"
        )
    for node in nodes:
        problems += [f"{node['host']}: {problem}" for problem in node["problems"]]
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", help="Ray address (default: the job's cluster, or RAY_ADDRESS)")
    parser.add_argument("--nodes", type=int, default=1, help="alive nodes needed (default: 1)")
    parser.add_argument("--gpus-per-node", type=float, default=0, help="GPUs each of those nodes needs (default: 0)")
    parser.add_argument("--wandb", action="store_true", help="also check that wandb can log in on every node")
    args = parser.parse_args(argv)

    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray.init(address=args.address, logging_level="ERROR", log_to_driver=False)
    probe = ray.remote(num_cpus=0)(node_report)
    alive = [node for node in ray.nodes() if node["Alive"]]
    refs = [
        probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)).remote(args.wandb)
        for node in alive
    ]
    nodes = []
    for node, report in zip(alive, ray.get(refs)):
        report["gpus"] = node["Resources"].get("GPU", 0.0)
        report["host"] = f"{report['host']} ({node['NodeManagerAddress']})"
        nodes.append(report)
        modules = ", ".join(f"{name} {version}" for name, version in report["modules"].items())
        print(f"{report['host']}: {report['gpus']:g} GPUs; {modules or 'no required module'}; {report['python']}")
    problems = cluster_problems(nodes, args.nodes, args.gpus_per_node)
    for problem in problems:
        print(f"not ready: {problem}")
    if any(node["problems"] for node in nodes):
        print(f"-> {INSTALL_HINT}, then check again")
    print("cluster ready" if not problems else f"cluster not ready: {len(problems)} problem(s)")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
