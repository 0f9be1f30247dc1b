"""`avspo doctor`: registration, the reason when verl swallowed the plugin's import error, and the config check.

The check in a fresh Ray actor runs in test_registration.py, inside that module's Ray session.
"""

import subprocess
import sys

from avspo_plugin.cli import main

# verl imports its plugins inside `import verl` and swallows their errors; here the plugin's
# import fails as it would with a broken dependency, and the doctor must show the real error.
BROKEN_PLUGIN = """
import importlib.abc, sys

class BrokenDependency(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "avspo_plugin.verl.patches":
            raise ImportError("simulated: a dependency of the plugin is missing")

sys.meta_path.insert(0, BrokenDependency())
from avspo_plugin.cli import main
sys.exit(main(["doctor", "--no-ray", "--no-config"]))
"""


def test_healthy_install_and_valid_config(capsys):
    assert main(["doctor", "--no-ray", "algorithm.avspo.alpha=0.3", "algorithm.use_kl_in_reward=true"]) == 0
    out = capsys.readouterr().out
    assert "verl 0.9.1" in out and "entry point: verl.plugins avspo = avspo_plugin.verl" in out
    assert "[ok] avspo registered in this process: avspo_plugin.verl.estimator.compute_avspo_outcome_advantage" in out
    assert "metrics via the Tracking.log hook" in out
    # The trainer modules were imported: every hook listed, the trl patch too, none missing.
    assert "[ok] hooks in this process: 17 of 17 in place, 0 not needed, 0 missing" in out
    assert "- verl.trainer.ppo.v1.trainer_base.PPOTrainer.step: in place" in out
    assert "- verl.models.transformers.monkey_patch.is_trl_available: in place" in out
    assert "[ok] verl 0.9.1: the hooks are checked with verl 0.6.1, 0.7.1, 0.8.0, 0.9.1" in out
    assert "[ok] algorithm.avspo is valid; not default: alpha=0.3" in out
    assert "[warn] algorithm.use_kl_in_reward=True" in out


def test_invalid_config_fails_naming_the_key(capsys):
    assert main(["doctor", "--no-ray", "+algorithm.avspo.alpah=0.3"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] unknown key(s) algorithm.avspo.alpah; valid keys: strategy," in out


def test_stock_ppo_trainer_config_without_avspo_is_flagged(capsys):
    assert main(["doctor", "--no-ray", "--config-path", "pkg://verl.trainer.config", "--config-name", "ppo_trainer"]) == 0
    assert "[warn] algorithm.adv_estimator=gae: this run does not use avspo" in capsys.readouterr().out


def test_swallowed_import_error_is_shown():
    run = subprocess.run([sys.executable, "-c", BROKEN_PLUGIN], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1
    assert "[FAIL] avspo NOT registered in this process. Why:" in run.stdout
    assert "loading the entry point avspo_plugin.verl raises" in run.stdout
    assert "ImportError: simulated: a dependency of the plugin is missing" in run.stdout
