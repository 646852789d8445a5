"""Shared fixtures: ONE Spark session per test session, configs and landing files on tmp_path."""

from __future__ import annotations

import atexit
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from hypothesis import settings

from watermark_assets.config import ProjectConfig, parse_config
from watermark_assets.sources.jdbc import postgres_jdbc_jar

if TYPE_CHECKING:
    from dagster import DagsterInstance

# Property tests measure correctness, not speed: on a shared 2-core machine one example can take
# longer than Hypothesis's default 200 ms deadline while Spark runs in other workers.
settings.register_profile("shared_machine", deadline=None)
settings.load_profile("shared_machine")

# Spark's Python workers must run this interpreter (pyarrow, fsspec are installed here).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Every driver JVM the tests start (each worker's session, the runs in subprocesses, the Spark
# Connect server) compiles with C1 only: they live seconds over kilobytes, where C2's background
# compilation burns CPU that 2 cores shared by 3 workers do not have (tests/test_exactly_once.py
# and test_column_pipeline.py serially: 76-79 s -> 61-63 s). Spark's launcher puts
# SPARK_SUBMIT_OPTS on the driver's java command line; what the project's code does is the same
# under either compiler. A developer's own SPARK_SUBMIT_OPTS wins. Also: one compiler thread,
# the serial collector and no perf-data file (jstat's), which on a short-lived JVM only add
# threads and work: a killed run's process (Python, its JVM, the run) 9.4 -> 8.9 CPU-s, the mean
# of 8 alternated pairs (tests/test_exactly_once.py's crash after the commit, 2026-11-27); the
# tests' own long-lived sessions unchanged (tests/test_exactly_once.py in-process: 39-42 CPU-s
# either way). Spark's launcher (a JVM of its own that builds the driver's command line before
# every driver start) reads SPARK_LAUNCHER_OPTS.
os.environ.setdefault(
    "SPARK_SUBMIT_OPTS",
    "-XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:+UseSerialGC -XX:-UsePerfData",
)
os.environ.setdefault(
    "SPARK_LAUNCHER_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData"
)

TEST_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    # Adaptive query execution re-plans each query at its shuffle boundaries: on the tests' rows
    # (tens to thousands) there is nothing to coalesce or skew-split, and its extra planning and
    # stage bookkeeping cost ~10% of the Spark tests' time (tests/test_ingest.py and
    # test_time_pipeline.py, alternated in one session: 86 -> 74 s, 99 -> 91 s). The project's
    # sessions keep Spark's default (on): what the tests assert does not depend on it.
    "spark.sql.adaptive.enabled": "false",
    # PySpark's DataFrame debugging (on by default) wraps every Column operation (F.col, alias,
    # isNull, ...) to record its Python call site for Spark's error context: a walk of the
    # Python stack and four py4j calls (the session, a conf read, the origin set and cleared)
    # each. On the runs' plans of hundreds of Column operations that was ~25% of the Python
    # CPU of tests/test_column_schema_modes.py's folder runs (py4j round trips 59,722 in 22
    # runs). No test reads the call site (an error's message and class are the same without
    # it); pyspark reads this setting once per process, from the first active session.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}
# The PostgreSQL JDBC driver (`make jdbc`) must be on the classpath when the ONE session starts;
# without the jar the JDBC tests skip and say why.
if postgres_jdbc_jar():
    TEST_SPARK_CONF["spark.jars"] = str(postgres_jdbc_jar())


# ------------------------------------------------------------------ parallel workers (pytest-xdist)
# `make pytest` runs the suite in worker processes (`-n 3 --dist loadgroup`, the Makefile).
# Each worker is a whole pytest session: its own Spark session, tmp_path tree and DAGSTER_HOME
# (below). A new test is safe beside the others with files under tmp_path, servers on port 0
# and a PostgreSQL database from `pg_database_name` / `new_pg_database`. Tests that must share
# ONE process (a session fixture too costly to repeat per worker) or must not overlap (they
# watch a folder of the checkout) are listed in XDIST_GROUPS.

#: Tests that run in one worker, one after another, by group (with --dist loadgroup): the tests
#: of a file whose names start with a prefix ("" for all). A table, not `xdist_group` marks:
#: pytest-xdist 3.8's marks are silently ignored on pytest 9.2 (pytest-dev/pytest-xdist#1386),
#: and the scheduler sees only node ids, not fixtures.
XDIST_GROUPS: dict[str, tuple[tuple[str, str], ...]] = {
    # the UI tests share one real `dagster dev` and its scenario (session fixtures in
    # tests/ui/conftest.py): in several workers they would start one each
    "dagster_dev": (("tests/ui/test_graphql.py", ""), ("tests/ui/test_webui.py", "")),
    # each starts dagster commands (two dagster dev) in a copy of the repository: one at a time
    "checkout_dagster_home": (("tests/ui/test_first_commands.py", ""),),
    # runs in subprocesses, each with its own JVM (two at once in the create races): one such
    # test at a time per group, or on 2 cores they starve each other past their timeouts
    "concurrent_runs": (
        ("tests/test_concurrency.py", ""),
        ("tests/test_event_window.py", "test_two_runs_of_the_same_batch_at_once"),
    ),
    # in two groups of about 5 minutes each (one group took 10 of the suite's 15 minutes): at
    # most two killed runs at once, beside at most one create race
    "killed_file_runs": (
        ("tests/test_exactly_once.py", "test_a_run_killed_"),
        ("tests/test_rewritten_files.py", "test_a_replace_killed_"),
        ("tests/test_column_replay.py", "test_a_replay_killed_"),
        ("tests/test_time_unit_pipeline.py", "test_a_run_killed_"),
    ),
    # a standalone master + worker, a Spark Connect server and runs in subprocesses beside them
    # (tests/spark_services.py): one at a time, in one worker
    "spark_services": (
        ("tests/test_scale_out.py", ""),
        ("tests/test_bench_run_latency.py", ""),
    ),
    # a real dagster-daemon on a PostgreSQL instance, its runs' JVMs and module-scoped stages
    "dagster_postgres": (("tests/test_dagster_postgres.py", ""),),
    # the aggregates' first batches, run once per module and copied per test (its Scenes): in
    # several workers each would run them again
    "event_time_maintenance": (("tests/test_event_time_maintenance.py", ""),),
    # two tests on one module-scoped `dagster dev`, its two Spark runs and a Chromium: in two
    # workers each would start its own
    "event_time_ui": (("tests/ui/test_event_time_ui.py", ""),),
    "killed_column_runs": (
        ("tests/test_column_exactly_once_sources.py", "test_a_run_killed_"),
        ("tests/test_column_pipeline.py", "test_a_run_killed_"),
        ("tests/test_event_window.py", "test_a_batch_killed_"),
        ("tests/test_event_time_pipeline.py", "test_a_dagster_run_killed_"),
        ("tests/test_event_stream.py", "test_a_stream_killed_"),
    ),
}
#: Classes whose tests are the steps of one scene per parameter (a class-scoped fixture, e.g. the
#: maintenance suite of every kind): each (class, parameter) is a group of its own, so that one
#: worker runs a scene's steps, in order.
SCENE_CLASSES = (("tests/test_state_maintenance.py", "TestMaintenanceOfEveryKind::"),)
#: Every test that uses one of these fixtures must be in its group (checked at collection).
GROUP_OF_FIXTURE = {"dagster_dev": "dagster_dev"}
#: What the groups cost, in seconds of one worker: their tests' setup + call + teardown in one
#: ``pytest -m spark -n 2`` on the shared 2-core machine at a load of 11-16 (2026-11-27), slower
#: than CI; the order is what counts. The scheduler hands out the costliest unit of work first
#: (longest processing time first), not the one with the most tests: by test count the 20 quick
#: tests of dagster_postgres went first and killed_column_runs' 13 runs in subprocesses fourth,
#: the 7-test groups of SIGKILLed runs after the 8-test ones. A unit not listed costs
#: UNLISTED_TEST_SECONDS a test (the 7-test scenes of TestMaintenanceOfEveryKind took 26-121 s);
#: a group a few seconds off changes nothing, a new long group belongs here. spark_services:
#: 820 s measured, less the ~170 s that TestSparkConnect's one client process a test saved.
GROUP_SECONDS = {
    "spark_services": 650,
    "killed_column_runs": 565,
    "event_time_maintenance": 410,
    "killed_file_runs": 290,
    "concurrent_runs": 230,
    "dagster_dev": 220,
    "checkout_dagster_home": 210,
    "dagster_postgres": 150,
    "event_time_ui": 50,
}
UNLISTED_TEST_SECONDS = 3
if not set(GROUP_SECONDS) <= set(XDIST_GROUPS):  # a renamed group would silently cost 3 s a test
    raise ValueError(
        f"GROUP_SECONDS names no group of XDIST_GROUPS: {set(GROUP_SECONDS) - set(XDIST_GROUPS)}"
    )


def unit_seconds(scope: str, tests: int) -> float:
    """The cost of one unit of work of the scheduler: a group (GROUP_SECONDS) or a lone test."""
    return GROUP_SECONDS.get(scope, UNLISTED_TEST_SECONDS * tests)


def xdist_group(nodeid: str) -> str | None:
    """The XDIST_GROUPS group of a test node id (``path::name[params]``), or None."""
    path, _, name = nodeid.partition("::")
    for file, prefix in SCENE_CLASSES:
        if path == file and name.startswith(prefix) and name.endswith("]"):
            return f"{file}::{prefix}[{name.rsplit('[', 1)[1]}"
    for group, tests in XDIST_GROUPS.items():
        if any(path == file and name.startswith(prefix) for file, prefix in tests):
            return group
    return None


class TableGroups:
    """The scheduler hook and the workers' test order, registered only when pytest-xdist is
    active (``pytest_configure``):
    a conftest defining an xdist hook fails to load under ``-p no:xdist`` (unknown hook)."""

    @staticmethod
    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        """``--dist loadgroup``: the tests of an XDIST_GROUPS group are one unit of work (one
        worker; the costliest unit first, GROUP_SECONDS); every other test is a unit of its
        own, handed to whichever worker is free. Other ``--dist`` modes are xdist's own."""
        if config.getvalue("dist") != "loadgroup":
            return None
        from xdist.scheduler import LoadGroupScheduling

        class TableGroupScheduling(LoadGroupScheduling):
            ordered = False

            def _split_scope(self, nodeid: str) -> str:
                return xdist_group(nodeid) or super()._split_scope(nodeid)

            def _assign_work_unit(self, node: Any) -> None:
                # At the first assignment, the queue (by test count) is sorted by cost, stably:
                # units of one cost keep their order (the lone slow tests before the others).
                if not self.ordered:
                    self.ordered = True
                    units = sorted(
                        self.workqueue.items(),
                        key=lambda unit: -unit_seconds(unit[0], len(unit[1])),
                    )
                    self.workqueue.clear()
                    self.workqueue.update(units)
                super()._assign_work_unit(node)

        return TableGroupScheduling(config, log)

    @staticmethod
    @pytest.hookimpl(trylast=True)  # after pytest's own reordering by fixture scope
    def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
        """In a worker (whose collection the scheduler hands out in that order, groups first):
        the tests marked ``slow`` in no group come before the other lone tests, so that the
        minute-long ones (browser, benchmark smoke tests, runs in subprocesses) start early
        instead of being the last ones a worker picks up while the others are idle. Grouped
        tests keep their order (a scene's steps run in order); a serial run keeps pytest's."""
        if "PYTEST_XDIST_WORKER" not in os.environ:
            return
        items[:] = sorted(
            items,
            key=lambda item: (
                0 if item.get_closest_marker("slow") and xdist_group(item.nodeid) is None else 1
            ),
        )


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(TableGroups(), "watermark_assets_table_groups")


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[None]:
    """The test modules pytest rewrites (its assertions) are kept in tests/**/__pycache__
    (ignored by git) even under PYTHONDONTWRITEBYTECODE, as ``make setup`` compiles the package:
    otherwise every pytest process rewrites all of them again, each worker of ``make pytest``
    too (collection ~10 -> ~5.5 CPU-s a process with them kept, 2026-11-27). Only while
    collecting: what the tests' code imports later is as the environment says."""
    keep = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = keep


#: Fixtures that start (or need) the shared Spark session: a test using one, even through another
#: fixture, carries the ``spark`` marker, so that ``pytest -m "not spark"`` never starts a JVM
#: (a ``slow`` test is marked too: its processes start their own).
SPARK_FIXTURES = frozenset({"spark"})


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses a fixture of GROUP_OF_FIXTURE outside its group fails collection; a
    test that uses a Spark fixture is marked ``spark``, and so is every ``slow`` test: it runs
    whole processes or servers (``dagster dev``, the daemon, the CLI, a benchmark) whose runs
    start a JVM of their own, which the fixture cannot see."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if SPARK_FIXTURES & fixtures or item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.spark)
        for fixture, group in GROUP_OF_FIXTURE.items():
            if fixture in getattr(item, "fixturenames", ()) and xdist_group(item.nodeid) != group:
                raise pytest.UsageError(
                    f"{item.nodeid} uses the fixture {fixture!r}: add its file to XDIST_GROUPS "
                    f"in tests/conftest.py with the group {group!r}, so that it shares that "
                    "fixture's worker instead of starting its own in another worker"
                )


def worker_id() -> str:
    """``gw0``, ``gw1``, ... in an xdist worker; ``main`` in a serial run."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


@pytest.fixture(scope="session", autouse=True)
def _own_dagster_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """DAGSTER_HOME is this session's own empty folder, never the checkout's ``.dagster_home``
    (which ``make`` exports): ``DagsterInstance.get()`` in one worker must not share a SQLite
    storage with another worker, or with the developer's ``make ui``."""
    home = tmp_path_factory.mktemp("dagster_home_session")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_HOME", str(home))
        yield home


@pytest.fixture(scope="session", autouse=True)
def _alembic_scripts_read_once() -> Iterator[None]:
    """Dagster's storages read their alembic migration scripts (~90 files) once per process, not
    once per storage: every ``DagsterInstance.ephemeral()`` (each in-process run of the tests,
    each ``materialize``) stamps its in-memory run and event-log storages with the head
    revision, and alembic's ``stamp`` builds a new ``ScriptDirectory`` each time, loading every
    script to find the head: ~0.22 of an ephemeral instance's ~0.37 CPU-s. Dagster keeps one
    alembic ``Config`` per storage kind (``get_alembic_config`` is cached), so the scripts are
    kept per ``Config``: the same files, the same head, the same stamp. Only this process:
    the runs in subprocesses and servers are Dagster as it is."""
    from alembic.script import ScriptDirectory

    read = ScriptDirectory.from_config
    scripts: dict[int, tuple[Any, ScriptDirectory]] = {}

    def from_config(config: Any) -> ScriptDirectory:
        kept = scripts.get(id(config))
        if kept is None or kept[0] is not config:  # (the Config is held: its id stays its own)
            kept = scripts[id(config)] = (config, read(config))
        return kept[1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ScriptDirectory, "from_config", staticmethod(from_config))
        yield


#: An empty persistent instance's home (its SQLite storages created), made once per process by
#: :func:`local_instance` and copied for each new one.
_instance_template: Path | None = None


def local_instance(home: Path) -> DagsterInstance:
    """``DagsterInstance.local_temp(home)`` for a new, empty ``home`` (created if missing): a
    copy of one empty instance this process made, not a new one. Creating its SQLite storages
    (runs, run index, schedules: tables, indexes, alembic stamps) costs 0.27 CPU-s an instance,
    opening a copy 0.06; the copy is the same empty instance (same Dagster, same schemas).
    A ``home`` holding files already is opened as it is."""
    from dagster import DagsterInstance

    global _instance_template
    if _instance_template is None:
        template = Path(tempfile.mkdtemp(prefix="wa_dagster_home_template_"))
        atexit.register(shutil.rmtree, template, ignore_errors=True)
        with DagsterInstance.local_temp(str(template)) as instance:
            instance.get_runs(limit=1)  # every storage created
        _instance_template = template
    home.mkdir(parents=True, exist_ok=True)
    if not any(home.iterdir()):
        shutil.copytree(_instance_template, home, dirs_exist_ok=True)
    return DagsterInstance.local_temp(str(home))


PG_SERVER = "postgresql://postgres@127.0.0.1:5432"


@contextmanager
def new_pg_database(prefix: str = "wa_test") -> Iterator[str]:
    """A new, empty PostgreSQL database on 127.0.0.1:5432 with a unique name (dropped after).

    The name is ``{prefix}_{worker}_{random}``: parallel workers never create the same one."""
    import psycopg

    name = f"{prefix}_{worker_id()}_{uuid.uuid4().hex[:10]}".lower()
    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_database_name() -> Iterator[str]:
    """A fresh PostgreSQL database for one test (see :func:`new_pg_database`)."""
    with new_pg_database() as name:
        yield name


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one Spark session of the test run (local[2])."""
    from watermark_assets.spark.session import get_spark

    session = get_spark("local[2]", TEST_SPARK_CONF)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[Any]:
    """moto's S3 server on 127.0.0.1 (a free port) for this test session, recording every request
    (tests/s3_server.py); make a bucket per test with ``s3_server.new_bucket()``."""
    from s3_server import S3Server

    with S3Server() as server:
        yield server


@pytest.fixture
def s3_storage(s3_server: Any) -> Iterator[Any]:
    """The storage settings of ``s3_server`` installed (``storage.configure``) for one test, the
    previous ones back after it; yields the server."""
    from watermark_assets import storage
    from watermark_assets.config.storage import StorageConfig

    previous = storage.installed()
    storage.configure(StorageConfig.model_validate(s3_server.storage_block()))
    try:
        yield s3_server
    finally:
        storage.configure(previous)


@contextmanager
def s3_project(
    server: Any, *pipelines: dict[str, Any], **storage_block: Any
) -> Iterator[ProjectConfig]:
    """The project of ``pipelines`` whose ``storage:`` block is ``server``'s (keys overridden by
    ``storage_block``), parsed, which installs its settings; the previous settings back on exit."""
    from watermark_assets import storage

    text = yaml.safe_dump(
        {
            "spark": {"master": "local[2]", "conf": TEST_SPARK_CONF},
            "storage": {**server.storage_block(), **storage_block},
            "pipelines": list(pipelines),
        }
    )
    previous = storage.installed()
    try:
        yield parse_config(text, env={}, base=Path.cwd(), origin="test config")
    finally:
        storage.configure(previous)


def pipeline_yaml(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    """A file-path pipeline 'events' (``source.type: files``) reading hourly NDJSON landing
    folders under tmp_path."""
    pipeline: dict[str, Any] = {
        "name": "events",
        "source": {
            "type": "files",
            "uri": str(tmp_path / "landing"),
            "format": "ndjson",
            "schema": "id BIGINT, event_time TIMESTAMP, name STRING",
        },
        "watermark": {"partition_template": "date=%Y-%m-%d/hour=%H"},
        "table": {
            "uri": str(tmp_path / "delta" / "events"),
            "partition_by": ["event_date"],
            "derived_columns": {"event_date": "to_date(event_time)"},
        },
        "partitions": {"granularity": "daily", "start": "2024-01-01"},
        "checkpoint": {"interval_files": 1, "interval_secs": 0},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(pipeline.get(key), dict):
            pipeline[key] = {**pipeline[key], **value}
        else:
            pipeline[key] = value
    return pipeline


def project_config(*pipelines: dict[str, Any]) -> ProjectConfig:
    text = yaml.safe_dump(
        {"spark": {"master": "local[2]", "conf": TEST_SPARK_CONF}, "pipelines": list(pipelines)}
    )
    return parse_config(text, env={}, base=Path.cwd(), origin="test config")


def write_ndjson(root: Path, relative: str, records: Sequence[dict[str, Any] | str]) -> Path:
    """Write records (dicts, or raw lines for malformed ones) as gzip NDJSON at root/relative."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    opener = gzip.open if relative.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as handle:  # type: ignore[operator]
        handle.write("\n".join(lines) + "\n")
    return path


def event_records(first_id: int, count: int, when: datetime) -> list[dict[str, Any]]:
    stamp = when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [
        {"id": first_id + n, "event_time": stamp, "name": f"e{first_id + n}"} for n in range(count)
    ]


def run_benchmark(name: str, *args: str, timeout: int) -> list[str]:
    """Run ``benchmarks/{name}`` in a fresh interpreter (the project on PYTHONPATH); its output
    lines, once it exited 0 (a smoke test of a benchmark script; timings are never asserted)."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / name
    env = {**os.environ, "PYTHONPATH": str(script.parents[1])}
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout.splitlines()


def run_benchmark_here(
    spark: Any, capsys: pytest.CaptureFixture[str], name: str, *args: str
) -> list[str]:
    """Run ``benchmarks/{name}``'s ``main(args)`` in THIS process; its output lines, once it
    returned 0 (a smoke test of a benchmark script; timings are never asserted). For a script
    that runs in one process with one local Spark session: its ``get_spark`` gets ``spark``, the
    tests' shared session (the test asks for the fixture), instead of a new interpreter starting
    Python, Dagster and a JVM of its own (the process is not what such a smoke test checks).
    What the script changes in the process is put back: the storage settings it installed,
    ``sys.path``, the environment."""
    import importlib.util

    from watermark_assets import storage

    assert spark is not None  # the session exists: the script's get_spark returns it
    script = Path(__file__).resolve().parents[1] / "benchmarks" / name
    spec = importlib.util.spec_from_file_location(f"_benchmark_{script.stem}", script)
    assert spec is not None and spec.loader is not None
    previous, path, environ = storage.installed(), list(sys.path), dict(os.environ)
    sys.path.insert(0, str(script.parent))  # as running the script puts its folder first
    capsys.readouterr()
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        status = module.main(list(args))
    finally:
        del sys.modules[spec.name]
        storage.configure(previous)
        sys.path[:] = path
        os.environ.clear()
        os.environ.update(environ)
    captured = capsys.readouterr()
    assert status == 0, captured.out[-3000:] + captured.err[-3000:]
    return captured.out.splitlines()
