"""A trainer subclass that overrides a hooked verl method without calling it: the plugin's hook would never run.

verl lets a user pass a subclass of its trainers to ``run_ppo``; the hook registry (:mod:`avspo_plugin.verl.hooks`)
wraps the methods of verl's classes, so an override that does not call the parent's method skips the wrapper.
:func:`refuse_unhooked_overrides` reads the override's code for a call of the method by name and refuses the run
when there is none, before any worker starts (the trainers' ``__init__`` hook calls it).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any, Protocol

from ..import_patching import is_patched
from .launch_guards import HookError
from .run_config import FEATURE_SETTING, features_of


class HookedMethod(Protocol):
    """What the check reads of a hook of the registry (:class:`avspo_plugin.verl.hooks.Hook`)."""

    module: str
    owner: str | None
    attribute: str
    purpose: str
    features: tuple[str, ...]

    @property
    def name(self) -> str: ...


def refuse_unhooked_overrides(trainer_class: type, config: Any, hooks: Iterable[HookedMethod]) -> None:
    """Raise HookError when ``trainer_class`` (a subclass of a hooked verl trainer) overrides a method the run
    needs hooked without calling the parent's: the plugin's hook would never run.

    hooks: the registry's (:data:`avspo_plugin.verl.hooks.HOOKS`). "Calls the parent's" is read from the
    override's code: it names the method (``super().<name>(...)`` or ``Parent.<name>(self, ...)``).
    """
    for feature in features_of(config):
        # Either trainer's hooks: the class, not trainer.use_v1, says which verl trainer it extends.
        for hook in (hook for hook in hooks if feature in hook.features):
            hooked = hooked_class(trainer_class, hook)
            if hooked is None:
                continue
            override = inspect.getattr_static(trainer_class, hook.attribute, None)
            if override is None or is_patched(override) or calls_by_name(override, hook.attribute):
                continue
            owner = next(cls for cls in trainer_class.__mro__ if hook.attribute in cls.__dict__)
            raise HookError(
                f"{FEATURE_SETTING[feature]} cannot run with the trainer class {qualified(trainer_class)}: "
                f"{qualified(owner)}.{hook.attribute} overrides {hook.name} without calling it, so the plugin's hook "
                f"({hook.purpose}) would never run. Call super().{hook.attribute}(...) in the override, or run verl's "
                f"{qualified(hooked)}."
            )


def hooked_class(trainer_class: type, hook: HookedMethod) -> type | None:
    """The verl class of ``hook`` among ``trainer_class``'s bases, when it is a hooked method of a trainer."""
    if hook.owner is None or hook.attribute == "__init__":
        return None
    for cls in trainer_class.__mro__[1:]:
        if cls.__name__ == hook.owner and cls.__module__ == hook.module:
            return cls
    return None


def calls_by_name(function: Any, name: str) -> bool:
    """Whether ``function``'s code (its nested functions included) names ``name``."""
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    stack = [code] if code is not None else []
    while stack:
        code = stack.pop()
        if name in code.co_names:
            return True
        stack.extend(const for const in code.co_consts if inspect.iscode(const))
    return False


def qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
