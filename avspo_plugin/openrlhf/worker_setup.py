"""The runtime route: the avspo estimator in an unmodified OpenRLHF, installed in each process.

:func:`setup_worker` is Ray's ``worker_process_setup_hook`` (``avspo openrlhf`` puts it in the
runtime_env of OpenRLHF's ``ray.init``). It imports nothing from OpenRLHF: it arranges that when a
process imports OpenRLHF's experience maker and trainer modules, the installed release is checked
(:mod:`.versions`) and their classes get

* ``RemoteExperienceMaker.compute_advantages_and_returns``: for estimator avspo, OpenRLHF's own method
  run as group_norm (FP32 promotion where the release has it, length penalties, prompt order,
  group_reward_std, KL penalty, reward clip, cumulative returns with gamma 1), where the group-normalised
  rewards it hands to ``compute_reward`` are replaced by
  :func:`~avspo_plugin.openrlhf.group_norm.group_advantages` of the same rows; any other estimator runs
  OpenRLHF's method untouched;
* ``BasePPOTrainer._compute_rollout_stats``: the ``avspo/*`` metrics joined to the rollout stats;
* ``BasePPOTrainer.save_logs_and_checkpoints``: the entropy-collapse flag from the step's logged
  entropy, and the avspo state into the checkpoints' client_states;
* ``BasePPOTrainer.restore_best_checkpoint_state``: the avspo state resumed from them.

These are what ``patches/openrlhf-0.11.2-avspo.patch`` adds to the source.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import torch

from ..import_patching import after_import, is_patched, is_watched, wrap
from ..names import ESTIMATOR
from .args import ArgLayout, layout_of, read_arg, write_arg
from .group_norm import (
    checkpoint_state,
    entropy_collapse_flag,
    group_advantages,
    load_checkpoint_state,
    rollout_stats,
)
from .versions import OPENRLHF, check_openrlhf

EXPERIENCE_MAKER_MODULE = "openrlhf.trainer.ppo_utils.experience_maker"
TRAINER_MODULE = "openrlhf.trainer.ppo_trainer"
SETUP_HOOK = f"{__name__}.setup_worker"
# OpenRLHF's estimator whose steps avspo shares; its group step is the one replaced.
GROUP_NORM = "group_norm"

# The wrapped method swaps a module function and the estimator name while it runs: one call at a time.
_CALL_LOCK = threading.Lock()


def setup_worker() -> None:
    """Ray's worker_process_setup_hook: install the avspo estimator in this worker process."""
    install()


def install() -> None:
    """Patch OpenRLHF's classes in this process: now if imported already, else when first imported."""
    for name, patch in PATCHES.items():
        after_import(name, patch)


def is_installed(cls: type, method: str) -> bool:
    return is_patched(getattr(cls, method))


def hook_state() -> dict[str, str]:
    """Per OpenRLHF module the hook patches, in this process: 'patched', 'waiting for import' or 'missing'."""
    state = {}
    for name in PATCHES:
        module = sys.modules.get(name)
        if module is None:
            state[name] = "waiting for import" if is_watched(name) else "missing"
        else:
            cls, method = PATCHED_METHOD[name]
            found = getattr(module, cls, None)
            state[name] = "patched" if found is not None and is_installed(found, method) else "missing"
    return state


def patch_experience_maker(module: ModuleType) -> None:
    check_openrlhf()
    maker = _require(module, "RemoteExperienceMaker", ("compute_advantages_and_returns",))
    _require(module, "compute_reward", ())
    wrap(maker, "compute_advantages_and_returns", lambda original: _advantages_and_returns(original, module))


def patch_trainer(module: ModuleType) -> None:
    check_openrlhf()
    methods = ("_compute_rollout_stats", "save_logs_and_checkpoints", "restore_best_checkpoint_state")
    trainer = _require(module, "BasePPOTrainer", methods)
    wrap(trainer, "_compute_rollout_stats", _with_rollout_stats)
    wrap(trainer, "save_logs_and_checkpoints", _saving_state)
    wrap(trainer, "restore_best_checkpoint_state", _restoring_state)


PATCHES: dict[str, Callable[[ModuleType], None]] = {
    EXPERIENCE_MAKER_MODULE: patch_experience_maker,
    TRAINER_MODULE: patch_trainer,
}
# One method each patch wraps: wrapped means the module's patch was applied.
PATCHED_METHOD = {
    EXPERIENCE_MAKER_MODULE: ("RemoteExperienceMaker", "compute_advantages_and_returns"),
    TRAINER_MODULE: ("BasePPOTrainer", "_compute_rollout_stats"),
}


def _advantages_and_returns(original: Callable, host: ModuleType) -> Callable:
    def compute_advantages_and_returns(self, experiences):
        args = self.strategy.args
        layout = layout_of(args)
        if read_arg(args, layout.estimator) != ESTIMATOR:
            return original(self, experiences)
        group_step = AvspoGroupStep(host.compute_reward, experiences, args, layout)
        with _CALL_LOCK, _running_as_group_norm(self, args, layout), _replaced(host, "compute_reward", group_step):
            experiences = original(self, experiences)
        group_step.check_complete()
        return experiences

    return compute_advantages_and_returns


class AvspoGroupStep:
    """OpenRLHF's ``compute_reward`` as its ``compute_advantages_and_returns`` calls it, with avspo's group step.

    The method calls ``compute_reward`` once per experience, in order, with that experience's rows of
    the group-normalised rewards. By the first call the rewards are shaped (length penalties applied,
    promoted where the release does), so the avspo advantages of the whole batch are computed then, from
    the same rewards and in the same prompt groups as group_norm's, and each call gets its rows.
    """

    def __init__(self, compute_reward: Callable, experiences: list, args: Any, layout: ArgLayout) -> None:
        self.compute_reward = compute_reward
        self.experiences = experiences
        self.args = args
        self.samples = read_arg(args, layout.n_samples_per_prompt)
        self.advantages: list[torch.Tensor] = []
        self.calls = 0

    def __call__(self, reward: torch.Tensor, *more: Any, **kwargs: Any) -> torch.Tensor:
        if self.calls == 0:
            self.advantages = self._avspo_advantages()
        if self.calls >= len(self.advantages) or reward.shape != self.advantages[self.calls].shape:
            raise RuntimeError(
                f"OpenRLHF's compute_advantages_and_returns called compute_reward a {self.calls + 1}th time with "
                f"rewards of shape {tuple(reward.shape)}; the avspo runtime route expects one call per experience "
                f"({len(self.experiences)}) with its rows. {_supported_releases()}"
            )
        advantage = self.advantages[self.calls]
        self.calls += 1
        return self.compute_reward(advantage, *more, **kwargs)

    def check_complete(self) -> None:
        if self.calls != len(self.experiences):
            raise RuntimeError(
                f"OpenRLHF's compute_advantages_and_returns called compute_reward {self.calls} time(s) for "
                f"{len(self.experiences)} experiences; the avspo runtime route replaces the group step in those "
                f"calls. {_supported_releases()}"
            )

    def _avspo_advantages(self) -> list[torch.Tensor]:
        """Each experience's avspo advantages (its rows), from the rewards as OpenRLHF has shaped them."""
        # experience.index holds each sample's row in the rollout batch, where a prompt's
        # n_samples_per_prompt samples are consecutive (dynamic batching reorders experiences).
        sizes = [len(experience.index) for experience in self.experiences]
        rows = torch.tensor([row for experience in self.experiences for row in experience.index])
        flat = torch.cat([experience.rewards for experience in self.experiences])
        by_prompt = torch.empty_like(flat)
        by_prompt[rows] = flat
        advantages = group_advantages(by_prompt.reshape(-1, self.samples), self.args)
        return list(advantages.reshape(-1)[rows].split(sizes))


@contextlib.contextmanager
def _running_as_group_norm(maker: Any, args: Any, layout: ArgLayout) -> Iterator[None]:
    """While open, OpenRLHF's method sees estimator group_norm: in ``args`` and in the maker's own copy."""
    saved = maker.advantage_estimator
    write_arg(args, layout.estimator, GROUP_NORM)
    maker.advantage_estimator = GROUP_NORM
    try:
        yield
    finally:
        write_arg(args, layout.estimator, ESTIMATOR)
        maker.advantage_estimator = saved


@contextlib.contextmanager
def _replaced(module: ModuleType, name: str, replacement: Any) -> Iterator[None]:
    saved = getattr(module, name)
    setattr(module, name, replacement)
    try:
        yield
    finally:
        setattr(module, name, saved)


def _with_rollout_stats(original: Callable) -> Callable:
    def _compute_rollout_stats(self, experiences):
        return {**original(self, experiences), **rollout_stats()}

    return _compute_rollout_stats


def _saving_state(original: Callable) -> Callable:
    def save_logs_and_checkpoints(self, global_step, logs_dict=None, client_states=None):
        logs_dict = {} if logs_dict is None else logs_dict
        logs_dict.update(entropy_collapse_flag(logs_dict))
        # The trainer's fit() passes the same dict on to save_best_checkpoint.
        client_states = {} if client_states is None else client_states
        client_states.update(checkpoint_state())
        return original(self, global_step, logs_dict, client_states)

    return save_logs_and_checkpoints


def _restoring_state(original: Callable) -> Callable:
    def restore_best_checkpoint_state(self, checkpoint_states):
        load_checkpoint_state(checkpoint_states)
        return original(self, checkpoint_states)

    return restore_best_checkpoint_state


def _require(module: ModuleType, name: str, methods: tuple[str, ...]) -> Any:
    found = getattr(module, name, None)
    missing = [name] if found is None else [f"{name}.{m}" for m in methods if not hasattr(found, m)]
    if missing:
        raise RuntimeError(f"OpenRLHF lacks {', '.join(missing)} in {module.__name__}. {_supported_releases()}")
    return found


def _supported_releases() -> str:
    installed = OPENRLHF.installed() or "(version unknown: no distribution metadata)"
    return f"The installed OpenRLHF is {installed}; the runtime route supports {OPENRLHF}."
