"""End to end: stock ``verl.trainer.main_ppo`` trains with the plugin on CPU.

Every run goes through verl's real trainer, workers, rollout and tracker, with the package's
opt-in CPU support (``avspo_plugin.verl_cpu``). One ``avspo verl-demo`` run (verl's default
trainer, ``algorithm.adv_estimator=avspo``, 2 steps, a checkpoint at the last) is made once and shared:
its checkpoint is resumed for steps 3 and 4 with a multi-output agent loop and two mini-batch updates per step.
A second ``avspo verl-demo`` run takes the legacy trainer with verl's ``grpo``, the ACR monitor on (the avspo
estimator in the legacy trainer is checked at the trainer-method level, tests/verl/test_checkpoint.py).
Metrics are read from the tracker's own output: the file backend's JSONL and the console backend's lines.

Cost on 2 cores: three main_ppo launches of about 1.5 to 2 minutes each, most of it verl's start-up.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_in_process import avspo
from transformers.utils import logging as transformers_logging

from avspo_plugin.config import AVSPOConfig
from avspo_plugin.core.metrics import MONITOR_METRICS
from avspo_plugin.names import MONITOR_STATE_FILE, STATE_FILE
from avspo_plugin.verl_cpu.demo import DemoFiles, main_ppo_command
from avspo_plugin.verl_cpu.main_ppo import avspo_metrics_by_step, run_main_ppo
from renderer.docs_pages import VERL_DEMO_RECORD, demo_step_metrics

# One main_ppo launch needs well under this on 2 cores; a hung run fails instead of stalling CI.
RUN_TIMEOUT_S = 420
# The demo runs CHECKPOINT_STEP steps and saves there; the resumed run goes on to STEPS.
CHECKPOINT_STEP = 2
STEPS = 4
# The adaptive threshold with a large step size moves visibly from step 3 on (Eq. 12 first acts after
# step 2), so a threshold or reward history lost across resume shows in the comparison.
THRESHOLD_LR = 0.5
AVSPO_OVERRIDES = ("algorithm.avspo.threshold_mode=adaptive", f"algorithm.avspo.threshold_lr={THRESHOLD_LR}")
# The demo's seed (model, tokenizer, task). With seed 1 the threshold moves after step 2 and after step 3
# (checked below); with seed 0 it stays at threshold_init until step 4.
DEMO_SEED = 1
CONSOLE_STEP = re.compile(r"(?:^|\s)step:(\d+) - ")
CONSOLE_AVSPO_METRIC = re.compile(r"(?:^|\s)(avspo/\w+):(\S+)")


@dataclass(frozen=True)
class DemoRun:
    out: Path
    stdout: str

    @property
    def files(self) -> DemoFiles:
        return DemoFiles(self.out / "model", self.out / "data" / "train.parquet", self.out / "data" / "test.parquet")

    @property
    def log_file(self) -> Path:
        return self.out / "train.log"

    @property
    def metrics_file(self) -> Path:
        return self.out / "train.metrics.jsonl"


def console_avspo_metrics(log_file: Path) -> dict[int, dict[str, float]]:
    """{step: {avspo metric: value}} from the console backend's ``step:N - key:value - ...`` lines."""
    steps: dict[int, dict[str, float]] = {}
    for line in Path(log_file).read_text().splitlines():
        step = CONSOLE_STEP.search(line)
        if step:
            metrics = {key: float(value) for key, value in CONSOLE_AVSPO_METRIC.findall(line)}
            steps.setdefault(int(step.group(1)), {}).update(metrics)
    return steps


def log_tail(path: Path, lines: int = 60) -> str:
    return "\n".join(Path(path).read_text().splitlines()[-lines:])


def assert_avspo_metrics_at_every_step(steps: dict[int, dict[str, float]], expected_steps: Sequence[int], where: str):
    config = AVSPOConfig(threshold_mode="adaptive", threshold_lr=THRESHOLD_LR)
    assert sorted(steps) == list(expected_steps), f"{where}: logged steps {sorted(steps)}"
    for step in expected_steps:
        metrics = steps[step]
        assert "avspo/acr" in metrics, f"{where}: no avspo/acr at step {step}; got {sorted(metrics)}"
        assert "avspo/threshold" in metrics, f"{where}: no avspo/threshold at step {step}; got {sorted(metrics)}"
        assert 0.0 <= metrics["avspo/acr"] <= 1.0, f"{where}: avspo/acr {metrics['avspo/acr']} at step {step}"
        threshold = metrics["avspo/threshold"]
        assert math.isfinite(threshold), f"{where}: avspo/threshold {threshold} at step {step}"
        assert config.threshold_min <= threshold <= config.threshold_max, f"{where}: threshold {threshold}"


def eq12(config: AVSPOConfig, tau: float, acr: float, reward: float, previous_reward: float) -> float:
    """Eq. 12 written out: tau + eta * sign(J_t - J_{t-1}) * (ACR_t - tau), clamped (unmoved when J is unchanged)."""
    moved = tau + config.threshold_lr * math.copysign(1.0, reward - previous_reward) * (acr - tau)
    return min(config.threshold_max, max(config.threshold_min, moved if reward != previous_reward else tau))


def run_demo(out: Path, steps: int, *arguments: str) -> DemoRun:
    """``avspo verl-demo`` as a user runs it, with the console logger, a checkpoint every CHECKPOINT_STEP; its
    command runs in this process (main_ppo, as always, in its own), which has torch and transformers loaded."""
    argv = [
        "verl-demo", "--out", str(out), "--steps", str(steps), "--seed", str(DEMO_SEED), "--logger", "console",
        "--timeout", str(RUN_TIMEOUT_S), *arguments, f"trainer.save_freq={CHECKPOINT_STEP}",
    ]  # fmt: skip
    progress_bars = transformers_logging.is_progress_bar_enabled()  # the demo turns them off for its model save
    try:
        run = avspo(*argv)
    finally:
        (transformers_logging.enable_progress_bar if progress_bars else transformers_logging.disable_progress_bar)()
    assert run.returncode == 0, f"avspo verl-demo failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return DemoRun(out, run.stdout)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """``avspo verl-demo``: verl's default trainer, the avspo estimator, CHECKPOINT_STEP steps, saved at the last."""
    return run_demo(tmp_path_factory.mktemp("verl_demo"), CHECKPOINT_STEP, *AVSPO_OVERRIDES)


@pytest.fixture(scope="module")
def legacy_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """``avspo verl-demo --trainer legacy`` with verl's grpo and the ACR monitor, CHECKPOINT_STEP steps, a
    checkpoint at the last. (Its resume is checked at the trainer-method level, tests/verl/test_monitor.py.)"""
    return run_demo(
        tmp_path_factory.mktemp("verl_legacy"), CHECKPOINT_STEP, "--trainer", "legacy",
        "algorithm.adv_estimator=grpo", "algorithm.avspo_monitor.enable=true",
    )  # fmt: skip


def test_demo_trains_with_the_default_trainer_and_logs_avspo_metrics_at_every_step(demo_run: DemoRun):
    steps = list(range(1, CHECKPOINT_STEP + 1))
    assert_avspo_metrics_at_every_step(avspo_metrics_by_step(demo_run.metrics_file), steps, "file backend")
    assert_avspo_metrics_at_every_step(console_avspo_metrics(demo_run.log_file), steps, "console backend")
    # The demo tells the user what it does and prints each step's metrics.
    for step in steps:
        assert re.search(rf"^  step {step}: .*\bacr=", demo_run.stdout, re.MULTILINE), demo_run.stdout
    assert "[1/3]" in demo_run.stdout and "[2/3]" in demo_run.stdout and "[3/3]" in demo_run.stdout
    # docs/using/verl-cpu.md's sample (a recorded run of `avspo verl-demo`) prints the metrics this run prints.
    recorded = demo_step_metrics(json.loads(VERL_DEMO_RECORD.read_text())["output"])
    printed = demo_step_metrics(demo_run.stdout)
    assert set().union(*printed.values()) == set().union(*recorded.values()), \
        "the demo prints other metrics than the docs' sample: python -m renderer record verl-demo"


def test_the_monitor_beside_grpo_in_the_legacy_trainer_logs_collapse_at_every_step(legacy_run: DemoRun):
    steps = list(range(1, CHECKPOINT_STEP + 1))
    monitored = {f"avspo/{name}" for name in MONITOR_METRICS if name != "filtered_groups"}
    for where, logged in (("file", avspo_metrics_by_step(legacy_run.metrics_file)),
                          ("console", console_avspo_metrics(legacy_run.log_file))):  # fmt: skip
        assert sorted(logged) == steps, f"legacy, {where} backend: logged steps {sorted(logged)}"
        for step in steps:
            collapse = set(logged[step])
            assert monitored <= collapse and "avspo/threshold" not in collapse, (where, step, sorted(collapse))
            metrics = logged[step]
            assert 0.0 <= metrics["avspo/acr"] <= 1.0 and metrics["avspo/groups"] > 0, (where, step, metrics)
            assert metrics["avspo/wasted_rollouts"] == pytest.approx(metrics["avspo/acr"] * metrics["avspo/samples"])
    assert "algorithm.adv_estimator=grpo, trainer legacy" in legacy_run.stdout
    for step in steps:
        assert re.search(rf"^  step {step}: .*\bacr=", legacy_run.stdout, re.MULTILINE), legacy_run.stdout
    # `avspo analyze` reads what the monitor logged, as it reads the estimator's.
    report = legacy_run.out / "analysis"
    analyzed = avspo("analyze", f"grpo={legacy_run.metrics_file}", "--out", str(report), "--no-plots")
    assert analyzed.returncode == 0, analyzed.stdout + analyzed.stderr
    (run,) = json.loads((report / "analysis.json").read_text())["runs"]
    logged = avspo_metrics_by_step(legacy_run.metrics_file)
    assert run["exact"] and run["steps"]["count"] == CHECKPOINT_STEP, run
    assert run["means"]["acr"] == pytest.approx(sum(logged[step]["avspo/acr"] for step in steps) / len(steps)), run
    # verl's legacy _save_checkpoint wrote the monitor's state of the step beside the actor; no estimator state.
    folder = legacy_run.out / "checkpoints" / f"global_step_{CHECKPOINT_STEP}"
    assert json.loads((folder / MONITOR_STATE_FILE).read_text())["logged_steps"] == CHECKPOINT_STEP
    assert not (folder / STATE_FILE).exists()


def test_resumed_v1_run_with_multi_output_sessions_in_mini_batches(demo_run: DemoRun, tmp_path: Path):
    """The demo's step-2 checkpoint resumed by verl's default trainer with an agent loop that returns two
    outputs per session, each step split into two mini-batch updates (parameter_sync_step=2). A probe in
    the trainer process compares every advantage step with verl's own GRPO route on the same rows."""
    config = AVSPOConfig(threshold_mode="adaptive", threshold_lr=THRESHOLD_LR)
    before = avspo_metrics_by_step(demo_run.metrics_file)
    saved = demo_run.out / "checkpoints" / f"global_step_{CHECKPOINT_STEP}"
    assert saved.is_dir(), f"no checkpoint at step {CHECKPOINT_STEP} in {saved.parent}"
    # The checkpoint holds tau as Eq. 12 moved it after step 2 (from J_1, J_2 and ACR_2: the first move),
    # and J_2; step 3 must run under that tau, which differs from threshold_init so that a lost state shows.
    saved_threshold = json.loads((saved / STATE_FILE).read_text())["threshold"]
    tau2, acr2, reward2 = (before[2][f"avspo/{name}"] for name in ("threshold", "acr", "reward_mean"))
    assert saved_threshold["tau"] == pytest.approx(eq12(config, tau2, acr2, reward2, before[1]["avspo/reward_mean"]))
    assert saved_threshold["prev_reward_mean"] == pytest.approx(reward2)
    assert saved_threshold["tau"] != config.threshold_init, f"{saved_threshold}: pick another DEMO_SEED"

    # The run as if stopped after step 2: the step-2 checkpoint, recorded as the latest.
    checkpoints = tmp_path / "checkpoints"
    shutil.copytree(saved, checkpoints / saved.name)
    (checkpoints / "latest_checkpointed_iteration.txt").write_text(str(CHECKPOINT_STEP))

    support = Path(__file__).parent / "support"
    agent_loops = tmp_path / "agent_loops.yaml"
    agent_loops.write_text("- name: multi_output\n  _target_: multi_output_agent_loop.MultiOutputAgentLoop\n")
    probe = tmp_path / "advantage_steps.jsonl"
    command = main_ppo_command(demo_run.files, tmp_path, STEPS, resume=True, extra_overrides=(
        *AVSPO_OVERRIDES,
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_loops}",
        "actor_rollout_ref.rollout.agent.default_agent_loop=multi_output",
        "+trainer.v1.sync.parameter_sync_step=2",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
    ))  # fmt: skip
    env = {
        "PYTHONPATH": os.pathsep.join([str(support), os.environ.get("PYTHONPATH", "")]),
        "VERL_USE_EXTERNAL_MODULES": "avspo_plugin.verl_cpu,advantage_probe",
        "AVSPO_PROBE_OUT": str(probe),
    }
    run = run_main_ppo(command, tmp_path, run_name="resumed", echo=False, timeout=RUN_TIMEOUT_S, extra_env=env)
    assert run.returncode == 0, f"main_ppo exited with {run.returncode}; end of {run.log_file}:\n{log_tail(run.log_file)}"
    log = run.log_file.read_text()
    assert "avspo estimator registered in process" in log
    # The restore is reported at verl's default log level, in the trainer process.
    assert f"AVSPO state restored from {checkpoints / saved.name}" in log

    # Sessions grouped as GRPO groups them: 2 steps x 2 mini-batches of 2 prompts x 4 sessions x 2 outputs.
    calls = [json.loads(line) for line in probe.read_text().splitlines()]
    assert [(c["rows"], c["sessions"], c["prompts"]) for c in calls] == [(16, 8, 2)] * 4, calls
    assert all(c["equal_where_grpo_nonzero"] for c in calls), calls
    assert any(c["nonzero"] for c in calls), "no advantage step had a non-collapsed group: nothing was compared"
    resumed = avspo_metrics_by_step(run.metrics_file)
    assert sorted(resumed) == [3, 4], f"the resumed run logged steps {sorted(resumed)}"
    for step in (3, 4):
        # One group per prompt of the step, one sample per session, pooled over the two mini-batches.
        assert resumed[step]["avspo/groups"] == 4.0 and resumed[step]["avspo/samples"] == 16.0

    # Resume: step 3 runs under the restored tau; step 4 under tau moved once by Eq. 12 from the restored
    # previous reward J_2 and step 3's pooled ACR and reward (a lost J_2 would leave tau where it was).
    tau3, acr3, reward3 = (resumed[3][f"avspo/{name}"] for name in ("threshold", "acr", "reward_mean"))
    assert tau3 == saved_threshold["tau"]
    expected_tau4 = eq12(config, tau3, acr3, reward3, reward2)
    assert resumed[4]["avspo/threshold"] == pytest.approx(expected_tau4, abs=1e-12)
    assert expected_tau4 != tau3, "step 3 left tau unmoved: the check cannot tell a lost J_2; pick another DEMO_SEED"
