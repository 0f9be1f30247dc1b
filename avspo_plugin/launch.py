"""What a run will do, said at launch (the doctor, each host's first log line): whether it acts or only measures, how
often its trigger opens at the run's batch, and the evidence.

The adaptive and fixed modes act only on a step whose ACR exceeds tau. With B prompts per step, each group collapsed
with probability p, a step's count of collapsed groups is Binomial(B, p): the trigger opens on P(Binomial(B, p) >
tau * B) of steps (p itself at B = 1; with many prompts, seldom while p < tau).
"""

from __future__ import annotations

import math
import sys
from typing import NamedTuple

from .config import DEFAULT_EVIDENCE, AVSPOConfig
from .figures import share
from .threshold_modes import THRESHOLD_MODES

# ACR of GRPO runs in the paper (G = 8, Table 1); the outlook is stated at both ends when the run's own is not known.
PAPER_GRPO_ACR = (0.28, 0.45)
# The paper's Table 1: mean accuracy over its math benchmarks, AVSPO minus GRPO, on six Qwen2.5 models.
PAPER_GAIN = ("The paper reports +3.7 to +6.1 points of mean math accuracy over GRPO on six Qwen2.5 models "
              "(0.5B to 14B, one prompt per step).")
AB_RECIPE = ("To find out on your own model, run the one-GPU A/B with a few seeds (SEEDS=3 bash recipes/run_ab_1gpu.sh, "
             "docs/using/recipes.md section 0).")


class TriggerOutlook(NamedTuple):
    """At an expected ACR: the share of steps the trigger opens on, and of collapsed groups those steps augment."""

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


def outlook_at_paper_acr(avspo: AVSPOConfig, prompts: int, group_size: int | None) -> tuple[TriggerOutlook, ...]:
    """The trigger's outlook at tau_0 for both ends of PAPER_GRPO_ACR."""
    return tuple(trigger_outlook(prompts, group_size, acr, avspo.threshold_init) for acr in PAPER_GRPO_ACR)


def what_runs(avspo: AVSPOConfig, prompts: int | None, group_size: int | None) -> str:
    """Whether the run acts or measures, its trigger, and how often that opens at ``prompts`` prompts per step in
    groups of ``group_size`` (either None: not known)."""
    mode = THRESHOLD_MODES[avspo.threshold_mode]
    if not mode.augments:
        return (f"measuring only (threshold_mode={mode.name}): no virtual samples, plain GRPO advantages, every "
                "avspo/* metric logged")
    paper = " (the paper's AVSPO)" if avspo.threshold_mode == AVSPOConfig().threshold_mode else ""
    head = f"acting{paper}: virtual samples in collapsed groups' mean and std, threshold_mode={mode.name}"
    if not mode.reads_threshold:
        return f"{head}, every collapsed group at every step"
    tau = (f"ACR is above tau (tau_0 = {avspo.threshold_init:g}, moved by Eq. 12)" if mode.adapts_threshold
           else f"ACR is above {avspo.threshold_init:g}")
    if not prompts:
        return f"{head}, on steps whose {tau}; prompts per step not known, so how often is not said"
    low, high = outlook_at_paper_acr(avspo, int(prompts), group_size)
    return (f"{head}, on steps whose {tau}: at {prompts} prompt{'s' if prompts != 1 else ''} per step and the paper's "
            f"GRPO ACR ({low.acr:g}-{high.acr:g}) it opens on {share(low.open_steps, high.open_steps)} of steps at "
            "tau_0 (avspo/triggered logs each step)")


def evidence_sentence() -> str:
    """The paper's gain, the lab's finding at its strength, and how to find out on one's own model."""
    return f"{PAPER_GAIN} {DEFAULT_EVIDENCE['acting_evidence']} {AB_RECIPE}"


def announce(avspo: AVSPOConfig, prompts: int | None, group_size: int | None, host: str) -> str:
    """Print, once per process, what the run will do and the evidence (the host's first log line of AVSPO)."""
    line = f"avspo ({host}): {what_runs(avspo, prompts, group_size)}. {evidence_sentence()}"
    if line not in _ANNOUNCED:
        _ANNOUNCED.add(line)
        print(line, file=sys.stderr, flush=True)
    return line


_ANNOUNCED: set[str] = set()  # a host configures its session at every (re)start of a trainer
