"""The doctor's trigger advice comes from the batch it will see: the share of steps on which the trigger opens, from
the prompts per step, G and the expected ACR (scipy's binomial distribution is the oracle); one prompt per step
opens it on every collapsed step, so the paper's recipe gets no warning (the recipe through the doctor:
tests/verl/test_doctor.py)."""

import numpy as np
import pytest
from scipy.stats import binom

from avspo_plugin.commands.doctor.verl import trigger_note
from avspo_plugin.config import AVSPOConfig
from avspo_plugin.launch import PAPER_GRPO_ACR, trigger_outlook


@pytest.mark.parametrize("prompts", [1, 8, 128, 1024])
@pytest.mark.parametrize("acr", [0.05, *PAPER_GRPO_ACR, 0.6, 0.95])
@pytest.mark.parametrize("tau", [0.1, 0.5, 0.9])
def test_the_share_of_open_steps_and_augmented_groups_is_the_binomial_distributions(prompts, acr, tau):
    outlook = trigger_outlook(prompts, 8, acr, tau)
    counts = np.arange(prompts + 1)
    opens = counts / prompts > tau
    chance = binom.pmf(counts, prompts, acr)
    assert outlook.open_steps == pytest.approx(chance[opens].sum(), rel=1e-9, abs=1e-300)
    # Collapsed groups on open steps over all collapsed groups.
    augmented = (counts * chance)[opens].sum() / (prompts * acr)
    assert outlook.augmented_groups == pytest.approx(augmented, rel=1e-9, abs=1e-300)


def test_one_prompt_per_step_opens_on_every_collapsed_step_and_groups_of_one_never():
    for acr in (0.28, 0.45):
        assert trigger_outlook(1, 8, acr, 0.5).open_steps == pytest.approx(acr)
        assert trigger_outlook(1, 8, acr, 0.9).augmented_groups == 1.0
        assert trigger_outlook(64, 1, acr, 0.5).open_steps == 0.0


@pytest.mark.parametrize("prompts, level, steps, groups", [
    (1, "ok", "28% to 45%", "100%"),
    (8, "warn", "4% to 26%", "10% to 39%"),
    (128, "warn", "under 1% to 11%", "under 1% to 13%"),
    (1024, "warn", "under 1%", "under 1%"),
])
def test_the_note_states_the_batchs_trigger_and_warns_only_where_it_seldom_opens(prompts, level, steps, groups):
    found, text = trigger_note(AVSPOConfig(threshold_mode="adaptive"), 8, prompts)
    assert found == level, text
    assert f"the trigger opens on {steps} of steps and augments {groups} of the collapsed groups" in text
    assert ("this run may train as GRPO on most steps" in text) == (level == "warn")
    assert ("threshold_mode=always augments every collapsed group" in text) == (level == "warn")
