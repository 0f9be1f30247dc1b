"""The lab's task: addition problems of growing length, a character vocabulary, and the verifier.

Tier d asks for the sum of two d-digit numbers. Numbers are written least-significant
digit first, and each operand fills a field as wide as the longest tier, ``_`` marking
the unused places; with tiers 1-5, 123 + 456 = 579 reads

    prompt "<bos>321__+654__="    response "975<eos>"

Every problem thus has the same layout: answer digit i always sits at the same
distance from operand digits i, and is written after the carry it depends on (the
usual layout for arithmetic in small transformers). What makes a tier harder is its
length: more digits to get right in one response, and digit places that the short
warm-up rarely or never shows. So after warm-up the short tiers are solved nearly
always and the long ones nearly never: both kinds of advantage collapse appear in one
batch. The reward is binary: 1 when the response is the answer followed by the end token.

Everything is generated in process from seeds: the held-out split from the task seed
(shared by every run), training prompts from each run's own generator, never drawing a
held-out problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

PAD, BOS, EOS, BLANK = "<pad>", "<bos>", "<eos>", "_"
# The verifier's two rewards.
MIN_REWARD, MAX_REWARD = 0.0, 1.0


class Vocabulary:
    """Character-level vocabulary: one id per special token, digit and symbol."""

    def __init__(self) -> None:
        self.tokens = [PAD, BOS, EOS, *"0123456789+=", BLANK]
        self.ids = {token: i for i, token in enumerate(self.tokens)}
        self.pad_id, self.bos_id, self.eos_id = self.ids[PAD], self.ids[BOS], self.ids[EOS]

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, text: str) -> list[int]:
        try:
            return [self.ids[ch] for ch in text]
        except KeyError as err:
            raise ValueError(f"character {err.args[0]!r} of {text!r} is not in the lab vocabulary") from None

    def decode(self, ids) -> str:
        """Readable text of token ids; special tokens in angle brackets, padding dropped."""
        return "".join(self.tokens[int(i)] for i in ids if int(i) != self.pad_id)


VOCAB = Vocabulary()


def lsb_first(number: int) -> str:
    """The decimal digits of a non-negative integer, least significant first."""
    return str(number)[::-1]


@dataclass(frozen=True)
class Problems:
    """A set of problems: operands a, b (N,), their tier (N,), and the operand field width."""

    a: np.ndarray
    b: np.ndarray
    tier: np.ndarray
    width: int

    def __len__(self) -> int:
        return int(self.a.shape[0])

    def pairs(self) -> list[tuple[int, int]]:
        return list(zip(self.a.tolist(), self.b.tolist()))

    def prompts(self) -> list[list[int]]:
        def field(n: int) -> str:
            return lsb_first(n).ljust(self.width, BLANK)

        return [[VOCAB.bos_id, *VOCAB.encode(f"{field(a)}+{field(b)}=")] for a, b in self.pairs()]

    def answers(self) -> list[str]:
        return [lsb_first(a + b) for a, b in self.pairs()]

    def take(self, rows: np.ndarray) -> Problems:
        return Problems(self.a[rows], self.b[rows], self.tier[rows], self.width)

    def keys(self) -> np.ndarray:
        """One int64 per problem, equal exactly when (a, b) are equal."""
        return self.a.astype(np.int64) * 10**9 + self.b.astype(np.int64)


def answers_dropping_carries(a: np.ndarray, b: np.ndarray, rate: float, rng: np.random.Generator) -> list[str]:
    """a + b written least significant digit first, where each carry is dropped with probability ``rate``.

    The digits are added column by column; a carry that arises is passed on to the next column with
    probability 1 - rate, otherwise lost (that column, and the final carry digit, come out one lower): the
    subtle error of a learner who forgets to carry. rate 0 gives the true sums.  a, b: (N,) -> N strings.
    """
    a, b = np.asarray(a, dtype=np.int64).copy(), np.asarray(b, dtype=np.int64).copy()
    width = len(str(int(max(a.max(initial=0), b.max(initial=0)))))
    carry = np.zeros(a.shape, dtype=np.int64)
    digits = []
    for _ in range(width):
        column = a % 10 + b % 10 + carry
        digits.append(column % 10)
        carry = (column // 10) * (rng.random(a.shape) >= rate)
        a, b = a // 10, b // 10
    digits.append(carry)
    columns = np.stack(digits, axis=1)  # (N, width + 1), least significant first
    return [lsb_first(int("".join(map(str, row[::-1])))) for row in columns]


def carry_counts(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many columns of a + b, added least significant digit first, pass a carry on (the steps a learner who
    forgets carries gets wrong).  a, b: (N,) non-negative -> (N,) int64."""
    a, b = np.asarray(a, dtype=np.int64).copy(), np.asarray(b, dtype=np.int64).copy()
    carry, count = np.zeros(a.shape, dtype=np.int64), np.zeros(a.shape, dtype=np.int64)
    while (a > 0).any() or (b > 0).any():  # one pass per digit column, every problem at once
        carry = (a % 10 + b % 10 + carry) // 10
        count += carry
        a, b = a // 10, b // 10
    return count


def max_response_length(tiers: tuple[int, ...]) -> int:
    """Tokens in the longest correct response: d + 1 digits (a final carry) and the end token."""
    return max(tiers) + 2


def draw_operands(rng: np.random.Generator, tier: np.ndarray) -> np.ndarray:
    """Uniform d-digit numbers, d = tier (N,); one-digit numbers include 0."""
    low = np.where(tier == 1, 0, 10 ** (tier - 1))
    return rng.integers(low, 10**tier)


def problem_count(tier: int) -> int:
    """How many distinct problems tier d has."""
    return (10 if tier == 1 else 9 * 10 ** (tier - 1)) ** 2


def per_tier_counts(tiers: tuple[int, ...], per_tier: int | tuple[int, ...], what: str) -> tuple[int, ...]:
    """One count per tier: ``per_tier`` as given (a tuple), or the same count for every tier (an int)."""
    counts = (per_tier,) * len(tiers) if isinstance(per_tier, int) else tuple(per_tier)
    if len(counts) != len(tiers):
        raise ValueError(f"{what} gives {len(counts)} counts for {len(tiers)} tiers {tiers}")
    return counts


def held_out_split(tiers: tuple[int, ...], per_tier: int | tuple[int, ...], seed: int) -> Problems:
    """per_tier distinct problems of each tier (one count for all, or one per tier), fixed by the task seed."""
    rng = np.random.default_rng([seed, 0x5EED])
    counts = per_tier_counts(tiers, per_tier, "held_out_per_tier")
    return _distinct_problems(tiers, counts, rng, None, "held-out split", share=0.5)


def training_set(tiers: tuple[int, ...], per_tier: int | tuple[int, ...], seed: int, held_out: Problems) -> Problems:
    """A fixed training set: per_tier distinct problems of each tier, none of them held out, fixed by the task seed."""
    rng = np.random.default_rng([seed, 0x7EA1])
    counts = per_tier_counts(tiers, per_tier, "train_per_tier")
    return _distinct_problems(tiers, counts, rng, held_out, "training set", share=1.0)


def evaluation_set(tiers: tuple[int, ...], per_tier: tuple[int, ...], seed: int, excluded: Problems) -> Problems:
    """per_tier[i] distinct problems of tier i, none in ``excluded``, fixed by ``seed``: held-out problems apart
    from another split (a study's own, weighted as it needs)."""
    rng = np.random.default_rng([seed, 0xE7A1])
    return _distinct_problems(tiers, per_tier, rng, excluded, "evaluation set", share=0.5)


def stratified_split(problems: Problems, first_share: float, seed: int) -> tuple[Problems, Problems]:
    """The problems cut in two by tier: in each tier a seeded permutation's first round(first_share x n) rows go to
    the first part (validation), the rest to the second (test)."""
    rng = np.random.default_rng([seed, 0x5917])
    first, second = [], []
    for d in np.unique(problems.tier):
        rows = rng.permutation(np.flatnonzero(problems.tier == d))
        cut = round(first_share * rows.size)
        first.append(rows[:cut])
        second.append(rows[cut:])
    return problems.take(np.sort(np.concatenate(first))), problems.take(np.sort(np.concatenate(second)))


def _distinct_problems(
    tiers: tuple[int, ...], counts: tuple[int, ...], rng: np.random.Generator, excluded: Problems | None, what: str,
    share: float,
) -> Problems:
    """counts[i] distinct problems of tier i, none in ``excluded``; at most ``share`` of a tier's available ones
    (a held-out split takes at most half, so that training problems remain)."""
    excluded_keys = set() if excluded is None else set(excluded.keys().tolist())
    a_parts, b_parts = [], []
    for d, count in zip(tiers, counts):
        available = problem_count(d) - int(np.sum(excluded.tier == d)) if excluded is not None else problem_count(d)
        most = int(available * share)
        if count > most:
            raise ValueError(
                f"{what} asks {count} problems of tier {d}, which has {available} available: "
                f"at most {most} may be taken"
            )
        chosen: dict[int, tuple[int, int]] = {}
        while len(chosen) < count:
            tier = np.full(count, d)
            for x, y in zip(draw_operands(rng, tier).tolist(), draw_operands(rng, tier).tolist()):
                key = x * 10**9 + y
                if len(chosen) < count and key not in excluded_keys:
                    chosen.setdefault(key, (x, y))
        pairs = np.array(list(chosen.values()), dtype=np.int64).reshape(-1, 2)
        a_parts.append(pairs[:, 0])
        b_parts.append(pairs[:, 1])
    return Problems(np.concatenate(a_parts), np.concatenate(b_parts), np.repeat(np.asarray(tiers), counts), max(tiers))


class EpochSampler:
    """Training problems of a run from a fixed training set: shuffled epochs, as a dataloader's random sampler.

    ``next_ids(n)`` gives the next n problem indices of the stream (a new permutation each epoch); the
    indices are the problems' stable ids.
    """

    def __init__(self, problems: Problems, rng: np.random.Generator):
        self.problems, self.rng = problems, rng
        self.order = np.empty(0, dtype=np.int64)
        self.epoch = 0

    def next_ids(self, n: int) -> np.ndarray:
        while self.order.size < n:
            self.order = np.concatenate([self.order, self.rng.permutation(len(self.problems))])
            self.epoch += 1
        ids, self.order = self.order[:n], self.order[n:]
        return ids


class ProblemSampler:
    """Training problems of a run: tiers drawn by weight, operands uniform, never a held-out problem."""

    def __init__(self, tiers: tuple[int, ...], weights: np.ndarray, held_out: Problems, rng: np.random.Generator):
        self.tiers, self.weights, self.rng = np.asarray(tiers), weights, rng
        self.width = max(tiers)
        self.excluded = np.sort(held_out.keys())

    def draw(self, count: int) -> Problems:
        tier = self.tiers[self.rng.choice(len(self.tiers), size=count, p=self.weights)]
        a, b = draw_operands(self.rng, tier), draw_operands(self.rng, tier)
        clash = self._held_out(a, b)
        while clash.any():
            a[clash], b[clash] = draw_operands(self.rng, tier[clash]), draw_operands(self.rng, tier[clash])
            clash = self._held_out(a, b)
        return Problems(a, b, tier, self.width)

    def _held_out(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.isin(a.astype(np.int64) * 10**9 + b.astype(np.int64), self.excluded)


def verify(response: list[int], answer: str) -> bool:
    """The response is the answer's characters followed by the end token (a truncated response fails)."""
    return response[: len(answer) + 1] == [*VOCAB.encode(answer), VOCAB.eos_id]


def rewards(responses: torch.Tensor, answers: list[str]) -> torch.Tensor:
    """Binary verifier rewards.  responses: (N, L) token ids -> (N,) float32 of 0.0 / 1.0."""
    return torch.tensor(
        [MAX_REWARD if verify(row, answer) else MIN_REWARD for row, answer in zip(responses.tolist(), answers)]
    )
