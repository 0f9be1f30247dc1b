"""``python -m renderer``: writes every generated file (renderer/files.py) from its sources;
``python -m renderer --check`` lists the stale ones and the outdated recorded samples (exit status 1 when any);
``python -m renderer record NAME`` runs a recorded sample's command again (``verl-demo``: ``avspo verl-demo``;
``doctor-verl``, ``doctor-trl``, ``doctor-openrlhf``, or ``doctor`` for the three: ``avspo doctor``), keeps its output
as the docs' sample, and writes every generated file."""

import argparse
import sys

parser = argparse.ArgumentParser(prog="python -m renderer", description=__doc__.split(";")[0].split(": ", 1)[1])
parser.add_argument("--check", action="store_true", help="list the stale generated files and outdated recorded samples "
                                                         "(exit status 1 when any); write nothing")
parser.add_argument("record", nargs="*", metavar="record NAME",
                    help="run a recorded sample's command again first: verl-demo, doctor-verl, doctor-trl, "
                         "doctor-openrlhf, or doctor for the three")
arguments = parser.parse_args()
if arguments.check and arguments.record:
    parser.error("--check writes nothing: leave out 'record NAME'")

# Here, after the arguments: the sources import verl, the lab's evidence and the hosts' adapters (tens of seconds).
from .docs_pages import record_verl_demo  # noqa: E402
from .doctor_samples import DOCTOR_SAMPLES, outdated_records, record_doctor  # noqa: E402
from .files import generated_files, stale_files  # noqa: E402

RECORDS = {"verl-demo": (record_verl_demo,), "doctor": tuple(lambda n=name: record_doctor(n) for name in DOCTOR_SAMPLES),
           **{name: (lambda n=name: record_doctor(n),) for name in DOCTOR_SAMPLES}}

if arguments.check:
    stale = [str(path) for path in stale_files()]
    stale += [f"{path}: {why}" for path, why in outdated_records().items()]
    print("\n".join(stale) or "every generated file is current")
    sys.exit(1 if stale else 0)
if arguments.record and (len(arguments.record) != 2 or arguments.record[0] != "record"
                         or arguments.record[1] not in RECORDS):
    parser.error(f"expected 'record NAME', NAME one of {', '.join(RECORDS)}; got {' '.join(arguments.record)!r}")
for record in RECORDS[arguments.record[1]] if arguments.record else ():
    record()
for path, text in generated_files().items():
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
