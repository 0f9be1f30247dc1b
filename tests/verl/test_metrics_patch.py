"""patches/verl-estimator-metrics.patch applies to the installed verl, its own tests pass, and the adapter uses it."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from avspo_plugin.import_patching import is_patched

PATCH = Path(__file__).resolve().parents[2] / "patches" / "verl-estimator-metrics.patch"
PATCH_TEST = "tests/trainer/ppo/test_adv_estimator_metrics_on_cpu.py"

# Runs with the patched copy first on sys.path: the entry point loads the adapter against it.
CHANNEL_CHECK = """
import json, sys
import numpy as np, torch
import verl
from verl import DataProto
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.utils.tracking import Tracking
from avspo_plugin.verl import hooks, metric_routing

# What the trainer of an avspo run places when it starts.
hooks.place_hooks({"algorithm": {"adv_estimator": "avspo"}, "trainer": {"use_v1": False}})
rewards = torch.zeros(4, 2)
rewards[:, -1] = torch.tensor([1.0, 1.0, 0.0, 1.0])
for _ in range(2):
    batch = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": torch.ones(4, 2)},
        non_tensors={"uid": np.array(["a", "a", "b", "b"], dtype=object)},
    )
    compute_advantage(batch, adv_estimator="avspo", config={"adv_estimator": "avspo"})
# The Tracking.log hook (there for prompt selection's metrics) leaves the estimator's to the channel.
logged = []
tracking = Tracking("avspo-test", "channel", default_backend=[])
tracking.logger["probe"] = type("Probe", (), {"log": lambda self, data, step: logged.append(dict(data))})()
tracking.log({"actor/entropy": 2.0}, step=5)
step = core_algos.collect_adv_estimator_metrics("avspo", metrics={"actor/entropy": 2.0}, global_step=5)
print(json.dumps({
    "verl_file": verl.__file__,
    "route": metric_routing.metrics_route(),
    "tracking_log_hooked": hasattr(Tracking.log, "__avspo_patch__"),
    "tracking_added": sorted(set(logged[0]) - {"actor/entropy"}),
    "step": step,
    "after": core_algos.collect_adv_estimator_metrics("avspo", metrics={}, global_step=6),
}))
import pytest
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", sys.argv[1]]))
"""


def apply_patch(tree: Path) -> subprocess.CompletedProcess:
    if shutil.which("patch"):
        command = ["patch", "-p1", "--forward", "--batch", "-i", str(PATCH)]
    else:  # same unified diff, applied by git where GNU patch is not installed
        command = ["git", "apply", "-p1", str(PATCH)]
    return subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def patched_verl(tmp_path_factory):
    import verl

    tree = tmp_path_factory.mktemp("verl-patched")
    shutil.copytree(Path(verl.__file__).parent, tree / "verl", ignore=shutil.ignore_patterns("__pycache__"))
    applied = apply_patch(tree)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    return tree


def test_patch_applies_to_the_released_source(patched_verl):
    core_algos = (patched_verl / "verl" / "trainer" / "ppo" / "core_algos.py").read_text()
    assert "def register_adv_est_metrics(" in core_algos and "def collect_adv_estimator_metrics(" in core_algos
    for trainer in ("ray_trainer.py", "v1/trainer_base.py"):
        assert "core_algos.collect_adv_estimator_metrics(" in (patched_verl / "verl" / "trainer" / "ppo" / trainer).read_text()
    # Applying it twice is refused, not silently doubled.
    assert apply_patch(patched_verl).returncode != 0


def test_adapter_uses_verls_channel_and_the_patch_tests_pass(patched_verl):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(patched_verl), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-c", CHANNEL_CHECK, str(patched_verl / PATCH_TEST)],
        cwd=patched_verl, env=env, capture_output=True, text=True, timeout=600,
    )
    report = json.loads(next(line for line in run.stdout.splitlines() if line.startswith("{")))
    assert report["verl_file"].startswith(str(patched_verl))
    assert report["route"] == "verl's estimator metrics channel (core_algos.register_adv_est_metrics)"
    assert report["tracking_log_hooked"] and report["tracking_added"] == []
    step = report["step"]
    assert step["avspo/acr"] == 0.5 and step["avspo/groups"] == 4.0  # two calls, counts summed
    assert "avspo/entropy_collapse" in step
    assert report["after"] == {}, "metrics leaked into the next step"
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "6 passed" in run.stdout


def test_stock_verl_has_no_channel_so_the_tracking_hook_is_used():
    from verl.utils.tracking import Tracking

    from avspo_plugin.verl import metric_routing

    assert metric_routing.verl_metrics_channel() is None
    assert metric_routing.metrics_route() == "the Tracking.log hook"
    assert is_patched(Tracking.log)
