"""State files beside checkpoints, for every host: written whole or not at all, read back where a damaged file or a
refused field is a :class:`StateFileError` naming the file and saying what to do."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .allowed import Allowed

T = TypeVar("T")


class StateFileError(ValueError):
    """A state file cannot be resumed from; the message names the file and what to do."""


def write_json(path: str, data: Any, indent: int | None = None) -> str:
    """``data`` as JSON at ``path``, atomically (a temporary file beside it, fsync, rename, the folder flushed so the
    rename survives a power cut; a failure leaves ``path`` as it was); returns ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    partial = f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with open(partial, "x", encoding="utf-8") as handle:
            json.dump(data, handle, indent=indent, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise
    if os.name == "posix":  # Windows cannot open a folder to flush it; its rename is durable once it returns
        descriptor = os.open(folder, os.O_RDONLY)
        with contextlib.suppress(OSError):  # network mounts may refuse fsync on a folder; the file is on disk
            os.fsync(descriptor)
        os.close(descriptor)
    return path


def read_json(path: str, remedy: str) -> Any:
    """The JSON value in ``path``; a file that is empty, cut short, not UTF-8 or not JSON is a
    :class:`StateFileError` naming the file, followed by ``remedy`` (what the user can do)."""
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        problem = f"is not UTF-8 text (byte offset {err.start})"
    except json.JSONDecodeError as err:
        problem = "is empty" if not data.strip() else f"is not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})"
    raise StateFileError(f"{path} {problem}: it is damaged or was cut short while written. {remedy}")


def load_json(path: str, load: Callable[[Any], T], remedy: str) -> T:
    """``load(value)`` of the JSON value in ``path`` (:func:`read_json`); a ValueError of ``load`` (a field of
    the wrong type, another format) becomes a :class:`StateFileError` naming the file, followed by ``remedy``."""
    value = read_json(path, remedy)
    try:
        return load(value)
    except ValueError as err:
        raise StateFileError(f"{path} cannot be resumed: {err}. {remedy}") from None


def check_fields(value: Any, spec: Any, what: str) -> None:
    """Raise ValueError naming (after ``what``) the first field of ``value`` that does not match ``spec``: int, float,
    str, bool, None (null), a check of :mod:`~avspo_plugin.allowed`, a tuple (any one) or a dict (at least these keys)."""
    problem = _mismatch(value, spec, "")
    if problem is not None:
        field, text = problem
        raise ValueError(f"{what}: field {field or '(the whole state)'} {text}")


# A plain spec's wording and the exact types of JSON values that match it (a bool is an int, yet matches neither).
_PLAIN = {int: ("an integer", (int,)), float: ("a number", (int, float)), str: ("a string", (str,)),
          bool: ("true or false", (bool,)), None: ("null", (type(None),))}


def _describe(spec: Any) -> str:
    if isinstance(spec, tuple):
        return " or ".join(_describe(option) for option in spec)
    if isinstance(spec, dict):
        return "an object"
    return spec.kind if isinstance(spec, Allowed) else _PLAIN[spec][0]


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _of_kind(value: Any, option: Any) -> bool:
    """Whether ``value`` has the type ``option`` takes (an object, or one of its exact types)."""
    if isinstance(option, dict):
        return isinstance(value, Mapping)
    return type(value) in (option.types if isinstance(option, Allowed) else _PLAIN[option][1])


def _mismatch(value: Any, spec: Any, field: str) -> tuple[str, str] | None:
    """(field, what is wrong with it) of the first mismatch, or None."""
    if isinstance(spec, tuple):
        problems = [_mismatch(value, option, field) for option in spec]
        if None in problems:
            return None
        # A value checked against the option of its type (an object, a number outside its range): name what is wrong
        # inside that option.
        same_kind = [problem for option, problem in zip(spec, problems) if _of_kind(value, option)]
        return same_kind[0] if len(same_kind) == 1 else (field, _wrong(spec, value))
    if not _of_kind(value, spec):
        return field, _wrong(spec, value)
    if isinstance(spec, dict):
        missing = next((key for key in spec if key not in value), None)
        if missing is not None:
            return f"{field}.{missing}" if field else missing, f"is missing (it should be {_describe(spec[missing])})"
        problems = (_mismatch(value[key], inner, f"{field}.{key}" if field else key) for key, inner in spec.items())
        return next((problem for problem in problems if problem is not None), None)
    allowed = spec.problem(value) if isinstance(spec, Allowed) else None
    return None if allowed is None else (field, f"is {_shown(value)}; allowed: {allowed}")


def _wrong(spec: Any, value: Any) -> str:
    return f"should be {_describe(spec)}, found {type(value).__name__} {_shown(value)}"
