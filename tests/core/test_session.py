"""AVSPOSession: one process's threshold state, warnings and pending metrics across estimator calls."""

import json
import logging

import numpy as np
import pytest
import torch

from avspo_plugin import AVSPOConfig
from avspo_plugin.core import AVSPOSession, ThresholdState, aggregate_metrics, compute_group_advantages
from avspo_plugin.core.advantage import compute_token_advantages
from avspo_plugin.core.session import state_settings

LOGGER = "tests.core.session"


def batch_with(collapsed_groups, mixed_groups, passing):
    """Groups of 4: `collapsed_groups` all-pass (passing=True) or all-fail, `mixed_groups` half right."""
    rows = [[float(passing)] * 4] * collapsed_groups + [[0.0, 1.0, 0.0, 1.0]] * mixed_groups
    labels = np.repeat([f"p{j}" for j in range(len(rows))], 4).astype(object)
    return torch.tensor(rows).reshape(-1), labels


# ACR 0.75 / J 0.125, ACR 0.25 / J 0.375, ACR 0.75 / J 0.875: the threshold moves after step 2.
BATCHES = [batch_with(3, 1, False), batch_with(1, 3, False), batch_with(3, 1, True)]


def by_hand(config, batches, state=None):
    """The core's results of `batches` in a row, the state carried by hand."""
    state = ThresholdState.initial(config) if state is None else state
    results = []
    for scores, labels in batches:
        results.append(compute_group_advantages(scores, labels, config, state))
        state = results[-1].state
    return results


def run_steps(session, config, batches):
    """One call and one close per batch, as a host with one estimator call per step."""
    results = []
    for scores, labels in batches:
        results.append(session.group_advantages(scores, labels, config))
        session.close_step()
    return results


def test_threshold_state_is_carried_across_steps():
    config = AVSPOConfig(threshold_mode="adaptive", threshold_lr=0.5)
    session = AVSPOSession()
    results = run_steps(session, config, BATCHES)
    expected = by_hand(config, BATCHES)
    assert [r.metrics["threshold"] for r in results] == [0.5, 0.5, 0.375]
    assert session.state == expected[-1].state and session.state.step == 3
    assert session.state.tau == pytest.approx(0.5625)
    for got, want in zip(results, expected):
        assert torch.equal(got.advantages, want.advantages)
    assert session.config == config


def test_token_advantages_share_the_state_with_group_advantages():
    config = AVSPOConfig(threshold_mode="adaptive", threshold_lr=0.5)
    session = AVSPOSession()
    scores, labels = BATCHES[0]
    session.group_advantages(scores, labels, config)
    session.close_step()
    mask = torch.ones(len(scores), 3)
    rewards = torch.zeros(len(scores), 3)
    rewards[:, -1] = BATCHES[1][0]
    result = session.token_advantages(rewards, mask, BATCHES[1][1], config)
    expected = compute_token_advantages(rewards, mask, BATCHES[1][1], config, by_hand(config, BATCHES[:1])[0].state)
    assert torch.equal(result.advantages, expected.advantages)
    session.close_step()
    assert session.state == expected.state and session.state.step == 2


def saved_state(tau, prev_reward_mean, step, settings=None):
    """A saved session state with this threshold state; ``settings``: those it was made under (None: the format saved
    before states recorded them, which has no such key)."""
    state = {"format": 1, "threshold": ThresholdState(tau, prev_reward_mean, step).state_dict(),
             "warnings": AVSPOSession().warnings.state_dict(), "logged_steps": step}
    return state if settings is None else {**state, "settings": state_settings(settings)}


def test_threshold_is_kept_while_its_settings_stay_and_starts_over_when_one_changes(caplog):
    config = AVSPOConfig(threshold_mode="adaptive", threshold_lr=0.5)
    session = AVSPOSession(log=logging.getLogger(LOGGER))
    run_steps(session, config, BATCHES)
    carried = session.state
    assert carried != ThresholdState.initial(config)

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        session.configure(config.replace(stagnation_steps=7, strategy="opposite"))
        assert session.state == carried and caplog.records == []  # neither moves tau nor decides K
        assert session.warnings.stagnation.patience == 7  # the warnings take the new limits
        session.configure(config.replace(alpha=0.25, threshold_init=0.3))
    assert session.state == ThresholdState(tau=0.3)
    (warning,) = [record.getMessage() for record in caplog.records]
    assert warning == ("AVSPO threshold state of this process was made under threshold_init=0.5, alpha=0.5; the config "
                       "in force has threshold_init=0.3, alpha=0.25: the threshold starts over (tau = threshold_init = "
                       "0.3, step t = 0), as in a fresh run with this config; the warning streaks are kept")


def test_restored_state_is_kept_by_the_first_config():
    config = AVSPOConfig(threshold_mode="adaptive", threshold_lr=0.5, threshold_init=0.3)
    session = AVSPOSession()
    session.load_state_dict(saved_state(0.7, 0.25, 4, settings=config))
    session.configure(config)
    assert session.state == ThresholdState(tau=0.7, prev_reward_mean=0.25, step=4)


@pytest.mark.parametrize("configure_first", [True, False], ids=["configured-then-resumed", "resumed-then-configured"])
@pytest.mark.parametrize("change", [{"threshold_init": 0.3}, {"threshold_mode": "fixed"}, {"threshold_lr": 0.1},
                                    {"threshold_max": 0.95}, {"alpha": 0.25}, {"num_virtual": 2}],
                         ids=lambda change: next(iter(change)))
def test_a_resume_under_other_settings_starts_over_as_a_change_in_this_process_does(caplog, change, configure_first):
    """Saved under tau_0 = 0.9 and tau moved to 0.85; resumed under other settings: one warning naming the file and
    each setting's two values, and the run continues as a fresh run with the new config, whichever comes first (the
    host's configure or its resume), as a session whose config changes in this process does."""
    saved_under = AVSPOConfig(threshold_mode="adaptive", threshold_init=0.9, threshold_lr=0.5)
    now = saved_under.replace(**change)
    session = AVSPOSession(log=logging.getLogger(LOGGER))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        if configure_first:
            session.configure(now)
        session.load_state_dict(saved_state(0.85, 0.25, 4, settings=saved_under), source="run/avspo_state.json")
        session.configure(now)
    ((key, value),) = change.items()
    (warning,) = [record.getMessage() for record in caplog.records]
    assert warning.startswith(f"AVSPO threshold state read from run/avspo_state.json was made under {key}="
                              f"{getattr(saved_under, key)!r}; the config in force has {key}={value!r}: the threshold "
                              f"starts over (tau = threshold_init = {now.threshold_init}, step t = 0)")
    fresh, changed = AVSPOSession(), AVSPOSession()
    run_steps(changed, saved_under, BATCHES[:1])
    for ours, theirs in zip(run_steps(session, now, BATCHES), run_steps(fresh, now, BATCHES)):
        assert torch.equal(ours.advantages, theirs.advantages) and ours.metrics == theirs.metrics
    run_steps(changed, now, BATCHES)
    assert session.state == fresh.state == changed.state


def test_the_issues_resume_augments_as_a_fresh_run_does():
    """Saved under threshold_init 0.9, resumed under 0.3: a batch at ACR 0.5 augments half its groups, as a fresh run
    with the resumed config does (before, the saved tau 0.9 was kept and nothing was augmented)."""
    scores, labels = batch_with(2, 2, False)
    resumed_config = AVSPOConfig(threshold_mode="adaptive", threshold_init=0.3)
    session = AVSPOSession()
    session.load_state_dict(saved_state(0.9, 0.25, 10, settings=resumed_config.replace(threshold_init=0.9)))
    resumed = session.group_advantages(scores, labels, resumed_config)
    assert resumed.metrics["augmented_groups"] == 0.5 and resumed.metrics["threshold"] == 0.3
    assert torch.equal(resumed.advantages, AVSPOSession().group_advantages(scores, labels, resumed_config).advantages)


def test_a_state_saved_before_states_recorded_their_settings_still_loads(caplog):
    """The old format (no "settings"): kept under whatever config is in force, its tau clipped into the range; saved
    again with the settings in force."""
    config = AVSPOConfig(threshold_mode="adaptive", threshold_init=0.3)
    session = AVSPOSession(log=logging.getLogger(LOGGER))
    old = saved_state(0.7, 0.25, 4)
    assert "settings" not in old
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        session.load_state_dict(json.loads(json.dumps(old)), source="old/avspo_state.json")
        session.configure(config)
    assert session.state == ThresholdState(tau=0.7, prev_reward_mean=0.25, step=4) and caplog.records == []
    assert session.state_dict()["settings"] == state_settings(config)


def test_calls_of_one_step_are_one_step_of_eq_12():
    # A step split into two calls (verl's parameter_sync_step=2) moves the threshold as one call over
    # the whole step: the same tau for both calls, one update with the step's pooled ACR and reward.
    # (Each call's trigger and K follow its own ACR, the only one known when it runs.)
    config = AVSPOConfig(threshold_mode="adaptive", threshold_lr=0.5, stagnation_acr=0.0)  # no warnings: the metrics alone
    split, whole = AVSPOSession(), AVSPOSession()
    steps = [BATCHES[:2], BATCHES[2:], BATCHES[1:]]
    for calls in steps:
        halves = [split.group_advantages(scores, labels, config) for scores, labels in calls]
        scores = torch.cat([scores for scores, _ in calls])
        labels = np.concatenate([[f"call{i}-{label}" for label in labels] for i, (_, labels) in enumerate(calls)])
        one = whole.group_advantages(scores, labels, config)
        assert {half.metrics["threshold"] for half in halves} == {one.metrics["threshold"]}
        split_metrics, whole_metrics = split.pop_metrics(), whole.pop_metrics()
        pooled = ("acr", "acr_all_fail", "acr_all_pass", "near_collapse", "groups", "samples", "reward_mean")
        assert {k: split_metrics[k] for k in pooled} == pytest.approx({k: whole_metrics[k] for k in pooled}, abs=1e-15)
        assert split.state == whole.state
    assert split.state.step == 3 and split.state.tau != config.threshold_init


def test_pending_metrics_are_folded_into_one_step_and_cleared():
    config = AVSPOConfig(threshold_mode="adaptive", threshold_lr=0.5, stagnation_acr=0.0)  # no warnings: the metrics alone
    session = AVSPOSession()
    for scores, labels in BATCHES[:2]:
        session.group_advantages(scores, labels, config)
    initial = ThresholdState.initial(config)
    expected = aggregate_metrics([compute_group_advantages(s, labels, config, initial).metrics for s, labels in BATCHES[:2]])
    assert session.pop_metrics() == expected
    assert expected["groups"] == 8.0 and expected["acr"] == pytest.approx(0.5) and expected["samples"] == 32.0
    assert session.pop_metrics() == {}
    assert session.state == ThresholdState(tau=0.5, prev_reward_mean=0.25, step=1)
    session.group_advantages(*BATCHES[2], config)
    session.close_step()  # the threshold moves at the second step's close
    assert session.pop_metrics()["threshold"] == 0.5
    assert session.state.tau == pytest.approx(0.5 + 0.5 * (0.75 - 0.5))
    assert session.state_dict()["logged_steps"] == 2


def test_a_step_closed_before_it_is_logged_takes_its_entropy_once(caplog):
    # verl saves a checkpoint before it logs the step: the step closes (threshold, ACR streak) at the
    # save, and its entropy, known only when the step is logged, still counts once for that step.
    config = AVSPOConfig(stagnation_acr=0.35, stagnation_steps=1, entropy_floor=0.5)
    session = AVSPOSession(log=logging.getLogger(LOGGER))
    collapsed = batch_with(2, 0, False)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for step in (1, 2):
            session.group_advantages(*collapsed, config)
            session.close_step(step=step)
            saved = session.state_dict()
            metrics = session.pop_metrics(step=step, entropy=0.1)
    assert metrics["stagnation"] == 1.0 and metrics["entropy_collapse"] == 1.0
    assert saved["warnings"]["stagnation"]["streak"] == 2 and saved["logged_steps"] == 2
    assert session.state_dict()["warnings"]["entropy_collapse"]["streak"] == 2
    assert [r.getMessage()[:27] for r in caplog.records] == ["AVSPO stagnation at step 2:", "Entropy collapse at step 2:"]


def test_a_restored_tau_outside_a_narrowed_range_is_clipped(caplog):
    saved = ThresholdState(tau=0.8, prev_reward_mean=0.25, step=4)
    session = AVSPOSession(log=logging.getLogger(LOGGER))
    session.configure(AVSPOConfig(threshold_mode="adaptive", threshold_max=0.6))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        session.load_state_dict({"format": 1, "threshold": saved.state_dict(), "warnings": session.warnings.state_dict(),
                                 "logged_steps": 4})  # fmt: skip
    assert session.state == ThresholdState(tau=0.6, prev_reward_mean=0.25, step=4)
    assert "tau=0.8 lies outside [threshold_min, threshold_max] = [0.1, 0.6]" in caplog.text
    assert session.group_advantages(*BATCHES[0], session.config).metrics["threshold"] == 0.6


def test_warnings_fire_once_and_flags_stay_up(caplog):
    config = AVSPOConfig(stagnation_acr=0.35, stagnation_steps=2, entropy_floor=0.5)
    session = AVSPOSession(log=logging.getLogger(LOGGER))
    collapsed = batch_with(2, 0, False)
    flags = []
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for entropy in [0.2, 0.3, 0.1, 0.9]:
            session.group_advantages(*collapsed, config)
            metrics = session.pop_metrics(entropy=entropy)
            flags.append((metrics["stagnation"], metrics["entropy_collapse"]))
    assert flags == [(0.0, 0.0), (0.0, 0.0), (1.0, 1.0), (1.0, 1.0)]
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(messages) == 2
    assert messages[0].startswith("AVSPO stagnation at step 3") and messages[1].startswith("Entropy collapse at step 3")


def test_step_named_by_the_host_goes_into_the_warning(caplog):
    config = AVSPOConfig(stagnation_acr=0.35, stagnation_steps=1)
    session = AVSPOSession(log=logging.getLogger(LOGGER))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for step in (10, 11):
            session.group_advantages(*batch_with(2, 0, False), config)
            session.pop_metrics(step=step)
    assert [r.getMessage()[:27] for r in caplog.records] == ["AVSPO stagnation at step 11"]


def test_entropy_counts_only_in_an_avspo_run():
    session = AVSPOSession()
    assert session.pop_metrics(entropy=0.01) == {}
    assert session.observe_entropy(0.01) == {}
    assert session.state_dict()["logged_steps"] == 0

    config = AVSPOConfig(stagnation_steps=1, entropy_floor=0.5)
    session.group_advantages(*BATCHES[0], config)
    assert "entropy_collapse" not in session.pop_metrics()
    # Entropy learnt after the step's metrics were logged: flags of that step, no new step counted.
    assert session.observe_entropy(0.1) == {"entropy_collapse": 0.0}
    assert session.observe_entropy(0.1) == {"entropy_collapse": 1.0}
    assert session.state_dict()["logged_steps"] == 1
    # Entropy alone in an avspo run is a logged step.
    assert session.pop_metrics(entropy=0.1) == {"entropy_collapse": 1.0}
    assert session.state_dict()["logged_steps"] == 2


def test_state_round_trips_and_the_resumed_run_continues_alike():
    config = AVSPOConfig(threshold_mode="adaptive", threshold_lr=0.5, stagnation_acr=0.35, stagnation_steps=2)
    session = AVSPOSession()
    for scores, labels in BATCHES[:2]:
        session.group_advantages(scores, labels, config)
        session.pop_metrics()
    state = session.state_dict()
    assert set(state) == {"format", "threshold", "settings", "warnings", "logged_steps"}
    assert state["settings"] == state_settings(config)
    assert state["format"] == 1 and state["logged_steps"] == 2
    assert state["threshold"] == by_hand(config, BATCHES[:2])[-1].state.state_dict()
    assert state["warnings"]["stagnation"] == {"streak": 0, "fired_step": None}  # ACR 0.75 then 0.25

    resumed = AVSPOSession()
    resumed.group_advantages(*BATCHES[0], config)  # pending metrics of the process before the resume are dropped
    resumed.load_state_dict(json.loads(json.dumps(state)))
    assert resumed.state_dict() == state
    assert resumed.pop_metrics() == {}
    logged = {id(run): [] for run in (session, resumed)}
    for scores, labels in [BATCHES[2], BATCHES[0], BATCHES[2]]:
        for run in (session, resumed):
            run.group_advantages(scores, labels, config)
            logged[id(run)].append(run.pop_metrics())
    assert logged[id(resumed)] == logged[id(session)]
    assert [metrics["stagnation"] for metrics in logged[id(session)]] == [0.0, 0.0, 1.0]
    assert resumed.state_dict() == session.state_dict()


def test_a_state_holding_a_keys_earlier_name_is_refused_naming_the_key_now():
    state = AVSPOSession().state_dict()
    earlier = {("monitor" if key == "warnings" else key): value for key, value in state.items()}
    with pytest.raises(ValueError, match=r"^avspo checkpoint state: 'monitor' is now 'warnings': rename it$"):
        AVSPOSession().load_state_dict(earlier)


def test_bad_states_are_refused_naming_what_is_wrong():
    session = AVSPOSession()
    state = session.state_dict()
    with pytest.raises(ValueError, match=r"lacks \['logged_steps', 'warnings'\]; it has \['format', 'threshold'\]"):
        session.load_state_dict({"format": 1, "threshold": None})
    with pytest.raises(ValueError, match="has format 2; this version of avspo_plugin reads format 1"):
        session.load_state_dict({**state, "format": 2})
    # States written before the format number existed are format 1.
    unnumbered = {key: value for key, value in state.items() if key != "format"}
    session.load_state_dict({**unnumbered, "logged_steps": 5})
    assert session.state_dict() == {**state, "logged_steps": 5}


def test_reset_forgets_everything():
    config = AVSPOConfig()
    session = AVSPOSession()
    session.group_advantages(*BATCHES[0], config)
    session.reset()
    assert session.config is None and session.state is None
    assert session.pop_metrics() == {}
    assert session.state_dict() == AVSPOSession().state_dict()


def test_groups_collapsed_at_neither_reward_bound_are_warned_of_once_per_run(caplog):
    """Rewards {0, 0.5} under the default range [0, 1], AVSPO acting: the all-0.5 groups are collapsed at neither
    bound."""
    rows = [[0.5] * 4, [0.5] * 4, [0.0] * 4, [0.0, 0.5, 0.0, 0.5]]
    scores, labels = torch.tensor(rows).reshape(-1), np.repeat(["a", "b", "c", "d"], 4).astype(object)
    session = AVSPOSession(log=logging.getLogger(LOGGER))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(2):
            result = session.group_advantages(scores, labels, AVSPOConfig(threshold_mode="adaptive"))
            session.close_step()
        session.group_advantages(*BATCHES[0], AVSPOConfig(threshold_mode="adaptive"))
    assert [r.getMessage() for r in caplog.records] == [
        "AVSPO: 2 of 4 groups (50.0%) collapsed at a value that is neither reward_low=0 nor reward_high=1 (the lowest: "
        "0.5); ACR counts them, acr_all_fail and acr_all_pass do not, and with augmented_collapses=all they get "
        "virtual samples whenever collapsed groups do. If 0.5 is your task's lowest or highest reward (e.g. rewards "
        "{0, 0.5}), set reward_low or reward_high to it (reward_high=0.5) so that these groups count as all-fail or "
        "all-pass; if such groups are partial successes to leave alone, set augmented_collapses=all_fail or "
        "augmented_collapses=all_pass (only groups at that bound get virtual samples). This warning is given once "
        "per run."
    ]
    assert result.off_bound_groups == 2 and result.off_bound_value == 0.5
    fitted = AVSPOSession(log=logging.getLogger(LOGGER))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert fitted.group_advantages(scores, labels, AVSPOConfig(reward_high=0.5)).metrics["acr_all_pass"] == 0.5
        fitted.group_advantages(*BATCHES[0], AVSPOConfig())
    assert caplog.records == []
