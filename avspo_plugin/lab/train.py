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

import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

from .methods import Method, collapse_metrics, compute_advantages, effective_acr
from .policy import Rollout, build_policy, generate, greedy_accuracy, response_log_probs, supervised_batch
from .settings import LabSettings
from .task import VOCAB, EpochSampler, Problems, ProblemSampler, held_out_split, max_response_length, rewards, training_set


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
    """Sampled groups: rollout rows (P*G), their rewards (P*G,), uids (P*G,), prompt tiers and prompt ids (P*G,)."""

    rollout: Rollout
    scores: torch.Tensor
    uids: np.ndarray
    tiers: np.ndarray
    prompt_ids: np.ndarray  # (P*G,) stable prompt ids (uids are per step)

    def take(self, rows: np.ndarray) -> "Groups":
        index = torch.as_tensor(rows, dtype=torch.long)
        return Groups(self.rollout.take(index), self.scores[index], self.uids[rows], self.tiers[rows],
                      self.prompt_ids[rows])

    @staticmethod
    def concat(parts: list["Groups"]) -> "Groups":
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
    """Where a run's prompts come from: fresh draws, or a fixed training set in shuffled epochs, optionally
    filtered by collapse-aware prompt selection before generation.

    Stable prompt ids are the training-set indices (fixed set) or the problems' keys (fresh draws).
    """

    def __init__(self, settings: LabSettings, method: Method, seed: int, held: Problems):
        rng = np.random.default_rng([seed, 2])
        self.selector = None
        if settings.fixed_training_set:
            self.epochs = EpochSampler(training_set(settings.tiers, settings.train_per_tier, settings.task_seed, held), rng)
            self.fresh = None
        else:
            self.epochs = None
            self.fresh = ProblemSampler(settings.tiers, settings.weights("mix"), held, rng)
        if method.selection:
            if self.epochs is None:
                raise ValueError(f"method {method.name!r} selects prompts by their history, which needs a fixed "
                                 "training set: set train_per_tier")
            from ..config import SelectionConfig
            from ..core.selection import PromptSelector

            config = SelectionConfig.from_mapping({"seed": seed, **method.selection}, where="algorithm.avspo_selection")
            self.selector = PromptSelector(config)
        self.skipped = 0
        self.last_skipped = np.empty(0, dtype=np.int64)  # ids skipped by the last draw

    def draw(self, count: int, step: int) -> tuple[Problems, np.ndarray]:
        """count problems and their stable ids. With selection: candidates are drawn until count are kept;
        the skipped ones are used up for this epoch, kept ones beyond count go back to the stream's front."""
        if self.epochs is None:
            problems = self.fresh.draw(count)
            return problems, problems.keys()
        if self.selector is None:
            ids = self.epochs.next_ids(count)
            return self.epochs.problems.take(ids), ids
        # The selector skips at most max_skip_fraction of one choice's candidates, so this many always keep count.
        candidates = self.epochs.next_ids(int(np.ceil(count / (1 - self.selector.config.max_skip_fraction))))
        keep = self.selector.choose(candidates.tolist(), step)
        kept = candidates[keep]
        self.last_skipped = candidates[~keep]
        self.skipped += int((~keep).sum())
        self.epochs.push_front(kept[count:])
        ids = kept[:count]
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


def eval_points(settings: LabSettings) -> list[int]:
    """Budget mode: the rollout counts at which a run is evaluated (fractions of the budget)."""
    return [int(round(f * settings.rollout_budget)) for f in settings.eval_fractions]


def train(
    settings: LabSettings,
    method: Method,
    seed: int,
    base_state: dict[str, torch.Tensor],
    on_step: Optional[Callable[[], None]] = None,
    extra_final_evals: tuple[float, ...] = (),
    initial_eval: Optional[dict] = None,
) -> dict:
    """One RL run from the base policy; returns its per-step and per-evaluation series.

    extra_final_evals: temperatures of further avg@k readings at the last evaluation (``at_temperature``).
    initial_eval: the base policy's evaluation at step 0, when the caller has it (it is the same for every
    run from one base: evaluate() seeds its sampling by task seed and step).
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
        loss_agg_mode=method.loss_agg_mode,
        # Dr. GRPO's constant normaliser: the longest response the task allows.
        loss_scale_factor=max_response_length(settings.tiers),
    )
    policy_loss = get_policy_loss_fn("vanilla")
    algorithm = method.algorithm_config()
    if method.estimator == "avspo":
        from ..verl import pop_metrics, session

        session().reset()  # the threshold state of one run must not leak into the next
    problems = held_out(settings)
    source = PromptSource(settings, method, seed, problems)
    batch_rows = settings.prompts * settings.group_size
    budget = settings.rollout_budget
    pending_evals = list(zip(settings.eval_fractions, eval_points(settings))) if budget else []

    steps: dict[str, list] = {}
    evals: dict[str, list] = {key: [] for key in ("step", "rollouts", "budget_fraction", "accuracy", "by_tier", "greedy",
                                                  "greedy_by_tier", "answer_without_end_by_tier", "at_temperature")}
    rollouts_total = 0

    def record_eval(step: int, final: bool, fractions: tuple[float | None, ...] = (None,)) -> None:
        """One evaluation, entered once per budget fraction it stands for (one step can reach several)."""
        result = initial_eval if step == 0 and initial_eval is not None else \
            evaluate(policy, problems, settings, step, extra_final_evals if final else ())
        for fraction in fractions:
            entry = {**result, "step": step, "rollouts": rollouts_total, "budget_fraction": fraction}
            for key in evals:
                evals[key].append(entry.get(key, {}))

    def finished(step: int) -> bool:
        return rollouts_total >= budget if budget else step >= settings.steps

    record_eval(0, final=False, fractions=(0.0,) if budget else (None,))
    step = 0
    while not finished(step):
        step += 1
        # 1. Rollouts (in budget mode never past the budget: DAPO's last step samples only what is left).
        most_batches = settings.dapo_max_gen_batches if method.dynamic_sampling else 1
        if budget:
            most_batches = min(most_batches, (budget - rollouts_total) // batch_rows)
        skipped_before = source.skipped
        sampled = [sample_groups(policy, *source.draw(settings.prompts, step), settings, generator, f"{step}.0")]
        if method.dynamic_sampling:
            kept = [sampled[0].take(sampled[0].varied_rows())]
            while sum(len(k.uids) for k in kept) < batch_rows and len(sampled) < most_batches:
                sampled.append(sample_groups(policy, *source.draw(settings.prompts, step), settings, generator,
                                             f"{step}.{len(sampled)}"))
                kept.append(sampled[-1].take(sampled[-1].varied_rows()))
            batch = Groups.concat(kept).take(np.arange(min(batch_rows, sum(len(k.uids) for k in kept))))
        else:
            batch = sampled[0]
        everything = Groups.concat(sampled) if len(sampled) > 1 else sampled[0]
        rollouts_total += len(everything.uids)
        record = collapse_metrics(everything.scores, everything.uids)
        record.update(collapse_by_tier(everything, settings.tiers))
        record.update(
            reward=float(everything.scores.mean()),
            rollouts=float(len(everything.uids)),
            rollouts_total=float(rollouts_total),
            gen_batches=float(len(sampled)),
            batch_groups=float(len(batch.uids) // settings.group_size),
            skipped_prompts=float(source.skipped - skipped_before),
        )
        if source.selector is not None:
            source.selector.observe(everything.prompt_ids.tolist(), everything.scores, step)
            record.update(source.selector.pop_metrics())

        # Entropy of the policy on this step's first P prompts: for DAPO that is before filtering, so that
        # every method is measured on prompts drawn the same way.
        policy.eval()
        with torch.no_grad():
            first_log_probs, entropy = response_log_probs(policy, sampled[0].rollout, settings.temperature, True)
        first_mask = sampled[0].rollout.response_mask
        record["entropy"] = float((entropy * first_mask).sum() / first_mask.sum())
        # A step with nothing to train on: no signal, no update.
        record.update(effective_acr=1.0, clip_fraction=0.0, ppo_kl=0.0, grad_norm=None, clip_bound=0.0)

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
            clip_fractions, kls, norms = [], [], []
            for rows in torch.arange(len(batch.uids)).split(rows_per_mini_batch):
                mini = batch.rollout.take(rows)
                log_probs, _ = response_log_probs(policy, mini, settings.temperature)
                loss, loss_metrics = policy_loss(
                    old_log_prob=old_log_probs[rows],
                    log_prob=log_probs,
                    advantages=advantages[rows],
                    response_mask=mini.response_mask.float(),
                    loss_agg_mode=method.loss_agg_mode,
                    config=actor,
                )
                optimizer.zero_grad()
                loss.backward()
                norms.append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.grad_clip)))
                optimizer.step()
                clip_fractions.append(loss_metrics["actor/pg_clipfrac"])
                kls.append(loss_metrics["actor/ppo_kl"])
            record["clip_fraction"] = float(np.mean(clip_fractions))
            record["ppo_kl"] = float(np.mean(kls))
            # The gradient norm before clipping, and the fraction of updates the clip scaled down.
            record["grad_norm"] = float(np.mean(norms))
            record["clip_bound"] = float(np.mean([n > settings.grad_clip for n in norms]))

        # 4. Record.
        for key, value in record.items():
            steps.setdefault(key, []).append(value)
        if budget:
            due = [f for f, point in pending_evals if point <= rollouts_total]
            if due:
                pending_evals = pending_evals[len(due):]
                record_eval(step, final=not pending_evals, fractions=tuple(due))
        elif step % settings.eval_every == 0 or step == settings.steps:
            record_eval(step, final=step == settings.steps)
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


def collapse_by_tier(groups: Groups, tiers: tuple[int, ...]) -> dict[str, float]:
    """Per tier: the fraction of the tier's sampled groups whose rewards are all equal (None: none sampled)."""
    inverse, varied = groups.varied_groups()
    group_tier = np.zeros(varied.size, dtype=np.int64)
    group_tier[inverse] = groups.tiers
    collapsed = ~varied
    return {f"acr_tier{d}": float(collapsed[group_tier == d].mean()) if (group_tier == d).any() else None
            for d in tiers}


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
