"""The lab's training, top to bottom: a supervised warm-up, then RL from verifiable rewards.

warm_up() trains the base policy on correct answers for a short while, so that it
starts partly competent. train() then runs one method for one seed, CleanRL-style:

    every step
      1. collect a batch: P prompts, G samples each at the temperature, scored by the
         verifier (DAPO: groups whose rewards are all equal are dropped and more prompts
         sampled until P groups are kept, at most dapo_max_gen_batches generation batches)
      2. score: ACR, its all-fail / all-pass split and per tier, train reward, rollouts
      3. estimate: old log-probs and entropies, then the method's advantages, called as
         verl's trainer calls its estimators
      4. update: verl's clipped policy loss (token-mean) on each mini-batch, optionally a KL
         term to the base policy, gradient clip, AdamW
      5. evaluate: held-out accuracy when due (every eval_every steps, or at fractions of a
         rollout budget)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from verl.trainer.ppo.core_algos import agg_loss, get_policy_loss_fn, kl_penalty
from verl.workers.config import ActorConfig

from avspo_plugin.core import AVSPOSession

from .methods import Method, collapse_metrics, compute_advantages, effective_collapse
from .policy import Rollout, build_policy, generate, greedy_accuracy, response_log_probs, supervised_batch
from .settings import LabSettings
from .task import (
    MIN_REWARD,
    VOCAB,
    EpochSampler,
    Problems,
    ProblemSampler,
    answers_dropping_carries,
    held_out_split,
    max_response_length,
    rewards,
    training_set,
)

# The AVSPO session's stagnation / entropy warnings (quieted by experiment.quiet_process: the lab records ACR and
# entropy per step itself).
AVSPO_LOG = logging.getLogger("lab.avspo")


class Evaluation(Protocol):
    """A study's own held-out evaluation (a frozen dataclass, so that it pickles to workers and fingerprints its runs):
    whether it is due, by the rollouts sampled so far and before this step (final: the run's last step), and what it
    reads."""

    def due(self, rollouts_total: int, final: bool, rollouts_before: int) -> bool: ...

    def evaluate(self, policy, step: int, rollouts_total: int, final: bool) -> dict: ...


def held_out(settings: LabSettings):
    return held_out_split(settings.tiers, settings.held_out_per_tier, settings.task_seed)


def warm_up(settings: LabSettings) -> dict[str, torch.Tensor]:
    """The base policy's weights: warmup_steps of supervised training (token-mean NLL) on traces whose carries
    are each dropped with probability warmup_carry_drop (0: correct answers only)."""
    return warm_up_checkpoints(settings, (settings.warmup_steps,))[settings.warmup_steps]


def warm_up_checkpoints(settings: LabSettings, at: tuple[int, ...]) -> dict[int, dict[str, torch.Tensor]]:
    """The weights after each step count of ``at`` (each within 1..warmup_steps) of one warm-up of warmup_steps
    steps (:func:`warm_up`'s, whose learning rate decays over all of them): checkpoints along the way."""
    if not at or any(not 1 <= k <= settings.warmup_steps for k in at):
        raise ValueError(f"checkpoints {at} must lie within 1..warmup_steps={settings.warmup_steps}")
    checkpoints: dict[int, dict[str, torch.Tensor]] = {}
    policy = build_policy(settings.shape, settings.task_seed)
    rng = np.random.default_rng([settings.task_seed, 1])
    sampler = ProblemSampler(settings.tiers, settings.weights("warmup_mix"), held_out(settings), rng)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=settings.warmup_lr, weight_decay=settings.weight_decay)
    # Linear decay to 0, so that the base policy is the end of a settled run, not a snapshot mid-oscillation.
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: 1 - k / settings.warmup_steps)
    policy.train()
    for step in range(settings.warmup_steps):
        problems = sampler.draw(settings.warmup_batch)
        batch = supervised_batch(problems, answers_dropping_carries(problems.a, problems.b,
                                                                    settings.warmup_carry_drop, rng))
        log_probs, _ = response_log_probs(policy, batch, temperature=1.0)
        loss = -(log_probs * batch.response_mask).sum() / batch.response_mask.sum()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.warmup_grad_clip)
        optimizer.step()
        schedule.step()
        if step + 1 in at:
            checkpoints[step + 1] = {k: v.detach().clone() for k, v in policy.state_dict().items()}
        if len(checkpoints) == len(set(at)):
            break
    return checkpoints


@dataclass
class Groups:
    """Sampled groups: rollout rows (P*G), their rewards (P*G,), uids (P*G,), prompt tiers and prompt ids (P*G,)."""

    rollout: Rollout
    scores: torch.Tensor
    uids: np.ndarray
    tiers: np.ndarray
    prompt_ids: np.ndarray  # (P*G,) stable prompt ids (uids are per step)

    def take(self, rows: np.ndarray) -> Groups:
        index = torch.as_tensor(rows, dtype=torch.long)
        return Groups(self.rollout.take(index), self.scores[index], self.uids[rows], self.tiers[rows],
                      self.prompt_ids[rows])

    @staticmethod
    def concat(parts: list[Groups]) -> Groups:
        return Groups(
            Rollout.concat([p.rollout for p in parts]),
            torch.cat([p.scores for p in parts]),
            np.concatenate([p.uids for p in parts]),
            np.concatenate([p.tiers for p in parts]),
            np.concatenate([p.prompt_ids for p in parts]),
        )

    def varied_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """Each row's group index (B,), and per group whether its rewards are not all equal (groups,)."""
        _, inverse = np.unique(self.uids, return_inverse=True)
        scores = self.scores.numpy()
        low = np.full(inverse.max() + 1, np.inf)
        high = np.full(inverse.max() + 1, -np.inf)
        np.minimum.at(low, inverse, scores)
        np.maximum.at(high, inverse, scores)
        return inverse, high > low

    def varied_rows(self) -> np.ndarray:
        """Rows of the groups whose rewards are not all equal (the groups DAPO keeps)."""
        inverse, varied = self.varied_groups()
        return np.flatnonzero(varied[inverse])


def sample_groups(policy, problems: Problems, ids: np.ndarray, settings: LabSettings, generator, uid_prefix: str) -> Groups:
    """G samples of each of the given problems (ids: their stable prompt ids), scored by the verifier."""
    g = settings.group_size
    prompts = [p for p in problems.prompts() for _ in range(g)]
    answers = [a for a in problems.answers() for _ in range(g)]
    rollout = generate(policy, prompts, max_response_length(settings.tiers), settings.temperature, generator)
    uids = np.array([f"{uid_prefix}-{j}" for j in range(len(problems)) for _ in range(g)], dtype=object)
    return Groups(rollout, rewards(rollout.response_ids, answers), uids, np.repeat(problems.tier, g),
                  np.repeat(ids, g))


class PromptSource:
    """Where a run's prompts come from: fresh draws, or a fixed training set in shuffled epochs.

    Stable prompt ids are the training-set indices (fixed set) or the problems' keys (fresh draws).
    """

    def __init__(self, settings: LabSettings, method: Method, seed: int, held: Problems):
        rng = np.random.default_rng([seed, 2])
        if settings.fixed_training_set:
            self.epochs = EpochSampler(training_set(settings.tiers, settings.train_per_tier, settings.task_seed, held), rng)
            self.fresh = None
        else:
            self.epochs = None
            self.fresh = ProblemSampler(settings.tiers, settings.weights("mix"), held, rng)
        self.held_out_keys = held.keys()
        self.held_out_drawn = 0  # training prompts that are held-out problems (G5: must stay 0)

    def draw(self, count: int, step: int) -> tuple[Problems, np.ndarray]:
        """count problems and their stable ids, each checked against the held-out split."""
        problems, ids = self._draw(count, step)
        self.held_out_drawn += int(np.isin(problems.keys(), self.held_out_keys).sum())
        return problems, ids

    def _draw(self, count: int, step: int) -> tuple[Problems, np.ndarray]:
        if self.epochs is None:
            problems = self.fresh.draw(count)
            return problems, problems.keys()
        ids = self.epochs.next_ids(count)
        return self.epochs.problems.take(ids), ids


def token_level_rewards(scores: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """The sequence reward on each response's last token, zeros elsewhere, as verl's reward managers place it."""
    out = torch.zeros(response_mask.shape, dtype=torch.float32)
    last = response_mask.sum(dim=-1) - 1
    out[torch.arange(out.shape[0]), last] = scores.float()
    return out


def answer_without_end(responses: torch.Tensor, answers: list[str]) -> np.ndarray:
    """1/0 per sample: every answer digit is right but the end token does not follow.  responses: (N, L) -> (N,)."""
    out = np.zeros(len(answers))
    for i, (row, answer) in enumerate(zip(responses.tolist(), answers)):
        digits = VOCAB.encode(answer)
        out[i] = float(row[: len(digits)] == digits and row[len(digits) : len(digits) + 1] != [VOCAB.eos_id])
    return out


def evaluate(policy, problems: Problems, settings: LabSettings, step: int, temperatures: tuple[float, ...] = ()) -> dict:
    """Held-out accuracy: mean reward of eval_samples samples per problem at eval_temperature (avg@k), and greedy.

    The sampling generator is seeded by (task seed, step): every run draws the same random numbers at the
    same step, so differences between methods are not differences in evaluation luck. ``temperatures``:
    further avg@k readings at those sampling temperatures (``at_temperature``).
    """
    k = settings.eval_samples
    answers = [a for a in problems.answers() for _ in range(k)]
    prompts = [p for p in problems.prompts() for _ in range(k)]

    def sample(temperature: float) -> tuple[np.ndarray, np.ndarray]:
        seed = int(np.random.SeedSequence([settings.task_seed, step, 3]).generate_state(1)[0])
        generator = torch.Generator().manual_seed(seed)
        rollout = generate(policy, prompts, max_response_length(settings.tiers), temperature, generator)
        solved = rewards(rollout.response_ids, answers).double().numpy().reshape(-1, k).mean(axis=1)
        return solved, answer_without_end(rollout.response_ids, answers).reshape(-1, k).mean(axis=1)

    sampled, no_end = sample(settings.eval_temperature)
    greedy = greedy_accuracy(policy, problems, max_response_length(settings.tiers))
    return {
        "accuracy": float(sampled.mean()),
        "by_tier": {str(d): float(sampled[problems.tier == d].mean()) for d in settings.tiers},
        "greedy": float(greedy.mean()),
        "greedy_by_tier": {str(d): float(greedy[problems.tier == d].mean()) for d in settings.tiers},
        "answer_without_end_by_tier": {str(d): float(no_end[problems.tier == d].mean()) for d in settings.tiers},
        "at_temperature": {str(t): float(sample(t)[0].mean()) for t in temperatures},
    }


class EvalSchedule:
    """When a run is evaluated: at step 0, then every eval_every steps and at the last step, or, with a rollout
    budget, at the first step whose rollouts reach each of eval_fractions of it (one step may reach several)."""

    def __init__(self, settings: LabSettings):
        self.settings = settings
        budget = settings.rollout_budget
        self.pending = [(f, round(f * budget)) for f in settings.eval_fractions] if budget else []

    def finished(self, step: int, rollouts_total: int) -> bool:
        budget = self.settings.rollout_budget
        return rollouts_total >= budget if budget else step >= self.settings.steps

    def due(self, step: int, rollouts_total: int) -> tuple[float | None, ...]:
        """The budget fractions this step's evaluation stands for ((None,) in step mode); () when none is due."""
        if self.settings.rollout_budget:
            reached = tuple(f for f, point in self.pending if point <= rollouts_total)
            self.pending = self.pending[len(reached):]
            return reached
        return (None,) if step % self.settings.eval_every == 0 or step == self.settings.steps else ()

    def initial(self) -> tuple[float | None, ...]:
        return (0.0,) if self.settings.rollout_budget else (None,)


def load_policy(settings: LabSettings, state: dict[str, torch.Tensor]):
    policy = build_policy(settings.shape, settings.task_seed)
    policy.load_state_dict(state)
    return policy


def collect_batch(policy, source: PromptSource, method: Method, settings: LabSettings, generator, step: int,
                  most_batches: int) -> tuple[list[Groups], Groups]:
    """Step 1: sample P prompts x G responses, scored by the verifier. Returns every generation batch sampled
    and the batch to train on. DAPO: groups whose rewards are all equal are dropped and further batches of P
    prompts sampled (at most most_batches in all) until P groups are kept; the surplus is discarded."""
    sampled = [sample_groups(policy, *source.draw(settings.prompts, step), settings, generator, f"{step}.0")]
    if not method.dynamic_sampling:
        return sampled, sampled[0]
    rows = settings.prompts * settings.group_size
    kept = [sampled[0].take(sampled[0].varied_rows())]
    while sum(len(k.uids) for k in kept) < rows and len(sampled) < most_batches:
        sampled.append(sample_groups(policy, *source.draw(settings.prompts, step), settings, generator,
                                     f"{step}.{len(sampled)}"))
        kept.append(sampled[-1].take(sampled[-1].varied_rows()))
    return sampled, Groups.concat(kept).take(np.arange(min(rows, sum(len(k.uids) for k in kept))))


def actor_config(settings: LabSettings, method: Method):
    """verl's ActorConfig for the policy loss: clip ratio, loss aggregation, mini-batches as the lab splits them."""
    return ActorConfig(
        strategy="fsdp",
        rollout_n=settings.group_size,
        ppo_mini_batch_size=settings.prompts // settings.mini_batches,
        ppo_micro_batch_size_per_gpu=settings.prompts // settings.mini_batches * settings.group_size,
        clip_ratio=settings.clip_ratio,
        clip_ratio_low=settings.clip_ratio,
        clip_ratio_high=settings.clip_ratio,
        loss_agg_mode=method.loss_agg_mode,
        # Dr. GRPO's constant normaliser: the longest response the task allows.
        loss_scale_factor=max_response_length(settings.tiers),
    )


def update_policy(policy, optimizer, reference, rollout: Rollout, old_log_probs: torch.Tensor,
                  advantages: torch.Tensor, settings: LabSettings, method: Method, actor) -> dict[str, float]:
    """Step 4: one pass over the mini-batches with verl's clipped policy loss (plus, with kl_coef > 0, verl's
    low-variance KL to the base policy, aggregated as the loss), gradient clip, AdamW. Returns the update's
    metrics: verl's clip fraction and ppo_kl, the gradient norm before clipping, how often the clip bound, and the
    norm of the step's change to the weights."""
    policy_loss = get_policy_loss_fn("vanilla")
    rows_per_mini_batch = settings.prompts // settings.mini_batches * settings.group_size
    before = [p.detach().clone() for p in policy.parameters()]
    policy.train()
    clip_fractions, kls, norms, to_base = [], [], [], []
    for rows in torch.arange(rollout.response_ids.shape[0]).split(rows_per_mini_batch):
        mini = rollout.take(rows)
        mask = mini.response_mask.float()
        log_probs, _ = response_log_probs(policy, mini, settings.temperature)
        loss, loss_metrics = policy_loss(old_log_prob=old_log_probs[rows], log_prob=log_probs,
                                         advantages=advantages[rows], response_mask=mask,
                                         loss_agg_mode=method.loss_agg_mode, config=actor)
        if reference is not None:
            with torch.no_grad():
                ref_log_probs, _ = response_log_probs(reference, mini, settings.temperature)
            kl = agg_loss(kl_penalty(log_probs, ref_log_probs, "low_var_kl"), mask, method.loss_agg_mode,
                          loss_scale_factor=actor.loss_scale_factor)
            loss = loss + settings.kl_coef * kl
            to_base.append(float(kl))
        optimizer.zero_grad()
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.grad_clip)))
        optimizer.step()
        clip_fractions.append(loss_metrics["actor/pg_clipfrac"])
        kls.append(loss_metrics["actor/ppo_kl"])
    return {
        "clip_fraction": float(np.mean(clip_fractions)),
        "ppo_kl": float(np.mean(kls)),
        "kl_to_base": float(np.mean(to_base)) if to_base else None,
        "grad_norm": float(np.mean(norms)),  # before clipping
        "clip_bound": float(np.mean([n > settings.grad_clip for n in norms])),  # fraction of updates clipped
        # How far the step moved the weights: ||theta_after - theta_before||_2 over every parameter.
        "update_norm": float(torch.sqrt(sum(((p.detach() - b) ** 2).sum() for p, b in zip(policy.parameters(), before)))),
    }


def train(
    settings: LabSettings,
    method: Method,
    seed: int,
    base_state: dict[str, torch.Tensor],
    on_step: Callable[[], None] | None = None,
    extra_final_evals: tuple[float, ...] = (),
    initial_eval: dict | None = None,
    evaluation: Evaluation | None = None,
) -> dict:
    """One RL run from the base policy; returns its per-step and per-evaluation series.

    Each step: 1. collect a batch, 2. score it (collapse metrics of the verifier's rewards), 3. estimate
    advantages, 4. update the policy, 5. evaluate when due. extra_final_evals: temperatures of further avg@k
    readings at the last evaluation (``at_temperature``). initial_eval: the base policy's evaluation at step 0,
    when the caller has it (it is the same for every run from one base: evaluate() seeds its sampling by task
    seed and step). evaluation: an evaluation of the caller's own in place of :func:`evaluate` and its schedule
    (``evals`` is then the list of its readings, each with the step and rollouts it was taken at).
    """
    started, cpu_started = time.perf_counter(), time.process_time()
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    policy = load_policy(settings, base_state)
    reference = load_policy(settings, base_state).eval() if settings.kl_coef > 0 else None
    optimizer = torch.optim.AdamW(policy.parameters(), lr=settings.lr, betas=(0.9, 0.999),
                                  weight_decay=settings.weight_decay)
    actor = actor_config(settings, method)
    algorithm = method.algorithm_config()
    # AVSPO's threshold state and metrics, the run's own (the core's session; a verl run's lives in its process).
    avspo_session = AVSPOSession(log=AVSPO_LOG) if method.estimator == "avspo" else None
    problems = held_out(settings)
    source = PromptSource(settings, method, seed, problems)
    schedule = EvalSchedule(settings)
    batch_rows = settings.prompts * settings.group_size
    steps: dict[str, list] = {}
    evals: dict[str, list] = {key: [] for key in ("step", "rollouts", "budget_fraction", "accuracy", "by_tier", "greedy",
                                                  "greedy_by_tier", "answer_without_end_by_tier", "at_temperature")}

    def record_eval(step: int, rollouts_total: int, fractions: tuple[float | None, ...], final: bool) -> None:
        """One evaluation, entered once per budget fraction it stands for."""
        result = initial_eval if step == 0 and initial_eval is not None else \
            evaluate(policy, problems, settings, step, extra_final_evals if final else ())
        for fraction in fractions:
            entry = {**result, "step": step, "rollouts": rollouts_total, "budget_fraction": fraction}
            for key in evals:
                evals[key].append(entry.get(key, {}))

    own_evals: list[dict] = []
    if evaluation is None:
        record_eval(0, 0, schedule.initial(), final=False)
    step, rollouts_total = 0, 0
    while not schedule.finished(step, rollouts_total):
        step += 1
        # 1. Collect a batch (with a budget never past it: DAPO's last step samples only what is left).
        most_batches = settings.dapo_max_gen_batches if method.dynamic_sampling else 1
        if settings.rollout_budget:
            most_batches = min(most_batches, (settings.rollout_budget - rollouts_total) // batch_rows)
        held_out_before = source.held_out_drawn
        sampled, batch = collect_batch(policy, source, method, settings, generator, step, most_batches)
        everything = Groups.concat(sampled) if len(sampled) > 1 else sampled[0]
        rollouts_total += len(everything.uids)

        # 2. Score: what the verifier's rewards say about collapse, over every rollout sampled.
        record = {**collapse_metrics(everything.scores, everything.uids), **collapse_by_tier(everything, settings.tiers),
                  "reward": float(everything.scores.mean()), "rollouts": float(len(everything.uids)),
                  "rollouts_total": float(rollouts_total), "gen_batches": float(len(sampled)),
                  "batch_groups": float(len(batch.uids) // settings.group_size),
                  "held_out_drawn": float(source.held_out_drawn - held_out_before)}

        # 3. Estimate: old log-probs and token entropies before the update, then the method's advantages.
        # The entropy metric is taken on the first P prompts' responses (for DAPO before filtering), so that
        # every method is measured on prompts drawn the same way.
        policy.eval()
        with torch.no_grad():
            first_log_probs, first_entropy = response_log_probs(policy, sampled[0].rollout, settings.temperature, True)
        first_mask = sampled[0].rollout.response_mask
        record["entropy"] = float((first_entropy * first_mask).sum() / first_mask.sum())
        # A step with nothing to train on: no signal, no update.
        record.update(effective_acr=1.0, effective_acr_all_fail=record["acr_all_fail"],
                      effective_acr_all_pass=record["acr_all_pass"], clip_fraction=0.0, ppo_kl=0.0, kl_to_base=None,
                      grad_norm=None, clip_bound=None)
        if len(batch.uids):
            with torch.no_grad():
                old_log_probs, entropy = (first_log_probs, first_entropy) if batch is sampled[0] else \
                    response_log_probs(policy, batch.rollout, settings.temperature, True)
            mask = batch.rollout.response_mask
            advantages = compute_advantages(method, algorithm, token_level_rewards(batch.scores, mask), mask.float(),
                                            batch.uids, entropy=entropy, step=step, seed=seed, session=avspo_session)
            record.update(effective_collapse(advantages, batch.scores, batch.uids))
            # Each response's advantage (constant over its tokens): how much signal the step carries, and its sign.
            per_response = (advantages * mask).sum(dim=-1) / mask.sum(dim=-1)
            record.update(advantage_abs_sum=float(per_response.abs().sum()), advantage_sum=float(per_response.sum()))
            record.update(signal_by_tier(batch, per_response, (entropy * mask).sum(dim=-1) / mask.sum(dim=-1),
                                         settings.tiers))
            if avspo_session is not None:
                avspo = avspo_session.pop_metrics()
                record.update({k: avspo[k] for k in ("triggered", "threshold", "num_virtual", "augmented_groups")})

            # 4. Update.
            record.update(update_policy(policy, optimizer, reference, batch.rollout, old_log_probs, advantages,
                                        settings, method, actor))
        for key, value in record.items():
            steps.setdefault(key, []).append(value)

        # 5. Evaluate when due.
        final = schedule.finished(step, rollouts_total)
        if evaluation is not None:
            if evaluation.due(rollouts_total, final, rollouts_total - len(everything.uids)):
                own_evals.append({"step": step, "rollouts": rollouts_total, **evaluation.evaluate(policy, step, rollouts_total, final)})
        elif due := schedule.due(step, rollouts_total):
            record_eval(step, rollouts_total, due, final=final)
        if on_step is not None:
            on_step()

    return {
        "method": method.name,
        "seed": seed,
        "steps": steps,
        "evals": evals if evaluation is None else own_evals,
        "wall_s": time.perf_counter() - started,
        "cpu_s": time.process_time() - cpu_started,
    }


def collapse_by_tier(groups: Groups, tiers: tuple[int, ...]) -> dict[str, float]:
    """Per tier d: ``acr_tier<d>``, the fraction of the tier's sampled groups whose rewards are all equal (None:
    none sampled), and ``all_fail_tier<d>``, the fraction of all sampled groups that are all-fail and of tier d."""
    inverse, varied = groups.varied_groups()
    group_tier = np.zeros(varied.size, dtype=np.int64)
    group_tier[inverse] = groups.tiers
    collapsed = ~varied
    failed = np.ones(varied.size, dtype=bool)
    np.logical_and.at(failed, inverse, groups.scores.numpy() <= MIN_REWARD)
    out = {f"acr_tier{d}": float(collapsed[group_tier == d].mean()) if (group_tier == d).any() else None
           for d in tiers}
    # Share of all the step's groups that are all-fail and of tier d: summed over tiers, the step's all-fail ACR.
    out.update({f"all_fail_tier{d}": float((failed & (group_tier == d)).mean()) for d in tiers})
    return out


def signal_by_tier(batch: Groups, per_response: torch.Tensor, response_entropy: torch.Tensor,
                   tiers: tuple[int, ...]) -> dict[str, float | None]:
    """Per tier d, of the groups trained on: ``augmented_tier<d>``, the share of the tier's collapsed groups (all
    rewards equal) whose advantages are not all zero (None: none collapsed); ``collapsed_advantage_sum_tier<d>`` and
    ``collapsed_advantage_abs_sum_tier<d>``, the sum of those groups' per-response advantages and of their absolute
    values (its sign: all-fail groups pushed down, all-pass pulled up); ``entropy_tier<d>``, the mean token entropy
    of the tier's responses (None: none sampled). per_response, response_entropy: (B,) -> floats."""
    inverse, varied = batch.varied_groups()
    collapsed_row = ~varied[inverse]
    advantage = per_response.double().numpy()
    signal = np.zeros(varied.size, dtype=bool)
    np.logical_or.at(signal, inverse, advantage != 0)
    group_tier = np.zeros(varied.size, dtype=np.int64)
    group_tier[inverse] = batch.tiers
    entropy = response_entropy.double().numpy()
    out: dict[str, float | None] = {}
    for d in tiers:
        collapsed = ~varied & (group_tier == d)
        rows = collapsed_row & (batch.tiers == d)
        out[f"augmented_tier{d}"] = float(signal[collapsed].mean()) if collapsed.any() else None
        out[f"collapsed_advantage_sum_tier{d}"] = float(advantage[rows].sum())
        out[f"collapsed_advantage_abs_sum_tier{d}"] = float(np.abs(advantage[rows]).sum())
        out[f"entropy_tier{d}"] = float(entropy[batch.tiers == d].mean()) if (batch.tiers == d).any() else None
    return out


def sampled_pass_rates(policy, settings: LabSettings, seed: int) -> dict:
    """The base policy on the held-out prompts, G samples each at the temperature, per tier.

    pass_rate: mean reward; all_fail / all_pass: fraction of prompts whose G samples all fail / all pass
    (the groups GRPO would get no signal from).
    """
    problems = held_out(settings)
    g = settings.group_size
    generator = torch.Generator().manual_seed(seed)
    prompts = [p for p in problems.prompts() for _ in range(g)]
    answers = [a for a in problems.answers() for _ in range(g)]
    rollout = generate(policy, prompts, max_response_length(settings.tiers), settings.temperature, generator)
    solved = rewards(rollout.response_ids, answers).double().numpy().reshape(-1, g)
    result = {}
    for d in settings.tiers:
        tier = solved[problems.tier == d]
        result[str(d)] = {
            "pass_rate": float(tier.mean()),
            "all_fail": float((tier.max(axis=1) == 0).mean()),
            "all_pass": float((tier.min(axis=1) == 1).mean()),
        }
    return result
