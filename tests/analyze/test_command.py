"""``avspo analyze`` end to end: the report, the plots, several runs side by side, and errors on the command line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from analyze.generated_runs import avspo_rows, draw_run, truth, write_dump, write_verl_file_log

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def stalled_run(num_steps):
    """Four of six prompts collapse at every step (0 and 1 all-fail, 4 and 5 all-pass): ACR = 4/6 throughout."""
    run = draw_run(num_steps, seed=21)
    for groups in run.values():
        groups[1] = (groups[1][0], [0.0] * 4)
        groups[4] = (groups[4][0], [1.0] * 4)
        groups[2] = (groups[2][0], [1.0, 0.0, 0.0, 1.0])
        groups[3] = (groups[3][0], [1.0, 1.0, 0.0, 1.0])
    return run


def test_two_runs_side_by_side_with_plots(tmp_path, analyze):
    healthy = write_dump(tmp_path / "a" / "rollouts", draw_run(60, seed=20))
    stalled = write_verl_file_log(tmp_path / "b" / "exp.jsonl", avspo_rows(truth(stalled_run(60))))
    code, document, out, _ = analyze(healthy, stalled, "--early-steps", "20", plots=True)
    assert code == 0
    first, second = document["runs"]
    assert [first["label"], second["label"]] == ["rollouts", "exp.jsonl"]
    assert first["exact"] and second["exact"]
    assert first["early_warning"]["window"] == [1, 20]
    assert first["means"]["acr"] == pytest.approx(sum(truth(draw_run(60, seed=20)).acr) / 60)
    assert second["means"]["acr"] == pytest.approx(4 / 6)
    assert second["stagnation"]["fired_at_step"] == 51
    assert second["projection"]["value"] == pytest.approx(51.4 - 29.6 * 4 / 6)
    assert [row["label"] for row in document["comparison"]] == ["rollouts", "exp.jsonl"]
    assert first["avspo"]["source"] == "replay" and second["avspo"]["source"] == "threshold"
    assert first["prompts"]["always_all_fail"] == 1 and first["prompts"]["top"][0]["prompt"].startswith("Compute")
    for path in (*first["files"].values(), second["files"]["acr_timeline"], document["comparison_plot"]):
        if path.endswith(".png"):
            with open(path, "rb") as handle:
                assert handle.read(8) == PNG_MAGIC
    assert "prompt_collapse_hist" not in second["files"]  # no per-sample data, no per-prompt histogram
    with open(first["files"]["prompts_csv"]) as handle:
        assert handle.readline().startswith("prompt,groups,collapsed,all_fail,all_pass")
        assert len(handle.readlines()) == 6
    assert "== side by side" in out and "FIRED at step 51" in out
    assert "DAPO dynamic sampling (verl algorithm.filter_groups" in out


def test_each_run_is_named_by_its_regime_and_pointed_to_the_decision_table(tmp_path, analyze):
    hard = stalled_run(30)
    for groups in hard.values():  # the all-pass prompts fail too: all-fail groups are 4 of 6, all-pass none
        groups[4] = (groups[4][0], [0.0] * 4)
        groups[5] = (groups[5][0], [0.0] * 4)
    mixed = write_verl_file_log(tmp_path / "mixed.jsonl", avspo_rows(truth(stalled_run(30))))
    code, document, out, _ = analyze(write_dump(tmp_path / "hard", hard), mixed)
    assert code == 0
    first, second = document["runs"]
    assert first["regime"]["name"] == "all_fail" and first["regime"]["all_pass"] == 0
    assert second["regime"]["name"] == "mixed"
    assert [row["regime"] for row in document["comparison"]] == ["all_fail", "mixed"]
    assert "Regime: all-fail dominant (the prompts are mostly too hard for the policy). The row 'all-fail " \
           "dominant' of the decision table (docs/results.md#decision-table)" in out
    assert "Regime: mixed. The row 'mixed'" in out


def test_same_folder_names_get_distinct_labels(tmp_path, analyze):
    run = draw_run(5, seed=22)
    a = write_dump(tmp_path / "a" / "rollouts", run)
    b = write_dump(tmp_path / "b" / "rollouts", run)
    code, document, _, _ = analyze(a, b, f"mine={a}")
    assert code == 0
    assert [r["label"] for r in document["runs"]] == ["a/rollouts", "b/rollouts", "mine"]


def test_validation_by_label(tmp_path, analyze):
    run = draw_run(8, seed=23)
    a = write_dump(tmp_path / "a", run)
    b = write_dump(tmp_path / "b", run)
    val = write_dump(tmp_path / "val", {8: run[8]})
    code, document, _, _ = analyze(f"first={a}", f"second={b}", "--val", f"second={val}")
    assert code == 0
    assert "validation" not in document["runs"][0]
    assert document["runs"][1]["validation"]["last"]["step"] == 8


def test_fit_from_file(tmp_path, analyze):
    fit = tmp_path / "fit.json"
    fit.write_text(json.dumps({"intercept": 1.0, "slope": -1.0, "early_steps": 5, "target": "final lab accuracy"}))
    code, document, out, _ = analyze(write_dump(tmp_path / "r", draw_run(10, seed=24)), "--fit", fit)
    assert code == 0
    projection = document["runs"][0]["projection"]
    assert projection["window"] == [1, 5] and projection["fit"]["source"] == str(fit)
    assert projection["value"] == pytest.approx(1.0 - sum(truth(draw_run(10, seed=24)).acr[:5]) / 5)
    assert "projected final lab accuracy" in out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--val", "nobody=VAL"], "no run is labelled 'nobody'"),
        (["--val", "VAL", "--val", "VAL"], "more validation dumps than runs"),
        (["--stagnation-acr", "2"], "stagnation_acr=2.0 is invalid"),
        (["--fit", "MISSING"], "fit file not found"),
    ],
)
def test_command_line_errors_exit_2_with_a_message(tmp_path, analyze, extra, message):
    run = write_dump(tmp_path / "r", draw_run(3, seed=25))
    val = write_dump(tmp_path / "v", draw_run(1, seed=25))
    extra = [str(val) if arg == "VAL" else arg.replace("VAL", str(val)).replace("MISSING", str(tmp_path / "no.json"))
             for arg in extra]
    code, _, _, err = analyze(run, *extra)
    assert code == 2
    assert err.startswith("avspo analyze: error:") and message in err


def test_bad_file_error_names_file_and_line(tmp_path, analyze):
    path = write_verl_file_log(tmp_path / "exp.jsonl", avspo_rows(truth(draw_run(5, seed=26))))
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = "not json\n"
    path.write_text("".join(lines))
    code, _, _, err = analyze(path)
    assert code == 2 and f"{path}:3: not valid JSON" in err


def test_run_labels_never_write_outside_out(tmp_path, analyze):
    """Labels that are paths ('..', 'a/b', absolute, empty, NUL) name a folder inside --out; the report keeps them."""
    run = write_dump(tmp_path / "runs" / "r", draw_run(3, seed=27))
    out = tmp_path / "deep" / "out"
    labels = ["..", ".", "a/b", str(tmp_path / "abs"), "x\0y", "A", "a", "CON", "..."]
    code, document, _, _ = analyze(*(f"{label}={run}" for label in labels), f"={run}", out=out)
    assert code == 0
    assert [r["label"] for r in document["runs"]][: len(labels)] == labels
    folders = [r["folder"] for r in document["runs"]]
    assert len({name.casefold() for name in folders}) == len(folders) == len(labels) + 1
    written = {path for path in tmp_path.rglob("*") if path.is_file()} - set((tmp_path / "runs").rglob("*"))
    assert len(written) == len(folders) + 1 and all(out in path.parents for path in written)  # prompts.csv each
    for name in folders:
        assert (out / name / "prompts.csv").is_file()
        assert not name.startswith((".", "-")) and name.split(".")[0].lower() != "con"


def test_a_label_is_literal_text_in_the_plots(tmp_path, analyze):
    run = write_dump(tmp_path / "r", draw_run(3, seed=27))
    code, document, out, _ = analyze(f"$\\frac{{$\x1b[2J={run}", plots=True)
    assert code == 0 and "\\x1b[2J" in out and "\x1b" not in out
    assert Path(document["runs"][0]["files"]["acr_timeline"]).read_bytes()[:8] == PNG_MAGIC


def test_prompts_csv_neutralises_formulas_and_keeps_numbers(tmp_path, analyze):
    """OWASP CSV injection: text cells starting with = + - @ tab or CR get a leading quote; numbers do not."""
    prompts = ["=HYPERLINK(\"http://x\")", "+1", "-2+3", "@SUM(A1)", "\tx", "\rx", "plain"]
    run = {1: [(prompt, [-1.0] * 4) for prompt in prompts], 2: [(prompt, [-1.0] * 4) for prompt in prompts]}
    code, document, _, _ = analyze(write_dump(tmp_path / "r", run), "--reward-low", "-1")
    assert code == 0
    with open(document["runs"][0]["files"]["prompts_csv"], newline="") as handle:
        rows = list(csv.reader(handle))[1:]
    assert [row[0] for row in rows] == ["'" + text for text in prompts[:-1]] + ["plain"]
    assert all(row[7] == "-1.0" for row in rows)  # the negative mean reward is a number, not quoted
