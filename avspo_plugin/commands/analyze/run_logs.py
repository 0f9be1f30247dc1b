"""What the readers hand to the analysis: per-sample rewards by step, or logged scalars by step."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


class AnalyzeError(ValueError):
    """An input cannot be read; the message names the file and, where there is one, the line."""


@dataclass
class StepSamples:
    """One step of a rollout dump: scores (B,) float64 sequence rewards, groups (B,) group labels (a GRPO group: one
    prompt's G samples), prompts (B,) int64 ids into :attr:`SampleLog.prompt_texts`."""

    step: int
    scores: np.ndarray
    groups: np.ndarray
    prompts: np.ndarray


@dataclass
class SampleLog:
    """Per-sample rewards of a run, by step (ascending)."""

    steps: list[StepSamples]
    prompt_texts: list[str]
    grouping: str  # how samples were grouped, in words
    notes: list[str] = field(default_factory=list)


@dataclass
class ScalarLog:
    """Scalars logged per step: {step: {key: value}}, in the host's own key names."""

    values: dict[int, dict[str, float]]
    nonnumeric: dict[str, str] = field(default_factory=dict)  # key -> "file:line" of its first non-numeric value
    notes: list[str] = field(default_factory=list)
    where: dict[int, str] = field(default_factory=dict)  # step -> "file:line" or "file (record N)" it was read at
    warnings: list[str] = field(default_factory=list)  # values left out (NaN, out of range), naming file and step
    # key -> {step: value} of infinite values (kept out of ``values``): --accuracy names a last value that is one
    infinite: dict[str, dict[int, float]] = field(default_factory=dict)

    def keys(self) -> set[str]:
        return {key for row in self.values.values() for key in row} | set(self.nonnumeric)


@dataclass
class Loaded:
    """A source read from disk: its format in words, and per-sample rewards or scalars."""

    path: Path
    format: str
    samples: SampleLog | None = None
    scalars: ScalarLog | None = None

    @property
    def notes(self) -> list[str]:
        return (self.samples or self.scalars).notes


def keys_of(value: Any) -> str:
    return ", ".join(sorted(value)) if isinstance(value, dict) else type(value).__name__


def not_utf8(path: Path, line: int, offset: int, err: UnicodeDecodeError) -> AnalyzeError:
    """Logs are read as UTF-8, never by guesswork or replacement (a replaced prompt could merge two prompts' groups)."""
    return AnalyzeError(
        f"{path}:{line}: not UTF-8 text: byte offset {offset} (0x{err.object[err.start]:02x}: {err.reason}); "
        f"avspo analyze reads logs as UTF-8: convert the file first, e.g. iconv -f <its encoding> -t utf-8"
    )


def read_text(path: Path) -> str:
    """A whole text file, decoded as UTF-8 (a leading byte-order mark is dropped); bytes that are not UTF-8
    are an error naming the file, line and byte offset."""
    data = path.read_bytes()
    start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[start:].decode("utf-8")
    except UnicodeDecodeError as err:
        offset = start + err.start
        raise not_utf8(path, data.count(b"\n", 0, offset) + 1, offset, err) from None


class JsonLines:
    """The (line number, value) of a JSON-lines file, blank lines skipped. A last line without its newline that does
    not parse is a write cut short: iteration ends and :attr:`truncated_line` names it; any other line that does not
    parse, or is not UTF-8, is an error naming the file and line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.truncated_line: int | None = None

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        with open(self.path, "rb") as handle:
            end = 0
            for number, raw in enumerate(handle, start=1):
                start, end = end, end + len(raw)
                complete = raw.endswith(b"\n")
                if number == 1 and raw.startswith(codecs.BOM_UTF8):
                    raw, start = raw[len(codecs.BOM_UTF8):], start + len(codecs.BOM_UTF8)
                if not raw.strip():
                    continue
                try:
                    value = json.loads(raw.decode("utf-8"))
                except UnicodeDecodeError as err:
                    if not complete and err.reason == "unexpected end of data":  # cut inside a character
                        self.truncated_line = number
                        return
                    raise not_utf8(self.path, number, start + err.start, err) from None
                except json.JSONDecodeError as err:
                    if not complete:
                        self.truncated_line = number
                        return
                    raise invalid_json(self.path, number, err) from None
                yield number, value


def invalid_json(path: Path, line: int, err: json.JSONDecodeError) -> AnalyzeError:
    return AnalyzeError(f"{path}:{line}: not valid JSON ({err.msg} at column {err.colno})")


def parse_json_document(path: Path, text: str, records_key: str | None) -> tuple[list[Any], int | None]:
    """(records, cut line): a top-level list, or the list under ``records_key`` of an object. A document cut short
    keeps its complete records, the cut line naming where the rest starts (None when whole); cut before the records
    list, or malformed anywhere, it is an error naming the file and line."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        if not _cut_short(text, err):
            raise invalid_json(path, err.lineno, err) from None
        return _records_before_cut(path, text, records_key)
    records = document if records_key is None else (document.get(records_key) if isinstance(document, dict) else None)
    if not isinstance(records, list):
        what = "a list of records" if records_key is None else f"an object with a {records_key!r} list"
        raise AnalyzeError(f"{path}: expected {what}, found {type(document).__name__}")
    return records, None


def _records_before_cut(path: Path, text: str, records_key: str | None) -> tuple[list[Any], int]:
    """Decode list elements one by one up to where the text ends mid-record."""
    decoder = json.JSONDecoder()
    if records_key is None:
        start = text.find("[")
    else:
        marker = text.find(json.dumps(records_key))
        start = text.find("[", marker) if marker >= 0 else -1
    if start < 0:
        raise AnalyzeError(f"{path}: the file ends before its records list begins (cut short while written?)")
    position, records = start + 1, []
    while True:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position >= len(text) or text[position] == "]":
            break
        try:
            record, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as err:
            if not _cut_short(text, err):
                raise invalid_json(path, err.lineno, err) from None
            break
        records.append(record)
    return records, text.count("\n", 0, position) + 1


def _cut_short(text: str, err: json.JSONDecodeError) -> bool:
    """Whether a decode error is the text ending mid-value: an unterminated string (a raw newline inside one is its own
    error), or any error with nothing but whitespace after it."""
    return err.msg.startswith("Unterminated string") or not text[err.pos :].strip()
