"""The runtime (what a training process imports) stays apart from the tools around it.

Runtime: every module of ``avspo_plugin`` outside ``avspo_plugin.tools`` (config, core, the host
adapters, the math reward). Tools: ``avspo_plugin.tools`` (CLI, lab, analyze, doctor, the CPU verl
harness, math data and evaluation, docs generators). Tools import the runtime, never the reverse.
"""

from __future__ import annotations

import ast
from pathlib import Path

from fresh_interpreter import PACKAGE, TOOLS, module_name


def imported_names(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved), at any depth."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    return names_imported_by(path.read_text(), package)


def names_imported_by(source: str, package: str) -> set[str]:
    """Absolute names that ``source``, a module of ``package``, imports."""
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


def test_importing_the_whole_runtime_loads_no_tool(fresh_verl_process):
    # The last step of a fresh process (tests/fresh_interpreter.py, FRESH_VERL_PROCESS): every runtime module imported.
    assert fresh_verl_process["tools_loaded"] == []


def test_the_layout_check_resolves_relative_imports():
    # A runtime module that reaches a tool with dots, not by name, is caught all the same.
    assert "avspo_plugin.tools.lab.task" in names_imported_by("from ..tools.lab import task\n", "avspo_plugin.core")
    assert "avspo_plugin.tools" in names_imported_by("from .. import tools\n", "avspo_plugin.core")


# Functions that import: each because the import must wait (the module is imported where that package may be
# missing, or the import itself is what is checked). Any other import belongs at the top of its module.
IMPORTS_IN_FUNCTIONS = {
    # vLLM needs a GPU and is not an extra: only generation itself asks for it.
    "avspo_plugin.tools.math_data.generation": {"generate_chat"},
    # Only the hub needs `datasets`; a run from local copies neither waits for it nor needs it installed.
    "avspo_plugin.tools.math_data.sources": {"read_hub"},
    # `import avspo_plugin.trl` works without TRL; its classes load TRL when first used.
    "avspo_plugin.trl": {"__getattr__"},
    # The doctor runs where a host is missing or broken; importing the verl adapter registers the estimator the
    # verl checks look for, and `--host trl` runs without Ray.
    "avspo_plugin.tools.doctor.verl": {"probe", "probe_in_ray_actor", "compose_config", "config_findings",
                                       "_user_runtime_env"},
    "avspo_plugin.tools.doctor.trl": {"overridden_methods"},
    "avspo_plugin.tools.doctor.openrlhf": {"preflight_finding"},
    "avspo_plugin.tools.doctor.ray_cluster": {"connect_ray"},
}


def functions_that_import(source: str) -> set[str]:
    """Names of the functions of ``source`` whose bodies hold an import statement."""
    return {
        node.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and any(isinstance(inner, ast.Import | ast.ImportFrom) for inner in ast.walk(node))
    }


def test_imports_sit_at_the_top_of_their_module():
    found = {
        module_name(path): functions
        for path in PACKAGE.rglob("*.py")
        if (functions := functions_that_import(path.read_text()))
    }
    assert found == IMPORTS_IN_FUNCTIONS


def test_the_import_check_sees_imports_in_nested_functions():
    source = "def outer():\n    def inner():\n        import json\n    return inner\n"
    assert functions_that_import(source) == {"outer", "inner"}
