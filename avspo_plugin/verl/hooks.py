"""The hook registry: every verl function the plugin wraps (:data:`HOOKS`), where it is placed, and its status.

verl gives a registered estimator no way to log metrics, check its config before the first rollout, keep state across
a resume or see agent-loop trajectories, so the plugin wraps these functions in memory. ``Hook.always`` hooks are
placed when their module loads; the trainer's ``__init__`` hook places those its run's features use. A missing or
changed target is a warning, and a run that needs it refuses to start (:func:`require_hooks`).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass
from typing import Any

from ..import_patching import after_import, is_patched, rebind, wrap
from ..launch import announce
from .checkpoint import load_with_state, save_with_state
from .estimator import register_estimator, session
from .launch_guards import HookError, refuse_unrunnable, runtime_env_with_plugin
from .metric_routing import log_with_avspo_metrics, use_metrics_channel
from .model_build_fix import TRL_PATCH_NAME, skip_missing_trl_value_head, trl_installed
from .monitor import launch_notes, monitor, observe_advantage_step
from .plugin_process import close_v1_step
from .run_config import (
    AVSPO,
    FEATURE_SETTING,
    FEATURES,
    MONITOR,
    avspo_config_from_algorithm,
    config_entry,
    features_of,
    monitor_config_from_algorithm,
    trainer_of,
    uses_avspo,
    uses_monitor,
)
from .trajectory_groups import group_trajectories_for_avspo
from .versions import KNOWN_GOOD_VERL, check_verl_release, verl_version

logger = logging.getLogger("avspo_plugin.verl")


@dataclass(frozen=True)
class Hook:
    """``module.owner.attribute`` (owner None: a module function), wrapped by ``make_wrapper``. parameters: the
    leading parameter names the wrapper relies on; trainer: ``v1``, ``legacy`` or None (both); features: the features
    whose runs need it (AVSPO, MONITOR); always: placed in every verl process when its module loads; when, why: the
    touch-point table's columns (renderer/verl_hook_table.py)."""

    module: str
    owner: str | None
    attribute: str
    make_wrapper: Callable[[Callable], Callable]
    purpose: str
    parameters: tuple[str, ...] = ()
    trainer: str | None = None
    features: tuple[str, ...] = FEATURES
    always: bool = False
    _: KW_ONLY
    when: str
    why: str

    @property
    def name(self) -> str:
        return ".".join(part for part in (self.module, self.owner, self.attribute) if part)

    def target(self, module) -> Any:
        return module if self.owner is None else getattr(module, self.owner, None)

    def problem(self, module) -> str | None:
        """Why this hook cannot be placed in ``module`` (None when it can, or is placed)."""
        owner = self.target(module)
        if owner is None:
            return f"{self.module} has no {self.owner}"
        original = owner.__dict__.get(self.attribute) if isinstance(owner, type) else getattr(owner, self.attribute, None)
        if original is None:
            return f"{self.module}.{self.owner + '.' if self.owner else ''}{self.attribute} does not exist"
        if is_patched(original):
            return None
        try:
            names = tuple(inspect.signature(original).parameters)
        except (TypeError, ValueError):
            return f"{self.name} has no readable signature"
        if names[: len(self.parameters)] != self.parameters:
            return f"{self.name} takes {names}, not the {self.parameters} the plugin's wrapper relies on"
        return None

    def check(self, module) -> None:
        """When ``module`` loads: a hook that cannot be placed is recorded and reported; an ``always`` one is placed."""
        problem = self.problem(module)
        if problem is None:
            HOOK_PROBLEMS.pop(self.name, None)
            if self.always:
                self.place(module)
            return
        HOOK_PROBLEMS[self.name] = problem
        logger.warning(
            "avspo_plugin cannot hook %s (%s) in verl %s: %s. Runs with %s will refuse to start; the plugin's "
            "hooks are known to work with verl %s.",
            self.name, self.purpose, verl_version(), problem, " or ".join(FEATURE_SETTING[f] for f in self.features),
            ", ".join(KNOWN_GOOD_VERL),
        )  # fmt: skip

    def place(self, module=None) -> None:
        """Wrap the target (importing its module first), and a module function in every loaded verl module that
        imported it by name. A hook that cannot be placed stays unplaced: require_hooks reports it."""
        module = importlib.import_module(self.module) if module is None else module
        if self.problem(module) is not None:
            return
        owner = self.target(module)
        original = getattr(owner, self.attribute)
        if wrap(owner, self.attribute, self.make_wrapper) and self.owner is None:
            rebind(original, getattr(owner, self.attribute), "verl")


def check_launch_config(config: Any) -> None:
    """The launcher's check (no Ray yet): the config runnable, the verl release supported, the trainer's hooks in
    place. Raises ConfigError or HookError."""
    refuse_unrunnable(config)
    features = features_of(config)
    if features:
        check_verl_release()
    for feature in features:
        require_hooks(trainer_of(config), feature)


def prepare_trainer(config: Any) -> None:
    """The trainer process's check, before workers start: registered here, config valid and in force, every hook of
    the run's trainer in place."""
    refuse_unrunnable(config)
    place_hooks(config)
    for note in launch_notes(config):
        logger.warning(note)
    if uses_monitor(config):
        monitor().configure(monitor_config_from_algorithm(config.algorithm).avspo_config())
        require_hooks(trainer_of(config), MONITOR)
    if not uses_avspo(config):
        return
    # verl's own unit tests clear the registry; a run must not depend on the import order.
    register_estimator()
    session().configure(avspo_config_from_algorithm(config.algorithm))
    rollout = config_entry(config_entry(config, "actor_rollout_ref"), "rollout")
    announce(session().config, config_entry(config_entry(config, "data"), "train_batch_size"),
             config_entry(rollout, "n"), "verl")
    require_hooks(trainer_of(config), AVSPO)
    logger.info("avspo estimator registered in process %d with %s", os.getpid(), session().config)


def refuse_unhooked_overrides(trainer_class: type, config: Any, hooks: Iterable[Hook]) -> None:
    """Raise HookError when ``trainer_class`` (a user's subclass of a hooked verl trainer) overrides a method the run
    needs hooked without calling the parent's (its code never names the method): the hook would never run."""
    for feature in features_of(config):
        # Either trainer's hooks: the class, not trainer.use_v1, says which verl trainer it extends.
        for hook in hooks:
            if feature not in hook.features or hook.owner is None or hook.attribute == "__init__":
                continue
            bases = [cls for cls in trainer_class.__mro__[1:]
                     if (cls.__module__, cls.__name__) == (hook.module, hook.owner)]
            override = inspect.getattr_static(trainer_class, hook.attribute, None)
            if not bases or override is None or is_patched(override) or _names(override, hook.attribute):
                continue
            owner = next(cls for cls in trainer_class.__mro__ if hook.attribute in cls.__dict__)
            raise HookError(
                f"{FEATURE_SETTING[feature]} cannot run with the trainer class {_qualified(trainer_class)}: "
                f"{_qualified(owner)}.{hook.attribute} overrides {hook.name} without calling it, so the plugin's hook "
                f"({hook.purpose}) would never run. Call super().{hook.attribute}(...) in the override, or run verl's "
                f"{_qualified(bases[0])}."
            )


def _names(function: Any, name: str) -> bool:
    """Whether ``function``'s code (its nested functions included) names ``name``."""
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    stack = [code] if code is not None else []
    while stack:
        code = stack.pop()
        if name in code.co_names:
            return True
        stack.extend(const for const in code.co_consts if inspect.iscode(const))
    return False


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def validate_with_launch_check(original: Callable) -> Callable:
    """Wraps ``validate_config``: :func:`check_launch_config` before verl's own check."""

    def validate_config(config, *args, **kwargs):
        check_launch_config(config)
        return original(config, *args, **kwargs)

    return validate_config


def init_with_trainer_checks(original: Callable) -> Callable:
    """Wraps the trainers' ``__init__``: :func:`prepare_trainer` and the trainer class checked before verl's own."""

    def __init__(self, *args, **kwargs):
        config = kwargs.get("config", args[0] if args else None)
        prepare_trainer(config)
        refuse_unhooked_overrides(type(self), config, HOOKS)
        return original(self, *args, **kwargs)

    return __init__


_TRAINER_CLASSES = (("verl.trainer.ppo.ray_trainer", "RayPPOTrainer", "legacy"), ("verl.trainer.ppo.v1.trainer_base", "PPOTrainer", "v1"))
_MULTI_TRAJECTORY_PARAMETERS = (
    "data", "batch_keys", "adv_estimator", "gamma", "lam", "num_repeat", "norm_adv_by_std_in_grpo", "config",
)  # fmt: skip
_NO_CHECKPOINT_CALLBACK = "checkpoints have no callback for extra state"

HOOKS: tuple[Hook, ...] = (
    Hook("verl.utils.config", None, "validate_config", validate_with_launch_check,
         "checks algorithm.avspo and these hooks before Ray starts", ("config",), always=True,
         when="launch, before Ray starts", why="the only place that sees the whole config before Ray starts; no validator registry"),
    Hook("verl.trainer.constants_ppo", None, "get_ppo_ray_runtime_env", runtime_env_with_plugin,
         "imports the plugin in the trainer process with errors raised", always=True, when="launch",
         why="the trainer process imports plugins with errors swallowed; the runtime env is the one way to import it loudly there"),
    Hook("verl.utils.tracking", "Tracking", "log", log_with_avspo_metrics,
         "logs avspo/* metrics", ("self", "data", "step"), when="each logged step",
         why="the estimator registry takes a function, not its metrics (an upstream channel is proposed in patches/)"),
    *(
        Hook(module, owner, attribute, make_wrapper, purpose, parameters, trainer, always=always, when=when, why=why)
        for module, owner, trainer in _TRAINER_CLASSES
        for attribute, make_wrapper, purpose, parameters, always, when, why in (
            ("__init__", init_with_trainer_checks, "checks the run and places the hooks it uses before any worker starts",
             ("self", "config"), True, "trainer start, before workers", "no trainer start callback"),
            ("_save_checkpoint", save_with_state, "saves the AVSPO state with the checkpoint", ("self",), False,
             "each checkpoint", _NO_CHECKPOINT_CALLBACK),
            # Always: verl's experimental fully-async trainer inherits it without passing through __init__'s hook.
            ("_load_checkpoint", load_with_state, "restores the AVSPO state on resume", ("self",), True, "resume",
             _NO_CHECKPOINT_CALLBACK),
        )
    ),
    Hook("verl.trainer.ppo.v1.trainer_base", "PPOTrainer", "step", close_v1_step,
         "one step of Eq. 12 (and of the monitor's warnings) per global step", ("self", "metrics"), trainer="v1",
         features=(AVSPO, MONITOR), when="end of each global step",
         why="no end-of-step callback; one step of Eq. 12 spans several mini-batch calls"),
    # Placed in every process that loads verl's v1 utils, trainer or not: a script calling verl's function with
    # the avspo estimator gets GRPO's trajectory grouping, never one sample per output. Other estimators pass through.
    Hook("verl.trainer.ppo.v1.utils", None, "compute_advantage_for_multi_trajectories", group_trajectories_for_avspo,
         "groups agent-loop trajectories as GRPO does",
         _MULTI_TRAJECTORY_PARAMETERS, trainer="v1", features=(AVSPO,), always=True,
         when="each advantage step", why="its GRPO-only trajectory grouping is a name check inside the function"),
    Hook("verl.trainer.ppo.ray_trainer", None, "compute_advantage", observe_advantage_step,
         "shows the ACR monitor (both trainers) the rows the estimator gets",
         ("data", "adv_estimator"), features=(MONITOR,), when="each advantage step",
         why="no observer of the rows an estimator gets"),
)  # fmt: skip


# Not a hook: verl's check the plugin replaces beside trl 1.x (:mod:`~avspo_plugin.verl.model_build_fix`), installed
# where trl is; the touch-point table of docs/using/verl.md lists it after the hooks.
TRL_PATCH = {"name": TRL_PATCH_NAME, "wrapper": skip_missing_trl_value_head,
             "when": "model build, only where trl lacks `AutoModelForCausalLMWithValueHead`",
             "needed_by": "every FSDP run beside trl >= 1.0", "why": "verl's own check, which breaks the build beside trl 1.x"}

# Hook name -> why it could not be placed, for the hooks whose module loaded.
HOOK_PROBLEMS: dict[str, str] = {}
# The status of a hook that can be placed and waits for a run that uses it.
READY = "ready (placed when a run uses it)"
PLACEABLE = ("in place", READY)


def hooks_for(trainer: str | None, feature: str | None = None) -> list[Hook]:
    """The hooks a run of ``trainer`` (``v1``, ``legacy``; None: both) needs for ``feature`` (None: any)."""
    return [
        hook for hook in HOOKS
        if (trainer is None or hook.trainer in (None, trainer)) and (feature is None or feature in hook.features)
    ]  # fmt: skip


def place_hooks(config: Any) -> list[str]:
    """Place, in this process, the hooks a full verl config's run uses (its features, its trainer); their names."""
    hooks = {hook.name: hook for feature in features_of(config) for hook in hooks_for(trainer_of(config), feature)}
    for hook in hooks.values():
        hook.place()
    return list(hooks)


def hook_status(trainer: str | None = None, load: bool = True, feature: str | None = None) -> dict[str, str]:
    """Each hook of ``trainer``'s runs of ``feature``: ``in place``, READY, ``not loaded`` (its module not imported
    and not ``load``) or why it is missing."""
    status = {}
    for hook in hooks_for(trainer, feature):
        module = sys.modules.get(hook.module)
        if module is None and load:
            try:
                module = importlib.import_module(hook.module)
            except ImportError as err:
                status[hook.name] = f"its module does not import: {err!r}"
                continue
        if module is None:
            status[hook.name] = "not loaded"
        elif hook.name in HOOK_PROBLEMS:
            status[hook.name] = HOOK_PROBLEMS[hook.name]
        else:
            owner = hook.target(module)
            placed = owner is not None and is_patched(getattr(owner, hook.attribute, None))
            status[hook.name] = "in place" if placed else hook.problem(module) or READY
    return status


def require_hooks(trainer: str, feature: str = AVSPO) -> None:
    """Raise HookError unless every hook a run of ``trainer`` needs for ``feature`` is in place (imports their modules)."""
    missing = {name: state for name, state in hook_status(trainer, feature=feature).items() if state not in PLACEABLE}
    if missing:
        details = "; ".join(f"{name}: {state}" for name, state in missing.items())
        raise HookError(
            f"{FEATURE_SETTING[feature]} cannot run on verl {verl_version()} with the {trainer} trainer: "
            f"{len(missing)} verl function(s) the plugin must wrap are missing or changed ({details}). Without "
            f"them the run would silently differ from what avspo promises. Known to work: verl "
            f"{', '.join(KNOWN_GOOD_VERL)}; run `avspo doctor` for the full report."
        )


def install() -> None:
    """Register the estimator and install every hook in this process (idempotent)."""
    register_estimator()
    for module_name, callback in (
        ("verl.trainer.ppo.core_algos", use_metrics_channel),
        # Only beside trl: verl's model build reaches for trl's value-head class only when trl is installed.
        *((("verl.models.transformers.monkey_patch", skip_missing_trl_value_head),) if trl_installed() else ()),
        *((hook.module, hook.check) for hook in HOOKS),
    ):
        after_import(module_name, functools.partial(_run_patch, callback))


def _run_patch(callback: Callable, module) -> None:
    # A patch that fails must not break verl's import; it is reported, `avspo doctor` shows which
    # hooks are missing, and an avspo run refuses to start without them.
    try:
        callback(module)
    except Exception as err:
        for hook in HOOKS:
            if hook.module == module.__name__ and getattr(callback, "__self__", None) is hook:
                HOOK_PROBLEMS[hook.name] = f"patching raised {err!r}"
        logger.warning("avspo_plugin could not patch %s; its hook is missing", module.__name__, exc_info=True)
