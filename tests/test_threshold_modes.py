"""A threshold mode is one row of THRESHOLD_MODES: a row added there is accepted, documented and run, with no other
edit."""

import numpy as np
import pytest
import torch

from avspo_plugin import AVSPOConfig
from avspo_plugin.commands.doctor.verl import estimator_notes
from avspo_plugin.config import ConfigError
from avspo_plugin.core import AVSPOSession
from avspo_plugin.threshold_modes import THRESHOLD_MODES, ThresholdMode
from renderer.docs_pages import config_markdown

# A second name for fixed, as a new row would be written: the behaviour to compare it with is known.
ADDED = ThresholdMode(
    "held", "ACR_t > threshold_init, held for the whole run", augments=True, reads_threshold=True,
    adapts_threshold=False, launch_note="virtual samples are added on steps whose ACR exceeds {threshold_init}",
)


def batch(collapsed: int, mixed: int) -> tuple[torch.Tensor, np.ndarray]:
    """Groups of 4: `collapsed` all-fail, `mixed` half right."""
    rows = [[0.0] * 4] * collapsed + [[0.0, 1.0, 0.0, 1.0]] * mixed
    return torch.tensor(rows).reshape(-1), np.repeat([f"p{j}" for j in range(len(rows))], 4).astype(object)


# ACR 0.75, then 0.25: the trigger at threshold_init 0.5 opens on the first step only.
BATCHES = [batch(3, 1), batch(1, 3)]


@pytest.fixture
def added_mode(monkeypatch):
    monkeypatch.setitem(THRESHOLD_MODES, ADDED.name, ADDED)


def test_a_mode_outside_the_table_is_refused():
    with pytest.raises(ConfigError, match=r"threshold_mode.*one of adaptive, fixed, always, never"):
        AVSPOConfig(threshold_mode=ADDED.name)


def test_a_mode_added_to_the_table_is_accepted_documented_and_run(added_mode):
    config = AVSPOConfig(threshold_mode=ADDED.name, stagnation_steps=7)
    assert f"{ADDED.name}: {ADDED.meaning}" in config_markdown()
    session, fixed = AVSPOSession(), AVSPOSession()
    for scores, labels in BATCHES:
        result = session.group_advantages(scores, labels, config)
        expected = fixed.group_advantages(scores, labels, config.replace(threshold_mode="fixed"))
        assert torch.equal(result.advantages, expected.advantages) and result.metrics == expected.metrics
        session.close_step()
        fixed.close_step()
    assert session.state == fixed.state and session.state.tau == config.threshold_init
    # The inert-trigger warning watches it (its trigger can stay shut), and the launch check says its row's note.
    assert session.warnings.inert_trigger.patience == 7
    (_, runs), (level, note), (_, evidence) = estimator_notes(config, n=4, prompts=None)
    assert runs.startswith(f"this run: acting: virtual samples in collapsed groups' mean and std, threshold_mode={ADDED.name}")
    assert evidence.startswith("evidence: ")
    assert level == "warn" and note.startswith(f"algorithm.avspo.threshold_mode={ADDED.name}: virtual samples are "
                                               "added on steps whose ACR exceeds 0.5")


@pytest.mark.parametrize(
    "flags, message",
    [
        ({"augments": True, "reads_threshold": False, "adapts_threshold": True}, "adapts a threshold it does not read"),
        ({"augments": False, "reads_threshold": True, "adapts_threshold": False}, "reads a threshold but never augments"),
    ],
)
def test_a_row_whose_flags_contradict_each_other_is_refused(flags, message):
    with pytest.raises(ValueError, match=f"threshold mode 'odd' {message}"):
        ThresholdMode("odd", "a contradiction", launch_note=None, **flags)
