"""Probes run in a fresh interpreter, and what a plain ``import verl`` loads and registers there.

A fresh interpreter is what these tests are about (which modules an import loads, what verl's entry point
registers, what a process without a verl trainer does); no ``VERL_*`` variable of the test's environment reaches it
unless the test passes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import avspo_plugin

TESTS = Path(__file__).resolve().parent
PACKAGE = Path(avspo_plugin.__file__).parent
# The commands users run around a training run and the verl-on-CPU harness: the package apart from its runtime.
TOOLS = ("avspo_plugin.commands", "avspo_plugin.verl_cpu")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_modules() -> list[str]:
    """Every module of avspo_plugin outside TOOLS (tests/test_layout.py: the runtime)."""
    return sorted(
        module_name(path) for path in PACKAGE.rglob("*.py") if not module_name(path).startswith(TOOLS)
    )


# What `import verl` loads and registers: our estimator (by verl's entry point), the opt-in CPU support, the
# adapter's log level; as the dict `verl_import`, which the probes built on it go on from (FRESH_VERL_PROCESS
# below, tests/verl/test_e2e_cpu_support.py).
VERL_IMPORT_REPORT = """
    import json, logging, sys
    import verl
    from verl.plugin.platform import PlatformRegistry
    from verl.trainer.ppo import core_algos
    from verl.workers.rollout import base
    from verl.workers.rollout.replica import RolloutReplicaRegistry
    fn = core_algos.ADV_ESTIMATOR_REGISTRY.get("avspo")
    verl_import = {
        "registered": bool(getattr(fn, "avspo_estimator", False)),
        "function": None if fn is None else fn.__module__ + "." + fn.__qualname__,
        "cpu_support_loaded": "avspo_plugin.verl_cpu" in sys.modules,
        "cpu_support_registered": ["cpu" in PlatformRegistry.registered_names(), "hf" in RolloutReplicaRegistry._registry,
                                   ("hf", "async") in base._ROLLOUT_REGISTRY],
        "adapter_log_level": logging.getLogger("avspo_plugin.verl").getEffectiveLevel(),
    }
"""

# A process that imports verl and the plugin but builds no verl trainer, step by step; each step reads only what the
# steps before it did (none builds a trainer or places a hook but prepare_trainer's): `verl_import`; the hooks in place
# on import; verl's multi-output advantage route called by a script (avspo against GRPO on the same sessions); the
# hooks a grpo run, then a grpo run with the monitor, place; last, every runtime module imported, and the tool modules
# that loaded.
FRESH_VERL_PROCESS = VERL_IMPORT_REPORT + f"""
    import importlib
    import numpy as np, torch
    from hydra import compose, initialize_config_module
    from avspo_plugin.import_patching import is_patched
    from avspo_plugin.verl import hooks
    import verl.trainer.ppo.ray_trainer, verl.trainer.ppo.v1.trainer_base, verl.trainer.ppo.v1.utils as v1_utils
    from verl.trainer.ppo.core_algos import AdvantageEstimator

    placed = lambda: sorted(name for name, state in hooks.hook_status().items() if state == "in place")
    placement = {{"imported": placed()}}

    sys.path.insert(0, {str(TESTS / "verl")!r})
    from test_paths import agent_loop_batch, algorithm, v1_advantage_step
    data, keys = agent_loop_batch(np.random.default_rng(5), rewards="binary")
    grpo = v1_advantage_step(data, keys, AdvantageEstimator.GRPO, algorithm())
    avspo = v1_advantage_step(data, keys, "avspo", algorithm())
    multi_output = {{"rows": len(keys), "equal_to_grpo": bool(torch.equal(avspo, grpo)),
                     "nonzero": int(torch.count_nonzero(grpo))}}

    with initialize_config_module("avspo_plugin.verl.config", version_base=None):
        grpo_run = compose("avspo_trainer", overrides=["algorithm.adv_estimator=grpo"])
        monitored = compose("avspo_trainer", overrides=["algorithm.adv_estimator=grpo", "algorithm.avspo_monitor.enable=true"])
    hooks.prepare_trainer(grpo_run)
    placement["grpo"] = placed()
    hooks.prepare_trainer(monitored)
    placement["monitor"] = placed()
    placement["v1_binding_wrapped"] = is_patched(v1_utils.compute_advantage)

    for name in {runtime_modules()!r}:
        importlib.import_module(name)
    print(json.dumps({{"verl_import": verl_import, "placement": placement, "multi_output": multi_output,
                      "tools_loaded": sorted(m for m in sys.modules if m.startswith({TOOLS!r}))}}))
"""


def run_python(code: str, extra_env: dict[str, str]) -> dict:
    """Run ``code`` in a fresh interpreter (no VERL_* variable but ``extra_env``'s); it prints one JSON object as its
    last line."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("VERL_")}
    env.update(extra_env)
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])
