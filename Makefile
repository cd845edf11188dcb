# Every target creates the virtualenv first, so each works on a fresh clone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STACK  ?= dev
OUT    ?= build/rendered

.PHONY: venv render plan test lint typecheck check clean

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed ## create .venv with pinned runtime and test dependencies

render: venv ## offline render of STACK (default dev) into OUT/STACK
	$(PY) -m automation render --stack $(STACK) --out $(OUT)

plan: venv ## the sizing plan of STACK
	$(PY) -m automation plan --stack $(STACK)

test: venv ## the whole test suite
	$(PY) -m pytest

lint: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: venv
	$(PY) -m mypy

check: lint typecheck test ## everything CI runs

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache .hypothesis
