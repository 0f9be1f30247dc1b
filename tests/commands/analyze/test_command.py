"""``avspo analyze`` end to end: the report, the plots, several runs side by side, and errors on the command line."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from commands.analyze.generated_runs import avspo_rows, draw_run, truth, write_dump, write_verl_file_log

from avspo_plugin.commands.analyze import plots

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
    assert [first["label"], second["label"]] == ["rollouts", "exp"]
    assert first["exact"] and second["exact"]
    assert first["early_warning"]["window"] == [1, 20]
    assert first["means"]["acr"] == pytest.approx(sum(truth(draw_run(60, seed=20)).acr) / 60)
    assert second["means"]["acr"] == pytest.approx(4 / 6)
    assert second["stagnation"]["fired_at_step"] == 51
    assert [row["label"] for row in document["comparison"]] == ["rollouts", "exp"]
    assert first["avspo"]["source"] == "replay" and second["avspo"]["source"] == "threshold"
    assert first["prompts"]["always_all_fail"] == 1 and first["prompts"]["top"][0]["prompt"].startswith("Compute")
    out_dir = tmp_path / "out"
    assert first["files"] == {"prompts_csv": str(out_dir / "rollouts.prompts.csv"),
                              "acr_timeline": str(out_dir / "rollouts.acr_timeline.png"),
                              "prompt_collapse_hist": str(out_dir / "rollouts.prompt_collapse_hist.png")}
    assert second["files"] == {"acr_timeline": str(out_dir / "exp.acr_timeline.png")}
    assert document["comparison_plot"] == str(out_dir / "acr_compare.png")
    for path in (first["files"]["acr_timeline"], first["files"]["prompt_collapse_hist"],
                 second["files"]["acr_timeline"], document["comparison_plot"]):
        with open(path, "rb") as handle:
            assert handle.read(8) == PNG_MAGIC
    assert sorted(path.name for path in out_dir.iterdir()) == [
        "acr_compare.png", "analysis.json", "analysis.md", "exp.acr_timeline.png", "rollouts.acr_timeline.png",
        "rollouts.prompt_collapse_hist.png", "rollouts.prompts.csv"]  # every run's files beside analysis.json
    assert "prompt_collapse_hist" not in second["files"]  # no per-sample data, no per-prompt histogram
    with open(first["files"]["prompts_csv"]) as handle:
        assert handle.readline().startswith("prompt,groups,collapsed,all_fail,all_pass")
        assert len(handle.readlines()) == 6
    assert "== side by side" in out and "FIRED at step 51" in out
    assert "DAPO dynamic sampling (verl algorithm.filter_groups" in out


def keep_figures(monkeypatch, name: str, figures: list) -> None:
    """Have the command's call of plots.<name> keep the figure it draws, for the test to read its axes."""
    draw = getattr(plots, name)

    def drawing(*args):
        figures.append(draw(*args))
        return figures[-1]

    monkeypatch.setattr(plots, name, drawing)


def test_timeline_plots_show_whole_steps_and_only_the_collapse_kinds_a_run_has(tmp_path, analyze, monkeypatch):
    """Three steps: the step axis ticks whole steps, not 1.25, 1.5, ...; a run without all-pass groups lists none."""
    timelines, comparisons = [], []
    keep_figures(monkeypatch, "acr_timeline", timelines)
    keep_figures(monkeypatch, "compare_acr", comparisons)
    mixed = write_dump(tmp_path / "mixed", draw_run(3, seed=20))  # prompt 0 always fails, prompt 5 always passes
    hard = write_dump(tmp_path / "hard", {step: [("a", [0.0] * 4), ("b", [1.0, 0.0, 1.0, 0.0])] for step in (1, 2, 3)})
    code, document, _, _ = analyze(mixed, hard, plots=True)
    assert code == 0 and len(timelines) == 2 and len(comparisons) == 1
    for figure in (*timelines, *comparisons):
        for axes in figure.axes:  # the timeline's reward panel below shares the step axis
            lowest, highest = axes.get_xlim()
            shown = [tick for tick in axes.get_xticks() if lowest <= tick <= highest]
            assert shown == [1, 2, 3], (axes.get_ylabel(), list(axes.get_xticks()))
    legends = [[text.get_text() for text in figure.axes[0].get_legend().get_texts()] for figure in timelines]
    early = [f"early window (ACR {run['early_warning']['acr']:.3f})" for run in document["runs"]]
    # Dumps: AVSPO's replay on the recorded rewards, labelled as a replay, with the steps its trigger opened on.
    replayed = [["AVSPO replayed: effective ACR (advantages all zero)",
                 f"AVSPO replayed: trigger open ({sum(map(bool, run['per_step']['triggered']))} of 3 steps)"]
                for run in document["runs"]]
    assert legends[0] == ["all-fail groups", "all-pass groups", "ACR", *replayed[0], "stagnation level 0.35", early[0]]
    assert legends[1] == ["all-fail groups", "ACR", *replayed[1], "stagnation level 0.35", early[1]]


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
    assert "Regime: all-fail dominant (the prompts are mostly too hard for the policy). The decision table " \
           "(docs/evidence/results.md#decision-table) says, per regime, what the lab read" in out
    assert "Regime: mixed. The decision table" in out
    # and the lab case nearest each run's early split of collapsed groups
    assert out.count("Which case this run is nearest:") == 2


def test_same_path_tails_get_distinct_labels(tmp_path, analyze):
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


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--val", "nobody=VAL"], "no run is labelled 'nobody'"),
        (["--val", "VAL", "--val", "VAL"], "more validation dumps than runs"),
        (["--stagnation-acr", "2"], "stagnation_acr=2.0 is invalid"),
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


def test_out_naming_a_file_says_what_to_do(tmp_path, analyze):
    taken = tmp_path / "analysis"
    taken.write_text("notes")
    code, _, _, err = analyze(write_dump(tmp_path / "r", draw_run(3, seed=25)), out=taken)
    assert code == 2 and taken.read_text() == "notes"
    assert err == (f"avspo analyze: error: --out {taken} is a file: --out names the folder analysis.json and the plots "
                   "go into (made if missing); name another folder, or move the file away\n")


def test_run_labels_never_write_outside_out(tmp_path, analyze):
    """Labels that are paths ('..', 'a/b', absolute, empty, NUL) start plain file names in --out; the report keeps
    them."""
    run = write_dump(tmp_path / "runs" / "r", draw_run(3, seed=27))
    out = tmp_path / "deep" / "out"
    labels = ["..", ".", "a/b", str(tmp_path / "abs"), "x\0y", "A", "a", "CON", "..."]
    code, document, _, _ = analyze(*(f"{label}={run}" for label in labels), f"={run}", out=out)
    assert code == 0
    assert [r["label"] for r in document["runs"]][: len(labels)] == labels
    prefixes = [r["file_prefix"] for r in document["runs"]]
    assert len({name.casefold() for name in prefixes}) == len(prefixes) == len(labels) + 1
    written = {path for path in tmp_path.rglob("*") if path.is_file()} - set((tmp_path / "runs").rglob("*"))
    assert written == {out / "analysis.json", out / "analysis.md"} | {out / f"{name}.prompts.csv" for name in prefixes}
    for name in prefixes:
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
