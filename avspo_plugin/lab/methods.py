"""The methods the lab compares, and how each turns a batch's rewards into advantages.

GRPO, Dr. GRPO and AVSPO are verl's registered estimators, fetched with
``get_adv_estimator_fn`` and called as verl's trainer calls them
(``verl.trainer.ppo.ray_trainer.compute_advantage``): ``grpo`` with the
``norm_adv_by_std_in_grpo`` flag (the trainer's own branch for it), every other
name with the ``algorithm`` block as ``config``. NGRPO is the lab's own estimator
(:func:`compute_ngrpo_outcome_advantage`), called directly and never registered, so
importing the lab leaves verl's registry as it is. DAPO's dynamic sampling is a
property of the batch, not of the estimator: the training loop drops zero-variance
groups and samples more prompts; the kept groups get GRPO advantages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from ..config import AVSPOConfig, ConfigError
from ..core.advantage import augmented_group_stats, compute_group_advantages, normalized_advantages
from ..core.collapse import effectively_collapsed_groups, group_rate
from ..core.groups import factorize_labels, group_stats, label_array
from ..core.threshold import ThresholdState
from .task import MAX_REWARD, MIN_REWARD

NGRPO_ESTIMATOR = "ngrpo (lab)"
GRPO_EPSILON = 1e-6  # verl's compute_grpo_outcome_advantage default, kept for NGRPO


@dataclass(frozen=True)
class Method:
    """One compared method: an advantage estimator, its ``algorithm`` settings, and whether DAPO sampling is on."""

    name: str
    estimator: str
    description: str
    norm_adv_by_std_in_grpo: bool = True
    avspo: Mapping[str, Any] = field(default_factory=dict)
    dynamic_sampling: bool = False
    loss_agg_mode: str = "token-mean"  # verl's actor.loss_agg_mode for the policy loss
    # algorithm.avspo_selection settings: collapse-aware prompt selection before generation (needs a
    # fixed training set, LabSettings.train_per_tier); empty: every drawn prompt is generated
    selection: Mapping[str, Any] = field(default_factory=dict)

    def algorithm_config(self) -> DictConfig:
        """verl's ``algorithm`` block for this method (what the trainer passes estimators as ``config``)."""
        block: dict[str, Any] = {"adv_estimator": self.estimator, "norm_adv_by_std_in_grpo": self.norm_adv_by_std_in_grpo}
        if self.estimator == "avspo":
            block["avspo"] = {"reward_low": MIN_REWARD, "reward_high": MAX_REWARD, **self.avspo}
        return OmegaConf.create(block)

    def estimator_fn(self) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
        if self.estimator == NGRPO_ESTIMATOR:
            return compute_ngrpo_outcome_advantage
        import verl  # noqa: F401  (loads the verl.plugins entry points, which register avspo)
        from verl.trainer.ppo.core_algos import get_adv_estimator_fn

        return get_adv_estimator_fn(self.estimator)


PRESETS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("grpo", "grpo", "verl GRPO: (r - mean) / (std + 1e-6) per group"),
        Method("drgrpo", "grpo", "Dr. GRPO: verl GRPO with norm_adv_by_std_in_grpo=False (r - mean) and "
               "loss_agg_mode seq-mean-token-sum-norm (as verl's Dr. GRPO recipe)",
               norm_adv_by_std_in_grpo=False, loss_agg_mode="seq-mean-token-sum-norm"),
        Method("ngrpo", NGRPO_ESTIMATOR, "NGRPO: one virtual sample at the maximum reward in every group's mean and std"),
        Method("dapo", "grpo", "DAPO dynamic sampling: drop zero-variance groups, sample more prompts, GRPO advantages",
               dynamic_sampling=True),
        Method("avspo", "avspo", "AVSPO as in the paper: stratified virtual rewards, K by Eq. 9, adaptive threshold"),
        Method("avspo_opposite", "avspo", "AVSPO with the authors' released rule: virtual rewards at the opposite bound",
               avspo={"strategy": "opposite"}),
        Method("avspo_always", "avspo", "AVSPO stratified, every collapsed group augmented at every step",
               avspo={"threshold_mode": "always"}),
    )
}
DEFAULT_METHODS = tuple(PRESETS)

# Methods of the study only (avspo lab study): AVSPO's attribution ablations and prompt selection.
STUDY_EXTRA: dict[str, Method] = {
    m.name: m
    for m in (
        Method("avspo_all_fail", "avspo", "AVSPO as in the paper, augmenting all-fail groups only (apply_to=all_fail)",
               avspo={"apply_to": "all_fail"}),
        Method("avspo_all_pass", "avspo", "AVSPO as in the paper, augmenting all-pass groups only (apply_to=all_pass)",
               avspo={"apply_to": "all_pass"}),
        Method("select_grpo", "grpo", "GRPO with collapse-aware prompt selection (algorithm.avspo_selection defaults)",
               selection={"enable": True}),
        Method("select_avspo", "avspo", "AVSPO as in the paper with collapse-aware prompt selection",
               selection={"enable": True}),
    )
}


def parse_method(spec: str) -> Method:
    """A preset name, or ``avspo:key=value,key=value`` for any algorithm.avspo setting (named by the spec)."""
    if spec in PRESETS:
        return PRESETS[spec]
    if spec in STUDY_EXTRA:
        return STUDY_EXTRA[spec]
    base, _, settings = spec.partition(":")
    if base != "avspo" or not settings:
        raise ValueError(
            f"unknown method {spec!r}: use one of {', '.join([*PRESETS, *STUDY_EXTRA])} or avspo:key=value,... "
            f"(keys: {', '.join(AVSPOConfig.keys())})"
        )
    values: dict[str, Any] = {}
    for item in settings.split(","):
        key, eq, raw = item.partition("=")
        if not eq:
            raise ValueError(f"method {spec!r}: {item!r} is not key=value")
        values[key.strip()] = _parse_value(raw.strip())
    try:
        AVSPOConfig.from_mapping({"reward_low": MIN_REWARD, "reward_high": MAX_REWARD, **values}, where="algorithm.avspo")
    except ConfigError as err:
        raise ValueError(f"method {spec!r}: {err}") from None
    return Method(spec, "avspo", f"AVSPO with {settings}", avspo=values)


def _parse_value(raw: str) -> Any:
    """YAML scalar rules (0.3 is a number, true a boolean), as a verl command-line override reads a value."""
    import yaml

    return yaml.safe_load(raw) if raw else raw


def compute_advantages(
    method: Method, algorithm: DictConfig, token_level_rewards: torch.Tensor, response_mask: torch.Tensor, uids: np.ndarray
) -> torch.Tensor:
    """(B, L) advantages of the method, with the arguments verl's trainer gives that estimator."""
    estimator = method.estimator_fn()
    if method.estimator == "grpo":
        advantages, _ = estimator(
            token_level_rewards=token_level_rewards,
            response_mask=response_mask,
            index=uids,
            norm_adv_by_std_in_grpo=algorithm.norm_adv_by_std_in_grpo,
        )
    else:
        advantages, _ = estimator(
            token_level_rewards=token_level_rewards, response_mask=response_mask, index=uids, config=algorithm
        )
    return advantages


def compute_ngrpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """NGRPO advantages: every group's mean and std include one virtual sample at the maximum reward.

    With rewards R_j and v = MAX_REWARD: A_i = (r_i - mean(R_j U {v})) / (std(R_j U {v}) + 1e-6), unbiased std,
    as verl's GRPO. The virtual sample gets no advantage and no gradient. An all-fail group gets negative
    advantages; an all-pass group stays at zero. token_level_rewards, response_mask: (B, L); index: (B,) uids.
    Returns (advantages, returns), both (B, L), the shape of a verl estimator's result.
    """
    scores = token_level_rewards.sum(dim=-1)
    group_ids, num_groups = factorize_labels(label_array(index), scores.device)
    valid = response_mask.any(dim=-1)
    stats = group_stats(scores.detach().to(torch.float64), group_ids, num_groups, valid, ddof=1)
    one_each = (stats.count > 0).to(torch.int64)
    virtual = torch.full((num_groups, 1), MAX_REWARD, dtype=torch.float64)
    mean, std = augmented_group_stats(stats, one_each, virtual, ddof=1)
    advantages = normalized_advantages(scores.detach(), group_ids, mean, std, GRPO_EPSILON, norm_by_std=True)
    advantages = torch.where(valid, advantages, torch.zeros_like(advantages)).unsqueeze(-1) * response_mask
    return advantages, advantages


def collapse_metrics(scores: torch.Tensor, uids: np.ndarray) -> dict[str, float]:
    """ACR and its all-fail / all-pass split of a batch, by the core's monitor (threshold_mode never).

    scores: (B,) sequence rewards; uids: (B,) group labels.
    """
    monitor = AVSPOConfig(threshold_mode="never", reward_low=MIN_REWARD, reward_high=MAX_REWARD)
    metrics = compute_group_advantages(scores, uids, monitor, ThresholdState.initial(monitor)).metrics
    return {key: metrics[key] for key in ("acr", "acr_all_fail", "acr_all_pass")}


def effective_acr(advantages: torch.Tensor, uids: np.ndarray) -> float:
    """Fraction of groups (>= 2 rows) whose advantages are all below the collapse tolerance.  advantages: (B, L)."""
    group_ids, num_groups = factorize_labels(label_array(uids), advantages.device)
    valid = torch.ones(advantages.shape[0], dtype=torch.bool)
    counts = torch.zeros(num_groups, dtype=torch.int64).index_add_(0, group_ids, torch.ones_like(group_ids))
    multi = counts >= 2
    per_row = advantages.to(torch.float64).abs().amax(dim=-1)
    tolerance = AVSPOConfig().collapse_tol
    return group_rate(effectively_collapsed_groups(per_row, group_ids, valid, multi, tolerance), multi)
