# Two commands for a user: `make demo` and `make test`. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench image clean

$(BIN)/meshcast: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

demo: $(BIN)/meshcast
	$(BIN)/meshcast demo

test: $(BIN)/meshcast
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest --cov=node --cov=coordinator --cov-branch --cov-report=term:skip-covered

lint: $(BIN)/meshcast
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

image: $(BIN)/meshcast  # the container image, built offline (deploy/build-offline-image.sh)
	PYTHON=$(BIN)/python deploy/build-offline-image.sh

bench: $(BIN)/meshcast
	$(BIN)/meshcast bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
