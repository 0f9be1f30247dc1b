"""The lab's training, top to bottom: a supervised warm-up, then RL from verifiable rewards.

warm_up() trains the base policy on correct answers for a short while, so that it
starts partly competent. train() then runs one method for one seed:

    every step
      1. rollouts: P prompts, G samples each at the temperature; the verifier scores them
         (DAPO: groups whose rewards are all equal are dropped and more prompts sampled
         until P groups are kept, at most dapo_max_gen_batches generation batches)
      2. advantages: the method's estimator, called as verl's trainer calls it
      3. update: old log-probs, then verl's clipped policy loss (token-mean) on each
         mini-batch, AdamW
      4. record: ACR, effective ACR, all-fail / all-pass split, train reward, entropy,
         rollouts consumed; held-out accuracy every eval_every steps
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

from .methods import Method, collapse_metrics, compute_advantages, effective_acr
from .policy import Rollout, build_policy, generate, greedy_accuracy, response_log_probs, supervised_batch
from .settings import LabSettings
from .task import Problems, ProblemSampler, held_out_split, max_response_length, rewards


def held_out(settings: LabSettings):
    return held_out_split(settings.tiers, settings.held_out_per_tier, settings.task_seed)


def warm_up(settings: LabSettings) -> dict[str, torch.Tensor]:
    """The base policy's weights: warmup_steps of supervised training on correct answers (token-mean NLL)."""
    policy = build_policy(settings.shape, settings.task_seed)
    rng = np.random.default_rng([settings.task_seed, 1])
    sampler = ProblemSampler(settings.tiers, settings.weights("warmup_mix"), held_out(settings), rng)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=settings.warmup_lr, weight_decay=settings.weight_decay)
    # Linear decay to 0, so that the base policy is the end of a settled run, not a snapshot mid-oscillation.
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: 1 - k / settings.warmup_steps)
    policy.train()
    for _ in range(settings.warmup_steps):
        batch = supervised_batch(sampler.draw(settings.warmup_batch))
        log_probs, _ = response_log_probs(policy, batch, temperature=1.0)
        loss = -(log_probs * batch.response_mask).sum() / batch.response_mask.sum()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.grad_clip)
        optimizer.step()
        schedule.step()
    return {k: v.detach().clone() for k, v in policy.state_dict().items()}


@dataclass
class Groups:
    """Sampled groups: rollout rows (P*G), their rewards (P*G,), uids (P*G,) and prompt tiers (P*G,)."""

    rollout: Rollout
    scores: torch.Tensor
    uids: np.ndarray
    tiers: np.ndarray

    def take(self, rows: np.ndarray) -> "Groups":
        index = torch.as_tensor(rows, dtype=torch.long)
        return Groups(self.rollout.take(index), self.scores[index], self.uids[rows], self.tiers[rows])

    @staticmethod
    def concat(parts: list["Groups"]) -> "Groups":
        return Groups(
            Rollout.concat([p.rollout for p in parts]),
            torch.cat([p.scores for p in parts]),
            np.concatenate([p.uids for p in parts]),
            np.concatenate([p.tiers for p in parts]),
        )

    def varied_rows(self) -> np.ndarray:
        """Rows of the groups whose rewards are not all equal (the groups DAPO keeps)."""
        _, inverse = np.unique(self.uids, return_inverse=True)
        scores = self.scores.numpy()
        low = np.full(inverse.max() + 1, np.inf)
        high = np.full(inverse.max() + 1, -np.inf)
        np.minimum.at(low, inverse, scores)
        np.maximum.at(high, inverse, scores)
        return np.flatnonzero((high > low)[inverse])


def sample_groups(policy, sampler: ProblemSampler, settings: LabSettings, generator, uid_prefix: str) -> Groups:
    """P fresh prompts, G samples each, scored by the verifier."""
    problems = sampler.draw(settings.prompts)
    g = settings.group_size
    prompts = [p for p in problems.prompts() for _ in range(g)]
    answers = [a for a in problems.answers() for _ in range(g)]
    rollout = generate(policy, prompts, max_response_length(settings.tiers), settings.temperature, generator)
    uids = np.array([f"{uid_prefix}-{j}" for j in range(settings.prompts) for _ in range(g)], dtype=object)
    return Groups(rollout, rewards(rollout.response_ids, answers), uids, np.repeat(problems.tier, g))


def token_level_rewards(scores: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """The sequence reward on each response's last token, zeros elsewhere, as verl's reward managers place it."""
    out = torch.zeros(response_mask.shape, dtype=torch.float32)
    last = response_mask.sum(dim=-1) - 1
    out[torch.arange(out.shape[0]), last] = scores.float()
    return out


def evaluate(policy, problems: Problems, settings: LabSettings, step: int) -> dict:
    """Held-out accuracy: mean reward of eval_samples samples per problem at eval_temperature (avg@k), and greedy.

    The sampling generator is seeded by (task seed, step): every run draws the same random numbers at the
    same step, so differences between methods are not differences in evaluation luck.
    """
    k = settings.eval_samples
    seed = int(np.random.SeedSequence([settings.task_seed, step, 3]).generate_state(1)[0])
    generator = torch.Generator().manual_seed(seed)
    prompts = [p for p in problems.prompts() for _ in range(k)]
    rollout = generate(policy, prompts, max_response_length(settings.tiers), settings.eval_temperature, generator)
    answers = [a for a in problems.answers() for _ in range(k)]
    sampled = rewards(rollout.response_ids, answers).double().numpy().reshape(-1, k).mean(axis=1)
    greedy = greedy_accuracy(policy, problems, max_response_length(settings.tiers))
    return {
        "accuracy": float(sampled.mean()),
        "by_tier": {str(d): float(sampled[problems.tier == d].mean()) for d in settings.tiers},
        "greedy": float(greedy.mean()),
        "greedy_by_tier": {str(d): float(greedy[problems.tier == d].mean()) for d in settings.tiers},
    }


def train(
    settings: LabSettings,
    method: Method,
    seed: int,
    base_state: dict[str, torch.Tensor],
    on_step: Optional[Callable[[], None]] = None,
    extra_final_evals: tuple[float, ...] = (),
) -> dict:
    """One RL run from the base policy; returns its per-step and per-evaluation series.

    extra_final_evals: temperatures at which the final policy is also evaluated (avg@k, same generator
    seed as the final evaluation); ``evals["at_temperature"]`` holds {str(float(T)): accuracy} at the
    last evaluation and {} at the others.
    """
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.workers.config import ActorConfig

    started, cpu_started = time.perf_counter(), time.process_time()
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    policy = build_policy(settings.shape, settings.task_seed)
    policy.load_state_dict(base_state)
    optimizer = torch.optim.AdamW(
        policy.parameters(), lr=settings.lr, betas=(0.9, 0.999), weight_decay=settings.weight_decay
    )
    rows_per_mini_batch = settings.prompts // settings.mini_batches * settings.group_size
    actor = ActorConfig(
        strategy="fsdp",
        rollout_n=settings.group_size,
        ppo_mini_batch_size=settings.prompts // settings.mini_batches,
        ppo_micro_batch_size_per_gpu=rows_per_mini_batch,
        clip_ratio=settings.clip_ratio,
        clip_ratio_low=settings.clip_ratio,
        clip_ratio_high=settings.clip_ratio,
        loss_agg_mode="token-mean",
    )
    policy_loss = get_policy_loss_fn("vanilla")
    algorithm = method.algorithm_config()
    if method.estimator == "avspo":
        from ..verl import pop_metrics, session

        session().reset()  # the threshold state of one run must not leak into the next
    problems = held_out(settings)
    sampler = ProblemSampler(settings.tiers, settings.weights("mix"), problems, np.random.default_rng([seed, 2]))
    batch_rows = settings.prompts * settings.group_size

    steps: dict[str, list[float]] = {}
    evals: dict[str, list] = {
        key: [] for key in ("step", "rollouts", "accuracy", "by_tier", "greedy", "greedy_by_tier", "at_temperature")
    }
    rollouts_total = 0

    def record_eval(step: int) -> None:
        result = evaluate(policy, problems, settings, step)
        result.update(step=step, rollouts=rollouts_total, at_temperature={})
        if step == settings.steps:
            for temperature in extra_final_evals:
                at = dataclasses.replace(settings, eval_temperature=float(temperature))
                result["at_temperature"][str(float(temperature))] = evaluate(policy, problems, at, step)["accuracy"]
        for key, value in result.items():
            evals[key].append(value)

    record_eval(0)
    for step in range(1, settings.steps + 1):
        # 1. Rollouts.
        sampled = [sample_groups(policy, sampler, settings, generator, f"{step}.0")]
        if method.dynamic_sampling:
            kept = [sampled[0].take(sampled[0].varied_rows())]
            while sum(len(k.uids) for k in kept) < batch_rows and len(sampled) < settings.dapo_max_gen_batches:
                sampled.append(sample_groups(policy, sampler, settings, generator, f"{step}.{len(sampled)}"))
                kept.append(sampled[-1].take(sampled[-1].varied_rows()))
            batch = Groups.concat(kept).take(np.arange(min(batch_rows, sum(len(k.uids) for k in kept))))
        else:
            batch = sampled[0]
        everything = Groups.concat(sampled) if len(sampled) > 1 else sampled[0]
        rollouts_total += len(everything.uids)
        record = collapse_metrics(everything.scores, everything.uids)
        record.update(
            reward=float(everything.scores.mean()),
            rollouts=float(len(everything.uids)),
            rollouts_total=float(rollouts_total),
            gen_batches=float(len(sampled)),
            batch_groups=float(len(batch.uids) // settings.group_size),
        )

        # Entropy of the policy on this step's first P prompts: for DAPO that is before filtering, so that
        # every method is measured on prompts drawn the same way.
        policy.eval()
        with torch.no_grad():
            first_log_probs, entropy = response_log_probs(policy, sampled[0].rollout, settings.temperature, True)
        first_mask = sampled[0].rollout.response_mask
        record["entropy"] = float((entropy * first_mask).sum() / first_mask.sum())
        record.update(effective_acr=1.0, clip_fraction=0.0, ppo_kl=0.0)  # a step with nothing to train on

        if len(batch.uids):
            # 2. Advantages, from the rewards on each response's last token.
            mask = batch.rollout.response_mask
            advantages = compute_advantages(
                method, algorithm, token_level_rewards(batch.scores, mask), mask.float(), batch.uids
            )
            record["effective_acr"] = effective_acr(advantages, batch.uids)
            if method.estimator == "avspo":
                avspo = pop_metrics()
                record.update({k: avspo[k] for k in ("triggered", "threshold", "num_virtual", "augmented_groups")})

            # 3. Update: old log-probs of the rollouts, then one pass over the mini-batches.
            if batch is sampled[0]:
                old_log_probs = first_log_probs
            else:
                with torch.no_grad():
                    old_log_probs, _ = response_log_probs(policy, batch.rollout, settings.temperature)
            policy.train()
            clip_fractions, kls = [], []
            for rows in torch.arange(len(batch.uids)).split(rows_per_mini_batch):
                mini = batch.rollout.take(rows)
                log_probs, _ = response_log_probs(policy, mini, settings.temperature)
                loss, loss_metrics = policy_loss(
                    old_log_prob=old_log_probs[rows],
                    log_prob=log_probs,
                    advantages=advantages[rows],
                    response_mask=mini.response_mask.float(),
                    loss_agg_mode="token-mean",
                    config=actor,
                )
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.grad_clip)
                optimizer.step()
                clip_fractions.append(loss_metrics["actor/pg_clipfrac"])
                kls.append(loss_metrics["actor/ppo_kl"])
            record["clip_fraction"] = float(np.mean(clip_fractions))
            record["ppo_kl"] = float(np.mean(kls))

        # 4. Record.
        for key, value in record.items():
            steps.setdefault(key, []).append(value)
        if step % settings.eval_every == 0 or step == settings.steps:
            record_eval(step)
        if on_step is not None:
            on_step()

    return {
        "method": method.name,
        "seed": seed,
        "steps": steps,
        "evals": evals,
        "wall_s": time.perf_counter() - started,
        "cpu_s": time.process_time() - cpu_started,
    }


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
