"""One process of a 2-process TRL run on CPU (torchrun, gloo), for tests/trl/test_distributed.py.

``torchrun --nproc_per_node 2 distributed_run.py OUT_DIR`` trains the tiny policy of conftest.py twice:
AVSPO on (every collapsed group augmented) and monitor-only with two summed reward functions (rewards
up to 2). Each process holds 6 completions of a 12-completion generation batch in groups of 4, so the
second group straddles the two processes. Each process writes what it saw to OUT_DIR/rank<r>.json:
per generation batch the gathered rewards, the advantages it trained on and its session state.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
PER_PROCESS = 6  # completions per process and generation batch: groups of 4 straddle the processes
NUM_GENERATIONS = 4


def load_kit():
    spec = importlib.util.spec_from_file_location("trl_test_kit", HERE / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def accuracy(prompts, completions, **kwargs):
    """0 on the 'hard' prompts (their groups collapse at 0); on the others 1 when the completion starts with a-m
    (about half of the tiny random policy's completions)."""
    return [0.0 if p.startswith("hard") else float("a" <= c[:1] <= "m") for p, c in zip(prompts, completions)]


def format_(prompts, completions, **kwargs):
    """1 for every completion of the 'easy' prompts: summed with accuracy, their rewards are 1 or 2."""
    return [0.0 if p.startswith("hard") else 1.0 for p in prompts]


format_.__name__ = "format"


def run(kit, out_dir: Path, name: str, reward_funcs, **config) -> dict:
    from avspo_plugin.trl import AVSPOGRPOTrainer

    class Recording(AVSPOGRPOTrainer):
        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            gathered = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            self.batches.append({"prompts": prompts, "gathered": gathered.tolist()})
            return gathered

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            self.batches[-1].update(advantages=output["advantages"].tolist(), state=self.avspo_session.state_dict())
            return output

    trainer = Recording(
        model=kit.build_model(),
        reward_funcs=reward_funcs,
        args=kit.trainer_args(
            out_dir / name, per_device_train_batch_size=PER_PROCESS, num_generations=NUM_GENERATIONS, max_steps=2,
            max_completion_length=4, **config,
        ),
        train_dataset=kit.prompt_dataset(),
        processing_class=kit.build_tokenizer(),
    )  # fmt: skip
    trainer.batches = []
    trainer.train()
    logged = [{k: v for k, v in entry.items() if k.startswith("avspo/")} for entry in trainer.state.log_history]
    return {
        "batches": trainer.batches,
        "logged": [entry for entry in logged if entry],
        "config": trainer.avspo_config.to_dict(),
        "processes": (trainer.accelerator.process_index, trainer.accelerator.num_processes),
        "backend": str(torch.distributed.get_backend()),
    }


def main() -> None:
    out_dir = Path(sys.argv[1])
    torch.set_num_threads(1)
    kit = load_kit()
    report = {
        "avspo": run(kit, out_dir, "avspo", accuracy, avspo_threshold_mode="always"),
        "monitor": run(kit, out_dir, "monitor", [accuracy, format_], use_avspo=False),
    }
    (out_dir / f"rank{torch.distributed.get_rank()}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
