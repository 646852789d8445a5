"""Column pipelines over PostgreSQL (``source.type: jdbc``) and an HTTP JSON API
(``source.type: http_api``), end to end through Dagster: configured in YAML, each run the
pipeline's job executed in process, the target a real Delta table on tmp_path.

Each: the first run reads every row, a change in the source, the second run reads only the
changed rows (and the target holds each source row's latest version once per change).
"""

from __future__ import annotations

import json
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import project_config
from dagster import DagsterInstance, ExecuteInProcessResult
from deltalake import DeltaTable

from watermark_assets.config import ColumnPipelineConfig, HttpApiSourceConfig, JdbcSourceConfig
from watermark_assets.defs import build_definitions
from watermark_assets.exceptions import ConfigError
from watermark_assets.sources.http_api import HttpApiSource, PageNumber
from watermark_assets.sources.jdbc import JdbcSource, postgres_jdbc_jar, with_postgres_driver

pytestmark = pytest.mark.spark

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"
BASE = datetime(2026, 4, 3, 9, 0, tzinfo=timezone.utc)
ROWS = 40


def run(config: Any, name: str) -> dict[str, Any]:
    """Materialize pipeline ``name`` once; its materialization metadata."""
    defs = build_definitions(config, clock=lambda: datetime.now(timezone.utc))
    result: ExecuteInProcessResult = defs.resolve_job_def(f"{name}_job").execute_in_process(
        instance=DagsterInstance.ephemeral()
    )
    (materialization,) = result.asset_materializations_for_node(name)
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {
        "watermark_never_moves_backwards": True,
        "rows_reconcile": True,
        "column_schema_change": True,
    }
    return {key: value.value for key, value in materialization.metadata.items()}


def target_ids(uri: str) -> list[int]:
    return sorted(DeltaTable(uri).to_pyarrow_table(columns=["id"]).column("id").to_pylist())


# --- PostgreSQL through Spark JDBC ---


@contextmanager
def orders_database() -> Iterator[str]:
    """A database of its own with a table ``orders`` of ROWS rows, dropped at the end."""
    name = f"wa_colpipe_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{PG_SERVER}/test", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(f"{PG_SERVER}/{name}", autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE orders (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, "
                "amount double precision)"
            )
            with conn.cursor().copy("COPY orders (id, updated_at, amount) FROM STDIN") as copy:
                for i in range(ROWS):
                    copy.write_row((i, BASE + timedelta(minutes=i // 4), float(i)))
        yield name
    finally:
        with psycopg.connect(f"{PG_SERVER}/test", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database() -> Iterator[str]:
    with orders_database() as name:
        yield name


def jdbc_pipeline(table_uri: str, database: str) -> dict[str, Any]:
    """Pipeline ``orders_pg``: the ``orders`` table of ``database``, its user in
    $WA_TEST_PG_USER, read in 2 partitions."""
    return {
        "name": "orders_pg",
        "source": {
            "type": "jdbc",
            "url": f"jdbc:postgresql://127.0.0.1:5432/{database}",
            "table": "orders",
            "schema": "public",
            "user_env": "WA_TEST_PG_USER",
            "num_partitions": 2,
            "fetchsize": 100,
        },
        "watermark": {"columns": ["updated_at", "id"]},
        "table": {"uri": table_uri},
    }


def update_three_orders(database: str) -> None:
    """Orders 3, 17 and 25 change: an hour later, their amount negated."""
    with psycopg.connect(f"{PG_SERVER}/{database}", autocommit=True) as conn:
        conn.execute(
            "UPDATE orders SET updated_at = %s, amount = -amount WHERE id IN (3, 17, 25)",
            (BASE + timedelta(hours=1),),
        )


@pytest.mark.skipif(
    postgres_jdbc_jar() is None,
    reason="the PostgreSQL JDBC driver /usr/share/java/postgresql.jar is missing: run `make jdbc`",
)
def test_a_jdbc_pipeline_reads_everything_then_only_the_rows_changed_in_postgres(
    spark: Any, tmp_path: Path, database: str
) -> None:
    table_uri = str(tmp_path / "delta" / "orders_pg")
    config = project_config(jdbc_pipeline(table_uri, database))
    pipeline = config.pipeline("orders_pg")
    assert isinstance(pipeline, ColumnPipelineConfig)
    assert isinstance(pipeline.source, JdbcSourceConfig)
    assert pipeline.source.location.endswith(f"/{database} public.orders")

    with pytest.MonkeyPatch.context() as env:
        env.setenv("WA_TEST_PG_USER", "postgres")
        first = run(config, "orders_pg")
        assert first["rows/read"] == ROWS
        assert first["read/pushed_down"] == "TRUE"
        assert first["watermark/after"] == "updated_at=2026-04-03T09:09:00Z, id=39"

        update_three_orders(database)
        second = run(config, "orders_pg")

    assert second["rows/read"] == 3
    assert second["rows/committed"] == 3
    assert second["watermark/before"] == first["watermark/after"]
    assert second["watermark/after"] == "updated_at=2026-04-03T10:00:00Z, id=25"
    # The predicate reached the database as a WHERE clause, from the boundary value on: its 4
    # rows committed by the first run (ids 36-39) were dropped by their hashes.
    assert second["read/pushed_down"] == "\"updated_at\" >= TIMESTAMPTZ '2026-04-03 09:09:00+00:00'"
    assert second["rows/boundary_reread"] == 4
    assert "WHERE" in second["read/details"]["dbtable"]
    assert target_ids(table_uri) == sorted([*range(ROWS), 3, 17, 25])


def test_the_jdbc_driver_jar_is_added_unless_a_driver_is_configured() -> None:
    jar = "/opt/jars/postgresql-42.7.4.jar"
    assert with_postgres_driver({}, jar) == {"spark.jars": jar}
    assert with_postgres_driver({"spark.jars": "/x/a.jar"}, jar) == {
        "spark.jars": f"/x/a.jar,{jar}"
    }
    maven = {"spark.jars.packages": "org.postgresql:postgresql:42.7.4"}
    assert with_postgres_driver(maven, jar) == maven
    configured = {"spark.jars": "/usr/local/lib/postgresql-42.5.jar"}
    assert with_postgres_driver(configured, jar) == configured


def test_a_jdbc_source_is_built_from_its_configuration() -> None:
    config = project_config(
        {
            "name": "customers",
            "source": {
                "type": "jdbc",
                "url": "jdbc:postgresql://db:5432/crm?user=etl&password=secret",
                "query": "SELECT * FROM customers WHERE NOT deleted",
                "password_env": "CRM_PASSWORD",
                "num_partitions": 4,
            },
            "watermark": {"columns": ["updated_at"]},
            "table": {"uri": "/tmp/customers"},
        }
    )
    pipeline = config.pipeline("customers")
    assert isinstance(pipeline, ColumnPipelineConfig)
    source = pipeline.source.build("customers", pipeline.watermark.columns)
    assert isinstance(source, JdbcSource)
    assert source.watermark_columns == ("updated_at",)
    assert source.num_partitions == 4
    assert source.password_env == "CRM_PASSWORD"
    assert source.relation() == "(SELECT * FROM customers WHERE NOT deleted) AS q"
    assert pipeline.source.location == "jdbc:postgresql://db:5432/crm?user=etl&password=*** (query)"


@pytest.mark.parametrize(
    ("source", "named"),
    [
        pytest.param(
            {"type": "jdbc", "url": "jdbc:postgresql://db/x"},
            ["source.table and source.query: neither given", "table: orders"],
            id="jdbc without table or query",
        ),
        pytest.param(
            {"type": "jdbc", "url": "jdbc:postgresql://db/x", "table": "a", "query": "SELECT 1"},
            ["both given", "set exactly one"],
            id="jdbc with table and query",
        ),
        pytest.param(
            {"type": "jdbc", "url": "postgresql://db/x", "table": "a"},
            ["source.url", "'postgresql://db/x'", "jdbc:postgresql://HOST:PORT/DATABASE"],
            id="jdbc with a libpq URL",
        ),
        pytest.param(
            {"type": "jdbc", "url": "jdbc:postgresql://db/x", "table": "a", "num_partitions": 0},
            ["source.num_partitions", "(got 0)"],
            id="jdbc with zero partitions",
        ),
        pytest.param(
            {
                "type": "http_api",
                "url": "http://api/orders",
                "schema": "id BIGINT",
                "watermark_param_location": "body",
            },
            ["watermark_param_location is 'body'", "method: POST"],
            id="http body in a GET",
        ),
        pytest.param(
            {
                "type": "http_api",
                "url": "http://api/orders",
                "schema": "id BIGINT",
                "watermark_param_format": "unix",
            },
            ["source.watermark_param_format", "'unix'", "strftime pattern"],
            id="http unknown format",
        ),
        pytest.param(
            {
                "type": "http_api",
                "url": "http://api/orders",
                "schema": "id BIGINT",
                "watermark_param_mapping": {"created_at": "since"},
            },
            ["watermark_param_mapping", "['created_at']", "['updated_at']"],
            id="http mapping of a column that is not a watermark column",
        ),
        pytest.param(
            {
                "type": "http_api",
                "url": "http://api/orders",
                "schema": "id BIGINT",
                "pagination": {"type": "page_number", "page_size": 0},
            },
            ["source.pagination.page_size:", "(got 0)"],
            id="http zero page size",
        ),
        pytest.param(
            {"type": "http_api", "url": "http://api/orders", "schema": "id BIGINT,"},
            ["source.schema"],
            id="http schema that is not Spark DDL",
        ),
    ],
)
def test_a_bad_jdbc_or_http_source_names_pipeline_key_value_and_fix(
    source: dict[str, Any], named: list[str]
) -> None:
    with pytest.raises(ConfigError) as caught:
        project_config(
            {
                "name": "orders",
                "source": source,
                "watermark": {"columns": ["updated_at"]},
                "table": {"uri": "/tmp/orders"},
            }
        )
    message = str(caught.value)
    assert "pipeline 'orders'" in message
    for part in named:
        assert part in message, message


# --- an HTTP JSON API ---


class OrdersApi(BaseHTTPRequestHandler):
    """``GET /orders?updated_since=ISO&page=N&per_page=M``: the orders with ``updated_at >=
    updated_since`` (the API's own, coarser filter), by id, one page at a time."""

    records: list[dict[str, Any]]
    requests: list[dict[str, str]]

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        self.requests.append(query)
        rows = self.records
        if "updated_since" in query:
            since = datetime.fromisoformat(query["updated_since"])
            rows = [  # a record without updated_at is never above it
                r
                for r in rows
                if r["updated_at"] is not None and datetime.fromisoformat(r["updated_at"]) >= since
            ]
        size = int(query.get("per_page", 10))
        number = int(query.get("page", 1))
        payload = json.dumps({"data": rows[(number - 1) * size : number * size]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@contextmanager
def orders_api_server() -> Iterator[tuple[str, type[OrdersApi]]]:
    """An :class:`OrdersApi` of 25 orders on loopback: its URL and its handler class (whose
    ``records`` a test changes, whose ``requests`` it reads)."""
    records = [
        {"id": i, "updated_at": (BASE + timedelta(minutes=i // 5)).isoformat(), "amount": i}
        for i in range(25)
    ]
    handler = type("Orders", (OrdersApi,), {"records": records, "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/orders", handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def orders_api() -> Iterator[tuple[str, type[OrdersApi]]]:
    with orders_api_server() as served:
        yield served


def http_source(url: str, page_size: int) -> dict[str, Any]:
    """An ``http_api`` source of orders at ``url``: ``page_size`` records a page, the watermark
    sent as ``updated_since``."""
    return {
        "type": "http_api",
        "url": url,
        "schema": "id BIGINT, updated_at TIMESTAMP, amount DOUBLE",
        "watermark_param_mapping": {"updated_at": "updated_since"},
        "watermark_param_format": "iso",
        "pagination": {
            "type": "page_number",
            "param": "page",
            "size_param": "per_page",
            "page_size": page_size,
        },
        "records_path": "data",
    }


def http_pipeline(table_uri: str, url: str) -> dict[str, Any]:
    """Pipeline ``orders_api``: the API at ``url``, 10 records a page, the watermark sent as
    ``updated_since``."""
    return {
        "name": "orders_api",
        "source": http_source(url, 10),
        "watermark": {"columns": ["updated_at", "id"]},
        "table": {"uri": table_uri},
    }


def change_two_records(api: type[OrdersApi]) -> None:
    """Records 2 and 11 change: an hour later."""
    for record in api.records:
        if record["id"] in (2, 11):
            record["updated_at"] = (BASE + timedelta(hours=1)).isoformat()


def test_an_http_api_pipeline_reads_everything_then_only_the_changed_records(
    spark: Any, tmp_path: Path, orders_api: tuple[str, type[OrdersApi]]
) -> None:
    url, api = orders_api
    table_uri = str(tmp_path / "delta" / "orders_api")
    config = project_config(http_pipeline(table_uri, url))
    pipeline = config.pipeline("orders_api")
    assert isinstance(pipeline, ColumnPipelineConfig)
    assert isinstance(pipeline.source, HttpApiSourceConfig)
    assert pipeline.source.location == f"GET {url}"
    built = pipeline.source.build("orders_api", pipeline.watermark.columns)
    assert isinstance(built, HttpApiSource)
    assert built.pagination == PageNumber(param="page", size_param="per_page", page_size=10)

    first = run(config, "orders_api")
    assert first["rows/read"] == 25
    assert first["read/pushed_down"] == "query: (no parameter)"
    assert first["watermark/after"] == "updated_at=2026-04-03T09:04:00Z, id=24"
    assert [r.get("page") for r in api.requests] == ["1", "2", "3"]

    api.requests.clear()
    change_two_records(api)
    second = run(config, "orders_api")

    assert second["rows/read"] == 2
    assert second["rows/committed"] == 2
    assert second["watermark/before"] == first["watermark/after"]
    assert second["watermark/after"] == "updated_at=2026-04-03T10:00:00Z, id=11"
    # The watermark went into the request; the API sent 7 records (>= is its filter), the exact
    # predicate kept the 2 above the watermark.
    assert second["read/pushed_down"] == "query: updated_since=2026-04-03T09:04:00+00:00"
    assert api.requests == [
        {"updated_since": "2026-04-03T09:04:00+00:00", "page": "1", "per_page": "10"}
    ]
    assert second["read/details"]["records_received"] == 7
    assert target_ids(table_uri) == sorted([*range(25), 2, 11])
