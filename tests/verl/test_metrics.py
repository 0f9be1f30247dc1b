"""avspo/* metrics reach verl's real Tracking at the right step, for every backend, aggregated per step."""

import json
import logging

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from avspo_plugin.config import AVSPOConfig
from avspo_plugin.core import ThresholdState, aggregate_metrics, compute_token_advantages
from avspo_plugin.core.metrics import CALL_METRICS
from avspo_plugin.core.threshold import advance
from avspo_plugin.verl import pop_metrics, session

ALGORITHM = {"adv_estimator": "avspo", "norm_adv_by_std_in_grpo": True, "use_kl_in_reward": False}

# Per step, two estimator calls (parameter_sync_step = 2): (scores, uids) of each call.
STEPS = [
    [([1, 1, 1, 1, 0, 1, 0, 0], "aabbccdd"), ([0, 0, 0, 0, 1, 0, 1, 1], "eeffgghh")],
    [([1, 1, 0, 0, 1, 1, 1, 1], "aabbccdd"), ([0, 1, 0, 1, 0, 0, 0, 0], "eeffgghh")],
    [([0, 0, 0, 0, 0, 0, 0, 0], "aabbccdd"), ([1, 1, 1, 1, 1, 1, 1, 0], "eeffgghh")],
]


def uid_list(letters):
    return list(letters)


@pytest.fixture(scope="module")
def verl_compute_advantage():
    from verl.trainer.ppo.ray_trainer import compute_advantage

    return compute_advantage


# The runs' threshold: tau_0 = 0.3, moved by Eq. 12 once per step.
THRESHOLD = {"threshold_mode": "adaptive", "threshold_init": 0.3}


def algorithm(**avspo):
    return OmegaConf.create({**ALGORITHM, "avspo": {**THRESHOLD, "stagnation_steps": 0, **avspo}})


def expected_steps(config):
    """The core's own metrics of each call, the calls of a step under one threshold state, Eq. 12 applied
    once per step with the step's pooled ACR and reward: the oracle of what must be logged."""
    state = ThresholdState.initial(config)
    expected = []
    for calls in STEPS:
        per_call = []
        for call, (scores, letters) in enumerate(calls):
            rewards = torch.zeros(len(scores), 4)
            rewards[:, -1] = torch.tensor(scores, dtype=torch.float32)
            uids = np.array(uid_list(letters), dtype=object)
            per_call.append(compute_token_advantages(rewards, torch.ones(len(scores), 4), uids, config, state, call).metrics)
        step = aggregate_metrics(per_call)
        state = advance(config, state, step["acr"], step["reward_mean"])
        expected.append(per_call)
    return expected


class Recorder:
    """Stands in for one of Tracking's backend adapters and records what it is given."""

    def __init__(self, record):
        self.record = record

    def log(self, data, step):
        self.record(step, dict(data))

    def finish(self, *args, **kwargs):
        pass


def run_steps(tracking, compute_advantage, make_batch, algo, extra=None):
    for step, calls in enumerate(STEPS, start=1):
        for scores, letters in calls:
            compute_advantage(make_batch(scores, uid_list(letters)), adv_estimator="avspo", config=algo)
        tracking.log(data={"training/global_step": step, **(extra or {})}, step=step)


def test_every_metric_reaches_console_file_and_tensorboard_at_its_step(
    tmp_path, monkeypatch, capsys, make_batch, verl_compute_advantage
):
    from verl.utils.tracking import Tracking

    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "metrics.jsonl"))
    monkeypatch.setenv("TENSORBOARD_DIR", str(tmp_path / "tb"))
    tracking = Tracking("avspo-test", "metrics", default_backend=["console", "file", "tensorboard"])
    algo = algorithm()
    run_steps(tracking, verl_compute_advantage, make_batch, algo)
    tracking.log(data={"training/global_step": 4}, step=4)  # a step without estimator calls
    tracking.finish()

    expected = [aggregate_metrics(calls) for calls in expected_steps(AVSPOConfig(**THRESHOLD, stagnation_steps=0))]
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2, 3, 4]
    for line, want in zip(lines, expected):
        logged = {k[len("avspo/"):]: v for k, v in line["data"].items() if k.startswith("avspo/")}
        assert set(logged) == set(CALL_METRICS)
        assert logged == pytest.approx(want, abs=1e-12), f"step {line['step']}"
    assert not any(k.startswith("avspo/") for k in lines[3]["data"]), "metrics leaked into a step without calls"

    console = capsys.readouterr().out
    for step in (1, 2, 3):
        assert f"step:{step} - " in console and "avspo/acr:" in console

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    for name in CALL_METRICS:
        scalars = events.Scalars(f"avspo/{name}")
        assert [s.step for s in scalars] == [1, 2, 3]
        assert [s.value for s in scalars] == pytest.approx([want[name] for want in expected], rel=1e-6, abs=1e-6)


def test_calls_within_a_step_fold_by_the_core_rules(make_batch, verl_compute_advantage):
    from verl.utils.tracking import Tracking

    tracking = Tracking("avspo-test", "fold", default_backend=[])
    received = []
    tracking.logger = {"recorder": Recorder(lambda step, data: received.append((step, data)))}
    run_steps(tracking, verl_compute_advantage, make_batch, algorithm())
    calls = expected_steps(AVSPOConfig(**THRESHOLD, stagnation_steps=0))
    for (_step, data), per_call in zip(received, calls):
        first, second = per_call
        groups = first["groups"] + second["groups"]
        assert data["avspo/groups"] == groups  # counts summed
        assert data["avspo/threshold"] == second["threshold"] == first["threshold"]  # one tau per step
        # rates pooled over the step's groups
        assert data["avspo/acr"] == pytest.approx((first["acr"] * first["groups"] + second["acr"] * second["groups"]) / groups)
        assert data["avspo/adv_abs_max"] == max(first["adv_abs_max"], second["adv_abs_max"])



def test_every_backend_verl_offers_receives_the_metrics(make_batch, verl_compute_advantage):
    """The hook adds the metrics before Tracking fans out, so each backend adapter gets them."""
    from verl.utils.tracking import Tracking

    tracking = Tracking("avspo-test", "backends", default_backend=[])
    received = {}
    tracking.logger = {
        name: Recorder(lambda step, data, name=name: received.__setitem__(name, (step, data)))
        for name in Tracking.supported_backend
    }
    verl_compute_advantage(make_batch([1, 1, 0, 1], ["a", "a", "b", "b"]), adv_estimator="avspo", config=algorithm())
    tracking.log(data={"actor/pg_loss": 0.1}, step=7)
    assert set(received) == set(Tracking.supported_backend)
    for step, data in received.values():
        assert step == 7 and data["avspo/acr"] == 0.5 and data["actor/pg_loss"] == 0.1


def test_a_log_to_some_backends_leaves_the_metrics_for_the_step_log(make_batch, verl_compute_advantage):
    from verl.utils.tracking import Tracking

    tracking = Tracking("avspo-test", "subset", default_backend=[])
    verl_compute_advantage(make_batch([1, 1, 0, 1], ["a", "a", "b", "b"]), adv_estimator="avspo", config=algorithm())
    tracking.log(data={"val/x": 1.0}, step=3, backend=["console"])
    assert pop_metrics()["acr"] == 0.5


def test_pop_metrics_returns_then_clears(make_batch, verl_compute_advantage):
    verl_compute_advantage(make_batch([1, 1, 0, 1], ["a", "a", "b", "b"]), adv_estimator="avspo", config=algorithm())
    first = pop_metrics()
    assert first["acr"] == 0.5 and first["groups"] == 2.0 and set(CALL_METRICS) <= set(first)
    assert pop_metrics() == {}


def test_padding_rows_from_verls_padding_helper_never_form_a_group(make_batch):
    """The v1 trainer pads batches with verl's template: one uid 'pad...', all-zero response_mask."""
    from verl.trainer.ppo.padding_utils import construct_minimal_padding_template
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    source = {"response_mask": torch.ones(4, dtype=torch.int64), "rm_scores": torch.ones(4)}
    template, tag = construct_minimal_padding_template(source, {"global_steps": 1}, eos_token_id=0)
    assert tag["is_padding"] and int(template["response_mask"].sum()) == 0

    scores, uids = [1, 1, 1, 1, 0, 1, 0, 0], list("aabbccdd")
    padded_lengths = [4] * 8 + [int(template["response_mask"].sum())] * 3
    pad_uid = "pad0123456789abcdef"
    padded = make_batch(scores + [0, 0, 0], uids + [pad_uid] * 3, response_lengths=padded_lengths)
    # Keys as verl's agent loop writes them: {uid}_{session}_{output}, one session per sample of a group.
    keys = [f"{u}_{i % 2}_0" for i, u in enumerate(uids)] + [f"{pad_uid}_{i}_0" for i in range(3)]

    algo = algorithm()
    padded = compute_advantage_for_multi_trajectories(padded, keys, adv_estimator="avspo", config=algo)
    with_padding = pop_metrics()
    session().reset()
    plain = compute_advantage_for_multi_trajectories(
        make_batch(scores, uids), keys[:8], adv_estimator="avspo", config=algo
    )
    without_padding = pop_metrics()

    assert with_padding == without_padding
    assert with_padding["groups"] == 4.0 and with_padding["acr"] == 0.75  # a, b, d collapsed; c not
    assert torch.equal(padded.batch["advantages"][:8], plain.batch["advantages"])
    assert torch.count_nonzero(padded.batch["advantages"][8:]) == 0


def test_kl_in_reward_warns_once(caplog, make_batch, verl_compute_advantage):
    algo = OmegaConf.merge(algorithm(), {"use_kl_in_reward": True})
    with caplog.at_level(logging.WARNING, logger="avspo_plugin.verl"):
        for _ in range(3):
            verl_compute_advantage(make_batch([1, 1, 0, 1], ["a", "a", "b", "b"]), adv_estimator="avspo", config=algo)
    kl_warnings = [r for r in caplog.records if "use_kl_in_reward" in r.getMessage()]
    assert len(kl_warnings) == 1
    assert "ACR measures rewards with KL" in kl_warnings[0].getMessage()
