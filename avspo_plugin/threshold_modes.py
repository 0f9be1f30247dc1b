"""The threshold modes, one row each: what every part that acts on ``threshold_mode`` reads.

The config accepts and documents the modes of THRESHOLD_MODES, the core (core/threshold.py, the session, the early
warnings) runs them by their row, and the hosts' guards and the doctor say of them what their row says. A mode whose
trigger the fields below describe is added by one row here. The table sits below the config and the core, which
both read it, so it imports nothing of the package.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ThresholdMode:
    """One threshold_mode: how it decides Eq. 13's batch condition ACR_t > tau_t, and what is said of it."""

    name: str
    # Its entry in threshold_mode's help (docs/using/config.md, the packaged verl YAML, the hosts' option help).
    meaning: str
    # Whether it ever adds virtual samples; the measure-only mode does not.
    augments: bool
    # Whether its trigger opens on ACR_t > tau; one that does not is open at every step if it augments, else shut.
    reads_threshold: bool
    # Whether Eq. 12 moves tau after each step from tau_0 = threshold_init; one that does not reads threshold_init.
    adapts_threshold: bool
    # The launch check's finding (avspo doctor) on a run in this mode, formatted with the AVSPO keys and ``batch``
    # (the step's prompts in words); None: nothing beyond the settings.
    launch_note: str | None

    def __post_init__(self) -> None:
        if self.adapts_threshold and not self.reads_threshold:
            raise ValueError(f"threshold mode {self.name!r} adapts a threshold it does not read: set reads_threshold")
        if self.reads_threshold and not self.augments:
            raise ValueError(f"threshold mode {self.name!r} reads a threshold but never augments: set augments")

    @property
    def can_stay_shut(self) -> bool:
        """Whether its trigger can stay shut on steps with collapsed groups, the whole run long (the inert-trigger
        warning watches for that); always opens on every step, and never is shut by design."""
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
# The trigger of the paper's equations (Eqs. 11-12): the default, and what the paper's README switch use_avspo=True
# runs.
PAPER_MODE = "adaptive"
# The mode that measures and never acts: collapse measured, no virtual sample, every advantage plain GRPO's. The ACR
# monitor runs in it.
MEASURE_ONLY_MODE = "never"
