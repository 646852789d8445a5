# The two commands a fresh machine needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
STAMP := $(VENV)/.installed

.PHONY: demo test ui lint typecheck pytest setup bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP) $(DAGSTER_HOME)/dagster.yaml

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $(DAGSTER_HOME)/dagster.yaml

## Set up, generate the demo landing data, run the sensor-driven ingestion headless, print a summary.
demo: setup
	$(BIN)/watermark-assets demo

## Set up, then lint, type-check and run the tests.
test: setup lint typecheck pytest

lint: setup
	$(BIN)/ruff check watermark_assets tests benchmarks
	$(BIN)/ruff format --check watermark_assets tests benchmarks

typecheck: setup
	$(BIN)/mypy

pytest: setup
	$(BIN)/python -m pytest

## The Dagster UI and daemon on the same instance (http://127.0.0.1:3000).
ui: setup
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

bench: setup
	$(BIN)/python benchmarks/bench_watermarks.py

clean:
	rm -rf data .dagster_home
