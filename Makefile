# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip

.PHONY: demo test install install-test dev lint typecheck unit bench bench-results fuzz clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

install: $(BIN)/python
	$(PIP) install -q .

install-test: $(BIN)/python
	$(PIP) install -q '.[test,bench]'

# The main job: the exactly-once consume-transform-produce pipeline, killed and restarted, checked.
demo: install
	$(BIN)/eoslog demo

# The whole suite: unit, property, crash/fault, kill -9, compatibility, Spark, lint, types.
test: install-test
	$(BIN)/python -m pytest -q
	$(BIN)/ruff check python spark_udfs tests bench
	$(BIN)/ruff format --check python spark_udfs tests bench
	$(BIN)/mypy

# Incremental native rebuild for development (keeps CMake's build tree in build/dev). Without
# build isolation, the sdists among the test extras (pyspark) need setuptools and wheel here.
dev: $(BIN)/python
	$(PIP) install -q scikit-build-core cython cython-cmake setuptools wheel
	$(PIP) install -q --no-build-isolation -Cbuild-dir=build/dev '.[test,bench]'

# The fuzzing soak (docs/reliability.md family 12): every target in turn for FUZZ_SECONDS each, one
# core; findings are written under build/fuzz/<target>/. CI runs each for EOSLOG_FUZZ_SECONDS.
FUZZ_SECONDS ?= 600
fuzz: install-test
	$(BIN)/python -m tests.fuzz --seconds $(FUZZ_SECONDS)

# Micro benchmarks: pytest-benchmark (bench/test_bench.py) over the contenders of
# bench/contenders_codec.py and bench/contenders_log.py; ratios of medians, indicative. The
# published figures: bench-results.
bench: install-test
	$(BIN)/python -m pytest bench -q --benchmark-only

# Regenerate bench/RESULTS-*.md (medians and ratios against the peers, measured in one run):
# codec, partition log, producer, consumer, transactions, Spark scans, each script on
# bench/harness.py (`--quick` checks one in a minute); then gather every target row into
# bench/RESULTS.md and bench/targets.png.
bench-results: install-test
	$(BIN)/python bench/write_results.py
	$(BIN)/python bench/log_bench.py
	$(BIN)/python bench/producer_bench.py
	$(BIN)/python bench/consumer_bench.py
	$(BIN)/python bench/txn_bench.py
	$(BIN)/python bench/spark_bench.py
	$(BIN)/python bench/serve_bench.py
	$(BIN)/python bench/summary.py

clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache
