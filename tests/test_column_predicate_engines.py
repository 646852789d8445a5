"""The rendered predicates, run by the real engines: PostgreSQL executes ``to_sql``, deltalake
and pyarrow apply ``to_dnf``. Each must select exactly the rows the tuple comparison selects.
(Spark SQL text is covered in tests/core/test_column_predicate.py; Spark is not started here.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from watermark_assets.core.column.predicate import SqlDialect, predicate, to_dnf, to_sql
from watermark_assets.core.column.watermark import (
    ColumnWatermark,
    GreaterOrEqual,
    GreaterThan,
    WatermarkOperator,
)

UTC = timezone.utc
T0 = datetime(2026, 4, 3, 9, 15, tzinfo=UTC)
# Many rows share one timestamp: the case the tuple order exists for.
ROWS = [
    {"updated at": T0 + timedelta(seconds=s), 'id"x': i, "name": f"it's {s}/{i}"}
    for s in range(3)
    for i in range(4)
]
CASES = [
    pytest.param(
        ColumnWatermark.of({"updated at": T0 + timedelta(seconds=1), 'id"x': 2}),
        op,
        id=f"resume inside a shared timestamp with {op.value}",
    )
    for op in (GreaterThan, GreaterOrEqual)
] + [
    pytest.param(
        ColumnWatermark.of({"updated at": T0 + timedelta(seconds=2)}),
        GreaterThan,
        id="one column, last timestamp",
    ),
    pytest.param(ColumnWatermark.of({"name": "it's 1/3"}), GreaterThan, id="a string with a quote"),
    pytest.param(
        ColumnWatermark.empty(["updated at", 'id"x']), GreaterThan, id="empty: everything"
    ),
]


def expected(watermark: ColumnWatermark, operator: WatermarkOperator) -> list[str]:
    return sorted(r["name"] for r in ROWS if watermark.admits(r, operator))


@pytest.fixture(scope="module")
def pg_table() -> Iterator[tuple[psycopg.Connection[Any], str]]:
    table = f"wa_pred_{uuid.uuid4().hex[:8]}"
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", autocommit=True) as conn:
        conn.execute(
            f'CREATE TABLE "{table}" ("updated at" timestamptz, "id""x" bigint, name text)'
        )
        with conn.cursor() as cur:
            cur.executemany(
                f'INSERT INTO "{table}" VALUES (%s, %s, %s)',
                [(r["updated at"], r['id"x'], r["name"]) for r in ROWS],
            )
        try:
            yield conn, table
        finally:
            conn.execute(f'DROP TABLE "{table}"')


@pytest.mark.parametrize(("watermark", "operator"), CASES)
def test_postgres_runs_the_sql(
    pg_table: tuple[psycopg.Connection[Any], str],
    watermark: ColumnWatermark,
    operator: WatermarkOperator,
) -> None:
    conn, table = pg_table
    where = to_sql(predicate(watermark, operator), SqlDialect.POSTGRES)
    got = sorted(r[0] for r in conn.execute(f'SELECT name FROM "{table}" WHERE {where}'))  # type: ignore[call-overload]
    assert got == expected(watermark, operator)


@pytest.fixture(scope="module")
def arrow_rows() -> pa.Table:
    return pa.table(
        {
            "updated at": pa.array([r["updated at"] for r in ROWS], pa.timestamp("us", tz="UTC")),
            'id"x': pa.array([r['id"x'] for r in ROWS], pa.int64()),
            "name": pa.array([r["name"] for r in ROWS]),
        }
    )


@pytest.mark.parametrize(("watermark", "operator"), CASES)
def test_deltalake_applies_the_dnf(
    tmp_path: Path, arrow_rows: pa.Table, watermark: ColumnWatermark, operator: WatermarkOperator
) -> None:
    write_deltalake(str(tmp_path / "t"), arrow_rows)
    filters = to_dnf(predicate(watermark, operator))
    got = DeltaTable(str(tmp_path / "t")).to_pyarrow_table(filters=filters)
    assert sorted(got.column("name").to_pylist()) == expected(watermark, operator)


@pytest.mark.parametrize(("watermark", "operator"), CASES)
def test_parquet_applies_the_dnf(
    tmp_path: Path, arrow_rows: pa.Table, watermark: ColumnWatermark, operator: WatermarkOperator
) -> None:
    pq.write_table(arrow_rows, tmp_path / "t.parquet")
    got = pq.read_table(tmp_path / "t.parquet", filters=to_dnf(predicate(watermark, operator)))
    assert sorted(got.column("name").to_pylist()) == expected(watermark, operator)
