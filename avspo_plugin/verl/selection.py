"""Collapse-aware prompt selection in verl's trainers (``algorithm.avspo_selection.*``, docs/selection.md).

verl 0.9.1 draws the prompts of each step from a ``StatefulDataLoader`` over the sampler of
``verl.trainer.ppo.utils.create_rl_sampler`` (a random or sequential one; no custom prompt
sampler can be configured: ``trainer.v1.sampler.custom_sampler`` replaces the replay buffer,
which samples *after* generation). So the plugin's hooks on the trainers' dataloader builders
(legacy ``RayPPOTrainer._create_dataloader``, v1 ``PPOTrainer._init_dataloader``) rebuild the
training dataloader, with verl's own settings, over :class:`SelectiveSampler`: it draws candidates
from verl's sampler ``train_batch_size`` at a time, asks the core :class:`PromptSelector` which to
generate, and yields only those, so every batch is still full and an epoch keeps its length in
steps (a skipped prompt's place goes to the next candidate; the stream runs on into verl's next
permutation when needed).

The selector learns from the rewards of each step, keyed by the dataset's stable id field
(``id_key``): in the legacy trainer from the batch verl passes to ``compute_advantage`` (its rows
carry the dataset's fields); in the v1 trainer, whose advantage step sees only TransferQueue
fields, by remembering each prompt's id under its per-step uid when the dataloader hands it out
(``PPOTrainer._fetch_one_gen_batch``). Ages are counted in batches of ``train_batch_size``
prompts handed out: the training steps, unless dynamic sampling draws more per step.

State: the sampler's position (verl's sampler state, the chosen prompts not yet handed out) rides
in verl's own dataloader checkpoint (``data.pt``); the selector's history beside it in
``global_step_<N>/avspo_selection.json``, written before verl records the checkpoint.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler
from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.stateful import Stateful

from ..config import ConfigError, SelectionConfig
from ..core.selection import PromptSelector
from ..names import METRIC_PREFIX, SELECTION_STATE_FILE
from ..state_files import load_json, write_json
from .estimator import config_entry, to_plain

CONFIG_BLOCK = "algorithm.avspo_selection"
# uid -> prompt id entries kept for the v1 trainer (prompts handed out, awaiting their rewards), in
# batches of train_batch_size: more than any off-policy window verl allows.
REMEMBERED_BATCHES = 64

logger = logging.getLogger("avspo_plugin.verl")


def selection_config_from_algorithm(algorithm: Any) -> SelectionConfig:
    """The selection config of verl's ``algorithm`` block (a missing block: off). Raises ConfigError naming the key."""
    block = to_plain(config_entry(algorithm, "avspo_selection"))
    if block is not None and not isinstance(block, Mapping):
        raise ConfigError(
            f"{CONFIG_BLOCK} must be a block of keys ({', '.join(SelectionConfig.keys())}), got {block!r}"
        )
    return SelectionConfig.from_mapping(block, where=CONFIG_BLOCK)


def uses_selection(config: Any) -> bool:
    """Whether a full verl config turns prompt selection on (``algorithm.avspo_selection.enable``)."""
    block = config_entry(config_entry(config, "algorithm"), "avspo_selection")
    return bool(config_entry(block, "enable"))


# ----------------------------------------------------------------------------------------------
# Stable prompt ids


def ids_of_rows(columns: Any, num_rows: int, id_key: str, where: str) -> list:
    """Each row's stable id: the column ``id_key``, else the ``id_key`` entry of the ``extra_info`` column.

    ``index`` is always read from ``extra_info``: verl's RLHFDataset overwrites a row's ``index``
    with ``extra_info.index``, or 0 when there is none, so the column cannot tell a missing id.
    columns: a mapping from column name to the rows' values (``in`` and ``[]``). A row without the
    id is an error naming the field to set.
    """
    if id_key != "index" and id_key in columns:
        values = list(columns[id_key])
        described = f"column {id_key!r}"
    elif "extra_info" in columns:
        values = [info.get(id_key) if isinstance(info, Mapping) else None for info in columns["extra_info"]]
        described = f"extra_info.{id_key}"
    else:
        values, described = [None] * num_rows, f"column {id_key!r} or extra_info.{id_key}"
    missing = [row for row, value in enumerate(values) if value is None]
    if missing:
        raise ValueError(
            f"prompt selection needs a stable id per prompt, and {len(missing)} of {num_rows} rows of {where} have "
            f"no {described} (e.g. row {missing[0]}): write one into each row (verl's examples write "
            f"extra_info.index), or set {CONFIG_BLOCK}.id_key to a column or extra_info key that identifies each prompt"
        )
    return values


class _FrameColumns:
    """The columns of a Hugging Face ``datasets.Dataset`` (RLHFDataset.dataframe) as ``ids_of_rows`` reads them."""

    def __init__(self, frame: Any) -> None:
        self.frame = frame

    def __contains__(self, name: str) -> bool:
        return name in self.frame.column_names

    def __getitem__(self, name: str) -> Sequence:
        return self.frame[name]


def dataset_prompt_ids(dataset: Any, id_key: str) -> list:
    """The stable id of each prompt of verl's training dataset, by position.

    Read from the columns of ``dataset.dataframe`` (verl's RLHFDataset and its subclasses), else
    from every ``dataset[i]`` (a ``data.custom_cls`` dataset of another kind).
    """
    frame = getattr(dataset, "dataframe", None)
    if frame is not None and hasattr(frame, "column_names"):
        return ids_of_rows(_FrameColumns(frame), len(frame), id_key, "the training dataset")
    rows = [dataset[i] for i in range(len(dataset))]
    columns = {name: [row.get(name) for row in rows] for name in {id_key, "extra_info"} if any(name in r for r in rows)}
    return ids_of_rows(columns, len(rows), id_key, "the training dataset")


def sequence_scores(data: Any) -> torch.Tensor:
    """Each row's sequence reward (B,): its token-level scores summed, as verl's GRPO sums them (the
    rewards before any KL penalty; ``token_level_rewards`` where a caller set only those)."""
    tensors = data.batch
    key = "token_level_scores" if "token_level_scores" in tensors.keys() else "token_level_rewards"
    return tensors[key].sum(dim=-1)


# ----------------------------------------------------------------------------------------------
# The sampler


class SelectiveSampler(Sampler[int]):
    """verl's training sampler with the prompts the selector skips taken out, in batches that stay full.

    base: the sampler verl built (its order and its own checkpoint state are kept); prompt_ids: the
    stable id of each dataset position; batch_size: ``data.train_batch_size``, the candidates of one
    choice and the unit ages are counted in. One pass (``iter``) yields ``len(self)`` positions,
    whole batches of verl's epoch, drawing candidates from verl's sampler as long as needed.
    """

    def __init__(self, base: Sampler, prompt_ids: Sequence, selector: PromptSelector, batch_size: int) -> None:
        if len(prompt_ids) != len(base):
            raise ValueError(f"{len(prompt_ids)} prompt ids for a sampler over {len(base)} prompts")
        self.base = base
        self.prompt_ids = list(prompt_ids)
        self.selector = selector
        self.batch_size = int(batch_size)
        self.prompts_yielded = 0
        self._chosen: collections.deque[int] = collections.deque()
        self._base_iter: Iterator[int] | None = None
        self._base_consumed = 0

    def __len__(self) -> int:
        return len(self.base) // self.batch_size * self.batch_size

    def __iter__(self) -> Iterator[int]:
        return _Pass(self)

    @property
    def batches_done(self) -> int:
        """Whole batches of prompts handed out so far: the step the latest rewards belong to."""
        return self.prompts_yielded // self.batch_size

    def next_position(self) -> int:
        while not self._chosen:
            candidates = self._candidates(self.batch_size)
            # The step being filled (1-based, as verl's global steps).
            keep = self.selector.choose([self.prompt_ids[i] for i in candidates], step=self.batches_done + 1)
            self._chosen.extend(np.asarray(candidates)[keep].tolist())
        self.prompts_yielded += 1
        return self._chosen.popleft()

    def _candidates(self, count: int) -> list[int]:
        drawn: list[int] = []
        while len(drawn) < count:
            if self._base_iter is None:
                self._base_iter, self._base_consumed = iter(self.base), 0
            more = list(itertools.islice(self._base_iter, count - len(drawn)))
            self._base_consumed += len(more)
            drawn += more
            if len(drawn) < count:  # verl's sampler finished a pass: the next one continues the stream
                if not more and len(self.base) == 0:
                    raise ValueError("prompt selection over an empty training dataset")
                self._base_iter = None
        return drawn

    def state_dict(self) -> dict[str, Any]:
        """Where the stream stands: verl's sampler's own state (or how far its pass went), the chosen prompts not
        yet handed out, the prompts handed out so far, and the dataset's fingerprint."""
        base_state = self._base_iter.state_dict() if isinstance(self._base_iter, Stateful) else None
        return {
            "fingerprint": self.selector.fingerprint,
            "base_iter": base_state,
            "base_consumed": self._base_consumed if self._base_iter is not None else None,
            "chosen": list(self._chosen),
            "prompts_yielded": self.prompts_yielded,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("fingerprint") != self.selector.fingerprint:
            message = (
                f"the checkpoint's dataloader position is over another dataset (fingerprint {state.get('fingerprint')} "
                f"there, {self.selector.fingerprint} now)"
            )
            if self.selector.config.on_dataset_change == "error":
                raise ValueError(
                    f"{message}; resume with the same training data, or set {CONFIG_BLOCK}.on_dataset_change=reset"
                )
            logger.warning("%s: on_dataset_change=reset, so prompt selection starts a fresh pass", message)
            return
        self._chosen = collections.deque(int(i) for i in state["chosen"])
        self.prompts_yielded = int(state["prompts_yielded"])
        self._base_iter, self._base_consumed = None, 0
        if state["base_consumed"] is not None:
            self._base_iter = iter(self.base)
            if state["base_iter"] is not None and isinstance(self._base_iter, Stateful):
                self._base_iter.load_state_dict(state["base_iter"])
            else:
                # A sampler without state (verl's SequentialSampler): its pass is replayed to the same point.
                for _ in itertools.islice(self._base_iter, int(state["base_consumed"])):
                    pass
            self._base_consumed = int(state["base_consumed"])


class _Pass(Iterator[int]):
    """One pass of a SelectiveSampler (one verl epoch): ``len(sampler)`` positions; its state is how many."""

    def __init__(self, sampler: SelectiveSampler) -> None:
        self.sampler = sampler
        self.yielded = 0

    def __iter__(self) -> _Pass:
        return self

    def __next__(self) -> int:
        if self.yielded >= len(self.sampler):
            raise StopIteration
        self.yielded += 1
        return self.sampler.next_position()

    def state_dict(self) -> dict[str, Any]:
        return {"yielded": self.yielded}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.yielded = int(state["yielded"])


def with_sampler(loader: StatefulDataLoader, sampler: Sampler) -> StatefulDataLoader:
    """verl's dataloader rebuilt over ``sampler``, every other setting as verl made it."""
    return StatefulDataLoader(
        dataset=loader.dataset,
        batch_size=loader.batch_size,
        sampler=sampler,
        num_workers=loader.num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        drop_last=loader.drop_last,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        multiprocessing_context=loader.multiprocessing_context,
        generator=loader.generator,
        prefetch_factor=loader.prefetch_factor,
        persistent_workers=loader.persistent_workers,
        pin_memory_device=loader.pin_memory_device,
        in_order=loader.in_order,
        snapshot_every_n_steps=loader.snapshot_every_n_steps,
    )


# ----------------------------------------------------------------------------------------------
# The run: one per trainer process


@dataclass
class SelectionRun:
    """The selection of the trainer in this process: its sampler, its selector, and the uids it handed out."""

    config: SelectionConfig
    sampler: SelectiveSampler
    trainer: str
    rollouts_per_prompt: int
    # v1: uid of a prompt handed out -> its stable id, until its rewards come back.
    prompt_of_uid: dict = field(default_factory=dict)
    unidentified_rows: int = 0

    @property
    def selector(self) -> PromptSelector:
        return self.sampler.selector

    def remember(self, uids: Sequence[str], columns: Any, num_rows: int) -> None:
        """The prompts of a v1 dataloader batch: their per-step uids and the rows' fields holding the stable ids."""
        ids = ids_of_rows(columns, num_rows, self.config.id_key, "a training batch")
        self.prompt_of_uid.update(zip(uids, ids))
        excess = len(self.prompt_of_uid) - REMEMBERED_BATCHES * self.sampler.batch_size
        for uid in list(itertools.islice(self.prompt_of_uid, max(excess, 0))):
            del self.prompt_of_uid[uid]

    def observe(self, ids: Sequence, scores: torch.Tensor) -> None:
        """One batch of rewards, one row per response: ids (B,), sequence scores (B,)."""
        self.selector.observe(ids, scores, step=self.sampler.batches_done)

    def observe_uids(self, uids: Sequence[str], scores: torch.Tensor) -> None:
        """v1: rows keyed by their prompt's uid. Rows of uids not handed out by this run (verl's padding rows,
        prompts re-issued after an asynchronous resume) cannot be attributed: counted, warned about once."""
        known = np.fromiter((uid in self.prompt_of_uid for uid in uids), dtype=bool, count=len(uids))
        if not known.all():
            if self.unidentified_rows == 0:
                logger.warning(
                    "prompt selection: %d of %d rows have a uid this run did not hand out (verl's padding rows, or "
                    "prompts re-issued after a resume); their rewards are not learnt from (avspo/selection/"
                    "unidentified_rows counts them)", int((~known).sum()), len(uids),
                )  # fmt: skip
            self.unidentified_rows += int((~known).sum())
        rows = np.flatnonzero(known)
        self.observe([self.prompt_of_uid[uids[i]] for i in rows], scores[torch.from_numpy(rows)])

    def observe_evicted(self, value_of_uid: Mapping[str, float]) -> None:
        """v1 with DAPO's group filtering: groups verl evicted before the advantage step, each collapsed to
        one reward value ({uid: value}), observed as rollouts_per_prompt rows of that value."""
        if not value_of_uid:
            return
        uids = [uid for uid in value_of_uid for _ in range(self.rollouts_per_prompt)]
        values = torch.tensor(list(value_of_uid.values()), dtype=torch.float64)
        self.observe_uids(uids, values.repeat_interleave(self.rollouts_per_prompt))

    def pop_metrics(self) -> dict[str, float]:
        """The ``avspo/selection/*`` metrics since the last log (with the unidentified rows, when there were any)."""
        metrics = self.selector.pop_metrics(rollouts_per_prompt=self.rollouts_per_prompt)
        if self.unidentified_rows:
            metrics["selection/unidentified_rows"] = float(self.unidentified_rows)
            self.unidentified_rows = 0
        return {METRIC_PREFIX + name: value for name, value in metrics.items()}


_ACTIVE: SelectionRun | None = None


def active() -> SelectionRun | None:
    """This process's selection run, when its trainer has selection on."""
    return _ACTIVE


def attach(trainer: Any, kind: str) -> SelectionRun | None:
    """After verl built ``trainer.train_dataloader``: with selection on, rebuild it over a SelectiveSampler.

    kind: ``legacy`` or ``v1``. Raises ConfigError for a bad block, ValueError for a dataset without
    stable ids (naming the field to set) or with repeated ones.
    """
    global _ACTIVE
    config = selection_config_from_algorithm(trainer.config.algorithm)
    if not config.enable:
        _ACTIVE = None
        return None
    loader = trainer.train_dataloader
    ids = dataset_prompt_ids(loader.dataset, config.id_key)
    selector = PromptSelector(config, dataset_ids=ids, log=logger)
    sampler = SelectiveSampler(loader.sampler, ids, selector, batch_size=trainer.config.data.train_batch_size)
    trainer.train_dataloader = with_sampler(loader, sampler)
    _ACTIVE = SelectionRun(
        config=config, sampler=sampler, trainer=kind,
        rollouts_per_prompt=int(trainer.config.actor_rollout_ref.rollout.n),
    )  # fmt: skip
    logger.info(
        "prompt selection on (%s trainer): %d prompts keyed by %s, dataset fingerprint %s, %s",
        kind, len(ids), config.id_key, selector.fingerprint, config,
    )  # fmt: skip
    return _ACTIVE


def detach() -> None:
    """Forget this process's selection run (tests; a new trainer attaches its own)."""
    global _ACTIVE
    _ACTIVE = None


# ----------------------------------------------------------------------------------------------
# Checkpoints


def write_state(step_folder: str, run: SelectionRun) -> str:
    """The selector's state to ``step_folder/avspo_selection.json`` (atomically, flushed to disk); returns the path."""
    return write_json(os.path.join(step_folder, SELECTION_STATE_FILE), run.selector.state_dict())


def read_state(step_folder: str, run: SelectionRun) -> bool:
    """Restore the selector from ``step_folder``; False (with a warning) when that checkpoint has no selection state.

    A file that is damaged, cut short, has a field of the wrong type or comes from another dataset is a
    StateFileError naming it and what to do."""
    path = os.path.join(step_folder, SELECTION_STATE_FILE)
    if not os.path.exists(path):
        logger.warning(
            "resuming from %s, which has no %s (saved without prompt selection): the selection history starts "
            "empty", step_folder, SELECTION_STATE_FILE,
        )  # fmt: skip
        return False
    remedy = (
        f"To start the prompt-selection history empty, delete {path}; or resume from an earlier checkpoint "
        "(trainer.resume_mode=resume_path trainer.resume_from_path=<its global_step_N folder>)."
    )
    load_json(path, run.selector.load_state_dict, remedy)
    return True
