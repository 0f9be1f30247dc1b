"""`avspo doctor`: registration, the reason when verl swallowed the plugin's import error, and the config check.

The check in a fresh Ray actor runs in test_registration.py, inside that module's Ray session.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from runnable_overrides import RUNNABLE

from avspo_plugin.commands.doctor.verl import VERL_CONFIG, VERL_CONFIG_NAME, compose_config
from avspo_plugin.commands.main import main

# verl imports its plugins inside `import verl` and swallows their errors; here the plugin's
# import fails as it would with a broken dependency, and the doctor must show the real error.
BROKEN_PLUGIN = """
import importlib.abc, sys

class BrokenDependency(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "avspo_plugin.verl.hooks":
            raise ImportError("simulated: a dependency of the plugin is missing")

sys.meta_path.insert(0, BrokenDependency())
from avspo_plugin.commands.main import main
sys.exit(main(["doctor", "--no-ray", "--no-config"]))
"""


def test_healthy_install_and_valid_config(capsys):
    overrides = ["algorithm.adv_estimator=avspo", "+algorithm.avspo.alpha=0.3", "algorithm.use_kl_in_reward=true"]
    assert main(["doctor", "--no-ray", *overrides, *RUNNABLE]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == [f"avspo doctor: READY ({out.count('[warn]')} warning(s) below)", "avspo doctor"]
    assert ("config ppo_trainer from pkg://verl.trainer.config (what python -m verl.trainer.main_ppo composes) with "
            "algorithm.adv_estimator=avspo +algorithm.avspo.alpha=0.3") in out
    assert "verl 0.9.1" in out and "entry point: verl.plugins avspo = avspo_plugin.verl" in out
    assert "[ok] avspo registered in this process: avspo_plugin.verl.estimator.compute_avspo_outcome_advantage" in out
    assert "metrics via the Tracking.log hook" in out
    # The trainer modules were imported: every hook listed, the trl patch too, none missing.
    assert "[ok] hooks in this process: 13 of 13 in place, 0 ready (placed by the trainer of a run that uses them), 0 not needed, 0 missing" in out
    assert "- verl.trainer.ppo.v1.trainer_base.PPOTrainer.step: in place" in out
    assert "- verl.models.transformers.monkey_patch.is_trl_available: in place" in out
    assert "[ok] verl 0.9.1: the hooks are checked with verl 0.6.1, 0.7.1, 0.8.0, 0.9.1" in out
    assert "[ok] algorithm.avspo is valid; not default: alpha=0.3" in out
    assert "[warn] algorithm.use_kl_in_reward=True" in out


def test_at_launch_the_doctor_says_what_the_batch_means_for_the_trigger(capsys):
    """The shares themselves: tests/commands/doctor/test_trigger.py."""
    for mode in ([], ["+algorithm.avspo.threshold_mode=adaptive"]):  # the default is the paper's trigger
        assert main(["doctor", "--no-ray", "algorithm.adv_estimator=avspo", *mode, "actor_rollout_ref.rollout.n=8",
                     "data.train_batch_size=256", *RUNNABLE]) == 0
        out = capsys.readouterr().out
        assert ("[ok] this run: acting (the paper's AVSPO): virtual samples in collapsed groups' mean and std, "
                "threshold_mode=adaptive, on steps whose ACR is above tau (tau_0 = 0.5, moved by Eq. 12): at 256 prompts "
                "per step and the paper's GRPO ACR (0.28-0.45) it opens on under 1% to 5% of steps at tau_0") in out
        assert ("[warn] algorithm.avspo.threshold_mode=adaptive: virtual samples are added only on steps whose ACR "
                "exceeds tau (tau_0 = 0.5, moved after each step by Eq. 12 at threshold_lr=0.01). With 256 prompts per "
                "step (data.train_batch_size) in groups of actor_rollout_ref.rollout.n=8, at the ACR of the paper's GRPO "
                "runs with G = 8 (0.28-0.45) the trigger opens on under 1% to 5% of steps") in out
        assert "algorithm.avspo.threshold_mode=always augments every collapsed group at every step, in any batch" in out
        assert "whatever the ACR" not in out
    always = ("[ok] algorithm.avspo.threshold_mode=always: every collapsed group is augmented at every step, whatever "
              "the ACR of 256 prompts per step (data.train_batch_size) (the paper's operating point)")
    assert main(["doctor", "--no-ray", "algorithm.adv_estimator=avspo", "+algorithm.avspo.threshold_mode=always",
                 "data.train_batch_size=256", *RUNNABLE]) == 0
    out = capsys.readouterr().out
    assert always in out and "virtual samples are added only on steps" not in out


def test_the_paper_recipe_gets_no_trigger_warning(capsys):
    """One prompt per step: every collapsed step opens the adaptive trigger, as in the paper."""
    recipes = Path(__file__).resolve().parents[2] / "recipes"
    assert main(["doctor", "--no-ray", "--config-path", str(recipes), "--config-name", "avspo_paper"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "avspo doctor: READY", out
    assert ("[ok] algorithm.avspo.threshold_mode=adaptive: virtual samples are added only on steps whose ACR exceeds "
            "tau (tau_0 = 0.5, moved after each step by Eq. 12 at threshold_lr=0.01). With 1 prompt per step "
            "(data.train_batch_size) in groups of actor_rollout_ref.rollout.n=8 a step's ACR is 0 or 1, so every step "
            "whose group collapsed opens it") in out


def test_avspo_with_one_response_per_prompt_is_a_warning(capsys):
    assert main(["doctor", "--no-ray", "algorithm.adv_estimator=avspo", "actor_rollout_ref.rollout.n=1", *RUNNABLE]) == 0
    assert ("[warn] algorithm.adv_estimator=avspo with actor_rollout_ref.rollout.n=1: each prompt has a single "
            "response, so no group can collapse") in capsys.readouterr().out


def test_invalid_config_fails_naming_the_key(capsys):
    assert main(["doctor", "--no-ray", "algorithm.adv_estimator=avspo", "+algorithm.avspo.alpah=0.3"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] unknown key(s) algorithm.avspo.alpah; valid keys: reward_low," in out


def test_a_misspelt_block_name_fails_naming_the_block_meant(capsys):
    """The issue's case: `+algorithm.avpso.threshold_mode=always` passed as "algorithm.avspo is valid; all defaults"."""
    assert main(["doctor", "--no-ray", "algorithm.adv_estimator=avspo", "+algorithm.avpso.threshold_mode=always"]) == 1
    out = capsys.readouterr().out
    assert ("[FAIL] algorithm.avpso is not a block of the avspo plugin: did you mean algorithm.avspo? Its keys would be "
            "ignored") in out
    assert "algorithm.avspo is valid" not in out


def test_stock_ppo_trainer_config_without_avspo_is_flagged_and_refused_as_verl_refuses_it(capsys):
    assert main(["doctor", "--no-ray"]) == 1
    out = capsys.readouterr().out
    assert "[warn] algorithm.adv_estimator=gae: this run uses nothing of avspo" in out
    assert "[FAIL] verl refuses this config (validate_config, which main_ppo calls before Ray starts): " in out


def test_a_config_verl_refuses_is_not_ready_quoting_verl(capsys):
    """verl's own validate_config is the oracle: the doctor quotes what it raises for the same config."""
    from verl.trainer.main_ppo import need_critic, need_reference_policy, validate_config

    overrides = ["algorithm.adv_estimator=avspo", "data.train_batch_size=1", *RUNNABLE]
    config = compose_config(VERL_CONFIG, VERL_CONFIG_NAME, overrides)
    with pytest.raises(Exception) as refused:
        validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    assert main(["doctor", "--no-ray", *overrides]) == 1
    out = capsys.readouterr().out
    quoted = f"verl refuses this config (validate_config, which main_ppo calls before Ray starts): " \
             f"{type(refused.value).__name__}: {refused.value}"
    assert out.splitlines()[0] == f"avspo doctor: NOT READY: {quoted}"
    assert main(["doctor", "--no-ray", *overrides[:1], *RUNNABLE]) == 0
    assert "[ok] verl's validate_config accepts it, as main_ppo checks it before Ray starts" in capsys.readouterr().out


def test_the_readme_monitor_line_is_checked_verbatim(capsys):
    """README: `python -m verl.trainer.main_ppo ... algorithm.adv_estimator=grpo +algorithm.avspo_monitor.enable=true`,
    then `avspo doctor <same overrides>`."""
    assert main(["doctor", "--no-ray", "algorithm.adv_estimator=grpo", "+algorithm.avspo_monitor.enable=true",
                 *RUNNABLE]) == 0
    out = capsys.readouterr().out
    assert "[ok] algorithm.avspo_monitor is on beside algorithm.adv_estimator=grpo (advantages untouched)" in out
    assert "[FAIL]" not in out


def readme_overrides(command: str) -> list[str]:
    """The overrides of the README's line that starts with ``command`` (what follows it, up to a comment)."""
    line = next(text for text in (Path(__file__).parents[2] / "README.md").read_text().splitlines()
                if text.startswith(command))
    return line.split("#")[0].split()[len(command.split()):]


def test_the_readme_acting_line_runs_the_papers_method_and_says_so(capsys):
    """README: `avspo doctor ... algorithm.adv_estimator=avspo` (... a run's own overrides): the paper's AVSPO,
    acting, with one evidence sentence."""
    overrides = readme_overrides("avspo doctor")
    assert overrides == ["...", "algorithm.adv_estimator=avspo"]
    assert main(["doctor", "--no-ray", *RUNNABLE, *overrides[1:]]) == 0
    out = capsys.readouterr().out
    assert "this run: acting (the paper's AVSPO): virtual samples in collapsed groups' mean and std, " \
           "threshold_mode=adaptive" in out
    assert "evidence: The paper reports +3.7 to +6.1 points" in out and "recipes/run_ab_1gpu.sh" in out
    assert "[FAIL]" not in out


def test_the_readme_override_of_a_key_composes_on_stock_verl(capsys):
    """README: `++algorithm.avspo.threshold_mode=always` on verl's stock ppo_trainer (which has no avspo block)."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "`++algorithm.avspo.threshold_mode=always`" in readme
    assert main(["doctor", "--no-ray", "algorithm.adv_estimator=avspo", "++algorithm.avspo.threshold_mode=always",
                 *RUNNABLE]) == 0
    out = capsys.readouterr().out
    assert "not default: threshold_mode='always'" in out and "every collapsed group at every step" in out


def test_the_plugins_packaged_config_is_composed_when_named(capsys):
    options = ["--config-path", "pkg://avspo_plugin.verl.config", "--config-name", "avspo_trainer"]
    assert main(["doctor", "--no-ray", *options, "algorithm.avspo.alpha=0.3", *RUNNABLE]) == 0
    out = capsys.readouterr().out
    assert "config avspo_trainer from pkg://avspo_plugin.verl.config with algorithm.avspo.alpha=0.3 " in out
    assert "[ok] algorithm.avspo is valid; not default: alpha=0.3" in out


def test_the_monitor_beside_grpo_is_checked_with_the_hooks_it_wraps(capsys):
    overrides = ["algorithm.adv_estimator=grpo", "+algorithm.avspo_monitor.enable=true", "algorithm.filter_groups.enable=true"]
    assert main(["doctor", "--no-ray", *overrides, *RUNNABLE]) == 0
    out = capsys.readouterr().out
    assert "[ok] algorithm.avspo_monitor is on beside algorithm.adv_estimator=grpo (advantages untouched)" in out
    assert "collapse is counted on the groups as generated, before filtering" in out
    assert "global_step_<N>/avspo_monitor_state.json" in out and "avspo_state.json" not in out
    wraps = next(text for text in out.splitlines() if "verl functions this run wraps" in text)
    # The monitor's hooks only: not the estimator's trajectory grouping.
    assert "(algorithm.avspo_monitor.enable=true): 8:" in wraps, wraps
    assert "compute_advantage_for_multi_trajectories" not in wraps
    assert main(["doctor", "--no-ray", "algorithm.adv_estimator=grpo", "+algorithm.avspo_monitor.enabel=true"]) == 1
    assert "[FAIL] unknown key(s) algorithm.avspo_monitor.enabel" in capsys.readouterr().out


def test_swallowed_import_error_is_shown():
    run = subprocess.run([sys.executable, "-c", BROKEN_PLUGIN], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1
    # The verdict first, naming the failed check; verl's and the libraries' warnings follow the detail in full then.
    assert run.stdout.splitlines()[0] == "avspo doctor: NOT READY: avspo NOT registered in this process. Why"
    assert "[FAIL] avspo NOT registered in this process. Why:" in run.stdout
    assert "loading the entry point avspo_plugin.verl raises" in run.stdout
    assert "ImportError: simulated: a dependency of the plugin is missing" in run.stdout


def test_augmentation_with_dapo_group_filtering_fails_naming_it(capsys):
    overrides = ["algorithm.adv_estimator=avspo", "+algorithm.avspo.threshold_mode=adaptive",
                 "algorithm.filter_groups.enable=true"]
    assert main(["doctor", "--no-ray", *overrides]) == 1
    out = capsys.readouterr().out
    assert (
        "[FAIL] algorithm.adv_estimator=avspo with algorithm.avspo.threshold_mode=adaptive cannot run with "
        "algorithm.filter_groups.enable=true (DAPO's group filtering): verl evicts the zero-variance groups"
    ) in out


def test_monitor_only_with_dapo_group_filtering_is_ok(capsys):
    overrides = ["algorithm.adv_estimator=avspo", "algorithm.filter_groups.enable=true",
                 "+algorithm.avspo.threshold_mode=never", *RUNNABLE]
    assert main(["doctor", "--no-ray", *overrides]) == 0
    out = capsys.readouterr().out
    assert "[ok] algorithm.filter_groups.enable=true: verl evicts the zero-variance groups" in out
    assert "collapse is counted on the groups as generated, before filtering (algorithm.avspo.threshold_mode=never: monitor only)" in out


def test_newer_verl_than_the_tested_range_is_a_warning(capsys, monkeypatch):
    import verl

    monkeypatch.setattr(verl, "__version__", "0.10.0")
    assert main(["doctor", "--no-ray", "--no-config"]) == 0
    out = capsys.readouterr().out
    assert f"[ok] verl imported in this process: 0.10.0 from {verl.__path__[0]}" in out
    assert "[warn] the pip-installed verl is 0.9.1, but this process imports verl 0.10.0" in out
    assert "[warn] verl 0.10.0 is newer than the tested range (verl 0.6.1 to 0.9.1 (0.6.1, 0.7.1, 0.8.0, 0.9.1))" in out


def test_verl_on_pythonpath_is_the_one_reported(tmp_path):
    """A source checkout on PYTHONPATH shadows the pip install: doctor names its folder and version."""
    checkout = tmp_path / "verl"
    checkout.mkdir()
    (checkout / "__init__.py").write_text('__version__ = "0.99.0.dev0"\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "avspo_plugin.commands.main", "doctor", "--no-ray", "--no-config"],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    assert f"[ok] verl imported in this process: 0.99.0.dev0 from {checkout}" in run.stdout, run.stdout + run.stderr
    assert "[warn] the pip-installed verl is 0.9.1, but this process imports verl 0.99.0.dev0" in run.stdout
    assert run.returncode == 1  # the stand-in has no trainer: import of verl.trainer fails, and is shown


@pytest.mark.parametrize("python", ["same", "3.11.0 (/elsewhere/bin/python)"])
def test_an_actor_on_another_python_interpreter_is_a_failure(monkeypatch, capsys, python):
    """The actor's report is this process's own probe, but for the interpreter it names."""
    from avspo_plugin.commands.doctor import verl as verl_doctor
    from avspo_plugin.commands.doctor.ray_cluster import PRIVATE_INSTANCE

    here = verl_doctor.probe()
    actor = {**here, "ray": PRIVATE_INSTANCE} | ({} if python == "same" else {"python": python})
    monkeypatch.setattr(verl_doctor, "probe_in_ray_actor", lambda address, runtime_env: actor)
    code = main(["doctor", "--no-config"])
    out = capsys.readouterr().out
    where = f"a fresh Ray actor (pid {here['pid']} on {here['host']}, in {PRIVATE_INSTANCE})"
    if python == "same":
        assert code == 0 and f"[ok] {where} runs this Python: {here['python']}" in out
    else:
        assert code == 1
        assert out.splitlines()[0].startswith(f"avspo doctor: NOT READY: {where} runs another Python, {python}, than "
                                              f"this process's {here['python']}: Ray's workers use another environment")
