"""The releases of each host framework an adapter was tested with (VERL, TRL, OPENRLHF; no host imported), and one
policy for all: older than ``broken_below`` is refused; outside the tested range otherwise, a warning; inside, silence.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from importlib import metadata


class UnsupportedHostVersion(RuntimeError):
    """The installed release of a host framework is outside the releases an adapter supports."""


def installed_version(distribution: str) -> str | None:
    """The installed distribution's version, None when its metadata is not found."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def release(version: str) -> tuple[int, int, int]:
    """(major, minor, micro) of a version string: '0.10.1.post2' -> (0, 10, 1), '1.16.0.dev0' -> (1, 16, 0)."""
    match = re.match(r"\d+(\.\d+)*", version.strip())
    if match is None:
        raise ValueError(f"{version!r} is not a release version")
    parts = [int(part) for part in match.group(0).split(".")][:3]
    return tuple(parts + [0] * (3 - len(parts)))  # type: ignore[return-value]


@dataclass(frozen=True)
class SupportedReleases:
    """Releases ``oldest`` to ``newest`` (inclusive, post releases included) of distribution ``name``: the tested range.
    Older than ``broken_below`` is refused (None: warned about, like newer); ``tested``: the releases checked one by
    one, named in messages; ``untested_note``: what is and is not known of a release outside the range."""

    name: str
    distribution: str
    oldest: str
    newest: str
    broken_below: str | None = None
    tested: tuple[str, ...] = ()
    untested_note: str = "the adapter's checks of the code it relies on pass, but whether it behaves as in the " \
                         "tested releases is untested"

    def __str__(self) -> str:
        return f"{self.name} {self.oldest} to {self.newest}"

    def tested_range(self) -> str:
        return f"{self.oldest} to {self.newest}" + (f" ({', '.join(self.tested)})" if self.tested else "")

    def supports(self, version: str) -> bool:
        return release(self.oldest) <= release(version) <= release(self.newest)

    def known_broken(self, version: str) -> bool:
        return self.broken_below is not None and release(version) < release(self.broken_below)

    def untested(self, version: str) -> str | None:
        """The warning for a release outside the tested range that is not known broken (None inside the range)."""
        if self.supports(version):
            return None
        side = "newer than" if release(version) > release(self.newest) else "older than"
        return (f"{self.name} {version} is {side} the tested range ({self.name} {self.tested_range()}): "
                f"{self.untested_note}; report any difference you notice")

    def installed(self) -> str | None:
        return installed_version(self.distribution)

    def require(self, version: str | None, adapter: str) -> str | None:
        """Raise :class:`UnsupportedHostVersion` when ``version`` is None (not installed) or known broken; else
        the warning for an untested release (None inside the tested range), for the caller to log."""
        if version is None:
            raise UnsupportedHostVersion(f"{adapter} needs {self}; no installed {self.distribution} distribution was "
                                         "found")
        if self.known_broken(version):
            raise UnsupportedHostVersion(
                f"{adapter} supports {self}; the installed {self.name} is {version}. Releases before "
                f"{self.broken_below} differ in the code it relies on: install one of the tested releases "
                f"(pip install '{self.distribution}>={self.oldest},<={self.newest}')"
            )
        return self.untested(version)

    def check(self, version: str | None, adapter: str, log: logging.Logger) -> str | None:
        """:meth:`require`, with the warning for an untested release logged to ``log``; returns ``version``."""
        untested = self.require(version, adapter)
        if untested is not None:
            log.warning("%s: %s", adapter, untested)
        return version


# verl 0.5's RayPPOTrainer.__init__ raises NotImplementedError for an estimator it does not know.
VERL = SupportedReleases(
    name="verl", distribution="verl", oldest="0.6.1", newest="0.9.1", broken_below="0.6.0",
    tested=("0.6.1", "0.7.1", "0.8.0", "0.9.1"),
    untested_note="the plugin's hooks are in place, but whether they still see everything they need is untested",
)
# GRPOTrainer's private methods the adapter overrides: 1.5 and older handle unscorable completions otherwise.
TRL = SupportedReleases(name="TRL", distribution="trl", oldest="1.6.0", newest="1.16.0", broken_below="1.6.0")
# The runtime route's wrapped methods: 0.9.8 and older compute advantages otherwise.
OPENRLHF = SupportedReleases(name="OpenRLHF", distribution="openrlhf", oldest="0.9.9", newest="0.11.2",
                             broken_below="0.9.9")
