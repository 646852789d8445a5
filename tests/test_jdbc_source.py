"""JdbcSource against real PostgreSQL (127.0.0.1:5432) through Spark JDBC with Debian's driver.

Proof that the WHERE clause reaches the server: the test holds an ACCESS EXCLUSIVE lock on the
table while Spark reads, so Spark's statement waits in the server; ``pg_stat_activity`` then shows
the text the server is executing (``wait_event_type = 'Lock'``). No server log, no extension, no
file access: only SQL as the trust-auth superuser.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest

from watermark_assets.core.column import (
    ColumnWatermark,
    GreaterOrEqual,
    GreaterThan,
    SqlDialect,
    WatermarkOperator,
    predicate,
    to_sql,
)
from watermark_assets.exceptions import ConfigError, JdbcDriverMissingError
from watermark_assets.sources.column import stage_rows
from watermark_assets.sources.jdbc import JdbcSource, postgres_jdbc_jar

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"
BASE = datetime(2026, 4, 3, 9, 15, tzinfo=timezone.utc)
ROWS = 1000
SAME_STAMP = 250  # rows per timestamp: 4 timestamps for 1,000 rows

pytestmark = pytest.mark.skipif(
    postgres_jdbc_jar() is None,
    reason="the PostgreSQL JDBC driver /usr/share/java/postgresql.jar is missing: run `make jdbc` "
    "(apt-get install libpostgresql-jdbc-java, as root)",
)


def stamp(i: int) -> datetime:
    return BASE + timedelta(seconds=i // SAME_STAMP)


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """A database of its own for this test session with the tables, dropped at the end."""
    name = f"wa_jdbc_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{PG_SERVER}/test", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(f"{PG_SERVER}/{name}", autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE orders (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, "
                "name text)"
            )
            with conn.cursor().copy("COPY orders (id, updated_at, name) FROM STDIN") as copy:
                for i in range(ROWS):
                    copy.write_row((i, stamp(i), f"order {i}"))
            conn.execute(
                # COLLATE "C": the server orders strings like the watermark (code points).
                'CREATE TABLE "odd ""table"" name" ("it\'s id" bigint, "the key" text COLLATE "C")'
            )
            conn.execute(
                'INSERT INTO "odd ""table"" name" VALUES '
                "(1, 'a'), (2, 'O''Brien'), (3, 'O''Brien''s'), (4, 'z \"q\"')"
            )
        yield name
    finally:
        with psycopg.connect(f"{PG_SERVER}/test", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def orders(database: str, **overrides: Any) -> JdbcSource:
    options: dict[str, Any] = {
        "name": "orders",
        "url": f"jdbc:postgresql://127.0.0.1:5432/{database}",
        "table": "orders",
        "schema": "public",
        "watermark_columns": ("updated_at", "id"),
        "user_env": "WA_PG_USER",
        "env": {"WA_PG_USER": "postgres"},
        "fetchsize": 500,
        **overrides,
    }
    return JdbcSource(**options)


def ids(frame: Any, column: str = "id") -> list[int]:
    return sorted(int(row[column]) for row in frame.select(column).collect())


def statements_while_locked(
    database: str, table: str, action: Callable[[], object], *, waiting: int = 1
) -> list[str]:
    """Run ``action`` while ``table`` is locked; return the statements that waited for the lock
    (what the server was executing for Spark), once ``waiting`` of them are seen."""
    conninfo = f"{PG_SERVER}/{database}"
    errors: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:  # re-raised in the test thread
            errors.append(exc)

    seen: set[str] = set()
    with psycopg.connect(conninfo) as locker, psycopg.connect(conninfo, autocommit=True) as watch:
        locker.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        worker = threading.Thread(target=run)
        worker.start()
        deadline = time.monotonic() + 120
        while len(seen) < waiting and time.monotonic() < deadline and worker.is_alive():
            rows = watch.execute(
                "SELECT query FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            ).fetchall()
            seen.update(row[0] for row in rows)
            time.sleep(0.05)
        locker.rollback()  # releases the lock: Spark's statements run now
        worker.join(120)
    if errors:
        raise errors[0]
    assert len(seen) >= waiting, f"expected {waiting} statement(s) waiting, saw {sorted(seen)}"
    return sorted(seen)


WATERMARK = ColumnWatermark.of({"updated_at": stamp(400), "id": 400})


def test_rows_above_the_watermark_exactly_and_the_where_ran_in_the_server(
    spark: Any, database: str
) -> None:
    source = orders(database, watermark_columns=("id",))
    pred = predicate(ColumnWatermark.of({"id": 990}), GreaterThan)
    read = source.read(spark, pred)
    collected: list[Any] = []
    statements = statements_while_locked(
        database, "orders", lambda: collected.extend(read.frame.collect())
    )
    assert sorted(int(r["id"]) for r in collected) == list(range(991, ROWS))
    assert read.pushed_down == '"id" > 990'
    [statement] = statements
    assert 'FROM (SELECT * FROM "public"."orders" WHERE "id" > 990) AS src' in statement


def test_replay_operator_includes_the_bound_row(spark: Any, database: str) -> None:
    source = orders(database, watermark_columns=("id",))
    read = source.read(spark, predicate(ColumnWatermark.of({"id": 990}), GreaterOrEqual))
    assert ids(read.frame) == list(range(990, ROWS))
    assert read.pushed_down == '"id" >= 990'


@pytest.mark.parametrize(
    ("operator", "first"),
    [
        pytest.param(GreaterThan, 401, id="normal run resumes after the last id of the timestamp"),
        pytest.param(GreaterOrEqual, 400, id="replay chunk includes the bound row"),
    ],
)
def test_tuple_watermark_resumes_exactly_among_rows_sharing_a_timestamp(
    spark: Any, database: str, operator: WatermarkOperator, first: int
) -> None:
    read = orders(database).read(spark, predicate(WATERMARK, operator))
    assert ids(read.frame) == list(range(first, ROWS))  # 250 rows share stamp(400)
    assert read.pushed_down == to_sql(predicate(WATERMARK, operator), SqlDialect.POSTGRES)
    assert '("updated_at" = TIMESTAMPTZ' in read.pushed_down


def test_the_tuple_predicate_reaches_the_server_verbatim(spark: Any, database: str) -> None:
    source = orders(database)
    pred = predicate(WATERMARK, GreaterThan)
    read = source.read(spark, pred)
    [statement] = statements_while_locked(database, "orders", lambda: read.frame.count())
    assert f"WHERE {to_sql(pred, SqlDialect.POSTGRES)}) AS src" in statement


def test_empty_watermark_reads_every_row(spark: Any, database: str) -> None:
    read = orders(database).read(spark, predicate(ColumnWatermark.empty(), GreaterThan))
    assert read.pushed_down == "TRUE"
    assert ids(read.frame) == list(range(ROWS))


def test_parallel_read_has_n_partitions_and_every_row_once(spark: Any, database: str) -> None:
    source = orders(database, watermark_columns=("id",), num_partitions=4)
    read = source.read(spark, predicate(ColumnWatermark.of({"id": 99}), GreaterThan))
    assert read.frame.rdd.getNumPartitions() == 4
    assert read.details["num_partitions"] == 4
    assert read.details["partitioning"] == {
        "partitionColumn": "id",
        "lowerBound": "100",
        "upperBound": "999",
    }
    collected: list[Any] = []
    # local[2]: two partitions' statements run (and wait) at once, each with our WHERE.
    statements = statements_while_locked(
        database, "orders", lambda: collected.extend(read.frame.collect()), waiting=2
    )
    assert sorted(int(r["id"]) for r in collected) == list(range(100, ROWS))
    for statement in statements:
        assert 'WHERE "id" > 99) AS src' in statement
        assert '"id"' in statement.split("AS src", 1)[1]  # Spark's stride clause on top


def test_parallel_read_on_a_timestamp_column_reads_every_row_once(
    spark: Any, database: str
) -> None:
    source = orders(database, num_partitions=3)
    read = source.read(spark, predicate(WATERMARK, GreaterThan))
    assert read.frame.rdd.getNumPartitions() == 3
    assert ids(read.frame) == list(range(401, ROWS))


def test_parallel_read_of_nothing_is_one_partition(spark: Any, database: str) -> None:
    source = orders(database, watermark_columns=("id",), num_partitions=4)
    read = source.read(spark, predicate(ColumnWatermark.of({"id": ROWS}), GreaterThan))
    assert read.details["partitioning"] == {"reason": "no row to read; one partition"}
    assert read.frame.count() == 0


def test_quotes_in_identifiers_and_string_values(spark: Any, database: str) -> None:
    source = JdbcSource(
        name="odd",
        url=f"jdbc:postgresql://127.0.0.1:5432/{database}?user=postgres",
        table='odd "table" name',
        watermark_columns=("the key", "it's id"),
        num_partitions=2,
    )
    watermark = ColumnWatermark.of({"the key": "O'Brien", "it's id": 2})
    read = source.read(spark, predicate(watermark, GreaterThan))
    rows = sorted((r["the key"], r["it's id"]) for r in read.frame.collect())
    # Code-point order, in the server (COLLATE "C") as in the watermark: "O'Brien" < "a".
    assert rows == [("O'Brien's", 3), ("a", 1), ('z "q"', 4)]
    assert rows == sorted(r for r in rows if (r[0], r[1]) > ("O'Brien", 2))
    assert read.details["partitioning"] == {
        "reason": "column 'the key' is string, not numeric, date or timestamp; read as one "
        "partition"
    }
    assert "\"the key\" = 'O''Brien'" in read.pushed_down


def test_a_query_source_is_filtered_around_the_query(spark: Any, database: str) -> None:
    source = orders(
        database,
        table=None,
        schema=None,
        query="SELECT id, updated_at FROM orders WHERE name LIKE 'order 9%'",
        watermark_columns=("id",),
    )
    read = source.read(spark, predicate(ColumnWatermark.of({"id": 989}), GreaterThan))
    assert ids(read.frame) == list(range(990, ROWS))


def test_staged_read_observes_the_next_watermark(spark: Any, database: str, tmp_path: Path) -> None:
    read = orders(database, num_partitions=2).read(spark, predicate(WATERMARK, GreaterThan))
    staged = stage_rows(
        read, columns=("updated_at", "id"), start=WATERMARK, data_dir=str(tmp_path / "stage")
    )
    assert staged.rows == ROWS - 401
    assert staged.next_watermark == ColumnWatermark.of({"updated_at": stamp(999), "id": 999})


def test_a_missing_credential_variable_is_named(spark: Any, database: str) -> None:
    source = orders(database, password_env="WA_PG_PASSWORD")
    with pytest.raises(ConfigError, match="WA_PG_PASSWORD"):
        source.read(spark, predicate(WATERMARK, GreaterThan))


def test_table_and_query_are_exclusive() -> None:
    with pytest.raises(ConfigError, match="exactly one of 'table' and 'query'"):
        JdbcSource(name="x", url="jdbc:postgresql://h/d", watermark_columns=("id",))


def test_a_driver_spark_cannot_load_says_how_to_add_the_jar(spark: Any, database: str) -> None:
    source = orders(
        database,
        url=f"jdbc:postgresql://127.0.0.1:5432/{database}?user=postgres&password=s3cret",
        driver="org.example.NoSuchDriver",
    )
    with pytest.raises(JdbcDriverMissingError, match=r"spark\.jars") as caught:
        source.read(spark, predicate(WATERMARK, GreaterThan))
    assert "org.postgresql:postgresql:42" in str(caught.value)
    assert "s3cret" not in str(caught.value)
