"""`avspo analyze --fit-final KEY`: the lab's pre-registered models on a user's own runs, read from verl file-logger
logs: the lab's own sweep runs written as verl logs, a sweep where early ACR truly adds (a forecast is printed for
the run without KEY), and too few runs (refused, naming the minimum)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from commands.analyze.generated_runs import write_verl_file_log

ROOT = Path(__file__).parents[3]
KEY = "val-core/addition/acc/mean@4"
STEPS = 10


def verl_log(path: Path, lr: float, group_size: int, signals: dict, final: float | None) -> Path:
    """A verl file-logger log of a run whose early window holds these signals (held over every step), with the
    final score at the last step (none: a run still going)."""
    rows = {step: {"avspo/acr": signals["acr"], "avspo/acr_all_fail": signals["acr_all_fail"],
                   "avspo/acr_all_pass": signals["acr_all_pass"], "avspo/reward_mean": signals["reward"],
                   "critic/score/mean": signals["reward"], "actor/lr": lr, "rollout/n": group_size}
            for step in range(1, STEPS + 1)}
    if final is not None:
        rows[STEPS][KEY] = final
    return write_verl_file_log(path, rows)


def test_the_labs_sweep_runs_as_verl_logs(tmp_path, analyze):
    """One base's 16 runs of the lab's sweep (sweep.json), each as the verl log of its early signals and final
    accuracy: the fit runs on them, and prints a forecast only when its own decision says early ACR adds."""
    points = [p for p in json.loads((ROOT / "docs/evidence/sweep/sweep.json").read_text())["points"]
              if p["base"] == "carrydrop20"]
    paths = [str(verl_log(tmp_path / f"run{i}.jsonl", p["lr"], p["group_size"], p["signals"], p["final_accuracy"]))
             for i, p in enumerate(points)]
    code, document, out, _ = analyze(*paths, "--fit-final", KEY, "--fit-setting", "actor/lr", "--fit-setting",
                                     "rollout/n", "--early-steps", "2")
    assert code == 0
    own = document["own_fit"]
    table = own["table"]
    assert table["runs"] == 16 and table["setting_columns"] == ["log2 actor/lr", "rollout/n"]
    assert table["bootstrap"]["resamples"]["leave_one_setting_out"]["groups"] == 4
    gain = table["added"]["acr"]["leave_one_setting_out"]
    assert f"change {gain['value']:+.3f} (95% CI {gain['ci95'][0]:+.3f}" in out
    if table["decision"]["adds"]:
        assert "so: on your runs early ACR adds" in out
    else:
        assert "early ACR does not add" in out and "no forecast printed" in out and own["forecasts"] is None


def test_a_sweep_where_acr_adds_forecasts_the_unfinished_run_and_too_few_runs_are_refused(tmp_path, analyze):
    rng = np.random.default_rng(2)
    paths, truth = [], None
    for i in range(17):
        lr, group_size = (1e-4, 2e-4, 4e-4, 8e-4)[i % 4], (4, 8)[(i // 4) % 2]
        acr = float(rng.uniform(0.1, 0.6))
        signals = {"acr": acr, "acr_all_fail": acr / 2, "acr_all_pass": acr / 2, "reward": float(rng.uniform(0.3, 0.6))}
        score = 0.2 + 0.05 * np.log2(lr / 1e-4) + 0.3 * signals["reward"] - 0.8 * acr + rng.normal(0, 0.01)
        last = i == 16
        truth = score if last else truth
        paths.append(str(verl_log(tmp_path / f"run{i}.jsonl", lr, group_size, signals, None if last else score)))
    code, document, out, _ = analyze(*paths, "--fit-final", KEY, "--early-steps", "2")
    assert code == 0
    own = document["own_fit"]
    assert own["settings"] == ["actor/lr"] and own["unfinished_runs"] == ["run16"]  # the lr found in the logs
    assert own["table"]["decision"]["adds"] and "so: on your runs early ACR adds" in out
    (forecast,) = own["forecasts"]
    assert forecast["run"] == "run16" and abs(forecast[KEY] - truth) < 0.05
    assert f"forecast {KEY} of run16: " in out

    code, _, _, err = analyze(*paths[:6], "--fit-final", KEY, "--early-steps", "2", out=tmp_path / "few")
    assert code != 0
    assert (f"--fit-final {KEY}: 6 finished runs log {KEY} (4 distinct settings); the pre-registered models need at "
            "least 12 runs (3 per parameter of the largest model, 4 parameters) and at least 4 distinct settings") in err
