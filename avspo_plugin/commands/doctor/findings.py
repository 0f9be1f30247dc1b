"""What the host checks of ``avspo doctor`` share: findings, versions, the release check, exit codes.

Exit codes of a host's doctor: 0 the adapter applies to what is installed; 1 it does not (a release
outside the supported ones, or a check failed); 2 the host framework is not installed.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import metadata

from avspo_plugin.host_versions import SupportedReleases

APPLIES, DOES_NOT_APPLY, NOT_INSTALLED = 0, 1, 2


def line(level: str, text: str, indent: int = 2) -> None:
    """One finding; level is ok, warn or FAIL."""
    print(f"{' ' * indent}[{level}] {text}")


def installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def versions_line(distributions: Iterable[str]) -> str:
    return ", ".join(f"{name} {installed_version(name) or 'not installed'}" for name in distributions)


def release_finding(supported: SupportedReleases, version: str | None, install_hint: str) -> int | None:
    """Print the installed release against ``supported``; the exit code when that already decides, else None."""
    if version is None:
        line("FAIL", f"{supported.name} is not installed in this Python environment: {install_hint}")
        return NOT_INSTALLED
    if supported.known_broken(version):
        line("FAIL", f"{supported.name} {version} is not supported: the adapter supports {supported} (releases before "
                     f"{supported.broken_below} differ in the code it relies on)")
        return DOES_NOT_APPLY
    untested = supported.untested(version)
    if untested is not None:
        line("warn", untested)
        return None
    line("ok", f"{supported.name} {version} is supported ({supported})")
    return None
