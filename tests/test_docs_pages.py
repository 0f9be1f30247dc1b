"""The committed reference pages are exactly what the dataclass and the metric table render."""

from pathlib import Path

import pytest

from avspo_plugin.config import AVSPOConfig
from avspo_plugin.core.metrics import METRIC_HELP, METRIC_REDUCTIONS
from avspo_plugin.tools.docs_pages import PAGES

DOCS = Path(__file__).resolve().parent.parent / "docs" / "using"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_committed_page_is_current(page):
    assert (DOCS / f"{page}.md").read_text() == PAGES[page](), f"regenerate: python -m avspo_plugin.tools.docs_pages {page}"


def test_every_key_and_metric_is_documented():
    config_page, metrics_page = PAGES["config"](), PAGES["metrics"]()
    assert all(f"| `{key}` |" in config_page for key in AVSPOConfig.keys())
    assert set(METRIC_HELP) == set(METRIC_REDUCTIONS)
    assert all(f"| `{name}` |" in metrics_page for name in METRIC_REDUCTIONS)


def test_selection_page_lists_every_key_as_generated():
    from avspo_plugin.config import SelectionConfig
    from avspo_plugin.tools.docs_pages import SELECTION_BEGIN, SELECTION_END, selection_config_markdown

    page = (DOCS / "selection.md").read_text()
    generated = page.split(SELECTION_BEGIN, 1)[1].split(SELECTION_END, 1)[0]
    assert generated == f"\n{selection_config_markdown()}\n", "regenerate: python -m avspo_plugin.tools.docs_pages selection"
    assert all(f"| `{key}` |" in generated for key in SelectionConfig.keys())


@pytest.mark.parametrize("name", ["verl-demo", "ab-1gpu-dry-run"])
def test_every_sample_output_is_what_its_run_renders(name):
    """Each sample output of the docs is rendered from a real run: the committed block equals the rendering (the
    A/B recipe's dry run is run now; the verl demo's output comes from its record)."""
    from avspo_plugin.tools.docs_pages import SAMPLES, committed_sample

    assert committed_sample(name) == SAMPLES[name][1](), "regenerate: python -m avspo_plugin.tools.docs_pages samples"


def test_the_recorded_verl_demo_ran_under_the_current_defaults():
    """A change of an AVSPO default fails here until the demo is recorded again (its output would differ)."""
    import json

    from avspo_plugin.tools.docs_pages import VERL_DEMO_RECORD, demo_step_metrics

    record = json.loads(VERL_DEMO_RECORD.read_text())
    assert record["defaults"] == AVSPOConfig().to_dict(), \
        "the AVSPO defaults changed: python -m avspo_plugin.tools.docs_pages record verl-demo"
    assert record["command"] == "avspo verl-demo --out /tmp/demo-out"
    steps = demo_step_metrics(record["output"])
    assert sorted(steps) == [1, 2, 3, 4]
    config = AVSPOConfig(**record["defaults"])
    for step, metrics in steps.items():
        # What the defaults do, step by step: under always every collapsed group is augmented (with apply_to all).
        if config.threshold_mode == "always":
            assert metrics["triggered"] == float(metrics["acr"] > 0) and metrics["threshold"] == 0, (step, metrics)
        if config.threshold_mode == "always" and config.apply_to == "all":
            assert metrics["augmented_groups"] == metrics["acr"] and metrics["effective_acr"] == 0, (step, metrics)
        # Under the adaptive trigger a step is augmented only when its ACR exceeds the threshold it reports.
        if config.threshold_mode == "adaptive":
            assert metrics["triggered"] == float(metrics["acr"] > metrics["threshold"]), (step, metrics)
            if not metrics["triggered"]:
                assert metrics["augmented_groups"] == 0 and metrics["effective_acr"] == metrics["acr"], (step, metrics)


def test_every_quoted_study_figure_is_rendered_from_the_study():
    """README, results.md, the paper recipe, sharpening.md's pilot summary and the packaged default_evidence.json
    (which the config help quotes) equal what docs_pages renders from docs/evidence/sharpening/: a figure edited by
    hand, or a study run again without rendering, fails here."""
    import json

    from avspo_plugin.tools.docs_pages import (
        EVIDENCE_SOURCE,
        PACKAGED_EVIDENCE,
        committed_evidence,
        evidence_blocks,
        packaged_evidence,
    )

    for name, (page, prefix, text) in evidence_blocks().items():
        assert committed_evidence(page, name, prefix) == text, \
            f"{page.name}: regenerate with python -m avspo_plugin.tools.docs_pages evidence"
    report = json.loads(EVIDENCE_SOURCE.read_text())
    assert json.loads(PACKAGED_EVIDENCE.read_text()) == packaged_evidence(report)


def test_the_default_threshold_mode_is_the_one_the_study_decided_and_its_help_says_why():
    import json

    from avspo_plugin.config import AVSPOConfig
    from avspo_plugin.tools.docs_pages import EVIDENCE_SOURCE, PACKAGED_EVIDENCE

    decision = json.loads(EVIDENCE_SOURCE.read_text())["decision"]
    assert AVSPOConfig().threshold_mode == decision["default_threshold_mode"]
    reason = json.loads(PACKAGED_EVIDENCE.read_text())["threshold_mode_reason"]
    (threshold_mode,) = [f for f in AVSPOConfig.ordered_fields() if f.name == "threshold_mode"]
    assert threshold_mode.metadata["help"].endswith(reason)
