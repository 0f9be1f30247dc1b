"""``avspo doctor --host openrlhf``: is OpenRLHF installed, is its release supported, does the runtime route apply?

OpenRLHF is not imported (its modules import deepspeed and vllm): its source is read. Unless ``--no-ray``, the launch
preflight runs on a Ray cluster in a job with the avspo worker setup hook, as ``avspo openrlhf`` gives it.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from avspo_plugin.names import install_line
from avspo_plugin.openrlhf import source_checks as sc
from avspo_plugin.openrlhf.versions import OPENRLHF

from .findings import NOT_READY, READY, installed_versions, line, release_failed, versions_line

DISTRIBUTIONS = ("avspo-plugin", "openrlhf", "torch", "ray", "deepspeed", "vllm", "flash-attn")
PATCHED_RELEASE = "0.11.2"


def installed_package() -> Path | None:
    """The folder of the ``openrlhf`` package this Python imports, found without importing it (a namespace
    package, such as a test folder on the path, is not OpenRLHF)."""
    spec = importlib.util.find_spec("openrlhf")
    if spec is None or spec.origin is None or not spec.submodule_search_locations:
        return None
    return Path(spec.origin).parent


def run(args: argparse.Namespace) -> int:
    print("avspo doctor --host openrlhf")
    print(f"  versions: {versions_line(installed_versions(DISTRIBUTIONS))}")
    package = installed_package()
    if package is None:
        line("FAIL", f"OpenRLHF is not installed in this Python environment: {install_line('openrlhf')} "
             "with OpenRLHF's GPU requirements (deepspeed, flash-attn, vllm)")  # fmt: skip
        return NOT_READY
    version = OPENRLHF.installed()
    if version is None:
        line("warn", f"OpenRLHF at {package} has no distribution metadata: its release cannot be checked ({OPENRLHF})")
    elif release_failed(OPENRLHF, version, "pip install openrlhf"):
        return NOT_READY
    maker_source = (package / sc.EXPERIENCE_MAKER_FILE).read_text()
    findings = sc.source_findings(maker_source, (package / sc.TRAINER_FILE).read_text())
    for finding in findings:
        line("FAIL", f"{package}: {finding}")
    if findings:
        line("FAIL", "the avspo runtime route does not apply to this OpenRLHF")
        return NOT_READY
    layout = sc.layout_in_source(sc.methods(maker_source, "RemoteExperienceMaker"))
    line("ok", f"the runtime route applies: `avspo openrlhf ... {layout.flag(layout.estimator)} avspo` with "
         f"{layout.flag(layout.avspo_prefix)}<key> options ({layout.name}); {package} has what it wraps")  # fmt: skip
    if version == PATCHED_RELEASE:
        line("ok", f"patches/openrlhf-{PATCHED_RELEASE}-avspo.patch applies to this release")
    else:
        line("warn", f"patches/openrlhf-{PATCHED_RELEASE}-avspo.patch is for OpenRLHF {PATCHED_RELEASE} only")
    return NOT_READY if not args.no_ray and preflight_failed(args.ray_address) else READY


def preflight_failed(address: str | None) -> bool:
    """The launch preflight on a Ray cluster with the avspo setup hook; True when a node fails it."""
    # Here, not at the top: only this check (not `--no-ray`) needs Ray and the launch's worker setup (torch).
    import ray

    from avspo_plugin.openrlhf.launch import with_setup_hook
    from avspo_plugin.openrlhf.preflight import check_nodes

    from .ray_cluster import connect_ray

    if ray.is_initialized():
        return line("FAIL", "Ray is initialised in this process already: the preflight needs a job with the avspo "
                            "setup hook")
    try:
        where = connect_ray(address, runtime_env=with_setup_hook(None))
    except Exception as err:  # an unreachable or bad address, as the verl doctor reports it: NOT READY, not an error
        return line("FAIL", f"preflight: could not join a Ray cluster: {err!r}")
    line("ok", f"preflight in {where}")
    try:
        reports = check_nodes()
    except RuntimeError as err:
        return line("FAIL", str(err))
    finally:
        ray.shutdown()
    for report in reports:
        versions = ", ".join(f"{name} {version or 'not found'}" for name, version in report["versions"].items())
        line("ok", f"Ray node {report['node_ip']}: {versions}, the avspo hook in place in a fresh worker "
                   f"({report['python']})")
    return False
