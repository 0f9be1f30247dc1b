"""Collapse-aware prompt selection (core/selection.py): the rules, the history, the metrics, the state, bad input."""

import json
import logging
import re

import numpy as np
import pytest
import torch

from avspo_plugin import ConfigError, PromptSelector, SelectionConfig
from avspo_plugin.core.selection import (
    ALL_FAIL,
    ALL_PASS,
    OTHER_COLLAPSE,
    SPLIT,
    prediction_tallies,
    retry_probability,
    skip_mask,
)

ON = SelectionConfig(enable=True)


def rows(groups):
    """(ids per row, scores) of groups {prompt id: rewards of its responses}."""
    ids = [pid for pid, rewards in groups.items() for _ in rewards]
    return ids, torch.tensor([r for rewards in groups.values() for r in rewards], dtype=torch.float32)


def observe(selector, groups, step):
    selector.observe(*rows(groups), step=step)


def test_retry_probability_law():
    streak = np.array([0, 1, 2, 1, 1])
    age = np.array([0, 0, 0, 100, 200])
    p = retry_probability(streak, age, explore=0.5, min_collapsed_visits=1, retry_half_life=100.0)
    # not predicted: 1; explore**(s - m + 1) at age 0; the skip chance 1 - p halves every half-life.
    np.testing.assert_allclose(p, [1.0, 0.5, 0.25, 0.75, 0.875])
    never = retry_probability(streak, age, explore=1.0, min_collapsed_visits=1, retry_half_life=100.0)
    np.testing.assert_array_equal(never, np.ones(5))
    # min_collapsed_visits = 2: a single collapse predicts nothing.
    p2 = retry_probability(np.array([1, 2]), np.zeros(2, dtype=np.int64), 0.5, 2, 100.0)
    np.testing.assert_allclose(p2, [1.0, 0.5])


def test_cap_keeps_the_least_sure_skips():
    retry = np.full(10, 0.2)
    draws = np.linspace(0.3, 0.9, 10)  # every draw skips; margins grow with the index
    skip, capped = skip_mask(retry, draws, max_skip_fraction=0.3)
    assert skip.tolist() == [False] * 7 + [True] * 3
    assert capped.tolist() == [True] * 7 + [False] * 3
    skip, capped = skip_mask(retry, draws, max_skip_fraction=0.0)
    assert not skip.any() and capped.all()
    # A draw below the retry probability keeps the candidate, cap or no cap.
    skip, capped = skip_mask(np.array([0.5, 0.5, 1.0]), np.array([0.4, 0.6, 0.99]), 0.9)
    assert skip.tolist() == [False, True, False] and not capped.any()


def test_observe_history_and_collapse_kinds():
    selector = PromptSelector(ON)
    observe(selector, {"a": [0, 0, 0, 0], "b": [1, 1, 1, 1 + 1e-9], "c": [0, 0, 0, 1e-3], "d": [0.5, 0.5], "e": [1]}, 3)
    state = selector.state_dict()
    by_id = {i: k for k, i in enumerate(state["ids"])}
    assert [state["kind"][by_id[i]] for i in "abcde"] == [ALL_FAIL, ALL_PASS, SPLIT, OTHER_COLLAPSE, SPLIT]
    assert [state["streak"][by_id[i]] for i in "abcde"] == [1, 1, 0, 1, 0]
    assert all(state["last_seen"][by_id[i]] == 3 for i in "abcde")
    observe(selector, {"a": [0, 0], "b": [0, 1]}, 4)
    state = selector.state_dict()
    assert state["streak"][by_id["a"]] == 2 and state["streak"][by_id["b"]] == 0
    assert state["visits"][by_id["a"]] == 2
    assert state["group_size"] == 2


def test_counted_collapses_counts_one_kind_of_collapse_only():
    selector = PromptSelector(ON.replace(counted_collapses="all_fail"))
    observe(selector, {"fail": [0, 0, 0], "pass": [1, 1, 1]}, 0)
    assert selector.predicted(["fail", "pass"]).tolist() == [True, False]


def test_choose_skips_at_the_retry_rate_and_respects_the_cap():
    n = 4000
    selector = PromptSelector(ON.replace(max_skip_fraction=0.9), dataset_ids=range(2 * n))
    # Half the prompts collapsed once, half were split.
    ids = np.repeat(np.arange(2 * n), 2)
    scores = torch.tensor(np.where(np.arange(2 * n) < n, 0.0, 0.5)).repeat_interleave(2)
    scores[1::2] += torch.where(torch.arange(2 * n) < n, 0.0, 0.25).double()
    selector.observe(ids, scores, step=0)
    keep = selector.choose(np.arange(2 * n), step=0)
    assert keep[n:].all()  # unpredicted prompts are always generated
    skipped = 1 - keep[:n].mean()
    assert abs(skipped - 0.5) < 4 * np.sqrt(0.25 / n)  # explore = 0.5 at age 0
    metrics = selector.pop_metrics()
    assert metrics["selection/predicted"] == n and metrics["selection/skipped"] == (~keep).sum()
    assert metrics["selection/rollouts_saved"] == 2 * (~keep).sum()
    assert metrics["selection/skipped_all_fail"] == (~keep).sum()
    # A tight cap binds: at most floor(f * n) of the candidates of one choice are skipped.
    capped = PromptSelector(ON.replace(max_skip_fraction=0.1, explore=0.0), dataset_ids=range(2 * n))
    capped.observe(ids, scores, step=0)
    keep = capped.choose(np.arange(2 * n), step=0)
    assert (~keep).sum() == int(0.1 * 2 * n)
    assert capped.pop_metrics()["selection/capped"] == n - int(0.1 * 2 * n)


def test_choices_reproduce_and_depend_on_seed_and_step():
    def mask(seed, step):
        selector = PromptSelector(ON.replace(seed=seed))
        observe(selector, {i: [0, 0] for i in range(200)}, 0)
        return selector.choose(list(range(200)), step)

    assert (mask(0, 5) == mask(0, 5)).all()
    assert (mask(0, 5) != mask(1, 5)).any() and (mask(0, 5) != mask(0, 6)).any()


def test_disabled_selection_keeps_everything():
    selector = PromptSelector(SelectionConfig())
    observe(selector, {i: [0, 0] for i in range(50)}, 0)
    assert selector.choose(list(range(50)), 1).all()


def test_precision_and_recall_weigh_retried_prompts_by_their_retry_probability():
    selector = PromptSelector(ON.replace(explore=0.25, max_skip_fraction=0.0))  # the cap keeps all: weight 1
    observe(selector, {"p": [0, 0], "q": [1, 1], "r": [0, 1], "s": [0, 1]}, 0)
    assert selector.choose(["p", "q", "r", "s"], 0).all()
    assert selector.pop_metrics()["selection/capped"] == 2
    # p collapses again (hit), q does not (false alarm), r collapses unpredicted (miss), s stays split.
    observe(selector, {"p": [0, 0], "q": [0, 1], "r": [1, 1], "s": [0, 1]}, 1)
    metrics = selector.pop_metrics()
    assert metrics["selection/precision"] == 0.5 and metrics["selection/recall"] == 0.5
    # Now retried by the draw: p's observation stands for 1 / p_retry predicted prompts.
    t = prediction_tallies(np.array([True, True, False]), np.array([True, False, True]), np.array([0.25, 0.5, 1.0]))
    assert t == {"hit": 4.0, "predicted_weight": 6.0, "missed": 1.0}


def test_first_visits_are_not_judged():
    selector = PromptSelector(ON)
    observe(selector, {"a": [0, 0]}, 0)
    metrics = selector.pop_metrics()
    assert metrics["selection/observed_collapsed"] == 1
    assert "selection/recall" not in metrics and "selection/precision" not in metrics
    assert selector.pop_metrics() == {}


RESUMED = ON.replace(retry_half_life=3.0)


def run(selector, steps):
    """(keep mask, metrics) of each step: 40 prompts offered, the kept ones observed (odd ids collapse, all-pass
    when a multiple of 3 and all-fail otherwise; even ids split)."""
    steps_seen = []
    for step in steps:
        keep = selector.choose(list(range(40)), step)
        kept = [i for i in range(40) if keep[i]]
        observe(selector, {i: [float(i % 3 == 0)] * 2 if i % 2 else [0, 1] for i in kept}, step)
        steps_seen.append((keep, selector.pop_metrics()))
    return steps_seen


def test_state_round_trips_through_json_and_continues_identically():
    straight = PromptSelector(RESUMED, dataset_ids=range(40))
    expected = run(straight, range(6))
    first = PromptSelector(RESUMED, dataset_ids=range(40))
    run(first, range(3))
    resumed = PromptSelector(RESUMED, dataset_ids=range(40))
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    got = run(resumed, range(3, 6))
    assert all((a == b).all() and m == n for (a, m), (b, n) in zip(expected[3:], got))
    assert resumed.totals() == straight.totals()


def test_a_state_saved_under_the_earlier_key_regime_resumes_identically():
    # Before the key was renamed, the history of each prompt's last collapse kind was saved as "regime".
    first = PromptSelector(RESUMED, dataset_ids=range(40))
    run(first, range(3))
    state = json.loads(json.dumps(first.state_dict()))
    assert {ALL_FAIL, ALL_PASS} <= set(state["kind"])
    earlier = {("regime" if key == "kind" else key): value for key, value in state.items()}
    resumed = {}
    for key, saved in (("kind", state), ("regime", earlier)):
        resumed[key] = PromptSelector(RESUMED, dataset_ids=range(40))
        resumed[key].load_state_dict(saved)
        assert resumed[key].state_dict() == state
    got = {key: run(selector, range(3, 6)) for key, selector in resumed.items()}
    assert all((a == b).all() and m == n for (a, m), (b, n) in zip(got["kind"], got["regime"]))
    assert sum(metrics["selection/skipped_all_fail"] for _, metrics in got["regime"]) > 0  # the kinds were read
    assert resumed["regime"].state_dict() == resumed["kind"].state_dict()


def test_a_selection_state_holding_both_the_earlier_key_and_its_new_name_is_refused():
    state = PromptSelector(ON).state_dict()
    with pytest.raises(ValueError, match=r"prompt-selection state holds both 'regime' .* and 'kind'"):
        PromptSelector(ON).load_state_dict({**state, "regime": state["kind"]})


def test_config_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"algorithm\.avspo_selection: max_skip_fraction=1\.0 is invalid: allowed a number in \[0\.0, 1\.0\)"):
        SelectionConfig.from_mapping({"max_skip_fraction": 1.0}, where="algorithm.avspo_selection")
    with pytest.raises(ConfigError, match=r"unknown key\(s\) avspo_selection\.half_life"):
        SelectionConfig.from_mapping({"half_life": 3})
    with pytest.raises(ConfigError, match="min_collapsed_visits=0 is invalid"):
        SelectionConfig(min_collapsed_visits=0)
    with pytest.raises(ConfigError, match="id_key='' is invalid"):
        SelectionConfig(id_key="")
    with pytest.raises(ConfigError, match=re.escape("reward_low=1.0 is not below reward_high=1.0")):
        SelectionConfig(reward_low=1.0)


def test_the_earlier_name_apply_to_is_read_as_counted_collapses(caplog, monkeypatch):
    monkeypatch.setattr("avspo_plugin.config._WARNED_EARLIER_NAMES", set())
    where = "algorithm.avspo_selection"
    with caplog.at_level(logging.WARNING, logger="avspo_plugin.config"):
        earlier = SelectionConfig.from_mapping({"enable": True, "apply_to": "all_pass"}, where=where)
    assert earlier == SelectionConfig.from_mapping({"enable": True, "counted_collapses": "all_pass"}, where=where)
    assert earlier == ON.replace(counted_collapses="all_pass")
    assert caplog.messages == [f"{where}.apply_to is read as {where}.counted_collapses, its name now: rename it"]
    with pytest.raises(ConfigError, match=rf"^{re.escape(where)}\.apply_to='all_pass' and {re.escape(where)}\.counted_collapses="
                                          r"'all_fail' are both set"):
        SelectionConfig.from_mapping({"apply_to": "all_pass", "counted_collapses": "all_fail"}, where=where)
    with pytest.raises(ConfigError, match=r"unknown key\(s\) avspo_selection\.aply_to"):
        SelectionConfig.from_mapping({"aply_to": "all"})


def test_bad_ids():
    with pytest.raises(ValueError, match=r"unique id per prompt in the dataset field 'index'; 1 id\(s\) repeat, e\.g\. \[0\]"):
        PromptSelector(ON, dataset_ids=[0, 1, 0])
    selector = PromptSelector(ON, dataset_ids=[0, 1, 2])
    with pytest.raises(ValueError, match=r"choose: 1 prompt id\(s\) not in the training dataset .*3 prompts, id field 'index'.*\[7\]"):
        selector.choose([0, 7], 0)
    with pytest.raises(ValueError, match=r"observe: 1 prompt id\(s\) not in the training dataset"):
        selector.observe([5, 5], torch.zeros(2), 0)
    with pytest.raises(ValueError, match=r"must be int or str.*NoneType None"):
        PromptSelector(ON).choose([1, None], 0)
    with pytest.raises(ValueError, match=r"must be int or str.*float nan"):
        PromptSelector(ON).observe([float("nan")] * 2, torch.zeros(2), 0)
    with pytest.raises(ValueError, match="mix int and str"):
        PromptSelector(ON).observe([1, "1"], torch.zeros(2), 0)
    with pytest.raises(ValueError, match="3 prompt ids for 2 scores"):
        selector.observe([0, 0, 1], torch.zeros(2), 0)
    with pytest.raises(ValueError, match=r"non-finite reward\(s\); the first is nan at row 1, prompt id 0"):
        selector.observe([0, 0], torch.tensor([0.0, float("nan")]), 0)


def test_resume_with_another_dataset(caplog):
    old = PromptSelector(ON, dataset_ids=range(10))
    observe(old, {i: [0, 0] for i in range(10)}, 0)
    state = old.state_dict()
    with pytest.raises(ValueError, match=r"another dataset: 10 prompts .* there, 11 prompts .* now .*on_dataset_change=reset"):
        PromptSelector(ON, dataset_ids=range(11)).load_state_dict(state)
    fresh = PromptSelector(ON.replace(on_dataset_change="reset"), dataset_ids=range(11))
    with caplog.at_level(logging.WARNING):
        fresh.load_state_dict(state)
    assert "starts afresh" in caplog.text
    assert not fresh.predicted(list(range(10))).any()
    # The same ids in another order are the same dataset.
    same = PromptSelector(ON, dataset_ids=list(reversed(range(10))))
    same.load_state_dict(state)
    assert same.predicted(list(range(10))).all()
    with pytest.raises(ValueError, match="format 2"):
        same.load_state_dict({**state, "format": 2})
    with pytest.raises(ValueError, match=r"lacks \['totals'\]"):
        same.load_state_dict({k: v for k, v in state.items() if k != "totals"})


def test_queries_of_new_ids_in_an_open_set():
    selector = PromptSelector(ON)
    assert selector.predicted(["new", "other"]).tolist() == [False, False]
    assert selector.judged(["third"]).tolist() == [False]
    observe(selector, {"new": [0, 0]}, 0)
    assert selector.predicted(["new", "fourth"]).tolist() == [True, False]
    assert selector.judged(["new"]).tolist() == [True]
