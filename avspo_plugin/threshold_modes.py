"""The threshold modes, one row each: what the config, the core, the hosts' guards and the doctor read of
``threshold_mode``. It imports nothing of the package (the config and the core both read it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ThresholdMode:
    """One threshold_mode: how it decides Eq. 13's batch condition ACR_t > tau_t, and what is said of it.

    meaning: its entry in threshold_mode's help. augments: whether it ever adds virtual samples. reads_threshold
    (implies augments): whether its trigger opens on ACR_t > tau (else open at every step if it augments, else shut).
    adapts_threshold (implies reads_threshold): whether Eq. 12 moves tau from tau_0 = threshold_init. launch_note: the
    doctor's finding on a run in this mode, formatted with the AVSPO keys and ``batch`` (the step's prompts in words).
    """

    name: str
    meaning: str
    augments: bool
    reads_threshold: bool
    adapts_threshold: bool
    launch_note: str | None

    def __post_init__(self) -> None:
        if self.adapts_threshold and not self.reads_threshold:
            raise ValueError(f"threshold mode {self.name!r} adapts a threshold it does not read: set reads_threshold")
        if self.reads_threshold and not self.augments:
            raise ValueError(f"threshold mode {self.name!r} reads a threshold but never augments: set augments")

    @property
    def can_stay_shut(self) -> bool:
        """Whether its trigger can stay shut on steps with collapsed groups all run long (the inert-trigger warning)."""
        return self.reads_threshold


OPENS_ON_ACR = "virtual samples are added only on steps whose ACR exceeds tau"
# Keyed by name, in the order the config and its help list them.
THRESHOLD_MODES = {
    mode.name: mode
    for mode in (
        ThresholdMode(
            "adaptive",
            "ACR_t > tau_t, tau updated by Eq. 12 after each step (the paper's equations; in a batch of many prompts "
            "ACR_t seldom exceeds tau_t, docs/evidence/study.md)",
            augments=True, reads_threshold=True, adapts_threshold=True,
            launch_note=OPENS_ON_ACR + " (tau_0 = {threshold_init}, moved after each step by Eq. 12 at "
                                       "threshold_lr={threshold_lr})",
        ),
        ThresholdMode(
            "fixed", "ACR_t > threshold_init",
            augments=True, reads_threshold=True, adapts_threshold=False,
            launch_note=OPENS_ON_ACR + " (tau = threshold_init = {threshold_init})",
        ),
        ThresholdMode(
            "always",
            "every step, every collapsed group (the paper's operating point: it trained on one prompt per step)",
            augments=True, reads_threshold=False, adapts_threshold=False,
            launch_note="every collapsed group is augmented at every step, whatever the ACR of {batch} (the paper's "
                        "operating point)",
        ),
        ThresholdMode(
            "never", "measure only (plain GRPO advantages, all metrics): the mode the ACR monitor runs in",
            augments=False, reads_threshold=False, adapts_threshold=False,
            launch_note="no virtual samples are added: the run trains on plain GRPO advantages and logs every "
                        "collapse metric (the ACR monitor beside adv_estimator=grpo does the same)",
        ),
    )
}
PAPER_MODE = "adaptive"  # the paper's Eqs. 11-12: the default, what its README switch use_avspo=True runs
MEASURE_ONLY_MODE = "never"  # no virtual sample, plain GRPO advantages: the ACR monitor runs in it
