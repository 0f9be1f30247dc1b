"""Loaded in every process of the e2e run (``VERL_USE_EXTERNAL_MODULES``): in the trainer process it
records, at each v1 advantage step, how avspo's advantages compare with verl's own GRPO route on the
same rows, bit for bit, and what the step held (rows, sessions, prompts), as JSON lines in
``$AVSPO_PROBE_OUT``. verl's GRPO route is its ``compute_advantage_for_multi_trajectories`` as
released (the plugin's wrapper removed with ``inspect.unwrap``). Rows that GRPO gives a non-zero
advantage belong to groups that are not collapsed, which AVSPO never touches: there the two must be
equal whether or not AVSPO triggered."""

import copy
import functools
import inspect
import json
import os
import sys

from avspo_plugin.import_patching import after_import


def _probe(trainer_base):
    utils = sys.modules["verl.trainer.ppo.v1.utils"]
    verl_route = inspect.unwrap(utils.compute_advantage_for_multi_trajectories)

    @functools.wraps(verl_route)
    def compute_advantage_for_multi_trajectories(data, batch_keys, adv_estimator, **kwargs):
        import torch

        # Looked up at each call: the trainer places the plugin's wrapper in verl.trainer.ppo.v1.utils when the
        # run starts, after this probe replaced trainer_base's by-name binding (which the plugin then leaves alone).
        plugin_route = utils.compute_advantage_for_multi_trajectories

        grpo = verl_route(copy.deepcopy(data), batch_keys, adv_estimator="grpo", **kwargs).batch["advantages"]
        out = plugin_route(data, batch_keys, adv_estimator, **kwargs)
        uids = [key.rsplit("_", 2)[0] for key in batch_keys]
        signal = grpo != 0
        record = {
            "equal": bool(torch.equal(out.batch["advantages"], grpo)),
            "equal_where_grpo_nonzero": bool(torch.equal(out.batch["advantages"][signal], grpo[signal])),
            "rows": len(batch_keys),
            "sessions": len({key.rsplit("_", 1)[0] for key in batch_keys}),
            "prompts": len({uid for uid in uids if not uid.startswith("pad")}),
            "nonzero": int(torch.count_nonzero(grpo)),
        }
        with open(os.environ["AVSPO_PROBE_OUT"], "a") as f:
            f.write(json.dumps(record) + "\n")
        return out

    trainer_base.compute_advantage_for_multi_trajectories = compute_advantage_for_multi_trajectories


# The sync trainer's module loads after trainer_base, once the plugin's own hooks are in place there.
after_import("verl.trainer.ppo.v1.trainer_sync", lambda _: _probe(sys.modules["verl.trainer.ppo.v1.trainer_base"]))
