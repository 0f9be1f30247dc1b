"""``python -m renderer``: writes every generated file (renderer/files.py) from its sources;
``python -m renderer --check`` lists the stale ones (exit status 1 when any);
``python -m renderer record verl-demo`` runs ``avspo verl-demo`` again, keeps its output as the docs' sample, and
writes every generated file."""

import sys

from .docs_pages import record_verl_demo
from .files import generated_files, stale_files

USAGE = "usage: python -m renderer [--check | record verl-demo]"

arguments = sys.argv[1:]
if arguments == ["--check"]:
    stale = stale_files()
    print("\n".join(str(path) for path in stale) or "every generated file is current")
    sys.exit(1 if stale else 0)
if arguments not in ([], ["record", "verl-demo"]):
    sys.exit(USAGE)
if arguments:
    record_verl_demo()
for path, text in generated_files().items():
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
