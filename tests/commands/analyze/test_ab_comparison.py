"""The one-GPU A/B's ending (recipes/run_ab_1gpu.sh): one ``avspo analyze`` of a GRPO run (the monitor's metrics) and
an AVSPO run (the estimator's), both verl file-logger logs with a validation metric: ACR and effective ACR side by
side, accuracy curves against the rollouts spent, the rollouts each run took to reach the GRPO run's final accuracy,
the caveat of one seed, and analysis.md beside analysis.json and the plots, naming files that exist."""

from __future__ import annotations

import re

import numpy as np
import pytest
from commands.analyze.generated_runs import PROMPTS, G, avspo_rows, draw_run, truth, write_verl_file_log

from avspo_plugin.commands.analyze import plots
from avspo_plugin.commands.analyze.accuracy import ONE_SEED_CAVEAT, answer, paired_difference
from avspo_plugin.commands.analyze.run_logs import AnalyzeError

ACCURACY = "val-core/gsm8k/acc/mean@1"
STEPS = 8
SAMPLES = len(PROMPTS) * G  # rollouts per step
# Validation before training (step 0) and every 4 steps, as verl logs it: step 0 carries the validation alone.
GRPO_VAL = {0: 0.30, 4: 0.36, 8: 0.40}
AVSPO_VAL = {0: 0.30, 4: 0.41, 8: 0.43}
# The AVSPO run's own metrics: its trigger opened on steps 3 and 6, which then had no group without an advantage.
TRIGGERED = {3, 6}


def ab_logs(tmp_path, avspo_val=AVSPO_VAL):
    grpo_truth, avspo_truth = truth(draw_run(STEPS, seed=1)), truth(draw_run(STEPS, seed=2))
    grpo = avspo_rows(grpo_truth)
    avspo = avspo_rows(avspo_truth)
    for step, acr in zip(avspo_truth.steps, avspo_truth.acr):
        avspo[step].update({"avspo/triggered": float(step in TRIGGERED), "avspo/threshold": 0.5,
                            "avspo/augmented_groups": acr if step in TRIGGERED else 0.0,
                            "avspo/effective_acr": 0.0 if step in TRIGGERED else acr})
    for rows, validation in ((grpo, GRPO_VAL), (avspo, avspo_val)):
        for step in rows:
            rows[step]["avspo/samples"] = float(SAMPLES)
        for step, accuracy in validation.items():
            rows.setdefault(step, {})[ACCURACY] = accuracy
    return (write_verl_file_log(tmp_path / "grpo.metrics.jsonl", dict(sorted(grpo.items()))),
            write_verl_file_log(tmp_path / "avspo.metrics.jsonl", dict(sorted(avspo.items()))),
            grpo_truth, avspo_truth)


def test_the_ab_comparison_answers_with_effective_acr_accuracy_and_rollouts(tmp_path, analyze, monkeypatch):
    timelines = []
    draw = plots.acr_timeline
    monkeypatch.setattr(plots, "acr_timeline", lambda *args: timelines.append(draw(*args)) or timelines[-1])
    grpo_log, avspo_log, grpo_truth, avspo_truth = ab_logs(tmp_path)
    code, document, out, _ = analyze(f"grpo={grpo_log}", f"avspo={avspo_log}", "--accuracy", ACCURACY, plots=True)
    assert code == 0, out

    # Effective ACR: the AVSPO run's own, the GRPO run's its ACR (GRPO's advantages are zero in exactly those groups).
    grpo_row, avspo_row = document["comparison"]
    assert grpo_row["effective_acr"] == pytest.approx(np.mean(grpo_truth.acr))
    expected = np.mean([0.0 if step in TRIGGERED else acr for step, acr in zip(avspo_truth.steps, avspo_truth.acr)])
    assert avspo_row["effective_acr"] == pytest.approx(expected)
    grpo_run, avspo_run = document["runs"]
    assert grpo_run["advice"][0].endswith("gave GRPO no advantage: "
                                          f"{100 * np.mean(grpo_truth.all_fail):.1f}% in all-fail groups, "
                                          f"{100 * np.mean(grpo_truth.all_pass):.1f}% in all-pass groups.")
    assert (f"after AVSPO's virtual rewards, {100 * expected:.1f}% of groups were left with no advantage (effective "
            "ACR): that is what this run's advantages wasted.") in avspo_run["advice"][0]

    # Accuracy against rollouts; GRPO's final 0.40 is reached by AVSPO at step 4, after 4 steps of rollouts.
    accuracy = document["accuracy_comparison"]
    assert (accuracy["key"], accuracy["reference"], accuracy["caveat"]) == (ACCURACY, "grpo", ONE_SEED_CAVEAT)
    assert accuracy["reference_final"] == {"step": 8, "accuracy": 0.40, "rollouts": 8 * SAMPLES}
    (grpo, avspo) = accuracy["runs"]
    assert (grpo["reached_at_step"], grpo["rollouts_to_reference_final"]) == (8, 8 * SAMPLES)
    assert (avspo["reached_at_step"], avspo["rollouts_to_reference_final"]) == (4, 4 * SAMPLES)
    assert [point["rollouts"] for point in avspo_run["accuracy"]["points"]] == [0, 4 * SAMPLES, 8 * SAMPLES]
    assert avspo["best"] == {"step": 8, "accuracy": 0.43, "rollouts": 8 * SAMPLES}
    assert f"== accuracy: {ACCURACY}" in out and ONE_SEED_CAVEAT in out
    assert re.search(r"avspo\s+0\.300 at step 0\s+0\.430 at step 8\s+0\.430 at step 8\s+at step 4, 96 rollouts", out)

    # The timeline of the AVSPO run shows its effective ACR and the steps its trigger opened on.
    legend = [text.get_text() for text in timelines[1].axes[0].get_legend().get_texts()]
    assert "effective ACR (advantages all zero)" in legend and f"trigger open (2 of {STEPS} steps)" in legend
    assert not any("effective ACR" in text.get_text() for text in timelines[0].axes[0].get_legend().get_texts())

    # analysis.md beside the JSON: the tables, the caveat, and only plots that exist.
    folder = tmp_path / "out"
    report = (folder / "analysis.md").read_text()
    assert report.startswith("# avspo analyze: grpo, avspo")
    assert "| run | steps | early ACR | mean ACR | effective ACR |" in report
    assert f"## Accuracy: `{ACCURACY}`" in report and ONE_SEED_CAVEAT in report
    images = re.findall(r"!\[[^]]*\]\(([^)]+)\)", report)
    assert sorted(images) == ["accuracy_compare.png", "acr_compare.png", "avspo.acr_timeline.png",
                              "grpo.acr_timeline.png"]
    assert all((folder / image).is_file() for image in images)


def test_an_accuracy_key_the_runs_did_not_log_is_an_error_naming_what_they_did(tmp_path, analyze):
    grpo_log, avspo_log, _, _ = ab_logs(tmp_path)
    code, _, _, err = analyze(f"grpo={grpo_log}", f"avspo={avspo_log}", "--accuracy", "val-core/gsm8k/acc/mean@4")
    assert code == 2
    assert f"no value of --accuracy 'val-core/gsm8k/acc/mean@4' in this log; keys of that kind here: {ACCURACY}" in err


# Final accuracies of a three-seed A/B: AVSPO ahead on every seed, by 0.02, 0.03, 0.04.
SEEDED_FINALS = {"1": (0.40, 0.42), "2": (0.35, 0.38), "3": (0.45, 0.49)}


def seeded_logs(tmp_path, finals):
    """Each arm's run per seed (labelled ARM@SEED), validation at steps 0 and 8, the final one given."""
    paths = []
    for seed, (grpo_final, avspo_final) in finals.items():
        for arm, final in (("grpo", grpo_final), ("avspo", avspo_final)):
            rows = avspo_rows(truth(draw_run(STEPS, seed=int(seed))))
            for step in rows:
                rows[step]["avspo/samples"] = float(SAMPLES)
            rows.setdefault(0, {})[ACCURACY] = 0.30
            rows[STEPS][ACCURACY] = final
            log = write_verl_file_log(tmp_path / f"{arm}.seed{seed}.metrics.jsonl", dict(sorted(rows.items())))
            paths.append(f"{arm}@{seed}={log}")
    return paths


def test_seeded_runs_are_compared_seed_by_seed_and_pooled_with_an_interval(tmp_path, analyze):
    code, document, out, _ = analyze(*seeded_logs(tmp_path, SEEDED_FINALS), "--accuracy", ACCURACY)
    assert code == 0, out
    paired = document["accuracy_comparison"]["paired"]
    assert (paired["reference"], paired["other"], paired["seeds"]) == ("grpo", "avspo", 3)
    assert [row["difference"] for row in paired["per_seed"]] == pytest.approx([0.02, 0.03, 0.04])
    assert paired["mean_difference"] == pytest.approx(0.03)
    # sd 0.01 over 3 pairs: 0.03 -+ t_{0.975, 2} * 0.01 / sqrt(3) = 0.03 -+ 0.0248.
    assert paired["interval"] == pytest.approx([0.03 - 0.024841, 0.03 + 0.024841], abs=1e-5)
    assert paired["answer"] in out and "avspo ahead of grpo: the 95% interval excludes 0" in paired["answer"]
    assert "ahead on 3 of 3" in paired["answer"] and "detect a difference of about" in paired["answer"]
    report = (tmp_path / "out" / "analysis.md").read_text()
    assert "### Seed by seed" in report and "| 3 | 0.450 | 0.490 | +0.040 |" in report


def test_one_seed_per_arm_says_it_cannot_tell_and_gives_no_interval(tmp_path, analyze):
    code, document, out, _ = analyze(*seeded_logs(tmp_path, {"7": (0.40, 0.43)}), "--accuracy", ACCURACY)
    assert code == 0, out
    paired = document["accuracy_comparison"]["paired"]
    assert paired["interval"] is None and paired["detectable"] is None
    assert "One seed per arm cannot tell the method from the seed" in paired["answer"]


def test_an_interval_that_includes_zero_shows_no_difference(tmp_path, analyze):
    finals = {"1": (0.40, 0.42), "2": (0.40, 0.37), "3": (0.40, 0.41)}
    code, document, out, _ = analyze(*seeded_logs(tmp_path, finals), "--accuracy", ACCURACY)
    assert code == 0, out
    assert "no difference shown: the 95% interval includes 0" in document["accuracy_comparison"]["paired"]["answer"]


@pytest.mark.parametrize("labels, message", [
    (["grpo@1", "avspo@1", "avspo@2"], "seed 2 was run by one arm only"),
    (["grpo@1", "avspo@1", "dapo@1"], "name 3 arms"),
    (["grpo@1", "avspo"], "carry no seed while others do"),
    (["grpo@1", "grpo@1", "avspo@1"], "has seed 1 twice"),
])
def test_seed_labels_that_do_not_pair_are_an_error_naming_why(labels, message):
    with pytest.raises(AnalyzeError, match=message):
        paired_difference(labels, [0.5] * len(labels))


def test_a_bound_near_zero_prints_its_sign():
    text = answer({"reference": "grpo", "other": "avspo", "seeds": 3, "mean_difference": 0.007, "ahead_on": 3,
                   "behind_on": 0, "interval": [0.0002, 0.0138], "level": 0.95, "detectable": 0.01})
    assert "[+0.0002, +0.014]" in text and "excludes 0" in text


def test_a_nan_accuracy_before_the_last_is_left_out_and_listed(tmp_path, analyze):
    grpo_log, avspo_log, _, _ = ab_logs(tmp_path, {**AVSPO_VAL, 4: float("nan")})
    code, document, _, err = analyze(f"grpo={grpo_log}", f"avspo={avspo_log}", "--accuracy", ACCURACY)
    assert code == 0, err
    avspo_run = document["runs"][1]
    listed = [warning for warning in avspo_run["warnings"] if warning.startswith(f"{ACCURACY}: 1 logged value(s)")]
    assert len(listed) == 1 and re.search(r"avspo\.metrics\.jsonl:\d+: step 4: nan$", listed[0]), avspo_run["warnings"]
    assert f"avspo analyze: warning: {listed[0]}" in err
    assert [point["step"] for point in avspo_run["accuracy"]["points"]] == [0, 8]
    assert avspo_run["accuracy"]["final"]["accuracy"] == AVSPO_VAL[8]


@pytest.mark.parametrize(
    "values,step,shown",
    [({8: float("nan")}, 8, "nan"), ({8: float("inf")}, 8, "inf"), ({4: float("-inf")}, 4, "-inf"),
     ({0: float("nan"), 4: float("nan"), 8: float("nan")}, 8, "nan")],
    ids=["last-nan", "last-infinity", "middle-infinity", "all-nan"],
)
def test_a_non_finite_final_or_an_infinite_accuracy_is_an_error_naming_file_step_and_key(tmp_path, analyze, values, step,
                                                                                          shown):
    """The step before a NaN final was reported as the final, without a word; all NaN said the key was missing."""
    grpo_log, avspo_log, _, _ = ab_logs(tmp_path, {**AVSPO_VAL, **values})
    code, _, _, err = analyze(f"grpo={grpo_log}", f"avspo={avspo_log}", "--accuracy", ACCURACY)
    assert code == 2
    assert re.search(rf"avspo\.metrics\.jsonl:\d+: --accuracy '{re.escape(ACCURACY)}' is {shown} at step {step} ", err), err
    assert "no value of --accuracy" not in err
