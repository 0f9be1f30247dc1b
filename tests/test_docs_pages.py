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
