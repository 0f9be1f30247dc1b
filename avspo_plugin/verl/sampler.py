"""The training sampler of prompt selection: verl's own sampler with the prompts the selector skips taken out.

verl 0.9.1 draws the prompts of each step from a ``StatefulDataLoader`` over the sampler of
``verl.trainer.ppo.utils.create_rl_sampler``. :class:`SelectiveSampler` draws candidates from that
sampler ``train_batch_size`` at a time, asks the core :class:`PromptSelector` which to generate, and
yields only those, so every batch is still full and an epoch keeps its length in steps (a skipped
prompt's place goes to the next candidate; the stream runs on into verl's next permutation when
needed). Its position rides in verl's own dataloader checkpoint (``data.pt``).
"""

from __future__ import annotations

import collections
import itertools
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from torch.utils.data import Sampler
from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.stateful import Stateful

from ..core.selection import PromptSelector
from .run_config import SELECTION_BLOCK

logger = logging.getLogger("avspo_plugin.verl")


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
                    f"{message}; resume with the same training data, or set {SELECTION_BLOCK}.on_dataset_change=reset"
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
