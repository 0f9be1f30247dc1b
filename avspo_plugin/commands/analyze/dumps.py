"""verl's generation dumps (``trainer.rollout_data_dir``, ``trainer.validation_data_dir``): one ``{step}.jsonl`` per
step, one object per sample (input, output, gts, score, step). verl 0.9's v1 trainer adds ``uid`` =
``{prompt uid}_{session}_{output index}`` (an agent loop may write several outputs per session; verl's advantage uses
the last) and pads batches with rows of uid ``pad<32 hex>`` (left out, counted); without a uid (the legacy trainer)
samples are grouped by prompt text within the step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .run_logs import AnalyzeError, JsonLines, SampleLog, StepSamples

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


def read_dumps(files: Iterable[Path]) -> SampleLog:
    """Dump files (in step order) as per-step samples. A last file cut short loses its last step (it may be
    incomplete); a step found in two files, a missing or non-numeric field, or a malformed line is an error."""
    files = list(files)
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
            raise AnalyzeError(f"{where}: sample has no {key!r} (keys: {', '.join(sorted(record))})")
    score = record["score"]
    if not isinstance(score, (int, float)) or not math.isfinite(score):
        raise AnalyzeError(f"{where}: score {score!r} is not a finite number")
    step = record["step"]
    if isinstance(step, bool) or not isinstance(step, (int, float)) or step != int(step):
        raise AnalyzeError(f"{where}: step {step!r} is not an integer")
    uid = record.get("uid")
    prompt = record.get("input")
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
    if sessions:
        rows, grouping = _last_output_per_session(rows, notes), "uid (verl v1 key {uid}_{session}_{index})"
    elif with_uid:
        grouping = "uid"
    else:
        grouping = "prompt text within each step (the dump has no uid)"
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
        steps.append(StepSamples(step, np.asarray(scores, dtype=np.float64), np.asarray(groups, dtype=object),
                                 np.asarray(prompts, dtype=np.int64)))
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
