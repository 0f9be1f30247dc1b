"""Which reader a path needs, decided from names and first records (never from the caller's say-so)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import dumps, tracker_logs
from .run_logs import AnalyzeError, JsonLines, Loaded

TRL_STATE = "trainer_state.json"


def load(path: Path) -> Loaded:
    """Read one run's source: a file, a verl dump directory, a TensorBoard directory or a TRL output directory."""
    if not path.exists():
        raise AnalyzeError(f"{path}: no such file or directory")
    return _load_directory(path) if path.is_dir() else _load_file(path)


def load_dumps(path: Path) -> Loaded:
    """A verl generation dump (file or directory); the reader for --val, where nothing else is accepted."""
    if path.is_dir():
        files = dumps.dump_files(path)
        if not files:
            raise AnalyzeError(f"{path}: no verl dump files ({{step}}.jsonl) in this directory")
    else:
        if not path.exists():
            raise AnalyzeError(f"{path}: no such file or directory")
        first = _first_jsonl_record(path)
        if not dumps.is_dump_record(first):
            raise AnalyzeError(f"{path}: not a verl generation dump (first record has keys {_keys(first)})")
        files = [path]
    return Loaded(path, "verl generation dump", samples=dumps.read_dumps(files))


def _load_directory(path: Path) -> Loaded:
    if dumps.dump_files(path):
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
        if dumps.is_dump_record(first):
            return load_dumps(path)
        if isinstance(first, dict) and "step" in first and isinstance(first.get("data"), dict):
            return Loaded(path, "verl file tracker", scalars=tracker_logs.read_verl_file_log(path))
        if isinstance(first, dict) and any(key in first for key in tracker_logs.STEP_COLUMNS):
            return Loaded(path, "wandb history JSON lines", scalars=tracker_logs.read_wandb_jsonl(path))
        raise AnalyzeError(
            f"{path}: JSON lines of an unknown kind (first record has keys {_keys(first)}); expected a verl "
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


def _keys(value: Any) -> str:
    return ", ".join(sorted(value)) if isinstance(value, dict) else type(value).__name__
