"""The verl patch of patches/ on a copy of the installed verl release.

It applies to the released source (and a second time is refused, not doubled). Applied, in one process on that
copy: the trainers import, the adapter uses the estimator metrics channel of patches/verl-estimator-metrics.patch
instead of its Tracking.log hook, and the patch's own tests pass.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from avspo_plugin.import_patching import is_patched

PATCHES = Path(__file__).resolve().parents[2] / "patches"
METRICS_PATCH = PATCHES / "verl-estimator-metrics.patch"
# Each patch's own tests (the patch adds them) and how many there are.
PATCH_TESTS = {
    METRICS_PATCH: ("tests/trainer/ppo/test_adv_estimator_metrics_on_cpu.py", 6),
}

# Runs with the patched copy first on sys.path: the entry point loads the adapter against it. Prints the channel's
# report as one JSON line, then runs the patch's tests (their file paths are the arguments).
PATCHED_CHECK = """
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
# The Tracking.log hook (there for the monitor's metrics) leaves the estimator's to the channel.
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
import verl.trainer.ppo.v1.trainer_base  # the other trainer the patch changes
import pytest
sys.exit(pytest.main(["-v", "-p", "no:cacheprovider", *sys.argv[1:]]))
"""


def apply_patch(patch: Path, tree: Path) -> subprocess.CompletedProcess:
    if shutil.which("patch"):
        command = ["patch", "-p1", "--forward", "--batch", "-i", str(patch)]
    else:  # same unified diff, applied by git where GNU patch is not installed
        command = ["git", "apply", "-p1", str(patch)]
    return subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=60)


def released_verl(tree: Path) -> Path:
    """A copy of the installed verl package in ``tree``."""
    import verl

    shutil.copytree(Path(verl.__file__).parent, tree / "verl", ignore=shutil.ignore_patterns("__pycache__"))
    return tree


def test_the_metrics_patch_applies_alone_and_only_once(tmp_path):
    tree = released_verl(tmp_path)
    applied = apply_patch(METRICS_PATCH, tree)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    core_algos = (tree / "verl" / "trainer" / "ppo" / "core_algos.py").read_text()
    assert "def register_adv_est_metrics(" in core_algos and "def collect_adv_estimator_metrics(" in core_algos
    for trainer in ("ray_trainer.py", "v1/trainer_base.py"):
        assert "core_algos.collect_adv_estimator_metrics(" in (tree / "verl" / "trainer" / "ppo" / trainer).read_text()
    assert apply_patch(METRICS_PATCH, tree).returncode != 0  # applying twice is refused, not silently doubled


@pytest.fixture(scope="module")
def patched_run(tmp_path_factory) -> tuple[dict, subprocess.CompletedProcess, Path]:
    """The patch on a copy of the release, and PATCHED_CHECK run on it: (channel report, the run, the copy)."""
    tree = released_verl(tmp_path_factory.mktemp("verl-patched"))
    for patch in PATCH_TESTS:
        applied = apply_patch(patch, tree)
        assert applied.returncode == 0, f"{patch.name} on top of the others: {applied.stdout + applied.stderr}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-c", PATCHED_CHECK, *(str(tree / path) for path, _ in PATCH_TESTS.values())],
        cwd=tree, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    report = json.loads(next(line for line in run.stdout.splitlines() if line.startswith("{")))
    return report, run, tree


def test_adapter_uses_verls_channel_on_the_patched_release(patched_run):
    report, _, tree = patched_run
    assert report["verl_file"].startswith(str(tree))
    assert report["route"] == "verl's estimator metrics channel (core_algos.register_adv_est_metrics)"
    assert report["tracking_log_hooked"] and report["tracking_added"] == []
    step = report["step"]
    assert step["avspo/acr"] == 0.5 and step["avspo/groups"] == 4.0  # two calls, counts summed
    assert "avspo/entropy_collapse" in step
    assert report["after"] == {}, "metrics leaked into the next step"


@pytest.mark.parametrize("patch", list(PATCH_TESTS), ids=lambda patch: patch.stem)
def test_the_patchs_own_tests_pass(patched_run, patch):
    _, run, _ = patched_run
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    path, count = PATCH_TESTS[patch]
    passed = [line for line in run.stdout.splitlines() if line.startswith(f"{path}::") and " PASSED" in line]
    assert len(passed) == count, run.stdout[-3000:]


def test_stock_verl_has_no_channel_so_the_tracking_hook_is_used():
    from verl.utils.tracking import Tracking

    from avspo_plugin.verl import metric_routing

    assert metric_routing.verl_metrics_channel() is None
    assert metric_routing.metrics_route() == "the Tracking.log hook"
    assert is_patched(Tracking.log)
