"""The binary math reward, as verl calls a custom reward function::

    reward:
      custom_reward_function:
        path: pkg://avspo_plugin.math_reward.reward
        name: compute_score

(verl 0.9 ignores a top-level one). 1.0 when math-verify finds answer and reference equal, or failing that their
normalised strings match; else 0.0, with ``reason`` saying why (malformed output never raises).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

from .answer import (
    TRAINING_SOURCES,
    answer_parts,
    check_answer_sources,
    extract_answer,
    grading_form,
    normalize_answer,
)
from .verify import DEFAULT_TIMEOUT_S, math_verify_equal, worker_context

# reason values: a small fixed vocabulary, so they can be counted over a run.
CORRECT_MATH_VERIFY = "correct: math-verify"
CORRECT_STRING = "correct: normalised string match"
WRONG = "wrong"
NO_ANSWER = "no answer found"
EMPTY_OUTPUT = "empty output"
MALFORMED_OUTPUT = "malformed output"
BAD_REFERENCE = "bad reference answer"
INTERNAL_ERROR = "scoring error"
ANSWER_TOO_LONG = "answer too long"

# The longest answer graded (every MATH, GSM8K, AIME/AMC reference is under 200 characters): a longer one is a
# degenerate output, scored 0 without normalising it or handing it to math-verify.
MAX_ANSWER_CHARS = 1_000


@dataclass(frozen=True)
class MathScore:
    score: float
    acc: bool
    pred: str  # the extracted answer ("" when none); verl uses "pred" for majority-vote metrics
    answer_source: str  # boxed | answer_sentence | answer_is | last_number | none
    reason: str
    detail: str  # what math-verify said, or the error


def _result(correct: bool, pred: str, source: str, reason: str, detail: str = "") -> MathScore:
    return MathScore(float(correct), correct, pred, source, reason, detail)


def reference_text(ground_truth: Any) -> str | None:
    """The reference answer as text: strings as they are, numbers without a spurious ``.0``,
    a one-element list as its element, longer lists joined with commas; None when unusable."""
    if hasattr(ground_truth, "tolist"):  # numpy arrays and scalars, as verl's batches hold them
        ground_truth = ground_truth.tolist()
    if isinstance(ground_truth, bool):
        return None
    if isinstance(ground_truth, int):
        return str(ground_truth)
    if isinstance(ground_truth, float):
        return str(int(ground_truth)) if ground_truth.is_integer() else repr(ground_truth)
    if isinstance(ground_truth, str):
        return ground_truth.strip() or None
    if isinstance(ground_truth, Sequence) and not isinstance(ground_truth, (bytes, bytearray)):
        # lists, tuples, OmegaConf ListConfig
        parts = [reference_text(item) for item in ground_truth]
        if not parts or any(part is None for part in parts):
            return None
        return parts[0] if len(parts) == 1 else ", ".join(parts)  # type: ignore[arg-type]
    return None


def score_answer(
    solution_str: Any,
    ground_truth: Any,
    *,
    answer_sources: Sequence[str],
    timeout_s: int = DEFAULT_TIMEOUT_S,
) -> MathScore:
    """Score one model output against one reference with the answer rule ``answer_sources``
    (TRAINING_SOURCES or EVALUATION_SOURCES; see the module docstring)."""
    if not isinstance(solution_str, str):
        return _result(False, "", "none", MALFORMED_OUTPUT, f"output is {type(solution_str).__name__}, not text")
    gold = reference_text(ground_truth)
    if gold is None:
        return _result(False, "", "none", BAD_REFERENCE, f"reference {ground_truth!r} is not a usable answer")
    if not solution_str.strip():
        return _result(False, "", "none", EMPTY_OUTPUT)
    gold_form = grading_form(gold) or gold
    extraction = extract_answer(solution_str, answer_sources, parts=len(answer_parts(gold_form)))
    if extraction.answer is None:
        return _result(False, "", "none", NO_ANSWER)
    pred, source = extraction.answer, extraction.source
    if len(pred) > MAX_ANSWER_CHARS:
        return _result(False, pred[:MAX_ANSWER_CHARS], source, ANSWER_TOO_LONG, f"{len(pred)} characters")
    verdict = math_verify_equal(gold_form, grading_form(pred) or pred, timeout_s)
    if verdict.equal:
        return _result(True, pred, source, CORRECT_MATH_VERIFY, verdict.note)
    if normalize_answer(pred) == normalize_answer(gold):
        return _result(True, pred, source, CORRECT_STRING, verdict.note)
    return _result(False, pred, source, WRONG, verdict.note)


def compute_score(
    data_source: Any,
    solution_str: Any,
    ground_truth: Any,
    extra_info: Any = None,
    answer_sources: Sequence[str] = TRAINING_SOURCES,
    timeout_s: int = DEFAULT_TIMEOUT_S,
    **_host_kwargs: Any,
) -> dict[str, Any]:
    """verl's reward-function signature: the fields of :class:`MathScore` as a dict; never raises but for an unknown
    name in ``answer_sources`` (a configuration error). Every benchmark is scored alike; ``data_source``,
    ``extra_info`` and other keyword arguments verl passes are ignored."""
    sources = check_answer_sources(answer_sources)
    try:
        return asdict(score_answer(solution_str, ground_truth, answer_sources=sources, timeout_s=timeout_s))
    except Exception as err:  # a reward must not take a training run down over one sample
        return asdict(_result(False, "", "none", INTERNAL_ERROR, f"{type(err).__name__}: {err}"))


def _score_pair(pair: tuple[Any, Any], **settings: Any) -> MathScore:
    return score_answer(*pair, **settings)


def available_cpus() -> int:
    """The CPUs this process may run on: its CPU affinity, capped by ``SLURM_CPUS_PER_TASK`` when set
    (``os.cpu_count()`` counts the whole machine, which overloads a shared node)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows: no affinity API
        cpus = os.cpu_count() or 1
    slurm = os.environ.get("SLURM_CPUS_PER_TASK", "")
    if slurm.isdigit() and int(slurm) > 0:
        cpus = min(cpus, int(slurm))
    return max(1, cpus)


def score_many(
    pairs: Sequence[tuple[Any, Any]],
    *,
    answer_sources: Sequence[str],
    workers: int | None = None,
    timeout_s: int = DEFAULT_TIMEOUT_S,
) -> list[MathScore]:
    """Scores of many (output, reference) pairs with the answer rule ``answer_sources``, in order, on
    ``workers`` processes (default: :func:`available_cpus`; 1 scores here). Each worker scores in its
    main thread, where math-verify's timeouts work."""
    score = partial(_score_pair, answer_sources=check_answer_sources(answer_sources), timeout_s=timeout_s)
    workers = available_cpus() if workers is None else workers
    if workers <= 1 or len(pairs) < 2:
        return [score(pair) for pair in pairs]
    with ProcessPoolExecutor(workers, mp_context=worker_context()) as pool:
        return list(pool.map(score, pairs, chunksize=max(1, len(pairs) // (workers * 8))))
