"""``avspo doctor``: does the avspo adapter apply to the framework installed here? One module per host.

``--host verl`` (the default, :mod:`.verl`): is the estimator registered in this process and in a
fresh Ray actor, and is the run's config valid. ``--host trl`` (:mod:`.trl`) and ``--host openrlhf``
(:mod:`.openrlhf`): is the release supported and does the adapter apply; their exit codes are in
:mod:`.findings`. A host's checks live here, not in its adapter's package, because they must run
before (or without) importing the adapter: importing :mod:`avspo_plugin.verl` registers the
estimator, the very thing the verl checks look for.
"""

from __future__ import annotations

import argparse
import importlib

from avspo_plugin.tools.doctor import verl

HOSTS = ("verl", "trl", "openrlhf")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", choices=HOSTS, default="verl",
        help="the framework to check (default: verl). trl and openrlhf: installed versions, supported or not, "
        "whether the adapter applies; exit 0 applies, 1 does not, 2 not installed (docs/using/trl.md, docs/using/openrlhf.md)",
    )
    verl.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return importlib.import_module(f"{__name__}.{args.host}").run(args)
