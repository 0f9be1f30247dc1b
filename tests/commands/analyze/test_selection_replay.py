"""``avspo analyze`` replays prompt selection on a rollout dump: what it would have skipped, and how often rightly.

The expected numbers come from a plain-Python oracle of the rule with explore 0 (a prompt whose last
observed visit collapsed is skipped, and a skipped prompt is not observed), independent of the core.
"""

from __future__ import annotations

import pytest
from commands.analyze.generated_runs import G, draw_run, write_dump

# explore 0 and a half-life far beyond the run: a predicted prompt is skipped (retry chance < 1e-5 per visit).
NO_RETRY = ("--selection", "explore=0.0", "--selection", "retry_half_life=1e6", "--selection", "max_skip_fraction=0.9")


def oracle(run):
    last_collapsed: dict[str, bool] = {}
    totals = dict.fromkeys(("prompts", "skipped", "skipped_collapsed", "judged", "judged_collapsed",
                            "predicted_collapsed"), 0)  # fmt: skip
    for step in sorted(run):
        predicted_now = sum(last_collapsed.get(prompt, False) for prompt, _ in run[step])
        assert predicted_now <= 5, "the cap (5 of 6) binds: the oracle does not model it; pick another seed"
        for prompt, rewards in run[step]:
            collapsed = len(set(rewards)) == 1
            totals["prompts"] += 1
            if prompt in last_collapsed:
                totals["judged"] += 1
                totals["judged_collapsed"] += collapsed
            if last_collapsed.get(prompt, False):
                totals["skipped"] += 1
                totals["skipped_collapsed"] += collapsed
                totals["predicted_collapsed"] += collapsed
            else:
                last_collapsed[prompt] = collapsed
    return totals


def test_replay_counts_what_selection_would_have_skipped(tmp_path, analyze):
    run = draw_run(12, seed=3)
    expected = oracle(run)
    code, document, out, _ = analyze(write_dump(tmp_path / "rollouts", run), *NO_RETRY)
    assert code == 0
    chosen = document["runs"][0]["selection"]
    for name in ("prompts", "skipped", "skipped_collapsed", "judged", "judged_collapsed", "predicted_collapsed"):
        assert chosen[name] == expected[name], name
    assert chosen["predicted"] == expected["skipped"]  # explore 0: every predicted prompt skipped
    assert chosen["rollouts"] == G * expected["prompts"] and chosen["rollouts_saved"] == G * expected["skipped"]
    assert chosen["skip_precision"] == pytest.approx(expected["skipped_collapsed"] / expected["skipped"])
    assert chosen["recall"] == pytest.approx(expected["predicted_collapsed"] / expected["judged_collapsed"])
    assert chosen["informative_rollouts_lost"] == G * (expected["skipped"] - expected["skipped_collapsed"])
    assert sum(chosen["per_step"]["skipped"]) == expected["skipped"] and chosen["per_step"]["step"] == sorted(run)
    assert chosen["settings"]["explore"] == 0.0 and chosen["settings"]["reward_high"] == 1.0
    assert document["settings"]["selection_replay"]["max_skip_fraction"] == 0.9
    # Prompt 0 always fails and prompt 5 always passes: skipped from step 2 on, rightly.
    assert expected["skipped"] >= 2 * (len(run) - 1) and expected["skipped_collapsed"] >= 2 * (len(run) - 1)
    assert f"would have skipped {expected['skipped']} of {expected['prompts']} prompt visits" in out


def test_replay_follows_the_exploration_setting(tmp_path, analyze):
    dump = write_dump(tmp_path / "rollouts", draw_run(12, seed=3))
    _, never, _, _ = analyze(dump, "--selection", "explore=1.0", out=tmp_path / "never")
    assert never["runs"][0]["selection"]["skipped"] == 0
    _, default, _, _ = analyze(dump, out=tmp_path / "default")
    _, none, _, _ = analyze(dump, *NO_RETRY, out=tmp_path / "none")
    assert 0 < default["runs"][0]["selection"]["skipped"] < none["runs"][0]["selection"]["skipped"]


def test_bad_selection_key_names_it(tmp_path, analyze):
    dump = write_dump(tmp_path / "rollouts", draw_run(3, seed=3))
    code, _, _, err = analyze(dump, "--selection", "explor=0.1")
    assert code == 2 and "unknown key(s) avspo analyze --selection.explor" in err
    code, _, _, err = analyze(dump, "--selection", "explore=2")
    assert code == 2 and "explore=2 is invalid: allowed a number in [0.0, 1.0]" in err
    code, _, _, err = analyze(dump, "--selection", "explore")
    assert code == 2 and "expected KEY=VALUE" in err
