"""verl rollout / validation dumps: known ACR per step, grouping rules, per-prompt counts, bad and cut files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from commands.analyze.generated_runs import PROMPTS, draw_run, truth, write_dump

from avspo_plugin.commands.analyze.run_logs import AnalyzeError, load, read_dumps
from avspo_plugin.commands.analyze.timeline import sample_timeline
from avspo_plugin.config import AVSPOConfig

MONITOR = AVSPOConfig(threshold_mode="never")
REPLAY = AVSPOConfig()


def timeline_of(path):
    loaded = load(path)
    return sample_timeline(loaded.samples, MONITOR, REPLAY, str(path)), loaded


@pytest.mark.parametrize("with_uid", [True, False], ids=["v1-uid", "legacy-no-uid"])
def test_dump_gives_known_acr_per_step(tmp_path, with_uid):
    run = draw_run(30, seed=1)
    expected = truth(run)
    (timeline, _table, sizes), loaded = timeline_of(write_dump(tmp_path / "rollouts", run, with_uid=with_uid))
    assert loaded.format == "verl generation dump"
    assert timeline.steps.tolist() == expected.steps
    np.testing.assert_allclose(timeline.series["acr"], expected.acr)
    np.testing.assert_allclose(timeline.series["acr_all_fail"], expected.all_fail)
    np.testing.assert_allclose(timeline.series["acr_all_pass"], expected.all_pass)
    np.testing.assert_allclose(timeline.series["near_collapse"], expected.near)
    np.testing.assert_allclose(timeline.series["reward_mean"], expected.reward_mean)
    # Equal group sizes: the rollout shares from per-group flags equal the core's group rates.
    np.testing.assert_allclose(timeline.series["rollouts_all_fail"], expected.all_fail)
    np.testing.assert_allclose(timeline.series["rollouts_collapsed"], expected.acr)
    assert dict(sizes) == {4: 30 * len(PROMPTS)}
    grouping = loaded.samples.grouping
    assert ("uid" in grouping) if with_uid else grouping.startswith("prompt text")


def test_per_prompt_counts_follow_the_regimes(tmp_path):
    run = draw_run(20, seed=2)
    (_, table, _), _ = timeline_of(write_dump(tmp_path / "rollouts", run))
    row = {text: i for i, text in enumerate(table.texts)}
    hopeless, solved = row[PROMPTS[0]], row[PROMPTS[5]]
    assert table.groups[hopeless] == table.collapsed[hopeless] == table.all_fail[hopeless] == 20
    assert table.all_pass[solved] == 20 and table.all_fail[solved] == 0
    assert table.wasted[hopeless] == 20 * 4
    for text, index in row.items():
        rewards = [r for step in run.values() for prompt, r in step if prompt == text]
        assert table.collapsed[index] == sum(len(set(r)) == 1 for r in rewards)
        assert table.reward_sum[index] == pytest.approx(sum(map(sum, rewards)))


def test_later_outputs_of_a_session_replace_earlier_turns_and_padding_is_left_out(tmp_path):
    directory = tmp_path / "rollouts"
    directory.mkdir()
    rows = []
    # Prompt A: turn 0 outputs say "all fail"; the final turn (index 1) of session 0 passes: not collapsed.
    for session in range(4):
        rows.append({"uid": f"aaa_{session}_0", "input": "A", "score": 0.0, "step": 3})
    rows.append({"uid": "aaa_0_1", "input": "A", "score": 1.0, "step": 3})
    for session in range(4):
        rows.append({"uid": f"bbb_{session}_0", "input": "B", "score": 1.0, "step": 3})
    pad = "pad" + "0123456789abcdef" * 2
    rows += [{"uid": f"{pad}_{i}_0", "input": "", "score": 0.0, "step": 3} for i in range(3)]
    (directory / "3.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (timeline, _table, _), loaded = timeline_of(directory)
    assert timeline.series["acr"].tolist() == [0.5]
    assert timeline.series["acr_all_pass"].tolist() == [0.5]
    assert timeline.series["samples"].tolist() == [8]
    notes = " ".join(loaded.notes)
    assert "1 earlier-turn output" in notes and "3 padding row" in notes


def test_one_file_with_many_steps(tmp_path):
    run = draw_run(5, seed=3)
    directory = write_dump(tmp_path / "rollouts", run)
    merged = tmp_path / "all.jsonl"
    merged.write_text("".join((directory / f"{step}.jsonl").read_text() for step in run))
    (timeline, _, _), _ = timeline_of(merged)
    np.testing.assert_allclose(timeline.series["acr"], truth(run).acr)


def test_validation_dump_reads_like_a_rollout_dump(tmp_path, analyze):
    run = draw_run(12, seed=4)
    rollouts = write_dump(tmp_path / "rollouts", run)
    val = write_dump(tmp_path / "val", {step: groups for step, groups in run.items() if step % 4 == 0}, with_uid=False)
    code, document, out, _ = analyze(rollouts, "--val", val)
    assert code == 0
    validation = document["runs"][0]["validation"]
    expected = {step: value for step, value in zip(truth(run).steps, truth(run).reward_mean) if step % 4 == 0}
    assert validation["per_step"]["step"] == sorted(expected)
    assert validation["per_step"]["reward_mean"] == pytest.approx([expected[s] for s in sorted(expected)])
    assert validation["last"]["step"] == 12
    assert "validation mean score" in out


# ------------------------------------------------------------------ damaged files


def test_cut_last_line_drops_the_last_step_and_says_where(tmp_path):
    run = draw_run(6, seed=5)
    directory = write_dump(tmp_path / "rollouts", run)
    last = directory / "6.jsonl"
    text = last.read_text()
    last.write_text(text[: len(text) - 25])  # cut inside the last line
    (timeline, _, _), loaded = timeline_of(directory)
    assert timeline.steps.tolist() == [1, 2, 3, 4, 5]
    np.testing.assert_allclose(timeline.series["acr"], truth(run).acr[:5])
    line_count = text.count("\n")
    assert f"{last}:{line_count}: last line cut short" in loaded.notes[0]
    assert "step 6 left out" in loaded.notes[0]


def test_cut_line_in_an_earlier_file_is_an_error(tmp_path):
    directory = write_dump(tmp_path / "rollouts", draw_run(4, seed=6))
    damaged = directory / "2.jsonl"
    damaged.write_text(damaged.read_text()[:-10])
    with pytest.raises(AnalyzeError, match=r"2\.jsonl:\d+: line cut short, but later dump files follow"):
        load(directory)


def test_malformed_line_names_file_and_line(tmp_path):
    directory = write_dump(tmp_path / "rollouts", draw_run(3, seed=7))
    lines = (directory / "2.jsonl").read_text().splitlines(keepends=True)
    lines[4] = '{"input": "x", "score": 1.0, "step": 2,\n'
    (directory / "2.jsonl").write_text("".join(lines))
    with pytest.raises(AnalyzeError, match=r"2\.jsonl:5: not valid JSON"):
        load(directory)


@pytest.mark.parametrize(
    "record, message",
    [
        ({"input": "x", "step": 1}, "sample has no 'score'"),
        ({"input": "x", "score": 1.0}, "sample has no 'step'"),
        ({"output": "x", "score": 1.0, "step": 1}, "neither 'uid' nor 'input'"),
        ({"input": "x", "score": "1", "step": 1}, "score '1' is not a finite number"),
        ({"input": "x", "score": float("nan"), "step": 1}, "score nan is not a finite number"),
        ({"input": "x", "score": 1.0, "step": 1.5}, "step 1.5 is not an integer"),
        ([1, 2], "expected a JSON object per sample"),
    ],
)
def test_bad_sample_is_an_error_at_its_line(tmp_path, record, message):
    path = tmp_path / "dump.jsonl"
    good = {"input": "x", "score": 0.0, "step": 1}
    path.write_text(json.dumps(good) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(AnalyzeError) as err:
        read_dumps([path])
    assert f"{path}:2: " in str(err.value) and message in str(err.value)


def test_step_in_two_files_is_an_error(tmp_path):
    directory = write_dump(tmp_path / "rollouts", draw_run(2, seed=8))
    (directory / "2.jsonl").write_text((directory / "1.jsonl").read_text())
    with pytest.raises(AnalyzeError, match=r"2\.jsonl:1: step 1 also appears in .*1\.jsonl"):
        load(directory)


def test_group_with_two_prompts_is_an_error(tmp_path):
    path = tmp_path / "dump.jsonl"
    rows = [{"uid": "u1", "input": "A", "score": 0.0, "step": 1}, {"uid": "u1", "input": "B", "score": 1.0, "step": 1}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(AnalyzeError, match="step 1: group 'u1' holds samples of different prompts"):
        timeline_of(path)


def test_rewards_outside_the_bounds_need_them_set(tmp_path, analyze):
    # analyze replays AVSPO with the paper's trigger, which places virtual rewards between the bounds.
    path = tmp_path / "dump.jsonl"
    rows = [{"input": "A", "score": s, "step": 1} for s in (-1.0, -1.0, 1.0, 1.0)]
    rows += [{"input": "B", "score": -1.0, "step": 1} for _ in range(4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, _, err = analyze(path)
    assert code == 2 and f"{path}: step 1:" in err and "reward_low" in err
    code, document, _, _ = analyze(path, "--reward-low", "-1")
    assert code == 0
    assert document["runs"][0]["per_step"]["acr_all_fail"] == [0.5]
