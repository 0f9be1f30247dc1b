"""What a run's batch means for AVSPO's trigger, said at launch by the doctor.

The adaptive and fixed modes add virtual samples only on a step whose ACR (the share of its groups that are collapsed)
exceeds the threshold tau. With B prompts per step, each of whose groups of G responses collapses with probability
p (the expected ACR), a step's count of collapsed groups is Binomial(B, p): the trigger opens on the share
P(Binomial(B, p) > tau * B) of steps. With one prompt per step that is p itself, every collapsed step (ACR is 0 or 1,
and 1 exceeds any tau below 1); with many prompts ACR_t stays near p, and a p below tau almost never opens it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from avspo_plugin.config import DEFAULT_EVIDENCE, AVSPOConfig
from avspo_plugin.threshold_modes import THRESHOLD_MODES

# ACR of GRPO runs in the paper (G = 8); the doctor states the trigger at both ends when the run's own is not known.
PAPER_GRPO_ACR = (0.28, 0.45)
# Below this share of collapsed groups augmented at the top of PAPER_GRPO_ACR, the doctor warns that the run may
# train as GRPO on most steps.
AUGMENTED_SHARE_WARNING = 0.5


@dataclass(frozen=True)
class TriggerOutlook:
    """At an expected ACR: the share of steps on which the trigger opens, and the share of collapsed groups those
    steps augment (every collapsed group of an open step is augmented)."""

    acr: float
    open_steps: float
    augmented_groups: float


def binomial_tail(trials: int, probability: float, above: float) -> float:
    """P(Binomial(trials, probability) > above), summed in log space (a batch of thousands of prompts)."""
    first = math.floor(above) + 1
    if first > trials:
        return 0.0
    if probability <= 0.0 or probability >= 1.0:
        return float(probability >= 1.0)
    log_p, log_q = math.log(probability), math.log1p(-probability)
    return min(1.0, sum(math.exp(math.lgamma(trials + 1) - math.lgamma(k + 1) - math.lgamma(trials - k + 1)
                                 + k * log_p + (trials - k) * log_q) for k in range(first, trials + 1)))


def trigger_outlook(prompts: int, group_size: int | None, acr: float, threshold: float) -> TriggerOutlook:
    """The trigger at ``threshold`` for ``prompts`` groups of ``group_size`` responses per step (None: not known), each
    collapsed with probability ``acr``. A group of one response has no spread to lose: nothing collapses."""
    if group_size is not None and group_size < 2:
        return TriggerOutlook(acr, 0.0, 0.0)
    open_steps = binomial_tail(prompts, acr, threshold * prompts)
    # E[collapsed groups on open steps] / E[collapsed groups] = P(Binomial(B - 1, p) > tau * B - 1): a given group
    # is collapsed and the other B - 1 bring the count above tau * B.
    augmented = binomial_tail(prompts - 1, acr, threshold * prompts - 1) if acr > 0 else 0.0
    return TriggerOutlook(acr, open_steps, augmented)


def mode_note(avspo: AVSPOConfig, prompts: int | None) -> str:
    """What the launch check says of the run's threshold mode (its row's launch_note) for ``prompts`` prompts per
    step (data.train_batch_size; None: not set)."""
    batch = f"{prompts} prompts per step (data.train_batch_size)" if prompts else "a step's prompts"
    mode = THRESHOLD_MODES[avspo.threshold_mode]
    return f"algorithm.avspo.threshold_mode={mode.name}: " + mode.launch_note.format(batch=batch, **avspo.to_dict())


def trigger_note(avspo: AVSPOConfig, group_size: int | None, prompts: int | None) -> tuple[str, str]:
    """(level, text) of the doctor's finding on a mode whose trigger can stay shut (adaptive, fixed) for this batch."""
    tau = avspo.threshold_init
    head = mode_note(avspo, prompts)
    advice = ("algorithm.avspo.threshold_mode=always augments every collapsed group at every step, in any batch "
              "(docs/method/method.md). " + DEFAULT_EVIDENCE["acting_evidence"])
    if not prompts:
        return "warn", (f"{head}; data.train_batch_size is not set, so how often that happens is not known here: with "
                        f"many prompts per step seldom. {advice}")
    group_size = None if group_size is None else int(group_size)
    low, high = (trigger_outlook(int(prompts), group_size, acr, tau) for acr in PAPER_GRPO_ACR)
    batch = (f"{prompts} prompt{'s' if prompts != 1 else ''} per step (data.train_batch_size) in groups of "
             f"actor_rollout_ref.rollout.n={group_size if group_size is not None else '(not set)'}")
    outlook = (f"at the ACR of the paper's GRPO runs with G = 8 ({low.acr:g}-{high.acr:g}) the trigger opens on "
               f"{_share(low.open_steps, high.open_steps)} of steps and augments {_share(low.augmented_groups, high.augmented_groups)} "
               f"of the collapsed groups")
    if prompts == 1:
        return "ok", (f"{head}. With {batch} a step's ACR is 0 or 1, so every step whose group collapsed opens it, as in "
                      f"the paper: {outlook}")
    if high.augmented_groups >= AUGMENTED_SHARE_WARNING:
        return "ok", f"{head}. With {batch}, {outlook}"
    return "warn", (f"{head}. With {batch}, {outlook}: this run may train as GRPO on most steps (avspo/triggered says "
                    f"which; a warning comes after stagnation_steps={avspo.stagnation_steps} such steps). {advice}")


def _share(low: float, high: float) -> str:
    return f"{_percent(low)} to {_percent(high)}" if _percent(low) != _percent(high) else _percent(low)


def _percent(share: float) -> str:
    if 0 < share < 0.005:
        return "under 1%"
    if 0.995 < share < 1:
        return "over 99%"
    return f"{share:.0%}"
