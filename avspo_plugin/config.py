"""The one AVSPO configuration: every key, its section, default, allowed values and help text, read by each host
through :meth:`ConfigBlock.from_mapping`; the packaged verl YAML and docs/using/config.md are generated from it.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, TypeVar

from .allowed import Allowed, AutoOrInteger, Boolean, Integer, Number, OneOf
from .strategies import STRATEGIES
from .threshold_modes import MEASURE_ONLY_MODE, PAPER_MODE, THRESHOLD_MODES

# The values of the keys that choose collapsed groups by their kind (augmented_collapses, counted_collapses).
COLLAPSE_CHOICES = ("all", "all_fail", "all_pass")
# What the lab measured of acting, rendered from its studies' JSON (tests/test_rendered.py checks both agree): quoted
# by the doctor and analyze, never read to choose a default.
DEFAULT_EVIDENCE = json.loads(Path(__file__).with_name("default_evidence.json").read_text(encoding="utf-8"))

logger = logging.getLogger(__name__)
# Names changed before the package was first published, {earlier name: name now}, for every surface (a config key, a
# TRL field, an OpenRLHF flag, a state file's field): an earlier name is refused (:func:`earlier_name_error`).
EARLIER_NAMES: Mapping[str, str] = {"apply_to": "augmented_collapses", "monitor": "warnings"}


def earlier_name_error(given: Iterable[str], names: Collection[str], spell: Callable[[str], str] = str) -> str | None:
    """The error for the names of ``given`` that are earlier names of ``names`` (a surface's own), each spelled as the
    surface writes it (``spell``); None when there is none."""
    earlier = [name for name in given if EARLIER_NAMES.get(name) in names]
    if not earlier:
        return None
    return "; ".join(f"{spell(name)} is now {spell(EARLIER_NAMES[name])}: rename it" for name in earlier)


# Sections of the keys, as TRL's GRPOConfig groups its fields (docs/using/config.md and the YAML follow them).
REWARDS_AND_COLLAPSE = "Rewards and collapse"
VIRTUAL_SAMPLES = "Virtual samples"
THRESHOLD = "Threshold"
STATISTICS = "Group statistics"
EARLY_WARNINGS = "Early warnings"
MONITOR = "Monitor"

# Bounds of the numeric keys; each key's help says why.
REWARD_LIMIT = 1e30  # hi - lo, the virtual rewards and Eq. 14's std stay finite in float32 (max 3.4e38)
MAX_VIRTUAL = 1024
MAX_SEED = 2**32 - 1  # np.random.seed, which verl, TRL and OpenRLHF seed with, takes seeds below 2**32
MAX_STEPS = 1_000_000
MIN_EPSILON = 1e-9  # the smallest epsilon a supported host uses (OpenRLHF's group_norm)
_FINITE = "so that the reward range, the virtual rewards and their std stay finite in float32"
_FRACTION = "ACR is a fraction of groups"


def _key(default: Any, section: str, help: str | Callable[[], str], allowed: Allowed, why: str = "") -> Any:
    """A config field with its section, allowed values and help (a function when written from a table, so that it
    says what the table holds when read); ``why`` explains a numeric range (:func:`key_help`)."""
    metadata = {"help": help, "why": why, "section": section, "allowed": allowed}
    if isinstance(allowed, OneOf):
        metadata["choices"] = tuple(allowed.choices)
    return field(default=default, metadata=metadata)


def key_help(key: dataclasses.Field) -> str:
    """The help text of a field made by :func:`_key`, a number's or an integer's ending with its range."""
    help, allowed, why = key.metadata["help"], key.metadata["allowed"], key.metadata["why"]
    help = help() if callable(help) else help
    if isinstance(allowed, (Number, Integer)):
        help = f"{help} Allowed: {allowed.wording()}" + (f" ({why})." if why else ".")
    return help


class ConfigError(ValueError):
    """A config key is unknown or has a value outside its allowed range."""


class ConfigBlock:
    """What every config dataclass here shares: keys checked against their declared values, built from a host's
    key/value block with errors naming the key; keys listed section by section in the order of ``SECTIONS``."""

    SECTIONS: ClassVar[tuple[str, ...]] = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> ConfigBlock:
        # An earlier name given to the constructor: Python's "unexpected keyword argument" would name no way out.
        earlier = sorted(name for name in kwargs if EARLIER_NAMES.get(name) in cls.keys())
        if earlier:
            raise ConfigError("; ".join(
                f"{cls.__name__}({name}=...): {name} is the earlier name of {EARLIER_NAMES[name]}: write "
                f"{cls.__name__}({EARLIER_NAMES[name]}={kwargs[name]!r})" for name in earlier
            ))  # fmt: skip
        return super().__new__(cls)

    def __post_init__(self) -> None:
        for f in self.ordered_fields():  # each key against its values, then the rules that join keys
            value = getattr(self, f.name)
            allowed = f.metadata["allowed"].problem(value)
            if allowed is not None:
                raise ConfigError(f"{f.name}={value!r} is invalid: allowed {allowed}")
        self.check_rules()

    def check_rules(self) -> None:
        """The rules that join keys (a block with such rules extends this)."""

    @classmethod
    def ordered_fields(cls) -> list[dataclasses.Field]:
        return sorted(dataclasses.fields(cls), key=lambda f: cls.SECTIONS.index(f.metadata["section"]))

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in cls.ordered_fields())

    @classmethod
    def from_mapping(cls: type[Block], values: Mapping[str, Any] | None, where: str | None = None) -> Block:
        """Build from a host's key/value block (None: every default); ``where`` names it in errors (default BLOCK)."""
        where = cls.BLOCK if where is None else where
        if values is not None and not isinstance(values, Mapping):
            raise ConfigError(f"{where} must be a block of keys ({', '.join(cls.keys())}), got {values!r}")
        values = dict(values or {})
        earlier = earlier_name_error(values, cls.keys(), lambda key: f"{where}.{key}")
        if earlier is not None:
            raise ConfigError(earlier)
        unknown = sorted(set(values) - set(cls.keys()))
        if unknown:
            raise ConfigError(
                f"unknown key(s) {', '.join(f'{where}.{k}' for k in unknown)}; valid keys: {', '.join(cls.keys())}"
            )
        try:
            return cls(**values)
        except ConfigError as err:
            raise ConfigError(f"{where}: {err}") from None

    def replace(self: Block, **changes: Any) -> Block:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


Block = TypeVar("Block", bound=ConfigBlock)


@dataclass(frozen=True)
class CollapseSettings(ConfigBlock):
    """The reward range and the collapse tolerance, declared once for AVSPO and the monitor."""

    reward_low: float = _key(
        0.0, REWARDS_AND_COLLAPSE, "Lowest achievable sequence reward (the all-fail value for binary rewards).",
        Number(-REWARD_LIMIT, REWARD_LIMIT), _FINITE,
    )
    reward_high: float = _key(
        1.0, REWARDS_AND_COLLAPSE, "Highest achievable sequence reward (the all-pass value); must exceed reward_low.",
        Number(-REWARD_LIMIT, REWARD_LIMIT), _FINITE,
    )
    collapse_tol: float = _key(
        1e-6, REWARDS_AND_COLLAPSE,
        "A group of >= 2 samples is collapsed when its reward std is below this collapse tolerance (Eq. 4).",
        Number(0.0, REWARD_LIMIT, low_open=True),
        "a std is >= 0, so 0 would find no collapse at all; the upper limit is the one of reward_low and "
        "reward_high",
    )

    def check_rules(self) -> None:
        super().check_rules()
        if not self.reward_low < self.reward_high:
            raise ConfigError(
                f"reward_low={self.reward_low!r} is not below reward_high={self.reward_high!r}: "
                "need reward_low < reward_high"
            )


@dataclass(frozen=True)
class EarlyWarningSettings(ConfigBlock):
    """The early warnings (stagnation, entropy collapse), declared once for AVSPO and the monitor: logged only."""

    stagnation_acr: float = _key(
        0.35, EARLY_WARNINGS,
        "Stagnation warning: ACR above this for more than stagnation_steps consecutive steps; 0 disables.",
        Number(0.0, 1.0), _FRACTION,
    )
    stagnation_steps: int = _key(
        50, EARLY_WARNINGS,
        lambda: "Consecutive steps for the stagnation and entropy-collapse warnings, and for the inert-trigger "
                "warning (threshold_mode "
                + " or ".join(mode.name for mode in THRESHOLD_MODES.values() if mode.can_stay_shut)
                + ": no group augmented on this many steps with collapsed groups); 0 disables all three.",
        Integer(0, MAX_STEPS), "a million steps is longer than any RL run",
    )
    entropy_floor: float = _key(
        0.5, EARLY_WARNINGS,
        "Entropy-collapse warning: mean token entropy (nats) below this for more than stagnation_steps steps; "
        "0 disables.",
        Number(0.0, 20.0),
        "an entropy above 20 nats needs a vocabulary of more than e**20 = 485 million tokens: a higher floor "
        "would fire on every run",
    )


@dataclass(frozen=True)
class AVSPOConfig(CollapseSettings, EarlyWarningSettings):
    """AVSPO and ACR settings. Equation numbers refer to the AVSPO paper (see docs/method/method.md)."""

    BLOCK: ClassVar[str] = "avspo"  # the block's name in error messages when the host gives none
    SECTIONS: ClassVar[tuple[str, ...]] = (
        REWARDS_AND_COLLAPSE, VIRTUAL_SAMPLES, THRESHOLD, STATISTICS, EARLY_WARNINGS
    )

    # Virtual samples: how many, and where their rewards sit (Eqs. 9-10).
    strategy: str = _key(
        "stratified", VIRTUAL_SAMPLES,
        lambda: "How virtual rewards are placed (Eq. 10 and the paper's ablation variants). "
                + "; ".join(f"{strategy.name}: {strategy.equation}" for strategy in STRATEGIES.values()) + ".",
        OneOf(STRATEGIES),
    )
    num_virtual: str | int = _key(
        "auto", VIRTUAL_SAMPLES,
        "Virtual samples K per augmented group: 'auto' for Eq. 9, K = max(1, min(G_j, ceil(G_j * ACR_t**alpha))), "
        "or a number: a constant K.",
        AutoOrInteger(1, MAX_VIRTUAL),
        "Eq. 9 never gives more than the group's size, and verl's rollout.n is at most a few dozen in practice; "
        "the bound leaves room for 16 times G = 64; the virtual rewards are stored packed, 8 bytes per virtual "
        "sample: at most 8 bytes per row with 'auto' (K <= G_j), K x 8 bytes per augmented group with a constant K "
        "(8 KB at this bound), whatever the group sizes",
    )
    alpha: float = _key(
        0.5, VIRTUAL_SAMPLES, "Exponent of ACR in Eq. 9.", Number(0.0, 1.0, low_open=True),
        "the paper's range: 0 would make ACR**alpha = 1, K = G_j whatever the collapse",
    )
    partial: float = _key(
        0.5, VIRTUAL_SAMPLES, "fixed_partial: fraction of the reward range at which virtual rewards sit.",
        Number(0.0, 1.0), "a fraction of the range: virtual rewards stay between reward_low and reward_high",
    )
    decay: float = _key(
        0.5, VIRTUAL_SAMPLES, "exp_decay: ratio between consecutive virtual rewards.", Number(0.0, 1.0, low_open=True),
        "the virtual rewards fall from reward_high towards reward_low and stay between them",
    )
    seed: int = _key(
        0, VIRTUAL_SAMPLES,
        "uniform: seed of the generator; step t draws from a generator seeded with (seed, t) (the k-th call "
        "of a step the host splits into several: (seed, t, k)).",
        Integer(0, MAX_SEED), "the seeds np.random.seed takes, with which verl, TRL and OpenRLHF seed their runs",
    )
    augmented_collapses: str = _key(
        "all", VIRTUAL_SAMPLES,
        "Which collapsed groups get virtual samples: all, all_fail (value within 1e-6 of reward_low) "
        "or all_pass (value within 1e-6 of reward_high).",
        OneOf(COLLAPSE_CHOICES),
    )
    # Threshold: when virtual samples are added (Eqs. 11-12).
    threshold_mode: str = _key(
        PAPER_MODE, THRESHOLD,
        lambda: "When virtual samples are added. "
                + "; ".join(f"{mode.name}: {mode.meaning}" for mode in THRESHOLD_MODES.values())
                + ". The default is the paper's trigger (adaptive): adv_estimator=avspo runs the paper's AVSPO. To "
                "measure collapse without acting, run the ACR monitor beside any estimator "
                "(algorithm.avspo_monitor.enable=true).",
        OneOf(THRESHOLD_MODES),
    )
    threshold_init: float = _key(
        0.5, THRESHOLD, "tau_0 of the adaptive threshold (between threshold_min and threshold_max), and the threshold "
        "of mode fixed.", Number(0.0, 1.0), _FRACTION,
    )
    threshold_lr: float = _key(
        0.01, THRESHOLD, "eta of Eq. 12: step size of the adaptive threshold.", Number(0.0, 1.0),
        "at 1 tau jumps to ACR_t in one step; beyond 1 Eq. 12 overshoots ACR_t instead of tracking it",
    )
    threshold_min: float = _key(
        0.1, THRESHOLD, "Lower clamp of the adaptive threshold.", Number(0.0, 1.0), _FRACTION
    )
    threshold_max: float = _key(
        0.9, THRESHOLD, "Upper clamp of the adaptive threshold; at least threshold_min.", Number(0.0, 1.0),
        _FRACTION,
    )
    # Group statistics (Eqs. 13-14).
    epsilon: float = _key(
        1e-6, STATISTICS, "Added to the std in the advantage denominator (Eq. 14).",
        Number(MIN_EPSILON, 1.0),
        "a collapsed group that is not augmented has std 0: epsilon = 0 gives it 0/0 = NaN advantages, and a "
        "tiny one turns the rounding of its float32 mean into huge ones; 1e-9 is OpenRLHF's, the smallest of "
        "the hosts (verl 1e-6, TRL 1e-4); above 1 it would outweigh the std of any reward in [0, 1] "
        "(at most about 0.7)",
    )
    std: str = _key(
        "unbiased", STATISTICS,
        "Std of the group statistics: unbiased (divide by n - 1, as verl's GRPO) or population (divide by n, "
        "as the paper's formulas).",
        OneOf(("unbiased", "population")),
    )
    norm_by_std: bool = _key(
        True, STATISTICS,
        "Divide by the group std. false gives Dr. GRPO advantages (virtual samples still move the mean). "
        "In verl, algorithm.norm_adv_by_std_in_grpo=false also sets it.",
        Boolean(),
    )

    def check_rules(self) -> None:
        super().check_rules()
        if self.threshold_min > self.threshold_max:
            raise ConfigError(
                f"threshold_min={self.threshold_min!r} is above threshold_max={self.threshold_max!r}: "
                "need threshold_min <= threshold_max"
            )
        adapts = THRESHOLD_MODES[self.threshold_mode].adapts_threshold
        if adapts and not self.threshold_min <= self.threshold_init <= self.threshold_max:
            raise ConfigError(
                f"threshold_init={self.threshold_init!r} is outside [threshold_min, threshold_max] = "
                f"[{self.threshold_min!r}, {self.threshold_max!r}], where the adaptive threshold lives"
            )

    @property
    def bounded(self) -> bool:
        """Whether the strategy places virtual rewards by reward_low/reward_high (so rewards must lie there)."""
        return STRATEGIES[self.strategy].bounded

    @property
    def places_virtual_rewards_in_bounds(self) -> bool:
        """Whether virtual rewards may be placed between reward_low and reward_high (the monitor places none)."""
        return self.bounded and THRESHOLD_MODES[self.threshold_mode].augments

    def as_monitor(self) -> AVSPOConfig:
        """These settings as the ACR monitor measures with them: ``threshold_mode`` never."""
        return self.replace(threshold_mode=MEASURE_ONLY_MODE)


@dataclass(frozen=True)
class NotGiven:
    """The default of a host's field or flag for an AVSPO key, so that a value the user writes (even the default) is
    told from none; shown as the default it stands for (in argparse's and HfArgumentParser's help)."""

    default: Any

    def __repr__(self) -> str:
        return repr(self.default)

    def __str__(self) -> str:
        return str(self.default)


@dataclass(frozen=True)
class InertKey:
    """A key the user gave that cannot act: it acts only where ``needs`` holds ``acting`` (in words, after its name),
    and the config has ``needs`` = ``actual``."""

    key: str
    value: Any
    needs: str
    acting: str
    actual: Any

    def message(self, name: Callable[[str], str] = str) -> str:
        """The warning, each key named as the host spells it (``name``: algorithm.avspo.<key>, avspo_<key>, ...)."""
        needs = name(self.needs)
        return (f"{name(self.key)}={self.value!r} has no effect while {needs}={self.actual!r}: it acts only with "
                f"{needs}{self.acting}; remove it, or change {needs}")


class _Acts(NamedTuple):
    """One condition a key needs to act: ``key`` holds one of ``values`` (``wording`` says which, after its name)."""

    key: str
    values: Collection[Any]
    wording: str


def _needs(key: str, *values: str) -> _Acts:
    return _Acts(key, values, "=" + (values[0] if len(values) == 1 else f"{', '.join(values[:-1])} or {values[-1]}"))


def _modes_that(attribute: str) -> _Acts:
    return _needs("threshold_mode", *(name for name, mode in THRESHOLD_MODES.items() if getattr(mode, attribute)))


def acting_conditions() -> dict[str, tuple[_Acts, ...]]:
    """What each AVSPO key that does not always act needs of the others, in the order checked; read from
    THRESHOLD_MODES as it stands."""
    augments, warnings_on = _modes_that("augments"), _Acts("stagnation_steps", range(1, MAX_STEPS + 1), " >= 1")
    return {
        "strategy": (augments,), "num_virtual": (augments,), "augmented_collapses": (augments,),
        "alpha": (augments, _needs("num_virtual", "auto")),
        "partial": (augments, _needs("strategy", "fixed_partial")), "decay": (augments, _needs("strategy", "exp_decay")),
        "seed": (augments, _needs("strategy", "uniform")),
        "threshold_init": (_modes_that("reads_threshold"),),
        **dict.fromkeys(("threshold_lr", "threshold_min", "threshold_max"), (_modes_that("adapts_threshold"),)),
        "stagnation_acr": (warnings_on,), "entropy_floor": (warnings_on,),
    }  # fmt: skip


def inert_keys(config: AVSPOConfig, given: Iterable[str]) -> list[InertKey]:
    """The keys of ``given`` (the keys the user wrote) that cannot act under ``config``'s other settings, in key
    order: each host warns of them at launch, and the doctor."""
    given, conditions, inert = set(given), acting_conditions(), []
    for key in AVSPOConfig.keys():
        unmet = next((acts for acts in conditions.get(key, ()) if getattr(config, acts.key) not in acts.values), None)
        if key in given and unmet is not None:
            inert.append(InertKey(key, getattr(config, key), unmet.key, unmet.wording, getattr(config, unmet.key)))
    return inert


# The inert-key warnings already given in this process: a host reads its config at every step.
_WARNED_INERT: set[str] = set()


def warn_inert_keys(
    config: AVSPOConfig, given: Iterable[str], log: logging.Logger = logger, name: Callable[[str], str] = str
) -> None:
    """One warning per key of ``given`` that cannot act (:func:`inert_keys`), once per process, on ``log``."""
    for message in (inert.message(name) for inert in inert_keys(config, given)):
        if message not in _WARNED_INERT:
            _WARNED_INERT.add(message)
            log.warning(message)


@dataclass(frozen=True)
class MonitorConfig(CollapseSettings, EarlyWarningSettings):
    """ACR beside any advantage estimator: the collapse metrics and early warnings, advantages untouched. Its keys
    other than ``enable`` are AVSPOConfig's; it measures with :meth:`avspo_config`."""

    BLOCK: ClassVar[str] = "avspo_monitor"
    SECTIONS: ClassVar[tuple[str, ...]] = (MONITOR, REWARDS_AND_COLLAPSE, EARLY_WARNINGS)

    enable: bool = _key(
        False, MONITOR,
        "Log ACR, its all-fail / all-pass split, near collapse, wasted rollouts and the early warnings as avspo/* "
        "with any advantage estimator, without changing an advantage (not needed with adv_estimator=avspo, which "
        "logs them itself). Off by default.",
        Boolean(),
    )

    def avspo_config(self) -> AVSPOConfig:
        """The AVSPO settings the monitor measures with: its shared keys, ``threshold_mode=never``."""
        return AVSPOConfig(**{key: getattr(self, key) for key in self.keys() if key != "enable"}).as_monitor()


# How close (difflib's ratio) a name must be to one of the plugin's to be read as a misspelling of it.
MISSPELLING_RATIO = 0.75


def misspelt_name(name: str, names: Iterable[str]) -> str | None:
    """The one of ``names`` that ``name`` (not itself one of them) most likely misspells, or None: the closest when
    ``name`` differs only in case, ``-`` or ``_``, or is at least MISSPELLING_RATIO alike (``avpso``); else, for a
    name starting with ``avspo`` (the plugin's), the longest of ``names`` it starts with, else the closest."""
    names = list(names)
    if name in names:
        return None
    folded = name.lower().replace("-", "_")
    closeness = {known: difflib.SequenceMatcher(None, folded, known).ratio() for known in names}
    closest = max(names, key=closeness.get)
    if closeness[closest] >= MISSPELLING_RATIO or folded.replace("_", "") in {n.replace("_", "") for n in names}:
        return closest
    if folded.startswith("avspo"):
        return max((known for known in names if folded.startswith(known)), key=len, default=closest)
    return None


def meant_key(block: str, key: str, keys: Collection[str]) -> str | None:
    """The one of ``keys`` that ``key``, after ``block`` (``avspo`` or close to it, else None), stands for: its name now
    if it is an earlier name, else the closest."""
    if block != "avspo" and misspelt_name(block, ["avspo"]) is None:
        return None
    if EARLIER_NAMES.get(key) in keys:
        return EARLIER_NAMES[key]
    return max(keys, key=lambda known: difflib.SequenceMatcher(None, key.lower(), known).ratio())


def config_help(config_class: type[ConfigBlock] = AVSPOConfig) -> list[tuple[str, Any, str]]:
    """(key, default, help) for every key, in order: the source of the docs and the YAML."""
    return [(f.name, f.default, key_help(f)) for f in config_class.ordered_fields()]


def config_sections(config_class: type[ConfigBlock] = AVSPOConfig) -> list[tuple[str, list[tuple[str, Any, str]]]]:
    """(section, its keys as :func:`config_help` gives them) for each section of the class, in order."""
    fields = config_class.ordered_fields()
    return [(section, [(f.name, f.default, key_help(f)) for f in fields if f.metadata["section"] == section])
            for section in config_class.SECTIONS]
