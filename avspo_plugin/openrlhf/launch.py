"""``avspo openrlhf ARGS...``: OpenRLHF's ``train_ppo_ray`` with the avspo estimator, OpenRLHF unmodified.

ARGS are train_ppo_ray's own plus the avspo flags of :mod:`.args`, checked once parsed (before any Ray actor); Ray's
workers get the setup hook (:func:`.worker_setup.setup_worker`), then :func:`.preflight.check_nodes` runs.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import runpy
import sys
from collections.abc import Iterator, Mapping
from typing import Any
from unittest import mock

import ray

from ..names import ESTIMATOR, install_line
from . import preflight
from .args import LAYOUTS, add_avspo_arguments, check_avspo_args, misspelt_flag
from .versions import check_openrlhf
from .worker_setup import SETUP_HOOK, setup_worker

TRAIN_MODULE = "openrlhf.cli.train_ppo_ray"
SETUP_HOOK_FIELD = "worker_process_setup_hook"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Every argument, --help included, is train_ppo_ray's: this parser recognises no option of its own.
    parser.prefix_chars = "\0"
    parser.add_argument(
        "openrlhf_args", nargs=argparse.REMAINDER, metavar="ARGS",
        help="train_ppo_ray's arguments with --algo.advantage.estimator avspo and --algo.advantage.avspo.<key> "
        "options; 'avspo openrlhf --help' lists them all",
    )


def run(args: argparse.Namespace) -> int:
    """Run train_ppo_ray with ``args.openrlhf_args`` and the avspo estimator; a missing or unsupported OpenRLHF raises
    before anything runs (the console script prints it in one line)."""
    try:
        installed = importlib.util.find_spec("openrlhf") is not None
    except ModuleNotFoundError:  # a finder that refuses it
        installed = False
    if not installed:
        if args.openrlhf_args in (["--help"], ["-h"]):  # train_ppo_ray's help needs OpenRLHF: say what is missing
            print("usage: avspo openrlhf ARGS\n\nRun OpenRLHF's train_ppo_ray with the avspo estimator; ARGS are "
                  "train_ppo_ray's own, with --algo.advantage.estimator avspo and --algo.advantage.avspo.<key> "
                  f"options (docs/using/openrlhf.md). This command needs the 'openrlhf' extra: "
                  f"{install_line('openrlhf')} (OpenRLHF is not installed here).")
            return 0
        raise ModuleNotFoundError(
            "OpenRLHF is not installed in this environment; install it with its GPU requirements (deepspeed, "
            "flash-attn, vllm) as docs/using/openrlhf.md does", name="openrlhf",
        )
    check_openrlhf()
    setup_worker()
    argv = [TRAIN_MODULE, *args.openrlhf_args]
    with mock.patch.object(sys, "argv", argv), avspo_argument_parser(), ray_init_with_setup_hook():
        runpy.run_module(TRAIN_MODULE, run_name="__main__", alter_sys=True)
    return 0


@contextlib.contextmanager
def avspo_argument_parser() -> Iterator[None]:
    """While open, the parser that declares OpenRLHF's estimator flag gets avspo among its choices and the avspo flags
    after it, and checks them once parsed. The methods are patched, not the class replaced: argparse's own
    ``__init__`` names the class, so a substitute class would recurse into itself."""
    cls = argparse.ArgumentParser
    original_add, original_parse = cls.add_argument, cls.parse_known_args

    def add_argument(self: argparse.ArgumentParser, *names: Any, **kwargs: Any) -> argparse.Action:
        layout = next((layout for layout in LAYOUTS if layout.flag(layout.estimator) in names), None)
        if layout is None:
            return original_add(self, *names, **kwargs)
        if "choices" in kwargs:
            kwargs["choices"] = [*kwargs["choices"], ESTIMATOR]
        action = original_add(self, *names, **kwargs)
        self._avspo_layout = layout
        add_avspo_arguments(self, layout)
        return action

    def parse_known_args(
        self: argparse.ArgumentParser, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        namespace, extras = original_parse(self, args, namespace)
        layout = getattr(self, "_avspo_layout", None)
        if layout is not None:
            # A misspelt avspo flag is left over here (parse_args would call it unrecognised, naming nothing else).
            for flag in extras:
                meant = misspelt_flag(flag, layout)
                if meant is not None:
                    self.error(f"{flag.split('=', 1)[0]} is not an option: did you mean {meant}? (the avspo options "
                               f"are {layout.flag(layout.avspo_prefix)}<key>, docs/using/openrlhf.md)")
            try:
                check_avspo_args(namespace)
            except ValueError as err:
                self.error(str(err))
        return namespace, extras

    with (mock.patch.object(cls, "add_argument", add_argument),
          mock.patch.object(cls, "parse_known_args", parse_known_args)):
        yield


def with_setup_hook(runtime_env: Mapping[str, Any] | None) -> dict[str, Any]:
    """``runtime_env`` plus the avspo worker setup hook; refuses to replace another hook."""
    env = dict(runtime_env or {})
    existing = env.get(SETUP_HOOK_FIELD)
    if existing is not None and existing != SETUP_HOOK:
        raise ValueError(
            f"ray.init already has {SETUP_HOOK_FIELD}={existing!r}; the avspo runtime route needs its own "
            f"({SETUP_HOOK}). Apply patches/openrlhf-0.11.2-avspo.patch instead, or call both from one hook."
        )
    return {**env, SETUP_HOOK_FIELD: SETUP_HOOK}


def ray_init_with_setup_hook() -> contextlib.AbstractContextManager:
    """While open, ``ray.init`` puts the setup hook into its runtime_env and, once Ray is up, runs the preflight."""
    original = ray.init

    @functools.wraps(original)
    def init(*args: Any, **kwargs: Any) -> Any:
        context = original(*args, **{**kwargs, "runtime_env": with_setup_hook(kwargs.get("runtime_env"))})
        preflight.check_nodes()
        return context

    return mock.patch.object(ray, "init", init)
