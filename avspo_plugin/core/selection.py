"""Collapse-aware prompt selection: skip, before generation, the prompts predicted to collapse again.

A prompt whose responses all got the same reward (a collapsed group, ACR's rule) teaches GRPO
nothing, and such prompts tend to stay collapsed on their next visits (GRESO, "Act Only When It
Pays", 2025). :class:`PromptSelector` keeps, per stable prompt id, the streak of consecutive
collapsed visits and the step of the last visit, learnt from the reward batches the estimator
already sees (:meth:`PromptSelector.observe`); before generation it skips the candidates predicted
to collapse, retrying each with a probability that grows with the time since its last visit, and
never skipping more than a set fraction of one choice (:meth:`PromptSelector.choose`).

Every rule is one function below, vectorised over the candidates (numpy, since the history is
checkpointed as JSON); the only Python loop over prompts maps their ids to history slots.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..config import SelectionConfig
from ..state_files import INT64_MAX, InRange, ListOf, MapOf, Matching, check_fields, renamed_keys
from .collapse import collapse_kinds, collapsed_groups
from .groups import group_stats, unique_labels

# Version of the dict that state_dict() returns and checkpoints hold.
STATE_FORMAT = 1
# Per-prompt history arrays of the state, in slot order.
HISTORY_KEYS = ("streak", "last_seen", "visits", "kind", "keep_prob")
STATE_KEYS = ("format", "fingerprint", "closed", "ids", *HISTORY_KEYS, "choices", "group_size", "totals")
# Keys of the state under their earlier names ({earlier name: name}), read as the key they became.
EARLIER_STATE_KEYS = {"regime": "kind"}

# Collapse kind of a prompt's last visit (the ``kind`` history array, as the state file holds it): not seen yet,
# split (rewards differ), collapsed at reward_low, at reward_high, or at another value.
NOT_SEEN, SPLIT, ALL_FAIL, ALL_PASS, OTHER_COLLAPSE = 0, 1, 2, 3, 4

METRIC_PREFIX = "selection/"

# name (after ``selection/``) -> meaning; the rates are over the choices / visits since the last pop.
SELECTION_METRIC_HELP: dict[str, str] = {
    "candidates": "Prompts offered to the selector (before generation).",
    "skipped": "Candidates skipped: not generated.",
    "skipped_fraction": "skipped / candidates.",
    "skipped_all_fail": "Skipped candidates whose last visit collapsed at reward_low.",
    "skipped_all_pass": "Skipped candidates whose last visit collapsed at reward_high.",
    "predicted": "Candidates predicted to collapse (min_collapsed_visits consecutive collapsed visits).",
    "retried": "Predicted candidates generated anyway (the exploration draw, or the max_skip_fraction cap).",
    "capped": "Predicted candidates the max_skip_fraction cap kept although their draw skipped them.",
    "rollouts_saved": "skipped x rollouts per prompt (the group size G).",
    "observed": "Prompts whose rewards were observed (one group per prompt id per call).",
    "observed_collapsed": "Observed prompts whose visit collapsed, of a kind in counted_collapses.",
    "precision": "Of the prompts predicted to collapse, the fraction that did: measured on the predicted prompts "
    "that were retried, each weighted by 1 / its retry probability so that it stands for the skipped ones too "
    "(one the cap kept weighs 1). Absent when no predicted prompt was observed.",
    "recall": "Of the visits that collapsed, the fraction predicted: weighted collapsed predicted prompts over "
    "those plus the collapsed unpredicted ones (generated with probability 1); only visits of prompts seen "
    "min_collapsed_visits times before count. Absent when none of them collapsed.",
    "known_prompts": "Prompts with a history (visited at least once).",
}

logger = logging.getLogger(__name__)


def predicted_to_collapse(streak: np.ndarray, min_collapsed_visits: int) -> np.ndarray:
    """1[s_i >= m]: prompt i's last m visits all collapsed (of a counted kind).  streak: (n,) int64 -> (n,) bool."""
    return streak >= min_collapsed_visits


def retry_probability(
    streak: np.ndarray, age: np.ndarray, explore: float, min_collapsed_visits: int, retry_half_life: float
) -> np.ndarray:
    """The probability that a candidate is generated: 1 unless predicted; for a predicted prompt

        p_i = 1 - (1 - explore ** (s_i - m + 1)) * 0.5 ** (a_i / h),

    s_i its streak of collapsed visits, m = min_collapsed_visits, a_i = steps since its last visit
    (>= 0), h = retry_half_life. At a_i = 0 it is explore**(s_i - m + 1): GRESO's skip rule, each
    further collapse multiplying the retry chance by explore; the chance of a skip then halves every h
    steps, so every prompt comes back with probability -> 1 however long its streak.
    streak, age: (n,) int64 -> (n,) float64 in [0, 1].
    """
    predicted = predicted_to_collapse(streak, min_collapsed_visits)
    extra = np.where(predicted, streak - min_collapsed_visits + 1, 1).astype(np.float64)
    skip_now = 1.0 - np.power(explore, extra)
    decay = np.power(0.5, np.maximum(age, 0).astype(np.float64) / retry_half_life)
    return np.where(predicted, 1.0 - skip_now * decay, 1.0)


def skip_mask(retry: np.ndarray, draws: np.ndarray, max_skip_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Candidate i is skipped when u_i >= p_i, u_i ~ U[0, 1), at most floor(f * n) of the n candidates.

    When more would be skipped, the floor(f * n) with the largest margin u_i - p_i stay skipped (the
    surest skips; ties go to the earlier candidate) and the rest are generated: the cap releases.
    retry, draws: (n,) float64; f = max_skip_fraction. Returns (skip (n,) bool, capped (n,) bool).
    """
    skip = draws >= retry
    limit = math.floor(max_skip_fraction * len(retry))
    capped = np.zeros_like(skip)
    if int(skip.sum()) > limit:
        margin = np.where(skip, draws - retry, -np.inf)
        order = np.argsort(-margin, kind="stable")
        release = order[limit : int(skip.sum())]
        capped[release] = True
        skip[release] = False
    return skip, capped


def counted_collapses(collapsed: np.ndarray, all_fail: np.ndarray, all_pass: np.ndarray, which: str) -> np.ndarray:
    """The collapses that extend a streak, as the key counted_collapses (``which``) chooses them: every collapse
    (all), or only those of one kind.  (N,) bool each."""
    return {"all": collapsed, "all_fail": all_fail, "all_pass": all_pass}[which]


def streak_after_visit(streak: np.ndarray, counted: np.ndarray) -> np.ndarray:
    """s_i <- s_i + 1 after a counted collapse, else 0.  (N,) int64, (N,) bool -> (N,) int64."""
    return np.where(counted, streak + 1, 0)


def visit_kinds(collapsed: np.ndarray, all_fail: np.ndarray, all_pass: np.ndarray) -> np.ndarray:
    """The collapse kind of each visit: SPLIT, ALL_FAIL, ALL_PASS or OTHER_COLLAPSE.  (N,) bool each -> (N,) int8."""
    return np.select([all_fail, all_pass, collapsed], [ALL_FAIL, ALL_PASS, OTHER_COLLAPSE], SPLIT).astype(np.int8)


def prediction_tallies(predicted: np.ndarray, counted: np.ndarray, keep_prob: np.ndarray) -> dict[str, float]:
    """The inverse-propensity sums behind precision and recall, over N observed prompts.

    A predicted prompt is observed only when retried, with probability p_i; weighing it by w_i = 1/p_i
    makes it stand for the predicted prompts skipped with it (unpredicted prompts have p_i = 1):
      hit = sum_{predicted} w_i c_i;  predicted_weight = sum_{predicted} w_i;  missed = sum_{not predicted} c_i,
    c_i = 1[the visit collapsed, of a counted kind]. precision = hit / predicted_weight,
    recall = hit / (hit + missed). predicted, counted: (N,) bool; keep_prob: (N,) float64 in (0, 1].
    """
    weight = 1.0 / keep_prob
    return {
        "hit": float((weight * (predicted & counted)).sum()),
        "predicted_weight": float((weight * predicted).sum()),
        "missed": float((~predicted & counted).sum()),
    }


def dataset_fingerprint(ids: Sequence[Hashable]) -> str:
    """A short hash of the set of prompt ids, independent of their order (3 and "3" differ)."""
    digest = hashlib.sha256("\n".join(sorted(repr(i) for i in ids)).encode())
    return f"{len(ids)}:{digest.hexdigest()[:16]}"


# What the selector counts, since the last pop and over the run; the metrics derive from these.
COUNTS = ("candidates", "skipped", "skipped_all_fail", "skipped_all_pass", "predicted", "retried", "capped",
          "observed", "observed_collapsed", "hit", "predicted_weight", "missed")  # fmt: skip


def _zero_counts() -> dict[str, float]:
    return dict.fromkeys(COUNTS, 0.0)


def id_list(prompt_ids: Any) -> list:
    """Prompt ids as a list of Python values (numpy and torch scalars unwrapped, no type coerced)."""
    if isinstance(prompt_ids, torch.Tensor):
        return prompt_ids.detach().reshape(-1).cpu().tolist()
    if isinstance(prompt_ids, np.ndarray):
        return prompt_ids.reshape(-1).tolist()
    return [i.item() if isinstance(i, np.generic) else i for i in prompt_ids]


@dataclass(frozen=True)
class Visits:
    """One batch of rewards grouped by prompt (N distinct ids, sorted; B rows).

    ids: (N,) the prompt ids; counted: (N,) bool, collapsed, of a kind in counted_collapses; kind: (N,) int8
    collapse kinds (SPLIT, ALL_FAIL, ALL_PASS, OTHER_COLLAPSE); size: (N,) int64 responses per prompt;
    row_visit: (B,) int64, each row's position in ids.
    """

    ids: np.ndarray
    counted: np.ndarray
    kind: np.ndarray
    size: np.ndarray
    row_visit: np.ndarray


class PromptSelector:
    """Per-prompt collapse history and the skip decision before generation.

    dataset_ids: the stable ids of every prompt of the training set, when known (a host reads them
    from the dataset's ``config.id_key`` field): they must be unique, any other id is then an error,
    and a checkpoint's state must come from the same set. Without them ids are learnt as they come.
    log: where a reset on a dataset change is reported.
    """

    def __init__(
        self,
        config: SelectionConfig,
        dataset_ids: Sequence[Hashable] | None = None,
        log: logging.Logger = logger,
    ) -> None:
        self.config = config
        self.log = log
        self._closed = dataset_ids is not None
        self._ids: list = []
        self._slots: dict = {}
        self._history = {key: np.zeros(0, dtype=dtype) for key, dtype in _HISTORY_DTYPES.items()}
        self._choices = 0
        self._group_size: int | None = None
        self._pending = _zero_counts()
        self._totals = _zero_counts()
        if dataset_ids is not None:
            ids = self._checked_ids(id_list(dataset_ids), "the dataset")
            repeated = [i for i, n in Counter(ids).items() if n > 1]
            if repeated:
                raise ValueError(
                    f"prompt selection needs a unique id per prompt in the dataset field {self.config.id_key!r}; "
                    f"{len(repeated)} id(s) repeat, e.g. {repeated[:5]!r}: give every prompt its own id, or set "
                    f"algorithm.avspo_selection.id_key to a field that has one"
                )
            self._add(ids)
        self._fingerprint = dataset_fingerprint(self._ids) if self._closed else None

    # ---- ids -> slots (the one loop over prompts)

    def _checked_ids(self, ids: list, where: str) -> list:
        bad = [i for i in ids if isinstance(i, bool) or not isinstance(i, (int, str))]
        if bad:
            raise ValueError(
                f"prompt ids from {where} (field {self.config.id_key!r}) must be int or str, so that checkpoints "
                f"hold them; got {type(bad[0]).__name__} {bad[0]!r} ({len(bad)} of {len(ids)})"
            )
        return ids

    def _add(self, ids: list) -> None:
        new = [i for i in dict.fromkeys(ids) if i not in self._slots]
        start = len(self._ids)
        self._slots.update((i, start + k) for k, i in enumerate(new))
        self._ids.extend(new)
        for key, dtype in _HISTORY_DTYPES.items():
            fill = np.full(len(new), _HISTORY_FILL[key], dtype=dtype)
            self._history[key] = np.concatenate([self._history[key], fill])

    def slots(self, prompt_ids: Sequence[Hashable], where: str = "choose") -> np.ndarray:
        """History slots of the ids (n,) int64; unknown ids are an error when the dataset's ids were given."""
        ids = self._checked_ids(id_list(prompt_ids), where)
        if self._closed:
            unknown = [i for i in dict.fromkeys(ids) if i not in self._slots]
            if unknown:
                raise ValueError(
                    f"{where}: {len(unknown)} prompt id(s) not in the training dataset the selector was built for "
                    f"({len(self._ids)} prompts, id field {self.config.id_key!r}), e.g. {unknown[:5]!r}"
                )
        else:
            self._add(ids)
        return np.fromiter((self._slots[i] for i in ids), dtype=np.int64, count=len(ids))

    # ---- the two calls of a step

    def predicted(self, prompt_ids: Sequence[Hashable]) -> np.ndarray:
        """Whether each id's history predicts a collapse now (n,) bool; changes no history."""
        slots = self.slots(prompt_ids, "predicted")  # first: it may add slots, replacing the history arrays
        return predicted_to_collapse(self._history["streak"][slots], self.config.min_collapsed_visits)

    def choose(self, prompt_ids: Sequence[Hashable], step: int) -> np.ndarray:
        """Which candidates to generate at ``step``: a keep mask (n,) bool (see retry_probability, skip_mask).

        The draws come from a generator seeded with (seed, step, number of choices made before), so a
        run (and its resume from a checkpoint) reproduces. Disabled selection keeps everything.
        """
        slots = self.slots(prompt_ids, "choose")
        if not self.config.enable:
            return np.ones(len(slots), dtype=bool)
        history, config = self._history, self.config
        streak = history["streak"][slots]
        predicted = predicted_to_collapse(streak, config.min_collapsed_visits)
        age = int(step) - history["last_seen"][slots]
        retry = retry_probability(streak, age, config.explore, config.min_collapsed_visits, config.retry_half_life)
        draws = np.random.default_rng((config.seed, int(step), self._choices)).random(len(slots))
        self._choices += 1
        skip, capped = skip_mask(retry, draws, config.max_skip_fraction)
        kept_predicted = predicted & ~skip
        # The propensity the next observation of a retried prompt is weighed by (prediction_tallies); a
        # prompt the cap kept counts as itself alone (its draw had skipped it).
        explored = kept_predicted & ~capped
        history["keep_prob"][slots[explored]] = retry[explored]
        kind = history["kind"][slots]
        self._count(
            candidates=len(slots), skipped=skip.sum(), predicted=predicted.sum(), retried=kept_predicted.sum(),
            capped=capped.sum(), skipped_all_fail=(skip & (kind == ALL_FAIL)).sum(),
            skipped_all_pass=(skip & (kind == ALL_PASS)).sum(),
        )
        return ~skip

    def visits(self, prompt_ids_per_row: Sequence[Hashable], scores: torch.Tensor, where: str = "observe") -> Visits:
        """One batch of rewards as visits: rows (B,) grouped by prompt id, scores (B,) sequence rewards.

        Each distinct id is one visit: collapsed when its >= 2 rewards have std < collapse_tol (ACR's
        rule, unbiased std), of kind all-fail / all-pass when their value is reward_low / reward_high.
        Changes no history.
        """
        scores = torch.as_tensor(scores).detach().reshape(-1).to(torch.float64).cpu()
        ids = self._checked_ids(id_list(prompt_ids_per_row), where)
        labels = np.empty(len(ids), dtype=object)
        labels[:] = ids
        if labels.shape[0] != scores.shape[0]:
            raise ValueError(f"{where}: {labels.shape[0]} prompt ids for {scores.shape[0]} scores; need one id per row")
        bad = ~torch.isfinite(scores)
        if bool(bad.any()):
            first = int(bad.nonzero()[0])
            raise ValueError(
                f"{where}: {int(bad.sum())} non-finite reward(s); the first is {float(scores[first])} at row {first}, "
                f"prompt id {labels[first]!r}"
            )
        try:
            uniques, group_ids = unique_labels(labels, scores.device)
        except ValueError:
            other = next(x for x in ids if type(x) is not type(ids[0]))
            raise ValueError(
                f"{where}: prompt ids (field {self.config.id_key!r}) mix {type(ids[0]).__name__} and "
                f"{type(other).__name__} (e.g. {ids[0]!r} and {other!r}): one dataset needs one id type"
            ) from None
        stats = group_stats(scores, group_ids, len(uniques), torch.ones_like(scores, dtype=torch.bool), ddof=1)
        collapsed_t = collapsed_groups(stats, self.config.collapse_tol)
        all_fail_t, all_pass_t = collapse_kinds(collapsed_t, stats, self.config.reward_low, self.config.reward_high)
        collapsed, all_fail, all_pass = (t.numpy() for t in (collapsed_t, all_fail_t, all_pass_t))
        return Visits(
            ids=uniques,
            counted=counted_collapses(collapsed, all_fail, all_pass, self.config.counted_collapses),
            kind=visit_kinds(collapsed, all_fail, all_pass),
            size=stats.count.numpy().astype(np.int64),
            row_visit=group_ids.numpy(),
        )

    def judged(self, prompt_ids: Sequence[Hashable]) -> np.ndarray:
        """Whether each id has the min_collapsed_visits earlier visits a prediction needs (n,) bool; changes no history."""
        slots = self.slots(prompt_ids, "judged")
        return self._history["visits"][slots] >= self.config.min_collapsed_visits

    def observe(self, prompt_ids_per_row: Sequence[Hashable], scores: torch.Tensor, step: int) -> None:
        """Learn from one batch of rewards at ``step``: rows (B,) grouped by prompt id, scores (B,) (see visits)."""
        visits = self.visits(prompt_ids_per_row, scores)
        if len(visits.ids) == 0:
            return
        slots = self.slots(visits.ids, "observe")
        history, counted = self._history, visits.counted
        # Only prompts with min_collapsed_visits earlier visits could have been predicted: the others are not judged.
        judged = history["visits"][slots] >= self.config.min_collapsed_visits
        predicted = predicted_to_collapse(history["streak"][slots], self.config.min_collapsed_visits)
        tallies = prediction_tallies(predicted[judged], counted[judged], history["keep_prob"][slots][judged])
        history["streak"][slots] = streak_after_visit(history["streak"][slots], counted)
        history["last_seen"][slots] = int(step)
        history["visits"][slots] += 1
        history["kind"][slots] = visits.kind
        history["keep_prob"][slots] = 1.0
        self._group_size = int(visits.size.max())
        self._count(observed=len(slots), observed_collapsed=counted.sum(), **tallies)

    # ---- metrics

    def _count(self, **counts: Any) -> None:
        for name, value in counts.items():
            self._pending[name] += float(value)
            self._totals[name] += float(value)

    def pop_metrics(self, rollouts_per_prompt: int | None = None) -> dict[str, float]:
        """The ``selection/*`` metrics of the choices and observations since the last pop (SELECTION_METRIC_HELP).

        rollouts_per_prompt: G, for rollouts_saved (default: the largest group observed last).
        {} when nothing was chosen or observed since the last pop.
        """
        pending, self._pending = self._pending, _zero_counts()
        if not pending["candidates"] and not pending["observed"]:
            return {}
        return self._metrics(pending, rollouts_per_prompt)

    def totals(self, rollouts_per_prompt: int | None = None) -> dict[str, float]:
        """The same metrics over the whole run so far (they survive a resume through the state)."""
        return self._metrics(self._totals, rollouts_per_prompt)

    def _metrics(self, counts: Mapping[str, float], rollouts_per_prompt: int | None) -> dict[str, float]:
        group_size = self._group_size if rollouts_per_prompt is None else rollouts_per_prompt
        metrics = {name: counts[name] for name in ("candidates", "skipped", "skipped_all_fail", "skipped_all_pass",
                                                   "predicted", "retried", "capped", "observed",
                                                   "observed_collapsed")}  # fmt: skip
        metrics["skipped_fraction"] = counts["skipped"] / counts["candidates"] if counts["candidates"] else 0.0
        # Nothing is skipped before a prompt was observed, so G is known whenever skipped > 0.
        metrics["rollouts_saved"] = counts["skipped"] * (group_size or 0)
        if counts["predicted_weight"] > 0:
            metrics["precision"] = counts["hit"] / counts["predicted_weight"]
        if counts["hit"] + counts["missed"] > 0:
            metrics["recall"] = counts["hit"] / (counts["hit"] + counts["missed"])
        metrics["known_prompts"] = float((self._history["visits"] > 0).sum())
        return {METRIC_PREFIX + name: float(value) for name, value in metrics.items()}

    # ---- checkpoints

    @property
    def fingerprint(self) -> str | None:
        """The dataset fingerprint (size:hash of the id set) when the dataset's ids were given, else None."""
        return self._fingerprint

    def state_dict(self) -> dict[str, Any]:
        """The history, the run's totals and the draw counter, as JSON-able lists (pending metrics are not kept)."""
        return {
            "format": STATE_FORMAT,
            "fingerprint": self._fingerprint,
            "closed": self._closed,
            "ids": list(self._ids),
            **{key: self._history[key].tolist() for key in HISTORY_KEYS},
            "choices": self._choices,
            "group_size": self._group_size,
            "totals": dict(self._totals),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from :meth:`state_dict`'s dict.

        A state from another dataset (its fingerprint differs from this selector's) is an error naming
        both, unless on_dataset_change is reset: then the history starts afresh, with a warning.
        """
        if not isinstance(state, Mapping):
            raise ValueError(f"prompt-selection state should be an object, found {type(state).__name__}")
        state = renamed_keys(state, EARLIER_STATE_KEYS, "prompt-selection state")
        missing = [key for key in STATE_KEYS if key not in state]
        if missing:
            raise ValueError(f"prompt-selection state lacks {missing}; it has {sorted(state)}")
        check_fields(state, STATE_FIELDS, "prompt-selection state")
        if state["format"] != STATE_FORMAT:
            raise ValueError(
                f"prompt-selection state has format {state['format']!r}; this version of avspo_plugin reads "
                f"format {STATE_FORMAT}"
            )
        if self._closed and state["fingerprint"] != self._fingerprint:
            message = (
                f"the checkpoint's prompt-selection state is from another dataset: {_described(state['fingerprint'])} "
                f"there, {_described(self._fingerprint)} now (id field {self.config.id_key!r})"
            )
            if self.config.on_dataset_change == "error":
                raise ValueError(
                    f"{message}; resume with the same training data, or set "
                    "algorithm.avspo_selection.on_dataset_change=reset to start the history afresh"
                )
            self.log.warning("%s: on_dataset_change=reset, so the selection history starts afresh", message)
            return
        lengths = {key: len(state[key]) for key in ("ids", *HISTORY_KEYS)}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"prompt-selection state has history lists of different lengths: {lengths}")
        ids = self._checked_ids(list(state["ids"]), "the checkpoint")
        if len(set(ids)) != len(ids):
            seen: dict = {}
            first, again = next((seen[i], k) for k, i in enumerate(ids) if seen.setdefault(i, k) != k)
            raise ValueError(f"prompt-selection state: field ids repeats {ids[again]!r} (ids[{first}] and ids[{again}]); "
                             "allowed: one entry per prompt")
        self._closed = self._closed or bool(state["closed"])
        self._fingerprint = state["fingerprint"] if self._fingerprint is None else self._fingerprint
        self._ids = ids
        self._slots = {i: k for k, i in enumerate(ids)}
        self._history = {key: np.asarray(state[key], dtype=dtype) for key, dtype in _HISTORY_DTYPES.items()}
        self._choices = int(state["choices"])
        self._group_size = None if state["group_size"] is None else int(state["group_size"])
        self._totals = {name: float(state["totals"].get(name, 0.0)) for name in COUNTS}
        self._pending = _zero_counts()


_HISTORY_DTYPES = {"streak": np.int64, "last_seen": np.int64, "visits": np.int64, "kind": np.int8,
                   "keep_prob": np.float64}  # fmt: skip
_COUNT = InRange(int, 0, INT64_MAX)
# The type and range of every field of state_dict(), checked on load. A keep_prob is a probability that weighs
# an observation by its inverse; the totals are counts and sums of such weights.
STATE_FIELDS = {
    "format": int, "fingerprint": (None, Matching(r"[0-9]+:[0-9a-f]{16}", "<number of prompts>:<16 hex digits>")),
    "closed": bool, "ids": ListOf((int, str)),
    "streak": ListOf(_COUNT), "last_seen": ListOf(_COUNT), "visits": ListOf(_COUNT),
    "kind": ListOf(InRange(int, NOT_SEEN, OTHER_COLLAPSE)), "keep_prob": ListOf(InRange(float, 0.0, 1.0, low_open=True)),
    "choices": _COUNT, "group_size": (None, InRange(int, 1, INT64_MAX)), "totals": MapOf(InRange(float, 0.0)),
}
# A prompt never seen: no streak, last seen "never" (its age does not matter: it is not predicted).
_HISTORY_FILL = {"streak": 0, "last_seen": 0, "visits": 0, "kind": NOT_SEEN, "keep_prob": 1.0}


def _described(fingerprint: str | None) -> str:
    if fingerprint is None:
        return "a dataset of unknown ids"
    size, digest = fingerprint.split(":")
    return f"{size} prompts (fingerprint {digest})"
