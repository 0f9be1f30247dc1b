"""The OpenRLHF releases the runtime route declares (avspo_plugin.openrlhf.versions) against their source.

The route wraps OpenRLHF's own ``compute_advantages_and_returns`` (worker_setup.py); what that relies on is
listed in avspo_plugin/openrlhf/source_checks.py and checked here on each release's released source (syntax
trees, so comments and formatting do not count); 0.11.2 and 0.10.1 also run end to end in test_routes.py.
"""

from __future__ import annotations

import ast
import configparser
import os
import subprocess
import sys
from pathlib import Path

import pytest
from release_wheels import download_all, read_member

from avspo_plugin.host_versions import UnsupportedHostVersion, release
from avspo_plugin.openrlhf.args import DOTTED, FLAT
from avspo_plugin.openrlhf.source_checks import (
    EXPERIENCE_MAKER_FILE,
    TRAINER_FILE,
    layout_in_source,
    methods,
    source_findings,
)
from avspo_plugin.openrlhf.versions import OPENRLHF

RELEASES = ("0.9.9", "0.9.10", "0.10.0", "0.10.1", "0.10.1.post1", "0.10.1.post2", "0.10.2", "0.10.3", "0.10.4",
            "0.11.0", "0.11.1", "0.11.2")  # fmt: skip
BELOW = "0.9.8"  # advantages computed otherwise (and returned with the rewards)
# The wheels are tagged cp311-manylinux1_x86_64 but hold only Python source.
WHEEL_TAG = ("--python-version", "3.11", "--platform", "manylinux1_x86_64")
EXPERIENCE_MAKER = "openrlhf/" + EXPERIENCE_MAKER_FILE
TRAINER = "openrlhf/" + TRAINER_FILE

@pytest.fixture(scope="module")
def wheels(request):
    return download_all("openrlhf", (*RELEASES, BELOW), request.config.cache.mkdir("openrlhf-releases"), WHEEL_TAG)


def test_the_declared_range_is_the_checked_releases():
    assert (OPENRLHF.oldest, OPENRLHF.newest) == (RELEASES[0], RELEASES[-1])
    assert all(OPENRLHF.supports(version) for version in RELEASES) and not OPENRLHF.supports(BELOW)
    setup = configparser.ConfigParser()
    setup.read(Path(__file__).resolve().parents[2] / "setup.cfg")
    assert setup["options.extras_require"]["openrlhf"].split() == [f"openrlhf>={OPENRLHF.oldest},<={OPENRLHF.newest}"]


@pytest.mark.parametrize("version", RELEASES)
def test_each_supported_release_has_what_the_wrapper_relies_on(wheels, version):
    maker_source = read_member(wheels[version], EXPERIENCE_MAKER)
    assert source_findings(maker_source, read_member(wheels[version], TRAINER)) == []
    # Flat flag names up to 0.10.1, dotted from 0.10.2: the layouts avspo_plugin.openrlhf.args reads.
    expected = DOTTED if release(version) >= (0, 10, 2) else FLAT
    assert layout_in_source(methods(maker_source, "RemoteExperienceMaker")) is expected


@pytest.mark.parametrize("version", RELEASES)
def test_each_release_refuses_flags_it_does_not_know(wheels, version):
    """train_ppo_ray reads its command line with parse_args (never parse_known_args): a misspelt flag cannot pass
    silently, and the launcher's wrapper of that parse names the avspo flag a misspelt one means (test_args.py)."""
    tree = ast.parse(read_member(wheels[version], "openrlhf/cli/train_ppo_ray.py"))
    calls = [node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr in ("parse_args", "parse_known_args")]
    assert calls == ["parse_args"]


def test_the_release_below_the_range_does_not(wheels):
    wheel = wheels[BELOW]
    problems = source_findings(read_member(wheel, EXPERIENCE_MAKER), read_member(wheel, TRAINER))
    assert "BasePPOTrainer.restore_best_checkpoint_state is absent" in problems
    assert any(problem.startswith("compute_advantages_and_returns has the signature ") for problem in problems)


def test_a_changed_method_is_found(wheels):
    """The check fails on the changes the wrapper could not follow (edits of the 0.11.2 source)."""
    maker, trainer = read_member(wheels["0.11.2"], EXPERIENCE_MAKER), read_member(wheels["0.11.2"], TRAINER)
    twice = maker.replace("            reward = compute_reward(", "            compute_reward(reward)\n            reward = compute_reward(")
    assert source_findings(twice, trainer) == ["compute_advantages_and_returns calls compute_reward 2 times, not once"]
    eps = maker.replace("(rewards.std(-1, keepdim=True) + 1e-9)", "(rewards.std(-1, keepdim=True) + 1e-6)")
    (finding,) = source_findings(eps, trainer)
    assert finding.startswith("compute_advantages_and_returns lacks: rewards = (rewards - rewards.mean(-1")


@pytest.mark.parametrize("version", ["0.9.8", "0.5.0"])
def test_releases_older_than_the_range_are_refused_by_name(version):
    expected = rf"supports OpenRLHF 0\.9\.9 to 0\.11\.2; the installed OpenRLHF is {version}\."
    with pytest.raises(UnsupportedHostVersion, match=expected):
        OPENRLHF.require(version, "the avspo runtime route")


@pytest.mark.parametrize("version", ["0.12.0", "1.0.0"])
def test_releases_newer_than_the_range_run_with_a_warning_naming_both(version):
    warning = OPENRLHF.require(version, "the avspo runtime route")
    assert warning.startswith(f"OpenRLHF {version} is newer than the tested range (OpenRLHF 0.9.9 to 0.11.2): ")


def test_the_launcher_refuses_an_unsupported_release_before_running_it(wheels, tmp_path):
    """0.9.8 installed (its package and dist-info first on the path): ``avspo openrlhf`` stops with exit 2."""
    import zipfile

    with zipfile.ZipFile(wheels[BELOW]) as archive:
        for member in archive.namelist():
            if member.startswith(f"openrlhf-{BELOW}.dist-info/"):
                archive.extract(member, tmp_path)
    (tmp_path / "openrlhf").mkdir()
    (tmp_path / "openrlhf" / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "avspo_plugin.commands.main", "openrlhf", "--help"], capture_output=True, text=True, env=env,
        timeout=120, cwd=Path(__file__).parent,
    )  # fmt: skip
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.startswith(
        "avspo openrlhf: error: the avspo runtime route (avspo_plugin.openrlhf) supports OpenRLHF 0.9.9 to 0.11.2; "
        "the installed OpenRLHF is 0.9.8."
    )
    assert run.stdout == ""  # train_ppo_ray never ran, not even its --help
