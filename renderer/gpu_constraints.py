"""The constraints files of GPU machines (constraints-vllm.txt, constraints-sglang.txt): verl's own pins for its
``vllm`` and ``sglang`` extras, read from the metadata of the verl that constraints.txt pins (installed in .venv).

verl prescribes torch, the rollout engine and transformers per extra (0.9.1: torch 2.11.0, vllm 0.24.0 or sglang
0.5.12, transformers 5.9.0); constraints.txt pins the CPU test suite's torch 2.13.0, on which no vLLM of verl's
choosing installs. A GPU file pins verl and what its extra pins, nothing more: everything else resolves under
those pins, as it does for verl's own users. Each file's first lines give the install line that goes with it.
"""

from __future__ import annotations

import importlib.metadata as metadata
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
INSTALL_PREFIX = "# install: "


@dataclass(frozen=True)
class Stack:
    """A GPU stack: verl's extra of that name, what the install line names beside the package, and the pins that
    must differ from the extra's (name: (version, why))."""

    extra: str
    install: tuple[str, ...]
    changes: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return ROOT / f"constraints-{self.extra}.txt"

    @property
    def install_line(self) -> str:
        return " ".join(["pip install", "-c", self.path.name, '".[verl,math]"', *(f'"{name}"' for name in self.install)])


STACKS = (
    Stack("vllm", ("verl[vllm]",)),
    # sglang 0.5.12 requires transformers==5.6.0, which verl 0.9.1 excludes (transformers!=5.6.0) and its own sglang
    # extra contradicts (transformers==5.9.0): `verl[sglang]` does not install. sglang 0.5.13-0.5.14 keep torch 2.11.0
    # and require transformers 5.8.1, inside verl's range (>=5.5.3,<5.11); 0.5.15 on requires 5.12.1, outside it.
    # compat/check_stack_metadata.py reads these releases' metadata to hold this.
    Stack("sglang", ("verl[verl-core]", "sglang", "mbridge"), {
        "sglang": ("0.5.14", "sglang 0.5.12 requires transformers==5.6.0, which verl excludes"),
        "transformers": ("5.8.1", "what sglang 0.5.14 requires"),
    }),
)


def extra_pins(extra: str) -> list[Requirement]:
    """The requirements of verl's extra ``extra`` that pin one version (``name==version``)."""
    pins = []
    for line in metadata.requires("verl") or []:
        requirement = Requirement(line)
        marker = requirement.marker
        if marker is None or not marker.evaluate({"extra": extra}) or marker.evaluate({"extra": ""}):
            continue  # a base requirement of verl, or another extra's
        if len(requirement.specifier) == 1 and next(iter(requirement.specifier)).operator == "==":
            pins.append(Requirement(f"{requirement.name}{requirement.specifier}"))
    if not pins:
        raise ValueError(f"verl {metadata.version('verl')} pins nothing in an extra named {extra!r}")
    return pins


def constraints_text(stack: Stack) -> str:
    verl = metadata.version("verl")
    unknown = set(stack.changes) - {pin.name for pin in extra_pins(stack.extra)}
    if unknown:
        raise ValueError(f"the {stack.extra} stack changes {sorted(unknown)}, which verl {verl}'s extra does not pin")
    lines = [
        f"# GPU machines on verl's {stack.extra} stack: verl {verl} and the pins of its `{stack.extra}` extra",
        "# (rendered by `python -m renderer` from verl's metadata; checked by compat/check_gpu_stack.sh).",
        f"{INSTALL_PREFIX}{stack.install_line}",
        f"verl=={verl}",
    ]
    for pin in extra_pins(stack.extra):
        if pin.name in stack.changes:
            version, why = stack.changes[pin.name]
            lines.append(f"{pin.name}=={version}    # verl's extra: {pin.specifier}; {why}")
        else:
            lines.append(str(pin))
    return "\n".join(lines) + "\n"


def render_gpu_constraints() -> dict[Path, str]:
    return {stack.path: constraints_text(stack) for stack in STACKS}
