"""Properties over random batches and configurations: 300 derandomized examples per property (each draws up to 16
groups), so that a run is the same everywhere and the four properties take a few seconds."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from avspo_plugin import AVSPOConfig, ThresholdState, compute_group_advantages
from avspo_plugin.config import COLLAPSE_CHOICES
from avspo_plugin.strategies import STRATEGIES

PROPERTY = settings(max_examples=300, deadline=None, derandomize=True)


@st.composite
def binary_batches(draw):
    """Groups of 1-10 samples, each group hopeless, trivial or mixed, in shuffled order: (scores, labels, valid)."""
    sizes = draw(st.lists(st.integers(1, 10), min_size=1, max_size=16))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    pass_rates = rng.choice([0.0, 1.0, 0.5, rng.random()], size=len(sizes))
    labels = np.concatenate([np.full(size, f"g{j}", dtype=object) for j, size in enumerate(sizes)])
    scores = np.concatenate([rng.random(size) < p for size, p in zip(sizes, pass_rates)]).astype(np.float32)
    valid = rng.random(len(labels)) > draw(st.sampled_from([0.0, 0.1]))
    order = rng.permutation(len(labels))
    return torch.as_tensor(scores[order]), labels[order], torch.as_tensor(valid[order])


configs = st.builds(
    AVSPOConfig,
    strategy=st.sampled_from(tuple(STRATEGIES)),
    num_virtual=st.one_of(st.just("auto"), st.integers(1, 12)),
    alpha=st.floats(0.05, 1.0),
    threshold_mode=st.sampled_from(["adaptive", "fixed", "always", "never"]),
    augmented_collapses=st.sampled_from(COLLAPSE_CHOICES),
    std=st.sampled_from(["unbiased", "population"]),
    norm_by_std=st.booleans(),
)


def per_group(labels, valid):
    """label -> boolean row mask of its valid rows."""
    return {label: (labels == label) & valid.numpy() for label in np.unique(labels)}


@PROPERTY
@given(batch=binary_batches(), config=configs)
def test_outputs_are_finite_and_metrics_in_range(batch, config):
    scores, labels, valid = batch
    result = compute_group_advantages(scores, labels, config, ThresholdState.initial(config), valid=valid)
    assert torch.isfinite(result.advantages).all()
    assert (result.advantages[~valid] == 0).all()
    m = result.metrics
    for rate in ("acr", "acr_all_fail", "acr_all_pass", "effective_acr", "near_collapse", "augmented_groups"):
        assert 0.0 <= m[rate] <= 1.0
    assert m["acr_all_fail"] + m["acr_all_pass"] <= m["acr"] + 1e-12
    assert m["augmented_groups"] <= m["acr"] + 1e-12
    assert config.threshold_min <= result.state.tau <= config.threshold_max


@PROPERTY
@given(batch=binary_batches(), config=configs)
def test_virtual_samples_never_touch_groups_that_are_not_collapsed(batch, config):
    scores, labels, valid = batch
    state = ThresholdState.initial(config)
    result = compute_group_advantages(scores, labels, config, state, valid=valid)
    plain = compute_group_advantages(scores, labels, config.replace(threshold_mode="never"), state, valid=valid)
    for rows in per_group(labels, valid).values():
        if rows.sum() >= 2 and scores[rows].std() > 0:
            assert torch.equal(result.advantages[rows], plain.advantages[rows])


@PROPERTY
@given(batch=binary_batches(), num_virtual=st.one_of(st.just("auto"), st.integers(2, 12)))
def test_stratified_sends_all_fail_down_and_all_pass_up(batch, num_virtual):
    scores, labels, valid = batch
    config = AVSPOConfig(threshold_mode="always", num_virtual=num_virtual)
    result = compute_group_advantages(scores, labels, config, ThresholdState.initial(config), valid=valid)
    for rows in per_group(labels, valid).values():
        size = int(rows.sum())
        if size < 2:
            continue
        group = scores[rows]
        k = num_virtual if num_virtual != "auto" else int(np.ceil(size * result.metrics["acr"] ** 0.5 - 1e-9))
        if bool((group == 0).all()):
            assert (result.advantages[rows] < 0).all()
        elif bool((group == 1).all()) and min(k, size) >= 2:
            assert (result.advantages[rows] > 0).all()


@PROPERTY
@given(batch=binary_batches())
def test_acr_is_the_fraction_of_zero_variance_groups(batch):
    scores, labels, valid = batch
    config = AVSPOConfig(threshold_mode="never")
    metrics = compute_group_advantages(scores, labels, config, ThresholdState.initial(config), valid=valid).metrics
    groups = [scores[rows] for rows in per_group(labels, valid).values() if rows.sum() >= 2]
    collapsed = sum(bool((g == g[0]).all()) for g in groups)
    assert metrics["groups"] == len(groups)
    assert metrics["acr"] == (collapsed / len(groups) if groups else 0.0)
