"""Patch a host framework's module right after its first import (nothing on disk changes) and wrap its methods once;
every copy of this package in one process shares one post-import finder (and :func:`process_wide`'s objects)."""

from __future__ import annotations

import functools
import importlib.abc
import sys
from collections.abc import Callable
from typing import Any

# Set on every wrapper this package installs, so a second install wraps nothing twice.
PATCH_MARK = "__avspo_patch__"


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the loader of watched modules to run callbacks after execution."""

    def __init__(self) -> None:
        self.avspo_callbacks: dict[str, list[Callable]] = {}
        self.avspo_objects: dict[str, Any] = {}  # process_wide's

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.avspo_callbacks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _CallbackLoader(spec.loader, self.avspo_callbacks[fullname])
        return spec


class _CallbackLoader(importlib.abc.Loader):
    def __init__(self, loader, callbacks: list[Callable]) -> None:
        self.loader = loader
        self.callbacks = callbacks

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        # Leave the module as if loaded by its own loader (importlib.resources and friends use it).
        module.__loader__ = module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        for callback in self.callbacks:
            callback(module)


def _finder() -> _PostImportFinder:
    # Found by attribute, not class: a second copy of this package in the process shares the first's finder.
    for finder in sys.meta_path:
        if hasattr(finder, "avspo_callbacks"):
            return finder
    finder = _PostImportFinder()
    sys.meta_path.insert(0, finder)
    return finder


def after_import(module_name: str, callback: Callable) -> None:
    """Run ``callback(module)`` now if ``module_name`` is imported, else right after its first execution."""
    module = sys.modules.get(module_name)
    if module is not None:
        callback(module)
        return
    callbacks = _finder().avspo_callbacks.setdefault(module_name, [])
    if callback not in callbacks:
        callbacks.append(callback)


def process_wide(key: str, make: Callable[[], Any]) -> Any:
    """The one object of ``key`` in this process (whichever copy of this package asks), made by ``make()`` once."""
    objects = _finder().avspo_objects
    if key not in objects:
        objects[key] = make()
    return objects[key]


def is_watched(module_name: str) -> bool:
    """Whether a patch waits for ``module_name``'s first import in this process."""
    return any(module_name in getattr(finder, "avspo_callbacks", {}) for finder in sys.meta_path)


def wrap(owner: Any, name: str, make_wrapper: Callable[[Callable], Callable]) -> bool:
    """Replace ``owner.name`` by ``make_wrapper(original)`` once; False when absent or already wrapped (on a class,
    only its own attribute counts: a subclass is never wrapped through its parent's method)."""
    original = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
    if original is None or is_patched(original):
        return False
    wrapper = functools.wraps(original)(make_wrapper(original))
    setattr(wrapper, PATCH_MARK, True)
    setattr(owner, name, wrapper)
    return True


def rebind(original: Any, replacement: Any, package: str) -> None:
    """Point every loaded module of ``package`` whose global is ``original`` at ``replacement``: a module
    function wrapped after other modules imported it by name (``from m import f``) is wrapped there too."""
    for name, module in list(sys.modules.items()):
        if module is None or not (name == package or name.startswith(package + ".")):
            continue
        for key, value in list(vars(module).items()):
            if value is original:
                setattr(module, key, replacement)


def is_patched(function: Any) -> bool:
    return bool(getattr(function, PATCH_MARK, False))
