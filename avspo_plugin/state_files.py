"""State files beside checkpoints (the AVSPO state, the monitor's), for every host.

Written whole or not at all (:func:`write_json`: a temporary file in the same folder, fsync, atomic
rename), so a crash mid-save leaves the previous file or the new one, never a part of one. Read back
with :func:`load_json`: a file that is empty, cut short or not JSON, or that its loader refuses (a
field of the wrong type or outside its range, see :func:`check_fields`), is a :class:`StateFileError`
naming it and saying what to do. The states' owners describe their fields (core.session.STATE_FIELDS).
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

from .allowed import Allowed
from .config import earlier_name_error

T = TypeVar("T")


class StateFileError(ValueError):
    """A state file cannot be resumed from; the message names the file and what to do."""


def write_json(path: str, data: Any, indent: int | None = None) -> str:
    """``data`` as JSON at ``path``, atomically; returns ``path``.

    The text goes to a temporary file beside ``path``, is flushed to disk (fsync) and renamed over
    ``path`` (atomic on POSIX and Windows); the folder is then flushed so that the rename survives
    a power cut. A failure removes the temporary file and leaves ``path`` as it was.
    """
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
    _flush_folder(folder)
    return path


def _flush_folder(folder: str) -> None:
    if os.name != "posix":
        return  # Windows cannot open a folder to flush it; its rename is durable once it returns
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    except OSError:
        pass  # some file systems (network mounts) refuse fsync on a folder: the file itself is on disk
    finally:
        os.close(descriptor)


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


def refuse_earlier_keys(state: Mapping[str, Any], keys: Collection[str], what: str) -> None:
    """ValueError, naming ``what`` (the state), when ``state`` holds the earlier name (config.EARLIER_NAMES) of one of
    its ``keys``."""
    earlier = earlier_name_error(state, keys, repr)
    if earlier is not None:
        raise ValueError(f"{what}: {earlier}")


# ---------------------------------------------------------------------------- field types


def check_fields(value: Any, spec: Any, what: str) -> None:
    """Raise ValueError naming the first field of ``value`` that does not match ``spec``.

    spec: int (an integer, not a bool), float (any number but a bool), str, bool, None (null), a check of
    :mod:`~avspo_plugin.allowed` (the one vocabulary the config's keys declare theirs in), a tuple of specs (any one
    of them) or a dict (an object with at least these keys, each matching its spec). what: the state's name in the
    message. A value of the wrong type is named with the type it should have; a value of the right type that its
    check refuses with what the check allows.
    """
    problem = _mismatch(value, spec, "")
    if problem is not None:
        field, text = problem
        raise ValueError(f"{what}: field {field or '(the whole state)'} {text}")


_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false", None: "null"}
_SHOWN = 60
# Exact types of JSON values that match a plain spec (bool is an int subclass, and matches neither number).
_EXACT = {int: (int,), float: (int, float), str: (str,), bool: (bool,), None: (type(None),)}


def _describe(spec: Any) -> str:
    if isinstance(spec, tuple):
        return " or ".join(_describe(option) for option in spec)
    if isinstance(spec, dict):
        return "an object"
    return spec.kind if isinstance(spec, Allowed) else _NAMES[spec]


def _types(spec: Any) -> tuple[type, ...]:
    if isinstance(spec, dict):
        return ()
    return spec.types if isinstance(spec, Allowed) else _EXACT[spec]


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= _SHOWN else shown[: _SHOWN - 3] + "..."


def _of_kind(value: Any, option: Any) -> bool:
    """Whether ``value`` has the type ``option`` takes (an object, or one of its exact types)."""
    return isinstance(value, Mapping) if isinstance(option, dict) else type(value) in _types(option)


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
