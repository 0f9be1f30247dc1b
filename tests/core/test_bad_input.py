"""Bad input gets a clear error naming what is wrong; nothing is silently changed."""

import dataclasses
import math
import re

import numpy as np
import pytest
import torch
from core_reference import run

from avspo_plugin import (
    AVSPOConfig,
    AVSPOSession,
    ConfigError,
    ThresholdState,
    compute_group_advantages,
    compute_token_advantages,
)
from avspo_plugin.config import Integer, MonitorConfig, Number


def test_nan_and_inf_rewards_name_count_and_first_uid():
    with pytest.raises(ValueError, match=r"2 non-finite reward.*uid 'b'"):
        run([0.0, math.nan, 1.0, math.inf], ["a", "b", "b", "c"])


def test_shape_mismatches_name_both_shapes():
    config = AVSPOConfig()
    state = ThresholdState.initial(config)
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(4, 2\)"):
        compute_token_advantages(torch.zeros(4, 3), torch.ones(4, 2), ["a"] * 4, config, state)
    with pytest.raises(ValueError, match=r"\(4,\).*\(3,\)"):
        compute_group_advantages(torch.zeros(4), np.array(["a"] * 3), config, state)


def test_empty_batch_gives_empty_outputs_and_zero_metrics():
    config = AVSPOConfig()
    state = ThresholdState.initial(config)
    result = compute_token_advantages(torch.zeros(0, 5), torch.zeros(0, 5), np.array([], dtype=object), config, state)
    assert result.advantages.shape == (0, 5)
    assert result.metrics["groups"] == 0 and result.metrics["acr"] == 0
    assert not any(math.isnan(v) for v in result.metrics.values())
    assert result.state == state


def test_all_padding_batch_is_empty_too():
    result = run([0.0, 0.0], ["pad", "pad"], valid=torch.tensor([False, False]))
    assert result.metrics["groups"] == 0 and result.advantages.tolist() == [0.0, 0.0]


def test_rewards_outside_the_bounds_name_value_and_uid():
    # Only a mode that places virtual rewards between the bounds needs every reward inside them.
    with pytest.raises(ValueError, match=r"reward 1\.5 of uid 'b' at row 1.*Set reward_low and reward_high"):
        run([0.0, 1.5, 1.0], ["a", "b", "b"])  # the default, the paper's adaptive trigger
    assert run([0.0, 1.5, 1.0], ["a", "b", "b"], threshold_mode="never").metrics["groups"] == 1  # places none
    # stratified_observed places virtual rewards by the group's own maximum: no bounds needed.
    assert run([0.0, 1.5, 1.0], ["a", "b", "b"], threshold_mode="adaptive",
               strategy="stratified_observed").metrics["groups"] == 1
    # within the 1e-6 tolerance is accepted
    assert run([1.0 + 5e-7, 1.0], ["a", "a"], threshold_mode="adaptive").metrics["groups"] == 1


def test_padding_rows_are_not_bounds_checked():
    assert run([5.0, 0.0, 1.0], ["pad", "a", "a"], valid=torch.tensor([False, True, True])).metrics["groups"] == 1


@pytest.mark.parametrize("mask_dtype", [torch.float32, torch.int64, torch.bool])
def test_a_group_is_padding_only_when_none_of_its_rows_has_a_response_token(mask_dtype):
    # Response tokens anywhere in a row count, not only at its first position, and in any row of the group.
    mask = torch.tensor([[0, 1], [0, 0], [0, 0], [0, 0], [1, 0], [0, 0], [0, 0], [0, 1]]).to(mask_dtype)
    labels = np.array(["a", "a", "pad", "pad", "c", "c", "d", "d"], dtype=object)
    token_rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [0.0, 0.0],
                                  [0.0, 0.0], [0.0, 1.0]])
    config = AVSPOConfig(threshold_mode="never")
    result = compute_token_advantages(token_rewards, mask, labels, config, ThresholdState.initial(config))
    assert result.metrics["groups"] == 3 and result.metrics["samples"] == 6
    assert result.advantages[2:4].abs().sum() == 0 and result.advantages.abs().sum() > 0


def test_token_padding_rows_get_zero_advantage():
    config = AVSPOConfig(threshold_mode="never")
    token_rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    result = compute_token_advantages(token_rewards, mask, np.array(["a", "a", "pad"], dtype=object), config,
                                      ThresholdState.initial(config))
    assert result.advantages[2].tolist() == [0.0, 0.0] and result.metrics["groups"] == 1


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"alpha": 0.0}, r"alpha=0\.0 is invalid: allowed a number in \(0\.0, 1\.0\]"),
        ({"alpha": 1.5}, r"alpha=1\.5"),
        ({"threshold_min": 0.8, "threshold_max": 0.2}, r"threshold_min=0\.8 is above threshold_max=0\.2"),
        ({"strategy": "best"}, r"strategy='best' is invalid: allowed one of stratified, stratified_observed"),
        ({"num_virtual": 0}, r"num_virtual=0 is invalid: allowed 'auto' or an integer >= 1 and <= 1024"),
        ({"num_virtual": 1025}, r"num_virtual=1025 is invalid: allowed 'auto' or an integer >= 1 and <= 1024"),
        ({"num_virtual": "many"}, r"num_virtual='many'"),
        ({"reward_low": 1.0, "reward_high": 0.0}, r"reward_low=1\.0 is not below reward_high=0\.0"),
        ({"collapse_tol": 0.0}, r"collapse_tol=0\.0"),
        ({"epsilon": math.nan}, r"epsilon=nan is invalid: allowed a finite number"),
        ({"epsilon": 0.0}, r"epsilon=0\.0 is invalid: allowed a number in \[1e-09, 1\.0\]"),
        ({"epsilon": 1e-10}, r"epsilon=1e-10 is invalid"),
        ({"epsilon": 2.0}, r"epsilon=2\.0 is invalid"),
        ({"reward_high": math.inf}, r"reward_high=inf is invalid: allowed a finite number"),
        ({"reward_low": -1e31}, r"reward_low=-1e\+31 is invalid: allowed a number in \[-1e\+30, 1e\+30\]"),
        ({"collapse_tol": math.nan}, r"collapse_tol=nan"),
        ({"threshold_lr": 1.5}, r"threshold_lr=1\.5 is invalid: allowed a number in \[0\.0, 1\.0\]"),
        ({"seed": 2**32}, r"seed=4294967296 is invalid: allowed an integer >= 0 and <= 4294967295"),
        ({"seed": 1.0}, r"seed=1\.0 is invalid"),
        ({"entropy_floor": 21.0}, r"entropy_floor=21\.0"),
        ({"stagnation_steps": 10**7}, r"stagnation_steps=10000000 is invalid: allowed an integer >= 0 and <= 1000000"),
        ({"partial": -0.1}, r"partial=-0\.1"),
        ({"decay": 0.0}, r"decay=0\.0"),
        ({"threshold_mode": "adaptive", "threshold_init": 0.95}, r"threshold_init=0\.95 is outside \[threshold_min, threshold_max\]"),
        ({"norm_by_std": "yes"}, r"norm_by_std='yes'"),
        ({"stagnation_steps": -1}, r"stagnation_steps=-1"),
    ],
)
def test_invalid_config_values_name_key_value_and_range(changes, message):
    with pytest.raises(ConfigError, match=message):
        AVSPOConfig(**changes)


def test_fixed_mode_accepts_a_threshold_outside_the_adaptive_clamp():
    assert AVSPOConfig(threshold_mode="fixed", threshold_init=0.95).threshold_init == 0.95


def test_unknown_keys_are_named_with_the_valid_keys():
    with pytest.raises(ConfigError, match=r"unknown key\(s\) algorithm\.avspo\.alpah; valid keys: reward_low, reward_high, collapse_tol, strategy"):
        AVSPOConfig.from_mapping({"alpah": 0.5}, where="algorithm.avspo")
    with pytest.raises(ConfigError, match=r"^algorithm\.avspo: alpha=2"):
        AVSPOConfig.from_mapping({"alpha": 2}, where="algorithm.avspo")


def test_a_key_under_its_earlier_name_is_a_one_line_error_naming_the_key_now():
    with pytest.raises(ConfigError, match=r"^algorithm\.avspo\.apply_to is now algorithm\.avspo\.augmented_collapses: "
                                          r"rename it$"):
        AVSPOConfig.from_mapping({"apply_to": "all_fail", "alpha": 0.25}, where="algorithm.avspo")
    # A misspelling of either name is still an unknown key.
    with pytest.raises(ConfigError, match=r"unknown key\(s\) algorithm\.avspo\.aply_to; valid keys: .*augmented_collapses"):
        AVSPOConfig.from_mapping({"aply_to": "all"}, where="algorithm.avspo")


NUMERIC_KEYS = [
    (config_class, f.name, f.metadata["allowed"])
    for config_class in (AVSPOConfig, MonitorConfig)
    for f in dataclasses.fields(config_class)
    if isinstance(f.metadata["allowed"], (Number, Integer))
]


@pytest.mark.parametrize("config_class, key, allowed", NUMERIC_KEYS, ids=[f"{c.__name__}.{k}" for c, k, _ in NUMERIC_KEYS])
def test_every_numeric_key_has_finite_bounds_and_refuses_nan_and_inf(config_class, key, allowed):
    assert math.isfinite(allowed.low) and math.isfinite(allowed.high)
    for value in (math.nan, math.inf, -math.inf, allowed.high * 2 + 1):
        with pytest.raises(ConfigError, match=rf"^{key}=.* is invalid: allowed "):
            config_class(**{key: value})


def test_the_smallest_epsilon_keeps_untouched_collapsed_groups_finite():
    result = run([0.0, 0.0, 1.0, 1.0, 0.0, 1.0], ["fail", "fail", "pass", "pass", "mixed", "mixed"],
                 epsilon=1e-9, threshold_mode="never")
    assert result.advantages[:4].tolist() == [0.0] * 4 and torch.isfinite(result.advantages).all()


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_rewards_are_refused_on_every_entry_into_the_core(bad):
    config = AVSPOConfig()
    labels = np.array(["a", "a", "b", "b"], dtype=object)
    scores = torch.tensor([0.0, 1.0, 1.0, bad])
    token_rewards = torch.zeros(4, 3)
    token_rewards[:, -1] = scores
    message = r"1 non-finite reward\(s\) \(NaN or inf\); the first is .* at row 3, uid 'b'"
    calls = [
        lambda: compute_group_advantages(scores, labels, config, ThresholdState.initial(config)),
        lambda: compute_token_advantages(token_rewards, torch.ones(4, 3), labels, config, ThresholdState.initial(config)),
        lambda: AVSPOSession().group_advantages(scores, labels, config),
        lambda: AVSPOSession().token_advantages(token_rewards, torch.ones(4, 3), labels, config),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.parametrize("labels", [[3, "3"], np.array([3, "3"], dtype=object), (np.int64(3), "3")])
def test_labels_of_mixed_types_are_refused_naming_two_of_them(labels):
    config = AVSPOConfig()
    with pytest.raises(ValueError, match=r"group labels \(index/uid\) mix int(64)? and str, e.g. (np.int64\(3\)|3) and '3'"):
        compute_group_advantages(torch.tensor([0.0, 1.0]), labels, config, ThresholdState.initial(config))


def test_equal_labels_are_one_group_and_distinct_labels_stay_distinct():
    config = AVSPOConfig(threshold_mode="never")
    for index in (
        [3, 3.0, np.int64(4), 4],
        ["3", "3", "03", "03"],
        torch.tensor([3, 3, 4, 4]),
        np.array([3, 3, 4, 4]),
        np.array(["x", "x", "y", "y"]),
    ):
        result = compute_group_advantages(torch.tensor([0.0, 1.0, 1.0, 1.0]), index, config, ThresholdState.initial(config))
        assert result.metrics["groups"] == 2 and result.metrics["acr"] == 0.5


@pytest.mark.parametrize(
    "index",
    [
        ["a", "a", float("nan"), float("nan")],
        np.array([0.0, 0.0, np.nan, np.nan]),
        torch.tensor([0.0, 0.0, math.nan, math.nan]),
        np.array(["2026-01-01", "2026-01-01", "NaT", "NaT"], dtype="datetime64[D]"),
    ],
    ids=["list", "numpy", "torch", "datetime"],
)
def test_labels_not_equal_to_themselves_are_refused_naming_the_row(index):
    """A list kept each NaN apart and numpy put them in one group: neither is a grouping, so both are refused."""
    config = AVSPOConfig(threshold_mode="never")
    with pytest.raises(ValueError, match=r"^group label \(index/uid\) (nan|NaT) at row 2 \(2 row\(s\) in all\) is not "
                                         r"equal to itself, so it names no group: give every row a label that equals itself"):
        compute_group_advantages(torch.tensor([0.0, 1.0, 1.0, 1.0]), index, config, ThresholdState.initial(config))


def test_unhashable_labels_are_named():
    with pytest.raises(ValueError, match=r"group labels \(index/uid\) must be hashable: \[1\] \(list\) is not"):
        run([0.0, 1.0], np.array([[1], [2]] + [None], dtype=object)[:2])


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_integer_and_boolean_rewards_are_read_as_float32_like_verl_grpo_vectorized(dtype):
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, compute_grpo_vectorized_outcome_advantage

    rng = np.random.default_rng(1)
    labels = np.repeat([f"uid-{j}" for j in range(32)], 8).astype(object)
    token_rewards = torch.zeros(256, 5, dtype=dtype)
    token_rewards[:, -1] = torch.as_tensor(rng.integers(0, 2, 256)).to(dtype)
    mask = torch.ones(256, 5)
    config = AVSPOConfig(threshold_mode="never")
    ours = compute_token_advantages(token_rewards, mask, labels, config, ThresholdState.initial(config)).advantages
    # verl's own GRPO refuses integer rewards (torch.mean of an int tensor); on the same rewards as float32
    # it is the bit-for-bit oracle, and grpo_vectorized (which reads them as float32) agrees to rounding.
    expected, _ = compute_grpo_outcome_advantage(token_rewards.to(torch.float32), mask, labels)
    vectorized, _ = compute_grpo_vectorized_outcome_advantage(token_rewards, mask, labels)
    assert ours.dtype == torch.float32 and torch.equal(ours, expected)
    torch.testing.assert_close(ours, vectorized, rtol=1e-5, atol=1e-5)


def test_integer_rewards_beyond_float32_integers_and_complex_rewards_are_refused():
    with pytest.raises(ValueError, match=r"integer reward 16777217 at row 1 \(uid 'a'\) is beyond 2\*\*24.*float64"):
        run_raw(torch.tensor([0, 2**24 + 1]), ["a", "a"])
    with pytest.raises(ValueError, match=r"rewards must be real numbers \(a float, integer or bool tensor\), got dtype torch.complex64"):
        run_raw(torch.zeros(2, dtype=torch.complex64), ["a", "a"])


def test_statistics_the_reward_dtype_cannot_hold_are_an_error_not_nan():
    # float16 rounds epsilon = 1e-9 to 0: a collapsed group would get 0 / 0.
    with pytest.raises(ValueError, match=r"advantage of row 0 \(uid 'a'\) is nan .*float16 cannot hold its group's statistics"):
        run_raw(torch.tensor([1.0, 1.0, 0.0, 1.0], dtype=torch.float16), ["a", "a", "b", "b"], epsilon=1e-9)
    # float32 sums beyond 3.4e38 overflow (verl's GRPO gives NaN advantages here, silently).
    with pytest.raises(ValueError, match=r"advantage of row 0 \(uid 'a'\) is nan .*mean inf"):
        run_raw(torch.tensor([3e38, 3e38, 0.0, 1.0]), ["a", "a", "b", "b"])


def run_raw(scores, labels, **config):
    """One monitor-only core call on a reward tensor kept in its own dtype."""
    cfg = AVSPOConfig(threshold_mode="never", **config)
    return compute_group_advantages(scores, np.asarray(labels, dtype=object), cfg, ThresholdState.initial(cfg))


def test_numpy_labels_are_named_as_plain_values():
    config = AVSPOConfig()
    with pytest.raises(ValueError, match=r"at row 2, uid 1$"):
        compute_group_advantages(torch.tensor([0.0, 1.0, math.nan, 1.0]), np.array([0, 0, 1, 1]), config,
                                 ThresholdState.initial(config))


# ------------------------------------------------------------------ plain Python and numpy into the public API
# docs/using/api.md: rewards and masks as tensors, numpy arrays or lists of numbers; the config as an AVSPOConfig or
# a mapping of its keys; state None for a fresh one. Each accepted form gives exactly the tensor call's result.

REWARDS = [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
UIDS = list("aaaabbbbcccc")
ALWAYS = {"threshold_mode": "always"}


def same_result(got, want):
    assert torch.equal(got.advantages, want.advantages) and got.advantages.dtype == want.advantages.dtype
    assert got.metrics == want.metrics and got.state == want.state


@pytest.mark.parametrize(
    "plain, tensor",
    [
        (REWARDS, torch.tensor(REWARDS)),
        (tuple(REWARDS), torch.tensor(REWARDS)),
        (np.array(REWARDS), torch.tensor(REWARDS, dtype=torch.float64)),
        (np.array(REWARDS, dtype=np.float32), torch.tensor(REWARDS)),
        ([int(r) for r in REWARDS], torch.tensor(REWARDS).to(torch.int64)),
        ([bool(r) for r in REWARDS], torch.tensor(REWARDS).to(torch.bool)),
    ],
    ids=["list", "tuple", "numpy-float64", "numpy-float32", "list-of-int", "list-of-bool"],
)
def test_rewards_as_lists_and_numpy_arrays_equal_the_tensor_call(plain, tensor):
    config = AVSPOConfig(**ALWAYS)
    state = ThresholdState.initial(config)
    same_result(compute_group_advantages(plain, UIDS, config, state), compute_group_advantages(tensor, UIDS, config, state))
    want = AVSPOSession().group_advantages(tensor, UIDS, config)
    same_result(AVSPOSession().group_advantages(plain, UIDS, config), want)


def test_a_mapping_config_state_none_and_list_masks_equal_the_typed_call():
    config = AVSPOConfig(**ALWAYS)
    scores = torch.tensor(REWARDS)
    want = compute_group_advantages(scores, UIDS, config, ThresholdState.initial(config))
    same_result(compute_group_advantages(scores, UIDS, dict(ALWAYS)), want)
    same_result(compute_group_advantages(scores, UIDS, config, None), want)
    same_result(AVSPOSession().group_advantages(scores, UIDS, dict(ALWAYS)), want)
    valid = [True] * 8 + [False] * 4
    same_result(compute_group_advantages(REWARDS, UIDS, config, valid=valid),
                compute_group_advantages(scores, UIDS, config, valid=torch.tensor(valid)))
    token_rewards, mask = [[0.0, r] for r in REWARDS], [[1, 1]] * len(REWARDS)
    same_result(compute_token_advantages(token_rewards, mask, UIDS, dict(ALWAYS)),
                compute_token_advantages(torch.tensor(token_rewards), torch.tensor(mask), UIDS, config,
                                         ThresholdState.initial(config)))
    with pytest.raises(ConfigError, match="unknown key"):
        compute_group_advantages(scores, UIDS, {"treshold_mode": "always"})


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: compute_group_advantages("1 0 1", UIDS, AVSPOConfig()),
         "scores must be a torch.Tensor, a numpy array or a list of numbers; got str"),
        (lambda: compute_group_advantages(["1", "0"], ["a", "a"], AVSPOConfig()),
         "scores must be a torch.Tensor, a numpy array or a list of numbers; got a list torch cannot read"),
        (lambda: compute_group_advantages(np.array(["1", "0"]), ["a", "a"], AVSPOConfig()),
         "scores must be a torch.Tensor, a numpy array or a list of numbers; got a numpy array of dtype <U1"),
        (lambda: compute_group_advantages(REWARDS, UIDS, AVSPOConfig(), valid={"a": True}),
         "valid must be a torch.Tensor, a numpy array or a list of numbers; got dict"),
        (lambda: compute_token_advantages(REWARDS, None, UIDS, AVSPOConfig()),
         "response_mask must be a torch.Tensor, a numpy array or a list of numbers; got NoneType"),
        (lambda: compute_group_advantages(REWARDS, UIDS, ["always"]),
         "config must be an AVSPOConfig or a mapping of its keys (a dict); got list"),
        (lambda: AVSPOSession().group_advantages(REWARDS, UIDS, "always"),
         "config must be an AVSPOConfig or a mapping of its keys (a dict); got str"),
        (lambda: compute_group_advantages(REWARDS, UIDS, AVSPOConfig(), {"tau": 0.5}),
         "state must be a ThresholdState or None (a fresh state); got dict"),
    ],
    ids=["str-rewards", "list-of-str", "numpy-str", "dict-valid", "none-mask", "list-config", "str-config",
         "dict-state"],
)
def test_other_types_are_a_type_error_naming_the_argument_and_the_types(call, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        call()


INTEGER_DTYPES = [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64]


@pytest.mark.parametrize("library", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=lambda dtype: dtype.__name__)
def test_rewards_of_every_integer_dtype_are_read_as_float32(library, dtype):
    """bad-inputs.md: integer rewards are read as float32, whatever their width or sign (uint16-64 had no abs)."""
    rewards = np.array([0, 1, 1, 1, 0, 0, 0, 0], dtype=dtype)
    given = rewards if library == "numpy" else torch.from_numpy(rewards)
    index, config = list("aaaabbbb"), AVSPOConfig(**ALWAYS)
    want = compute_group_advantages(torch.from_numpy(rewards.astype(np.float32)), index, config)
    assert want.advantages.dtype == torch.float32
    same_result(compute_group_advantages(given, index, config), want)
    same_result(AVSPOSession().group_advantages(given, index, config), want)
    tokens = np.stack([np.zeros_like(rewards), rewards], axis=1)
    tokens = tokens if library == "numpy" else torch.from_numpy(tokens)
    same_result(compute_token_advantages(tokens, np.ones((8, 2), dtype=dtype), index, config),
                compute_token_advantages(torch.from_numpy(np.stack([np.zeros(8), rewards], 1).astype(np.float32)),
                                         torch.ones(8, 2), index, config))


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64, np.int64], ids=lambda dtype: dtype.__name__)
def test_integer_rewards_of_any_dtype_beyond_float32_integers_are_refused(dtype):
    with pytest.raises(ValueError, match=r"integer reward 16777217 at row 1 \(uid 'a'\) is beyond 2\*\*24"):
        compute_group_advantages(np.array([0, 2**24 + 1], dtype=dtype), ["a", "a"], AVSPOConfig())


@pytest.mark.parametrize("index", ["prompt-7", b"prompt-7", 7, {"a": 1}], ids=["str", "bytes", "int", "dict"])
def test_an_index_that_is_not_a_list_an_array_or_a_tensor_is_a_type_error_naming_it(index):
    """A string was split into characters: one 2-row group and singletons, wrong advantages, no error."""
    message = (f"index must be a list, a numpy array or a tensor of group labels, one per row; got "
               f"{type(index).__name__}")
    for call in (lambda: compute_group_advantages([0.0] * 8, index, AVSPOConfig()),
                 lambda: AVSPOSession().group_advantages([0.0] * 8, index, AVSPOConfig()),
                 lambda: compute_token_advantages([[0.0]] * 8, [[1]] * 8, index, AVSPOConfig())):
        with pytest.raises(TypeError, match=re.escape(message)):
            call()


# docs/using/api.md's table of what the entry points take, row by row: each form a row names gives the typed call's
# result (the typed forms: float32 tensors, an AVSPOConfig, a fresh ThresholdState).
TYPED = {"scores": torch.tensor(REWARDS), "index": np.array(UIDS, dtype=object), "config": AVSPOConfig(**ALWAYS),
         "valid": torch.tensor([True] * 10 + [False] * 2)}
DOCUMENTED_FORMS = [
    ("scores", np.array(REWARDS, dtype=np.float32)), ("scores", REWARDS), ("scores", tuple(REWARDS)),
    ("valid", TYPED["valid"].numpy()), ("valid", TYPED["valid"].tolist()),
    ("config", dict(ALWAYS)), ("state", None), ("state", ThresholdState.initial(AVSPOConfig(**ALWAYS))),
    ("index", UIDS), ("index", tuple(UIDS)), ("index", np.array(UIDS)),
    ("index", torch.tensor([ord(uid) for uid in UIDS])),
]  # fmt: skip


@pytest.mark.parametrize("argument,form", DOCUMENTED_FORMS,
                         ids=[f"{argument}-{type(form).__name__}" for argument, form in DOCUMENTED_FORMS])
def test_each_documented_form_gives_the_typed_calls_result(argument, form):
    want = compute_group_advantages(**TYPED)
    same_result(compute_group_advantages(**{**TYPED, argument: form}), want)
