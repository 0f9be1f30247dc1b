"""Released wheels of a host framework from PyPI, for the tests that read each supported release's source; and
stand-in distributions of another release, for the tests of the version checks.

Downloaded once per checkout into pytest's cache folder (.pytest_cache), several at a time. A test
that cannot download them is skipped with pip's reason on a developer's machine, and fails under CI
(``CI`` set), where a missing download would otherwise pass as a skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest


def download(package: str, version: str, folder: Path, wheel_tag: Sequence[str] = ()) -> Path:
    """The wheel of ``package==version`` in ``folder`` (downloaded unless already there)."""
    target = folder / f"{package}-{version}"
    found = sorted(target.glob("*.whl"))
    if not found:
        run = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", *wheel_tag,
             "--disable-pip-version-check", "--quiet", "--dest", str(target), f"{package}=={version}"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        found = sorted(target.glob("*.whl"))
        if run.returncode != 0 or not found:
            unavailable(f"cannot download {package}=={version} from the package index: {run.stderr.strip()[-500:]}")
    return found[0]


def unavailable(reason: str) -> None:
    """Skip the test for ``reason``, or fail it under CI, where every test must run."""
    if os.environ.get("CI", "").lower() in ("", "0", "false"):
        pytest.skip(reason)
    pytest.fail(f"{reason} (CI is set: a test that cannot run fails here)")


def download_all(package: str, versions: Sequence[str], folder: Path, wheel_tag: Sequence[str] = ()) -> dict[str, Path]:
    """version -> wheel for each version, four downloads at a time."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        wheels = pool.map(lambda version: download(package, version, folder, wheel_tag), versions)
        return dict(zip(versions, wheels))


def read_member(wheel: Path, suffix: str) -> str:
    """The text of the one file in ``wheel`` whose path ends with ``suffix``."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [member for member in archive.namelist() if member.endswith(suffix)]
        return archive.read(name).decode()


def distribution_metadata(folder: Path, name: str, version: str) -> Path:
    """``folder`` holding a ``name`` distribution of ``version`` (its metadata only): first on sys.path, it is the
    release importlib.metadata reports, whatever code imports."""
    dist_info = folder / f"{name}-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return folder
