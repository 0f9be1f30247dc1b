"""Which releases of a host framework an adapter supports, and the installed one; no host import.

The TRL and OpenRLHF adapters rely on private methods or re-use the inside of host methods, so each
declares the releases whose code was checked (see docs/trl.md, docs/openrlhf.md) and is loud outside them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata


class UnsupportedHostVersion(RuntimeError):
    """The installed release of a host framework is outside the releases an adapter supports."""


def release(version: str) -> tuple[int, int, int]:
    """(major, minor, micro) of a version string: '0.10.1.post2' -> (0, 10, 1), '1.16.0.dev0' -> (1, 16, 0)."""
    match = re.match(r"\d+(\.\d+)*", version.strip())
    if match is None:
        raise ValueError(f"{version!r} is not a release version")
    parts = [int(part) for part in match.group(0).split(".")][:3]
    return tuple(parts + [0] * (3 - len(parts)))  # type: ignore[return-value]


@dataclass(frozen=True)
class SupportedReleases:
    """Releases ``oldest`` to ``newest`` (inclusive, post releases included) of distribution ``name``."""

    name: str
    distribution: str
    oldest: str
    newest: str

    def __str__(self) -> str:
        return f"{self.name} {self.oldest} to {self.newest}"

    def supports(self, version: str) -> bool:
        return release(self.oldest) <= release(version) <= release(self.newest)

    def installed(self) -> str | None:
        """The installed distribution's version, None when its metadata is not found."""
        try:
            return metadata.version(self.distribution)
        except metadata.PackageNotFoundError:
            return None

    def require(self, version: str | None, adapter: str) -> None:
        """Raise :class:`UnsupportedHostVersion` unless ``version`` is supported (None: not installed)."""
        if version is None:
            raise UnsupportedHostVersion(
                f"{adapter} needs {self}; no installed {self.distribution} distribution was found"
            )
        if not self.supports(version):
            raise UnsupportedHostVersion(
                f"{adapter} supports {self}; the installed {self.name} is {version}. It relies on code inside "
                f"{self.name} that was checked only in those releases: install one of them "
                f"(pip install '{self.distribution}>={self.oldest},<={self.newest}')"
            )
