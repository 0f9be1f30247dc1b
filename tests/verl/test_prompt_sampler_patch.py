"""patches/verl-prompt-sampler.patch (the upstream change prompt selection would use) applies to the
installed verl release, its trainers still import, and its own tests pass."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

PATCH = Path(__file__).resolve().parents[2] / "patches" / "verl-prompt-sampler.patch"
PATCH_TEST = "tests/utils/dataset/test_abstract_sampler_on_cpu.py"
CHECK = """
import sys
import verl.trainer.ppo.ray_trainer, verl.trainer.ppo.v1.trainer_base, verl
assert verl.__file__.startswith(sys.argv[2]), verl.__file__
import pytest
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", sys.argv[1]]))
"""


def apply_patch(tree: Path) -> subprocess.CompletedProcess:
    command = ["patch", "-p1", "--forward", "--batch", "-i", str(PATCH)] if shutil.which("patch") else [
        "git", "apply", "-p1", str(PATCH)]
    return subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=60)


def test_patch_applies_and_its_tests_pass(tmp_path):
    import verl

    shutil.copytree(Path(verl.__file__).parent, tmp_path / "verl", ignore=shutil.ignore_patterns("__pycache__"))
    applied = apply_patch(tmp_path)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert apply_patch(tmp_path).returncode != 0  # applying twice is refused, not doubled
    for trainer in ("ray_trainer.py", "v1/trainer_base.py"):
        source = (tmp_path / "verl" / "trainer" / "ppo" / trainer).read_text()
        assert source.count(".sampler.on_prompts(") == 1 and source.count(".sampler.update(") == 1
    run = subprocess.run(
        [sys.executable, "-c", CHECK, str(tmp_path / PATCH_TEST), str(tmp_path)],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)}, capture_output=True, text=True,
        timeout=300,
    )
    assert run.returncode == 0 and "3 passed" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
