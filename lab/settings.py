"""Everything a lab run depends on besides the method and the seed, in one frozen dataclass.

The command line reads its defaults from here, so they are written once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

# Seeds of a --quick check (`python -m lab --quick`, `python -m lab study --quick`): the fewest that a paired difference needs.
QUICK_SEEDS = 2


@dataclass(frozen=True)
class PolicyShape:
    """Size of the Qwen2 decoder."""

    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 128
    max_positions: int = 32


@dataclass(frozen=True)
class LabSettings:
    """Everything a run depends on besides the method and the seed."""

    # Tier d: the sum of two d-digit numbers. Every tier has thousands of problems (one-digit sums, only 100,
    # would repeat within a run) and every tier is in the warm-up, so every tier is learnable.
    tiers: tuple[int, ...] = (2, 3, 4, 5)
    mix: tuple[float, ...] = (1, 1, 1, 1)  # RL prompt weights per tier (normalised)
    warmup_mix: tuple[float, ...] = (4, 3, 2, 1)  # warm-up weights per tier
    # 750 steps stop the warm-up while it is learning the carry rule: greedy decoding is nearly always right (0.97)
    # but a sampled answer less often (0.78 at temperature 1), a coverage gap for RL to close (docs/evidence/lab.md).
    warmup_steps: int = 750
    warmup_batch: int = 64
    warmup_lr: float = 3e-3
    warmup_grad_clip: float = 1.0
    # Each carry of a warm-up trace is dropped with this probability: the base policy learns to forget carries
    # at about this rate, a coverage gap (pass@k above pass@1) for RL to close. 0: correct traces only (the
    # default; the study's all-fail-dominant and mixed base candidates use 0.35 to 0.15).
    warmup_carry_drop: float = 0.0
    task_seed: int = 0  # held-out split, base-model initialisation and warm-up data
    held_out_per_tier: int | tuple[int, ...] = 200  # one count for every tier, or one per tier
    # 0: every step draws fresh problems (by mix); > 0 (or one count per tier): a fixed training set in shuffled
    # epochs, whose composition is these counts (mix does not apply)
    train_per_tier: int | tuple[int, ...] = 0
    steps: int = 250
    # 0: a run is `steps` steps. > 0: a run ends when it has sampled this many rollouts (a multiple of P x G;
    # a method that samples more per step, DAPO, takes fewer steps and its last step only what is left), and
    # is evaluated at these fractions of the budget (the first step at which its rollouts reach each).
    rollout_budget: int = 0
    eval_fractions: tuple[float, ...] = (0.35, 0.7, 1.0)
    # GRPO's settings, frozen from tuning round 5 (docs/evidence/tuning/tuning.md), where plain GRPO passed every gate on
    # an all-fail-dominant, a mixed and an all-pass-dominant base: 128 prompts x G = 4 per step, lr 1.5e-4 (1/20 of
    # the warm-up's: at 2e-4 and 3e-4 the mixed base's all-fail groups vanished too early for gate G3), a gradient
    # clip of 10 that bound on no update (5 bound on 12% of them at lr 3e-4, round 3).
    prompts: int = 128  # P: prompt groups per step
    group_size: int = 4  # G
    temperature: float = 1.0
    lr: float = 1.5e-4
    weight_decay: float = 0.01
    grad_clip: float = 10.0
    clip_ratio: float = 0.2
    kl_coef: float = 0.0  # weight of verl's low-variance KL to the base policy in the loss (0: no KL term)
    mini_batches: int = 2
    eval_every: int = 50
    eval_samples: int = 4  # k of the held-out avg@k
    eval_temperature: float = 1.0
    dapo_max_gen_batches: int = 4
    shape: PolicyShape = field(default_factory=PolicyShape)

    def __post_init__(self) -> None:
        for name in ("mix", "warmup_mix"):
            weights = getattr(self, name)
            if len(weights) != len(self.tiers):
                raise ValueError(f"{name} has {len(weights)} weights for {len(self.tiers)} tiers {self.tiers}")
            if any(w < 0 for w in weights) or sum(weights) <= 0:
                raise ValueError(f"{name}={weights}: weights must be >= 0 with a positive sum")
        if self.prompts % self.mini_batches:
            raise ValueError(f"prompts={self.prompts} is not divisible by mini_batches={self.mini_batches}")
        if self.group_size < 2:
            raise ValueError(f"group_size={self.group_size}: a group needs at least 2 samples")
        if self.temperature <= 0:
            raise ValueError(f"temperature={self.temperature} must be > 0 for sampling")
        if self.eval_temperature < 0:
            raise ValueError(f"eval_temperature={self.eval_temperature} must be >= 0 (0: greedy)")
        for name, least in (("held_out_per_tier", 1), ("train_per_tier", 0)):
            counts = getattr(self, name)
            counts = (counts,) if isinstance(counts, int) else tuple(counts)
            if len(counts) not in (1, len(self.tiers)) or any(c < least for c in counts):
                raise ValueError(f"{name}={getattr(self, name)}: one count >= {least}, or one per tier {self.tiers}")
        if self.fixed_training_set and sum(self.train_counts()) < self.prompts:
            raise ValueError(f"train_per_tier={self.train_per_tier}: a fixed training set needs at least prompts="
                             f"{self.prompts} problems, so that one step's prompts are distinct")
        batch = self.prompts * self.group_size
        if self.rollout_budget < 0 or self.rollout_budget % batch:
            raise ValueError(f"rollout_budget={self.rollout_budget} must be a non-negative multiple of "
                             f"prompts x group_size = {batch}")
        if not self.eval_fractions or any(not 0 < f <= 1 for f in self.eval_fractions) or \
                list(self.eval_fractions) != sorted(set(self.eval_fractions)) or self.eval_fractions[-1] != 1:
            raise ValueError(f"eval_fractions={self.eval_fractions} must rise strictly within (0, 1] and end at 1")
        if not 0 <= self.warmup_carry_drop < 1:
            raise ValueError(f"warmup_carry_drop={self.warmup_carry_drop} must lie in [0, 1)")
        if self.kl_coef < 0:
            raise ValueError(f"kl_coef={self.kl_coef} must be >= 0")
        for name in ("grad_clip", "warmup_grad_clip"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}={getattr(self, name)} must be > 0")
        for name in ("steps", "prompts", "eval_every", "eval_samples", "dapo_max_gen_batches", "warmup_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 1")

    def train_counts(self) -> tuple[int, ...]:
        """train_per_tier as one count per tier."""
        counts = self.train_per_tier
        return (counts,) * len(self.tiers) if isinstance(counts, int) else tuple(counts)

    @property
    def fixed_training_set(self) -> bool:
        """Prompts come from a fixed training set (train_per_tier > 0), not fresh draws."""
        return sum(self.train_counts()) > 0

    def weights(self, name: str) -> np.ndarray:
        w = np.asarray(getattr(self, name), dtype=np.float64)
        return w / w.sum()

    def to_dict(self) -> dict:
        return asdict(self)
