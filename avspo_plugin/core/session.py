"""One process's AVSPO run state: threshold state, early-warning streaks and metrics not yet logged. One step of
Eq. 12 is one host step however many estimator calls it takes (docs/method/method.md, decision 8).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..config import AVSPOConfig, earlier_name_error
from ..state_files import check_fields
from ..threshold_modes import THRESHOLD_MODES
from .advantage import AVSPOResult, compute_group_advantages, compute_token_advantages
from .collapse import off_bound_message
from .early_warnings import INERT_TRIGGER, WARNING_FLAGS, EarlyWarnings
from .inputs import TensorLike, as_config
from .metrics import aggregate_metrics, filtered_group_metrics
from .threshold import COUNT, THRESHOLD_FIELDS, ThresholdState, advance, threshold_in_force

# Version of the dict that state_dict() returns and checkpoints hold.
STATE_FORMAT = 1
# What state_dict() holds besides its format; "warnings" holds the early-warning streaks.
STATE_KEYS = ("threshold", "warnings", "logged_steps")
# The settings a threshold state is made under, saved beside it ("settings"): those that move tau (Eq. 12) and
# decide K (Eq. 9).
STATE_SETTINGS = ("threshold_mode", "threshold_init", "threshold_lr", "threshold_min", "threshold_max", "num_virtual",
                  "alpha")
# The type and range of every field of state_dict(), checked on load.
STATE_FIELDS = {
    "format": int,
    "threshold": (None, THRESHOLD_FIELDS),
    "settings": (None, {name: AVSPOConfig.__dataclass_fields__[name].metadata["allowed"] for name in STATE_SETTINGS}),
    "warnings": {name: {"streak": COUNT, "fired_step": (None, COUNT)}
                for name in (*WARNING_FLAGS, INERT_TRIGGER)},
    "logged_steps": COUNT,
}

logger = logging.getLogger(__name__)


class AVSPOSession:
    """Config in force, threshold state, early warnings and pending metrics of one training loop; thread-safe.

    log: where fired warnings go (the host adapter's logger); metric_names: the core metrics :meth:`pop_metrics`
    reports (None: all; the warning flags always), e.g. :data:`~.metrics.MONITOR_METRICS` for the ACR monitor.
    """

    def __init__(self, log: logging.Logger = logger, metric_names: tuple[str, ...] | None = None) -> None:
        self.log = log
        self.metric_names = metric_names
        self._lock = threading.RLock()
        self.reset()

    def reset(self) -> None:
        """Forget everything: no config, no threshold state, no streaks, no pending metrics."""
        with self._lock:
            self.config: AVSPOConfig | None = None
            self.state: ThresholdState | None = None
            # The STATE_SETTINGS the state was made under (None: unknown, an older state), and where it came from.
            self._made_under: dict[str, Any] | None = None
            self._state_origin = "of this process"
            # Its limits become the run's at the first configure; streaks survive a resume through state_dict.
            self.warnings = EarlyWarnings(AVSPOConfig())
            # Metrics of this step's calls (open step), and of closed steps not yet logged.
            self._pending: list[dict[str, float]] = []
            self._closed: list[dict[str, float]] = []
            # Whether the last closed step's entropy was observed (a host may close a step before it knows it).
            self._entropy_observed = True
            self._logged_steps = 0
            self._off_bound_warned = False

    def configure(self, config: AVSPOConfig | Mapping[str, Any]) -> None:
        """Put ``config`` (an AVSPOConfig, or a mapping of its keys) in force (:meth:`_fit_state_to_config`)."""
        config = as_config(config)
        with self._lock:
            if config == self.config:
                return
            self.warnings.reconfigure(config)
            self.config = config
            self._fit_state_to_config()

    def _fit_state_to_config(self) -> None:
        """The threshold state made fit for the config in force: fresh when None or made under other STATE_SETTINGS
        (warning of the change); made under unknown settings (an older state), its tau clipped into the range."""
        config, state = self.config, self.state
        if config is None:
            return
        settings = state_settings(config)
        made_under, self._made_under = self._made_under, settings
        if state is None or (made_under is not None and made_under != settings):
            if state is not None:
                changed = [key for key in STATE_SETTINGS if made_under[key] != settings[key]]
                self.log.warning(
                    "AVSPO threshold state %s was made under %s; the config in force has %s: the threshold starts "
                    "over (tau = threshold_init = %s, step t = 0), as in a fresh run with this config; the warning "
                    "streaks are kept",
                    self._state_origin, ", ".join(f"{key}={made_under[key]!r}" for key in changed),
                    ", ".join(f"{key}={settings[key]!r}" for key in changed), config.threshold_init,
                )  # fmt: skip
            self.state, self._state_origin = ThresholdState.initial(config), "of this process"
            return
        if made_under is not None or not THRESHOLD_MODES[config.threshold_mode].adapts_threshold:
            return
        tau = min(config.threshold_max, max(config.threshold_min, state.tau))
        if tau != state.tau:
            self.log.warning(
                "AVSPO threshold tau=%s lies outside [threshold_min, threshold_max] = [%s, %s] (a resumed run "
                "whose range changed): clipped to %s",
                state.tau, config.threshold_min, config.threshold_max, tau,
            )
            self.state = replace(state, tau=tau)

    def group_advantages(
        self, scores: TensorLike, index: Any, config: AVSPOConfig | Mapping[str, Any], valid: TensorLike | None = None,
        response_mask: TensorLike | None = None,
    ) -> AVSPOResult:
        """AVSPO advantages of sequence scores (B,) grouped by index (B,), one call of the open step
        (as :func:`~.advantage.compute_group_advantages` takes them)."""
        return self.step_with(config, lambda config, state: compute_group_advantages(
            scores, index, config, state, valid=valid, response_mask=response_mask, call_in_step=len(self._pending)
        ))

    def token_advantages(
        self, token_level_rewards: TensorLike, response_mask: TensorLike, index: Any,
        config: AVSPOConfig | Mapping[str, Any],
    ) -> AVSPOResult:
        """AVSPO advantages (B, L) of outcome rewards placed on tokens (B, L), one call of the open step."""
        return self.step_with(config, lambda config, state: compute_token_advantages(
            token_level_rewards, response_mask, index, config, state, call_in_step=len(self._pending)
        ))

    def step_with(
        self, config: AVSPOConfig, compute: Callable[[AVSPOConfig, ThresholdState], AVSPOResult]
    ) -> AVSPOResult:
        """``compute(config, state)`` from the state in force, kept as one call of the open step (for hosts whose
        conventions wrap the core call: TRL's ``scale_rewards``, unscorable completions)."""
        with self._lock:
            self.configure(config)
            return self._keep(compute(self.config, self.state))

    def observe_filtered_groups(self, value_counts: Mapping[float, int], group_size: int) -> None:
        """Count, in the open step, collapsed groups of ``group_size`` samples that the host's filtering evicted
        before any call saw them ({shared value: number of groups}): :func:`~.metrics.filtered_group_metrics`."""
        with self._lock:
            if self.config is None or self.state is None:
                return
            metrics = filtered_group_metrics(
                value_counts, group_size, self.config.reward_low, self.config.reward_high,
                threshold_in_force(self.config, self.state),
            )
            if metrics:
                self._pending.append(metrics)

    def _keep(self, result: AVSPOResult) -> AVSPOResult:
        self._pending.append(result.metrics)
        if result.off_bound_groups and not self._off_bound_warned:
            # Rewards on a narrower scale than [reward_low, reward_high] collapse at neither bound: say so once.
            self._off_bound_warned = True
            config = self.config
            augments = THRESHOLD_MODES[config.threshold_mode].augments and config.augmented_collapses == "all"
            self.log.warning(off_bound_message(
                result.off_bound_groups, int(result.metrics["groups"]), result.off_bound_value,
                config.reward_low, config.reward_high, augments,
            ))  # fmt: skip
        return result

    def close_step(self, step: int | None = None, entropy: float | None = None) -> None:
        """End the open step: Eq. 12 once over its pooled calls, the warnings fed; a no-op when none is open. step: the
        host's step number (default: the count of closed steps); entropy: the policy's mean token entropy, if known."""
        with self._lock:
            if not self._pending:
                return
            pending, self._pending = self._pending, []
            metrics = aggregate_metrics(pending)
            if metrics["samples"] > 0:
                self.state = advance(self.config, self.state, metrics["acr"], metrics["reward_mean"])
            self._logged_steps += 1
            flags, fired = self.warnings.observe(
                self._logged_steps if step is None else step, acr=metrics["acr"], entropy=entropy,
                augmented=metrics.get("augmented_groups"), threshold=metrics.get("threshold"),
            )
            self._entropy_observed = entropy is not None
            metrics.update(flags)
            self._closed.append(metrics)
        self._warn(fired)

    def pop_metrics(self, step: int | None = None, entropy: float | None = None) -> dict[str, float]:
        """The metrics of the steps since the last pop folded into one logged step, plus warning flags, after closing
        the open step (:meth:`close_step`); {} when nothing was computed and no entropy of an AVSPO run was given."""
        with self._lock:
            self.close_step(step=step, entropy=entropy)
            closed, self._closed = self._closed, []
            fired: list[str] = []
            if closed:
                metrics = aggregate_metrics(closed)
                if entropy is not None and not self._entropy_observed:
                    flags, fired = self.warnings.observe(self._logged_steps if step is None else step, entropy=entropy)
                    metrics.update(flags)
                    self._entropy_observed = True
            elif entropy is not None and self.config is not None:
                # Entropy alone counts only in an AVSPO run: a host may load the plugin beside other estimators.
                self._logged_steps += 1
                metrics, fired = self.warnings.observe(self._logged_steps if step is None else step, entropy=entropy)
            else:
                return {}
        self._warn(fired)
        if self.metric_names is None:
            return metrics
        return {name: value for name, value in metrics.items() if name in self.metric_names or name in WARNING_FLAGS}

    def observe_entropy(self, entropy: float) -> dict[str, float]:
        """The entropy-collapse flag after the policy entropy of the step last popped (for hosts that learn it only
        after logging the step); {} outside an AVSPO run."""
        with self._lock:
            if self.state is None:
                return {}
            flags, fired = self.warnings.observe(self._logged_steps, entropy=entropy)
        self._warn(fired)
        return flags

    def _warn(self, fired: list[str]) -> None:
        for message in fired:
            self.log.warning(message)

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps: the threshold state (tau, J_{t-1}, t) and the settings it was made under
        (STATE_SETTINGS), the warning streaks, the logged steps."""
        with self._lock:
            return {
                "format": STATE_FORMAT,
                "threshold": None if self.state is None else self.state.state_dict(),
                "settings": None if self.state is None else self._made_under,
                "warnings": self.warnings.state_dict(),
                "logged_steps": self._logged_steps,
            }

    def load_state_dict(self, state: Mapping[str, Any], source: str = "the state loaded") -> None:
        """Resume from :meth:`state_dict`'s dict; pending metrics are dropped, the config in force is kept
        (:meth:`_fit_state_to_config`; source: where the state was read, named in its warning)."""
        state = checked_state(state)
        with self._lock:
            saved = state["threshold"]
            self.state = None if saved is None else ThresholdState.from_state_dict(saved)
            self._made_under, self._state_origin = state["settings"], f"read from {source}"
            self.warnings.load_state_dict(state["warnings"])
            self._logged_steps = int(state["logged_steps"])
            self._pending, self._closed, self._entropy_observed = [], [], True
            self._fit_state_to_config()


def checked_state(state: Any) -> Mapping[str, Any]:
    """``state`` (a :meth:`AVSPOSession.state_dict` read back) once its keys, format and the type and range
    of every field are checked (:data:`STATE_FIELDS`); ValueError names the field, its value and what it may hold."""
    if not isinstance(state, Mapping):
        raise ValueError(f"avspo checkpoint state should be an object, found {type(state).__name__}")
    earlier = earlier_name_error(state, STATE_KEYS, repr)
    if earlier is not None:
        raise ValueError(f"avspo checkpoint state: {earlier}")
    missing = [key for key in STATE_KEYS if key not in state]
    if missing:
        raise ValueError(f"avspo checkpoint state lacks {sorted(missing)}; it has {sorted(state)}")
    # States written before the format number existed hold exactly format 1's keys; before the inert-trigger
    # warning existed, its streak starts from nothing; before states recorded their settings, those are unknown.
    state = {"format": STATE_FORMAT, "settings": None, **state}
    if isinstance(state.get("warnings"), Mapping) and INERT_TRIGGER not in state["warnings"]:
        state["warnings"] = {**state["warnings"], INERT_TRIGGER: {"streak": 0, "fired_step": None}}
    if state["format"] != STATE_FORMAT:
        raise ValueError(
            f"avspo checkpoint state has format {state['format']!r}; this version of avspo_plugin reads "
            f"format {STATE_FORMAT}"
        )
    check_fields(state, STATE_FIELDS, "avspo checkpoint state")
    return state


def state_settings(config: AVSPOConfig) -> dict[str, Any]:
    """The STATE_SETTINGS of ``config``, as a state made under it records them."""
    return {key: getattr(config, key) for key in STATE_SETTINGS}
