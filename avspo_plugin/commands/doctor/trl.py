"""``avspo doctor --host trl``: is TRL installed, is its release supported, does AVSPOGRPOTrainer apply to it
(each GRPOTrainer method it overrides takes the same parameters)?"""

from __future__ import annotations

import argparse
import inspect
import traceback

from avspo_plugin.names import install_line
from avspo_plugin.trl.versions import TRL, installed_trl

from .findings import NOT_READY, READY, installed_versions, line, release_failed, versions_line

DISTRIBUTIONS = ("avspo-plugin", "trl", "transformers", "accelerate", "torch")


def overridden_methods() -> dict[str, tuple[list[str], list[str]]]:
    """Per GRPOTrainer method that AVSPOGRPOTrainer overrides: (GRPOTrainer's parameters, the override's)."""
    # Here, after the release check: the adapter refuses to import with an unsupported TRL.
    from trl import GRPOTrainer

    from avspo_plugin.trl.trainer import AVSPOGRPOTrainer

    return {name: (_parameters(getattr(GRPOTrainer, name)), _parameters(override))
            for name, override in vars(AVSPOGRPOTrainer).items()
            if not name.startswith("__") and callable(override) and hasattr(GRPOTrainer, name)}


def _parameters(function) -> list[str]:
    return [str(parameter).split(":")[0].split("=")[0] for parameter in inspect.signature(function).parameters.values()]


def takes_the_parents_parameters(parent: list[str], override: list[str]) -> bool:
    """The same parameters, or the first of the parent's then ``*args, **kwargs`` handed on (a public method
    such as ``train``, whose later parameters the override passes through whatever they are)."""
    *named, rest_positional, rest_keyword = override if len(override) >= 2 else ["", "", ""]
    passes_on = rest_positional.startswith("*") and not rest_positional.startswith("**") and rest_keyword.startswith("**")
    return override == parent or (passes_on and parent[: len(named)] == named)


def run(args: argparse.Namespace) -> int:
    print("avspo doctor --host trl")
    print(f"  versions: {versions_line(installed_versions(DISTRIBUTIONS))}")
    if release_failed(TRL, installed_trl(), install_line("trl")):
        return NOT_READY
    try:
        methods = overridden_methods()
    except Exception:
        line("FAIL", "avspo_plugin.trl does not load:\n" + traceback.format_exc())
        return NOT_READY
    differing = {name: pair for name, pair in methods.items() if not takes_the_parents_parameters(*pair)}
    for name, (parent, override) in differing.items():
        line("FAIL", f"GRPOTrainer.{name}({', '.join(parent)}) differs from the override ({', '.join(override)})")
    if differing:
        return NOT_READY
    line("ok", f"AVSPOGRPOTrainer applies: it overrides GRPOTrainer.{', GRPOTrainer.'.join(methods)} with their parameters")
    line("ok", "use AVSPOGRPOConfig / AVSPOGRPOTrainer in place of GRPOConfig / GRPOTrainer ('trl grpo' builds the plain trainer)")
    return READY
