"""Checks the avspo estimator against the verl installed in this Python environment.

Run by compat/check_verl.sh in a fresh venv per verl version; prints one JSON line. Checks:
registration through the route this verl supports, verl's own compute_advantage with
adv_estimator=avspo (against the core and against verl's GRPO), the avspo/* metrics in verl's
Tracking, and which hooks found their verl functions.
"""

import importlib.metadata as metadata
import json
import os
import sys

import numpy as np
import torch


def main() -> int:
    report = {"verl": metadata.version("verl"), "torch": torch.__version__, "env": os.environ.get("VERL_USE_EXTERNAL_MODULES")}
    import verl  # noqa: F401  (loads plugins the way this verl does)
    from verl.trainer.ppo import core_algos

    registered = core_algos.ADV_ESTIMATOR_REGISTRY.get("avspo")
    report["registered_on_import_verl"] = bool(getattr(registered, "avspo_estimator", False))
    if not report["registered_on_import_verl"]:
        print(json.dumps(report))
        return 0 if "--expect-unregistered" in sys.argv else 1

    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.tracking import Tracking

    from avspo_plugin.config import AVSPOConfig
    from avspo_plugin.core import ThresholdState, compute_token_advantages
    from avspo_plugin.verl import hooks, pop_metrics
    from avspo_plugin.verl.metric_routing import metrics_route
    from avspo_plugin.verl.run_config import AVSPO

    # The trainer of an avspo run places the hooks it uses (the legacy trainer: the only one before verl 0.9); here
    # as there, so that the metrics reach Tracking as in a run.
    for hook in hooks.hooks_for("legacy", AVSPO):
        hook.place()

    scores = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.5, 0.5, 0.2, 0.9])
    uids = np.array(list("aaaabbbbcccc"), dtype=object)
    rewards = torch.zeros(12, 3)
    rewards[:, -1] = scores

    def batch():
        return DataProto.from_dict(tensors={"token_level_rewards": rewards.clone(), "response_mask": torch.ones(12, 3)},
                                   non_tensors={"uid": uids})

    algorithm = OmegaConf.create({"adv_estimator": "avspo", "norm_adv_by_std_in_grpo": True,
                                  "avspo": {"threshold_mode": "always"}})
    data = compute_advantage(batch(), adv_estimator="avspo", config=algorithm)
    oracle = compute_token_advantages(rewards, torch.ones(12, 3), uids, AVSPOConfig(threshold_mode="always"),
                                      ThresholdState.initial(AVSPOConfig()))
    report["compute_advantage_matches_core"] = bool(torch.equal(data.batch["advantages"], oracle.advantages))
    metrics = pop_metrics()
    report["acr"] = metrics["acr"]

    never = OmegaConf.create({"adv_estimator": "avspo", "avspo": {"threshold_mode": "never"}})
    ours = compute_advantage(batch(), adv_estimator="avspo", config=never).batch["advantages"]
    grpo = compute_advantage(batch(), adv_estimator="grpo", config=OmegaConf.create({})).batch["advantages"]
    report["monitor_only_equals_verl_grpo"] = bool(torch.equal(ours, grpo))

    tracking = Tracking("avspo-compat", "check", default_backend=[])
    logged = {}
    tracking.logger = {"recorder": type("Recorder", (), {"log": lambda self, data, step: logged.update(data),
                                                         "finish": lambda self, **kw: None})()}
    tracking.log(data={"actor/entropy": 1.0}, step=1)
    report["tracker_got"] = sorted(key for key in logged if key.startswith("avspo/"))
    report["metrics_route"] = metrics_route()
    # The legacy trainer's hooks, their modules imported as a run does: the avspo run's in place, the rest (the
    # monitor's) ready to be placed by a run that uses them.
    report["hooks"] = hooks.hook_status("legacy", load=True)
    print(json.dumps(report))
    ok = report["compute_advantage_matches_core"] and report["monitor_only_equals_verl_grpo"]
    placeable = set(report["hooks"].values()) <= set(hooks.PLACEABLE)
    return 0 if ok and "avspo/acr" in report["tracker_got"] and placeable else 1


if __name__ == "__main__":
    sys.exit(main())
