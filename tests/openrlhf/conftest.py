"""OpenRLHF's released source for tests/openrlhf, downloaded from PyPI once per test session.

OpenRLHF is not installed (it requires deepspeed, flash-attn and vllm); the tests read its wheels:
0.11.2 (dotted flags, the patch's target) and 0.10.1 (the last release with flat flags). Its code
runs only in processes of its own, see host.py.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from release_wheels import download

from renderer.doctor_samples import extract_openrlhf

REPO = Path(__file__).resolve().parents[2]
HOST = Path(__file__).with_name("host.py")
PATCH = REPO / "patches" / "openrlhf-0.11.2-avspo.patch"
RELEASE = "0.11.2"
FLAT_RELEASE = "0.10.1"


def download_release(version: str, root: Path) -> Path:
    """A folder holding the release's ``openrlhf`` package and dist-info, from its wheel on PyPI."""
    # The wheels are tagged cp311-manylinux1_x86_64 but hold only Python source: asking for that tag
    # fetches them from any interpreter or platform.
    wheel = download("openrlhf", version, root, ("--python-version", "3.11", "--platform", "manylinux1_x86_64"))
    return extract_openrlhf(wheel, version, root / version)


@pytest.fixture(scope="session")
def patch_file() -> Path:
    return PATCH


@pytest.fixture(scope="session")
def openrlhf_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("openrlhf")


@pytest.fixture(scope="session")
def release_source(openrlhf_root) -> Path:
    return download_release(RELEASE, openrlhf_root)


@pytest.fixture(scope="session")
def flat_release_source(openrlhf_root) -> Path:
    return download_release(FLAT_RELEASE, openrlhf_root)


@pytest.fixture(scope="session")
def patched_source(release_source, openrlhf_root) -> tuple[Path, subprocess.CompletedProcess]:
    """A copy of the 0.11.2 release with the patch applied by ``patch -p1``, and patch's result."""
    if shutil.which("patch") is None:
        pytest.fail("the 'patch' program applies patches/openrlhf-0.11.2-avspo.patch: apt-get install patch")
    target = openrlhf_root / "patched"
    shutil.copytree(release_source, target)
    with PATCH.open("rb") as diff:
        applied = subprocess.run(
            ["patch", "-p1", "--forward", "--batch"], stdin=diff, cwd=target, capture_output=True, text=True
        )
    return target, applied


def host_report(*arguments: str) -> dict:
    """Run host.py in a subprocess and load the report it saved (the last argument but one)."""
    run = subprocess.run([sys.executable, str(HOST), *arguments], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return torch.load(arguments[-2], weights_only=False)


@pytest.fixture(scope="session")
def patched_report(patched_source, openrlhf_root) -> dict:
    """host.py's report on the patched 0.11.2 release."""
    source, applied = patched_source
    assert applied.returncode == 0, applied.stdout + applied.stderr
    return host_report("patched", str(source), str(openrlhf_root / "patched.pt"), str(openrlhf_root / "tb-patched"))


@pytest.fixture(scope="session")
def runtime_report(release_source, flat_release_source, openrlhf_root) -> dict:
    """host.py's report on the unmodified 0.11.2 and 0.10.1 releases, from a Ray actor with avspo's setup hook."""
    return host_report(
        "runtime",
        str(release_source),
        str(flat_release_source),
        str(REPO / "docs" / "using" / "openrlhf.md"),
        str(openrlhf_root / "runtime.pt"),
        str(openrlhf_root / "tb-runtime"),
    )


@pytest.fixture(scope="session")
def host():
    """host.py as a module of pytest's process, for its scenario data (it imports no OpenRLHF by itself)."""
    spec = importlib.util.spec_from_file_location("openrlhf_test_host", HOST)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
