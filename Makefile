# Two commands do all set-up: `make demo` and `make test` (each creates .venv if missing).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-quick bench lint venv clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m logstore.demo

test: $(STAMP)
	$(PY) -m pytest -m "" tests

test-quick: $(STAMP)
	$(PY) -m pytest -m "not slow and not spark" tests

bench: $(STAMP)
	$(PY) -m benchmarks.report

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) demo-data audit-out .pytest_cache .benchmarks
