"""docs/method/performance.md's measurements, rendered from the JSON the benchmarks write into docs/method/performance/:
each run of ``benchmarks/estimator_bench.py --json`` (``bench-*.json``: its table, where avspo's time goes, and its
rows against the targets) and the CPU run of ``benchmarks/device_check.py --json`` (``device-check-cpu.json``: what it
read of peak memory). A new run is a new file; ``python -m renderer`` puts it on the page."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "method" / "performance.md"
RUNS = PAGE.parent / "performance"
DEVICE_CHECK = RUNS / "device-check-cpu.json"
MEASURED = ("<!-- BEGIN GENERATED performance: rendered by `python -m renderer` from docs/method/performance/bench-*.json -->",
            "<!-- END GENERATED performance -->")
DEVICE = ("<!-- BEGIN GENERATED device check: rendered by `python -m renderer` from "
          "docs/method/performance/device-check-cpu.json -->", "<!-- END GENERATED device check -->")
# The targets of issue 22.4, at B = 8192: avspo against verl's grpo_vectorized, and against the floor.
TARGET_BATCH = 8192
TARGETS = (("grpo_vectorized", 1.0), ("floor", 1.25))
PARTS = ("token_sum", "core", "broadcast")


def bench_runs() -> list[tuple[Path, dict]]:
    return [(path, json.loads(path.read_text(encoding="utf-8"))) for path in sorted(RUNS.glob("bench-*.json"))]


def ratio(row: dict, over: str) -> float:
    return row["avspo_ms"] / row[f"{over}_ms"]


def machine_words(run: dict) -> str:
    machine, versions = run["machine"], run["versions"]
    low, high = machine["load_average"]
    busy = max(low, high) > machine["cpus"]
    return (f"{machine['processor']}, {machine['cpus']} CPUs; torch {versions['torch']}, verl {versions['verl']}, "
            f"avspo-plugin {versions['avspo-plugin']}; {run['threads']} torch thread{'s' if run['threads'] > 1 else ''}, "
            f"median of {run['repeats']} interleaved rounds, "
            + ("each call timed by the process's CPU time (`--clock cpu`)" if run.get("clock") == "cpu" else
               "each call timed by the wall clock")
            + f". Load average {low:g} at the start and {high:g} at the end, the bench at nice {machine['nice']}"
            + ((": other work held more than the machine's CPUs; the CPU clock leaves out the waits for a core, not "
                "the caches the other work evicts." if run.get("clock") == "cpu" else
                ": other work held more than the machine's CPUs, so these times are a busy machine's (the ratios, "
                "timed in the same rounds, less so).") if busy else "."))


def run_section(path: Path, run: dict) -> list[str]:
    rows = [[str(r["B"]), str(r["L"]), f"{r['floor_ms']:.2f}", f"{r['avspo_ms']:.2f}", f"{r['grpo_vectorized_ms']:.2f}",
             f"{r['grpo_ms']:.1f}" if "grpo_ms" in r else "n/a", f"{ratio(r, 'grpo_vectorized'):.2f}",
             f"{ratio(r, 'floor'):.2f}", f"{r['monitor_ms']:.2f}", f"{r['monitor_ms'] / r['grpo_vectorized_ms']:.2f}"]
            for r in run["rows"]]  # fmt: skip
    parts = [[str(r["B"]), str(r["L"]), *(f"{r[f'{part}_ms']:.2f}" for part in PARTS),
              f"{r['avspo_ms'] - sum(r[f'{part}_ms'] for part in PARTS):.2f}", f"{r['avspo_ms']:.2f}",
              f"{r['floor_ms']:.2f}", f"{(r['token_sum_ms'] + r['broadcast_ms']) / r['floor_ms']:.2f}"]
             for r in run["rows"]]  # fmt: skip
    return [
        f"### {run['recorded']}: [{path.name}](performance/{path.name})",
        "",
        f"`{run['command']}` on {machine_words(run)}",
        "",
        *table(["B", "L", "floor ms", "avspo ms", "grpo_vectorized ms", "grpo ms", "avspo / grpo_vectorized",
                "avspo / floor", "monitor ms", "monitor / grpo_vectorized"], rows),
        "",
        "Where avspo's time goes, timed in the same rounds: the token sum and the final broadcast over the mask are "
        "its two (B, L) passes (verl's own estimators make the same two), the core's per-sample work is "
        "`compute_group_advantages` on the summed rewards, and the rest is the adapter's (config parsing, session "
        "bookkeeping) and what the parts timed alone do not show.",
        "",
        *table(["B", "L", "token sum ms", "core ms", "broadcast ms", "adapter and rest ms", "avspo ms", "floor ms",
                "(B, L) passes / floor"], parts),
    ]


def targets_section(runs: list[tuple[Path, dict]]) -> list[str]:
    rows = []
    for path, run in runs:
        for row in (r for r in run["rows"] if r["B"] == TARGET_BATCH):
            # Met or not as the ratio reads at the page's precision (1.00 meets <= 1).
            rows.append([path.name, str(row["L"]), *(
                f"{ratio(row, over):.2f} ({'met' if round(ratio(row, over), 2) <= bound else 'not met'})"
                for over, bound in TARGETS
            )])  # fmt: skip
    return [
        f"## Against the targets (issue 22.4, B = {TARGET_BATCH})",
        "",
        *table(["run", "L", *(f"avspo / {over} (target <= {bound:g})" for over, bound in TARGETS)], rows),
    ]


def measured() -> str:
    runs = bench_runs()
    lines = ["## Measured", "",
             "Each table is one run of `benchmarks/estimator_bench.py --json`, kept in "
             "[docs/method/performance/](performance/); the ratios are of the run's medians."]
    for path, run in runs:
        lines += ["", *run_section(path, run)]
    return "\n".join([*lines, "", *targets_section(runs)])


def device_check() -> str:
    check = json.loads(DEVICE_CHECK.read_text(encoding="utf-8"))
    records = check["records"]
    ratios = [r["peak_ratio"] for r in records]
    equal = all(r["equal_to_cpu"] for r in records)
    shapes = ", ".join(dict.fromkeys(f"{r['B']}x{r['L']}" for r in records))
    groups = ", ".join(dict.fromkeys(str(r["G"]) for r in records))
    reading = (": a call's peak is its (B, L) result, half the bytes of its two inputs" if max(ratios) <= 0.55 and
               min(ratios) >= 0.45 else "")  # fmt: skip
    return (f"On this project's CPU machine ({check['cpus']} CPUs, torch {check['torch']}, {check['recorded']}, B x L "
            f"{shapes} at G {groups}; [device-check-cpu.json](performance/device-check-cpu.json)), where "
            f"`equal_to_cpu` compares the CPU with itself ({'True on every row' if equal else 'False on some row'}), "
            f"`peak_ratio` read {min(ratios):.2f} to {max(ratios):.2f}{reading}. Its times there are not a GPU's.")


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(row) + " |" for row in rows)]


def blocks() -> list[tuple[tuple[str, str], str]]:
    """(markers, text) of each generated part of the page."""
    return [(MEASURED, measured()), (DEVICE, device_check())]
