"""Exactly-once for column pipelines over PostgreSQL (``jdbc``) and an HTTP JSON API (``http_api``).

Each case, on a real source and a real Delta table on tmp_path:

1. a first run (in process) commits the source's FIRST rows;
2. the KILLED rows arrive, and a run in a subprocess is SIGKILLed at a crash point of
   ``watermark_assets.runs.column``: ``after_data_written`` (Spark staged the rows, nothing
   committed) or ``after_commit`` (the Delta commit exists, a ``postgres`` provider is not saved
   yet; ``delta_metadata`` saved the watermark in that commit);
3. the LATER rows arrive, the pipeline runs again: every source row is in the table exactly once
   (the whole multiset of rows compared), and one more run adds nothing.

The ``postgres`` provider killed after the commit is the interesting one: its stored watermark
stays behind the table, and the re-run must take the watermark from the Delta log (and say so in
``watermark/repaired_from_log``) instead of reading the committed rows again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

import psycopg
import pytest
import yaml
from conftest import TEST_SPARK_CONF, new_pg_database, project_config
from deltalake import DeltaTable
from test_column_pipeline_sources import PG_SERVER, OrdersApi, http_source, run

from watermark_assets.config import ColumnPipelineConfig, ProjectConfig
from watermark_assets.core.column import ColumnWatermark
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.providers.delta_metadata import DeltaMetadataProvider
from watermark_assets.runs.faults import CRASH_ENV_VAR
from watermark_assets.sources.jdbc import postgres_jdbc_jar
from watermark_assets.staging import STAGING_DIR
from watermark_assets.vocabulary import column_watermark_text

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
BASE = datetime(2026, 4, 3, 9, 0, tzinfo=timezone.utc)
NAME = "orders"

#: (id, updated_at, amount): one source row, as the Delta table must hold it.
Row = tuple[int, datetime, float]


def rows(ids: range, *, first_minute: int) -> list[Row]:
    """Rows ``ids``, three per minute from ``first_minute`` (ties on updated_at, ordered by id)."""
    return [
        (i, BASE + timedelta(minutes=first_minute + (i - ids.start) // 3), i + 0.5) for i in ids
    ]


FIRST = rows(range(0, 9), first_minute=0)  # up to (09:02, 8)
# Id 9 shares 09:02 with the watermark's id 8: the read must resume on the id, not the time.
KILLED = rows(range(9, 15), first_minute=2)
LATER = rows(range(15, 19), first_minute=10)


def watermark_of(row: Row) -> ColumnWatermark:
    return ColumnWatermark.of({"updated_at": row[1], "id": row[0]})


class Source(Protocol):
    """A source the test adds rows to (never changes one), and its pipeline configuration."""

    rows: list[Row]

    def put(self, new: list[Row]) -> None: ...

    def config(self) -> dict[str, Any]: ...


class PostgresOrders:
    """``public.orders`` in the test's database, read through Spark JDBC (two partitions)."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.rows: list[Row] = []
        with psycopg.connect(f"{PG_SERVER}/{database}", autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE orders (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, "
                "amount double precision)"
            )

    def put(self, new: list[Row]) -> None:
        with psycopg.connect(f"{PG_SERVER}/{self.database}", autocommit=True) as conn:
            conn.cursor().executemany(
                "INSERT INTO orders (id, updated_at, amount) VALUES (%s, %s, %s)", new
            )
        self.rows += new

    def config(self) -> dict[str, Any]:
        return {
            "type": "jdbc",
            "url": f"jdbc:postgresql://127.0.0.1:5432/{self.database}?user=postgres",
            "table": "orders",
            "schema": "public",
            "num_partitions": 2,
        }


class ApiOrders:
    """The paged JSON API of ``test_column_pipeline_sources`` (``updated_at >= updated_since``,
    ``page`` / ``per_page``), four records a page so that every read spans pages."""

    def __init__(self, url: str, api: type[OrdersApi]) -> None:
        self.url = url
        self.api = api
        self.rows: list[Row] = []

    def put(self, new: list[Row]) -> None:
        self.api.records += [
            {"id": i, "updated_at": at.isoformat(), "amount": amount} for i, at, amount in new
        ]
        self.rows += new

    def config(self) -> dict[str, Any]:
        return http_source(self.url, 4)


@pytest.fixture
def database() -> Iterator[str]:
    """A database of its own (the jdbc source's table, the postgres provider's), dropped after."""
    with new_pg_database("wa_kill") as name:
        yield name


@pytest.fixture
def orders_api() -> Iterator[tuple[str, type[OrdersApi]]]:
    """The orders API on a free loopback port, with no record yet."""
    handler = type("Orders", (OrdersApi,), {"records": [], "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/orders", handler
    finally:
        server.shutdown()
        server.server_close()


class Scene:
    """The pipeline ``orders`` over ``source`` with ``provider``: in process, and as the YAML
    file a subprocess loads."""

    def __init__(self, tmp_path: Path, source: Source, provider: str, database: str) -> None:
        chosen: dict[str, Any] = {"type": provider}
        if provider == "postgres":
            chosen["conninfo"] = f"{PG_SERVER}/{database}"
        raw = {
            "name": NAME,
            "source": source.config(),
            "watermark": {"columns": ["updated_at", "id"], "provider": chosen},
            "table": {"uri": str(tmp_path / "delta" / NAME)},
        }
        self.source = source
        self.config: ProjectConfig = project_config(raw)
        pipeline = self.config.pipeline(NAME)
        assert isinstance(pipeline, ColumnPipelineConfig)
        self.pipeline = pipeline
        self.table = pipeline.table.uri
        self.config_path = tmp_path / "pipelines.yaml"
        document = {"spark": {"master": "local[1]", "conf": TEST_SPARK_CONF}, "pipelines": [raw]}
        self.config_path.write_text(yaml.safe_dump(document), encoding="utf-8")

    def run(self) -> dict[str, Any]:
        """One run in process (the test session's Spark); its materialization metadata."""
        return run(self.config, NAME)

    def run_killed_at(self, crash_at: str) -> subprocess.CompletedProcess[str]:
        """One run in a subprocess (its own JVM) that ``crash_point(crash_at)`` SIGKILLs."""
        env = {
            **os.environ,
            "WATERMARK_ASSETS_CONFIG": str(self.config_path),
            CRASH_ENV_VAR: crash_at,
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)]),
        }
        return subprocess.run(
            [sys.executable, str(TESTS / "_crash_run.py"), NAME, "-"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def stored_watermark(self) -> ColumnWatermark | None:
        """What the configured provider holds (``delta_metadata``: the log's latest)."""
        provider = self.pipeline.watermark.provider.build(self.table)
        text = provider.get_watermark(self.pipeline.dataflow_id)
        return None if text is None else ColumnWatermark.from_json(text)

    def logged_watermark(self) -> ColumnWatermark | None:
        """The watermark the Delta log's latest commit carries (whatever the provider)."""
        text = DeltaMetadataProvider(self.table).get_watermark(self.pipeline.dataflow_id)
        return None if text is None else ColumnWatermark.from_json(text)

    def target_rows(self) -> list[Row]:
        table = DeltaTable(self.table).to_pyarrow_table(columns=["id", "updated_at", "amount"])
        return sorted((r["id"], r["updated_at"], r["amount"]) for r in table.to_pylist())

    def assert_each_source_row_once(self) -> None:
        assert self.target_rows() == sorted(self.source.rows)

    def staged_files(self) -> list[Path]:
        return sorted(Path(self.table, STAGING_DIR).glob("*/**/*.parquet"))


needs_jdbc = pytest.mark.skipif(
    postgres_jdbc_jar() is None,
    reason="the PostgreSQL JDBC driver /usr/share/java/postgresql.jar is missing: run `make jdbc`",
)


#: Two kills, one per source and per crash point; the other combinations meet the same code
#: after the source has been read (tests/test_column_pipeline.py kills a Delta-sourced run at both
#: points, with the delta_metadata and the file providers). Each kill costs a whole process and a
#: JVM, so the suite keeps the cases that add a path: the PostgreSQL provider repaired from the log,
#: and an API's pages staged, then lost.
@pytest.mark.parametrize(
    ("source_type", "provider", "crash_at"),
    [
        pytest.param(
            "jdbc",
            "postgres",
            "after_commit",
            id="jdbc, killed after the commit, before the postgres save",
            marks=needs_jdbc,
        ),
        pytest.param(
            "http_api",
            "delta_metadata",
            "after_data_written",
            id="http_api, killed after Spark staged the rows (delta_metadata)",
        ),
    ],
)
def test_a_run_killed_mid_way_and_re_run_commits_each_source_row_exactly_once(
    spark: Any,
    tmp_path: Path,
    database: str,
    orders_api: tuple[str, type[OrdersApi]],
    source_type: str,
    provider: str,
    crash_at: str,
) -> None:
    source: Source = PostgresOrders(database) if source_type == "jdbc" else ApiOrders(*orders_api)
    scene = Scene(tmp_path, source, provider, database)
    source.put(FIRST)
    first = scene.run()
    assert first["rows/read"] == len(FIRST)
    assert first["watermark/provider"] == provider
    assert scene.stored_watermark() == watermark_of(FIRST[-1])

    source.put(KILLED)
    killed = scene.run_killed_at(crash_at)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]

    # What the killed run left: its commit (or none), and the provider's watermark.
    committed = crash_at == "after_commit"
    assert DeltaCommitter(scene.table).current_version() == (1 if committed else 0)
    assert scene.target_rows() == sorted(FIRST + KILLED if committed else FIRST)
    saved_with_commit = committed and provider == "delta_metadata"
    assert scene.stored_watermark() == watermark_of((KILLED if saved_with_commit else FIRST)[-1])
    assert scene.logged_watermark() == watermark_of((KILLED if committed else FIRST)[-1])
    if not committed:
        assert scene.staged_files(), "killed after Spark wrote the rows to staging"

    source.put(LATER)
    rerun = scene.run()
    assert rerun["rows/read"] == len(LATER) + (0 if committed else len(KILLED))
    assert rerun["watermark/repaired_from_log"] is (committed and provider == "postgres")
    before = watermark_of((KILLED if committed else FIRST)[-1])
    assert rerun["watermark/before"] == column_watermark_text(before)
    scene.assert_each_source_row_once()
    assert scene.stored_watermark() == watermark_of(LATER[-1])

    again = scene.run()
    assert again["rows/read"] == 0
    assert again["delta/version"].startswith("no new commit")
    scene.assert_each_source_row_once()
