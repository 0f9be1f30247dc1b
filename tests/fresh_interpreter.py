"""Probes run in a fresh interpreter, and what a plain ``import verl`` loads and registers there.

A fresh interpreter is what these tests are about (which modules an import loads, what verl's entry point
registers); no ``VERL_*`` variable of the test's environment reaches it unless the test passes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

# What `import verl` loads and registers: our estimator (by verl's entry point), the opt-in CPU support, the
# adapter's log level; as the dict `verl_import`, which VERL_IMPORT prints and other probes go on from.
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
        "cpu_support_loaded": "avspo_plugin.tools.verl_cpu" in sys.modules,
        "cpu_support_registered": ["cpu" in PlatformRegistry.registered_names(), "hf" in RolloutReplicaRegistry._registry,
                                   ("hf", "async") in base._ROLLOUT_REGISTRY],
        "adapter_log_level": logging.getLogger("avspo_plugin.verl").getEffectiveLevel(),
    }
"""
VERL_IMPORT = VERL_IMPORT_REPORT + "    print(json.dumps(verl_import))\n"


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
