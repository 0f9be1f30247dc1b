"""The training loop on a tiny setting: determinism, no state leaking between runs, DAPO's batch, the summary."""

import dataclasses

import numpy as np
import pytest
import torch

from lab.methods import PRESETS
from lab.policy import Rollout, build_policy, generate
from lab.report import accuracy_at_rollouts, mean_ci, summarize
from lab.settings import LabSettings
from lab.task import VOCAB
from lab.train import Groups, token_level_rewards, train, warm_up

TINY = LabSettings(
    warmup_steps=40, warmup_batch=32, held_out_per_tier=4, steps=4, prompts=4, group_size=4, mini_batches=2,
    eval_every=2, eval_samples=2,
)


@pytest.fixture(scope="module")
def base_state():
    torch.set_num_threads(1)
    return warm_up(TINY)


def without_timing(run):
    return {k: v for k, v in run.items() if k not in ("wall_s", "cpu_s")}


def test_same_seed_same_series_and_no_state_leaks_between_runs(base_state):
    first = train(TINY, PRESETS["avspo"], 0, base_state)
    train(TINY, PRESETS["avspo_opposite"], 1, base_state)  # moves the estimator's threshold state
    again = train(TINY, PRESETS["avspo"], 0, base_state)
    assert without_timing(first) == without_timing(again)
    other_seed = train(TINY, PRESETS["avspo"], 1, base_state)
    assert other_seed["steps"] != first["steps"]
    assert len(first["steps"]["acr"]) == TINY.steps
    assert first["evals"]["step"] == [0, 2, 4]
    assert set(first["steps"]) >= {"acr", "acr_all_fail", "acr_all_pass", "effective_acr", "reward", "entropy",
                                   "rollouts", "rollouts_total", "threshold", "triggered", "num_virtual"}


def test_dapo_trains_on_varied_groups_only_and_counts_every_rollout(base_state):
    settings = dataclasses.replace(TINY, steps=6, dapo_max_gen_batches=3)
    run = train(settings, PRESETS["dapo"], 0, base_state)["steps"]
    per_batch = settings.prompts * settings.group_size
    assert run["rollouts"] == [g * per_batch for g in run["gen_batches"]]
    assert run["rollouts_total"] == list(np.cumsum(run["rollouts"]).astype(float))
    assert max(run["gen_batches"]) <= 3 and max(run["batch_groups"]) <= settings.prompts
    for groups, eff in zip(run["batch_groups"], run["effective_acr"]):
        assert eff == (0.0 if groups else 1.0)
    grpo = train(settings, PRESETS["grpo"], 0, base_state)["steps"]
    assert grpo["rollouts"] == [float(per_batch)] * settings.steps
    assert grpo["effective_acr"] == grpo["acr"]


def test_varied_rows_keep_groups_whose_rewards_differ():
    rollout = Rollout(*(torch.zeros(6, 2, dtype=torch.long) for _ in range(4)))
    groups = Groups(rollout, torch.tensor([1.0, 0, 1, 1, 0, 0]), np.array(list("aabbcc"), dtype=object),
                    np.ones(6, dtype=int), np.repeat([7, 8, 9], 2))
    assert groups.varied_rows().tolist() == [0, 1]


def test_reward_sits_on_the_last_response_token():
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])
    assert token_level_rewards(torch.tensor([1.0, 0.5]), mask).tolist() == [[0, 0, 1, 0], [0.5, 0, 0, 0]]


def test_generation_stops_at_the_end_token_and_masks_through_it():
    torch.manual_seed(0)
    policy = build_policy(TINY.shape, seed=0)
    prompts = [[VOCAB.bos_id, *VOCAB.encode("1____+2____=")]] * 16
    rollout = generate(policy, prompts, 7, temperature=1.0, generator=torch.Generator().manual_seed(0))
    for ids, mask in zip(rollout.response_ids.tolist(), rollout.response_mask.tolist()):
        ends = [i for i, t in enumerate(ids) if t == VOCAB.eos_id]
        length = ends[0] + 1 if ends else len(ids)
        assert mask == [1] * length + [0] * (len(ids) - length)
        assert all(t == VOCAB.pad_id for t in ids[length:])
    again = generate(policy, prompts, 7, temperature=1.0, generator=torch.Generator().manual_seed(0))
    assert torch.equal(rollout.response_ids, again.response_ids)


def test_settings_are_checked():
    with pytest.raises(ValueError, match="mix has 2 weights for 4 tiers"):
        LabSettings(mix=(1, 1))
    with pytest.raises(ValueError, match="not divisible by mini_batches"):
        LabSettings(prompts=6, mini_batches=4)


def test_mean_ci_and_rollout_budget():
    stat = mean_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    assert stat["mean"] == 3.0
    assert stat["ci95"] == pytest.approx(2.776 * np.std([1, 2, 3, 4, 5], ddof=1) / np.sqrt(5), rel=1e-4)
    assert stat["ci95_reason"] is None
    assert mean_ci([1.0, 2.0, 4.0])["ci95"] == pytest.approx(4.303 * np.std([1, 2, 4], ddof=1) / np.sqrt(3), rel=1e-4)
    for few in ([0.5], [0.359, 0.5]):  # no t(0) or t(1) interval ("0.359 ± 0.993")
        stat = mean_ci(few)
        assert stat["ci95"] is None and stat["ci95_reason"].startswith("too few seeds for an interval")
        assert stat["mean"] == pytest.approx(np.mean(few)) and stat["n"] == len(few)
    run = {"evals": {"rollouts": [0, 100, 200, 300], "accuracy": [0.1, 0.2, 0.3, 0.4], "step": [0, 1, 2, 3]}}
    assert accuracy_at_rollouts(run, 250) == (0.3, 2)


def test_summary_pairs_methods_with_grpo_by_seed(base_state):
    runs = {
        name: {seed: train(TINY, PRESETS[name], seed, base_state) for seed in (0, 1)} for name in ("grpo", "dapo")
    }
    summary = summarize(runs)
    assert summary["rollout_budget"] == TINY.steps * TINY.prompts * TINY.group_size
    dapo = summary["methods"]["dapo"]
    deltas = [runs["dapo"][s]["evals"]["accuracy"][-1] - runs["grpo"][s]["evals"]["accuracy"][-1] for s in (0, 1)]
    assert dapo["final_accuracy_vs_grpo"]["values"] == pytest.approx(deltas)
    assert "final_accuracy_vs_grpo" not in summary["methods"]["grpo"]
    assert set(dapo["final_accuracy_by_tier"]) == {str(d) for d in TINY.tiers}


def test_extra_final_evals_read_the_final_policy_at_each_temperature(base_state):
    settings = dataclasses.replace(TINY, steps=2, eval_every=1)
    run = train(settings, PRESETS["grpo"], 0, base_state, extra_final_evals=(settings.eval_temperature, 0.5))
    evals = run["evals"]
    assert evals["at_temperature"][:-1] == [{}, {}]
    final = evals["at_temperature"][-1]
    assert list(final) == [str(float(settings.eval_temperature)), "0.5"]
    # At the evaluation's own temperature the extra reading is the final evaluation itself (same generator seed).
    assert final[str(float(settings.eval_temperature))] == evals["accuracy"][-1]
    plain = train(settings, PRESETS["grpo"], 0, base_state)
    assert plain["steps"] == run["steps"] and plain["evals"]["at_temperature"] == [{}, {}, {}]
