"""A run's files as the analysis reads them: per-sample rewards by step, or logged scalars by step; the readers,
and which one a path needs (decided from names and first records, never from the caller's say-so).

verl's generation dumps (``trainer.rollout_data_dir``, ``trainer.validation_data_dir``): one ``{step}.jsonl`` per
step, one object per sample (input, output, gts, score, step). verl 0.9's v1 trainer adds ``uid`` =
``{prompt uid}_{session}_{output index}`` (an agent loop may write several outputs per session; verl's advantage uses
the last) and pads batches with rows of uid ``pad<32 hex>`` (left out, counted); without a uid (the legacy trainer)
samples are grouped by prompt text within the step.

Tracker logs as {step: {key: value}}: verl's ``file`` backend (JSON lines ``{"step": s, "data": {...}}``), wandb
history exports (CSV, JSON, JSON lines; sparse rows), TRL's ``trainer_state.json`` (``log_history``) and TensorBoard
event files. A step logged twice (a resumed run) keeps the later values, and this is noted.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.tensorflow_stub import errors
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New
from tensorboard.util import tensor_util


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
                except (UnicodeDecodeError, json.JSONDecodeError) as err:
                    text = isinstance(err, json.JSONDecodeError)
                    if not complete and (text or err.reason == "unexpected end of data"):  # cut in a value or character
                        self.truncated_line = number
                        return
                    raise (invalid_json(self.path, number, err) if text else
                           not_utf8(self.path, number, start + err.start, err)) from None
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
    marker = 0 if records_key is None else text.find(json.dumps(records_key))
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


TRL_STATE = "trainer_state.json"


def load(path: Path) -> Loaded:
    """Read one run's source: a file, a verl dump directory, a TensorBoard directory or a TRL output directory."""
    if not path.exists():
        raise AnalyzeError(f"{path}: no such file or directory")
    return _load_directory(path) if path.is_dir() else _load_file(path)


def load_dumps(path: Path) -> Loaded:
    """A verl generation dump (file or directory); the reader for --val, where nothing else is accepted."""
    if path.is_dir():
        files = dump_files(path)
        if not files:
            raise AnalyzeError(f"{path}: no verl dump files ({{step}}.jsonl) in this directory")
    else:
        if not path.exists():
            raise AnalyzeError(f"{path}: no such file or directory")
        first = _first_jsonl_record(path)
        if not is_dump_record(first):
            raise AnalyzeError(f"{path}: not a verl generation dump (first record has keys {keys_of(first)})")
        files = [path]
    return Loaded(path, "verl generation dump", samples=read_dumps(files))


def _load_directory(path: Path) -> Loaded:
    if dump_files(path):
        return load_dumps(path)
    event_dirs = sorted({p.parent for p in path.rglob("*") if p.is_file() and TB_EVENT_FILE.search(p.name)})
    if len(event_dirs) == 1:
        return Loaded(path, "TensorBoard events", scalars=read_tensorboard(event_dirs[0]))
    state = _trl_state_file(path)
    if state is not None:  # a TRL output directory; its runs/ may hold one event directory per launch
        return _load_file(state)
    if len(event_dirs) > 1:
        listed = ", ".join(str(d) for d in event_dirs)
        raise AnalyzeError(f"{path}: TensorBoard events in {len(event_dirs)} directories ({listed}); pass one per run")
    raise AnalyzeError(
        f"{path}: found no verl dump files ({{step}}.jsonl), TensorBoard events or {TRL_STATE} in this directory"
    )


def _trl_state_file(directory: Path) -> Path | None:
    """trainer_state.json of a TRL output directory: its own, else the newest checkpoint's (the longest history)."""
    own = directory / TRL_STATE
    if own.is_file():
        return own
    checkpoints = [p for p in directory.glob(f"checkpoint-*/{TRL_STATE}") if p.parent.name.split("-")[-1].isdigit()]
    return max(checkpoints, key=lambda p: int(p.parent.name.split("-")[-1]), default=None)


def _load_file(path: Path) -> Loaded:
    name = path.name
    if TB_EVENT_FILE.search(name):
        raise AnalyzeError(f"{path}: pass the directory that holds the TensorBoard event file, not the file")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return Loaded(path, "wandb history CSV", scalars=read_wandb_csv(path))
    if suffix == ".jsonl":
        first = _first_jsonl_record(path)
        if is_dump_record(first):
            return Loaded(path, "verl generation dump", samples=read_dumps([path]))
        if isinstance(first, dict) and "step" in first and isinstance(first.get("data"), dict):
            return Loaded(path, "verl file tracker", scalars=read_verl_file_log(path))
        if isinstance(first, dict) and any(key in first for key in STEP_COLUMNS):
            return Loaded(path, "wandb history JSON lines", scalars=read_wandb_jsonl(path))
        raise AnalyzeError(
            f"{path}: JSON lines of an unknown kind (first record has keys {keys_of(first)}); expected a verl "
            "generation dump (score, input/uid, step), verl's file tracker (step, data) or a wandb history (_step)"
        )
    if suffix == ".json":
        if name == TRL_STATE or _has_log_history(path):
            return Loaded(path, "TRL trainer_state.json", scalars=read_json_records(path, "log_history"))
        return Loaded(path, "wandb history JSON", scalars=read_json_records(path))
    raise AnalyzeError(
        f"{path}: unknown file kind; expected .jsonl (verl dump or file tracker, wandb), .csv or .json (wandb "
        f"export), {TRL_STATE}, or a directory (verl dumps, TensorBoard events, TRL output)"
    )


def _has_log_history(path: Path) -> bool:
    with open(path, "rb") as handle:
        return b'"log_history"' in handle.read(1 << 20)


def _first_jsonl_record(path: Path) -> Any:
    lines = JsonLines(path)
    for _, record in lines:
        return record
    if lines.truncated_line is not None:
        raise AnalyzeError(f"{path}:{lines.truncated_line}: the file's only line is cut short")
    raise AnalyzeError(f"{path}: empty file")


# Columns that hold the step in a wandb history export, best first: transformers logs the
# trainer's step as train/global_step while wandb's own _step counts log calls.
STEP_COLUMNS = ("train/global_step", "_step", "step", "global_step")
TB_EVENT_FILE = re.compile(r"events\.out\.tfevents\.")


class _Collector:
    """Values per step; a key logged again at a step with another value is a repeat. NaN is kept (the analysis leaves
    it out with a warning naming it); an empty cell or null is no value."""

    def __init__(self) -> None:
        self.log = ScalarLog(values={})
        self.repeated: set[int] = set()

    def add(self, step: int, row: dict[str, Any], where: str) -> None:
        target = self.log.values.setdefault(step, {})
        self.log.where[step] = where
        for key, value in row.items():
            number = _float(value)
            if number is None or math.isinf(number):
                if number is not None:
                    self.log.infinite.setdefault(key, {})[step] = number
                if value is not None and value != "":  # an empty cell or null: the key not logged at this step
                    self.log.nonnumeric.setdefault(key, where)
                continue
            if key in target and target[key] != number and not (math.isnan(target[key]) and math.isnan(number)):
                self.repeated.add(step)
            target[key] = number

    def finish(self) -> ScalarLog:
        if self.repeated:
            self.log.notes.append(
                f"{len(self.repeated)} step(s) logged more than once with different values (a resumed run?), "
                f"the later values kept; first: step {min(self.repeated)}"
            )
        return self.log


def _float(value: Any) -> float | None:
    """A float from a JSON/CSV value (NaN and infinities included; bool counts); None for missing or non-numeric."""
    try:
        return float(value) if isinstance(value, (int, float, str)) else None
    except ValueError:
        return None


def _finite(value: Any) -> float | None:
    number = _float(value)
    return number if number is not None and math.isfinite(number) else None


def _step_of(value: Any, where: str, key: str) -> int:
    number = _finite(value)
    if number is None or number != int(number):
        raise AnalyzeError(f"{where}: {key} {value!r} is not an integer step")
    return int(number)


def read_verl_file_log(path: Path) -> ScalarLog:
    """verl's ``file`` tracker: one ``{"step": s, "data": {...}}`` per line."""
    collector, lines = _Collector(), JsonLines(path)
    for number, record in lines:
        where = f"{path}:{number}"
        if not isinstance(record, dict) or "step" not in record or not isinstance(record.get("data"), dict):
            found = keys_of(record)
            raise AnalyzeError(f"{where}: expected {{'step': ..., 'data': {{...}}}} (verl file tracker), found {found}")
        collector.add(_step_of(record["step"], where, "step"), record["data"], where)
    _note_cut(collector.log, path, lines.truncated_line)
    return collector.finish()


def read_records(records: Iterable[tuple[str, Any]]) -> ScalarLog:
    """Flat records (wandb JSON export, TRL log_history), each given with where it is: a dict with a step column."""
    collector = _Collector()
    for where, record in records:
        if not isinstance(record, dict):
            raise AnalyzeError(f"{where}: expected an object per logged step, found {type(record).__name__}")
        step_key = next((key for key in STEP_COLUMNS if _finite(record.get(key)) is not None), None)
        if step_key is None:
            if any(key in record for key in ("train_runtime", "total_flos")):
                continue  # a wandb row logged without a trainer step: a run summary
            raise AnalyzeError(
                f"{where}: record has no step ({' or '.join(STEP_COLUMNS)}); keys: {', '.join(sorted(record))}"
            )
        collector.add(_step_of(record[step_key], where, step_key), record, where)
    return collector.finish()


def read_json_records(path: Path, records_key: str | None = None) -> ScalarLog:
    """A JSON document of records: a wandb list export, or trainer_state.json (records_key='log_history')."""
    text = read_text(path)
    records, cut = parse_json_document(path, text, records_key)
    # A parsed document has no line numbers: locations name the record instead.
    what = f"{records_key} record" if records_key else "record"
    log = read_records((f"{path} ({what} {index + 1})", record) for index, record in enumerate(records))
    return _note_cut(log, path, cut, "document", "records before it kept")


def read_wandb_jsonl(path: Path) -> ScalarLog:
    lines = JsonLines(path)
    return _note_cut(read_records((f"{path}:{number}", record) for number, record in lines), path, lines.truncated_line)


def read_wandb_csv(path: Path) -> ScalarLog:
    """A wandb history CSV. A last row cut short (no newline) is left out and noted."""
    text = read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise AnalyzeError(f"{path}: empty CSV file") from None
    step_key = next((key for key in STEP_COLUMNS if key in header), None)
    if step_key is None:
        raise AnalyzeError(f"{path}:1: no step column ({' or '.join(STEP_COLUMNS)}) in the CSV header")
    if len(set(header)) != len(header):
        duplicate = next(key for key in header if header.count(key) > 1)
        raise AnalyzeError(f"{path}:1: column {duplicate!r} appears more than once in the header")
    try:
        rows = [(reader.line_num, fields) for fields in reader if fields]
    except csv.Error as err:
        raise AnalyzeError(f"{path}:{reader.line_num}: malformed CSV ({err})") from None
    cut = None
    if rows and not text.endswith("\n"):
        cut, rows = rows[-1][0], rows[:-1]  # a last row without its newline may hold a cut-off value
    collector = _Collector()
    for line, fields in rows:
        if len(fields) != len(header):
            raise AnalyzeError(f"{path}:{line}: {len(fields)} fields where the header has {len(header)}")
        record = dict(zip(header, fields))
        if record[step_key] == "":
            continue  # a row without a step (a summary row)
        where = f"{path}:{line}"
        collector.add(_step_of(record[step_key], where, step_key), record, where)
    return _note_cut(collector.finish(), path, cut, "last row")


def _note_cut(
    log: ScalarLog, path: Path, line: int | None, what: str = "last line", kept: str = "left out"
) -> ScalarLog:
    if line is not None:
        log.notes.append(f"{path}:{line}: {what} cut short (run stopped mid-write); {kept}")
    return log


def read_tensorboard(directory: Path) -> ScalarLog:
    """Scalars of the event files of one directory. EventAccumulator stops silently at a damaged or cut-off record,
    so each file's checksums are walked first: a cut in the newest file drops its last step (noted); a checksum
    failure is an error naming the file and record."""
    # One event file or more (load found them), in name order: the name carries the writer's start time.
    files = sorted(p for p in directory.iterdir() if p.is_file() and TB_EVENT_FILE.search(p.name))
    log = ScalarLog(values={})
    cut_newest = False
    for path in files:
        cut = _check_event_file(path)
        if cut is not None:
            log.notes.append(f"{path}: {cut}; events before it kept")
            cut_newest = path == files[-1]
    accumulator = EventAccumulator(str(directory), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    for tag in tags.get("scalars", []):
        for event in accumulator.Scalars(tag):
            log.values.setdefault(int(event.step), {})[tag] = float(event.value)
    for tag in tags.get("tensors", []):
        for event in accumulator.Tensors(tag):
            array = tensor_util.make_ndarray(event.tensor_proto)
            if array.size == 1 and array.dtype.kind in "fiub":
                log.values.setdefault(int(event.step), {})[tag] = float(array.reshape(-1)[0])
    log.where = dict.fromkeys(log.values, f"{directory} (TensorBoard events)")
    if cut_newest and log.values:  # a step's scalars are separate events: after a cut, the last may miss some
        del log.values[max(log.values)]
    return log


def _check_event_file(path: Path) -> str | None:
    """Walk a TFRecord file's records and checksums; None when whole, else where it was cut short."""
    reader = PyRecordReader_New(str(path))
    records = 0
    try:
        while True:
            reader.GetNext()
            records += 1
    except errors.OutOfRangeError:
        return None
    except errors.DataLossError as err:
        if "truncated" in str(err):
            return f"record {records + 1} cut short (run stopped mid-write)"
        raise AnalyzeError(
            f"{path}: record {records + 1} fails its checksum: the event file is damaged ({err.message})"
        ) from None
    finally:
        reader.file_handle.close()


DUMP_FILE = re.compile(r"^(\d+)\.jsonl$")
SESSION_KEY = re.compile(r"^(?P<uid>.+)_(?P<session>\d+)_(?P<index>\d+)$")
PADDING_UID = re.compile(r"^pad[0-9a-f]{32}$")


def dump_files(directory: Path) -> list[Path]:
    """The ``{step}.jsonl`` files of a dump directory, in step order."""
    found = [(int(m.group(1)), p) for p in directory.iterdir() if p.is_file() and (m := DUMP_FILE.match(p.name))]
    return [p for _, p in sorted(found)]


def is_dump_record(value: Any) -> bool:
    return isinstance(value, dict) and "score" in value and ("input" in value or "uid" in value)


@dataclass(slots=True)
class _Row:
    step: int
    score: float
    uid: str | None
    prompt: str | None
    where: str


def read_dumps(files: list[Path]) -> SampleLog:
    """Dump files (in step order) as per-step samples. A last file cut short loses its last step (it may be
    incomplete); a step found in two files, a missing or non-numeric field, or a malformed line is an error."""
    rows: list[_Row] = []
    notes: list[str] = []
    step_file: dict[int, Path] = {}
    texts: dict[str, str] = {}  # one string object per distinct prompt, however many samples repeat it
    for position, path in enumerate(files):
        lines = JsonLines(path)
        file_steps: set[int] = set()
        for number, record in lines:
            row = _parse_row(path, number, record)
            if row.prompt is not None:
                row.prompt = texts.setdefault(row.prompt, row.prompt)
            if row.step in step_file and step_file[row.step] != path:
                raise AnalyzeError(
                    f"{path}:{number}: step {row.step} also appears in {step_file[row.step]}; "
                    "a dump directory holds one file per step (a copied or merged file?)"
                )
            step_file[row.step] = path
            file_steps.add(row.step)
            rows.append(row)
        if lines.truncated_line is not None:
            if position != len(files) - 1:
                raise AnalyzeError(
                    f"{path}:{lines.truncated_line}: line cut short, but later dump files follow: "
                    "the file is damaged (a cut-off write can only be the run's last)"
                )
            last = max(file_steps, default=None)
            rows = [row for row in rows if row.step != last]
            dropped = f"; step {last} left out (it may be incomplete)" if last is not None else ""
            notes.append(f"{path}:{lines.truncated_line}: last line cut short (run stopped mid-write){dropped}")
    if not rows:
        raise AnalyzeError(f"{', '.join(map(str, files)) or 'no dump file'}: no complete sample found")
    return _group_rows(rows, notes)


def _parse_row(path: Path, number: int, record: Any) -> _Row:
    where = f"{path}:{number}"
    if not isinstance(record, dict):
        raise AnalyzeError(f"{where}: expected a JSON object per sample, found {type(record).__name__}")
    for key in ("score", "step"):
        if key not in record:
            raise AnalyzeError(f"{where}: sample has no {key!r} (keys: {keys_of(record)})")
    score = record["score"]
    if not isinstance(score, (int, float)) or not math.isfinite(score):
        raise AnalyzeError(f"{where}: score {score!r} is not a finite number")
    step = record["step"]
    if isinstance(step, bool) or not isinstance(step, (int, float)) or step != int(step):
        raise AnalyzeError(f"{where}: step {step!r} is not an integer")
    uid, prompt = record.get("uid"), record.get("input")
    if uid is None and prompt is None:
        raise AnalyzeError(f"{where}: sample has neither 'uid' nor 'input', so its group is unknown")
    if uid is not None and not isinstance(uid, (str, int)):
        raise AnalyzeError(f"{where}: uid {uid!r} is not a string")
    if prompt is not None and not isinstance(prompt, str):
        raise AnalyzeError(f"{where}: input {prompt!r} is not a string")
    return _Row(int(step), float(score), None if uid is None else str(uid), prompt, where)


def _group_rows(rows: list[_Row], notes: list[str]) -> SampleLog:
    with_uid = sum(row.uid is not None for row in rows)
    if with_uid not in (0, len(rows)):
        first = next(row for row in rows if row.uid is None)
        raise AnalyzeError(f"{first.where}: sample has no 'uid' while {with_uid} other samples have one")
    sessions = with_uid > 0 and all(SESSION_KEY.match(row.uid) for row in rows)
    grouping = "uid" if with_uid else "prompt text within each step (the dump has no uid)"
    if sessions:
        rows, grouping = _last_output_per_session(rows, notes), "uid (verl v1 key {uid}_{session}_{index})"
    if any(row.prompt is None for row in rows):
        notes.append("no prompt text in the dump: per-prompt statistics treat each uid as a prompt")

    prompt_ids: dict[str, int] = {}
    by_step: dict[int, list[tuple[float, str, int]]] = {}
    padding = 0
    for row in rows:
        group = row.prompt if row.uid is None else (SESSION_KEY.match(row.uid).group("uid") if sessions else row.uid)
        if PADDING_UID.match(group):
            padding += 1
            continue
        prompt_key = row.prompt if row.prompt is not None else group
        prompt_id = prompt_ids.setdefault(prompt_key, len(prompt_ids))
        by_step.setdefault(row.step, []).append((row.score, group, prompt_id))
    if padding:
        notes.append(f"{padding} padding row(s) (uid pad<hex>) left out: they belong to no prompt")

    if not by_step:
        raise AnalyzeError(f"{rows[0].where}: the dump holds only padding rows")
    steps = []
    for step in sorted(by_step):
        scores, groups, prompts = zip(*by_step[step])
        steps.append(StepSamples(step, np.asarray(scores, np.float64), np.asarray(groups, object),
                                 np.asarray(prompts, np.int64)))
    return SampleLog(steps=steps, prompt_texts=list(prompt_ids), grouping=grouping, notes=notes)


def _last_output_per_session(rows: list[_Row], notes: list[str]) -> list[_Row]:
    """Keep, per (step, uid, session), the row of the highest output index: the one verl's advantage uses."""
    last: dict[tuple[int, str, str], tuple[int, int]] = {}
    for position, row in enumerate(rows):
        match = SESSION_KEY.match(row.uid)
        key = (row.step, match.group("uid"), match.group("session"))
        index = int(match.group("index"))
        if key not in last or last[key][0] < index:
            last[key] = (index, position)
    keep = sorted(position for _, position in last.values())
    if len(keep) < len(rows):
        notes.append(
            f"{len(rows) - len(keep)} earlier-turn output(s) left out: verl's advantage uses the last output "
            "of each session"
        )
    return [rows[position] for position in keep]
