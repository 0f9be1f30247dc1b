"""The house: the runtime (what a training process imports) apart from the commands around it, the package apart
from the checkout's lab, renderer and recipes, and no import circle.

Runtime: every module of ``avspo_plugin`` outside TOOLS (config, core, the host adapters, the math reward).
Tools: ``avspo_plugin.commands`` (the console script, analyze, doctor) and ``avspo_plugin.verl_cpu`` (the CPU verl
harness). Tools import the runtime, never the reverse; nothing of the package imports the checkout's folders.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from fresh_interpreter import PACKAGE, TOOLS, module_name

ROOT = PACKAGE.parent
# Folders of the checkout that the package must never import: the research lab, the docs renderer, the recipes' data.
CHECKOUT_ONLY = ("lab", "renderer", "recipes")


def imported_names(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved), at any depth."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    return names_imported_by(path.read_text(), package)


def names_imported_by(source: str, package: str) -> set[str]:
    """Absolute names that ``source``, a module of ``package``, imports (TYPE_CHECKING blocks included)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_no_runtime_module_imports_a_tool():
    offenders = {
        module_name(path): sorted(name for name in imported_names(path) if name.startswith(TOOLS))
        for path in PACKAGE.rglob("*.py")
        if not module_name(path).startswith(TOOLS)
    }
    assert {module: names for module, names in offenders.items() if names} == {}


def test_no_module_of_the_package_imports_the_checkouts_folders():
    offenders = {
        module_name(path): sorted(name for name in imported_names(path) if name.split(".")[0] in CHECKOUT_ONLY)
        for path in PACKAGE.rglob("*.py")
    }
    assert {module: names for module, names in offenders.items() if names} == {}


# What a module outside avspo_plugin.commands may import of it: the console script's runner, with which the
# checkout's programs (python -m lab, the recipes' data tools) run as a command does.
COMMANDS_OFFERED = {"avspo_plugin.commands.main.run_command"}


def imports_of_command_internals(names: set[str]) -> list[str]:
    """The names of ``names`` inside avspo_plugin.commands, but for what it offers (and the modules it comes from)."""
    return sorted(
        name for name in names
        if (name == "avspo_plugin.commands" or name.startswith("avspo_plugin.commands."))
        and not any(offered == name or offered.startswith(f"{name}.") for offered in COMMANDS_OFFERED)
    )


def test_no_module_outside_the_commands_imports_a_commands_internals():
    """What the lab, the renderer or another part of the package needs of a command lives under a name of its own
    (avspo_plugin.evidence, avspo_plugin.argument_types)."""
    offenders = {
        module_name(path): imports_of_command_internals(imported_names(path))
        for folder in (PACKAGE, ROOT / "lab", ROOT / "renderer", ROOT / "recipes")
        for path in folder.rglob("*.py")
        if not module_name(path).startswith("avspo_plugin.commands")
    }
    assert {module: names for module, names in offenders.items() if names} == {}


def test_the_command_internals_check_lets_only_the_runner_through():
    runner = names_imported_by("from avspo_plugin.commands.main import run_command\n", "lab")
    assert imports_of_command_internals(runner) == []
    internal = names_imported_by("from avspo_plugin.commands.analyze import advice\n", "lab")
    assert imports_of_command_internals(internal) == ["avspo_plugin.commands.analyze", "avspo_plugin.commands.analyze.advice"]


def test_importing_the_whole_runtime_loads_no_tool(fresh_verl_process):
    # The last step of a fresh process (tests/fresh_interpreter.py, FRESH_VERL_PROCESS): every runtime module imported.
    assert fresh_verl_process["tools_loaded"] == []


def test_the_layout_check_resolves_relative_imports():
    # A runtime module that reaches a tool with dots, not by name, is caught all the same.
    assert "avspo_plugin.commands.analyze.run_logs" in names_imported_by("from ..commands.analyze import run_logs\n",
                                                                         "avspo_plugin.core")
    assert "avspo_plugin.commands" in names_imported_by("from .. import commands\n", "avspo_plugin.core")


def import_graph() -> dict[str, set[str]]:
    """{module: the package's modules it imports} over every module of avspo_plugin (a name imported from a module
    that is not itself a module counts as that module)."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        graph[name] = {
            imported if imported in modules else imported.rpartition(".")[0]
            for imported in imported_names(path)
        } & modules.keys() - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_in_the_package():
    """Not even through TYPE_CHECKING imports or a package's __init__ (a package importing its own modules and a module
    importing its package's __init__ is a circle too)."""
    graph = import_graph()
    # A package's __init__ re-exporting its modules is how a package presents itself: the edge from a module up to
    # its own package is the only one left out.
    assert circles({m: {t for t in targets if not m.startswith(f"{t}.")} for m, targets in graph.items()}) == []


def test_the_circle_check_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


@pytest.mark.e2e
def test_the_built_wheel_holds_the_package_and_none_of_the_lab(tmp_path):
    """The wheel pip builds from this checkout: the runtime, the commands and the packaged data; no study, sweep or
    tuning module, nothing of lab/, renderer/ or recipes/."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("avspo_plugin-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    files = [name for name in names if not name.startswith("avspo_plugin-")]  # the .dist-info folder aside
    assert files and all(name.startswith("avspo_plugin/") for name in files)
    modules = [name for name in files if name.endswith(".py")]
    assert not [name for name in modules if any(word in name for word in ("study", "sweep", "tuning", "sharpening"))]
    for expected in ("avspo_plugin/verl/estimator.py", "avspo_plugin/commands/main.py",
                     "avspo_plugin/default_evidence.json",
                     "avspo_plugin/verl/config/avspo_trainer.yaml"):
        assert expected in files


# Functions that import: each because the import must wait (the module is imported where that package may be
# missing, or the import itself is what is checked). Any other import belongs at the top of its module.
IMPORTS_IN_FUNCTIONS = {
    # vLLM needs a GPU and is not an extra: only generation itself asks for it.
    "recipes.math_data.generation": {"generate_chat"},
    # Only the hub needs `datasets`; a run from local copies neither waits for it nor needs it installed.
    "recipes.math_data.sources": {"read_hub"},
    # `import avspo_plugin.trl` works without TRL; its classes load TRL when first used.
    "avspo_plugin.trl": {"__getattr__"},
    # The doctor runs where a host is missing or broken; importing the verl adapter registers the estimator the
    # verl checks look for, and `--host trl` runs without Ray.
    "avspo_plugin.commands.doctor.verl": {"probe", "probe_in_ray_actor", "compose_config", "config_findings",
                                       "_user_runtime_env", "verl_validation_findings"},
    "avspo_plugin.commands.doctor.trl": {"overridden_methods"},
    "avspo_plugin.commands.doctor.openrlhf": {"preflight_failed"},
    "avspo_plugin.commands.doctor.ray_cluster": {"connect_ray"},
    # The console script loads a subcommand's module only when it runs (`avspo --help` loads no host), and the
    # doctor the checks of the one host asked for.
    "avspo_plugin.commands.main": {"build_parser", "main"},
    "avspo_plugin.commands.doctor": {"run"},
    # A hook's verl module is imported when the hook is placed or its status asked, not when the registry loads.
    "avspo_plugin.verl.hooks": {"place", "hook_status"},
    # TRL may be missing where verl runs: the fix and the version check import it only to look.
    "avspo_plugin.verl.model_build_fix": {"trl_value_head_available", "trl_patch_status"},
    "avspo_plugin.trl.versions": {"installed_trl"},
}


def is_import(node: ast.AST) -> bool:
    """An import statement, or a call of ``importlib.import_module`` (which imports as a statement does)."""
    return isinstance(node, ast.Import | ast.ImportFrom) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module")


def functions_that_import(source: str) -> set[str]:
    """Names of the functions of ``source`` whose bodies import."""
    return {
        node.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(is_import(inner) for inner in ast.walk(node))
    }


def test_imports_sit_at_the_top_of_their_module():
    found = {
        module_name(path): functions
        for folder in (PACKAGE, ROOT / "lab", ROOT / "renderer", ROOT / "recipes" / "math_data")
        for path in folder.rglob("*.py")
        if (functions := functions_that_import(path.read_text()))
    }
    assert found == IMPORTS_IN_FUNCTIONS


def test_the_import_check_sees_imports_in_nested_functions_and_import_module():
    source = "def outer():\n    def inner():\n        import json\n    return inner\n"
    assert functions_that_import(source) == {"outer", "inner"}
    source = "import importlib\ndef lazy():\n    return importlib.import_module('json')\ndef plain():\n    return 1\n"
    assert functions_that_import(source) == {"lazy"}
