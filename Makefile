# `make test` and `make demo` build .venv from nothing: torch first (the CPU build), then
# the package and its extras, everything under constraints.txt so torch stays pinned.
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
EXTRAS := verl,trl,lab,analyze,math,test
STAMP := $(VENV)/.installed

.PHONY: install test test-fast lint demo bench clean

install: $(STAMP)

# --no-compile: pip would byte-compile every module of torch, transformers, verl, ... (about a minute on 2 cores);
# instead each module is compiled once, the first time anything imports it, and kept (so this Makefile lets Python
# write bytecode even where the environment sets PYTHONDONTWRITEBYTECODE).
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): setup.cfg pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PIP) install --no-compile torch==2.13.0
	$(PIP) install --no-compile -c constraints.txt -e '.[$(EXTRAS)]'
	touch $(STAMP)

# Two workers, one test file each at a time (a file's fixtures and Ray clusters stay in one process), the slowest
# files first (tests/conftest.py orders them).
WORKERS ?= 2
PYTEST := $(PY) -m pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder

test: $(STAMP)
	$(PYTEST)

# Unit tests only (no verl launch, Ray cluster, released host code, lab run or download): under 2 minutes.
test-fast: $(STAMP)
	$(PYTEST) -m "not e2e"

lint: $(STAMP)
	$(VENV)/bin/ruff check .

demo: $(STAMP)
	$(VENV)/bin/python -m lab --out build/lab

bench: $(STAMP)
	$(PY) benchmarks/estimator_bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
