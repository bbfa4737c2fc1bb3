# Two commands for a user: `make demo` and `make test`. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-compiled lint bench image compiled plain docs clean

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
	$(BIN)/pytest --durations=30 --cov=node --cov=coordinator --cov-branch --cov-report=term:skip-covered

lint: $(BIN)/meshcast
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

image: $(BIN)/meshcast  # the container image, built offline (deploy/build-offline-image.sh)
	PYTHON=$(BIN)/python deploy/build-offline-image.sh

compiled: $(BIN)/meshcast  # opt-in: the node's hot modules compiled with mypyc, in place (needs gcc)
	$(BIN)/python deploy/compile.py

test-compiled: compiled  # the fast tests again, against the compiled build (CI runs it after `make test`)
	$(BIN)/pytest -m "not slow" -p no:cacheprovider -q

plain:  # back to the sources: remove what `make compiled` built
	$(BIN)/python deploy/compile.py --remove

docs: $(BIN)/meshcast  # the documentation site into site/ (mkdocs; pages generated from the code: docs/hooks.py)
	$(BIN)/pip install --quiet -e '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(BIN)/meshcast
	$(BIN)/meshcast bench

clean:
	find node -name '*.so' -delete
	rm -rf $(VENV) build site *.egg-info .pytest_cache .mypy_cache .ruff_cache
