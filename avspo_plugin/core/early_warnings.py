"""Early warnings of a live run: stagnation (ACR stays high), entropy collapse (entropy stays low) and an inert
trigger (AVSPO augments no group while groups collapse, so the run is GRPO). Each fires once per run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config import AVSPOConfig
from ..threshold_modes import THRESHOLD_MODES


@dataclass
class StreakWarning:
    """Fires once when a signal stays past ``limit`` (above it, or below) for more than ``patience`` consecutive
    steps; a limit or patience of 0 disables it. Once fired, ``flag`` stays 1."""

    name: str
    limit: float
    patience: int
    above: bool
    streak: int = 0
    fired_step: int | None = None

    @property
    def enabled(self) -> bool:
        return self.limit > 0 and self.patience > 0

    @property
    def flag(self) -> float:
        return 0.0 if self.fired_step is None else 1.0

    def observe(self, value: float, step: int) -> bool:
        """Count one step's value; True exactly on the step the warning fires."""
        past = value > self.limit if self.above else value < self.limit
        self.streak = self.streak + 1 if past else 0
        if self.fired_step is None and self.streak > self.patience:
            self.fired_step = step
            return True
        return False

    def state_dict(self) -> dict[str, Any]:
        return {"streak": self.streak, "fired_step": self.fired_step}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.streak = int(state["streak"])
        fired = state["fired_step"]
        self.fired_step = None if fired is None else int(fired)


# The flags EarlyWarnings.observe returns, each 1 from the step its warning fired.
WARNING_FLAGS = ("stagnation", "entropy_collapse")
# The streak of steps on which AVSPO could have augmented collapsed groups and augmented none: a warning, no flag.
INERT_TRIGGER = "inert_trigger"


class EarlyWarnings:
    """The early warnings of AVSPOConfig: ``stagnation`` (ACR), ``entropy_collapse`` (entropy), the inert trigger."""

    def __init__(self, config: AVSPOConfig) -> None:
        stagnation, entropy_collapse = WARNING_FLAGS
        self.stagnation = StreakWarning(stagnation, 0.0, 0, above=True)
        self.entropy_collapse = StreakWarning(entropy_collapse, 0.0, 0, above=False)
        # Observed with 1.0 on a step that had collapsed groups and augmented none, 0.0 on one that augmented.
        self.inert_trigger = StreakWarning(INERT_TRIGGER, 0.5, 0, above=True)
        self.all = (self.stagnation, self.entropy_collapse, self.inert_trigger)
        self.reconfigure(config)

    def reconfigure(self, config: AVSPOConfig) -> None:
        """Take the limits of ``config``, keeping the streaks counted so far."""
        self.stagnation.limit, self.stagnation.patience = config.stagnation_acr, config.stagnation_steps
        self.entropy_collapse.limit, self.entropy_collapse.patience = config.entropy_floor, config.stagnation_steps
        # Only where the trigger can stay shut.
        can_stay_shut = THRESHOLD_MODES[config.threshold_mode].can_stay_shut
        self.inert_trigger.patience = config.stagnation_steps if can_stay_shut else 0
        self.config = config

    def observe(
        self, step: int, acr: float | None = None, entropy: float | None = None,
        augmented: float | None = None, threshold: float | None = None,
    ) -> tuple[dict[str, float], list[str]]:
        """One logged step -> (flags of the enabled warnings that got a value, warnings fired now). acr, augmented
        (share of groups augmented), threshold (tau in force), entropy (nats): None when not computed or logged."""
        flags: dict[str, float] = {}
        fired: list[str] = []
        for warning, value, message in ((self.stagnation, acr, stagnation_message),
                                        (self.entropy_collapse, entropy, entropy_collapse_message)):
            if value is not None and warning.enabled:
                if warning.observe(value, step):
                    fired.append(message(warning, step, value))
                flags[warning.name] = warning.flag
        # A step without collapsed groups had nothing to augment: its streak neither grows nor ends.
        counted = acr is not None and acr > 0 and augmented is not None and self.inert_trigger.enabled
        if counted and self.inert_trigger.observe(1.0 if augmented == 0 else 0.0, step):
            fired.append(inert_trigger_message(self.inert_trigger, self.config, step, acr, threshold))
        return flags, fired

    def state_dict(self) -> dict[str, Any]:
        return {warning.name: warning.state_dict() for warning in self.all}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for warning in self.all:
            warning.load_state_dict(state[warning.name])


def stagnation_message(warning: StreakWarning, step: int, acr: float) -> str:
    return (
        f"AVSPO stagnation at step {step}: ACR (fraction of groups whose rewards are all equal) has been above "
        f"stagnation_acr={warning.limit} for {warning.streak} consecutive steps (more than "
        f"stagnation_steps={warning.patience}); now {acr:.3f}. Most prompts give no learning signal, so most "
        f"rollouts are wasted: the data may be too easy or too hard for the policy. This says nothing of how the run "
        f"will end (in the lab's sweep, runs where it fired ended no worse: docs/evidence/sweep.md). The stagnation "
        f"flag is 1 from this step on."
    )


def entropy_collapse_message(warning: StreakWarning, step: int, entropy: float) -> str:
    return (
        f"Entropy collapse at step {step}: the policy's mean token entropy has been below "
        f"entropy_floor={warning.limit} nats for {warning.streak} consecutive logged steps (more than "
        f"stagnation_steps={warning.patience}); now {entropy:.3f}. Samples of a group will soon all agree, "
        f"so groups collapse. The entropy_collapse flag is 1 from this step on."
    )


def inert_trigger_message(warning: StreakWarning, config: AVSPOConfig, step: int, acr: float,
                          threshold: float | None) -> str:
    tau = "" if threshold is None else f" tau={threshold:.3f}"
    return (
        f"AVSPO inert at step {step}: virtual samples augmented no group on {warning.streak} consecutive steps with "
        f"collapsed groups (more than stagnation_steps={warning.patience}); ACR {acr:.3f} did not exceed the "
        f"threshold{tau} (threshold_mode={config.threshold_mode}, threshold_init={config.threshold_init}), so the "
        f"run has been GRPO on those steps. A batch of many prompts seldom has ACR above tau: the paper trained on "
        f"one prompt per step, where every collapsed group was augmented. threshold_mode=always augments every "
        f"collapsed group at every step (docs/method/method.md, the paper's operating point)."
    )
