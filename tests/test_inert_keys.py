"""A key the user gives that cannot act under the other settings is one warning at launch, naming the key as the
host spells it and what would make it act, on every surface: the core (a mapping config), verl's estimator and
doctor, TRL's config, OpenRLHF's launch check. Every AVSPO key is walked under settings that leave some inert."""

import logging
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from runnable_overrides import RUNNABLE

from avspo_plugin import config as config_module
from avspo_plugin.config import AVSPOConfig, ConfigError, inert_keys
from avspo_plugin.core import compute_group_advantages
from avspo_plugin.threshold_modes import MEASURE_ONLY_MODE, THRESHOLD_MODES

# (the settings given, the keys each of which, given beside them, cannot act): written out from the config's help,
# not from the rule. Every other key acts under the settings.
THRESHOLD_KEYS = {"threshold_init", "threshold_lr", "threshold_min", "threshold_max"}
VIRTUAL_KEYS = {"strategy", "num_virtual", "alpha", "partial", "decay", "seed", "augmented_collapses"}
SETTINGS = [
    ({"threshold_mode": MEASURE_ONLY_MODE}, VIRTUAL_KEYS | THRESHOLD_KEYS),
    ({"threshold_mode": "always", "strategy": "stratified"}, {"partial", "decay", "seed"} | THRESHOLD_KEYS),
    ({"threshold_mode": "fixed", "strategy": "uniform", "num_virtual": 2},
     {"alpha", "partial", "decay", "threshold_lr", "threshold_min", "threshold_max"}),
    ({"threshold_mode": "adaptive", "strategy": "fixed_partial", "stagnation_steps": 0},
     {"decay", "seed", "stagnation_acr", "entropy_floor"}),
    ({"threshold_mode": "adaptive", "strategy": "exp_decay"}, {"partial", "seed"}),
]  # fmt: skip
# TRL's GRPO fixes these keys (avspo_plugin.trl.config.HOST_KEYS): not fields there.
TRL_FIXED = {"epsilon", "std", "norm_by_std"}
CASES = [(settings, key, key in inert) for settings, inert in SETTINGS for key in AVSPOConfig.keys()]
CASE_IDS = [f"{'+'.join(map(str, settings.values()))}-{key}" for settings, key, _ in CASES]
DEFAULTS = AVSPOConfig().to_dict()


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch):
    """Each case as a fresh process: no inert-key warning given yet."""
    monkeypatch.setattr(config_module, "_WARNED_INERT", set())


def given(settings, key):
    """The settings plus ``key`` at its default: the key is given (written), whatever its value."""
    return {**settings, key: settings.get(key, DEFAULTS[key])}


def warnings_of(caplog, logger):
    return [record.getMessage() for record in caplog.records if record.name == logger and record.levelno == logging.WARNING]


def expected(settings, key, inert, name):
    """The warning for ``key`` (named by the host's ``name``), or none: one at most."""
    return [inert_keys(AVSPOConfig(**given(settings, key)), {key})[0].message(name)] if inert else []


def test_the_modes_the_settings_name_are_the_tables():
    assert {settings["threshold_mode"] for settings, _ in SETTINGS} == set(THRESHOLD_MODES)


@pytest.mark.parametrize("settings,key,inert", CASES, ids=CASE_IDS)
def test_the_core_warns_once_of_a_mapping_key_that_cannot_act(caplog, settings, key, inert):
    rewards, index = torch.tensor([0.0, 0.0, 1.0, 0.0]), ["a", "a", "b", "b"]
    with caplog.at_level(logging.WARNING):
        for _ in range(2):  # a host's every step: one warning
            compute_group_advantages(rewards, index, given(settings, key))
    messages = warnings_of(caplog, "avspo_plugin.config")
    assert messages == expected(settings, key, inert, str)
    if inert:
        assert messages[0].startswith(f"{key}=") and "it acts only with" in messages[0]


@pytest.mark.parametrize("settings,key,inert", CASES, ids=CASE_IDS)
def test_verls_estimator_warns_once_at_its_first_call(caplog, settings, key, inert):
    from avspo_plugin.verl.estimator import compute_avspo_outcome_advantage, session

    session().reset()  # a fresh run of this process
    algorithm = {"adv_estimator": "avspo", "avspo": given(settings, key)}
    rewards, mask = torch.zeros(4, 3), torch.ones(4, 3)
    rewards[2, -1] = 1.0
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            compute_avspo_outcome_advantage(rewards, mask, np.array(["a", "a", "b", "b"], dtype=object), algorithm)
    assert warnings_of(caplog, "avspo_plugin.verl") == expected(settings, key, inert, lambda k: f"algorithm.avspo.{k}")


def test_verls_packaged_block_counts_the_keys_that_differ_from_their_defaults():
    """verl's packaged YAML writes every key at its default: there a written key is one that differs."""
    from avspo_plugin.verl.run_config import given_avspo_keys

    packaged = {**DEFAULTS, "threshold_mode": MEASURE_ONLY_MODE, "seed": 7}
    changed = {key for key in ("threshold_mode", "seed") if packaged[key] != DEFAULTS[key]}
    assert given_avspo_keys({"avspo": packaged}) == changed
    # Outside the packaged block every key there was written, at its default or not.
    assert given_avspo_keys({"avspo": {"seed": DEFAULTS["seed"], "strategy": "uniform"}}) == {"seed", "strategy"}


@pytest.mark.parametrize("settings,key,inert", CASES, ids=CASE_IDS)
def test_trls_config_warns_when_built(caplog, tmp_path, settings, key, inert):
    from avspo_plugin.trl import AVSPOGRPOConfig

    fields = {f"avspo_{name}": value for name, value in given(settings, key).items() if name not in TRL_FIXED}
    with caplog.at_level(logging.WARNING):
        AVSPOGRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to=[], **fields)
    want = expected(settings, key, inert and key not in TRL_FIXED, lambda k: f"avspo_{k}")
    assert warnings_of(caplog, "avspo_plugin.trl.config") == want


@pytest.mark.parametrize("settings,key,inert", CASES, ids=CASE_IDS)
def test_openrlhfs_launch_check_warns(caplog, settings, key, inert):
    from avspo_plugin.openrlhf.args import check_avspo_args

    avspo = SimpleNamespace(**given(settings, key))
    args = SimpleNamespace(algo=SimpleNamespace(advantage=SimpleNamespace(estimator="avspo", avspo=avspo)),
                           rollout=SimpleNamespace(n_samples_per_prompt=4))  # fmt: skip
    with caplog.at_level(logging.WARNING):
        check_avspo_args(args)
    want = expected(settings, key, inert, lambda k: f"--algo.advantage.avspo.{k}")
    assert warnings_of(caplog, "avspo_plugin.openrlhf.args") == want


def test_the_doctor_warns_of_a_key_that_cannot_act_and_refuses_its_earlier_name(capsys):
    """The issue's case: augmented_collapses under a mode that adds no virtual sample is a warning; apply_to, its
    earlier name (an older recipe), is a one-line error naming the key now."""
    from avspo_plugin.commands.main import main

    base = ["algorithm.adv_estimator=avspo", f"+algorithm.avspo.threshold_mode={MEASURE_ONLY_MODE}", *RUNNABLE]
    assert main(["doctor", "--no-ray", *base, "+algorithm.avspo.augmented_collapses=all_fail"]) == 0
    assert (f"[warn] algorithm.avspo.augmented_collapses='all_fail' has no effect while "
            f"algorithm.avspo.threshold_mode='{MEASURE_ONLY_MODE}': it acts only with "
            "algorithm.avspo.threshold_mode=adaptive, fixed or always") in capsys.readouterr().out
    assert main(["doctor", "--no-ray", *base, "+algorithm.avspo.apply_to=all_fail"]) == 1
    assert ("algorithm.avspo.apply_to is now algorithm.avspo.augmented_collapses: rename it"
            in capsys.readouterr().out)


def test_the_constructor_names_the_key_an_earlier_name_became():
    with pytest.raises(ConfigError, match=r"apply_to is the earlier name of augmented_collapses: write "
                                          r"AVSPOConfig\(augmented_collapses='all_fail'\)"):  # fmt: skip
        AVSPOConfig(apply_to="all_fail")
