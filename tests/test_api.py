"""docs/using/api.md: every name it lists imports from the module it names, and the top level's __all__ is its first table."""

import importlib
import re
from pathlib import Path

import avspo_plugin

API = (Path(__file__).resolve().parents[1] / "docs" / "using" / "api.md").read_text()


def listed_names() -> dict[str, list[str]]:
    """{module: names} from the page's tables, by the module in each section's heading."""
    listed: dict[str, list[str]] = {}
    for section in re.split(r"^## ", API, flags=re.M)[1:]:
        module = re.search(r"\(`(avspo_plugin[\w.]*)`\)", section.splitlines()[0])
        if module is None:
            continue
        rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
        listed[module.group(1)] = [name for row in rows for name in re.findall(r"`(\w+)(?:\(\))?`", row)]
    return listed


def test_every_listed_name_imports():
    listed = listed_names()
    assert set(listed) == {"avspo_plugin", "avspo_plugin.verl", "avspo_plugin.trl", "avspo_plugin.openrlhf"}
    for module_name, names in listed.items():
        module = importlib.import_module(module_name)
        missing = [name for name in names if not hasattr(module, name)]
        assert not missing, f"docs/using/api.md lists {missing} under {module_name}, which has no such name"


def test_top_level_all_is_the_documented_list():
    assert sorted(listed_names()["avspo_plugin"]) == sorted(avspo_plugin.__all__)
