"""Every host the doctor checks declares its side of the host contract and passes the test kit, and
docs/method/hosts.md states what the declarations hold and names files that exist."""

import ast
import importlib
import re
from pathlib import Path

import pytest

from avspo_plugin.commands.doctor import HOSTS
from avspo_plugin.core.host import Host

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "method" / "hosts.md").read_text()


def declared(name: str) -> Host:
    return importlib.import_module(f"avspo_plugin.{name}").HOST


def section(title: str) -> str:
    return PAGE.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("name", HOSTS)
def test_each_host_declares_its_side_and_subclasses_the_kit(name):
    host = declared(name)
    assert isinstance(host, Host) and host.name == name
    assert host.log.name.split(".")[:2] == ["avspo_plugin", name], "the adapter's logger"
    kit_file = ROOT / "tests" / name / "test_host_contract.py"
    assert kit_file.is_file(), f"{name} has no {kit_file.relative_to(ROOT)}"
    bases = [ast.unparse(base) for node in ast.walk(ast.parse(kit_file.read_text()))
             if isinstance(node, ast.ClassDef) for base in node.bases]  # fmt: skip
    assert "HostContract" in bases, f"no class of {kit_file.relative_to(ROOT)} subclasses HostContract"


def test_the_table_of_hosts_is_what_they_declare():
    rows = {}
    for line in section("The three hosts").splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if line.startswith("| `"):
            rows[cells[0].strip("`")] = cells[1:5]
    assert set(rows) == set(HOSTS)
    for name, cells in rows.items():
        host = declared(name)
        folder = "none" if host.checkpoint_folder is None else f"`{host.checkpoint_folder}`"
        assert cells == [f"`{host.log.name}`", f"`{host.entropy_metric}`", folder, f"`{host.state_name}`"], name


def test_the_checklist_names_files_that_exist():
    paths = re.findall(r"`([\w./<>-]+\.(?:py|md|cfg|txt)|Makefile)`", section("A new host's checklist"))
    assert len(paths) > 20
    for path in paths:
        candidates = [path.replace("<host>", name) for name in HOSTS] if "<host>" in path else [path]
        assert any((ROOT / candidate).is_file() for candidate in candidates), f"hosts.md's checklist names {path}"
