"""The runtime route: :func:`setup_worker` (Ray's ``worker_process_setup_hook``) wraps OpenRLHF's experience maker
and trainer on import to do what ``patches/openrlhf-0.11.2-avspo.patch`` adds: group_norm's step runs with avspo's
advantages, and the trainer logs the ``avspo/*`` metrics and checkpoints the avspo state.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from ..import_patching import after_import, is_patched, is_watched, wrap
from ..names import ESTIMATOR
from .args import arg_holder, layout_of, read_arg
from .group_norm import checkpoint_state, entropy_collapse_flag, group_advantages, load_checkpoint_state, rollout_stats
from .versions import OPENRLHF, check_openrlhf

EXPERIENCE_MAKER_MODULE = "openrlhf.trainer.ppo_utils.experience_maker"
TRAINER_MODULE = "openrlhf.trainer.ppo_trainer"
SETUP_HOOK = f"{__name__}.setup_worker"
# OpenRLHF's estimator whose steps avspo shares; its group step is the one replaced.
GROUP_NORM = "group_norm"

# The wrapped method swaps a module function and the estimator name while it runs: one call at a time.
_CALL_LOCK = threading.Lock()


def setup_worker() -> None:
    """Ray's worker_process_setup_hook: patch OpenRLHF's classes in this process, now if imported, else on import."""
    for name, (patch, _, _) in PATCHES.items():
        after_import(name, patch)


def hook_state() -> dict[str, str]:
    """Per OpenRLHF module the hook patches, in this process: 'patched', 'waiting for import' or 'missing'."""
    state = {}
    for name, (_, cls, method) in PATCHES.items():
        module = sys.modules.get(name)
        if module is None:
            state[name] = "waiting for import" if is_watched(name) else "missing"
        else:
            state[name] = "patched" if is_patched(getattr(getattr(module, cls, None), method, None)) else "missing"
    return state


def patch_experience_maker(module: ModuleType) -> None:
    check_openrlhf()
    maker = _require(module, "RemoteExperienceMaker", ("compute_advantages_and_returns",))
    _require(module, "compute_reward", ())
    wrap(maker, "compute_advantages_and_returns", lambda original: _advantages_and_returns(original, module))


def patch_trainer(module: ModuleType) -> None:
    check_openrlhf()
    trainer = _require(module, "BasePPOTrainer", tuple(TRAINER_WRAPPERS))
    for method, wrapper in TRAINER_WRAPPERS.items():
        wrap(trainer, method, wrapper)


def _advantages_and_returns(original: Callable, host: ModuleType) -> Callable:
    def compute_advantages_and_returns(self, experiences):
        args = self.strategy.args
        layout = layout_of(args)
        if read_arg(args, layout.estimator) != ESTIMATOR:
            return original(self, experiences)
        group_step = AvspoGroupStep(host.compute_reward, experiences, args, read_arg(args, layout.n_samples_per_prompt))
        holder, name = arg_holder(args, layout.estimator)
        with _CALL_LOCK:
            # OpenRLHF's method sees estimator group_norm, in args and in the maker's own copy, and calls group_step
            # as its compute_reward; all three are put back however it ends.
            own_estimator = self.advantage_estimator
            setattr(holder, name, GROUP_NORM)
            self.advantage_estimator = GROUP_NORM
            host.compute_reward = group_step
            try:
                experiences = original(self, experiences)
            finally:
                setattr(holder, name, ESTIMATOR)
                self.advantage_estimator = own_estimator
                host.compute_reward = group_step.compute_reward
        group_step.check_complete()
        return experiences

    return compute_advantages_and_returns


class AvspoGroupStep:
    """OpenRLHF's ``compute_reward``, called once per experience in order with its rows of the group-normalised
    rewards, given the rows of avspo's advantages instead: those of the whole batch, computed at the first call (the
    rewards are shaped by then), in group_norm's prompt groups."""

    def __init__(self, compute_reward: Callable, experiences: list, args: Any, samples: int) -> None:
        self.compute_reward = compute_reward
        self.experiences = experiences
        self.args = args
        self.samples = samples
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
        self.calls += 1
        return self.compute_reward(self.advantages[self.calls - 1], *more, **kwargs)

    def check_complete(self) -> None:
        if self.calls != len(self.experiences):
            raise RuntimeError(
                f"OpenRLHF's compute_advantages_and_returns called compute_reward {self.calls} time(s) for "
                f"{len(self.experiences)} experiences; the avspo runtime route replaces the group step in those "
                f"calls. {_supported_releases()}"
            )

    def _avspo_advantages(self) -> list[torch.Tensor]:
        # experience.index holds each sample's row in the rollout batch, where a prompt's n_samples_per_prompt
        # samples are consecutive (dynamic batching reorders experiences).
        sizes = [len(experience.index) for experience in self.experiences]
        rows = torch.tensor([row for experience in self.experiences for row in experience.index])
        flat = torch.cat([experience.rewards for experience in self.experiences])
        by_prompt = torch.empty_like(flat)
        by_prompt[rows] = flat
        advantages = group_advantages(by_prompt.reshape(-1, self.samples), self.args)
        return list(advantages.reshape(-1)[rows].split(sizes))


def _with_rollout_stats(original: Callable) -> Callable:
    def _compute_rollout_stats(self, experiences):
        return {**original(self, experiences), **rollout_stats()}

    return _compute_rollout_stats


def _saving_state(original: Callable) -> Callable:
    def save_logs_and_checkpoints(self, global_step, logs_dict=None, client_states=None):
        # The trainer's fit() passes the same dicts on to save_best_checkpoint.
        logs_dict = {} if logs_dict is None else logs_dict
        logs_dict.update(entropy_collapse_flag(logs_dict))
        client_states = {} if client_states is None else client_states
        client_states.update(checkpoint_state())
        return original(self, global_step, logs_dict, client_states)

    return save_logs_and_checkpoints


def _restoring_state(original: Callable) -> Callable:
    def restore_best_checkpoint_state(self, checkpoint_states):
        load_checkpoint_state(checkpoint_states)
        return original(self, checkpoint_states)

    return restore_best_checkpoint_state


TRAINER_WRAPPERS = {
    "_compute_rollout_stats": _with_rollout_stats,
    "save_logs_and_checkpoints": _saving_state,
    "restore_best_checkpoint_state": _restoring_state,
}
# Per OpenRLHF module: its patch, and the class and one method it wraps (wrapped: the patch was applied).
PATCHES: dict[str, tuple[Callable[[ModuleType], None], str, str]] = {
    EXPERIENCE_MAKER_MODULE: (patch_experience_maker, "RemoteExperienceMaker", "compute_advantages_and_returns"),
    TRAINER_MODULE: (patch_trainer, "BasePPOTrainer", "_compute_rollout_stats"),
}


def _require(module: ModuleType, name: str, methods: tuple[str, ...]) -> Any:
    found = getattr(module, name, None)
    missing = [name] if found is None else [f"{name}.{m}" for m in methods if not hasattr(found, m)]
    if missing:
        raise RuntimeError(f"OpenRLHF lacks {', '.join(missing)} in {module.__name__}. {_supported_releases()}")
    return found


def _supported_releases() -> str:
    installed = OPENRLHF.installed() or "(version unknown: no distribution metadata)"
    return f"The installed OpenRLHF is {installed}; the runtime route supports {OPENRLHF}."
