"""The ``avspo`` console script: one subcommand per module (``add_arguments(parser)``, ``run(args) -> int``), imported
only when that subcommand runs.

Bad input (:func:`is_expected_error`) ends a command with one line, ``avspo <command>: error: <message>``, and exit
status 2 (``--debug``: with its traceback); any other exception is a bug: its traceback, an ``internal error`` line, 1.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType

from avspo_plugin.extras import missing_extra

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "advantages": ("avspo_plugin.commands.advantages", "GRPO and AVSPO advantages side by side on drawn batches (no training)."),
    "analyze": ("avspo_plugin.commands.analyze.command", "ACR diagnostics of finished GRPO runs from their dumps and logs."),
    "doctor": ("avspo_plugin.commands.doctor", "Check that verl registers the avspo estimator here and in a Ray actor, and the run's config; --host trl|openrlhf checks those adapters."),
    "openrlhf": ("avspo_plugin.openrlhf.launch", "Run OpenRLHF's train_ppo_ray with the avspo estimator."),
    "trl-offline": ("avspo_plugin.commands.trl_offline", "Write a tiny model and dataset to run the TRL examples without the hub."),
    "verl-demo": ("avspo_plugin.verl_cpu.demo", "Train a tiny Qwen2 with stock verl main_ppo and the avspo estimator on CPU."),
}
# The extra each subcommand needs beyond the core install (setup.cfg's extras_require); absent: the core's.
EXTRAS: dict[str, str] = {"analyze": "analyze", "openrlhf": "openrlhf", "trl-offline": "trl", "verl-demo": "verl"}

# The project's errors for bad input, as (module, class): looked up only in modules already loaded (nothing imported).
INPUT_ERRORS = (
    ("avspo_plugin.config", "ConfigError"),
    ("avspo_plugin.state_files", "StateFileError"),
    ("avspo_plugin.commands.analyze.run_logs", "AnalyzeError"),
    ("recipes.math_data.sources", "DataError"),  # the recipes' data preparation (run_command), from a checkout
    ("avspo_plugin.host_versions", "UnsupportedHostVersion"),
    ("avspo_plugin.verl.launch_guards", "HookError"),
    ("avspo_plugin.verl.estimator", "RegistrationError"),
)


def is_expected_error(err: BaseException) -> bool:
    """Whether ``err`` is bad input or a bad environment rather than a bug: :data:`INPUT_ERRORS`, an OS error, or a
    missing package other than avspo_plugin's own modules."""
    if isinstance(err, OSError):
        return True
    if isinstance(err, ModuleNotFoundError):
        return (err.name or "").split(".")[0] != "avspo_plugin"
    classes = (getattr(sys.modules.get(module), name, None) for module, name in INPUT_ERRORS)
    return any(cls is not None and isinstance(err, cls) for cls in classes)


def build_parser(argv: Sequence[str]) -> tuple[argparse.ArgumentParser, str | None]:
    """The parser, with the chosen subcommand's arguments (imported only for it), and the missing-extra message of
    that subcommand, also said in its help."""
    parser = argparse.ArgumentParser(prog="avspo", description="ACR diagnostics and AVSPO advantages.")
    parser.add_argument(
        "--debug", action="store_true",
        help="show the traceback of an error too (errors in the input are otherwise one line, exit status 2)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    missing = None
    for name, (module, help_text) in SUBCOMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        if name != chosen:
            continue
        try:
            command = importlib.import_module(module)
        except ModuleNotFoundError as err:
            missing = missing_extra(EXTRAS.get(name), err)
            if missing is None:
                raise
            sub.description = f"{help_text} This command {missing}."
        else:
            command.add_arguments(sub)
    return parser, missing


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, missing = build_parser(argv)
    # A command whose extra is missing has no arguments declared: whatever follows it waits for the extra.
    args, unknown = parser.parse_known_args(argv)
    if unknown and missing is None:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    prog = f"avspo {args.command}"
    if missing is not None:
        return _error(prog, missing, debug=False)
    return run_module(prog, importlib.import_module(SUBCOMMANDS[args.command][0]), args, EXTRAS.get(args.command))


def command_parser(prog: str, module: ModuleType) -> argparse.ArgumentParser:
    """The parser of a command module (``add_arguments``, ``run``) as a program of its own, ``prog``."""
    parser = argparse.ArgumentParser(prog=prog, description=(module.__doc__ or "").strip().split("\n\n")[0])
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error too")
    module.add_arguments(parser)
    return parser


def run_command(prog: str, module: ModuleType, argv: Sequence[str] | None = None) -> int:
    """A command module as a program of its own, ``prog`` (e.g. ``python -m lab``), with the console script's
    ``--debug`` and error messages."""
    args = command_parser(prog, module).parse_args(sys.argv[1:] if argv is None else argv)
    return run_module(prog, module, args, extra=None)


def run_module(prog: str, module: ModuleType, args: argparse.Namespace, extra: str | None) -> int:
    """``module.run(args)``, its errors handled as the module docstring says; a package of ``extra`` missing is named
    with the install line."""
    try:
        return int(module.run(args) or 0)
    except SystemExit as stop:
        if not isinstance(stop.code, str):  # argparse's exits print their own message
            raise
        return _error(prog, stop.code, args.debug)
    except Exception as err:
        message = missing_extra(extra, err) if isinstance(err, ModuleNotFoundError) else None
        if message is not None or is_expected_error(err):
            return _error(prog, message or str(err) or type(err).__name__, args.debug)
        traceback.print_exc()
        print(f"{prog}: internal error: {type(err).__name__}: {err}; this is a bug in avspo, please report it "
              "with the traceback above", file=sys.stderr)
        return 1


def _error(prog: str, message: str, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
