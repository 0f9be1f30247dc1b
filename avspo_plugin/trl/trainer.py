"""AVSPOGRPOTrainer: TRL's GRPOTrainer with ACR metrics and AVSPO advantages.

GRPOTrainer offers no advantage hook: this subclass keeps the gathered rewards, lets the parent finish, recomputes the
whole batch's advantages with the core (every process alike) and keeps this process's rows; a step with no group
augmented keeps the parent's advantages bit for bit. The state goes into every checkpoint (:class:`AVSPOStateCallback`).
"""

import functools
import logging
import math
import os
from typing import Any

import torch
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint

from ..core import AVSPOSession, aggregate_metrics
from ..core.host import Host
from ..launch import announce
from ..names import STATE_FILE
from ..state_files import load_json, write_json
from .checked_imports import GRPOTrainer
from .config import AVSPOGRPOConfig
from .conventions import local_rows, replace_latest, reward_bounds_problem, trl_advantages, weighted_rewards

logger = logging.getLogger(__name__)
# TRL's side of the host contract (docs/method/hosts.md): GRPOTrainer logs the policy's entropy as entropy, and
# transformers writes step N's checkpoint into checkpoint-<N> of output_dir.
HOST = Host(name="trl", log=logger, entropy_metric="entropy", checkpoint_folder=f"{PREFIX_CHECKPOINT_DIR}-{{step}}",
            state_name=STATE_FILE)


class AVSPOGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose advantages are AVSPO's (Eq. 13/14) and whose logs carry ``avspo/*`` metrics; ``args`` must
    be an :class:`AVSPOGRPOConfig` (None gives its defaults)."""

    def __init__(self, model: Any, reward_funcs: Any = None, args: AVSPOGRPOConfig | None = None, *more, **kwargs):
        if args is None:
            args = AVSPOGRPOConfig()
        if not isinstance(args, AVSPOGRPOConfig):
            raise TypeError(
                f"AVSPOGRPOTrainer needs args of type AVSPOGRPOConfig (GRPOConfig plus the avspo_* keys), got "
                f"{type(args).__name__}: build AVSPOGRPOConfig with the same arguments"
            )
        super().__init__(model, reward_funcs, args, *more, **kwargs)
        self.avspo_config = args.avspo_config()
        self.avspo_session = HOST.new_session()
        self.avspo_session.configure(self.avspo_config)
        generations = getattr(args, "generation_batch_size", None)
        announce(self.avspo_config, generations // args.num_generations if generations else None, args.num_generations,
                 "TRL")
        self.avspo_state_callback = AVSPOStateCallback(self.avspo_session)
        self.add_callback(self.avspo_state_callback)
        self._avspo_eval_metrics: list[dict[str, float]] = []
        self._avspo_gathered_rewards: torch.Tensor | None = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        self._avspo_gathered_rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        return self._avspo_gathered_rewards

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        where = f"AVSPO ({mode}, global step {self.state.global_step})"
        rewards_per_func, self._avspo_gathered_rewards = self._avspo_gathered_rewards, None
        if rewards_per_func is None:
            raise RuntimeError(
                "GRPOTrainer scored completions without calling _calculate_rewards; AVSPO has no rewards"
            )
        num_processes = self.accelerator.num_processes
        if rewards_per_func.shape[0] != len(inputs) * num_processes:
            raise RuntimeError(
                f"{where}: GRPOTrainer's _calculate_rewards returned {rewards_per_func.shape[0]} rows for "
                f"{len(inputs)} completions on each of {num_processes} process(es); ACR and AVSPO need the rewards "
                f"gathered over all processes ({len(inputs) * num_processes} rows). This TRL release gathers "
                "elsewhere: see avspo_plugin.trl.versions for the supported releases"
            )
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        problem = reward_bounds_problem(
            rewards_per_func, self.reward_weights, self.reward_func_names, num_generations, self.avspo_config
        )
        if problem is not None:
            raise ValueError(f"{where}: {problem}")
        rewards = weighted_rewards(rewards_per_func, self.reward_weights)
        compute = functools.partial(trl_advantages, rewards, num_generations, self.scale_rewards)
        try:
            if mode == "train":
                step = self.avspo_session.step_with(self.avspo_config, compute)
                # One generation batch is one step of Eq. 12, however often the trainer logs.
                self.avspo_session.close_step(step=self.state.global_step + 1)
            else:
                step = compute(self.avspo_config, self.avspo_session.state)
                self._avspo_eval_metrics.append(step.metrics)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        if step.metrics["augmented_groups"] > 0:
            local = local_rows(step.advantages, self.accelerator.process_index, num_processes)
            if local.shape != output["advantages"].shape:
                raise RuntimeError(
                    f"AVSPO advantages for this process have shape {tuple(local.shape)}, GRPOTrainer's have "
                    f"{tuple(output['advantages'].shape)}"
                )
            output["advantages"] = local.to(output["advantages"])
            replace_latest(self._logs["advantages"], step.advantages.tolist())
        return output

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        # The parent averages each list in self._metrics; one pre-aggregated value per metric makes that
        # average the core's own reduction (rates averaged, threshold the latest, group counts summed).
        if self.model.training:
            mode = "train"
            metrics = self.avspo_session.pop_metrics(step=self.state.global_step, entropy=self._logged_entropy())
        else:
            mode = "eval"
            metrics, self._avspo_eval_metrics = aggregate_metrics(self._avspo_eval_metrics), []
        for name, value in HOST.logged(metrics).items():
            self._metrics[mode][name] = [value]
        super().log(logs, start_time)

    def _logged_entropy(self) -> float | None:
        """The mean token entropy TRL logs for this training step (its ``entropy`` metric); None when absent."""
        entropies = [value for value in self._metrics["train"].get(HOST.entropy_metric, []) if not math.isnan(value)]
        return sum(entropies) / len(entropies) if entropies else None

    def train(self, resume_from_checkpoint: Any = None, *args: Any, **kwargs: Any) -> Any:
        """GRPOTrainer's ``train``; a resumed run also restores the AVSPO state of its checkpoint."""
        if resume_from_checkpoint is True and os.path.isdir(self.args.output_dir):
            resumed = get_last_checkpoint(self.args.output_dir)  # as the parent resolves True
        else:
            resumed = resume_from_checkpoint or None
        self.avspo_state_callback.resume_from = resumed
        return super().train(resume_from_checkpoint, *args, **kwargs)


class AVSPOStateCallback(TrainerCallback):
    """The AVSPO state of a run in ``checkpoint-<step>/avspo_state.json``: written atomically by the main process
    on_save, read back on_train_begin of a resumed run (a damaged file is an error naming it and what to do)."""

    def __init__(self, session: AVSPOSession) -> None:
        self.session = session
        self.resume_from: str | None = None  # the checkpoint train() resumes from, set by the trainer

    def on_save(self, args, state, control, **kwargs):
        if not args.should_save:
            return
        folder = HOST.step_folder(args.output_dir, state.global_step)
        if not os.path.isdir(folder):
            raise RuntimeError(
                f"AVSPOGRPOTrainer: the checkpoint of step {state.global_step} is not {folder} (a hyperparameter "
                f"search writes its runs elsewhere): the AVSPO state has no checkpoint to go into"
            )
        write_json(os.path.join(folder, HOST.state_name), self.session.state_dict(), indent=1)

    def on_train_begin(self, args, state, control, **kwargs):
        checkpoint, self.resume_from = self.resume_from, None
        if checkpoint is None:
            return
        path = os.path.join(checkpoint, HOST.state_name)
        if not os.path.exists(path):
            logger.warning(
                "%s is missing (a checkpoint not written by AVSPOGRPOTrainer): the AVSPO threshold starts over "
                "from avspo_threshold_init and the early-warning streaks from 0", path
            )
            return
        remedy = (
            f"To start the AVSPO state afresh, delete {path} (the threshold restarts from avspo_threshold_init, the "
            "warning streaks from 0); or resume from an earlier checkpoint (train(resume_from_checkpoint=<its "
            "checkpoint-N folder>))."
        )
        load_json(path, lambda saved: self.session.load_state_dict(saved, source=path), remedy)
