"""State files beside checkpoints (the AVSPO state, the monitor's), for every host.

Written whole or not at all (:func:`write_json`: a temporary file in the same folder, fsync, atomic
rename), so a crash mid-save leaves the previous file or the new one, never a part of one. Read back
with :func:`load_json`: a file that is empty, cut short or not JSON, or that its loader refuses (a
field of the wrong type or outside its range, see :func:`check_fields`), is a :class:`StateFileError`
naming it and saying what to do. The states' owners describe their fields (core.session.STATE_FIELDS).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .config import AutoOrInteger, Integer, Number, OneOf, earlier_name_error

T = TypeVar("T")

# The largest integer a state's counters may hold: numpy's int64, where the histories and the seeds go.
INT64_MAX = 2**63 - 1


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


@dataclass(frozen=True)
class ListOf:
    """A JSON array whose every element matches ``element``."""

    element: Any


@dataclass(frozen=True)
class MapOf:
    """A JSON object with any keys whose every value matches ``value``."""

    value: Any


@dataclass(frozen=True)
class InRange:
    """A number of type ``kind`` (int: an integer; float: any number, finite) within [low, high].

    low_open: low itself is outside the range. JSON as Python reads it holds NaN and infinities
    (``NaN``, ``Infinity``): a float is refused unless finite.
    """

    kind: type
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False

    def contains_all(self, values: list) -> bool:
        """Whether every value (each already of ``kind``'s JSON types) lies in the range; a C-level pass."""
        if not values:
            return True
        try:
            finite = self.kind is int or all(map(math.isfinite, values))
        except OverflowError:  # an integer beyond float's range in a float field
            return False
        lowest, highest = min(values), max(values)
        return finite and (lowest > self.low if self.low_open else lowest >= self.low) and highest <= self.high

    def describe(self) -> str:
        if self.kind is int:
            return f"an integer in [{_bound(self.low)}, {_bound(self.high)}]"
        if self.low == -math.inf and self.high == math.inf:
            return "a finite number"
        if self.high == math.inf:
            return f"a finite number {'>' if self.low_open else '>='} {_bound(self.low)}"
        return f"a finite number in {'(' if self.low_open else '['}{_bound(self.low)}, {_bound(self.high)}]"


@dataclass(frozen=True)
class Matching:
    """A string that matches ``pattern`` whole; ``meaning`` says what it is, in the message."""

    pattern: str
    meaning: str


def config_field_spec(config_class: type, name: str) -> Any:
    """The spec of a state field that holds config key ``name``: what ``config_class`` declares it allows."""
    allowed = next(f for f in dataclasses.fields(config_class) if f.name == name).metadata["allowed"]
    if isinstance(allowed, AutoOrInteger):
        return Matching("auto", "'auto'"), InRange(int, allowed.low, allowed.high)
    if isinstance(allowed, Integer):
        return InRange(int, allowed.low, allowed.high)
    if isinstance(allowed, Number) and not allowed.high_open:
        return InRange(float, allowed.low, allowed.high, low_open=allowed.low_open)
    if isinstance(allowed, OneOf):
        return Matching("|".join(map(re.escape, allowed.choices)), allowed.wording())
    raise TypeError(f"{config_class.__name__}.{name}: no state field spec for {allowed!r}")


def _bound(value: float) -> str:
    return "2**63 - 1" if value == INT64_MAX else f"{value:g}"


def check_fields(value: Any, spec: Any, what: str) -> None:
    """Raise ValueError naming the first field of ``value`` that does not match ``spec``.

    spec: int (an integer, not a bool), float (any number but a bool), str, bool, None (null),
    :class:`InRange` (a number of a type within a range), :class:`Matching` (a string of a form), a tuple
    of specs (any one of them), a dict (an object with at least these keys, each matching its spec),
    :class:`ListOf` or :class:`MapOf`. what: the state's name in the message. A value of the wrong type
    is named with the type it should have; a value of the right type outside its range with the range.
    """
    problem = _mismatch(value, spec, "")
    if problem is not None:
        field, text = problem
        raise ValueError(f"{what}: field {field or '(the whole state)'} {text}")


_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false", None: "null"}
_SHOWN = 60
# Exact types of JSON values that match a simple spec (bool is an int subclass, and matches neither number).
_EXACT = {int: (int,), float: (int, float), str: (str,), bool: (bool,), None: (type(None),)}


def _describe(spec: Any) -> str:
    if isinstance(spec, tuple):
        return " or ".join(_describe(option) for option in spec)
    if isinstance(spec, (dict, MapOf)):
        return "an object"
    if isinstance(spec, ListOf):
        return "a list"
    if isinstance(spec, InRange):
        return _NAMES[spec.kind]
    if isinstance(spec, Matching):
        return _NAMES[str]
    return _NAMES[spec]


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= _SHOWN else shown[: _SHOWN - 3] + "..."


def _wrong(spec: Any, value: Any) -> str:
    return f"should be {_describe(spec)}, found {type(value).__name__} {_shown(value)}"


def _outside(spec: InRange | Matching, value: Any) -> str:
    allowed = spec.describe() if isinstance(spec, InRange) else spec.meaning
    return f"is {_shown(value)}; allowed: {allowed}"


def _join(field: str, key: Any) -> str:
    return f"{field}.{key}" if field else str(key)


def _exact_types(spec: Any) -> tuple[type, ...] | None:
    """The exact types of the values that match a simple spec (or a tuple of them) by type; None for others."""
    options = spec if isinstance(spec, tuple) else (spec,)
    kinds = [option.kind if isinstance(option, InRange) else str if isinstance(option, Matching) else option
             for option in options]  # fmt: skip
    if not all(isinstance(kind, type) or kind is None for kind in kinds):
        return None
    return tuple(exact for kind in kinds for exact in _EXACT[kind])


def _of_kind(value: Any, option: Any) -> bool:
    """Whether ``value`` has the type ``option`` takes (an object, a list, or one of its exact types)."""
    if isinstance(option, (dict, MapOf)):
        return isinstance(value, Mapping)
    if isinstance(option, ListOf):
        return isinstance(value, list)
    return type(value) in (_exact_types(option) or ())


def _mismatch(value: Any, spec: Any, field: str) -> tuple[str, str] | None:
    """(field, what is wrong with it) of the first mismatch, or None."""
    if isinstance(spec, tuple):
        problems = [_mismatch(value, option, field) for option in spec]
        if None in problems:
            return None
        # A value checked against the option of its type (an object, a list, a number outside its range):
        # name what is wrong inside that option.
        same_kind = [problem for option, problem in zip(spec, problems) if _of_kind(value, option)]
        return same_kind[0] if len(same_kind) == 1 else (field, _wrong(spec, value))
    if isinstance(spec, (dict, ListOf, MapOf)):
        if not isinstance(value, list if isinstance(spec, ListOf) else Mapping):
            return field, _wrong(spec, value)
        if isinstance(spec, dict):
            missing = next((key for key in spec if key not in value), None)
            if missing is not None:
                return _join(field, missing), f"is missing (it should be {_describe(spec[missing])})"
            children = ((_join(field, key), value[key], inner) for key, inner in spec.items())
        elif isinstance(spec, MapOf):
            children = ((_join(field, key), element, spec.value) for key, element in value.items())
        else:
            exact = _exact_types(spec.element)
            # The common case, a long history list, in one pass without a call per element.
            if exact is not None and all(type(element) in exact for element in value) and (
                not isinstance(spec.element, InRange) or spec.element.contains_all(value)
            ):
                return None
            children = ((f"{field}[{index}]", element, spec.element) for index, element in enumerate(value))
        problems = (_mismatch(child, inner, name) for name, child, inner in children)
        return next((problem for problem in problems if problem is not None), None)
    if type(value) not in _exact_types(spec):
        return field, _wrong(spec, value)
    if isinstance(spec, InRange) and not spec.contains_all([value]):
        return field, _outside(spec, value)
    if isinstance(spec, Matching) and re.fullmatch(spec.pattern, value) is None:
        return field, _outside(spec, value)
    return None
