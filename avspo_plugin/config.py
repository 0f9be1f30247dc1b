"""The one AVSPO configuration: every key, its default, its help text and its check.

Hosts read it from their own config systems (verl: ``algorithm.avspo.<key>``;
TRL: fields of the trainer config; OpenRLHF: ``--avspo.<key>`` flags) and build
it with :meth:`AVSPOConfig.from_mapping`, which rejects unknown keys. The
packaged verl YAML and docs/config.md are generated from these fields.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Union

STRATEGIES = ("stratified", "stratified_observed", "opposite", "uniform", "fixed_partial", "exp_decay")
# Strategies whose virtual rewards are placed between reward_low and reward_high.
BOUNDED_STRATEGIES = frozenset(STRATEGIES) - {"stratified_observed"}
THRESHOLD_MODES = ("adaptive", "fixed", "always", "never")
APPLY_TO = ("all", "all_fail", "all_pass")
STD_KINDS = ("unbiased", "population")


def _key(default: Any, help: str, **extra: Any) -> Any:
    """A config field whose help text travels with it (as TRL's GRPOConfig fields do)."""
    metadata = {"help": help, **extra}
    return field(default=default, metadata=metadata)


class ConfigError(ValueError):
    """A config key is unknown or has a value outside its allowed range."""


@dataclass(frozen=True)
class AVSPOConfig:
    """AVSPO and ACR settings. Equation numbers refer to the AVSPO paper (see docs/method.md)."""

    strategy: str = _key(
        "stratified",
        "How virtual rewards are placed (Eq. 10 and the paper's ablation variants). "
        "stratified: r_vk = reward_high - (k-1)/K * (reward_high - reward_low); "
        "stratified_observed: r_vk = max(R_j) * (1 - (k-1)/K), Eq. 10 as printed; "
        "opposite: every virtual reward is the bound farther from the group's value (the authors' released code); "
        "uniform: r_vk ~ U[reward_low, reward_high]; "
        "fixed_partial: r_vk = reward_low + partial * (reward_high - reward_low); "
        "exp_decay: r_vk = reward_low + (reward_high - reward_low) * decay**(k-1).",
        choices=STRATEGIES,
    )
    num_virtual: Union[str, int] = _key(
        "auto",
        "Virtual samples K per augmented group: 'auto' for Eq. 9, K = max(1, min(G_j, ceil(G_j * ACR_t**alpha))), "
        "or a fixed positive integer.",
    )
    alpha: float = _key(0.5, "Exponent of ACR in Eq. 9; in (0, 1].")
    reward_low: float = _key(0.0, "Lowest achievable sequence reward (the all-fail value for binary rewards).")
    reward_high: float = _key(1.0, "Highest achievable sequence reward (the all-pass value); must exceed reward_low.")
    partial: float = _key(0.5, "fixed_partial: fraction of the reward range at which virtual rewards sit; in [0, 1].")
    decay: float = _key(0.5, "exp_decay: ratio between consecutive virtual rewards; in (0, 1].")
    seed: int = _key(
        0,
        "uniform: seed of the generator; step t draws from a generator seeded with (seed, t) (the k-th call "
        "of a step the host splits into several: (seed, t, k)).",
    )
    threshold_mode: str = _key(
        "adaptive",
        "When virtual samples are added. adaptive: ACR_t > tau_t, tau updated by Eq. 12 after each step; "
        "fixed: ACR_t > threshold_init; always: every step; never: monitor only (plain GRPO advantages, all metrics).",
        choices=THRESHOLD_MODES,
    )
    threshold_init: float = _key(0.5, "tau_0 of the adaptive threshold, and the threshold of mode fixed; in [0, 1].")
    threshold_lr: float = _key(0.01, "eta of Eq. 12: step size of the adaptive threshold; >= 0.")
    threshold_min: float = _key(0.1, "Lower clamp of the adaptive threshold; in [0, 1].")
    threshold_max: float = _key(0.9, "Upper clamp of the adaptive threshold; in [threshold_min, 1].")
    collapse_tol: float = _key(
        1e-6, "A group of >= 2 samples is collapsed when its reward std is below this (tau of Eq. 4); > 0."
    )
    apply_to: str = _key(
        "all",
        "Which collapsed groups get virtual samples: all, all_fail (value within 1e-6 of reward_low) "
        "or all_pass (value within 1e-6 of reward_high).",
        choices=APPLY_TO,
    )
    epsilon: float = _key(1e-6, "Added to the std in the advantage denominator (Eq. 14); >= 0.")
    std: str = _key(
        "unbiased",
        "Std of the group statistics: unbiased (divide by n - 1, as verl's GRPO) or population (divide by n, "
        "as the paper's formulas).",
        choices=STD_KINDS,
    )
    norm_by_std: bool = _key(
        True,
        "Divide by the group std. false gives Dr. GRPO advantages (virtual samples still move the mean). "
        "In verl, algorithm.norm_adv_by_std_in_grpo=false also sets it.",
    )
    stagnation_acr: float = _key(
        0.35, "Stagnation warning: ACR above this for more than stagnation_steps consecutive steps; 0 disables."
    )
    stagnation_steps: int = _key(
        50, "Consecutive steps for the stagnation and entropy-collapse warnings; 0 disables both."
    )
    entropy_floor: float = _key(
        0.5, "Entropy-collapse warning: mean token entropy (nats) below this for more than stagnation_steps steps; "
        "0 disables."
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            choices = f.metadata.get("choices")
            value = getattr(self, f.name)
            if choices is not None and value not in choices:
                raise ConfigError(_bad(f.name, value, "one of " + ", ".join(choices)))
        _check_num_virtual(self.num_virtual)
        _check_range("alpha", self.alpha, 0.0, 1.0, low_open=True)
        _check_range("partial", self.partial, 0.0, 1.0)
        _check_range("decay", self.decay, 0.0, 1.0, low_open=True)
        _check_range("threshold_init", self.threshold_init, 0.0, 1.0)
        _check_range("threshold_min", self.threshold_min, 0.0, 1.0)
        _check_range("threshold_max", self.threshold_max, 0.0, 1.0)
        if self.threshold_min > self.threshold_max:
            raise ConfigError(
                f"threshold_min={self.threshold_min!r} is above threshold_max={self.threshold_max!r}: "
                "need threshold_min <= threshold_max"
            )
        if self.threshold_mode == "adaptive" and not self.threshold_min <= self.threshold_init <= self.threshold_max:
            raise ConfigError(
                f"threshold_init={self.threshold_init!r} is outside [threshold_min, threshold_max] = "
                f"[{self.threshold_min!r}, {self.threshold_max!r}], where the adaptive threshold lives"
            )
        _check_range("threshold_lr", self.threshold_lr, 0.0, math.inf)
        _check_range("collapse_tol", self.collapse_tol, 0.0, math.inf, low_open=True)
        _check_range("epsilon", self.epsilon, 0.0, math.inf)
        _check_range("stagnation_acr", self.stagnation_acr, 0.0, 1.0)
        _check_range("entropy_floor", self.entropy_floor, 0.0, math.inf)
        for name in ("reward_low", "reward_high"):
            _check_range(name, getattr(self, name), -math.inf, math.inf)
        if not self.reward_low < self.reward_high:
            raise ConfigError(
                f"reward_low={self.reward_low!r} is not below reward_high={self.reward_high!r}: "
                "need reward_low < reward_high"
            )
        for name in ("seed", "stagnation_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(_bad(name, value, "an integer >= 0"))
        if not isinstance(self.norm_by_std, bool):
            raise ConfigError(_bad("norm_by_std", self.norm_by_std, "true or false"))

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None, where: str = "avspo") -> "AVSPOConfig":
        """Build from a host's key/value block; ``where`` names that block in error messages."""
        values = dict(values or {})
        unknown = sorted(set(values) - set(cls.keys()))
        if unknown:
            raise ConfigError(
                f"unknown key(s) {', '.join(f'{where}.{k}' for k in unknown)}; valid keys: {', '.join(cls.keys())}"
            )
        try:
            return cls(**values)
        except ConfigError as err:
            raise ConfigError(f"{where}: {err}") from None

    def replace(self, **changes: Any) -> "AVSPOConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def bounded(self) -> bool:
        """Whether the strategy places virtual rewards by reward_low/reward_high (so rewards must lie there)."""
        return self.strategy in BOUNDED_STRATEGIES


def _bad(name: str, value: Any, allowed: str) -> str:
    return f"{name}={value!r} is invalid: allowed {allowed}"


def _check_range(name: str, value: Any, low: float, high: float, low_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(_bad(name, value, "a finite number"))
    too_low = value <= low if low_open else value < low
    if too_low or value > high:
        left = "(" if low_open else "["
        raise ConfigError(_bad(name, value, f"a number in {left}{low}, {high}]"))


def _check_num_virtual(value: Any) -> None:
    if value == "auto" and isinstance(value, str):
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(_bad("num_virtual", value, "'auto' or an integer >= 1"))


def config_help() -> list[tuple[str, Any, str]]:
    """(key, default, help) for every key, in declaration order: the source of the docs and the YAML."""
    return [(f.name, f.default, f.metadata["help"]) for f in dataclasses.fields(AVSPOConfig)]
