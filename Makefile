# The two commands a fresh machine needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
STAMP := $(VENV)/.installed
LOCK_VENV := build/lock-venv
# The Python that constraints.txt was pinned with (its first line): some pinned versions need it
# or newer (pyarrow, polars, duckdb, ... dropped 3.10).
PINNED_PYTHON := $(shell sed -n '1s/.*(Python \([0-9.]*\)).*/\1/p' constraints.txt)

.PHONY: demo test ui lint typecheck pytest setup browser jdbc bench bench-column bench-time bench-event-time bench-s3 bench-latency bench-tick clean lock

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; v = tuple(map(int, "$(PINNED_PYTHON)".split("."))); sys.exit(0 if sys.version_info[:2] >= v else f"{sys.executable} is Python {sys.version.split()[0]}; constraints.txt pins versions for Python >= $(PINNED_PYTHON). Run make with PYTHON=python$(PINNED_PYTHON) (or newer), or re-pin for your Python with make lock")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel
	@echo "Installing watermark_assets and its pinned dependencies into $(VENV) (a few minutes the first time)"
	$(BIN)/pip install --progress-bar off -c constraints.txt -e '.[dev]'
	touch $(STAMP)

## Re-resolve the dependencies of pyproject.toml in a throwaway virtualenv and pin every installed
## version in constraints.txt (then run make test, and commit both files together).
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install --quiet --upgrade pip setuptools wheel
	$(LOCK_VENV)/bin/pip install --progress-bar off -e '.[dev]'
	{ echo "# Exact versions of every dependency, the set the tests passed with (Python $$($(LOCK_VENV)/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])'))."; \
	  echo "# make installs with 'pip install -c constraints.txt -e .[dev]'; refresh with 'make lock'."; \
	  $(LOCK_VENV)/bin/pip freeze --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf $(LOCK_VENV)
	@echo "constraints.txt refreshed; run make test before committing it"

## The venv, the package's bytecode (an editable install compiles none, and with
## PYTHONDONTWRITEBYTECODE set no process would keep it: each would compile ~120 modules, ~70 ms),
## and Spark's class-data sharing archive (once per Java and Spark, in ~/.cache/watermark_assets:
## the driver JVM starts in about half the time; a failure only leaves it out). The instance is
## .dagster_home/ (its dagster.yaml is in git), named by .env, which dagster dev and
## watermark-assets read in this folder and which wins over the shell's DAGSTER_HOME (edit .env
## to use another instance); a DAGSTER_HOME of your own gets a copy of the dagster.yaml.
INSTANCE_YAML := .dagster_home/dagster.yaml
ifeq ($(abspath $(DAGSTER_HOME)),$(abspath .dagster_home))
setup: $(STAMP)
else
setup: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
$(DAGSTER_HOME)/dagster.yaml: $(INSTANCE_YAML)
	mkdir -p $(DAGSTER_HOME)
	cp $(INSTANCE_YAML) $(DAGSTER_HOME)/dagster.yaml
endif
setup:
	-@$(BIN)/python -m compileall -q watermark_assets
	-@$(BIN)/python -m watermark_assets.spark.cds --quiet

## Set up (with the PostgreSQL JDBC driver for the demo's customers_pg, installed when missing),
## generate the demo landing data, run the sensor-driven ingestion headless, print a summary.
demo: setup jdbc
	$(BIN)/watermark-assets demo

## Set up, then lint, type-check and run the tests.
test: setup lint typecheck pytest

lint: setup
	$(BIN)/ruff check watermark_assets tests benchmarks
	$(BIN)/ruff format --check watermark_assets tests benchmarks

typecheck: setup
	$(BIN)/mypy

## The tests in PYTEST_WORKERS parallel pytest-xdist workers (one Spark session each; tests that
## share one `dagster dev` or a folder of the checkout run in one worker: tests/conftest.py).
## PYTEST_WORKERS=0 runs them serially in this process; PYTEST_ARGS picks tests or adds options,
## e.g. make pytest PYTEST_WORKERS=0 PYTEST_ARGS='tests/test_delta.py -x'.
PYTEST_WORKERS ?= 3
PYTEST_ARGS ?=
## --durations: the 30 slowest tests in every run, so CI's log shows where the suite's time goes.
pytest: setup browser jdbc
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --durations=30 $(PYTEST_ARGS)

## Debian's Chromium for the browser tests (tests/ui), installed only when it is missing. Without
## root or apt-get (or if the install fails) the browser tests skip and say why.
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the browser tests"; \
	    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) \
	      || echo "warning: apt-get could not install chromium; the browser tests will be skipped"; \
	  else \
	    echo "warning: /usr/bin/chromium is missing and needs root + apt-get; the browser tests will be skipped"; \
	  fi; \
	fi

## Debian's PostgreSQL JDBC driver for the Spark JDBC tests, installed only when it is missing
## (users elsewhere: spark.jars.packages org.postgresql:postgresql:42.x). Without root or apt-get
## (or if the install fails) the JDBC tests skip and say why.
jdbc:
	@if [ ! -f /usr/share/java/postgresql.jar ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's libpostgresql-jdbc-java for the JDBC tests"; \
	    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q libpostgresql-jdbc-java) \
	      || echo "warning: apt-get could not install libpostgresql-jdbc-java; the JDBC tests will be skipped"; \
	  else \
	    echo "warning: /usr/share/java/postgresql.jar is missing and needs root + apt-get; the JDBC tests will be skipped"; \
	  fi; \
	fi

## The Dagster UI and daemon on the same instance (http://127.0.0.1:3000): .dagster_home/, the
## one plain `dagster dev` and `dg dev` use in this folder too (.env, which reads PWD: make -C).
ui: setup
	PWD=$(CURDIR) $(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

bench: setup
	$(BIN)/python benchmarks/bench_watermarks.py

## Full vs incremental column-watermark reads (PostgreSQL through JDBC, Delta); needs the JDBC jar
## and PostgreSQL on 127.0.0.1:5432 for the PostgreSQL rows (else they are skipped).
bench-column: setup jdbc
	$(BIN)/python benchmarks/bench_column.py

## The time pipeline's tick over 5 years of hourly partitions against Dagster's partition status
## (issue 8 §5; about 10 minutes, most of it writing the Delta logs' history).
bench-time: setup
	$(BIN)/python benchmarks/bench_time_tick.py

## The event-time aggregate's batch engine against Structured Streaming on 1,000,000 events
## (issue 9 §5), with one whole process per engine (--cold).
bench-event-time: setup
	$(BIN)/python benchmarks/bench_event_time.py --cold

## Listing above a watermark on moto's S3 server: 100,000 keys, 1,000 new; LIST requests and
## seconds of StartAfter per partition against s3fs's recursive find (issue 10 §6, ~3 minutes);
## then the 240-file ingestion with landing and lake on S3 against local disk (~2 minutes).
bench-s3: setup
	$(BIN)/python benchmarks/bench_s3_listing.py
	$(BIN)/python benchmarks/bench_s3_ingest.py

## The latency a user feels: one-file runs as whole processes (local Spark, Spark Connect, a
## server started from pyspark's jars) and the asset vs a plain PySpark script, start-up included.
bench-latency: setup
	$(BIN)/python benchmarks/bench_run_latency.py

## One tick of every sensor of a code location with 100 pipelines of mixed kinds (issue 23 §7).
bench-tick: setup
	$(BIN)/python benchmarks/bench_tick_many.py

## Removes the data and the instance's storage (not its dagster.yaml).
clean:
	rm -rf data
	find .dagster_home -mindepth 1 -maxdepth 1 ! -name dagster.yaml -exec rm -rf {} +
