"""``avspo doctor --host openrlhf`` on released OpenRLHF packages put first on the path (never imported)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from avspo_plugin.tools.cli import main


def doctor(*paths: Path, options: tuple[str, ...] = ("--no-ray",)) -> subprocess.CompletedProcess:
    """``avspo doctor --host openrlhf`` in a subprocess whose path starts with ``paths``."""
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "avspo_plugin.tools.cli", "doctor", "--host", "openrlhf", *options],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip


def test_openrlhf_not_installed(capsys):
    assert main(["doctor", "--host", "openrlhf", "--no-ray"]) == 2
    out = capsys.readouterr().out
    assert "versions: avspo-plugin " in out and "openrlhf not installed" in out
    assert "[FAIL] OpenRLHF is not installed in this Python environment" in out


def test_the_released_0_11_2_applies(release_source):
    """Without deepspeed, flash_attn and vllm: the doctor reads OpenRLHF's source, it does not import it."""
    run = doctor(release_source)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "[ok] OpenRLHF 0.11.2 is supported (OpenRLHF 0.9.9 to 0.11.2)" in run.stdout
    assert ("[ok] the runtime route applies: `avspo openrlhf ... --algo.advantage.estimator avspo` with "
            "--algo.advantage.avspo.<key> options") in run.stdout  # fmt: skip
    assert "[ok] patches/openrlhf-0.11.2-avspo.patch applies to this release" in run.stdout
    assert "[FAIL]" not in run.stdout


def test_the_released_0_10_1_applies_with_flat_flags_and_every_ray_node_passes(flat_release_source):
    run = doctor(flat_release_source, options=("--ray-address", "local"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "`avspo openrlhf ... --advantage_estimator avspo` with --avspo_<key> options" in run.stdout
    assert "[warn] patches/openrlhf-0.11.2-avspo.patch is for OpenRLHF 0.11.2 only" in run.stdout
    assert "openrlhf 0.10.1, the avspo hook in place in a fresh worker" in run.stdout  # the preflight's node report


def test_a_newer_release_is_a_warning_naming_both_versions(release_source, tmp_path):
    """The 0.11.2 package under a 0.12.0 distribution: newer than tested, checked as any release (the same policy
    as verl's and TRL's)."""
    (tmp_path / "openrlhf").symlink_to(release_source / "openrlhf")
    dist_info = tmp_path / "openrlhf-0.12.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: openrlhf\nVersion: 0.12.0\n")
    run = doctor(tmp_path)
    assert "[warn] OpenRLHF 0.12.0 is newer than the tested range (OpenRLHF 0.9.9 to 0.11.2)" in run.stdout, run.stdout
    assert "[FAIL] OpenRLHF 0.12.0" not in run.stdout


def test_a_changed_method_does_not_apply(release_source, tmp_path):
    """0.11.2 with its experience maker's group_norm epsilon changed: the wrapper would misplace avspo's step."""
    shutil.copytree(release_source, tmp_path, dirs_exist_ok=True)
    maker = tmp_path / "openrlhf" / "trainer" / "ppo_utils" / "experience_maker.py"
    maker.write_text(maker.read_text().replace("keepdim=True) + 1e-9)", "keepdim=True) + 1e-6)"))
    run = doctor(tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "compute_advantages_and_returns lacks: rewards = (rewards - rewards.mean(-1" in run.stdout
    assert "[FAIL] the avspo runtime route does not apply to this OpenRLHF" in run.stdout
