"""A missing optional extra (``pip install ".[analyze]"`` and the like) said in one line naming the install command,
by the console script's commands and by the checkout's programs (``python -m recipes.math_data.prepare``, ...)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from .names import install_line


def missing_extra(extra: str | None, err: ModuleNotFoundError) -> str | None:
    """The one-line message when ``err`` says a package of ``extra`` is missing (None: no extra, or the missing
    module is avspo_plugin's own)."""
    if extra is None or (err.name or "").split(".")[0] == "avspo_plugin":
        return None
    return f"needs the '{extra}' extra: {install_line(extra)} ({err})"


@contextlib.contextmanager
def extra_imports(module: str, prog: str, extra: str) -> Iterator[None]:
    """The imports of a checkout program that need ``extra``: run as the program (``module``, its ``__name__``, is
    ``"__main__"``), a missing package ends it with one line naming the install command and exit status 2."""
    try:
        yield
    except ModuleNotFoundError as err:
        message = missing_extra(extra, err)
        if module != "__main__" or message is None:
            raise
        print(f"{prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2) from None
