"""Where each dataset comes from, how its columns are read, and the verl parquet rows made of it.

A dataset is read from a local file or folder (parquet, JSON lines, JSON, CSV: what a hub snapshot
or another tool's export holds) or, when none is given, from the dataset hub through ``datasets``.
Column names differ between copies of the same benchmark (``problem`` / ``question`` /
``Problem``), so each spec lists the names it accepts, first match wins.

A verl row (what ``data.train_files`` / ``data.val_files`` read)::

    data_source   benchmark name (validation metrics are grouped by it)
    prompt        chat messages: the system instruction and the problem
    ability       "math"
    reward_model  {"style": "rule", "ground_truth": <reference answer>}
    extra_info    {"split", "index" (row in the source), "level" (MATH level or None), "type" (subject or None)}
"""

from __future__ import annotations

import csv
import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from avspo_plugin.math_reward.answer import gold_from_boxed_solution, gold_from_gsm8k, without_math_delimiters
from avspo_plugin.math_reward.reward import reference_text

# The Qwen2.5-Math chain-of-thought instruction; the reward reads \boxed{} first.
SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."

LOCAL_SUFFIXES = (".parquet", ".jsonl", ".json", ".csv")


class DataError(ValueError):
    """Input data that cannot be used: which file, record or field is bad, and what was expected."""


@dataclass(frozen=True)
class DatasetSpec:
    """How one dataset is found and read. ``reference`` says how the answer column becomes the
    reference answer: ``answer`` (as it is), ``boxed_solution`` (last \\boxed{} of a worked solution)
    or ``gsm8k`` (the number after ####)."""

    name: str
    title: str
    hub_id: str
    hub_config: str | None
    hub_split: str
    question_columns: tuple[str, ...]
    answer_columns: tuple[str, ...]
    reference: str = "answer"
    context_columns: tuple[str, ...] = ()

    def first_column(self, columns: Sequence[str], wanted: tuple[str, ...], what: str) -> str:
        for name in wanted:
            if name in columns:
                return name
        raise ValueError(
            f"{self.name}: no {what} column; expected one of {list(wanted)}, found {sorted(columns)}"
        )


MATH_TRAIN = DatasetSpec(
    "math", "MATH (train)", "DigitalLearningGmbH/MATH-lighteval", "default", "train",
    ("problem",), ("solution",), reference="boxed_solution",
)

# Evaluation benchmarks in the paper's table order.
BENCHMARKS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            "math500", "MATH-500", "HuggingFaceH4/MATH-500", None, "test",
            ("problem",), ("answer", "solution"), reference="answer",
        ),
        DatasetSpec(
            "gsm8k", "GSM8K", "openai/gsm8k", "main", "test", ("question",), ("answer",), reference="gsm8k",
        ),
        DatasetSpec(
            "minerva", "Minerva Math", "math-ai/minervamath", None, "test",
            ("question", "problem"), ("answer", "solution"), reference="answer",
        ),
        DatasetSpec(
            "olympiadbench", "OlympiadBench", "Hothan/OlympiadBench", "OE_TO_maths_en_COMP", "train",
            ("question", "problem"), ("final_answer", "answer"), context_columns=("context",),
        ),
        DatasetSpec("amc", "AMC", "AI-MO/aimo-validation-amc", None, "train", ("problem",), ("answer",)),
        DatasetSpec(
            "aime2024", "AIME-2024", "HuggingFaceH4/aime_2024", None, "train",
            ("problem", "Problem"), ("answer", "Answer"),
        ),
    )
}

# GSM8K's training split (7,473 problems), for the one-GPU A/B recipe (recipes/ab_1gpu.yaml); the benchmark above is
# its test split.
GSM8K_TRAIN = dataclasses.replace(BENCHMARKS["gsm8k"], title="GSM8K (train)", hub_split="train")



def _read_local_file(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    if path.suffix == ".jsonl":
        lines = path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = data.get("data") if isinstance(data, dict) else data
        if not isinstance(rows, list):
            raise ValueError(f"{path}: expected a list of records (or {{'data': [...]}})")
        return rows
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))
    raise ValueError(f"{path}: unsupported file type {path.suffix!r}; use one of {', '.join(LOCAL_SUFFIXES)}")


def read_local(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a local file, or of every data file in a folder (sorted, e.g. hub shards)."""
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in LOCAL_SUFFIXES and p.is_file())
        if not files:
            raise FileNotFoundError(f"{path}: folder holds no {', '.join(LOCAL_SUFFIXES)} file")
        return [row for file in files for row in _read_local_file(file)]
    return _read_local_file(path)


def read_hub(spec: DatasetSpec) -> list[dict[str, Any]]:
    """Rows of the dataset on the hub (needs ``datasets`` and network access)."""
    # Here, not at the top: only the hub needs `datasets` (about a second to import); local copies do not.
    try:
        import datasets
    except ImportError as err:
        raise RuntimeError(
            f"{spec.name}: no local path given and the `datasets` package is missing; "
            f"pass a local copy of {spec.hub_id}, or install the math extra (docs/using/recipes.md, section 1)"
        ) from err
    try:
        loaded = datasets.load_dataset(spec.hub_id, spec.hub_config, split=spec.hub_split)
    except Exception as err:
        raise RuntimeError(
            f"{spec.name}: could not load {spec.hub_id} (config {spec.hub_config}, split {spec.hub_split}) "
            f"from the hub: {type(err).__name__}: {err}. Pass a local copy instead."
        ) from err
    return [dict(row) for row in loaded]


def read_rows(spec: DatasetSpec, local: str | Path | None) -> list[dict[str, Any]]:
    return read_local(local) if local else read_hub(spec)


def _missing(value: Any) -> bool:
    if isinstance(value, float):
        return value != value  # NaN: a missing cell
    return value is None or (isinstance(value, str) and not value.strip())


def reference_of(spec: DatasetSpec, row: dict[str, Any], column: str) -> str:
    value = row[column]
    if spec.reference == "gsm8k":
        return gold_from_gsm8k(str(value))
    if spec.reference == "boxed_solution" or (column == "solution" and spec.reference == "answer"):
        return gold_from_boxed_solution(str(value))
    text = reference_text(value)
    if text is None:
        raise ValueError(f"reference answer {value!r} is empty or not text/number")
    # OlympiadBench writes final answers as "$\frac{1}{2}$", and several parts as "$3$, $-2$" or as a
    # list ["$3$", "$-2$"] (joined with ", " by reference_text): keep the LaTeX inside the delimiters.
    stripped = without_math_delimiters(text)
    if not stripped:
        raise ValueError(f"reference answer {value!r} is empty once its math delimiters are removed")
    return stripped


def parse_level(value: Any) -> int | None:
    """MATH's "Level 3" (or 3) as 3; "Level ?" and missing values as None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return int(value)
    match = re.fullmatch(r"\s*(?:Level\s*)?(\d+)\s*", str(value or ""))
    return int(match.group(1)) if match else None


def to_verl_rows(
    spec: DatasetSpec,
    rows: Sequence[dict[str, Any]],
    split: str,
    system_prompt: str = SYSTEM_PROMPT,
    keep: Callable[[dict[str, Any]], bool] | None = None,
) -> list[dict[str, Any]]:
    """verl rows of a dataset's raw rows; a row without a usable reference answer is an error naming it."""
    if not rows:
        raise ValueError(f"{spec.name}: no rows to prepare")
    columns = list(rows[0].keys())
    question_column = spec.first_column(columns, spec.question_columns, "question")
    answer_column = spec.first_column(columns, spec.answer_columns, "answer")
    context_column = next((c for c in spec.context_columns if c in columns), None)
    out = []
    for index, row in enumerate(rows):
        if keep is not None and not keep(row):
            continue
        question = row[question_column]
        if _missing(question):
            raise ValueError(f"{spec.name} row {index}: empty {question_column!r}")
        question = str(question).strip()
        if context_column and not _missing(row.get(context_column)):
            question = f"{str(row[context_column]).strip()}\n\n{question}"
        try:
            reference = reference_of(spec, row, answer_column)
        except ValueError as err:
            raise ValueError(f"{spec.name} row {index} ({answer_column!r}): {err}") from None
        subject = next((str(row[key]) for key in ("type", "subject") if not _missing(row.get(key))), None)
        extra_info = {"split": split, "index": index, "level": parse_level(row.get("level")), "type": subject}
        out.append(
            {
                "data_source": spec.name,
                "prompt": [
                    {"role": "system", "content": system_prompt},
                    {"role": "user", "content": question},
                ],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": reference},
                "extra_info": extra_info,
            }
        )
    return out


def write_parquet(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    # One fixed schema for every file: verl concatenates train/val files with `datasets`, which
    # refuses files whose columns differ (e.g. a level column that is all null in one benchmark).
    schema = pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
            (
                "extra_info",
                pa.struct(
                    [("split", pa.string()), ("index", pa.int64()), ("level", pa.int64()), ("type", pa.string())]
                ),
            ),
        ]
    )
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows), schema=schema), path)
    return path


def read_verl_parquet(path: str | Path) -> list[dict[str, Any]]:
    """verl rows back from a parquet this module wrote, as plain Python values (ints stay ints)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such parquet file")
    table = pq.read_table(path)
    missing = {"data_source", "prompt", "reward_model", "extra_info"} - set(table.column_names)
    if missing:
        raise ValueError(f"{path}: not a verl math parquet, missing column(s) {sorted(missing)}")
    return table.to_pylist()
