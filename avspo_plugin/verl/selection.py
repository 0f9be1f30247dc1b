"""Collapse-aware prompt selection in verl's trainers (``algorithm.avspo_selection.*``, docs/using/selection.md).

verl 0.9.1 draws the prompts of each step from a ``StatefulDataLoader`` over the sampler of
``verl.trainer.ppo.utils.create_rl_sampler`` (a random or sequential one; no custom prompt
sampler can be configured: ``trainer.v1.sampler.custom_sampler`` replaces the replay buffer,
which samples *after* generation). So the plugin's hooks on the trainers' dataloader builders
(legacy ``RayPPOTrainer._create_dataloader``, v1 ``PPOTrainer._init_dataloader``) rebuild the
training dataloader, with verl's own settings, over :class:`~avspo_plugin.verl.sampler.SelectiveSampler`,
which hands out only the prompts the selector chooses, in full batches.

The selector learns from the rewards of each step, keyed by the dataset's stable id field
(``id_key``): in the legacy trainer from the batch verl passes to ``compute_advantage`` (its rows
carry the dataset's fields); in the v1 trainer, whose advantage step sees only TransferQueue
fields, by remembering each prompt's id under its per-step uid when the dataloader hands it out
(``PPOTrainer._fetch_one_gen_batch``), and from the groups DAPO's group filtering evicts
(``ReplayBuffer._evict_terminal_groups``). Ages are counted in batches of ``train_batch_size``
prompts handed out: the training steps, unless dynamic sampling draws more per step.

State: the sampler's position (verl's sampler state, the chosen prompts not yet handed out) rides
in verl's own dataloader checkpoint (``data.pt``); the selector's history beside it in
``global_step_<N>/avspo_selection.json``, written before verl records the checkpoint.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..config import SelectionConfig
from ..core.selection import PromptSelector
from ..import_patching import process_wide
from ..names import METRIC_PREFIX, PLUGIN_MODULE, SELECTION_STATE_FILE
from ..state_files import load_json, write_json
from .run_config import SELECTION_BLOCK, selection_config_from_algorithm
from .sampler import SelectiveSampler, with_sampler

# uid -> prompt id entries kept for the v1 trainer (prompts handed out, awaiting their rewards), in
# batches of train_batch_size: more than any off-policy window verl allows.
REMEMBERED_BATCHES = 64

logger = logging.getLogger("avspo_plugin.verl")


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
            f"extra_info.index), or set {SELECTION_BLOCK}.id_key to a column or extra_info key that identifies each prompt"
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


class AttachedRun:
    """The selection run of this process's trainer (None until a trainer with selection on builds its dataloader);
    one per process, whichever copy of this package asks."""

    def __init__(self) -> None:
        self.run: SelectionRun | None = None


def attached() -> AttachedRun:
    return process_wide(f"{PLUGIN_MODULE}.selection", AttachedRun)


def active() -> SelectionRun | None:
    """This process's selection run, when its trainer has selection on."""
    return attached().run


def attach(trainer: Any, kind: str) -> SelectionRun | None:
    """After verl built ``trainer.train_dataloader``: with selection on, rebuild it over a SelectiveSampler.

    kind: ``legacy`` or ``v1``. Raises ConfigError for a bad block, ValueError for a dataset without
    stable ids (naming the field to set) or with repeated ones.
    """
    slot = attached()
    config = selection_config_from_algorithm(trainer.config.algorithm)
    if not config.enable:
        slot.run = None
        return None
    loader = trainer.train_dataloader
    ids = dataset_prompt_ids(loader.dataset, config.id_key)
    selector = PromptSelector(config, dataset_ids=ids, log=logger)
    sampler = SelectiveSampler(loader.sampler, ids, selector, batch_size=trainer.config.data.train_batch_size)
    trainer.train_dataloader = with_sampler(loader, sampler)
    slot.run = SelectionRun(
        config=config, sampler=sampler, trainer=kind,
        rollouts_per_prompt=int(trainer.config.actor_rollout_ref.rollout.n),
    )  # fmt: skip
    logger.info(
        "prompt selection on (%s trainer): %d prompts keyed by %s, dataset fingerprint %s, %s",
        kind, len(ids), config.id_key, selector.fingerprint, config,
    )  # fmt: skip
    return slot.run


def detach() -> None:
    """Forget this process's selection run (tests; a new trainer attaches its own)."""
    attached().run = None


def observe_rewards(data: Any, trainer: str) -> None:
    """Show this process's selection the rewards of an advantage step of ``trainer``: ``legacy``, the batch of
    ``compute_advantage`` (its rows carry the dataset's ids); ``v1``, that of
    ``compute_advantage_for_multi_trajectories`` (rows keyed by the uids handed out). Nothing when selection is
    off or runs in the other trainer."""
    run = active()
    if run is None or run.trainer != trainer:
        return
    if trainer == "legacy":
        run.observe(ids_of_rows(data.non_tensor_batch, len(data), run.config.id_key, "the step's batch"),
                    sequence_scores(data))  # fmt: skip
    else:
        run.observe_uids(list(data.non_tensor_batch["uid"]), sequence_scores(data))


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


# ----------------------------------------------------------------------------------------------
# Wrappers of verl's trainer methods


def dataloader_with_selection(kind: str) -> Callable[[Callable], Callable]:
    """Wraps a dataloader builder of the ``kind`` trainer (legacy ``_create_dataloader``, v1 ``_init_dataloader``):
    the training dataloader rebuilt over the selecting sampler when selection is on."""

    def make_wrapper(original: Callable) -> Callable:
        @functools.wraps(original)
        def build(self, *args, **kwargs):
            result = original(self, *args, **kwargs)
            attach(self, kind)
            return result

        return build

    return make_wrapper


def evict_with_selection(original: Callable) -> Callable:
    """Wraps v1 ``ReplayBuffer._evict_terminal_groups``: the groups DAPO's group filtering evicts, learnt from by
    the reward each group shared."""

    @functools.wraps(original)
    def _evict_terminal_groups(self, global_steps, partition_id, eviction_reasons, *args, **kwargs):
        run = active()
        if run is not None and run.trainer == "v1":
            # (stale, DAPO-filtered, failed uids, counts): the filtered ones, each with the reward its group shared.
            filtered = eviction_reasons[1]
            shared = getattr(self, "_dapo_classification_cache", {}).get(partition_id, {})
            values = {uid: shared[uid] for uid in filtered if shared.get(uid) is not None}
            if len(values) != len(filtered):
                logger.warning(
                    "prompt selection: verl evicted %d group(s) whose shared reward this verl does not expose "
                    "(ReplayBuffer._dapo_classification_cache); they are not learnt from", len(filtered) - len(values),
                )  # fmt: skip
            run.observe_evicted(values)
        return original(self, global_steps, partition_id, eviction_reasons, *args, **kwargs)

    return _evict_terminal_groups


def fetch_with_prompt_ids(original: Callable) -> Callable:
    """Wraps v1 ``PPOTrainer._fetch_one_gen_batch``: each prompt's stable id remembered under its per-step uid."""

    @functools.wraps(original)
    def _fetch_one_gen_batch(self, *args, **kwargs):
        batch = original(self, *args, **kwargs)
        run = active()
        if run is not None:
            uids = list(batch["uid"])
            columns = {key: list(batch[key]) for key in (run.config.id_key, "extra_info") if key in batch.keys()}
            run.remember(uids, columns, len(uids))
        return batch

    return _fetch_one_gen_batch
