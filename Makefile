# symkit: `make demo` and `make test` set everything up on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH := torch==2.13.0

.PHONY: install demo test test-all bench lint gpu-check clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch first, pinned to the CPU build, so nothing pulls a CUDA build; then the package with its extras. No byte-
# compiling at install (--no-compile): Python compiles the modules a run imports on first import and caches them, so
# a fresh set-up does not compile all of torch, ray and mujoco (about 35 s of the 70 s install on 2 cores)
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q --no-compile $(TORCH)
	$(BIN)/pip install -q --no-compile -e ".[dev,ray,lab,rl]" $(TORCH)
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/symkit demo --out runs/demo

# one test worker per core (pytest-xdist); a file's tests share a worker, so module fixtures are built once; files
# in collection order, the longest first (tests/conftest.py LONGEST_FIRST), not xdist's most-tests-first; the log
# ends with the 25 slowest tests, so every CI run shows where the suite's time goes
test: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q -n auto --dist loadfile --no-loadscope-reorder -m "not slow" -p no:cacheprovider --durations=25

test-all: install
	$(BIN)/python -m pytest -q -n auto --dist loadfile --no-loadscope-reorder -p no:cacheprovider

bench: install
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# on a machine with a CUDA device: its own python (GPU_PY, default python3), not .venv's CPU build (scripts/gpu-check)
gpu-check:
	scripts/gpu-check

lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/lint-imports --no-cache

clean:
	rm -rf $(VENV) runs build *.egg-info src/*.egg-info
