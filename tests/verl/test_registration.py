"""`avspo` is registered wherever verl computes advantages: plain `import verl`, Ray actors, the env-var routes."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import ray
import torch

import avspo_plugin
from avspo_plugin.commands.doctor.verl import ProbeActor
from avspo_plugin.import_patching import is_patched
from avspo_plugin.verl import pop_metrics, session
from avspo_plugin.verl.estimator import RegistrationError, register_estimator
from avspo_plugin.verl.hooks import PLACEABLE


def test_plain_import_verl_in_a_fresh_process_registers_avspo(fresh_verl_process):
    plain_verl_import = fresh_verl_process["verl_import"]
    assert {key: plain_verl_import[key] for key in ("registered", "function")} == {
        "registered": True,
        "function": "avspo_plugin.verl.estimator.compute_avspo_outcome_advantage",
    }
    # The plain entry point never loads the opt-in CPU support: no CPU platform, hf replica or hf rollout
    # (tests/verl/test_e2e_cpu_support.py checks that VERL_USE_EXTERNAL_MODULES loads them).
    assert not plain_verl_import["cpu_support_loaded"]
    assert plain_verl_import["cpu_support_registered"] == [False, False, False]


@pytest.fixture(scope="module")
def ray_session():
    # A private instance: a test never attaches to a cluster it did not start.
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


# verl's own run_ppo, entry points off everywhere: the launcher has the plugin, and the trainer
# process can only get it from the VERL_USE_EXTERNAL_MODULES the plugin adds to Ray's runtime env.
RUN_PPO = """
import json, os
import avspo_plugin.verl
import ray
from hydra import compose, initialize_config_module
from verl.trainer.main_ppo import run_ppo

@ray.remote(num_cpus=0)
class ProbeTaskRunner:
    def run(self, config):
        from avspo_plugin.commands.doctor.verl import probe
        with open(os.environ["AVSPO_TEST_OUT"], "w") as f:
            json.dump(probe(), f)

# A running cluster, as on a head node: verl's run_ppo joins it with the job's runtime env (the job's processes get
# their environment from it alone), which turns entry points off; the plugin adds VERL_USE_EXTERNAL_MODULES to it.
with initialize_config_module("avspo_plugin.verl.config", version_base=None):
    config = compose("avspo_trainer", overrides=[f"+ray_kwargs.ray_init.address={os.environ['AVSPO_TEST_RAY_ADDRESS']}",
                                                 "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_PLUGINS=none",
                                                 f"+ray_kwargs.ray_init.runtime_env.env_vars.AVSPO_TEST_OUT={os.environ['AVSPO_TEST_OUT']}"])
try:
    run_ppo(config, task_runner_class=ProbeTaskRunner)
finally:
    ray.shutdown()
"""


def test_run_ppo_gives_the_trainer_process_the_plugin_through_rays_runtime_env(tmp_path, ray_session):
    """The env-var route in a Ray actor: entry points off, VERL_USE_EXTERNAL_MODULES from the runtime env alone."""
    out = tmp_path / "task_runner.json"
    address = ray_session.get_runtime_context().gcs_address
    env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "none", "AVSPO_TEST_OUT": str(out), "AVSPO_TEST_RAY_ADDRESS": address}
    env.pop("VERL_USE_EXTERNAL_MODULES", None)
    run = subprocess.run([sys.executable, "-c", RUN_PPO], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["registered"], report
    assert report["env"]["VERL_USE_EXTERNAL_PLUGINS"] == "none"
    assert report["env"]["VERL_USE_EXTERNAL_MODULES"] == "avspo_plugin.verl"
    # A fresh process places only the launcher's checks; the rest wait for a run's trainer to place them.
    hooks = set(report["hooks"].values())
    assert hooks <= set(PLACEABLE) | {state for state in hooks if state.startswith("not needed")}, hooks


def test_not_registered_in_a_ray_actor_without_a_route(ray_session):
    """Entry points off and no VERL_USE_EXTERNAL_MODULES: nothing registers avspo, and the report says why. (The
    env-var route registers: the run_ppo test above; the entry-point route in an actor of a running cluster, with the
    hooks it places: test_doctor_beside_a_running_cluster below.)"""
    ray = ray_session
    actor = ray.remote(num_cpus=0)(ProbeActor).options(
        runtime_env={"env_vars": {"VERL_USE_EXTERNAL_PLUGINS": "none"}}
    ).remote()
    report = ray.get(actor.probe.remote(), timeout=600)
    ray.kill(actor)
    assert ray.is_initialized()
    assert not report["registered"] and report["env"]["VERL_USE_EXTERNAL_MODULES"] is None
    assert "VERL_USE_EXTERNAL_PLUGINS=none" in report["why_not"][0]
    assert report["pid"] != os.getpid()


def load_package_copy(name):
    """avspo_plugin imported a second time, as new module objects under another name."""
    root = Path(avspo_plugin.__file__).parent
    spec = importlib.util.spec_from_file_location(name, root / "__init__.py", submodule_search_locations=[str(root)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{name}.verl")


def test_a_second_copy_of_the_package_shares_the_registration_the_session_and_the_hooks(make_batch):
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.tracking import Tracking

    registered = core_algos.get_adv_estimator_fn("avspo")
    log_hook = Tracking.__dict__["log"]
    try:
        copy = load_package_copy("avspo_plugin_second_copy")
        assert copy.compute_avspo_outcome_advantage is not registered  # really another module object
        assert core_algos.get_adv_estimator_fn("avspo") is registered
        assert Tracking.__dict__["log"] is log_hook and not is_patched(log_hook.__wrapped__)
        assert copy.session() is session()

        algorithm = {"adv_estimator": "avspo"}
        compute_advantage(make_batch([1, 1, 0, 1], ["a", "a", "b", "b"]), adv_estimator="avspo", config=algorithm)
        copy.compute_avspo_outcome_advantage(
            torch.tensor([[1.0], [0.0]]), torch.ones(2, 1), index=np.array(["c", "c"], dtype=object), config=algorithm
        )
        metrics = copy.pop_metrics()
        assert metrics["groups"] == 3.0 and pop_metrics() == {}
    finally:
        for name in [name for name in sys.modules if name.startswith("avspo_plugin_second_copy")]:
            del sys.modules[name]


def test_another_plugins_estimator_named_avspo_is_reported():
    from verl.trainer.ppo import core_algos

    def other_estimator(**kwargs):
        raise AssertionError("never called")

    ours = core_algos.ADV_ESTIMATOR_REGISTRY["avspo"]
    core_algos.ADV_ESTIMATOR_REGISTRY["avspo"] = other_estimator
    try:
        with pytest.raises(RegistrationError, match=r"named 'avspo': .*other_estimator, which is not avspo_plugin's"):
            register_estimator()
    finally:
        core_algos.ADV_ESTIMATOR_REGISTRY["avspo"] = ours


def test_doctor_beside_a_running_cluster_checks_in_that_cluster(ray_session):
    # Where users run it: a head node after `ray start --head` (here: this module's own private
    # instance, named through RAY_ADDRESS as a head node's shell has it).
    address = ray_session.get_runtime_context().gcs_address
    env = {**os.environ, "RAY_ADDRESS": address}
    run = subprocess.run(
        [sys.executable, "-m", "avspo_plugin.commands.main", "doctor", "--no-config"], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "[ok] avspo registered in a fresh Ray actor (pid" in run.stdout
    assert f"in the Ray cluster at {address} (RAY_ADDRESS))" in run.stdout
    assert f"in the Ray cluster at {address} (RAY_ADDRESS)) runs this Python: " in run.stdout
    # The actor imported the trainer modules: the launcher's checks and the trl patch in place there too, the
    # hooks of features ready for a run's trainer to place.
    line = "8 of 13 in place, 5 ready (placed by the trainer of a run that uses them), 0 not needed, 0 missing"
    assert run.stdout.count(line) == 2, run.stdout
