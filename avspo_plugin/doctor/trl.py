"""``avspo doctor --host trl``: is TRL installed, is its release supported, does AVSPOGRPOTrainer apply to it?

AVSPOGRPOTrainer overrides private GRPOTrainer methods; the doctor checks the release against
:data:`~avspo_plugin.trl.versions.TRL`, loads the adapter (which checks it again), and compares each
method the adapter overrides with GRPOTrainer's own: same parameters. Exit codes: see
:mod:`avspo_plugin.doctor.findings`.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import traceback

from .findings import APPLIES, DOES_NOT_APPLY, line, release_finding, versions_line
from ..trl.versions import TRL, installed_trl

DISTRIBUTIONS = ("avspo-plugin", "trl", "transformers", "accelerate", "torch")


def overridden_methods() -> dict[str, tuple[list[str], list[str]]]:
    """Per GRPOTrainer method that AVSPOGRPOTrainer overrides: (GRPOTrainer's parameters, the override's)."""
    from trl import GRPOTrainer

    from ..trl.trainer import AVSPOGRPOTrainer

    found = {}
    for name, override in vars(AVSPOGRPOTrainer).items():
        if name.startswith("__") or not callable(override) or not hasattr(GRPOTrainer, name):
            continue
        parent = list(inspect.signature(getattr(GRPOTrainer, name)).parameters)
        found[name] = (parent, list(inspect.signature(override).parameters))
    return found


def run(args: argparse.Namespace) -> int:
    print("avspo doctor --host trl")
    print(f"  versions: {versions_line(DISTRIBUTIONS)}, python {sys.version.split()[0]} ({sys.executable})")
    decided = release_finding(TRL, installed_trl(), "pip install 'avspo-plugin[trl]'")
    if decided is not None:
        return decided
    try:
        methods = overridden_methods()
    except Exception:  # noqa: BLE001 - the doctor shows why the adapter does not load
        line("FAIL", "avspo_plugin.trl does not load:\n" + traceback.format_exc())
        return DOES_NOT_APPLY
    differing = {name: pair for name, pair in methods.items() if pair[0] != pair[1]}
    for name, (parent, override) in differing.items():
        line("FAIL", f"GRPOTrainer.{name}({', '.join(parent)}) differs from the override ({', '.join(override)})")
    if differing:
        return DOES_NOT_APPLY
    line("ok", f"AVSPOGRPOTrainer applies: it overrides GRPOTrainer.{', GRPOTrainer.'.join(methods)} with their parameters")
    line("ok", "use AVSPOGRPOConfig / AVSPOGRPOTrainer in place of GRPOConfig / GRPOTrainer ('trl grpo' builds the plain trainer)")
    return APPLIES
