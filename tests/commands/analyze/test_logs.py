"""Tracker logs: each format read back to the ACR it carries, proxies read with their caveats, damaged files."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from commands.analyze.generated_runs import (
    G,
    avspo_rows,
    draw_run,
    truth,
    write_tensorboard,
    write_trl_state,
    write_verl_file_log,
    write_wandb_csv,
)

from avspo_plugin.commands.analyze.run_logs import AnalyzeError, load
from avspo_plugin.commands.analyze.timeline import scalar_timeline
from avspo_plugin.config import AVSPOConfig

MONITOR = AVSPOConfig(threshold_mode="never")
RUN = draw_run(40, seed=11)
TRUTH = truth(RUN)


def read(path, group_size=None):
    loaded = load(path)
    return scalar_timeline(loaded.scalars, group_size, MONITOR, str(path)), loaded


def assert_exact(timeline, t=TRUTH):
    assert timeline.exact
    assert timeline.steps.tolist() == t.steps
    np.testing.assert_allclose(timeline.series["acr"], t.acr, rtol=1e-6)
    np.testing.assert_allclose(timeline.series["acr_all_fail"], t.all_fail, rtol=1e-6)
    np.testing.assert_allclose(timeline.series["acr_all_pass"], t.all_pass, rtol=1e-6)
    np.testing.assert_allclose(timeline.series["reward_mean"], t.reward_mean, rtol=1e-6)


def test_verl_file_tracker(tmp_path):
    timeline, loaded = read(write_verl_file_log(tmp_path / "exp.jsonl", avspo_rows(TRUTH)))
    assert loaded.format == "verl file tracker"
    assert_exact(timeline)
    assert timeline.keys["acr"] == "avspo/acr" and timeline.avspo is None


def test_tensorboard_events(tmp_path):
    timeline, loaded = read(write_tensorboard(tmp_path / "tb" / "exp", avspo_rows(TRUTH)).parent)
    assert loaded.format == "TensorBoard events"
    assert_exact(timeline)


@pytest.mark.parametrize("step_column", ["_step", "train/global_step"])
def test_wandb_history_csv(tmp_path, step_column):
    rows = avspo_rows(TRUTH)
    # wandb rows are sparse: an extra row per step that logs something else only.
    timeline, loaded = read(write_wandb_csv(tmp_path / "history.csv", rows, step_column))
    assert loaded.format == "wandb history CSV"
    assert_exact(timeline)


def test_wandb_history_json_and_jsonl(tmp_path):
    records = [{"_step": step, "_runtime": 2.0, **data} for step, data in avspo_rows(TRUTH).items()]
    records.insert(3, {"_step": 3, "eval/avspo/acr": 0.99})  # an eval key never stands in for training ACR
    as_list = tmp_path / "history.json"
    as_list.write_text(json.dumps(records))
    timeline, loaded = read(as_list)
    assert loaded.format == "wandb history JSON"
    assert_exact(timeline)
    as_lines = tmp_path / "history.jsonl"
    as_lines.write_text("".join(json.dumps(r) + "\n" for r in records))
    timeline, loaded = read(as_lines)
    assert loaded.format == "wandb history JSON lines"
    assert_exact(timeline)


def test_plugin_keys_under_a_host_prefix_and_avspo_metrics_of_an_avspo_run(tmp_path):
    rows = {step: {f"train/{k}": v for k, v in data.items()} | {"train/avspo/triggered": 1.0,
            "train/avspo/effective_acr": 0.0, "train/avspo/augmented_groups": data["avspo/acr"],
            "train/avspo/threshold": 0.5} for step, data in avspo_rows(TRUTH).items()}
    timeline, _ = read(write_tensorboard(tmp_path / "tb", rows))
    np.testing.assert_allclose(timeline.series["acr"], TRUTH.acr, rtol=1e-6)
    assert timeline.keys["acr"] == "train/avspo/acr"
    assert timeline.avspo == "logged"


def test_trl_trainer_state_reads_frac_reward_zero_std_with_caveats(tmp_path):
    path = write_trl_state(tmp_path / "out" / "trainer_state.json", TRUTH)
    for source in (path, path.parent):
        timeline, loaded = read(source)
        assert loaded.format == "TRL trainer_state.json"
        assert not timeline.exact
        np.testing.assert_allclose(timeline.series["acr"], TRUTH.acr)
        np.testing.assert_allclose(timeline.series["reward_mean"], TRUTH.reward_mean)
        assert timeline.keys["acr"] == "frac_reward_zero_std"  # not eval_frac_reward_zero_std
        assert any("fraction of samples, not of groups" in c for c in timeline.caveats)
        assert timeline.get("acr_all_fail") is None


def test_trl_output_directory_uses_the_newest_checkpoint(tmp_path):
    short = truth(draw_run(10, seed=11))
    write_trl_state(tmp_path / "out" / "checkpoint-10" / "trainer_state.json", short)
    write_trl_state(tmp_path / "out" / "checkpoint-40" / "trainer_state.json", TRUTH)
    # A resumed TRL run with report_to=tensorboard: one event directory per launch under runs/.
    write_tensorboard(tmp_path / "out" / "runs" / "launch1", {1: {"train/frac_reward_zero_std": 0.5}})
    write_tensorboard(tmp_path / "out" / "runs" / "launch2", {2: {"train/frac_reward_zero_std": 0.5}})
    timeline, loaded = read(tmp_path / "out")
    assert loaded.path.parent.name == "checkpoint-40"
    assert len(timeline.steps) == 40


def test_trl_tensorboard_keys(tmp_path):
    rows = {step: {"train/frac_reward_zero_std": acr, "train/reward": r, "eval/frac_reward_zero_std": 1.0}
            for step, acr, r in zip(TRUTH.steps, TRUTH.acr, TRUTH.reward_mean)}
    timeline, _ = read(write_tensorboard(tmp_path / "runs" / "Jan01", rows))
    assert timeline.keys == {"acr": "train/frac_reward_zero_std", "reward_mean": "train/reward"}
    np.testing.assert_allclose(timeline.series["acr"], TRUTH.acr, rtol=1e-6)


def _openrlhf_rows(group_size):
    """What OpenRLHF 0.11 logs for RUN: group_reward_std = mean over samples of their group's unbiased std;
    dynamic_filtering_pass_rate = 100 * accepted samples / consumed prompts."""
    rows = {}
    for step, groups in RUN.items():
        stds = [float(np.std(r, ddof=1)) for _, r in groups]
        kept = sum(len(set(r)) > 1 for _, r in groups)
        rows[step] = {"train/group_reward_std": float(np.mean(stds)),
                      "train/dynamic_filtering_pass_rate": 100.0 * kept * group_size / len(groups),
                      "train/rollout/reward_mean": sum(map(sum, (r for _, r in groups))) / (len(groups) * group_size)}
    return rows


def test_openrlhf_pass_rate_needs_the_group_size_and_then_gives_acr(tmp_path):
    path = write_tensorboard(tmp_path / "tb", _openrlhf_rows(G))
    with pytest.raises(AnalyzeError, match="pass --group-size"):
        read(path)
    timeline, _ = read(path, group_size=G)
    np.testing.assert_allclose(timeline.series["acr"], TRUTH.acr, atol=1e-6)
    np.testing.assert_allclose(timeline.series["reward_mean"], TRUTH.reward_mean, rtol=1e-6)
    assert timeline.keys["acr"] == "train/dynamic_filtering_pass_rate"
    with pytest.raises(AnalyzeError, match="is the group size right"):
        read(path, group_size=1)


def test_openrlhf_group_std_brackets_the_true_acr(tmp_path):
    rows = {step: {k: v for k, v in data.items() if "pass_rate" not in k} for step, data in _openrlhf_rows(G).items()}
    timeline, _ = read(write_tensorboard(tmp_path / "tb", rows), group_size=G)
    low, high = timeline.series["acr_low"], timeline.series["acr_high"]
    truth_acr = np.asarray(TRUTH.acr)
    assert np.all(low <= truth_acr + 1e-6) and np.all(truth_acr <= high + 1e-6)
    assert np.any(high - low > 0.05)  # a real interval, not a point
    assert any("brackets ACR" in c for c in timeline.caveats)


def test_log_without_any_acr_key_says_what_it_looked_for(tmp_path):
    path = write_verl_file_log(tmp_path / "exp.jsonl", {1: {"critic/score/mean": 0.2}, 2: {"critic/score/mean": 0.3}})
    with pytest.raises(AnalyzeError, match=r"no ACR in this log: looked for avspo/acr .* Keys found: critic/score/mean"):
        read(path)


# ------------------------------------------------------------------ damaged logs


def test_cut_last_line_of_the_file_tracker_is_left_out(tmp_path):
    path = write_verl_file_log(tmp_path / "exp.jsonl", avspo_rows(TRUTH))
    text = path.read_text()
    path.write_text(text[:-30])
    timeline, loaded = read(path)
    assert timeline.steps.tolist() == TRUTH.steps[:-1]
    assert f"{path}:40: last line cut short" in loaded.notes[0]


def test_malformed_file_tracker_line_names_file_and_line(tmp_path):
    path = write_verl_file_log(tmp_path / "exp.jsonl", avspo_rows(TRUTH))
    lines = path.read_text().splitlines(keepends=True)
    lines[6] = '{"step": 7, "data": {"avspo/acr": 0.5,,}}\n'
    path.write_text("".join(lines))
    with pytest.raises(AnalyzeError, match=rf"{path}:7: not valid JSON"):
        read(path)
    lines[6] = '{"step": 7, "metrics": {}}\n'
    path.write_text("".join(lines))
    with pytest.raises(AnalyzeError, match=rf"{path}:7: expected .*verl file tracker"):
        read(path)


@pytest.mark.parametrize("bad", ["oops", float("inf")])
def test_non_numeric_acr_value_is_reported_where_it_is(tmp_path, bad):
    rows = avspo_rows(TRUTH)
    rows[5]["avspo/acr"] = bad
    path = write_verl_file_log(tmp_path / "exp.jsonl", rows)
    with pytest.raises(AnalyzeError, match=rf"{path}:5: 'avspo/acr' has a value that is not a number"):
        read(path)


def test_resumed_run_keeps_the_later_values_and_says_so(tmp_path):
    rows = avspo_rows(TRUTH)
    path = write_verl_file_log(tmp_path / "exp.jsonl", rows)
    with open(path, "a") as handle:  # resumed from step 38: steps 38-40 logged again
        for step in (38, 39, 40):
            handle.write(json.dumps({"step": step, "data": rows[step] | {"avspo/acr": 0.125}}) + "\n")
    timeline, loaded = read(path)
    assert timeline.series["acr"][-3:].tolist() == [0.125] * 3
    assert "3 step(s) logged more than once" in loaded.notes[0]


def test_cut_tensorboard_file_drops_its_last_step(tmp_path):
    directory = write_tensorboard(tmp_path / "tb", avspo_rows(TRUTH))
    event_file = next(directory.iterdir())
    data = event_file.read_bytes()
    event_file.write_bytes(data[:-9])
    timeline, loaded = read(directory)
    assert timeline.steps.tolist() == TRUTH.steps[:-1]
    np.testing.assert_allclose(timeline.series["acr"], TRUTH.acr[:-1], rtol=1e-6)
    assert "cut short" in loaded.notes[0] and event_file.name in loaded.notes[0]


def test_damaged_tensorboard_record_is_an_error(tmp_path):
    directory = write_tensorboard(tmp_path / "tb", avspo_rows(TRUTH))
    event_file = next(directory.iterdir())
    data = bytearray(event_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    event_file.write_bytes(bytes(data))
    with pytest.raises(AnalyzeError, match=r"record \d+ fails its checksum"):
        read(directory)


def test_tensorboard_runs_in_two_directories_must_be_passed_one_by_one(tmp_path):
    write_tensorboard(tmp_path / "runs" / "a", avspo_rows(TRUTH))
    write_tensorboard(tmp_path / "runs" / "b", avspo_rows(TRUTH))
    with pytest.raises(AnalyzeError, match="TensorBoard events in 2 directories"):
        read(tmp_path / "runs")


def test_cut_csv_row_is_left_out_and_bad_row_is_an_error(tmp_path):
    path = write_wandb_csv(tmp_path / "history.csv", avspo_rows(TRUTH))
    text = path.read_text()
    path.write_text(text[:-12])
    timeline, loaded = read(path)
    assert timeline.steps.tolist() == TRUTH.steps[:-1]
    assert f"{path}:41: last row cut short" in loaded.notes[0]
    lines = text.splitlines(keepends=True)
    lines[3] = "3,4.5,0.1\n"
    path.write_text("".join(lines))
    with pytest.raises(AnalyzeError, match=rf"{path}:4: 3 fields where the header has"):
        read(path)


def test_cut_json_document_keeps_complete_records(tmp_path):
    records = [{"_step": step, **data} for step, data in avspo_rows(TRUTH).items()]
    path = tmp_path / "history.json"
    text = json.dumps(records, indent=1)
    path.write_text(text[: text.rindex('"avspo/acr_all_pass"') + 5])  # cut inside the last record
    timeline, loaded = read(path)
    assert timeline.steps.tolist() == TRUTH.steps[:-1]
    assert "document cut short" in loaded.notes[0]
    path.write_text(text.replace('"_step": 3,', '"_step": 3,,', 1))
    with pytest.raises(AnalyzeError, match=rf"{path}:\d+: not valid JSON"):
        read(path)


def test_cut_trainer_state_keeps_complete_records(tmp_path):
    path = write_trl_state(tmp_path / "trainer_state.json", TRUTH)
    text = path.read_text()
    cut = text[: text.index('"frac_reward_zero_std"', len(text) // 2) + 10]
    path.write_text(cut)
    timeline, loaded = read(path)
    assert 10 < len(timeline.steps) < 40
    np.testing.assert_allclose(timeline.series["acr"], TRUTH.acr[: len(timeline.steps)])
    assert "document cut short" in loaded.notes[0]


def test_unknown_inputs_are_named(tmp_path):
    with pytest.raises(AnalyzeError, match="no such file or directory"):
        load(tmp_path / "missing")
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"hello": 1}\n')
    with pytest.raises(AnalyzeError, match=r"JSON lines of an unknown kind .* keys hello"):
        load(odd)
    (tmp_path / "empty").mkdir()
    with pytest.raises(AnalyzeError, match="found no verl dump files"):
        load(tmp_path / "empty")
    event_dir = write_tensorboard(tmp_path / "tb", avspo_rows(TRUTH))
    with pytest.raises(AnalyzeError, match="pass the directory"):
        load(next(event_dir.iterdir()))
    shutil.rmtree(event_dir)


# ------------------------------------------------------------------ bad inputs


def _latin1_byte_at_line_3(path):
    """Put a Latin-1 'é' (0xe9, not UTF-8) in line 3 of ``path``; returns its byte offset."""
    data = path.read_bytes()
    start = data.index(b"\n", data.index(b"\n") + 1) + 1
    path.write_bytes(data[:start + 1] + b"\xe9" + data[start + 1:])
    return start + 1


@pytest.mark.parametrize("writer", ["verl_file_log", "wandb_csv", "trl_state"])
def test_a_log_that_is_not_utf8_is_an_error_naming_file_line_and_byte(tmp_path, writer):
    path = {
        "verl_file_log": lambda: write_verl_file_log(tmp_path / "exp.jsonl", avspo_rows(TRUTH)),
        "wandb_csv": lambda: write_wandb_csv(tmp_path / "history.csv", avspo_rows(TRUTH)),
        "trl_state": lambda: write_trl_state(tmp_path / "trainer_state.json", TRUTH),
    }[writer]()
    offset = _latin1_byte_at_line_3(path)
    with pytest.raises(AnalyzeError, match=rf"^{path}:3: not UTF-8 text: byte offset {offset} \(0xe9: invalid "):
        read(path)


def test_a_utf8_byte_order_mark_is_read_past(tmp_path):
    path = write_wandb_csv(tmp_path / "history.csv", avspo_rows(TRUTH))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert_exact(read(path)[0])


def test_a_write_cut_inside_a_character_is_a_cut_line(tmp_path):
    path = write_verl_file_log(tmp_path / "exp.jsonl", avspo_rows(TRUTH))
    data = path.read_bytes()
    path.write_bytes(data[: data.rindex(b'"actor/entropy"')] + b'"\xc3')  # the last line ends in half an 'é'
    timeline, loaded = read(path)
    assert timeline.steps.tolist() == TRUTH.steps[:-1] and "last line cut short" in loaded.notes[0]


@pytest.mark.parametrize("bad", [float("nan"), 1.5, -0.25])
def test_acr_values_outside_0_1_are_left_out_with_a_warning_naming_file_step_and_value(tmp_path, bad):
    rows = avspo_rows(TRUTH)
    rows[5]["avspo/acr"] = bad
    rows[9]["avspo/acr_all_fail"] = bad
    path = write_verl_file_log(tmp_path / "exp.jsonl", rows)
    timeline, loaded = read(path)
    assert 5 not in timeline.steps.tolist() and len(timeline.steps) == len(TRUTH.steps) - 1
    assert np.isnan(timeline.series["acr_all_fail"][timeline.steps.tolist().index(9)])
    first, second = loaded.scalars.warnings
    assert first.startswith("avspo/acr: 1 logged value(s) NaN or outside [0, 1] left out of every mean")
    assert f"{path}:5: step 5: {bad!r}" in first and f"{path}:9: step 9: {bad!r}" in second


def test_bad_acr_values_never_enter_the_report_means(tmp_path, analyze):
    rows = avspo_rows(TRUTH)
    for step in (3, 4, 5, 6):
        rows[step]["avspo/acr"] = [float("nan"), 7.0, -1.0, 1e300][step - 3]
    path = write_verl_file_log(tmp_path / "exp.jsonl", rows)
    code, document, out, err = analyze(path)
    assert code == 0
    kept = [acr for step, acr in zip(TRUTH.steps, TRUTH.acr) if step not in (3, 4, 5, 6)]
    assert document["runs"][0]["means"]["acr"] == pytest.approx(sum(kept) / len(kept))
    assert document["runs"][0]["steps"]["count"] == len(kept)
    assert err.startswith("avspo analyze: warning: avspo/acr: 4 logged value(s)") and "and 1 more" in err
    assert f"{path}:3: step 3: nan" in err and "WARNINGS:" in out


def test_a_negative_or_nan_openrlhf_pass_rate_is_left_out_with_a_warning(tmp_path):
    rows = _openrlhf_rows(G)
    rows[4]["train/dynamic_filtering_pass_rate"], rows[7]["train/dynamic_filtering_pass_rate"] = -10.0, float("nan")
    timeline, loaded = read(write_tensorboard(tmp_path / "tb", rows), group_size=G)
    assert 4 not in timeline.steps.tolist() and 7 not in timeline.steps.tolist() and len(timeline.steps) == 38
    assert loaded.scalars.warnings[0].startswith(
        "train/dynamic_filtering_pass_rate: 2 logged value(s) NaN or outside [0, inf] left out of every mean")
    assert "(TensorBoard events): step 4: -10.0" in loaded.scalars.warnings[0]
