"""``avspo doctor --host openrlhf`` on released OpenRLHF packages put first on the path (never imported)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from release_wheels import distribution_metadata

from avspo_plugin.commands.main import main


def doctor_without_ray(path: Path, monkeypatch, capsys) -> tuple[int, str]:
    """``avspo doctor --host openrlhf --no-ray`` in this process with ``path`` first on sys.path (the doctor finds
    the package and its distribution metadata there without importing it); its exit code and output."""
    monkeypatch.syspath_prepend(str(path))
    code = main(["doctor", "--host", "openrlhf", "--no-ray"])
    return code, capsys.readouterr().out


def doctor_with_ray(path: Path, ray_address: str) -> subprocess.CompletedProcess:
    """``avspo doctor --host openrlhf --ray-address ADDRESS`` in a subprocess whose path starts with ``path`` (its
    preflight starts Ray in that process)."""
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join([str(path), os.environ.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "avspo_plugin.commands.main", "doctor", "--host", "openrlhf", "--ray-address",
               ray_address]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def test_openrlhf_not_installed(capsys):
    assert main(["doctor", "--host", "openrlhf", "--no-ray"]) == 1
    out = capsys.readouterr().out
    assert "versions: avspo-plugin " in out and "openrlhf not installed" in out
    assert "[FAIL] OpenRLHF is not installed in this Python environment" in out


def test_the_released_0_11_2_applies(release_source, monkeypatch, capsys):
    """Without deepspeed, flash_attn and vllm: the doctor reads OpenRLHF's source, it does not import it."""
    code, out = doctor_without_ray(release_source, monkeypatch, capsys)
    assert code == 0, out
    assert "[ok] OpenRLHF 0.11.2 is supported (OpenRLHF 0.9.9 to 0.11.2)" in out
    assert ("[ok] the runtime route applies: `avspo openrlhf ... --algo.advantage.estimator avspo` with "
            "--algo.advantage.avspo.<key> options") in out  # fmt: skip
    assert "[ok] patches/openrlhf-0.11.2-avspo.patch applies to this release" in out
    assert "[FAIL]" not in out
    assert "openrlhf" not in sys.modules


def test_the_released_0_10_1_applies_with_flat_flags_and_every_ray_node_passes(flat_release_source):
    run = doctor_with_ray(flat_release_source, "local")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "`avspo openrlhf ... --advantage_estimator avspo` with --avspo_<key> options" in run.stdout
    assert "[warn] patches/openrlhf-0.11.2-avspo.patch is for OpenRLHF 0.11.2 only" in run.stdout
    assert "openrlhf 0.10.1, the avspo hook in place in a fresh worker" in run.stdout  # the preflight's node report


def test_a_newer_release_is_a_warning_naming_both_versions(release_source, tmp_path, monkeypatch, capsys):
    """The 0.11.2 package under a 0.12.0 distribution: newer than tested, checked as any release (the same policy
    as verl's and TRL's)."""
    (tmp_path / "openrlhf").symlink_to(release_source / "openrlhf")
    _, out = doctor_without_ray(distribution_metadata(tmp_path, "openrlhf", "0.12.0"), monkeypatch, capsys)
    assert "[warn] OpenRLHF 0.12.0 is newer than the tested range (OpenRLHF 0.9.9 to 0.11.2)" in out, out
    assert "[FAIL] OpenRLHF 0.12.0" not in out


def test_a_changed_method_does_not_apply(release_source, tmp_path, monkeypatch, capsys):
    """0.11.2 with its experience maker's group_norm epsilon changed: the wrapper would misplace avspo's step."""
    shutil.copytree(release_source, tmp_path, dirs_exist_ok=True)
    maker = tmp_path / "openrlhf" / "trainer" / "ppo_utils" / "experience_maker.py"
    maker.write_text(maker.read_text().replace("keepdim=True) + 1e-9)", "keepdim=True) + 1e-6)"))
    code, out = doctor_without_ray(tmp_path, monkeypatch, capsys)
    assert code == 1, out
    assert "compute_advantages_and_returns lacks: rewards = (rewards - rewards.mean(-1" in out
    assert "[FAIL] the avspo runtime route does not apply to this OpenRLHF" in out
