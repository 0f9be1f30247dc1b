"""The methods the lab compares, and how each turns a batch's rewards into advantages.

GRPO and Dr. GRPO are verl's registered estimator, fetched with ``get_adv_estimator_fn`` and called as
verl's trainer calls it (``verl.trainer.ppo.ray_trainer.compute_advantage``), with the
``norm_adv_by_std_in_grpo`` flag (the trainer's own branch for it). AVSPO is the core's
:class:`~avspo_plugin.core.AVSPOSession`, one per run, with the config the verl adapter reads from the same
``algorithm`` block: what the registered ``avspo`` estimator computes, without the adapter's process state
(tests/lab/test_methods.py checks the two agree). NGRPO, the random-variance control and
the RL-ZVP baseline are the lab's own estimators (:func:`compute_ngrpo_outcome_advantage`,
:func:`compute_random_variance_advantage`, :func:`compute_zvp_advantage`), called directly
and never registered, so importing the lab leaves verl's registry as it is. DAPO's dynamic sampling is a
property of the batch, not of the estimator: the training loop drops zero-variance
groups and samples more prompts; the kept groups get GRPO advantages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import yaml
from omegaconf import DictConfig, OmegaConf
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, get_adv_estimator_fn

from avspo_plugin.config import AVSPOConfig, ConfigError
from avspo_plugin.core import AVSPOSession
from avspo_plugin.core.advantage import augmented_group_stats, compute_group_advantages, normalized_advantages
from avspo_plugin.core.collapse import collapse_kinds, collapsed_groups, effectively_collapsed_groups, group_rate
from avspo_plugin.core.groups import factorize_labels, group_stats, label_array
from avspo_plugin.core.threshold import ThresholdState
from avspo_plugin.verl.run_config import avspo_config_from_algorithm

from .settings import LabSettings
from .task import MAX_REWARD, MIN_REWARD

NGRPO_ESTIMATOR = "ngrpo (lab)"
RANDOM_VARIANCE_ESTIMATOR = "random variance (lab)"
ZVP_ESTIMATOR = "rl-zvp (lab)"
GRPO_EPSILON = 1e-6  # verl's compute_grpo_outcome_advantage default, kept for NGRPO
ZVP_SCALE = 0.1  # alpha of the RL-ZVP baseline: the lab's choice, not tuned
# The paper trained on one prompt per step, so its batch ACR was 1 whenever a group collapsed and Eq. 9 gave K = G:
# the lab's arms at that operating point fix K to the lab's G.
PAPER_K = LabSettings().group_size


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
    # What the study's manipulation check measures (study.manipulation): the collapsed groups the method claims to
    # give a signal ("all", "all_fail", "all_pass"), None for no claim.
    acts_on: str | None = None

    def algorithm_config(self) -> DictConfig:
        """verl's ``algorithm`` block for this method (what the trainer passes estimators as ``config``)."""
        block: dict[str, Any] = {"adv_estimator": self.estimator, "norm_adv_by_std_in_grpo": self.norm_adv_by_std_in_grpo}
        if self.estimator == "avspo":
            block["avspo"] = {"reward_low": MIN_REWARD, "reward_high": MAX_REWARD, **self.avspo}
        return OmegaConf.create(block)

    def estimator_fn(self) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
        if self.estimator in LAB_ESTIMATORS:
            return LAB_ESTIMATORS[self.estimator]
        return get_adv_estimator_fn(self.estimator)


PRESETS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("grpo", "grpo", "verl GRPO: (r - mean) / (std + 1e-6) per group"),
        Method("drgrpo", "grpo", "Dr. GRPO: verl GRPO with norm_adv_by_std_in_grpo=False (r - mean) and "
               "loss_agg_mode seq-mean-token-sum-norm (as verl's Dr. GRPO recipe)",
               norm_adv_by_std_in_grpo=False, loss_agg_mode="seq-mean-token-sum-norm"),
        Method("ngrpo", NGRPO_ESTIMATOR, "NGRPO: one virtual sample at the maximum reward in every group's mean and std",
               acts_on="all_fail"),
        Method("dapo", "grpo", "DAPO dynamic sampling: drop zero-variance groups, sample more prompts, GRPO advantages",
               dynamic_sampling=True),
        Method("avspo", "avspo", "AVSPO as in the paper and as algorithm.adv_estimator=avspo runs it: stratified "
               "virtual rewards, K by Eq. 9, adaptive threshold",
               avspo={"threshold_mode": "adaptive"}, acts_on="all"),
        Method("avspo_opposite", "avspo", "AVSPO with the authors' released rule: virtual rewards at the opposite bound",
               avspo={"threshold_mode": "adaptive", "strategy": "opposite"}, acts_on="all"),
        Method("avspo_always", "avspo", "AVSPO stratified, K by Eq. 9 at the batch ACR, every collapsed group augmented "
               "at every step (threshold_mode=always)", avspo={"threshold_mode": "always"}, acts_on="all"),
    )
}
# What `python -m lab` (make demo) compares by default: GRPO, the usual fix for collapse (DAPO), and AVSPO as
# algorithm.adv_estimator=avspo runs it (the paper's method at its defaults); the studies compare more.
DEFAULT_METHODS = ("grpo", "dapo", "avspo")


def setting_label(method: Method) -> str:
    """The method's name and what it sets, as the demo's tables and plots show it: the estimator (with DAPO's dynamic
    sampling), and for AVSPO its threshold_mode, whether that is the default, and every other key it changes."""
    if method.estimator != "avspo":
        parts = ["the lab's own estimator" if method.estimator in LAB_ESTIMATORS else f"adv_estimator={method.estimator}"]
        if not method.norm_adv_by_std_in_grpo:
            parts.append("norm_adv_by_std_in_grpo=False")
        if method.dynamic_sampling:
            parts.append("+ dynamic sampling")
    else:
        default, config = AVSPOConfig(), AVSPOConfig.from_mapping(dict(method.avspo), where="algorithm.avspo")
        parts = [f"threshold_mode={config.threshold_mode}"]
        changed = {key: value for key, value in method.avspo.items() if getattr(default, key) != value}
        if not changed:
            parts.append("the default")
        if config.threshold_mode == "adaptive":
            parts.append("the paper's trigger")
        parts += [f"{key}={value}" for key, value in changed.items() if key != "threshold_mode"]
    return f"{method.name} ({', '.join(parts)})"

# Methods of the study only (python -m lab study): AVSPO's ablations and the controls.
STUDY_EXTRA: dict[str, Method] = {
    m.name: m
    for m in (
        Method("avspo_all_fail", "avspo", "AVSPO as in the paper, augmenting all-fail groups only "
               "(augmented_collapses=all_fail)",
               avspo={"threshold_mode": "adaptive", "augmented_collapses": "all_fail"}, acts_on="all_fail"),
        Method("avspo_all_pass", "avspo", "AVSPO as in the paper, augmenting all-pass groups only "
               "(augmented_collapses=all_pass)",
               avspo={"threshold_mode": "adaptive", "augmented_collapses": "all_pass"}, acts_on="all_pass"),
        Method("avspo_always_all_fail", "avspo", "avspo_always on all-fail groups only: K by Eq. 9 at the batch ACR, every "
               "all-fail group augmented at every step (augmented_collapses=all_fail)",
               avspo={"threshold_mode": "always", "augmented_collapses": "all_fail"}, acts_on="all_fail"),
        Method("avspo_always_all_pass", "avspo", "avspo_always on all-pass groups only: K by Eq. 9 at the batch ACR, every "
               "all-pass group augmented at every step (augmented_collapses=all_pass)",
               avspo={"threshold_mode": "always", "augmented_collapses": "all_pass"}, acts_on="all_pass"),
        Method("avspo_fixed_threshold", "avspo", "AVSPO with a fixed threshold: augment when ACR_t > 0.5 (tau_0), "
               "no Eq. 12 update", avspo={"threshold_mode": "fixed"}, acts_on="all"),
        Method("avspo_fixed_k", "avspo", "AVSPO with K = 2 virtual samples in every augmented group instead of "
               "Eq. 9's K (2: the fewest with which stratified rewards reach below the maximum)",
               avspo={"threshold_mode": "adaptive", "num_virtual": 2}, acts_on="all"),
        Method("avspo_paper_point", "avspo", f"AVSPO at the paper's operating point: stratified, K = G = {PAPER_K} "
               "virtual samples in every collapsed group at every step (one-prompt steps give ACR_t = 1)",
               avspo={"threshold_mode": "always", "num_virtual": PAPER_K}, acts_on="all"),
        Method("avspo_paper_point_all_fail", "avspo", "avspo_paper_point on all-fail groups only",
               avspo={"threshold_mode": "always", "num_virtual": PAPER_K, "augmented_collapses": "all_fail"},
               acts_on="all_fail"),
        Method("avspo_paper_point_all_pass", "avspo", "avspo_paper_point on all-pass groups only",
               avspo={"threshold_mode": "always", "num_virtual": PAPER_K, "augmented_collapses": "all_pass"},
               acts_on="all_pass"),
        Method("avspo_released", "avspo", "the authors' released rule: one virtual sample at the opposite bound (K = 1) "
               "in every collapsed group at every step",
               avspo={"threshold_mode": "always", "num_virtual": 1, "strategy": "opposite"}, acts_on="all"),
        Method("random_variance", RANDOM_VARIANCE_ESTIMATOR, "control: GRPO with random artificial variance in every "
               "collapsed group (phantom advantages: zero mean, unit spread, no information)", acts_on="all"),
        Method("rlzvp", ZVP_ESTIMATOR, f"RL-ZVP-style baseline: collapsed groups get an entropy-scaled signed "
               f"advantage (alpha {ZVP_SCALE}), other groups GRPO's", acts_on="all"),
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
    return yaml.safe_load(raw) if raw else raw


def compute_advantages(
    method: Method, algorithm: DictConfig, token_level_rewards: torch.Tensor, response_mask: torch.Tensor,
    uids: np.ndarray, entropy: torch.Tensor | None = None, step: int = 0, seed: int = 0,
    session: AVSPOSession | None = None,
) -> torch.Tensor:
    """(B, L) advantages of the method, with the arguments verl's trainer gives that estimator.

    AVSPO: one call of the run's ``session``'s open step (its threshold state carries from step to step). The lab's
    own estimators also get what they need beyond verl's arguments: token entropies (B, L) (RL-ZVP) and the run's
    seed and step (the random-variance control's draws).
    """
    if method.estimator == "avspo":
        if session is None:
            raise ValueError(f"{method.name}: AVSPO needs the run's session (its threshold state)")
        return session.token_advantages(token_level_rewards, response_mask, uids,
                                        avspo_config_from_algorithm(algorithm)).advantages
    estimator = method.estimator_fn()
    if method.estimator in LAB_ESTIMATORS:
        advantages, _ = estimator(token_level_rewards=token_level_rewards, response_mask=response_mask, index=uids,
                                  config=algorithm, entropy=entropy, step=step, seed=seed)
    else:
        advantages, _ = estimator(
            token_level_rewards=token_level_rewards,
            response_mask=response_mask,
            index=uids,
            norm_adv_by_std_in_grpo=algorithm.norm_adv_by_std_in_grpo,
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
    virtual = torch.full((int(one_each.sum()),), MAX_REWARD, dtype=torch.float64)  # packed: one per group with a row
    mean, std = augmented_group_stats(stats, one_each, virtual, ddof=1)
    advantages = normalized_advantages(scores.detach(), group_ids, mean, std, GRPO_EPSILON, norm_by_std=True)
    advantages = torch.where(valid, advantages, torch.zeros_like(advantages)).unsqueeze(-1) * response_mask
    return advantages, advantages


def collapsed_rows(scores: torch.Tensor, index: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per row: whether its group (>= 2 rows) is collapsed (reward std < the core's collapse tolerance), all-fail,
    all-pass.  scores: (B,) -> three (B,) bool."""
    group_ids, num_groups = factorize_labels(label_array(index), scores.device)
    stats = group_stats(scores.detach().to(torch.float64), group_ids, num_groups, torch.ones_like(scores, dtype=torch.bool),
                        ddof=1)
    collapsed = collapsed_groups(stats, AVSPOConfig().collapse_tol)
    all_fail, all_pass = collapse_kinds(collapsed, stats, MIN_REWARD, MAX_REWARD)
    return collapsed[group_ids], all_fail[group_ids], all_pass[group_ids]


def compute_random_variance_advantage(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None, config: Any = None,
    step: int = 0, seed: int = 0, **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The random-variance control: GRPO on rewards with random artificial variance in collapsed groups.

    r~_i = r_i + e_i * 1[group j of i is collapsed], e_i ~ N(0, 1) drawn from a generator seeded by (seed, step);
    A = verl's GRPO advantage of r~: (r~_i - mean_j r~) / (std_j r~ + 1e-6), unbiased std. A collapsed group thus
    gets e_i standardised within the group: zero mean, unit spread and no information about the task (the
    "phantom" advantages a virtual sample could inject); other groups get GRPO's advantages unchanged.
    token_level_rewards, response_mask: (B, L); index: (B,) uids. Returns (advantages, returns), both (B, L).
    """
    scores = token_level_rewards.sum(dim=-1)
    collapsed, _, _ = collapsed_rows(scores, index)
    generator = torch.Generator().manual_seed(int(np.random.SeedSequence([seed, step, 7]).generate_state(1)[0]))
    noise = torch.randn(scores.shape, generator=generator, dtype=scores.dtype)
    noisy = torch.where(collapsed, scores + noise, scores)
    # verl's GRPO reads the sequence reward as the token rewards' sum: the noise goes on the first token.
    shifted = token_level_rewards.clone()
    shifted[:, 0] += noisy - scores
    return compute_grpo_outcome_advantage(shifted, response_mask, index, epsilon=GRPO_EPSILON)


def compute_zvp_advantage(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None, config: Any = None,
    entropy: torch.Tensor | None = None, **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The RL-ZVP-style baseline: collapsed (zero-variance) groups get an entropy-scaled signed advantage.

    With H_it the detached token entropy of response i at token t and alpha = ZVP_SCALE:
      all-pass group: A_it = alpha * H_it                     (reward correctness, most on uncertain tokens)
      all-fail group: A_it = -alpha * (max_k H_ik - H_it)     (penalise errors, most on confident tokens)
    max over the response's own tokens; other groups get verl's GRPO advantage. This is the shaping of RL-ZVP
    (Le et al., 2025) as the lab reads it; the lab's alpha is its own choice.
    token_level_rewards, response_mask, entropy: (B, L); index: (B,) uids. Returns (advantages, returns), (B, L).
    """
    if entropy is None:
        raise ValueError("the RL-ZVP baseline needs the responses' token entropies (entropy=, shape (B, L))")
    advantages, _ = compute_grpo_outcome_advantage(token_level_rewards, response_mask, index, epsilon=GRPO_EPSILON)
    _, all_fail, all_pass = collapsed_rows(token_level_rewards.sum(dim=-1), index)
    mask = response_mask.bool()
    h = entropy.detach().to(advantages.dtype)
    h_max = torch.where(mask, h, torch.full_like(h, -torch.inf)).amax(dim=-1, keepdim=True)
    shaped = torch.where(all_pass.unsqueeze(-1), ZVP_SCALE * h, torch.zeros_like(h))
    shaped = torch.where(all_fail.unsqueeze(-1), -ZVP_SCALE * (h_max - h), shaped)
    collapsed = (all_fail | all_pass).unsqueeze(-1)
    advantages = torch.where(collapsed, shaped, advantages) * response_mask
    return advantages, advantages


LAB_ESTIMATORS: dict[str, Callable[..., tuple[torch.Tensor, torch.Tensor]]] = {
    NGRPO_ESTIMATOR: compute_ngrpo_outcome_advantage,
    RANDOM_VARIANCE_ESTIMATOR: compute_random_variance_advantage,
    ZVP_ESTIMATOR: compute_zvp_advantage,
}


def collapse_metrics(scores: torch.Tensor, uids: np.ndarray) -> dict[str, float]:
    """ACR, its all-fail / all-pass split and the lone-success / lone-failure shares of a batch, by the core's
    monitor (threshold_mode never).

    scores: (B,) sequence rewards; uids: (B,) group labels.
    """
    monitor = AVSPOConfig(threshold_mode="never", reward_low=MIN_REWARD, reward_high=MAX_REWARD)
    metrics = compute_group_advantages(scores, uids, monitor, ThresholdState.initial(monitor)).metrics
    return {key: metrics[key]
            for key in ("acr", "acr_all_fail", "acr_all_pass", "near_collapse_success", "near_collapse_failure")}


def effective_collapse(advantages: torch.Tensor, scores: torch.Tensor, uids: np.ndarray) -> dict[str, float]:
    """Fractions of groups (>= 2 rows) whose advantages are all below the collapse tolerance: ``effective_acr``,
    and its parts among all-fail and all-pass groups (``effective_acr_all_fail``, ``effective_acr_all_pass``;
    by the rewards, as ``acr_all_fail`` and ``acr_all_pass``). A GRPO run's effective parts equal its raw ones.
    advantages: (B, L); scores: (B,) sequence rewards; uids: (B,) group labels."""
    group_ids, num_groups = factorize_labels(label_array(uids), advantages.device)
    valid = torch.ones(advantages.shape[0], dtype=torch.bool)
    counts = torch.zeros(num_groups, dtype=torch.int64).index_add_(0, group_ids, torch.ones_like(group_ids))
    multi = counts >= 2
    per_row = advantages.to(torch.float64).abs().amax(dim=-1)
    tolerance = AVSPOConfig().collapse_tol
    effective = effectively_collapsed_groups(per_row, group_ids, valid, multi, tolerance)
    stats = group_stats(scores.detach().to(torch.float64), group_ids, num_groups, valid, ddof=1)
    all_fail, all_pass = collapse_kinds(collapsed_groups(stats, tolerance), stats, MIN_REWARD, MAX_REWARD)
    return {"effective_acr": group_rate(effective, multi),
            "effective_acr_all_fail": group_rate(effective & all_fail, multi),
            "effective_acr_all_pass": group_rate(effective & all_pass, multi)}
