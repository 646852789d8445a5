"""The same code location on a Spark cluster and under Spark Connect (issue 10 §5).

Configuration alone moves a pipeline: ``spark.master: spark://...`` runs it on a standalone
cluster (a real master and worker from pyspark's jars, the executors separate JVMs), and
``spark.remote: sc://...`` runs it through a real Spark Connect server (no JVM in the run's
process). Each run is a whole ``watermark-assets run-sensors`` process (sensor -> run -> commit,
as the daemon does) with its own configuration, since the test session holds a local Spark
already; its committed rows must equal those of a local-mode run of the same files. The Connect
tests of each pipeline kind run their steps (whole Dagster runs) one after the other in ONE
client process that the class's tests share (``ConnectClient``), each in folders of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from _ports import free_port
from _sensor_loop import SensorLoop
from conftest import TEST_SPARK_CONF, event_records, pipeline_yaml, project_config, write_ndjson
from dagster import DagsterInstance
from deltalake import DeltaTable
from spark_services import (
    SHORT_LIVED_JVM_OPTIONS,
    ConnectServer,
    StandaloneCluster,
    connect_server,
    standalone_cluster,
)
from test_column_pipeline import Orders, at, column_pipeline, order
from test_event_time_pipeline import streaming
from test_unit_pipeline import NO_JDBC

from watermark_assets.config import EventTimePipelineConfig, SparkConfig, load_config
from watermark_assets.defs import build_definitions
from watermark_assets.exceptions import ConfigError
from watermark_assets.sources.jdbc import postgres_jdbc_jar
from watermark_assets.spark.session import (
    DELTA_CATALOG,
    DELTA_EXTENSION,
    SparkSessionKindError,
    delta_spark_package,
    get_spark,
)

T0 = datetime(2024, 1, 5, 10, tzinfo=timezone.utc)

#: The landing files every variant ingests: two days, three hourly files a day, one malformed
#: record (quarantined) and one file holding a space in its name.
LANDING: dict[str, list[dict[str, Any] | str]] = {
    "date=2024-01-05/hour=10/1704448800-a.ndjson.gz": list(event_records(0, 40, T0)),
    "date=2024-01-05/hour=11/1704452400-b.ndjson.gz": [*event_records(40, 40, T0), "{not json"],
    "date=2024-01-05/hour=12/1704456000-c d.ndjson": list(event_records(80, 40, T0)),
    "date=2024-01-06/hour=00/1704499200-a.ndjson.gz": list(
        event_records(120, 40, T0 + timedelta(hours=14))
    ),
    "date=2024-01-06/hour=01/1704502800-b.ndjson.gz": list(
        event_records(160, 40, T0 + timedelta(hours=15))
    ),
}


def landing(root: Path) -> Path:
    folder = root / "landing"
    for relative, records in LANDING.items():
        write_ndjson(folder, relative, records)
    return folder


def write_config(root: Path, name: str, spark: dict[str, Any], landing_uri: Path) -> Path:
    """A configuration whose pipeline ``events`` reads ``landing_uri`` into ``root/name``."""
    pipeline = pipeline_yaml(
        root,
        source={"uri": str(landing_uri)},
        table={"uri": str(root / name / "events")},
        partitions={"granularity": "daily", "start": "2024-01-04", "end": "2024-01-08"},
    )
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"spark": spark, "pipelines": [pipeline]}), encoding="utf-8")
    return path


@dataclass
class Cli:
    returncode: int
    output: str


def run_sensors(config: Path, dagster_home: Path, *, timeout: int = 300, **env: str) -> Cli:
    """``watermark-assets --config CONFIG run-sensors`` as a whole process, started beside the
    instance (the checkout's ``.env`` would name the checkout's instance)."""
    dagster_home.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "watermark_assets.cli", "--config", str(config), "run-sensors"],
        cwd=dagster_home.parent,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "DAGSTER_HOME": str(dagster_home), **env},
        check=False,
    )
    return Cli(done.returncode, done.stdout + done.stderr)


def rows_of(table_uri: Path) -> list[dict[str, Any]]:
    """The committed rows, without ``_ingested_at`` (the run's clock), in a fixed order."""
    table = DeltaTable(str(table_uri)).to_pyarrow_table()
    table = table.drop_columns([c for c in table.column_names if c == "_ingested_at"])
    return ordered(table.to_pylist())


def ordered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda row: sorted((k, str(v)) for k, v in row.items()))


@dataclass
class Reference:
    """A local-mode run of LANDING: what every other mode must commit."""

    root: Path
    landing: Path
    rows: list[dict[str, Any]]
    quarantine: list[dict[str, Any]]


@pytest.fixture(scope="module")
def reference(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """LANDING committed in local mode, in THIS process on the shared session: the sensor ticks
    and its runs executed as the daemon does, until it requests nothing. What the other modes
    must commit; they run ``run-sensors`` as a process (a process here would only add a Python
    and JVM start-up, ~10 CPU-s, to a result that does not depend on it)."""
    root = tmp_path_factory.mktemp("scale_out")
    folder = landing(root)
    config = write_config(root, "local", {"master": "local[1]", "conf": SMALL}, folder)
    loop = SensorLoop(build_definitions(load_config(config)), DagsterInstance.ephemeral())
    for _ in range(3):
        requests = loop.tick().run_requests
        if not requests:
            break
        loop.run_all(requests)
    assert not loop.tick().run_requests, "the sensor still requests runs after three passes"
    rows = rows_of(root / "local" / "events")
    assert len(rows) == 200 and sorted(r["id"] for r in rows) == list(range(200))
    quarantine = rows_of(root / "local" / "events_quarantine")
    assert [q["raw_record"] for q in quarantine] == ["{not json"]
    return Reference(root, folder, rows, quarantine)


#: The tests' session settings (conftest.TEST_SPARK_CONF: no UI, 2 shuffle partitions, no
#: adaptive execution, no DataFrame call-site debugging) without the JDBC jar, which a session
#: gets only where a test says so (the Connect server: ``--jars``).
SESSION_CONF = {key: value for key, value in TEST_SPARK_CONF.items() if key != "spark.jars"}

#: A run process's Spark: small, no UI, as the tests' own sessions.
SMALL = {**SESSION_CONF, "spark.driver.memory": "1g"}


# ---------------------------------------------------------------------------------- configuration
def spark_config(**values: Any) -> SparkConfig:
    return SparkConfig.model_validate(values)


SETTINGS = {
    "the default: local[2]": ({}, {"spark.master": "local[2]"}),
    "a cluster's master and a setting": (
        {"master": "spark://10.0.0.5:7077", "conf": {"spark.executor.memory": "4g"}},
        {"spark.master": "spark://10.0.0.5:7077", "spark.executor.memory": "4g"},
    ),
    "Spark Connect: a remote, no master": (
        {"remote": "sc://spark.internal:15002", "conf": {"spark.sql.shuffle.partitions": "64"}},
        {"spark.remote": "sc://spark.internal:15002", "spark.sql.shuffle.partitions": "64"},
    ),
    "delta-spark: its package, extension and catalog": (
        {"delta_spark": True},
        {
            "spark.master": "local[2]",
            "spark.jars.packages": delta_spark_package(),
            "spark.sql.extensions": DELTA_EXTENSION,
            "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        },
    ),
    "delta-spark beside the user's own packages and extensions": (
        {
            "delta_spark": True,
            "conf": {
                "spark.jars.packages": "org.postgresql:postgresql:42.7.4",
                "spark.sql.extensions": "com.example.Ext",
            },
        },
        {
            "spark.master": "local[2]",
            "spark.jars.packages": f"org.postgresql:postgresql:42.7.4,{delta_spark_package()}",
            "spark.sql.extensions": f"com.example.Ext,{DELTA_EXTENSION}",
            "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        },
    ),
    "delta-spark from local jars: no package to fetch": (
        {"delta_spark": True, "conf": {"spark.jars": "/opt/jars/delta-spark_2.13-4.0.0.jar"}},
        {
            "spark.master": "local[2]",
            "spark.jars": "/opt/jars/delta-spark_2.13-4.0.0.jar",
            "spark.sql.extensions": DELTA_EXTENSION,
            "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        },
    ),
}


@pytest.mark.parametrize("values, settings", SETTINGS.values(), ids=SETTINGS.keys())
def test_the_spark_section_becomes_flat_spark_settings(
    values: dict[str, Any], settings: dict[str, str]
) -> None:
    assert spark_config(**values).settings() == settings


JDBC_DRIVER = {
    "a classic session gets the driver jar": (
        {"spark.master": "local[2]"},
        {"spark.master": "local[2]", "spark.jars": "/usr/share/java/postgresql.jar"},
    ),
    "a Connect client does not: the server's classpath holds it": (
        {"spark.remote": "sc://h:15002"},
        {"spark.remote": "sc://h:15002"},
    ),
}


@pytest.mark.parametrize("settings, expected", JDBC_DRIVER.values(), ids=JDBC_DRIVER.keys())
def test_the_jdbc_driver_jar_is_added_only_to_a_classic_session(
    settings: dict[str, str], expected: dict[str, str]
) -> None:
    from watermark_assets.sources.jdbc import with_postgres_driver

    assert with_postgres_driver(settings, jar="/usr/share/java/postgresql.jar") == expected


def test_delta_spark_is_the_installed_python_package_s_version() -> None:
    from importlib.metadata import version

    assert delta_spark_package() == f"io.delta:delta-spark_2.13:{version('delta-spark')}"


BAD_SPARK = {
    "master and remote": (
        {"master": "spark://h:7077", "remote": "sc://h:15002"},
        ["spark.master 'spark://h:7077' and spark.remote 'sc://h:15002' are both set"],
    ),
    "a remote that is not sc://": (
        {"remote": "http://h:15002"},
        ["'http://h:15002' is not a Spark Connect URL", "sc://HOST:PORT"],
    ),
    "a remote with a bad port": ({"remote": "sc://h:port"}, ["'sc://h:port' has no valid port"]),
    "the master in conf": (
        {"conf": {"spark.master": "yarn"}},
        ["spark.conf holds spark.master='yarn'", "spark.master"],
    ),
    "a key that is not Spark's": (
        {"conf": {"executor.memory": "4g"}},
        ["'executor.memory' is not a Spark setting", "start with 'spark.'"],
    ),
    "delta_spark on a Connect client": (
        {"remote": "sc://h:15002", "delta_spark": True},
        ["cannot add jars to a running server", "--packages io.delta:delta-spark_2.13"],
    ),
}


@pytest.mark.parametrize("values, said", BAD_SPARK.values(), ids=BAD_SPARK.keys())
def test_a_bad_spark_section_is_refused_naming_the_value_and_the_fix(
    tmp_path: Path, values: dict[str, Any], said: list[str]
) -> None:
    from watermark_assets.config import parse_config

    text = yaml.safe_dump({"spark": values, "pipelines": [pipeline_yaml(tmp_path)]})
    with pytest.raises(ConfigError) as caught:
        parse_config(text, env={}, base=tmp_path, origin="x.yaml")
    for text in said:
        assert text in str(caught.value)


def test_the_streaming_engine_is_refused_under_spark_connect(tmp_path: Path) -> None:
    """foreachBatch would run the commit in a Python process of the server, not the run."""
    from watermark_assets.config import parse_config

    def parsed(spark: dict[str, Any]) -> Any:
        text = yaml.safe_dump({"spark": spark, "pipelines": streaming(tmp_path)})
        return parse_config(text, env={}, base=tmp_path, origin="x.yaml")

    assert parsed({"master": "local[2]"}).event_time_pipelines[0].engine == "streaming"
    with pytest.raises(ConfigError) as caught:
        parsed({"remote": "sc://127.0.0.1:15002"})
    assert "engine streaming does not run under Spark Connect" in str(caught.value)
    assert "use engine: batch" in str(caught.value)


@pytest.mark.spark  # a JVM in a subprocess
def test_delta_spark_jars_that_cannot_be_fetched_fail_fast_with_the_fix(tmp_path: Path) -> None:
    """No Maven Central here: the package resolution fails (an Ivy repository on a closed
    port), and the error names the package, where it looked and the local-jar fix."""
    settings = tmp_path / "ivysettings.xml"
    closed = free_port()
    settings.write_text(
        '<ivysettings><settings defaultResolver="closed"/><resolvers>'
        f'<ibiblio name="closed" m2compatible="true" root="http://127.0.0.1:{closed}/maven2/"/>'
        "</resolvers></ivysettings>",
        encoding="utf-8",
    )
    script = (
        "import sys\n"
        "from watermark_assets.config import SparkConfig\n"
        "from watermark_assets.spark.session import SparkStartError, spark_from_settings\n"
        "config = SparkConfig.model_validate({'master': 'local[1]', 'delta_spark': True,\n"
        f"    'conf': {{'spark.jars.ivySettings': {str(settings)!r},\n"
        f"             'spark.jars.ivy': {str(tmp_path / 'ivy')!r}}}}})\n"
        "try:\n"
        "    spark_from_settings(config.settings())\n"
        "except SparkStartError as error:\n"
        "    print('ERROR', error)\n"
        "    sys.exit(3)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
    message = done.stdout.split("ERROR ", 1)[1]
    assert f"['{delta_spark_package()}']" in message
    assert f"spark.jars.ivySettings={settings}" in message
    assert "name the local files in spark.conf's spark.jars" in message
    assert "unresolved dependency" in done.stderr  # the launcher's own log says which


def test_one_process_holds_one_kind_of_session(spark: Any) -> None:
    """A classic session is running here: a Connect one is refused before any connection."""
    with pytest.raises(SparkSessionKindError, match="already holds a classic Spark session"):
        get_spark(remote=f"sc://127.0.0.1:{free_port()}")


def test_an_unreachable_connect_server_fails_the_run_naming_the_url(tmp_path: Path) -> None:
    folder = landing(tmp_path)
    remote = f"sc://127.0.0.1:{free_port()}"
    config = write_config(tmp_path, "nowhere", {"remote": remote}, folder)
    done = run_sensors(config, tmp_path / "home", timeout=120)
    assert done.returncode == 1, done.output[-3000:]
    assert f"spark.remote '{remote}': no Spark Connect server answers" in done.output


# ------------------------------------------------------------------------- standalone cluster
@pytest.mark.spark
class TestStandaloneCluster:
    @pytest.fixture(scope="class")
    def cluster(self, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
        with standalone_cluster(tmp_path_factory.mktemp("cluster"), cores=1) as running:
            yield running

    def test_a_run_on_the_cluster_commits_what_local_mode_commits(
        self, cluster: StandaloneCluster, reference: Reference
    ) -> None:
        spark = {
            "master": cluster.master_url,
            "conf": {
                **SMALL,
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.executor.memory": "512m",
                "spark.executor.extraJavaOptions": SHORT_LIVED_JVM_OPTIONS,
                "spark.cores.max": "1",
            },
        }
        root = reference.root
        config = write_config(root, "cluster", spark, reference.landing)
        done = run_sensors(config, root / "home_cluster", SPARK_LOCAL_IP="127.0.0.1")
        assert done.returncode == 0, done.output[-3000:]
        assert "2 runs requested" in done.output or done.output.count("succeeded") == 2

        assert rows_of(root / "cluster" / "events") == reference.rows
        assert rows_of(root / "cluster" / "events_quarantine") == reference.quarantine

        # the application ran on the cluster, its tasks in executors the worker launched
        # (the master moves it to completedapps once the driver's process is gone)
        app = completed_app(cluster)
        assert app["name"] == "watermark_assets"
        executors = finished_executors(cluster, app["id"])
        logs = [cluster.work_dir / app["id"] / str(e["id"]) / "stderr" for e in executors]
        ran = [log for log in logs if "Running task" in log.read_text(errors="replace")]
        assert ran, f"no executor log of {app['id']} shows a task: {logs}"
        assert "CoarseGrainedExecutorBackend" in ran[0].read_text(errors="replace")


def completed_app(cluster: StandaloneCluster, timeout: float = 60) -> dict[str, Any]:
    """The one application the cluster completed (waiting for the master to see its end)."""
    deadline = time.monotonic() + timeout
    while True:
        state = cluster.master_state()
        if state.get("completedapps"):
            [app] = state["completedapps"]
            return dict(app)
        assert time.monotonic() < deadline, f"no completed application: {state}"
        time.sleep(0.5)


def finished_executors(
    cluster: StandaloneCluster, app_id: str, timeout: float = 60
) -> list[dict[str, Any]]:
    """The executors the worker ran for ``app_id`` (waiting for the worker to see them end:
    it stops them after the master ends the application)."""
    deadline = time.monotonic() + timeout
    while True:
        state = cluster.worker_state()
        found = [dict(e) for e in state.get("finishedexecutors", []) if e["appid"] == app_id]
        if found:
            return found
        assert time.monotonic() < deadline, f"no finished executor of {app_id}: {state}"
        time.sleep(0.5)


# ------------------------------------------------------------------------------- Spark Connect
def client_env(
    server: ConnectServer, folder: Path, pipelines: list[dict[str, Any]]
) -> dict[str, str]:
    """The environment of a client process whose configuration ($WATERMARK_ASSETS_CONFIG,
    written to ``folder``) holds ``pipelines`` and whose Spark is the Connect server; JAVA_HOME
    names nothing, so no Java can start there."""
    config = folder / "connect.yaml"
    config.write_text(
        yaml.safe_dump({"spark": {"remote": server.url}, "pipelines": pipelines}), encoding="utf-8"
    )
    return {
        **os.environ,
        "WATERMARK_ASSETS_CONFIG": str(config),
        "JAVA_HOME": str(folder / "no-java-here"),
    }


def through_connect(
    server: ConnectServer, folder: Path, pipelines: list[dict[str, Any]], *argv: str
) -> subprocess.CompletedProcess[str]:
    """``python ARGV`` as a process of its own whose configuration ($WATERMARK_ASSETS_CONFIG)
    holds ``pipelines`` and whose Spark is the Connect server; no Java can start there."""
    env = client_env(server, folder, pipelines)
    return subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


#: The client process of ``ConnectClient``: a line on its stdin is a JSON step, one
#: tests/_crash_run.py run (``argv``) in THIS process (its prints go to stderr) with ``env``
#: changed for the step (None: unset; the previous values are restored after it); it answers
#: ``status=N`` (an exception is printed and answered as ``status=error``).
CLIENT = """
import contextlib, json, os, sys, traceback
sys.path.insert(0, sys.argv[1])
from _crash_run import main
def put(values):
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
for line in sys.stdin:
    step = json.loads(line)
    saved = {key: os.environ.get(key) for key in step["env"]}
    put(step["env"])
    try:
        with contextlib.redirect_stdout(sys.stderr):
            status = main(step["argv"])
    except Exception:
        traceback.print_exc()
        status = "error"
    finally:
        put(saved)
    print(f"status={status}", flush=True)
"""


class ConnectClient:
    """ONE client process of the server for the tests of a class (as ``through_connect``: no
    Java can start there, JAVA_HOME names nothing) that runs their steps one after the other.
    A step is a whole Dagster run (build_definitions from the step's own configuration, one
    ``execute_in_process``) in the environment the test process has at that moment (as a
    process started then would inherit it); only the interpreter and its Spark Connect client
    are shared, which saves a Python + Dagster start-up (~4 CPU-s) and a first run's warm-up a
    test. Each test's pipelines read and write folders of its own ``tmp_path``. A client that
    died (a hung step killed) is started again for the next step."""

    def __init__(self, server: ConnectServer, folder: Path) -> None:
        self.env = {
            **os.environ,
            "WATERMARK_ASSETS_CONFIG": str(folder / "none.yaml"),
            "JAVA_HOME": str(folder / "no-java-here"),
        }
        self.url = server.url
        self.errors = folder / "client.stderr"
        self.errors.touch()
        self.process: subprocess.Popen[str] | None = None

    def _started(self) -> subprocess.Popen[str]:
        if self.process is None or self.process.poll() is not None:
            with self.errors.open("a", encoding="utf-8") as stderr:
                self.process = subprocess.Popen(
                    [sys.executable, "-c", CLIENT, str(Path(__file__).parent)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    text=True,
                    env=self.env,
                )
        return self.process

    def run(self, config: Path, name: str, key: str) -> None:
        """Materialize partition ``key`` ('-': unpartitioned) of pipeline ``name`` of
        ``config`` through the server; the run must succeed."""
        client = self._started()
        assert client.stdin is not None and client.stdout is not None
        wanted = {**os.environ, "WATERMARK_ASSETS_CONFIG": str(config)}
        wanted["JAVA_HOME"] = self.env["JAVA_HOME"]
        env: dict[str, str | None] = {k: v for k, v in wanted.items() if self.env.get(k) != v}
        env.update({k: None for k in self.env if k not in wanted})
        offset = self.errors.stat().st_size
        watchdog = threading.Timer(300, client.kill)  # a hung run fails the test
        watchdog.start()
        try:
            client.stdin.write(json.dumps({"env": env, "argv": [name, key]}) + "\n")
            client.stdin.flush()
            answer = client.stdout.readline().strip()
        except BrokenPipeError:
            answer = f"the client exited with {client.wait()}"
        finally:
            watchdog.cancel()
        tail = self.errors.read_bytes()[offset:].decode(errors="replace")[-3000:]
        assert answer == "status=0", f"{name} {key}: {answer!r}\n{tail}"

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=60)
            finally:
                self.process.kill()


@contextmanager
def connect_client(
    client: ConnectClient, folder: Path, pipelines: list[dict[str, Any]]
) -> Iterator[Callable[[str, str], None]]:
    """The steps of a test through the class's client process: ``run(name, key)`` materializes
    partition ``key`` ('-': unpartitioned) of pipeline ``name`` of ``pipelines`` (their
    configuration written to ``folder``) through the server, and the run must succeed. What
    needs a fresh process (the sensor's loop, the replay command) runs in ``through_connect``."""
    config = folder / "connect.yaml"
    config.write_text(
        yaml.safe_dump({"spark": {"remote": client.url}, "pipelines": pipelines}),
        encoding="utf-8",
    )

    def run(name: str, key: str) -> None:
        client.run(config, name, key)

    yield run


def committed(table_uri: Path | str, *columns: str) -> list[tuple[Any, ...]]:
    """``columns`` of every committed row, sorted (duplicates kept: they are what a re-run
    must not add)."""
    table = DeltaTable(str(table_uri)).to_pyarrow_table(columns=list(columns))
    return sorted(tuple(row[c] for c in columns) for row in table.to_pylist())


@pytest.mark.spark
class TestSparkConnect:
    @pytest.fixture(scope="class")
    def server(self, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
        """One server for the class, the PostgreSQL JDBC driver on its classpath when installed
        (a client cannot add jars to a running server)."""
        jar = postgres_jdbc_jar()
        # its sessions set as the tests' own: its clients read the debugging setting from it
        # (a Connect client otherwise walks the Python stack at every Column operation)
        root, jars = tmp_path_factory.mktemp("connect"), [jar] if jar else []
        with connect_server(root, conf=SESSION_CONF, jars=jars) as up:
            yield up

    @pytest.fixture(scope="class")
    def shared_client(
        self, server: ConnectServer, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[ConnectClient]:
        """The class's one client process of the server (``ConnectClient``)."""
        client = ConnectClient(server, tmp_path_factory.mktemp("connect_client"))
        try:
            yield client
        finally:
            client.close()

    def test_the_sensor_run_commit_loop_runs_through_the_server_once(
        self, server: ConnectServer, reference: Reference
    ) -> None:
        root = reference.root
        config = write_config(root, "connect", {"remote": server.url}, reference.landing)
        home = root / "home_connect"
        # No JVM can start in the run's process: JAVA_HOME names nothing (a classic session
        # would fail its Java check).
        no_java = {"JAVA_HOME": str(root / "no-java-here")}
        first = run_sensors(config, home, **no_java)
        assert first.returncode == 0, first.output[-3000:]
        table = root / "connect" / "events"
        assert rows_of(table) == reference.rows
        assert rows_of(root / "connect" / "events_quarantine") == reference.quarantine
        version = DeltaTable(str(table)).version()

        again = run_sensors(config, home, **no_java)
        assert again.returncode == 0, again.output[-3000:]
        assert "Idle" in again.output
        assert DeltaTable(str(table)).version() == version  # no new commit
        assert rows_of(table) == reference.rows

        # a file that lands later: the next loop commits it and only it
        write_ndjson(
            reference.landing,
            "date=2024-01-06/hour=02/1704506400-a.ndjson.gz",
            event_records(200, 10, T0 + timedelta(hours=16)),
        )
        try:
            late = run_sensors(config, home, **no_java)
        finally:
            (reference.landing / "date=2024-01-06/hour=02/1704506400-a.ndjson.gz").unlink()
        assert late.returncode == 0, late.output[-3000:]
        ids = sorted(row["id"] for row in rows_of(table))
        assert ids == list(range(210))
        assert DeltaTable(str(table)).version() == version + 1

    def test_a_column_pipeline_reads_above_its_watermark_through_the_server(
        self, shared_client: ConnectClient, tmp_path: Path
    ) -> None:
        """The column path (Delta source read with its predicate, staged, committed) under
        Connect: a second run reads only the changed rows, a third reads nothing and commits
        nothing."""
        orders = Orders(tmp_path / "source" / "orders")
        orders.put(*(order(i, at(9 + i % 3)) for i in range(10)))
        raw = column_pipeline(tmp_path)
        target = tmp_path / "delta" / "orders"

        def committed() -> list[tuple[int, float]]:
            table = DeltaTable(str(target)).to_pyarrow_table(columns=["id", "amount"])
            return sorted((r["id"], r["amount"]) for r in table.to_pylist())

        with connect_client(shared_client, tmp_path, [raw]) as run:
            run("orders", "-")
            assert committed() == [(i, float(i)) for i in range(10)]
            orders.put(
                order(3, at(11, 30), 33.0), order(7, at(11, 45), 77.0), order(10, at(11, 45))
            )
            run("orders", "-")
            changed = [(3, 33.0), (7, 77.0), (10, 10.0)]
            assert committed() == sorted([(i, float(i)) for i in range(10)] + changed)
            version = DeltaTable(str(target)).version()
            run("orders", "-")
        assert committed() == sorted([(i, float(i)) for i in range(10)] + changed)
        assert DeltaTable(str(target)).version() == version  # nothing read: no new commit

    def test_parquet_csv_and_json_lines_sources_read_above_their_watermarks_through_the_server(
        self, shared_client: ConnectClient, tmp_path: Path
    ) -> None:
        """The column sources that Spark's own readers scan (a Parquet folder, CSV with a
        header, JSON lines) under Connect, their three pipelines run in ONE process a step:
        every row, then, after a row was changed and two added, exactly those three once more."""
        from test_column_pipeline import _write_rows

        formats = ("parquet", "csv", "json")
        raws = []
        for fmt in formats:
            source: dict[str, Any] = {"type": fmt, "uri": str(tmp_path / "source" / fmt)}
            if fmt != "parquet":
                source["schema"] = "id BIGINT, updated_at TIMESTAMP, amount DOUBLE"
            table = {"uri": str(tmp_path / "delta" / fmt)}
            raws.append(column_pipeline(tmp_path, name=f"orders_{fmt}", source=source, table=table))
            _write_rows(tmp_path / "source" / fmt, "a", fmt, [order(i, at(9, i)) for i in range(3)])
        with connect_client(shared_client, tmp_path, raws) as client:

            def run() -> dict[str, list[tuple[Any, ...]]]:
                for fmt in formats:  # each unpartitioned pipeline's run, one after the other
                    client(f"orders_{fmt}", "-")
                return {fmt: committed(tmp_path / "delta" / fmt, "id", "amount") for fmt in formats}

            first = [(i, float(i)) for i in range(3)]
            assert run() == dict.fromkeys(formats, first)
            for fmt in formats:
                folder = tmp_path / "source" / fmt
                changed = [order(0, at(9, 0)), order(1, at(11), 11.0), order(2, at(9, 2))]
                _write_rows(folder, "a", fmt, changed)  # row 1 changed above the watermark
                _write_rows(folder, "b", fmt, [order(i, at(10, i)) for i in (3, 4)])
            second = sorted([*first, (1, 11.0), (3, 3.0), (4, 4.0)])
            assert run() == dict.fromkeys(formats, second), "only the new rows, once"

    def test_a_time_pipeline_replaces_its_windows_through_the_server(
        self, shared_client: ConnectClient, tmp_path: Path
    ) -> None:
        """The time path (a window's rows read with its range pushed down, the window replaced
        in ONE commit) under Connect: a partition run twice holds its rows once; the next
        partition adds its own."""
        from test_time_pipeline import DAILY_ORDERS, time_pipeline

        Orders(tmp_path / "source" / "orders").put(*DAILY_ORDERS)
        raw = time_pipeline(tmp_path, to="P0D", partition="daily")
        target = tmp_path / "delta" / "orders"

        with connect_client(shared_client, tmp_path, [raw]) as client:

            def run(partition: str) -> list[int]:
                client("orders", partition)
                table = DeltaTable(str(target)).to_pyarrow_table(columns=["id"])
                return sorted(table.column("id").to_pylist())

            assert run("2020-01-03") == [3]  # the order of 2020-01-03 12:00
            version = DeltaTable(str(target)).version()
            assert run("2020-01-03") == [3], "a re-run replaces its window: no duplicate"
            assert DeltaTable(str(target)).version() == version + 1
            assert run("2020-01-04") == [3, 4]

    def test_an_event_time_aggregate_batch_engine_through_the_server(
        self, shared_client: ConnectClient, tmp_path: Path
    ) -> None:
        """The batch engine under Connect: two partitions' runs, a late event kept once; the
        windows are the oracle's, as in local mode (tests/test_event_time_pipeline.py)."""
        from test_event_time_pipeline import pipelines
        from test_event_window import BATCH_1, T0, append, event, late_ids, oracle, output_rows

        from watermark_assets.kinds.event_time.defs import window_engine

        raw = pipelines(tmp_path)
        parsed = project_config(*raw)
        pipeline = parsed.pipeline("events_5min")
        assert isinstance(pipeline, EventTimePipelineConfig)
        spec = window_engine(pipeline, parsed).spec

        append(tmp_path / "events", *BATCH_1)
        append(tmp_path / "events", event(99, 70, 9))  # 13:10: the watermark reaches 13:00
        with connect_client(shared_client, tmp_path, raw) as run:
            run("events_5min", "2024-01-30-12:00")
            second = [event(21, 3, 7), event(30, 80, 1), event(31, 105, 2), event(98, 130, 9)]
            append(tmp_path / "events", *second)  # 12:03 late; the newest, 14:10, closes 13:00
            run("events_5min", "2024-01-30-13:00")
        everything = [*BATCH_1, event(99, 70, 9), *second]
        assert output_rows(spec) == oracle(everything, {21}, T0 + timedelta(minutes=120))
        assert late_ids(spec) == [21]

    def test_an_unreadable_file_is_quarantined_as_in_local_mode(
        self, server: ConnectServer, reference: Reference, tmp_path: Path
    ) -> None:
        """A file Spark cannot read at all (not gzip) under Connect: set aside, the others
        committed, one quarantine record with the root cause classic Spark reports."""
        folder = landing(tmp_path)
        broken = "date=2024-01-05/hour=13/1704459600-x.ndjson.gz"
        (folder / broken).parent.mkdir(parents=True)
        (folder / broken).write_bytes(b"not gzip at all")
        config = write_config(tmp_path, "connect", {"remote": server.url}, folder)
        done = run_sensors(config, tmp_path / "home", JAVA_HOME=str(tmp_path / "no-java-here"))
        assert done.returncode == 0, done.output[-3000:]
        assert rows_of(tmp_path / "connect" / "events") == reference.rows
        records = rows_of(tmp_path / "connect" / "events_quarantine")
        [record] = [r for r in records if r["_source_file"] == broken]
        assert record["error"] == "FAILED_READ_FILE.NO_HINT: java.io.IOException: not a gzip file"
        assert (record["raw_record"], record["file_size"]) == (None, len(b"not gzip at all"))
        assert [r for r in records if r["_source_file"] != broken] == reference.quarantine

    def test_settings_the_server_owns_are_refused_by_name(
        self, server: ConnectServer, reference: Reference, tmp_path: Path
    ) -> None:
        """A client cannot set the server's start-up settings: the run fails naming each one
        and where it belongs, instead of silently running without them."""
        spark = {
            "remote": server.url,
            "conf": {
                "spark.sql.shuffle.partitions": "3",  # a session setting: accepted
                "spark.executor.memory": "4g",
                "spark.jars": "/opt/jars/extra.jar",
            },
        }
        config = write_config(tmp_path, "refused", spark, reference.landing)
        done = run_sensors(config, tmp_path / "home")
        assert done.returncode == 1, done.output[-3000:]
        assert "the server refuses these spark.conf settings from a client" in done.output
        assert "client: spark.executor.memory, spark.jars; set them on the server" in done.output
        assert "/opt/jars/extra.jar" not in done.output  # names only: a value may be a secret
        assert "spark.sql.shuffle.partitions" not in done.output
        assert "spark-submit --conf KEY=VALUE" in done.output

    def test_landing_and_table_on_s3_through_the_server(
        self, server: ConnectServer, s3_server: Any, reference: Reference, tmp_path: Path
    ) -> None:
        """The fsspec path under Connect: the Python data source runs in the server's Python
        workers (the settings reach them in its redacted option); rows as in local mode."""
        from watermark_assets import storage
        from watermark_assets.config.storage import StorageConfig

        bucket = s3_server.new_bucket()
        landing_uri, table_uri = f"s3://{bucket}/landing", f"s3://{bucket}/lake/events"
        pipeline = pipeline_yaml(
            tmp_path,
            source={"uri": landing_uri},
            table={"uri": table_uri},
            partitions={"granularity": "daily", "start": "2024-01-04", "end": "2024-01-08"},
        )
        config = tmp_path / "s3.yaml"
        document = {
            "spark": {"remote": server.url},
            "storage": s3_server.storage_block(),
            "pipelines": [pipeline],
        }
        config.write_text(yaml.safe_dump(document), encoding="utf-8")
        previous = storage.installed()
        storage.configure(StorageConfig.model_validate(s3_server.storage_block()))
        try:
            fs, root = storage.filesystem(landing_uri)
            for path in sorted(p for p in reference.landing.rglob("*") if p.is_file()):
                fs.pipe(
                    f"{root}/{path.relative_to(reference.landing).as_posix()}", path.read_bytes()
                )
            done = run_sensors(config, tmp_path / "home", JAVA_HOME=str(tmp_path / "no-java"))
            assert done.returncode == 0, done.output[-3000:]
            options = storage.delta_options(table_uri)
            table = DeltaTable(table_uri, storage_options=options).to_pyarrow_table()
            quarantine = DeltaTable(f"{table_uri}_quarantine", storage_options=options)
        finally:
            storage.configure(previous)
        committed = table.drop_columns(["_ingested_at"]).to_pylist()
        assert ordered(committed) == reference.rows
        raw = quarantine.to_pyarrow_table(columns=["raw_record"]).to_pylist()
        assert raw == [{"raw_record": "{not json"}]

    def test_a_unit_pipeline_replaces_its_unit_through_the_server(
        self, shared_client: ConnectClient, tmp_path: Path
    ) -> None:
        """The unit path (the unit's rows read with ``survey_id = id`` pushed down, exactly them
        replaced in ONE commit) under Connect: after the source changed, a re-run of the unit
        holds its current rows once, and no other unit's."""
        from test_unit_pipeline import Source, answer, unit_pipeline

        source = Source(tmp_path, "delta_table")
        source.put(*(answer(survey, n) for survey in ("id1", "id2") for n in (1, 2)))
        raw = unit_pipeline(tmp_path, source.config(), {"units": "id1,id2"})
        target = tmp_path / "delta" / "answers"

        def rows_of(survey: str) -> list[tuple[Any, ...]]:
            return [(r["survey_id"], r["answer"], r["score"]) for r in source.of(survey)]

        with connect_client(shared_client, tmp_path, [raw]) as client:

            def run(unit: str) -> list[tuple[Any, ...]]:
                client("answers", unit)
                return committed(target, "survey_id", "answer", "score")

            assert run("id2") == rows_of("id2")
            version = DeltaTable(str(target)).version()
            source.delete("id2", 1)
            source.put(answer("id2", 2, 20.0), answer("id2", 3), answer("id1", 3))
            assert run("id2") == rows_of("id2"), "answer 1 gone, 2 changed once, 3 added; no id1"
        assert DeltaTable(str(target)).version() == version + 1

    def test_a_time_x_unit_cell_is_replaced_through_the_server(
        self, shared_client: ConnectClient, tmp_path: Path
    ) -> None:
        """The time x unit path (a cell read with ``unit = id AND start <= time < end`` pushed
        down, replaced in ONE commit) under Connect: a re-run of the cell after a late answer
        holds the cell's rows once and never touches the other unit of the same window."""
        from test_time_unit_pipeline import ANSWERS, Source, answer, grid_pipeline

        source = Source(tmp_path, "delta_table")
        source.put(*ANSWERS)
        raw = grid_pipeline(tmp_path, source.config(), {"units": "a,b"})
        target = tmp_path / "delta" / "answers"

        with connect_client(shared_client, tmp_path, [raw]) as client:

            def run(cell: str) -> list[tuple[Any, ...]]:
                client("answers", cell)
                return committed(target, "survey_id", "answer")

            assert run("2024-01-02|b") == [("b", 20), ("b", 21)]
            assert run("2024-01-02|a") == [("a", 20), ("a", 21), ("b", 20), ("b", 21)]
            version = DeltaTable(str(target)).version()
            source.put(answer("a", 22, "2024-01-02T23:00"), answer("b", 22, "2024-01-02T23:00"))
            after = [("a", 20), ("a", 21), ("a", 22), ("b", 20), ("b", 21)]
            assert run("2024-01-02|a") == after
        assert DeltaTable(str(target)).version() == version + 1

    @pytest.mark.skipif(postgres_jdbc_jar() is None, reason=NO_JDBC)
    def test_a_jdbc_pipeline_reads_postgres_through_the_server(
        self, shared_client: ConnectClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The JDBC source under Connect (the driver on the server's classpath, the watermark's
        WHERE in PostgreSQL, two partitions): every row, then only the three rows changed."""
        from test_column_pipeline_sources import (
            ROWS,
            jdbc_pipeline,
            orders_database,
            update_three_orders,
        )

        monkeypatch.setenv("WA_TEST_PG_USER", "postgres")  # the run process inherits it
        target = tmp_path / "delta" / "orders_pg"
        with orders_database() as database:
            raw = jdbc_pipeline(str(target), database)
            with connect_client(shared_client, tmp_path, [raw]) as run:
                run("orders_pg", "-")
                assert committed(target, "id") == [(i,) for i in range(ROWS)]
                update_three_orders(database)
                run("orders_pg", "-")
        changed = [(3, -3.0), (17, -17.0), (25, -25.0)]
        assert committed(target, "id", "amount") == sorted(
            [(i, float(i)) for i in range(ROWS)] + changed
        )

    def test_an_http_api_pipeline_reads_its_pages_through_the_server(
        self, shared_client: ConnectClient, tmp_path: Path
    ) -> None:
        """The HTTP API source under Connect (pages fetched in the run, the records parsed and
        filtered by the server): every record, then only the two changed, the watermark sent
        as the API's parameter."""
        from test_column_pipeline_sources import (
            change_two_records,
            http_pipeline,
            orders_api_server,
        )

        target = tmp_path / "delta" / "orders_api"
        with orders_api_server() as (url, api):
            raw = http_pipeline(str(target), url)
            with connect_client(shared_client, tmp_path, [raw]) as run:
                run("orders_api", "-")
                assert committed(target, "id") == [(i,) for i in range(25)]
                change_two_records(api)
                api.requests.clear()
                run("orders_api", "-")
        assert committed(target, "id") == sorted([(i,) for i in range(25)] + [(2,), (11,)])
        assert api.requests == [
            {"updated_since": "2026-04-03T09:04:00+00:00", "page": "1", "per_page": "10"}
        ]

    def test_a_downloaded_file_s_window_is_replaced_through_the_server(
        self, shared_client: ConnectClient, tmp_path: Path
    ) -> None:
        """The file_download source under Connect (the day's file downloaded by the run, read
        by the server from the staging folder): a re-run downloads it again and replaces the
        window in one commit, its rows once."""
        from test_file_download_source import day, download_pipeline, file_server, rows_of

        target = tmp_path / "delta" / "files"

        with file_server(day("2020-01-15T12:00")) as files:
            raw = download_pipeline(tmp_path, files.template())
            with connect_client(shared_client, tmp_path, [raw]) as client:

                def run() -> list[tuple[int, str]]:
                    client("files", "2020-01-15")
                    return [(i, f"{d:%Y%m%d}") for i, d in committed(target, "id", "file_date")]

                assert run() == rows_of("20200115")
                version = DeltaTable(str(target)).version()
                assert run() == rows_of("20200115"), "no duplicate"
        assert files.requests == ["/files/file20200115.csv"] * 2
        assert DeltaTable(str(target)).version() == version + 1

    def test_the_replay_command_runs_its_chunks_through_the_server(
        self, server: ConnectServer, tmp_path: Path
    ) -> None:
        """``watermark-assets replay PIPELINE`` with spark.remote: four chunks, each row of the
        range once; run again, every chunk is skipped and nothing is committed."""
        from test_column_replay import IN_RANGE, ids, replay_commits, replay_scene

        scene = replay_scene(tmp_path, save_watermark=True)
        target = str(tmp_path / "delta" / "orders_backfill")
        command = ["-m", "watermark_assets.cli", "replay", "orders"]

        first = through_connect(server, tmp_path, [scene.raw], *command)
        assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
        assert "orders: 4 chunks run, skipped none" in first.stdout
        assert ids(target) == IN_RANGE
        assert len(replay_commits(target)) == 4
        version = DeltaTable(target).version()

        again = through_connect(server, tmp_path, [scene.raw], *command)
        assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
        assert "orders: 0 chunks run, skipped [1, 2, 3, 4]" in again.stdout
        assert DeltaTable(target).version() == version  # no new commit
        assert ids(target) == IN_RANGE

    def test_a_jdbc_driver_the_server_lacks_fails_the_read_with_the_server_s_fix(
        self, server: ConnectServer, tmp_path: Path
    ) -> None:
        """A driver class not on the server's classpath (a name no jar holds: the same
        ClassNotFoundException as a server started without the PostgreSQL jar) fails the read
        at once with the fix that applies under Connect: the server's ``--jars``, not the
        client's ``spark.jars``."""
        script = (
            "import sys\n"
            "from watermark_assets.core.column import ColumnWatermark, GreaterThan, predicate\n"
            "from watermark_assets.exceptions import JdbcDriverMissingError\n"
            "from watermark_assets.sources.jdbc import JdbcSource\n"
            "from watermark_assets.spark.session import get_spark\n"
            "source = JdbcSource(name='orders', url='jdbc:postgresql://127.0.0.1:5432/postgres',\n"
            "    table='orders', watermark_columns=('id',), driver='org.example.NoSuchDriver')\n"
            "try:\n"
            "    source.read(get_spark(remote=sys.argv[1]),\n"
            "                predicate(ColumnWatermark.empty(), GreaterThan))\n"
            "except JdbcDriverMissingError as error:\n"
            "    print('ERROR', error)\n"
            "    sys.exit(3)\n"
        )
        done = through_connect(server, tmp_path, [], "-c", script, server.url)
        assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-3000:]
        message = done.stdout.split("ERROR ", 1)[1]
        assert "Spark cannot load the JDBC driver org.example.NoSuchDriver" in message
        assert "under Spark Connect that is the server's: start it with `--jars " in message
        assert "spark.conf" not in message
