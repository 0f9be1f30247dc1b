"""What a run's batch means for AVSPO's trigger, said at launch by the doctor (the outlook's arithmetic:
avspo_plugin/launch.py)."""

from __future__ import annotations

from avspo_plugin.config import AVSPOConfig
from avspo_plugin.figures import share
from avspo_plugin.launch import outlook_at_paper_acr
from avspo_plugin.threshold_modes import THRESHOLD_MODES

# Below this share of collapsed groups augmented at the top of PAPER_GRPO_ACR, the doctor warns that the run may
# train as GRPO on most steps.
AUGMENTED_SHARE_WARNING = 0.5


def mode_note(avspo: AVSPOConfig, prompts: int | None) -> str:
    """What the launch check says of the run's threshold mode (its row's launch_note) for ``prompts`` prompts per
    step (data.train_batch_size; None: not set)."""
    batch = f"{prompts} prompts per step (data.train_batch_size)" if prompts else "a step's prompts"
    mode = THRESHOLD_MODES[avspo.threshold_mode]
    return f"algorithm.avspo.threshold_mode={mode.name}: " + mode.launch_note.format(batch=batch, **avspo.to_dict())


def trigger_note(avspo: AVSPOConfig, group_size: int | None, prompts: int | None) -> tuple[str, str]:
    """(level, text) of the doctor's finding on a mode whose trigger can stay shut (adaptive, fixed) for this batch."""
    head = mode_note(avspo, prompts)
    advice = ("++algorithm.avspo.threshold_mode=always augments every collapsed group at every step, in any batch "
              "(docs/method/method.md).")
    if not prompts:
        return "warn", (f"{head}; data.train_batch_size is not set, so how often that happens is not known here: with "
                        f"many prompts per step seldom. {advice}")
    group_size = None if group_size is None else int(group_size)
    low, high = outlook_at_paper_acr(avspo, int(prompts), group_size)
    batch = (f"{prompts} prompt{'s' if prompts != 1 else ''} per step (data.train_batch_size) in groups of "
             f"actor_rollout_ref.rollout.n={group_size if group_size is not None else '(not set)'}")
    outlook = (f"at the ACR of the paper's GRPO runs with G = 8 ({low.acr:g}-{high.acr:g}) the trigger opens on "
               f"{share(low.open_steps, high.open_steps)} of steps and augments {share(low.augmented_groups, high.augmented_groups)} "
               f"of the collapsed groups")
    if prompts == 1:
        return "ok", (f"{head}. With {batch} a step's ACR is 0 or 1, so every step whose group collapsed opens it, as in "
                      f"the paper: {outlook}")
    if high.augmented_groups >= AUGMENTED_SHARE_WARNING:
        return "ok", f"{head}. With {batch}, {outlook}"
    return "warn", (f"{head}. With {batch}, {outlook}: this run may train as GRPO on most steps (avspo/triggered says "
                    f"which; a warning comes after stagnation_steps={avspo.stagnation_steps} such steps). {advice}")
