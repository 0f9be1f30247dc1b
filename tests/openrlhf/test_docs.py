"""docs/using/openrlhf.md's options table is the one rendered from AVSPOConfig."""

from pathlib import Path

from avspo_plugin.tools.openrlhf_options_table import TABLE_BEGIN, TABLE_END, options_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "using" / "openrlhf.md"


def test_options_table_is_rendered_from_the_config():
    text = DOC.read_text()
    committed = text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0].strip()
    assert committed == options_table(), "run: python -m avspo_plugin.tools.openrlhf_options_table docs/using/openrlhf.md"
