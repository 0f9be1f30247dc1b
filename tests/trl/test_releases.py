"""The TRL releases the adapter declares (avspo_plugin.trl.versions) against their released source.

AVSPOGRPOTrainer relies on GRPOTrainer's private code: the advantage computation between the reward
gathering and the per-process slice, ``_calculate_rewards`` returning the rewards of all processes,
and the ``_logs`` / ``_metrics`` entries it rewrites or reads. The installed TRL runs the whole suite;
here every other supported release's source is checked to hold the same code (syntax trees, so
comments and formatting do not count), and the release below the range is checked not to.
"""

import ast
import configparser
import inspect
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trl.trainer.grpo_trainer
from release_wheels import distribution_metadata, download_all, read_member

from avspo_plugin.host_versions import UnsupportedHostVersion
from avspo_plugin.trl.versions import TRL, installed_trl

RELEASES = ("1.6.0", "1.7.0", "1.7.1", "1.8.0", "1.9.0", "1.9.1", "1.9.2", "1.10.0", "1.11.0", "1.12.0", "1.13.0",
            "1.14.0", "1.14.1", "1.14.2", "1.15.0", "1.16.0")  # fmt: skip
BELOW = "1.5.1"  # the release before the range: unscorable completions counted as reward 0
TRAINER = "trl/trainer/grpo_trainer.py"
CONFIG = "trl/trainer/grpo_config.py"


@pytest.fixture(scope="module")
def wheels(request):
    return download_all("trl", (*RELEASES, BELOW), request.config.cache.mkdir("trl-releases"))


def grpo_trainer(source: str) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(source)
    (cls,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "GRPOTrainer"]
    return {node.name: node for node in cls.body if isinstance(node, ast.FunctionDef)}


def relied_on(trainer_source: str, config_source: str) -> dict:
    """What the adapter relies on in one release, comparable across releases."""
    methods = grpo_trainer(trainer_source)
    body = methods["_generate_and_score_completions"].body
    texts = [ast.unparse(statement) for statement in body]
    start = next(i for i, text in enumerate(texts) if "self._calculate_rewards(" in text)
    end = texts.index("advantages = advantages[process_slice]")
    calculate = methods["_calculate_rewards"]
    log = methods["log"].args
    config_fields = {
        node.target.id
        for node in ast.walk(ast.parse(config_source))
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }
    return {
        "advantage code": [ast.dump(statement) for statement in body[start : end + 1]],
        "_calculate_rewards arguments": [arg.arg for arg in calculate.args.args],
        "_calculate_rewards ends": [ast.unparse(statement) for statement in calculate.body[-2:]],
        "advantages logged": 'self._logs["advantages"].extend(all_process_advantages.tolist())' in texts,
        "reward_func_names": "self.reward_func_names" in ast.unparse(methods["__init__"]),
        "entropy metric": "self._metrics[mode]['entropy']" in trainer_source.replace('"', "'"),
        "log arguments": ([arg.arg for arg in log.args], len(log.defaults)),
        "config fields": {"num_generations", "num_generations_eval", "scale_rewards", "multi_objective_aggregation"}
        <= config_fields,
    }


@pytest.fixture(scope="module")
def installed() -> dict:
    config = inspect.getsourcefile(trl.trainer.grpo_config)
    with open(inspect.getsourcefile(trl.trainer.grpo_trainer)) as trainer, open(config) as config_file:
        return relied_on(trainer.read(), config_file.read())


def test_the_declared_range_is_the_checked_releases_and_holds_the_installed_one():
    assert (TRL.oldest, TRL.newest) == (RELEASES[0], RELEASES[-1])
    assert installed_trl() in RELEASES  # the release the rest of tests/trl runs
    setup = configparser.ConfigParser()
    setup.read(Path(__file__).resolve().parents[2] / "setup.cfg")
    assert setup["options.extras_require"]["trl"].split() == [f"trl>={TRL.oldest},<={TRL.newest}"]


@pytest.mark.parametrize("version", RELEASES)
def test_each_supported_release_holds_the_code_the_adapter_relies_on(wheels, installed, version):
    release = relied_on(read_member(wheels[version], TRAINER), read_member(wheels[version], CONFIG))
    assert release == installed
    assert release["_calculate_rewards ends"] == ["rewards_per_func = gather(rewards_per_func)", "return rewards_per_func"]


def test_the_release_below_the_range_differs(wheels, installed):
    below = relied_on(read_member(wheels[BELOW], TRAINER), read_member(wheels[BELOW], CONFIG))
    assert below["advantage code"] != installed["advantage code"]
    assert not TRL.supports(BELOW)


@pytest.mark.parametrize("version", ["1.5.1", "0.29.1"])
def test_releases_older_than_the_range_are_refused_by_name(version):
    with pytest.raises(UnsupportedHostVersion, match=rf"supports TRL 1\.6\.0 to 1\.16\.0; the installed TRL is {version}"):
        TRL.require(version, "avspo_plugin.trl")


@pytest.mark.parametrize("version", ["1.17.0", "2.0.0"])
def test_releases_newer_than_the_range_run_with_a_warning_naming_both(version):
    assert TRL.require(version, "avspo_plugin.trl") == (
        f"TRL {version} is newer than the tested range (TRL 1.6.0 to 1.16.0): the adapter's checks of the code it "
        "relies on pass, but whether it behaves as in the tested releases is untested; report any difference you "
        "notice")


@pytest.mark.parametrize("version", ["1.6.0", "1.14.2", "1.16.0", "1.16.0.dev0"])
def test_versions_inside_the_range_pass(version):
    assert TRL.supports(version)
    TRL.require(version, "avspo_plugin.trl")  # raises UnsupportedHostVersion outside the range


def test_importing_the_adapter_under_a_newer_trl_warns_naming_both_versions(tmp_path, monkeypatch, caplog):
    """A newer TRL first on the path: the adapter's door to TRL (checked_imports.py) imports, checks and warns; in this
    process, with checked_imports.py imported afresh (the module that checks) and TRL's own modules already loaded."""
    import avspo_plugin.trl

    monkeypatch.syspath_prepend(str(distribution_metadata(tmp_path, "trl", "1.17.0")))
    monkeypatch.delitem(sys.modules, "avspo_plugin.trl.checked_imports", raising=False)
    monkeypatch.delattr(avspo_plugin.trl, "checked_imports", raising=False)
    with caplog.at_level(logging.WARNING, logger="avspo_plugin.trl"):
        assert avspo_plugin.trl.AVSPOGRPOTrainer.__name__ == "AVSPOGRPOTrainer"
    assert "avspo_plugin.trl.checked_imports" in sys.modules  # the check ran again, on the newer release
    assert [record.getMessage() for record in caplog.records] == [
        "avspo_plugin.trl: TRL 1.17.0 is newer than the tested range (TRL 1.6.0 to 1.16.0): the adapter's checks of "
        "the code it relies on pass, but whether it behaves as in the tested releases is untested; report any "
        "difference you notice"]


def test_importing_the_adapter_under_an_older_trl_refuses_before_importing_trl(tmp_path):
    """An older TRL first on the path of a fresh process: refused by name before any of TRL's modules is imported
    (an older release may not import the way the adapter expects)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(distribution_metadata(tmp_path, "trl", "1.5.1")),
                                                        os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    load = "import sys, avspo_plugin.trl\ntry:\n    avspo_plugin.trl.AVSPOGRPOTrainer\nfinally:\n    print('trl' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 1, run.stderr
    assert ("avspo_plugin.host_versions.UnsupportedHostVersion: avspo_plugin.trl supports TRL 1.6.0 to 1.16.0; "
            "the installed TRL is 1.5.1") in run.stderr  # fmt: skip
    assert run.stdout.split() == ["False"]
