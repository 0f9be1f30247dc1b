"""What a run will do, said at launch (avspo_plugin/launch.py): acting or measuring, the trigger and how often it
opens at the batch, and one evidence sentence; said once per process by each host's first line (verl's is checked
through the doctor and the trainer tests)."""

from __future__ import annotations

import pytest

from avspo_plugin import launch
from avspo_plugin.config import DEFAULT_EVIDENCE, AVSPOConfig


def test_the_default_acts_as_the_paper_and_says_how_often_its_trigger_opens():
    text = launch.what_runs(AVSPOConfig(), 64, 8)
    low, high = (launch.trigger_outlook(64, 8, acr, 0.5).open_steps for acr in launch.PAPER_GRPO_ACR)
    assert text.startswith("acting (the paper's AVSPO): virtual samples in collapsed groups' mean and std, "
                           "threshold_mode=adaptive, on steps whose ACR is above tau (tau_0 = 0.5, moved by Eq. 12)")
    assert f"at 64 prompts per step and the paper's GRPO ACR (0.28-0.45) it opens on {launch.share(low, high)}" in text


@pytest.mark.parametrize("settings, expected", [
    ({"threshold_mode": "never"}, "measuring only (threshold_mode=never): no virtual samples"),
    ({"threshold_mode": "always"}, "acting: virtual samples in collapsed groups' mean and std, threshold_mode=always, "
                                   "every collapsed group at every step"),
    ({"threshold_mode": "fixed", "threshold_init": 0.3}, "acting: virtual samples in collapsed groups' mean and std, "
                                                         "threshold_mode=fixed, on steps whose ACR is above 0.3"),
])
def test_every_mode_is_named_for_what_it_does(settings, expected):
    assert launch.what_runs(AVSPOConfig(**settings), 64, 8).startswith(expected)


def test_one_prompt_per_step_opens_on_every_collapsed_step_and_an_unknown_batch_says_so():
    assert "it opens on 28% to 45% of steps" in launch.what_runs(AVSPOConfig(), 1, 8)
    assert launch.what_runs(AVSPOConfig(), None, 8).endswith("prompts per step not known, so how often is not said")


def test_the_evidence_gives_the_papers_gain_the_labs_finding_and_the_ab():
    sentence = launch.evidence_sentence()
    assert sentence == f"{launch.PAPER_GAIN} {DEFAULT_EVIDENCE['acting_evidence']} {launch.AB_RECIPE}"
    assert "+3.7 to +6.1 points" in sentence and "recipes/run_ab_1gpu.sh" in sentence


def test_announce_prints_once_per_process(capsys, monkeypatch):
    monkeypatch.setattr(launch, "_ANNOUNCED", set())
    first = launch.announce(AVSPOConfig(), 64, 8, "TRL")
    launch.announce(AVSPOConfig(), 64, 8, "TRL")
    assert capsys.readouterr().err == first + "\n"
    assert first.startswith("avspo (TRL): acting (the paper's AVSPO)") and launch.evidence_sentence() in first
