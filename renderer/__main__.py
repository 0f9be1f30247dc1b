"""``python -m renderer``: writes every generated file (renderer/files.py) from its sources;
``python -m renderer --check`` lists the stale ones and the outdated recorded samples (exit status 1 when any);
``python -m renderer record NAME`` runs a recorded sample's command again (``verl-demo``: ``avspo verl-demo``;
``doctor-verl``, ``doctor-trl``, ``doctor-openrlhf``, or ``doctor`` for the three: ``avspo doctor``), keeps its output
as the docs' sample, and writes every generated file."""

import sys

from .docs_pages import record_verl_demo
from .doctor_samples import DOCTOR_SAMPLES, outdated_records, record_doctor
from .files import generated_files, stale_files

RECORDS = {"verl-demo": (record_verl_demo,), "doctor": tuple(lambda n=name: record_doctor(n) for name in DOCTOR_SAMPLES),
           **{name: (lambda n=name: record_doctor(n),) for name in DOCTOR_SAMPLES}}
USAGE = f"usage: python -m renderer [--check | record {{{','.join(RECORDS)}}}]"

arguments = sys.argv[1:]
if arguments == ["--check"]:
    stale = [str(path) for path in stale_files()]
    stale += [f"{path}: {why}" for path, why in outdated_records().items()]
    print("\n".join(stale) or "every generated file is current")
    sys.exit(1 if stale else 0)
if arguments and (len(arguments) != 2 or arguments[0] != "record" or arguments[1] not in RECORDS):
    sys.exit(USAGE)
for record in RECORDS[arguments[1]] if arguments else ():
    record()
for path, text in generated_files().items():
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
