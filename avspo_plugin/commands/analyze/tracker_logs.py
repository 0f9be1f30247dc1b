"""Tracker logs as {step: {key: value}}: verl's ``file`` backend (JSON lines ``{"step": s, "data": {...}}``), wandb
history exports (CSV, JSON, JSON lines; sparse rows), TRL's ``trainer_state.json`` (``log_history``) and TensorBoard
event files. A step logged twice (a resumed run) keeps the later values, and this is noted.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.tensorflow_stub import errors
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New
from tensorboard.util import tensor_util

from .run_logs import AnalyzeError, JsonLines, ScalarLog, keys_of, parse_json_document, read_text

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
    if cut is not None:
        log.notes.append(f"{path}:{cut}: document cut short (run stopped mid-write); records before it kept")
    return log


def read_wandb_jsonl(path: Path) -> ScalarLog:
    lines = JsonLines(path)
    log = read_records((f"{path}:{number}", record) for number, record in lines)
    _note_cut(log, path, lines.truncated_line)
    return log


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
    log = collector.finish()
    if cut is not None:
        log.notes.append(f"{path}:{cut}: last row cut short (run stopped mid-write); left out")
    return log


def _note_cut(log: ScalarLog, path: Path, truncated_line: int | None) -> None:
    if truncated_line is not None:
        log.notes.append(f"{path}:{truncated_line}: last line cut short (run stopped mid-write); left out")


def tensorboard_event_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and TB_EVENT_FILE.search(p.name))


def read_tensorboard(directory: Path) -> ScalarLog:
    """Scalars of the event files of one directory. EventAccumulator stops silently at a damaged or cut-off record,
    so each file's checksums are walked first: a cut in the newest file drops its last step (noted); a checksum
    failure is an error naming the file and record."""
    files = [p for p in directory.iterdir() if p.is_file() and TB_EVENT_FILE.search(p.name)]
    if not files:
        raise AnalyzeError(f"{directory}: no TensorBoard event file (events.out.tfevents.*)")
    log = ScalarLog(values={})
    cut_newest = False
    files.sort(key=lambda p: p.name)  # the name carries the writer's start time
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
