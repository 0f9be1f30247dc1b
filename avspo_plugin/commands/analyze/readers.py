"""Which reader a path needs, decided from names and first records (never from the caller's say-so); and verl's
generation dumps (``trainer.rollout_data_dir``, ``trainer.validation_data_dir``): one ``{step}.jsonl`` per step, one
object per sample (input, output, gts, score, step). verl 0.9's v1 trainer adds ``uid`` =
``{prompt uid}_{session}_{output index}`` (an agent loop may write several outputs per session; verl's advantage uses
the last) and pads batches with rows of uid ``pad<32 hex>`` (left out, counted); without a uid (the legacy trainer)
samples are grouped by prompt text within the step.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import tracker_logs
from .run_logs import AnalyzeError, JsonLines, Loaded, SampleLog, StepSamples, keys_of

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
    event_dirs = sorted({p.parent for p in tracker_logs.tensorboard_event_files(path)})
    if len(event_dirs) == 1:
        return Loaded(path, "TensorBoard events", scalars=tracker_logs.read_tensorboard(event_dirs[0]))
    state = _trl_state_file(path)
    if state is not None:  # a TRL output directory; its runs/ may hold one event directory per launch
        return _trl_state(state)
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
    if tracker_logs.TB_EVENT_FILE.search(name):
        raise AnalyzeError(f"{path}: pass the directory that holds the TensorBoard event file, not the file")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return Loaded(path, "wandb history CSV", scalars=tracker_logs.read_wandb_csv(path))
    if suffix == ".jsonl":
        first = _first_jsonl_record(path)
        if is_dump_record(first):
            return load_dumps(path)
        if isinstance(first, dict) and "step" in first and isinstance(first.get("data"), dict):
            return Loaded(path, "verl file tracker", scalars=tracker_logs.read_verl_file_log(path))
        if isinstance(first, dict) and any(key in first for key in tracker_logs.STEP_COLUMNS):
            return Loaded(path, "wandb history JSON lines", scalars=tracker_logs.read_wandb_jsonl(path))
        raise AnalyzeError(
            f"{path}: JSON lines of an unknown kind (first record has keys {keys_of(first)}); expected a verl "
            "generation dump (score, input/uid, step), verl's file tracker (step, data) or a wandb history (_step)"
        )
    if suffix == ".json":
        if name == TRL_STATE or _has_log_history(path):
            return _trl_state(path)
        return Loaded(path, "wandb history JSON", scalars=tracker_logs.read_json_records(path))
    raise AnalyzeError(
        f"{path}: unknown file kind; expected .jsonl (verl dump or file tracker, wandb), .csv or .json (wandb "
        f"export), {TRL_STATE}, or a directory (verl dumps, TensorBoard events, TRL output)"
    )


def _trl_state(path: Path) -> Loaded:
    return Loaded(path, "TRL trainer_state.json", scalars=tracker_logs.read_json_records(path, "log_history"))


def _first_jsonl_record(path: Path) -> Any:
    lines = JsonLines(path)
    for _, record in lines:
        return record
    if lines.truncated_line is not None:
        raise AnalyzeError(f"{path}:{lines.truncated_line}: the file's only line is cut short")
    raise AnalyzeError(f"{path}: empty file")


def _has_log_history(path: Path) -> bool:
    with open(path, "rb") as handle:
        return b'"log_history"' in handle.read(1 << 20)


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
