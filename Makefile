# Two commands for a user: `make demo` and `make test`. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test coverage test-compiled lint bench ab image compiled plain docs clean

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
	$(BIN)/pytest --durations=30

# Branch coverage of the same suite. Not part of `make test`: its tracer made the CPU-bound tests
# three times slower (10.7 s against 31.8 s for two test files, 7 Dec 2026), and CI has 45 minutes.
coverage: $(BIN)/meshcast
	$(BIN)/pytest --cov=node --cov=coordinator --cov-branch --cov-report=term:skip-covered

lint: $(BIN)/meshcast
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

image: $(BIN)/meshcast  # the container image, built offline (deploy/build-offline-image.sh)
	PYTHON=$(BIN)/python deploy/build-offline-image.sh

compiled: $(BIN)/meshcast  # opt-in: the node's hot modules and the flit-level model compiled with mypyc, in place (needs gcc)
	$(BIN)/python deploy/compile.py

# The tests of the node's code (what `make compiled` compiles: switching, sync, transport, topology, the model,
# routing) and of the runtimes that run it in this checkout; not the CLI, docs, plots, reproductions
# or containers (the image holds its own plain build).
COMPILED_TESTS := $(wildcard tests/test_actor.py tests/test_alarm.py tests/test_barrier.py \
	tests/test_buffers.py tests/test_compile.py tests/test_emulation_vs_model.py tests/test_engine.py tests/test_free_take.py \
	tests/test_engines_flits.py tests/test_inprocess.py tests/test_link_runs.py tests/test_linkmodel.py \
	tests/test_links.py tests/test_mcast.py tests/test_fused_step.py tests/test_polled.py tests/test_processes.py \
	tests/test_protocol.py tests/test_router_stages.py tests/test_routing_*.py tests/test_shaping.py \
	tests/test_shards.py tests/test_step_barrier.py tests/test_switching.py tests/test_tcp_links.py \
	tests/test_telemetry.py tests/test_topology.py tests/test_vcs.py tests/test_warmup.py \
	tests/test_wire.py tests/test_worm_trace.py tests/test_wormhole.py tests/test_wormhole_load.py)

test-compiled: compiled  # the node's fast tests again, against the compiled build (CI runs it after `make test`)
	$(BIN)/pytest -m "not slow" -p no:cacheprovider -q $(COMPILED_TESTS)

plain:  # back to the sources: remove what `make compiled` built
	$(BIN)/python deploy/compile.py --remove

docs: $(BIN)/meshcast  # the documentation site into site/ (mkdocs; pages generated from the code: docs/hooks.py)
	$(BIN)/pip install --quiet -e '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(BIN)/meshcast
	$(BIN)/meshcast bench

ab: $(BIN)/meshcast  # the A/B guard's short form: this tree against benchmarks/baseline (warns, never fails)
	$(BIN)/python benchmarks/ab.py baseline --short

clean:
	find node coordinator -name '*.so' -delete
	rm -rf $(VENV) build site *.egg-info .pytest_cache .mypy_cache .ruff_cache
