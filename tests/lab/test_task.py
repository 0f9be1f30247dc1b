"""The lab task: layout of problems, the verifier, and the held-out split staying out of training."""

import numpy as np
import pytest
import torch

from lab.task import (
    VOCAB,
    Problems,
    ProblemSampler,
    held_out_split,
    max_response_length,
    rewards,
    verify,
)


def test_layout_is_least_significant_digit_first_in_fixed_fields():
    problems = Problems(np.array([123, 7]), np.array([456, 5]), np.array([3, 1]), width=5)
    assert [VOCAB.decode(p) for p in problems.prompts()] == ["<bos>321__+654__=", "<bos>7____+5____="]
    assert problems.answers() == ["975", "21"]  # 579 and 12, least significant digit first
    assert max_response_length((1, 2, 3, 4, 5)) == 7  # 6 digits of 99999 + 99999 and the end token


def test_verifier_needs_the_exact_answer_and_the_end_token():
    answer = "975"
    exact = [*VOCAB.encode("975"), VOCAB.eos_id, VOCAB.pad_id]
    assert verify(exact, answer)
    assert not verify([*VOCAB.encode("975"), VOCAB.pad_id, VOCAB.pad_id], answer)  # truncated: no end token
    assert not verify([*VOCAB.encode("9751"), VOCAB.eos_id], answer)  # extra digit
    assert not verify([*VOCAB.encode("976"), VOCAB.eos_id, VOCAB.pad_id], answer)
    batch = torch.tensor([exact, [*VOCAB.encode("976"), VOCAB.eos_id, VOCAB.pad_id]])
    assert rewards(batch, [answer, answer]).tolist() == [1.0, 0.0]


def test_vocabulary_rejects_unknown_characters():
    with pytest.raises(ValueError, match="'x'"):
        VOCAB.encode("12x")


def test_held_out_split_is_fixed_by_seed_distinct_and_per_tier():
    tiers = (1, 2, 3)
    a = held_out_split(tiers, 20, seed=3)
    b = held_out_split(tiers, 20, seed=3)
    assert np.array_equal(a.keys(), b.keys())
    assert not np.array_equal(a.keys(), held_out_split(tiers, 20, seed=4).keys())
    assert len(set(a.keys().tolist())) == 60
    for d in tiers:
        rows = a.tier == d
        assert rows.sum() == 20
        low = 0 if d == 1 else 10 ** (d - 1)
        assert ((a.a[rows] >= low) & (a.a[rows] < 10**d) & (a.b[rows] >= low) & (a.b[rows] < 10**d)).all()


def test_held_out_split_refuses_more_than_half_a_tier():
    with pytest.raises(ValueError, match="tier 1"):
        held_out_split((1, 2), 51, seed=0)


def test_training_sampler_never_draws_a_held_out_problem():
    tiers = (1, 2)
    held = held_out_split(tiers, 50, seed=0)  # half of all tier-1 problems
    sampler = ProblemSampler(tiers, np.array([0.5, 0.5]), held, np.random.default_rng(0))
    drawn = sampler.draw(4000)
    assert not np.isin(drawn.keys(), held.keys()).any()
    assert set(drawn.tier.tolist()) == {1, 2}
    tier1 = drawn.keys()[drawn.tier == 1]
    assert len(set(tier1.tolist())) == 50  # every tier-1 problem that is not held out does occur
