# Two commands do all set-up: `make demo` and `make test` (each creates .venv if missing).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# numba kernels compile once, ahead of first use, into numba's on-disk cache (again when one changes).
KERNELS := logstore/_kernels.py logstore/_read_kernels.py logstore/records/_kernels.py compaction/_kernels.py spark_tools/_kernels.py
WARM := $(VENV)/.kernels-compiled

.PHONY: demo test test-quick bench lint venv clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(WARM): $(STAMP) $(KERNELS)
	$(PY) -m logstore.cli.warmup
	touch $(WARM)

venv: $(WARM)

demo: $(WARM)
	$(PY) -m logstore.demo

# One pytest-xdist worker per core; each test file runs whole, in order, in one worker.
PARALLEL := -n auto --dist loadfile

test: $(WARM)
	$(PY) -m pytest -m "" $(PARALLEL) tests

test-quick: $(WARM)
	$(PY) -m pytest -m "not slow and not spark" $(PARALLEL) tests

bench: $(WARM)
	$(PY) -m benchmarks.report

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) demo-data audit-out .pytest_cache .benchmarks
