"""The avspo flags in OpenRLHF's conventions, reading them back, and the launcher's parser and ray.init changes.

No OpenRLHF here: the parsers are built the way train_ppo_ray builds its own.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from types import SimpleNamespace

import pytest

from avspo_plugin.commands.main import build_parser
from avspo_plugin.config import AVSPOConfig, ConfigError, NotGiven
from avspo_plugin.openrlhf.args import (
    DOTTED,
    FLAT,
    HOST_DEFAULTS,
    add_avspo_arguments,
    avspo_config_from_args,
    check_avspo_args,
    layout_of,
)
from avspo_plugin.openrlhf.launch import avspo_argument_parser, ray_init_with_setup_hook, with_setup_hook
from avspo_plugin.openrlhf.worker_setup import SETUP_HOOK

ESTIMATORS = ["gae", "group_norm", "dr_grpo"]


def openrlhf_like_parser(layout=DOTTED) -> argparse.ArgumentParser:
    """A parser declaring the estimator and group-size flags as train_ppo_ray (of that layout) does."""
    parser = argparse.ArgumentParser()
    parser.add_argument(layout.flag(layout.n_samples_per_prompt), type=int, default=1)
    parser.add_argument(layout.flag(layout.estimator), type=str, choices=ESTIMATORS, default="gae")
    return parser


def hierarchize(namespace: argparse.Namespace) -> SimpleNamespace:
    """OpenRLHF's openrlhf.utils.config.hierarchize, for dotted dests."""
    root: dict = {}
    for dest, value in vars(namespace).items():
        *parents, leaf = dest.split(".")
        node = root
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value

    def build(node):
        return SimpleNamespace(**{k: build(v) for k, v in node.items()}) if isinstance(node, dict) else node

    return build(root)


@pytest.mark.parametrize("layout", [DOTTED, FLAT])
def test_one_flag_per_key_with_avspo_config_defaults(layout):
    parser = argparse.ArgumentParser()
    add_avspo_arguments(parser, layout)
    defaults = vars(parser.parse_args([]))
    expected = {
        layout.avspo_dest(f.name): NotGiven(HOST_DEFAULTS.get(f.name, f.default)) for f in dataclasses.fields(AVSPOConfig)
    }
    assert defaults == expected
    assert defaults[layout.avspo_dest("epsilon")] == NotGiven(1e-9)
    parsed = argparse.Namespace(**defaults, **{layout.estimator: "avspo"})
    assert avspo_config_from_args(parsed) == AVSPOConfig(epsilon=1e-9)


def test_flag_values_take_the_config_types():
    parser = argparse.ArgumentParser()
    add_avspo_arguments(parser)
    prefix = "--algo.advantage.avspo."
    values = {"num_virtual": "3", "norm_by_std": "false", "alpha": "0.25", "seed": "7"}
    argv = [text for key, value in values.items() for text in (prefix + key, value)]
    parsed = vars(parser.parse_args(argv))
    assert parsed["algo.advantage.avspo.num_virtual"] == 3
    assert parsed["algo.advantage.avspo.norm_by_std"] is False
    assert parsed["algo.advantage.avspo.alpha"] == 0.25
    assert parsed["algo.advantage.avspo.seed"] == 7
    assert vars(parser.parse_args([prefix + "num_virtual", "auto"]))["algo.advantage.avspo.num_virtual"] == "auto"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--algo.advantage.avspo.num_virtual", "many"], "'many' is neither 'auto' nor an integer"),
        (["--algo.advantage.avspo.norm_by_std", "maybe"], "'maybe' is not a boolean"),
        (["--algo.advantage.avspo.strategy", "bogus"], "invalid choice: 'bogus'"),
    ],
)
def test_bad_flag_values_are_argparse_errors(argv, message, capsys):
    parser = argparse.ArgumentParser()
    add_avspo_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(argv)
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("hierarchized", [False, True])
def test_config_from_dotted_args_parsed_or_hierarchized(hierarchized):
    parser = openrlhf_like_parser()
    add_avspo_arguments(parser)
    args = parser.parse_args(["--algo.advantage.avspo.strategy", "uniform", "--algo.advantage.avspo.seed", "3"])
    if hierarchized:
        args = hierarchize(args)
    assert layout_of(args) is DOTTED
    assert avspo_config_from_args(args) == AVSPOConfig(strategy="uniform", seed=3, epsilon=1e-9)


def test_config_from_flat_args():
    parser = openrlhf_like_parser(FLAT)
    add_avspo_arguments(parser, FLAT)
    args = parser.parse_args(["--avspo_threshold_mode", "fixed", "--avspo_threshold_init", "0.3"])
    assert layout_of(args) is FLAT
    assert avspo_config_from_args(args) == AVSPOConfig(threshold_mode="fixed", threshold_init=0.3, epsilon=1e-9)


def test_keys_without_a_flag_take_their_openrlhf_defaults():
    args = SimpleNamespace(algo=SimpleNamespace(advantage=SimpleNamespace(estimator="avspo")))
    assert avspo_config_from_args(args) == AVSPOConfig(epsilon=1e-9)


def test_bad_option_values_name_the_flag_block():
    advantage = SimpleNamespace(estimator="avspo", avspo=SimpleNamespace(alpha=0))
    args = SimpleNamespace(algo=SimpleNamespace(advantage=advantage))
    with pytest.raises(ConfigError, match=r"--algo\.advantage\.avspo: alpha=0 is invalid"):
        avspo_config_from_args(args)


def test_layout_of_rejects_other_namespaces():
    with pytest.raises(ValueError, match=re.escape("neither algo.advantage.estimator nor advantage_estimator")):
        layout_of(SimpleNamespace(lr=1.0))


def test_check_avspo_args_needs_groups_only_for_avspo():
    args = {"algo.advantage.estimator": "avspo", "rollout.n_samples_per_prompt": 1}
    with pytest.raises(ValueError, match=r"it needs --rollout\.n_samples_per_prompt >= 2, got 1"):
        check_avspo_args(argparse.Namespace(**args))
    check_avspo_args(argparse.Namespace(**{**args, "algo.advantage.estimator": "group_norm"}))
    flat = argparse.Namespace(advantage_estimator="avspo", n_samples_per_prompt=0)
    with pytest.raises(ValueError, match=r"it needs --n_samples_per_prompt >= 2, got 0"):
        check_avspo_args(flat)


@pytest.mark.parametrize("layout", [DOTTED, FLAT])
def test_launcher_extends_only_the_estimator_parser(layout):
    with avspo_argument_parser():
        parser = openrlhf_like_parser(layout)
        other = argparse.ArgumentParser()
        other.add_argument("--x", choices=["a"])
        args = parser.parse_args(
            [layout.flag(layout.estimator), "avspo", layout.flag(layout.n_samples_per_prompt), "4",
             layout.flag(layout.avspo_dest("strategy")), "opposite"]
        )  # fmt: skip
        assert set(vars(other.parse_args([]))) == {"x"}
    assert avspo_config_from_args(args).strategy == "opposite"
    assert layout.flag(layout.avspo_dest("alpha")) not in openrlhf_like_parser(layout).format_help()


def test_launcher_parser_checks_options_after_parsing(capsys):
    with avspo_argument_parser():
        parser = openrlhf_like_parser()
        with pytest.raises(SystemExit) as exit_:
            parser.parse_args(
                ["--algo.advantage.estimator", "avspo", "--rollout.n_samples_per_prompt", "4",
                 "--algo.advantage.avspo.threshold_min", "0.9", "--algo.advantage.avspo.threshold_max", "0.2"]
            )  # fmt: skip
    assert exit_.value.code == 2
    assert "threshold_min=0.9 is above threshold_max=0.2" in capsys.readouterr().err


@pytest.mark.parametrize("layout, flag, meant", [
    (DOTTED, "--algo.advantage.avpso.threshold_mode", "--algo.advantage.avspo.threshold_mode"),
    (DOTTED, "--algo.advantage.AVSPO.alpha=0.3", "--algo.advantage.avspo.alpha"),
    (DOTTED, "--algo.advantage.avspo.treshold_mode", "--algo.advantage.avspo.threshold_mode"),
    (FLAT, "--avpso_threshold_mode", "--avspo_threshold_mode"),
    (FLAT, "--avso_alpha", "--avspo_alpha"),
    # A key's earlier name (config.EARLIER_NAMES): the flag now.
    (DOTTED, "--algo.advantage.avspo.apply_to", "--algo.advantage.avspo.augmented_collapses"),
    (FLAT, "--avspo_apply_to=all_fail", "--avspo_augmented_collapses"),
])
def test_a_misspelt_avspo_flag_is_refused_naming_the_flag_meant(layout, flag, meant, capsys):
    with avspo_argument_parser():
        with pytest.raises(SystemExit) as exit_:
            openrlhf_like_parser(layout).parse_args(
                [layout.flag(layout.estimator), "avspo", layout.flag(layout.n_samples_per_prompt), "4", flag, "0.3"])
        assert exit_.value.code == 2
        assert f"{flag.split('=')[0]} is not an option: did you mean {meant}?" in capsys.readouterr().err
        # Other unknown flags are argparse's own error, as before.
        with pytest.raises(SystemExit):
            openrlhf_like_parser(layout).parse_args([layout.flag(layout.estimator), "gae", "--gama", "0.9"])
        assert "unrecognized arguments: --gama 0.9" in capsys.readouterr().err


def test_launcher_parser_is_undone_even_after_an_error():
    methods = dict(vars(argparse.ArgumentParser))
    with pytest.raises(RuntimeError), avspo_argument_parser():
        raise RuntimeError("training failed")
    assert dict(vars(argparse.ArgumentParser)) == methods
    with pytest.raises(SystemExit):
        openrlhf_like_parser().parse_args(["--algo.advantage.estimator", "avspo"])


def test_setup_hook_joins_the_runtime_env():
    env = {"env_vars": {"NCCL_DEBUG": "WARN"}}
    assert with_setup_hook(env) == {"env_vars": {"NCCL_DEBUG": "WARN"}, "worker_process_setup_hook": SETUP_HOOK}
    assert env == {"env_vars": {"NCCL_DEBUG": "WARN"}}
    assert with_setup_hook(None) == {"worker_process_setup_hook": SETUP_HOOK}
    with pytest.raises(ValueError, match=re.escape("ray.init already has worker_process_setup_hook='mine.setup'")):
        with_setup_hook({"worker_process_setup_hook": "mine.setup"})


def test_ray_init_wrapper_adds_the_hook_and_is_undone(monkeypatch):
    import ray

    from avspo_plugin.openrlhf import preflight

    calls = []
    monkeypatch.setattr(ray, "init", lambda *args, **kwargs: calls.append(kwargs))
    monkeypatch.setattr(preflight, "check_nodes", lambda: calls.append("preflight"))
    recorder = ray.init
    with ray_init_with_setup_hook():
        ray.init(runtime_env={"env_vars": {"A": "1"}})
    assert ray.init is recorder
    # The preflight runs once Ray is up (tests/openrlhf/test_preflight.py runs it on a real cluster).
    assert calls == [{"runtime_env": {"env_vars": {"A": "1"}, "worker_process_setup_hook": SETUP_HOOK}}, "preflight"]


def test_cli_passes_every_argument_to_openrlhf():
    argv = ["openrlhf", "--actor.model_name_or_path", "m", "--help", "-h", "--algo.advantage.estimator=avspo"]
    args = build_parser(argv)[0].parse_args(argv)
    assert args.command == "openrlhf"
    assert args.openrlhf_args == argv[1:]


def test_cli_says_when_openrlhf_is_missing(monkeypatch, capsys):
    import importlib.util

    from avspo_plugin.commands.main import main

    find_spec = importlib.util.find_spec
    def find_spec_without_openrlhf(name, *args):
        return None if name == "openrlhf" else find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec_without_openrlhf)
    assert main(["openrlhf", "--help"]) == 0
    assert ("needs the 'openrlhf' extra: pip install -c constraints.txt \".[openrlhf]\" in the avspo checkout"
            in capsys.readouterr().out)
    assert main(["openrlhf", "--algo.advantage.estimator", "avspo"]) == 2
    assert capsys.readouterr().err.startswith(
        "avspo openrlhf: error: needs the 'openrlhf' extra: pip install -c constraints.txt \".[openrlhf]\" in the avspo "
        "checkout (OpenRLHF is not installed in this environment")
