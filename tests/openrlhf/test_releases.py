"""The OpenRLHF releases the runtime route declares (avspo_plugin.openrlhf.versions) against their source.

The route wraps OpenRLHF's own ``compute_advantages_and_returns``, running it as group_norm and
replacing, in its calls of ``compute_reward``, the group-normalised rewards by avspo's (hook.py). That
relies on the method's structure: the rows put in prompt order from ``experience.index``, group_norm's
step, the split back per experience, one ``compute_reward`` call per experience in order, group_norm's
cumulative returns and no whitening; and on the signatures of the three trainer methods it wraps.
Each release's released source is checked for all of it (syntax trees, so comments and formatting do
not count); 0.11.2 and 0.10.1 also run end to end in test_routes.py.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from avspo_plugin.host_versions import UnsupportedHostVersion, release
from avspo_plugin.openrlhf.args import DOTTED, FLAT
from avspo_plugin.openrlhf.versions import OPENRLHF
from release_wheels import download_all, read_member

RELEASES = ("0.9.9", "0.9.10", "0.10.0", "0.10.1", "0.10.1.post1", "0.10.1.post2", "0.10.2", "0.10.3", "0.10.4",
            "0.11.0", "0.11.1", "0.11.2")  # fmt: skip
BELOW = "0.9.8"  # advantages computed otherwise (and returned with the rewards)
# The wheels are tagged cp311-manylinux1_x86_64 but hold only Python source.
WHEEL_TAG = ("--python-version", "3.11", "--platform", "manylinux1_x86_64")
EXPERIENCE_MAKER = "openrlhf/trainer/ppo_utils/experience_maker.py"
TRAINER = "openrlhf/trainer/ppo_trainer.py"

# The method's statements the wrapper relies on, in this order (a trailing "..." matches a prefix).
# <estimator> and <n_samples_per_prompt> stand for the release's argument names (ArgLayout).
REQUIRED_IN_ORDER = (
    "args = self.strategy.args",
    "apply_length_penalties(experiences, args)",
    "indices = torch.tensor(list(itertools.chain.from_iterable((experience.index for experience in experiences))))",
    "raw_rewards = torch.cat([experience.rewards for experience in experiences], dim=0)",
    "rewards[indices] = raw_rewards",
    "rewards = rewards.reshape(-1, args.<n_samples_per_prompt>)",
    "if args.<estimator> == 'group_norm':",
    "rewards = (rewards - rewards.mean(-1, keepdim=True)) / (rewards.std(-1, keepdim=True) + 1e-09)",
    "rewards = rewards.reshape(-1)[indices].split(exp_len)",
    "for (experience, reward) in zip(experiences, rewards):",
    "reward = compute_reward(reward, ...",
    "if self.advantage_estimator in [...",
    "experience.returns = self.get_cumulative_returns(reward, experience.action_mask, ...",
    "if args.<estimator> in ['gae', 'reinforce', 'reinforce_baseline']:",
    "return experiences",
)
TRAINER_SIGNATURES = {
    "_compute_rollout_stats": (["self", "experiences"], 0),
    "save_logs_and_checkpoints": (["self", "global_step", "logs_dict", "client_states"], 2),
    "restore_best_checkpoint_state": (["self", "checkpoint_states"], 0),
}


@pytest.fixture(scope="module")
def wheels(request):
    return download_all("openrlhf", (*RELEASES, BELOW), request.config.cache.mkdir("openrlhf-releases"), WHEEL_TAG)


def layout_of_release(version: str):
    return DOTTED if release(version) >= (0, 10, 2) else FLAT


def methods(source: str, class_name: str) -> dict[str, ast.FunctionDef]:
    (cls,) = [node for node in ast.parse(source).body if isinstance(node, ast.ClassDef) and node.name == class_name]
    return {node.name: node for node in cls.body if isinstance(node, ast.FunctionDef)}


def statement_lines(body: list[ast.stmt]):
    """Every statement in source order; compound ones by their header line."""
    for statement in body:
        if isinstance(statement, ast.If):
            yield f"if {ast.unparse(statement.test)}:"
            yield from statement_lines(statement.body)
            yield from statement_lines(statement.orelse)
        elif isinstance(statement, ast.For):
            yield f"for {ast.unparse(statement.target)} in {ast.unparse(statement.iter)}:"
            yield from statement_lines(statement.body)
        else:
            yield ast.unparse(statement)


def missing_in_order(lines: list[str], required: tuple[str, ...]) -> list[str]:
    """The required lines not found, in order, among ``lines``."""
    position, missing = 0, []
    for wanted in required:
        matches = (lambda line: line.startswith(wanted[:-3])) if wanted.endswith("...") else (lambda line: line == wanted)
        found = next((i for i in range(position, len(lines)) if matches(lines[i])), None)
        if found is None:
            missing.append(wanted)
        else:
            position = found + 1
    return missing


def findings(version: str, maker_source: str, trainer_source: str) -> list[str]:
    """What in this release's source the runtime route's wrapper would not find; [] when all is there."""
    layout = layout_of_release(version)
    maker = methods(maker_source, "RemoteExperienceMaker")
    problems = []
    init = [ast.unparse(statement) for statement in ast.walk(maker["__init__"]) if isinstance(statement, ast.Assign)]
    if f"self.advantage_estimator = strategy.args.{layout.estimator}" not in init:
        problems.append(f"__init__ does not copy args.{layout.estimator} to self.advantage_estimator")
    method = maker["compute_advantages_and_returns"]
    if [arg.arg for arg in method.args.args] != ["self", "experiences"] or method.args.kwarg is not None:
        problems.append(f"signature {ast.unparse(method.args)}")
    lines = [
        line.replace(f"args.{layout.estimator}", "args.<estimator>").replace(
            f"args.{layout.n_samples_per_prompt}", "args.<n_samples_per_prompt>"
        )
        for line in statement_lines(method.body)
    ]
    problems += [f"missing: {line}" for line in missing_in_order(lines, REQUIRED_IN_ORDER)]
    returns = next((line for line in lines if line.startswith("if self.advantage_estimator in [")), "")
    whitened = next((line for line in lines if line.startswith("if args.<estimator> in ['gae'")), "")
    if "'group_norm'" not in returns or "'group_norm'" in whitened:
        problems.append("group_norm is not among the cumulative-return estimators, or is whitened")
    calls = [node for node in ast.walk(method) if isinstance(node, ast.Call) and ast.unparse(node.func) == "compute_reward"]
    if len(calls) != 1:
        problems.append(f"compute_reward is called {len(calls)} times")
    imports = [ast.unparse(node) for node in ast.parse(maker_source).body if isinstance(node, ast.ImportFrom)]
    if not any(line.startswith("from openrlhf.models.utils import ") and "compute_reward" in line for line in imports):
        problems.append("compute_reward is not a module-level name of the experience maker")
    trainer = methods(trainer_source, "BasePPOTrainer")
    for name, (arguments, defaults) in TRAINER_SIGNATURES.items():
        found = trainer.get(name)
        if found is None or ([a.arg for a in found.args.args], len(found.args.defaults)) != (arguments, defaults):
            problems.append(f"BasePPOTrainer.{name} is {'absent' if found is None else ast.unparse(found.args)}")
    return problems


def test_the_declared_range_is_the_checked_releases():
    assert (OPENRLHF.oldest, OPENRLHF.newest) == (RELEASES[0], RELEASES[-1])
    assert all(OPENRLHF.supports(version) for version in RELEASES) and not OPENRLHF.supports(BELOW)


@pytest.mark.parametrize("version", RELEASES)
def test_each_supported_release_has_what_the_wrapper_relies_on(wheels, version):
    wheel = wheels[version]
    assert findings(version, read_member(wheel, EXPERIENCE_MAKER), read_member(wheel, TRAINER)) == []


def test_the_release_below_the_range_does_not(wheels):
    wheel = wheels[BELOW]
    problems = findings(BELOW, read_member(wheel, EXPERIENCE_MAKER), read_member(wheel, TRAINER))
    assert "BasePPOTrainer.restore_best_checkpoint_state is absent" in problems
    assert any(problem.startswith("signature ") for problem in problems)


@pytest.mark.parametrize("version", ["0.9.8", "0.12.0", "1.0.0"])
def test_versions_outside_the_range_are_refused_by_name(version):
    expected = rf"supports OpenRLHF 0\.9\.9 to 0\.11\.2; the installed OpenRLHF is {version}\."
    with pytest.raises(UnsupportedHostVersion, match=expected):
        OPENRLHF.require(version, "the avspo runtime route")


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
        [sys.executable, "-m", "avspo_plugin.cli", "openrlhf", "--help"], capture_output=True, text=True, env=env,
        timeout=120, cwd=Path(__file__).parent,
    )  # fmt: skip
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.startswith(
        "avspo openrlhf: the avspo runtime route (avspo_plugin.openrlhf) supports OpenRLHF 0.9.9 to 0.11.2; "
        "the installed OpenRLHF is 0.9.8."
    )
    assert run.stdout == ""  # train_ppo_ray never ran, not even its --help
