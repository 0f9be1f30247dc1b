"""docs/evidence/results.md is rendered whole: no figure outside a rendered block, and each figure of the part below the
top block (renderer/results_page.py) follows the study JSON it comes from."""

import copy
import re

import pytest

from renderer import results_page
from renderer.docs_pages import with_block


def outside_rendered_blocks(text: str) -> str:
    """The page's text with every rendered block (between BEGIN and END marker lines) taken out."""
    return re.sub(r"<!-- BEGIN [^>]*-->.*?<!-- END [^>]*-->", "", text, flags=re.S)


def test_no_figure_of_results_md_is_typed_by_hand():
    hand_written = outside_rendered_blocks(results_page.PAGE.read_text(encoding="utf-8"))
    assert not re.search(r"\d", hand_written), hand_written


def test_the_hand_check_sees_a_typed_figure():
    page = "intro\n<!-- BEGIN X -->\n0.5\n<!-- END X -->\nmore, +0.0104 typed\n"
    assert re.findall(r"\d", outside_rendered_blocks(page)) == list("00104")


def test_the_page_holds_the_rendered_history():
    text = results_page.PAGE.read_text(encoding="utf-8")
    assert with_block(text, results_page.BEGIN, results_page.END, results_page.results_history()) == text


@pytest.fixture
def studies(monkeypatch):
    """The reports the page reads, as copies a test may change."""
    reports = {name: results_page.load(name) for name in results_page.SOURCES}
    monkeypatch.setattr(results_page, "load", lambda name: reports[name])
    return reports


def test_a_changed_figure_and_its_significance_reach_the_page(studies):
    before = results_page.results_history()
    always = studies["afternoon"]["analysis"]["pooled"]["accuracy"]["avspo_always"]
    assert "raised held-out accuracy by +0.0104 [+0.0075, +0.0133]" in before
    always.update(mean=0.0201, ci95=[0.0101, 0.0301])
    always_per_base = studies["afternoon"]["analysis"]["per_base"]["carrydrop20"]["accuracy"]["avspo_always"]
    always_per_base.update(mean=-0.02, ci95=[-0.03, -0.01], significant=True)
    after = results_page.results_history()
    assert "raised held-out accuracy by +0.0201 [+0.0101, +0.0301]" in after
    row = next(line for line in after.splitlines() if line.startswith("| all-fail dominant | carrydrop20"))
    assert "**-0.0200 [-0.0300, -0.0100]**" in row and row.endswith("| `never` (always lost accuracy) |")
    assert "with a positive point estimate on 3 of 4 bases" in after


def test_a_claim_follows_the_numbers_it_rests_on(studies):
    """The old study's criterion bullet and the morning study's gate sentence are worded from their figures."""
    text = results_page.results_history()
    assert "*below* its final accuracy" in text and "passed by a hair" in text
    endpoints = studies["old"]["endpoints"]["grpo"]
    for by_seed in endpoints.values():
        for seed in by_seed.values():
            seed["accuracy_at_70"] = seed["accuracy_at_100"] + 0.003
    studies["morning"]["gates"]["carrydrop20"]["both_regimes"]["value"] = 0.08
    text = results_page.results_history()
    assert "*above* its final accuracy (paired over its runs): **this criterion says little here**" in text
    assert "passed by a hair" not in text


def test_old_study_sentence_on_every_method_is_computed(studies):
    study = copy.deepcopy(studies["old"])
    study["analysis"]["means"]["dapo"]["accuracy"]["mean"] = 0.5
    studies["old"] = study
    assert "RL lowered held-out accuracy for most methods" in results_page.results_history()


@pytest.mark.parametrize("value, text", [(6.879e-06, "6.9e-06"), (0.000243, "2.4e-04"), (0.070045, "0.07"),
                                         (0.006118, "0.0061"), (1.0, "1")])
def test_p_values_read_as_the_page_writes_them(value, text):
    assert results_page.p_value(value) == text


def test_rates_and_shares_read_as_the_page_writes_them():
    assert [results_page.rate(x) for x in (0.00015, 0.0006, 0.0003)] == ["1.5e-4", "6e-4", "3e-4"]
    assert [results_page.percent(x) for x in (0.0, 0.024, 0.124)] == ["0%", "2.4%", "12.4%"]
    assert results_page.listed(["a", "b", "c"]) == "a, b and c" and results_page.listed(["a"]) == "a"
