# The two commands a newcomer needs: `make run` and `make test`.
# Both create .venv and install the project (with test extras) when it is
# missing or when pyproject.toml changed.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

# Test workers (pytest-xdist); docs/testing.md has the measured times.
JOBS   ?= auto
# The headless engine: what `make test-fast` runs (docs/testing.md, "Markers").
FAST   := not ui and not snapshot and not subprocess and not slow

.PHONY: run test test-fast bench lint format docs

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/slop-tui $(ARGS)

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -n $(JOBS)

test-fast: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -n $(JOBS) -m "$(FAST)"

bench: $(STAMP)
	$(PY) bench/run_all.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check slop_tui tests bench

format: $(STAMP)
	$(VENV)/bin/ruff format slop_tui tests bench

docs: $(STAMP)
	$(PY) -m slop_tui.commands --markdown > docs/commands.md
