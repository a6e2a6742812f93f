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

# torch first, pinned to the CPU build, so nothing pulls a CUDA build; then the package with its extras. Then the
# byte code of everything installed and of src/, compiled on every core at once (pip's own compile at install runs on
# one): where PYTHONDONTWRITEBYTECODE is set (this machine sets it), Python caches nothing it compiles, so without
# .pyc files every process that imports torch compiles it again, 2-3 s each, and the tests start hundreds (the
# command, process pools, Ray workers): tests/cli/test_cli_resume.py took 57-64 s without them, 32 s with them. A
# few third-party files written for a newer Python do not compile (never imported here): compileall's status is
# ignored, a missing .pyc costs time, never a result
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q --no-compile $(TORCH)
	$(BIN)/pip install -q --no-compile -e ".[dev,ray,lab,rl]" $(TORCH)
	$(BIN)/python -m compileall -q -j 0 $$($(BIN)/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") src > /dev/null || true
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
