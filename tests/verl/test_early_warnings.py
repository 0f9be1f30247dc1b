"""Early warnings: the framework-free EarlyWarnings, and its flags and messages in verl's tracker."""

import logging

import pytest
from omegaconf import OmegaConf

from avspo_plugin.config import AVSPOConfig
from avspo_plugin.core.early_warnings import EarlyWarnings, StreakWarning


def test_streak_fires_once_after_more_than_patience_steps_and_stays_flagged():
    warning = StreakWarning("stagnation", limit=0.35, patience=2, above=True)
    fired = [warning.observe(value, step) for step, value in enumerate([0.5, 0.4, 0.9, 0.1, 0.9, 0.9, 0.9], 1)]
    assert fired == [False, False, True, False, False, False, False]
    assert warning.fired_step == 3 and warning.flag == 1.0


def test_streak_restarts_when_the_signal_recovers():
    warning = StreakWarning("stagnation", limit=0.35, patience=2, above=True)
    for step, value in enumerate([0.5, 0.5, 0.2, 0.5, 0.5], 1):
        assert not warning.observe(value, step)
    assert warning.flag == 0.0 and warning.streak == 2
    # Equal to the limit is not past it.
    assert not warning.observe(0.35, 6) and warning.streak == 0


def test_entropy_counts_values_below_the_floor():
    warning = StreakWarning("entropy_collapse", limit=0.5, patience=1, above=False)
    assert [warning.observe(v, s) for s, v in enumerate([0.4, 0.6, 0.4, 0.3], 1)] == [False, False, False, True]


@pytest.mark.parametrize("changes", [{"stagnation_acr": 0.0}, {"stagnation_steps": 0}])
def test_zero_disables_stagnation(changes):
    warnings = EarlyWarnings(AVSPOConfig(**changes))
    for step in range(1, 200):
        flags, fired = warnings.observe(step, acr=1.0, entropy=None)
        assert flags == {} and fired == []


def test_warning_state_round_trips():
    config = AVSPOConfig(stagnation_steps=3)
    warnings = EarlyWarnings(config)
    for step in range(1, 6):
        warnings.observe(step, acr=0.9, entropy=0.1)
    restored = EarlyWarnings(config)
    restored.load_state_dict(warnings.state_dict())
    assert restored.state_dict() == warnings.state_dict() == {
        "stagnation": {"streak": 5, "fired_step": 4},
        "entropy_collapse": {"streak": 5, "fired_step": 4},
        "inert_trigger": {"streak": 0, "fired_step": None},
    }


def test_inert_trigger_counts_steps_with_collapsed_groups_and_none_augmented():
    warnings = EarlyWarnings(AVSPOConfig(threshold_mode="adaptive", stagnation_steps=2))
    observed = [(0.4, 0.0), (0.0, 0.0), (0.4, 0.0), (0.4, 0.2), (0.3, 0.0), (0.3, 0.0), (0.3, 0.0), (0.3, 0.0)]
    fired = [warnings.observe(step, acr=acr, augmented=augmented, threshold=0.5)[1]
             for step, (acr, augmented) in enumerate(observed, 1)]
    # Step 2 had no collapsed group (not counted, not a reset); step 4 augmented (a reset); 5, 6, 7: fires at 7.
    assert [bool(f) for f in fired] == [False] * 6 + [True, False]
    assert "AVSPO inert at step 7" in fired[6][0] and "3 consecutive steps" in fired[6][0]
    assert "ACR 0.300" in fired[6][0] and "tau=0.500" in fired[6][0] and "threshold_mode=always" in fired[6][0]
    assert warnings.state_dict()["inert_trigger"] == {"streak": 4, "fired_step": 7}


@pytest.mark.parametrize("mode", ["always", "never"])
def test_inert_trigger_is_off_where_the_trigger_cannot_stay_shut(mode):
    warnings = EarlyWarnings(AVSPOConfig(threshold_mode=mode, stagnation_steps=1))
    assert all(warnings.observe(step, acr=0.3, augmented=0.0)[1] == [] for step in range(1, 10))


def test_checkpoints_from_before_the_inert_trigger_resume_with_its_streak_at_zero():
    from avspo_plugin.core.session import AVSPOSession

    session = AVSPOSession()
    old = session.state_dict()
    del old["warnings"]["inert_trigger"]
    session.load_state_dict(old)
    assert session.state_dict()["warnings"]["inert_trigger"] == {"streak": 0, "fired_step": None}


def test_inert_avspo_warns_through_verls_compute_advantage_naming_its_numbers(caplog, make_batch):
    """A verl-sized batch with ACR under tau_0 = 0.5: the trigger never opens, and the run is told so."""
    from verl.trainer.ppo.ray_trainer import compute_advantage

    from avspo_plugin.verl import pop_metrics, session

    session().reset()
    algorithm = OmegaConf.create(
        {"adv_estimator": "avspo", "avspo": {"threshold_mode": "adaptive", "stagnation_steps": 2}}
    )
    one_of_three_collapsed = make_batch([1, 1, 0, 1, 1, 0], ["a", "a", "b", "b", "c", "c"])
    with caplog.at_level(logging.WARNING, logger="avspo_plugin.verl"):
        for _ in range(4):
            compute_advantage(one_of_three_collapsed, adv_estimator="avspo", config=algorithm)
            assert pop_metrics()["augmented_groups"] == 0.0
    inert = [r.getMessage() for r in caplog.records if "AVSPO inert" in r.getMessage()]
    assert len(inert) == 1 and inert[0].startswith("AVSPO inert at step 3: virtual samples augmented no group on 3")
    assert "ACR 0.333" in inert[0] and "tau=0.500" in inert[0] and "threshold_mode=adaptive" in inert[0]
    session().reset()


def test_stagnation_and_entropy_collapse_reach_the_tracker_with_one_warning_each(caplog, make_batch):
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.tracking import Tracking

    algorithm = OmegaConf.create(
        {"adv_estimator": "avspo", "avspo": {"stagnation_acr": 0.35, "stagnation_steps": 2, "entropy_floor": 0.5}}
    )
    tracking = Tracking("avspo-test", "warnings", default_backend=[])
    logged = []
    tracking.logger = {"recorder": type("Recorder", (), {"log": lambda s, data, step: logged.append((step, data)),
                                                      "finish": lambda s, **kw: None})()}
    all_collapsed = make_batch([1, 1, 0, 0], ["a", "a", "b", "b"])
    entropies = [0.2, 0.3, 0.1, 0.9, 0.2]
    with caplog.at_level(logging.WARNING, logger="avspo_plugin.verl"):
        for step, entropy in enumerate(entropies, start=1):
            compute_advantage(all_collapsed, adv_estimator="avspo", config=algorithm)
            tracking.log(data={"actor/entropy": entropy}, step=step)

    assert [data["avspo/stagnation"] for _, data in logged] == [0, 0, 1, 1, 1]
    assert [data["avspo/entropy_collapse"] for _, data in logged] == [0, 0, 1, 1, 1]
    messages = [r.getMessage() for r in caplog.records]
    stagnation = [m for m in messages if "stagnation at step" in m]
    collapse = [m for m in messages if "Entropy collapse at step" in m]
    assert len(stagnation) == 1 and "stagnation at step 3" in stagnation[0] and "stagnation_acr=0.35" in stagnation[0]
    assert len(collapse) == 1 and "step 3" in collapse[0] and "entropy_floor=0.5" in collapse[0]


def test_runs_of_other_estimators_get_no_avspo_metrics():
    """The plugin is loaded in every verl run; only an avspo run logs avspo/*."""
    from verl.utils.tracking import Tracking

    tracking = Tracking("avspo-test", "grpo", default_backend=[])
    logged = []
    tracking.logger = {"recorder": type("Recorder", (), {"log": lambda s, data, step: logged.append(data),
                                                      "finish": lambda s, **kw: None})()}
    for step in range(1, 80):
        tracking.log(data={"actor/entropy": 0.01}, step=step)
    assert all(set(data) == {"actor/entropy"} for data in logged)
