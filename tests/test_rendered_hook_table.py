"""The touch-point table of docs/using/verl.md is the hook registry's: a hook added to
the registry is a row of the table with no other edit, and a hook cannot be registered without what its row says."""

import dataclasses

import pytest

from avspo_plugin.verl import hooks
from avspo_plugin.verl.run_config import MONITOR
from renderer import verl_hook_table
from renderer.docs_pages import with_block


def rows(table: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in table.splitlines()[2:]]


def test_one_row_per_hook_in_the_registrys_order_then_the_trl_patch():
    names = [row[0].strip("`") for row in rows(verl_hook_table.hook_table())]
    assert names == [*(hook.name for hook in hooks.HOOKS), hooks.TRL_PATCH["name"]]


def test_a_hook_added_to_the_registry_is_a_row_of_the_table(monkeypatch):
    added = hooks.Hook("verl.trainer.ppo.v1.trainer_base", "PPOTrainer", "_validate", hooks.close_v1_step,
                       "a purpose", ("self",), trainer="v1", features=(MONITOR,), always=True,
                       when="each validation", why="no validation callback")  # fmt: skip
    monkeypatch.setattr(verl_hook_table, "HOOKS", (*hooks.HOOKS, added))
    row = rows(verl_hook_table.hook_table())[-2]
    assert row == ["`verl.trainer.ppo.v1.trainer_base.PPOTrainer._validate`", "each validation (v1 trainer)",
                   "monitor (every process)", "`plugin_process`", "no validation callback"]


def test_a_hook_cannot_be_registered_without_when_it_runs_and_why_it_is_a_patch():
    (step,) = [hook for hook in hooks.HOOKS if hook.name.endswith("PPOTrainer.step")]
    fields = {field.name: getattr(step, field.name) for field in dataclasses.fields(step)}
    del fields["why"]
    with pytest.raises(TypeError, match="why"):
        hooks.Hook(**fields)


def test_the_verl_page_holds_the_rendered_table():
    for page in verl_hook_table.PAGES:
        text = page.read_text(encoding="utf-8")
        assert with_block(text, verl_hook_table.TABLE_BEGIN, verl_hook_table.TABLE_END,
                          verl_hook_table.hook_table()) == text, f"{page} is stale: run `python -m renderer`"
