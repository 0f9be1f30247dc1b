"""Prompt selection in verl's trainers, against verl's own sampler, dataloader and trainer methods.

verl's ``create_rl_sampler`` and ``StatefulDataLoader`` are the oracle: with nothing to skip, the
rebuilt dataloader hands out exactly verl's batches; its checkpoint resumes exactly. The trainers'
own methods (``_create_dataloader``, ``_fetch_one_gen_batch``, ``compute_advantage``,
``compute_advantage_for_multi_trajectories``, ``Tracking.log``) run with the plugin's hooks on a
stand-in trainer; the full run is in tests/verl/test_e2e.py.
"""

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from avspo_plugin.config import ConfigError
from avspo_plugin.verl import hooks, selection
from avspo_plugin.verl.guards import HookError
from avspo_plugin.verl.run_config import AVSPO, SELECTION
from avspo_plugin.verl.sampler import SelectiveSampler

PROMPTS = 40
BATCH = 8
N = 2


class PromptRows(torch.utils.data.Dataset):
    """Rows as verl's RLHFDataset hands them out: the dataset's fields, ``extra_info`` among them."""

    def __init__(self, count=PROMPTS, extra_info=lambda i: {"index": 1000 + i}):
        self.rows = [{"raw_prompt": f"p{i}", "extra_info": extra_info(i)} for i in range(count)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return dict(self.rows[i])


def config(**selection_keys):
    return OmegaConf.create({
        "data": {"train_batch_size": BATCH, "gen_batch_size": None, "dataloader_num_workers": 0, "shuffle": True,
                 "seed": 7, "val_batch_size": None, "validation_shuffle": False},
        "trainer": {"total_epochs": 3, "total_training_steps": None},
        "actor_rollout_ref": {"rollout": {"n": N}},
        "algorithm": {"adv_estimator": "grpo", "avspo_selection": selection_keys},
    })  # fmt: skip


def collate(rows):
    from verl.utils.dataset.rl_dataset import collate_fn

    return collate_fn(rows)


@pytest.fixture(autouse=True)
def no_selection_run():
    selection.detach()
    yield
    selection.detach()


def legacy_trainer(cfg, dataset=None):
    """verl's own RayPPOTrainer._create_dataloader (hooked) on a stand-in trainer."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.trainer.ppo.utils import create_rl_sampler

    dataset = dataset or PromptRows()
    trainer = SimpleNamespace(config=cfg)
    RayPPOTrainer._create_dataloader(trainer, dataset, PromptRows(4), collate, create_rl_sampler(cfg.data, dataset))
    return trainer


def positions(batch):
    return [info["index"] - 1000 for info in batch["extra_info"]]


def test_hooks_in_place_for_both_trainers():
    for trainer in ("legacy", "v1"):
        assert set(hooks.hook_status(trainer, feature=SELECTION).values()) == {"in place"}
        hooks.require_hooks(trainer, SELECTION)


def test_off_by_default_leaves_verls_dataloader():
    trainer = legacy_trainer(config())
    assert selection.active() is None
    assert not isinstance(trainer.train_dataloader.sampler, SelectiveSampler)


def test_nothing_to_skip_hands_out_verls_own_batches():
    plain = legacy_trainer(config())
    selective = legacy_trainer(config(enable=True))
    assert isinstance(selective.train_dataloader.sampler, SelectiveSampler)
    assert len(selective.train_dataloader) == len(plain.train_dataloader) == PROMPTS // BATCH
    assert selective.total_training_steps == plain.total_training_steps
    for _ in range(2):  # two epochs: verl's sampler reshuffles, the selective one follows
        assert [positions(b) for b in selective.train_dataloader] == [positions(b) for b in plain.train_dataloader]


def observe_step(run, batch, collapsed):
    """verl's legacy compute_advantage (hooked) on the step's batch, n responses per prompt."""
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage

    ids = [info["index"] for info in batch["extra_info"]]
    scores = torch.tensor([[0.0, 0.0] if i in collapsed else [0.0, 1.0] for i in ids]).reshape(-1, 1)
    data = DataProto.from_dict(
        tensors={"token_level_scores": scores, "token_level_rewards": scores, "response_mask": torch.ones(len(scores), 1)},
        non_tensors={"uid": np.repeat(np.arange(len(ids)).astype(str), N).astype(object),
                     "extra_info": np.repeat(np.array(batch["extra_info"], dtype=object), N)},
    )  # fmt: skip
    out = compute_advantage(data, adv_estimator="grpo", num_repeat=N, config=OmegaConf.create({}))
    return out.batch["advantages"]


def test_collapsed_prompts_are_skipped_and_batches_stay_full():
    trainer = legacy_trainer(config(enable=True, explore=0.0, max_skip_fraction=0.9, retry_half_life=1e6))
    run = selection.active()
    collapsed = {1000 + i for i in range(0, PROMPTS, 2)}  # every even prompt collapses
    first_epoch = []
    for batch in trainer.train_dataloader:
        first_epoch += positions(batch)
        observe_step(run, batch, collapsed)
    metrics = run.pop_metrics()
    assert metrics["avspo/selection/observed"] == PROMPTS and metrics["avspo/selection/skipped"] == 0
    second_epoch = [positions(b) for b in trainer.train_dataloader]
    assert all(len(b) == BATCH for b in second_epoch) and len(second_epoch) == PROMPTS // BATCH
    handed_out = [p for b in second_epoch for p in b]
    # The even prompts were all seen collapsed once: explore=0 skips them (at most 90% of a choice).
    assert all(p % 2 == 1 for p in handed_out[:PROMPTS // 2])
    metrics = run.pop_metrics()
    assert metrics["avspo/selection/skipped"] >= PROMPTS // 2 - 1
    assert metrics["avspo/selection/rollouts_saved"] == N * metrics["avspo/selection/skipped"]


def test_checkpoint_mid_epoch_resumes_the_same_batches(tmp_path):
    cfg = config(enable=True, explore=0.3, retry_half_life=2.0)
    collapsed = {1000 + i for i in range(0, PROMPTS, 3)}

    def steps(trainer, count, iterator=None):
        iterator = iterator or iter(trainer.train_dataloader)
        got = []
        for _ in range(count):
            try:
                batch = next(iterator)
            except StopIteration:
                iterator = iter(trainer.train_dataloader)
                batch = next(iterator)
            observe_step(selection.active(), batch, collapsed)
            got.append(positions(batch))
        return got, iterator

    straight = legacy_trainer(cfg)
    expected, _ = steps(straight, 12)

    first = legacy_trainer(cfg)
    _, _iterator = steps(first, 7)  # mid-epoch (5 batches per epoch)
    loader_state = first.train_dataloader.state_dict()
    selection.write_state(str(tmp_path), selection.active())

    resumed = legacy_trainer(cfg)
    resumed.train_dataloader.load_state_dict(loader_state)
    assert selection.read_state(str(tmp_path), selection.active())
    got, _ = steps(resumed, 5)
    assert got == expected[7:]


def test_dataset_without_ids_names_the_field():
    with pytest.raises(ValueError, match=r"40 of 40 rows of the training dataset have no extra_info\.index .*set "
                                         r"algorithm\.avspo_selection\.id_key"):
        legacy_trainer(config(enable=True), PromptRows(extra_info=lambda i: {"split": "train"}))
    with pytest.raises(ValueError, match=r"unique id per prompt in the dataset field 'index'; 20 id\(s\) repeat"):
        legacy_trainer(config(enable=True), PromptRows(extra_info=lambda i: {"index": i // 2}))
    # Another field, as a key of extra_info.
    legacy_trainer(config(enable=True, id_key="qid"), PromptRows(extra_info=lambda i: {"qid": f"q{i}"}))
    assert selection.active().selector.fingerprint.startswith("40:")


def test_bad_block_names_the_key():
    with pytest.raises(ConfigError, match=r"algorithm\.avspo_selection: explore=2 is invalid"):
        legacy_trainer(config(enable=True, explore=2))
    with pytest.raises(ConfigError, match=r"unknown key\(s\) algorithm\.avspo_selection\.enabled"):
        hooks.check_launch_config(config(enabled=True))


def test_resume_with_another_dataset(tmp_path):
    trainer = legacy_trainer(config(enable=True))
    batch = next(iter(trainer.train_dataloader))
    observe_step(selection.active(), batch, set())
    loader_state = trainer.train_dataloader.state_dict()
    selection.write_state(str(tmp_path), selection.active())
    other = PromptRows(count=PROMPTS + 8)
    legacy_trainer(config(enable=True), other)
    with pytest.raises(ValueError, match=r"another dataset: 40 prompts .* there, 48 prompts .* now .*on_dataset_change=reset"):
        selection.read_state(str(tmp_path), selection.active())
    moved = legacy_trainer(config(enable=True), other)
    moved.train_dataloader.load_state_dict(loader_state)
    with pytest.raises(ValueError, match="dataloader position is over another dataset"):
        next(iter(moved.train_dataloader))
    reset = legacy_trainer(config(enable=True, on_dataset_change="reset"), other)
    reset.train_dataloader.load_state_dict(loader_state)
    selection.read_state(str(tmp_path), selection.active())
    assert len(next(iter(reset.train_dataloader))["raw_prompt"]) == BATCH


def test_v1_uids_and_rewards_reach_the_selector_and_the_tracker():
    from verl import DataProto
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
    from verl.utils.tracking import Tracking

    trainer = legacy_trainer(config(enable=True))
    selection.active().trainer = "v1"  # as PPOTrainer._init_dataloader attaches it
    trainer.train_dataloader_it = None
    batch = PPOTrainer._fetch_one_gen_batch(trainer)
    uids = list(batch["uid"])
    ids = [info["index"] for info in batch["extra_info"]]
    # Every second prompt collapses; one padding row of verl's (a uid never handed out) rides along.
    scores = [[0.0, 0.0] if k % 2 == 0 else [0.0, 1.0] for k in range(len(uids))]
    rows = np.repeat(np.array(uids + ["pad0"], dtype=object), N)
    token_scores = torch.tensor([*itertools.chain.from_iterable(scores), 0.0, 0.0]).reshape(-1, 1)
    data = DataProto.from_dict(
        tensors={"token_level_scores": token_scores, "token_level_rewards": token_scores,
                 "response_mask": torch.ones(len(rows), 1)},
        non_tensors={"uid": rows},
    )  # fmt: skip
    keys = [f"{uid}_{k}_0" for uid in rows[::N] for k in range(N)]
    compute_advantage_for_multi_trajectories(data, keys, adv_estimator="grpo", num_repeat=N, config=OmegaConf.create({}))
    state = selection.active().selector.state_dict()
    streak = dict(zip(state["ids"], state["streak"]))
    assert [streak[i] for i in ids] == [1 - k % 2 for k in range(len(ids))]

    logged = []

    class Backend:
        def log(self, data, step):
            logged.append((step, dict(data)))

    tracking = Tracking("avspo-test", "selection", default_backend=[])
    tracking.logger["probe"] = Backend()
    tracking.log({"actor/entropy": 1.0}, step=1)
    metrics = logged[-1][1]
    assert metrics["avspo/selection/observed"] == BATCH and metrics["avspo/selection/observed_collapsed"] == BATCH / 2
    assert metrics["avspo/selection/unidentified_rows"] == N
    tracking.log({"actor/entropy": 1.0}, step=2)
    assert not any(key.startswith("avspo/selection/") for key in logged[-1][1]), "metrics leaked into the next step"


def test_v1_groups_evicted_by_dapo_group_filtering_are_learnt_from():
    """verl's own ReplayBuffer._evict_terminal_groups (hooked) on a stand-in buffer: the groups its DAPO
    filter evicts (each collapsed to one reward) reach the selector as collapsed visits of their prompts."""
    from collections import Counter

    from verl.trainer.ppo.v1.replay_buffer import DAPO_FILTERED_REWARD_COUNTS_KEY, ReplayBuffer
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    trainer = legacy_trainer(config(enable=True))
    selection.active().trainer = "v1"
    trainer.train_dataloader_it = None
    batch = PPOTrainer._fetch_one_gen_batch(trainer)
    uids, ids = list(batch["uid"]), [info["index"] for info in batch["extra_info"]]
    # verl's classification: the first two groups all-fail, the third all-pass, the rest not filtered (None).
    shared = {uid: (0.0 if k < 2 else 1.0 if k == 2 else None) for k, uid in enumerate(uids)}
    cleared = []
    buffer = SimpleNamespace(
        _dapo_classification_cache={"train": shared}, _metrics_prefix=ReplayBuffer._metrics_prefix,
        _clear_groups=lambda partition, evicted: cleared.append(set(evicted)),
    )  # fmt: skip
    filtered = {uid for uid, value in shared.items() if value is not None}
    reasons = (set(), filtered, set(), Counter(shared[uid] for uid in filtered))
    evicted, _, dapo_count, metrics = ReplayBuffer._evict_terminal_groups(buffer, 1, "train", reasons)
    assert evicted == filtered and dapo_count == 3 and cleared == [filtered]  # verl's own eviction ran
    assert metrics[DAPO_FILTERED_REWARD_COUNTS_KEY] == {0.0: 2, 1.0: 1}
    state = selection.active().selector.state_dict()
    streak = dict(zip(state["ids"], state["streak"]))
    assert [streak.get(i, 0) for i in ids] == [1, 1, 1] + [0] * (len(ids) - 3)
    observed = selection.active().pop_metrics()
    assert observed["avspo/selection/observed"] == 3 and observed["avspo/selection/observed_collapsed"] == 3


def test_v1_init_dataloader_over_verls_own_dataset(tmp_path):
    """verl's own PPOTrainer._init_dataloader (hooked) over verl's RLHFDataset of the demo's parquet (ids from
    extra_info.index), then _fetch_one_gen_batch: the prompts it hands out are remembered under their uids."""
    import random

    import pandas as pd
    from hydra import compose, initialize_config_module
    from transformers import AutoTokenizer
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    from avspo_plugin.verl_cpu.demo import DemoFiles, build_tokenizer, cpu_overrides, task_rows

    model_dir, data = tmp_path / "model", tmp_path / "data"
    model_dir.mkdir(), data.mkdir()
    build_tokenizer(model_dir)
    files = DemoFiles(model_dir, data / "train.parquet", data / "test.parquet")
    rng = random.Random(0)
    pd.DataFrame(task_rows(24, "train", rng)).to_parquet(files.train_file)
    pd.DataFrame(task_rows(4, "test", rng)).to_parquet(files.test_file)
    overrides = [o for o in cpu_overrides(files) if not o.startswith("+ray_kwargs")]
    with initialize_config_module("avspo_plugin.verl.config", version_base=None):
        cfg = compose("avspo_trainer", overrides=[*overrides, "algorithm.adv_estimator=grpo",
                                                  "algorithm.avspo_selection.enable=true"])  # fmt: skip
    trainer = SimpleNamespace(config=cfg, tokenizer=AutoTokenizer.from_pretrained(model_dir), processor=None,
                              trainer_mode="sync", parameter_sync_step=1)  # fmt: skip
    PPOTrainer._init_dataloader(trainer)
    run = selection.active()
    assert run.trainer == "v1" and isinstance(trainer.train_dataloader.sampler, SelectiveSampler)
    assert run.selector.fingerprint.startswith("24:") and trainer.steps_per_epoch == 24 // cfg.data.train_batch_size
    batch = PPOTrainer._fetch_one_gen_batch(trainer)
    assert sorted(run.prompt_of_uid) == sorted(batch["uid"])
    assert sorted(run.prompt_of_uid.values()) == sorted(info["index"] for info in batch["extra_info"])


def test_a_missing_selection_hook_stops_only_selection_runs(monkeypatch, caplog):
    import logging
    import sys
    import types

    name = "verl_release_without_the_v1_fetch"
    module = types.ModuleType(name)
    module.Trainer = type("Trainer", (), {})
    monkeypatch.setitem(sys.modules, name, module)
    absent = hooks.Hook(name, "Trainer", "_fetch_one_gen_batch", selection.fetch_with_prompt_ids,
                          "tells prompt selection each prompt's per-step uid", ("self",), trainer="v1",
                          features=(SELECTION,), when="each generation batch", why="no callback")  # fmt: skip
    monkeypatch.setattr(hooks, "HOOKS", (*hooks.HOOKS, absent))
    monkeypatch.setattr(hooks, "HOOK_PROBLEMS", {})
    with caplog.at_level(logging.INFO, logger="avspo_plugin.verl"):
        absent.check(module)
    record = next(r for r in caplog.records if "cannot hook" in r.getMessage())
    assert record.levelno == logging.INFO  # not a warning in every verl process: selection is opt-in
    assert "Runs with algorithm.avspo_selection.enable=true will refuse to start" in record.getMessage()
    with pytest.raises(HookError, match=rf"algorithm.avspo_selection.enable=true cannot run .* v1 trainer.*{name}"):
        hooks.check_launch_config(OmegaConf.merge(config(enable=True), {"trainer": {"use_v1": True}}))
    hooks.require_hooks("v1", AVSPO)
    hooks.check_launch_config(OmegaConf.merge(config(), {"trainer": {"use_v1": True}}))


def test_doctor_warns_of_missing_selection_hooks_without_failing(capsys):
    from avspo_plugin.commands.doctor.verl import _print_hooks

    report = {
        "hooks": {"a.selection_hook": "a.selection_hook does not exist", "a.estimator_hook": "in place"},
        "selection_only_hooks": ["a.selection_hook"], "trl_patch": {}, "metrics_route": "the Tracking.log hook",
        "versions": {"verl": "0.8.0"}, "known_good_verl": ["0.8.0"],
        "verl_imported": {"version": "0.8.0", "path": "/site-packages/verl"}, "untested_verl": None,
    }  # fmt: skip
    assert _print_hooks("this process", report) is False
    out = capsys.readouterr().out
    assert "[warn] hooks in this process: 1 of 2 in place, 0 ready (placed by the trainer of a run that uses them), 0 not needed, 1 missing" in out
    assert "prompt selection (algorithm.avspo_selection) cannot run with this verl: 1 of its hooks missing" in out
    report["hooks"]["a.estimator_hook"] = "a.estimator_hook does not exist"
    assert _print_hooks("this process", report) is True
