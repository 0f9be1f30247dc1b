"""What the host checks of ``avspo doctor`` share: findings, versions, the release check, and the exit codes of every
host: :data:`READY` (0) the adapter applies to what is installed, :data:`NOT_READY` (1) it does not."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping

from avspo_plugin.host_versions import SupportedReleases, installed_version

READY, NOT_READY = 0, 1
PYTHON = f"{sys.version.split()[0]} ({sys.executable})"


def line(level: str, text: str, indent: int = 2) -> bool:
    """Print one finding; level is ok, warn or FAIL. True when it is a failure."""
    print(f"{' ' * indent}[{level}] {text}")
    return level == "FAIL"


def installed_versions(distributions: Iterable[str]) -> dict[str, str | None]:
    return {name: installed_version(name) for name in distributions}


def versions_line(versions: Mapping[str, str | None], python: str = PYTHON) -> str:
    named = [f"{name} {version or 'not installed'}" for name, version in versions.items()]
    return ", ".join([*named, f"python {python}"])


def release_failed(supported: SupportedReleases, version: str | None, install_hint: str) -> bool:
    """Print the installed release against ``supported``; True when it is refused (missing or known broken)."""
    if version is None:
        return line("FAIL", f"{supported.name} is not installed in this Python environment: {install_hint}")
    if supported.known_broken(version):
        return line("FAIL", f"{supported.name} {version} is not supported: the adapter supports {supported} (releases "
                            f"before {supported.broken_below} differ in the code it relies on)")
    untested = supported.untested(version)
    return line("warn", untested) if untested else line("ok", f"{supported.name} {version} is supported ({supported})")
