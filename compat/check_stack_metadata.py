"""Checks that a GPU constraints file and its install line hang together, by the metadata of every release they name.

    python compat/check_stack_metadata.py constraints-vllm.txt

Run by compat/check_gpu_stack.sh in the stack's venv (verl, transformers and the package installed there under the
same file, torch the CPU build). What the file pins and its install line (the ``# install:`` line) names, with
their extras, are each checked: the requirements of every one that applies to this platform and Python, read from
the installed release when it is installed at the pinned version, else from PyPI (the wheel's PEP 658 ``.metadata``
file, or the wheel itself when it is small; never a CUDA wheel). A requirement the file's pin breaks is a conflict
(the line cannot install; exit status 1); one the version installed here breaks is listed as resolving otherwise
on a GPU machine (pip picks another release there than the one the CPU check ran with); one on a package neither
pinned nor installed here is counted, not checked. Prints one JSON line.
"""

from __future__ import annotations

import importlib.metadata as metadata
import io
import json
import shlex
import sys
import urllib.error
import urllib.request
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.tags import sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

INSTALL_PREFIX = "# install: pip install "
PACKAGE = "avspo-plugin"  # what the install line's "." installs
SIMPLE_INDEX = "https://pypi.org/simple/{name}/"
JSON_INDEX = "application/vnd.pypi.simple.v1+json"
TIMEOUT_S = 120
# A wheel whose PEP 658 file PyPI lacks is read whole when it is this small (torchvision, torchaudio, sglang: a few MB);
# the CUDA wheels (torch, vLLM) carry the file.
WHEEL_READ_MAX_BYTES = 64 * 2**20


def read_constraints(path: Path) -> tuple[dict[str, Version], dict[str, set[str]]]:
    """({name: pinned version}, {name: extras} of what the install line names) of a GPU constraints file."""
    pins, named = {}, {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(INSTALL_PREFIX):
            for argument in shlex.split(line.removeprefix(INSTALL_PREFIX)):
                if argument in ("-c", path.name):
                    continue
                requirement = Requirement(argument.replace(".[", f"{PACKAGE}[", 1) if argument.startswith(".") else argument)
                named[canonicalize_name(requirement.name)] = set(requirement.extras)
        line = line.split("#")[0].strip()
        if line:
            requirement = Requirement(line)
            (specifier,) = requirement.specifier
            if specifier.operator != "==":
                raise ValueError(f"{path}: {line!r} is not a pin (name==version)")
            pins[canonicalize_name(requirement.name)] = Version(specifier.version)
    if not named:
        raise ValueError(f"{path} has no line starting {INSTALL_PREFIX!r}")
    return pins, named


def installed_version(name: str) -> Version | None:
    try:
        return Version(metadata.version(name))
    except metadata.PackageNotFoundError:
        return None


def pypi_requirements(name: str, version: Version) -> tuple[str, list[str]]:
    """(wheel file name, Requires-Dist lines) of the release's wheel that pip would pick here."""
    request = urllib.request.Request(SIMPLE_INDEX.format(name=name), headers={"Accept": JSON_INDEX})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        files = json.load(response)["files"]
    preference = {tag: rank for rank, tag in enumerate(sys_tags())}  # lower: preferred by pip here
    wheels = []
    for entry in files:
        if entry["filename"].endswith(".whl"):
            _, wheel_version, _, wheel_tags = parse_wheel_filename(entry["filename"])
            ranks = [preference[tag] for tag in wheel_tags if tag in preference]
            if wheel_version == version and ranks:
                wheels.append((min(ranks), entry))
    if not wheels:
        raise LookupError(f"{name} {version} has no wheel on PyPI for this platform and Python")
    _, wheel = min(wheels, key=lambda pair: pair[0])
    try:
        with urllib.request.urlopen(wheel["url"] + ".metadata", timeout=TIMEOUT_S) as response:
            text = response.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        if error.code != 404 or wheel["size"] > WHEEL_READ_MAX_BYTES:
            raise LookupError(f"{wheel['filename']}: no PEP 658 metadata file ({error}), and the wheel is "
                              f"{wheel['size'] / 2**20:.0f} MB, over the {WHEEL_READ_MAX_BYTES // 2**20} MB read whole") from error
        text = wheel_metadata(wheel["url"])
    return wheel["filename"], Parser().parsestr(text).get_all("Requires-Dist") or []


def wheel_metadata(url: str) -> str:
    """The METADATA file inside a wheel, downloaded into memory."""
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        archive = zipfile.ZipFile(io.BytesIO(response.read()))
    (name,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA") and name.count("/") == 1]
    return archive.read(name).decode("utf-8")


def requirements_of(name: str, pins: dict[str, Version]) -> tuple[str, list[Requirement]] | None:
    """(where they were read, requirements) of the pinned release of ``name``, or of the installed one; None for a
    package the install line names unpinned that is not installed here (its release is pip's choice there)."""
    installed = installed_version(name)
    if name not in pins or installed == pins[name]:
        if installed is None:
            return None
        return f"installed {name} {installed}", [Requirement(line) for line in metadata.requires(name) or []]
    wheel, lines = pypi_requirements(name, pins[name])
    return wheel, [Requirement(line) for line in lines]


def check(path: Path) -> dict:
    pins, named = read_constraints(path)
    extras = {name: set(named.get(name, ())) for name in pins.keys() | named.keys()}
    releases = {}
    for name in sorted(extras):
        read = requirements_of(name, pins)
        if read is None:
            releases[name] = {"read_from": None, "checked": 0, "conflicts": []}
            continue
        source, requirements = read
        # An extra that names the package's own extras (verl[vllm] -> verl[verl-core]) brings theirs in too.
        wanted, grown = extras[name], True
        while grown:
            before = len(wanted)
            wanted |= {extra for requirement in requirements if canonicalize_name(requirement.name) == name
                       for extra in requirement.extras
                       if any(requirement.marker is None or requirement.marker.evaluate({"extra": e}) for e in wanted)}
            grown = len(wanted) > before
        conflicts, elsewhere, unchecked, checked = [], [], [], 0
        for requirement in requirements:
            required = canonicalize_name(requirement.name)
            if required == name or (requirement.marker is not None and
                                    not any(requirement.marker.evaluate({"extra": e}) for e in {"", *wanted})):
                continue
            if required in pins:
                checked += 1
                if not requirement.specifier.contains(pins[required], prereleases=True):
                    conflicts.append(f"{requirement} but the file pins {pins[required]}")
            elif (installed := installed_version(required)) is not None:
                checked += 1
                if not requirement.specifier.contains(installed, prereleases=True):
                    elsewhere.append(f"{requirement} ({installed} here)")
            else:
                unchecked.append(requirement.name)
        releases[name] = {"read_from": source, "extras": sorted(wanted), "checked": checked, "conflicts": conflicts,
                          "resolves_otherwise_on_gpu": elsewhere, "not_installed_here": len(set(unchecked))}
    return {"constraints": path.name, "pins": {name: str(version) for name, version in pins.items()},
            "installed_here": {name: str(installed_version(name)) for name in pins}, "releases": releases}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.exit("usage: python compat/check_stack_metadata.py CONSTRAINTS_FILE")
    report = check(Path(argv[0]))
    print(json.dumps(report))
    return 1 if any(release["conflicts"] for release in report["releases"].values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
