"""What a value may be, for config keys and state-file fields: ``problem(value)`` (None when allowed), ``wording()``
(the range in help), ``kind`` (the type in words), ``types`` (the exact JSON types: a bool is no number)."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, ClassVar

INT64_MAX = 2**63 - 1  # the largest count: numpy's int64 holds the histories and the seeds


def _plain(bound: float) -> str:
    if bound == INT64_MAX:
        return "2**63 - 1"
    return str(int(bound)) if float(bound).is_integer() and abs(bound) < 1e15 else repr(bound)


@dataclass(frozen=True)
class Number:
    """A finite number in [low, high] (open at low when ``low_open``, at high when ``high_open``)."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    kind: ClassVar[str] = "a number"
    types: ClassVar[tuple[type, ...]] = (int, float)

    def problem(self, value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return "a finite number"
        below = value <= self.low if self.low_open else value < self.low
        above = value >= self.high if self.high_open else value > self.high
        if below or above:
            return f"a number in {'(' if self.low_open else '['}{self.low}, {self.high}{')' if self.high_open else ']'}"
        return None

    def wording(self) -> str:
        if math.isinf(self.low) and math.isinf(self.high):
            return "any finite number"
        if math.isinf(self.high):
            return f"{'>' if self.low_open else '>='} {_plain(self.low)}"
        return f"{'(' if self.low_open else '['}{_plain(self.low)}, {_plain(self.high)}{')' if self.high_open else ']'}"


@dataclass(frozen=True)
class Integer:
    """An integer (not a bool) in [low, high]."""

    low: int
    high: int
    kind: ClassVar[str] = "an integer"
    types: ClassVar[tuple[type, ...]] = (int,)

    def problem(self, value: Any) -> str | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and self.low <= value <= self.high
        return None if ok else self.wording()

    def wording(self) -> str:
        return f"an integer >= {_plain(self.low)} and <= {_plain(self.high)}"


@dataclass(frozen=True)
class AutoOrInteger(Integer):
    """'auto' or an integer in [low, high]."""

    kind: ClassVar[str] = "'auto' or an integer"
    types: ClassVar[tuple[type, ...]] = (str, int)

    def problem(self, value: Any) -> str | None:
        auto = isinstance(value, str) and value == "auto"
        return None if auto or super().problem(value) is None else self.wording()

    def wording(self) -> str:
        return f"'auto' or {super().wording()}"


@dataclass(frozen=True)
class OneOf:
    """One of ``choices`` (the help text says what each means); a table of rows is read as it stands at each check."""

    choices: Collection[str]
    kind: ClassVar[str] = "a string"
    types: ClassVar[tuple[type, ...]] = (str,)

    def problem(self, value: Any) -> str | None:
        return None if value in self.choices else self.wording()

    def wording(self) -> str:
        return "one of " + ", ".join(self.choices)


@dataclass(frozen=True)
class Boolean:
    kind: ClassVar[str] = "true or false"
    types: ClassVar[tuple[type, ...]] = (bool,)

    def problem(self, value: Any) -> str | None:
        return None if isinstance(value, bool) else self.wording()

    def wording(self) -> str:
        return self.kind


Allowed = Number | Integer | OneOf | Boolean
