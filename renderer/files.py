"""Every generated file of the checkout and its text, as its sources render it now (:func:`generated_files`).

A file is generated whole (the reference pages, the packaged YAML, the packaged evidence) or holds generated blocks
between marker lines (the options tables, samples, quoted figures); a page with several blocks gets each in turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from lab.research.sweep_preregistered import EVIDENCE, PREREGISTERED_BEGIN, PREREGISTERED_END, with_verdicts
from lab.research.sweep_report import preregistered_markdown, report_markdown

from . import (
    doctor_samples,
    openrlhf_options_table,
    performance_tables,
    results_page,
    trl_options_table,
    verl_hook_table,
)
from .docs_pages import (
    DOCS,
    PACKAGED_EVIDENCE,
    PAGES,
    SAMPLES,
    TASKS_SOURCE,
    evidence_blocks,
    evidence_markers,
    packaged_evidence,
    sample_markers,
    with_block,
)
from .forecast import FORECAST_BEGIN, FORECAST_END, sweep_forecast
from .gpu_constraints import render_gpu_constraints
from .verl_hydra_configs import render_configs

ROOT = DOCS.parent
SWEEP_FIT = EVIDENCE / "sweep" / "fit.json"
# The confirmation sweep's own output: its fit file, the report holding it, and the page written from the report.
CONFIRMATION = EVIDENCE / "sweep-confirm"


def generated_files() -> dict[Path, str]:
    """{path: text} of every generated file, rendered from its sources as they are now."""
    files: dict[Path, str] = {}

    def block(page: Path, begin: str, end: str, body: str) -> None:
        files[page] = with_block(files[page] if page in files else page.read_text(encoding="utf-8"), begin, end, body)

    # The config and metric reference pages, the packaged hydra configs, the hosts' options.
    files.update({DOCS / "using" / f"{page}.md": render() for page, render in PAGES.items()})
    files.update(render_configs())
    files.update(render_gpu_constraints())
    block(DOCS / "using" / "trl.md", trl_options_table.TABLE_BEGIN, trl_options_table.TABLE_END,
          trl_options_table.options_table())
    block(DOCS / "using" / "openrlhf.md", openrlhf_options_table.TABLE_BEGIN, openrlhf_options_table.TABLE_END,
          openrlhf_options_table.options_table())
    for page in verl_hook_table.PAGES:
        block(page, verl_hook_table.TABLE_BEGIN, verl_hook_table.TABLE_END, verl_hook_table.hook_table())
    for markers, text in performance_tables.blocks():
        block(performance_tables.PAGE, *markers, text)
    # Sample outputs (a recorded run, or a dry run made now).
    for name, (page, render, _) in SAMPLES.items():
        block(page, *sample_markers(name), render())
    for name, sample in doctor_samples.DOCTOR_SAMPLES.items():
        block(sample.page, *sample.markers(), doctor_samples.doctor_sample(name))
    # What the studies found, where it is quoted, and the packaged findings the product says at launch.
    files[PACKAGED_EVIDENCE] = json_text(packaged_evidence(json.loads(TASKS_SOURCE.read_text(encoding="utf-8"))))
    for name, (page, prefix, text) in evidence_blocks().items():
        block(page, *evidence_markers(name, prefix), text)
    block(results_page.PAGE, results_page.BEGIN, results_page.END, results_page.results_history())
    # ACR's forecast value: the fit files with their verdicts drawn from their numbers (no file offers a forecast the
    # pre-registered test does not back), the confirmation's report, and where the verdict is quoted.
    fit = with_verdicts(json.loads(SWEEP_FIT.read_text(encoding="utf-8")))
    prereg = fit["preregistered"]
    files[SWEEP_FIT] = json_text(fit)
    confirmation_report = json.loads((CONFIRMATION / "sweep.json").read_text(encoding="utf-8"))
    confirmation_report["fit"] = with_verdicts(json.loads((CONFIRMATION / "fit.json").read_text(encoding="utf-8")))
    files[CONFIRMATION / "fit.json"] = json_text(confirmation_report["fit"])
    files[CONFIRMATION / "sweep.json"] = json_text(confirmation_report)
    files[CONFIRMATION / "sweep.md"] = report_markdown(confirmation_report)
    block(EVIDENCE / "sweep.md", PREREGISTERED_BEGIN, PREREGISTERED_END, "\n".join(preregistered_markdown(prereg)))
    block(EVIDENCE / "sweep.md", FORECAST_BEGIN.format(name="sweep", source="sweep/fit.json"),
          FORECAST_END.format(name="sweep"), sweep_forecast(prereg))
    return files


def json_text(data: dict) -> str:
    """A JSON file as the lab writes it."""
    return json.dumps(data, indent=1) + "\n"


def stale_files(render: Callable[[], dict[Path, str]] = generated_files) -> list[Path]:
    """The generated files whose committed text differs from their rendering."""
    return [path for path, text in render().items()
            if not path.exists() or path.read_text(encoding="utf-8") != text]
