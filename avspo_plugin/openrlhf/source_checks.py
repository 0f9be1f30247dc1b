"""What the runtime route's wrapper (:mod:`.worker_setup`) relies on in OpenRLHF's source, checked on its text
(:func:`source_findings`, for the release tests and ``avspo doctor --host openrlhf``). No OpenRLHF import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .args import LAYOUTS, ArgLayout

EXPERIENCE_MAKER_FILE = "trainer/ppo_utils/experience_maker.py"
TRAINER_FILE = "trainer/ppo_trainer.py"

# The method's statements the wrapper relies on, in this order (a trailing "..." matches a prefix).
# <estimator> and <n_samples_per_prompt> stand for the release's argument names (its ArgLayout).
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
# BasePPOTrainer methods the hook wraps: (parameters, number of defaults).
TRAINER_SIGNATURES = {
    "_compute_rollout_stats": (["self", "experiences"], 0),
    "save_logs_and_checkpoints": (["self", "global_step", "logs_dict", "client_states"], 2),
    "restore_best_checkpoint_state": (["self", "checkpoint_states"], 0),
}


def methods(source: str, class_name: str) -> dict[str, ast.FunctionDef] | None:
    """The methods of top-level class ``class_name`` in ``source``; None when there is no such class."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return {item.name: item for item in node.body if isinstance(item, ast.FunctionDef)}
    return None


def statement_lines(body: list[ast.stmt]) -> Iterator[str]:
    """Every statement in source order; an if or for by its header line, followed by its body."""
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
        prefix = wanted[:-3] if wanted.endswith("...") else None
        found = next(
            (i for i in range(position, len(lines)) if (lines[i].startswith(prefix) if prefix else lines[i] == wanted)),
            None,
        )
        if found is None:
            missing.append(wanted)
        else:
            position = found + 1
    return missing


def layout_in_source(maker: dict[str, ast.FunctionDef]) -> ArgLayout | None:
    """The flag layout whose estimator argument RemoteExperienceMaker.__init__ copies to self.advantage_estimator."""
    assigned = {ast.unparse(node) for node in ast.walk(maker["__init__"]) if isinstance(node, ast.Assign)}
    return next((layout for layout in LAYOUTS
                 if f"self.advantage_estimator = strategy.args.{layout.estimator}" in assigned), None)


def source_findings(maker_source: str, trainer_source: str) -> list[str]:
    """What the wrapper relies on and this release's experience_maker.py and ppo_trainer.py lack; [] when nothing."""
    maker = methods(maker_source, "RemoteExperienceMaker")
    if maker is None or "compute_advantages_and_returns" not in maker or "__init__" not in maker:
        return ["RemoteExperienceMaker.compute_advantages_and_returns is absent"]
    problems = []
    layout = layout_in_source(maker)
    if layout is None:
        return ["RemoteExperienceMaker.__init__ copies no known estimator argument to self.advantage_estimator"]
    method = maker["compute_advantages_and_returns"]
    if [arg.arg for arg in method.args.args] != ["self", "experiences"] or method.args.kwarg is not None:
        problems.append(f"compute_advantages_and_returns has the signature ({ast.unparse(method.args)})")
    lines = [
        line.replace(f"args.{layout.estimator}", "args.<estimator>").replace(
            f"args.{layout.n_samples_per_prompt}", "args.<n_samples_per_prompt>"
        )
        for line in statement_lines(method.body)
    ]
    problems += [f"compute_advantages_and_returns lacks: {line}" for line in missing_in_order(lines, REQUIRED_IN_ORDER)]
    returns = next((line for line in lines if line.startswith("if self.advantage_estimator in [")), "")
    whitened = next((line for line in lines if line.startswith("if args.<estimator> in ['gae'")), "")
    if "'group_norm'" not in returns or "'group_norm'" in whitened:
        problems.append("group_norm is not among the cumulative-return estimators, or its advantages are whitened")
    calls = sum(isinstance(node, ast.Call) and ast.unparse(node.func) == "compute_reward" for node in ast.walk(method))
    if calls != 1:
        problems.append(f"compute_advantages_and_returns calls compute_reward {calls} times, not once")
    imports = [ast.unparse(node) for node in ast.parse(maker_source).body if isinstance(node, ast.ImportFrom)]
    if not any(line.startswith("from openrlhf.models.utils import ") and "compute_reward" in line for line in imports):
        problems.append("compute_reward is not a module-level name of the experience maker")
    trainer = methods(trainer_source, "BasePPOTrainer") or {}
    for name, (arguments, defaults) in TRAINER_SIGNATURES.items():
        found = trainer.get(name)
        if found is None:
            problems.append(f"BasePPOTrainer.{name} is absent")
        elif ([arg.arg for arg in found.args.args], len(found.args.defaults)) != (arguments, defaults):
            problems.append(f"BasePPOTrainer.{name} has the signature ({ast.unparse(found.args)})")
    return problems
