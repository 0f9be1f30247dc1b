"""Every path verl 0.9's default trainer sends an advantage step down: ``avspo`` with nothing augmented
is verl's own GRPO on it, bit for bit, and its metrics count what GRPO's groups are.

Oracles are verl's functions: ``compute_advantage_for_multi_trajectories`` (the v1 trainer's advantage
step, with its GRPO route), ``compute_rollout_correction_and_add_to_batch`` (rejection sampling that
empties response masks) and ``construct_minimal_padding_template`` (the padding rows).
"""


import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.core_algos import AdvantageEstimator
from verl.trainer.ppo.padding_utils import construct_minimal_padding_template
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

from avspo_plugin.verl import pop_metrics, session
from avspo_plugin.verl.trajectory_groups import final_output_rows

LENGTH = 6


def algorithm(**avspo):
    return OmegaConf.create(
        {"adv_estimator": "avspo", "norm_adv_by_std_in_grpo": True, "use_kl_in_reward": False,
         "avspo": {"threshold_mode": "never", "reward_low": -10.0, "reward_high": 10.0, **avspo}}
    )  # fmt: skip


def agent_loop_batch(rng, prompts=6, sessions=4, max_outputs=3, rewards="continuous", empty_outputs=()):
    """Rows as verl's agent loop puts them in TransferQueue: a session's outputs share the final output's
    reward (verl copies it); keys {uid}_{session}_{index}; rows shuffled as the replay buffer samples them."""
    keys, scores, lengths = [], [], []
    for prompt in range(prompts):
        uid = f"{prompt:04x}-uid_with_underscores"
        for session_id in range(sessions):
            outputs = int(rng.integers(1, max_outputs + 1))
            score = {"continuous": rng.random(), "binary": float(rng.integers(0, 2))}[rewards]
            for index in range(outputs):
                keys.append(f"{uid}_{session_id}_{index}")
                scores.append(score)
                lengths.append(int(rng.integers(1, LENGTH + 1)))
    order = rng.permutation(len(keys))
    keys = [keys[i] for i in order]
    scores = torch.tensor([scores[i] for i in order], dtype=torch.float32)
    lengths = torch.tensor([lengths[i] for i in order])
    for row in empty_outputs:
        lengths[row] = 0
    mask = (torch.arange(LENGTH)[None, :] < lengths[:, None]).float()
    token_rewards = torch.zeros(len(keys), LENGTH)
    token_rewards[torch.arange(len(keys)), (lengths - 1).clamp(min=0)] = scores
    uids = np.array([key.rsplit("_", 2)[0] for key in keys], dtype=object)
    data = DataProto.from_dict(tensors={"token_level_rewards": token_rewards, "response_mask": mask}, non_tensors={"uid": uids})
    return data, keys


def v1_advantage_step(data, keys, estimator, algo):
    """verl's v1 advantage step on a copy of ``data``, as ``PPOTrainer._compute_advantage`` calls it."""
    out = compute_advantage_for_multi_trajectories(
        DataProto.from_dict(tensors={k: v.clone() for k, v in data.batch.items()}, non_tensors=dict(data.non_tensor_batch)),
        batch_keys=keys, adv_estimator=estimator, gamma=1.0, lam=1.0, num_repeat=4,
        norm_adv_by_std_in_grpo=algo.norm_adv_by_std_in_grpo, config=algo,
    )  # fmt: skip
    return out.batch["advantages"]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("rewards", ["continuous", "binary"])
def test_multi_output_sessions_get_verls_grpo_advantages_bit_for_bit(seed, rewards):
    data, keys = agent_loop_batch(np.random.default_rng(seed), rewards=rewards)
    algo = algorithm()
    grpo = v1_advantage_step(data, keys, AdvantageEstimator.GRPO, algo)
    avspo = v1_advantage_step(data, keys, "avspo", algo)
    assert torch.equal(avspo, grpo)
    metrics = pop_metrics()
    # One group per prompt of 4 sessions, whatever number of outputs each session returned.
    assert metrics["groups"] == 6.0 and metrics["samples"] == 24.0
    assert len(keys) > 24


def test_without_session_grouping_avspo_would_differ():
    # What verl hands every non-GRPO estimator (all rows): the comparison above can fail.
    data, keys = agent_loop_batch(np.random.default_rng(0))
    from verl.trainer.ppo.ray_trainer import compute_advantage

    algo = algorithm()
    grpo = v1_advantage_step(data, keys, AdvantageEstimator.GRPO, algo)
    all_rows = compute_advantage(data, adv_estimator="avspo", config=algo).batch["advantages"]
    assert not torch.equal(all_rows, grpo)


def test_sessions_follow_verls_key_rule():
    keys = ["u_1_a_0_0", "u_1_a_0_2", "u_1_a_0_1", "v_3_0", "u_1_a_1_0"]
    assert final_output_rows(keys) == ([1, 3, 4], [0, 0, 0, 1, 2])
    with pytest.raises(ValueError, match=r"batch key 'no-session' \(row 1\) is not of verl's form"):
        final_output_rows(["u_0_0", "no-session"])


def test_rejection_sampled_rows_keep_their_rewards_in_the_group_as_for_grpo():
    # verl's rollout correction empties the response masks of rows whose rollout and training
    # log-probs disagree too much; GRPO keeps those rows' rewards in their group's mean and std.
    rng = np.random.default_rng(3)
    data, keys = agent_loop_batch(rng, max_outputs=1)
    rows = len(keys)
    rollout_log_probs = torch.full((rows, LENGTH), -1.0)
    old_log_probs = rollout_log_probs.clone()
    rejected = torch.tensor([0, 5, 11])
    old_log_probs[rejected] += 3.0  # a large log-prob gap: these sequences are rejected
    data.batch["old_log_probs"], data.batch["rollout_log_probs"] = old_log_probs, rollout_log_probs
    config = OmegaConf.create({"rollout_is": None, "rollout_rs": "seq_mean_k1", "rollout_rs_threshold": "0.5_2.0"})
    data, _ = compute_rollout_correction_and_add_to_batch(data, config)
    emptied = data.batch["response_mask"].amax(dim=-1) == 0
    assert emptied[rejected].all() and int(emptied.sum()) == len(rejected)

    algo = algorithm()
    grpo = v1_advantage_step(data, keys, AdvantageEstimator.GRPO, algo)
    avspo = v1_advantage_step(data, keys, "avspo", algo)
    assert torch.equal(avspo, grpo)
    assert pop_metrics()["samples"] == rows  # the rejected rows still count in their groups


def test_padding_group_stays_out_of_every_metric_and_gets_no_virtual_samples():
    rng = np.random.default_rng(4)
    data, keys = agent_loop_batch(rng, prompts=8, max_outputs=1, rewards="binary")  # one group collapsed
    source = {"response_mask": torch.ones(LENGTH, dtype=torch.int64), "rm_scores": torch.ones(LENGTH)}
    template, tag = construct_minimal_padding_template(source, {}, eos_token_id=0)
    assert tag["is_padding"] and int(template["response_mask"].sum()) == 0 and float(template["rm_scores"].sum()) == 0
    pad_uid, pads = "pad0123456789abcdef", 5
    padded = DataProto.from_dict(
        tensors={
            "token_level_rewards": torch.cat([data.batch["token_level_rewards"], torch.zeros(pads, LENGTH)]),
            "response_mask": torch.cat([data.batch["response_mask"], torch.zeros(pads, LENGTH)]),
        },
        non_tensors={"uid": np.concatenate([data.non_tensor_batch["uid"], np.array([pad_uid] * pads, dtype=object)])},
    )
    padded_keys = keys + [f"{pad_uid}_{i}_0" for i in range(pads)]
    for avspo in ({}, {"threshold_mode": "always", "reward_low": 0.0, "reward_high": 1.0}):
        session().reset()
        algo = algorithm(**avspo)
        plain = v1_advantage_step(data, keys, "avspo", algo)
        plain_metrics = pop_metrics()
        with_padding = v1_advantage_step(padded, padded_keys, "avspo", algo)
        assert pop_metrics() == plain_metrics
        assert torch.equal(with_padding[: len(keys)], plain)
        assert torch.count_nonzero(with_padding[len(keys):]) == 0
    assert plain_metrics["groups"] == 8.0 and plain_metrics["augmented_groups"] == plain_metrics["acr"] == 1 / 8
    grpo = v1_advantage_step(padded, padded_keys, AdvantageEstimator.GRPO, algorithm())
    assert torch.equal(v1_advantage_step(padded, padded_keys, "avspo", algorithm()), grpo)


def test_a_process_without_a_trainer_gets_grpos_session_grouping(fresh_verl_process):
    """verl's compute_advantage_for_multi_trajectories called by a script, no verl trainer built: the plugin's
    multi-output hook is in place as soon as verl's module loads, so avspo groups sessions as GRPO does
    (tests/fresh_interpreter.py, FRESH_VERL_PROCESS: agent_loop_batch above, seed 5, binary rewards)."""
    multi_output = fresh_verl_process["multi_output"]
    assert multi_output["rows"] > 24  # several outputs per session
    assert multi_output["nonzero"] > 0  # groups that are not collapsed: advantages to compare
    assert multi_output["equal_to_grpo"]
