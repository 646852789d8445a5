"""Rows at the watermark's boundary value, for every column source type (issue 22, item 3).

One shared suite, one fixture per source type (a Delta table, a Parquet, CSV and JSON folder,
PostgreSQL through JDBC, a paged HTTP API), each run the pipeline's Dagster job in process, the
target a real Delta table on tmp_path:

- single column ``updated_at`` (``>``): rows inserted later at exactly the committed value arrive;
- tuple ``(updated_at, id)``: a row inserted later at the watermark's ``updated_at`` with a
  smaller id, and an update at that same ``updated_at``, arrive;
- and neither is committed twice: the run after them reads nothing new and commits nothing.

Then the tuple watermark with a look-back, a lag or ``replace_by_watermark`` on PostgreSQL and
the HTTP source (the look-back bound is on the leading column only), and the bound of the hashes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Protocol

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import new_pg_database, project_config
from deltalake import DeltaTable, write_deltalake
from test_column_exactly_once_sources import orders_api  # noqa: F401 (a fixture)
from test_column_pipeline_sources import PG_SERVER, OrdersApi, http_source, run

from watermark_assets.sources.jdbc import postgres_jdbc_jar
from watermark_assets.vocabulary import time_text

BASE = datetime(2026, 4, 3, 9, 0, tzinfo=timezone.utc)
T = BASE + timedelta(minutes=5)  # the boundary value of every case
NAME = "orders"
SCHEMA = pa.schema(
    [("id", pa.int64()), ("updated_at", pa.timestamp("us", tz="UTC")), ("amount", pa.float64())]
)

#: (id, updated_at, amount): one row version, as the target must hold it.
Row = tuple[int, datetime, float]


def row(id_: int, at: datetime, amount: float | None = None) -> Row:
    return (id_, at, float(id_) if amount is None else amount)


class Source(Protocol):
    """A source of orders: ``put`` inserts rows or changes them (by id)."""

    def put(self, *rows: Row) -> None: ...

    def config(self) -> dict[str, Any]: ...


class Orders:
    """The source's rows by id, and every row version it ever held (an append target keeps
    each version once)."""

    def __init__(self) -> None:
        self.current: dict[int, Row] = {}
        self.history: list[Row] = []

    def keep(self, rows: tuple[Row, ...]) -> None:
        for r in rows:
            self.current[r[0]] = r
            self.history.append(r)

    def records(self) -> list[dict[str, Any]]:
        return [
            {"id": i, "updated_at": at, "amount": amount} for i, at, amount in self.current.values()
        ]


class DeltaOrders(Orders):
    def __init__(self, root: Path) -> None:
        super().__init__()
        self.uri = str(root / "source_delta")

    def put(self, *rows: Row) -> None:
        self.keep(rows)
        table = pa.Table.from_pylist(self.records(), schema=SCHEMA)
        write_deltalake(self.uri, table, mode="overwrite")

    def config(self) -> dict[str, Any]:
        return {"type": "delta_table", "uri": self.uri}


class FolderOrders(Orders):
    """One file in a folder, written again whole on each change."""

    def __init__(self, root: Path, fmt: str) -> None:
        super().__init__()
        self.fmt = fmt
        self.folder = root / f"source_{fmt}"
        self.folder.mkdir(parents=True)

    def put(self, *rows: Row) -> None:
        self.keep(rows)
        path = self.folder / f"orders.{self.fmt}"
        if self.fmt == "parquet":
            pq.write_table(pa.Table.from_pylist(self.records(), schema=SCHEMA), path)
            return
        texts = [
            {**r, "updated_at": _text(r["updated_at"], "%Y-%m-%dT%H:%M:%SZ")}
            for r in self.records()
        ]
        if self.fmt == "csv":
            lines = ["id,updated_at,amount"]
            lines += [f"{r['id']},{r['updated_at'] or ''},{r['amount']}" for r in texts]
        else:
            lines = [json.dumps(r) for r in texts]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def config(self) -> dict[str, Any]:
        source: dict[str, Any] = {"type": self.fmt, "uri": str(self.folder)}
        if self.fmt != "parquet":
            source["schema"] = "id BIGINT, updated_at TIMESTAMP, amount DOUBLE"
        return source


class PostgresOrders(Orders):
    def __init__(self, database: str) -> None:
        super().__init__()
        self.database = database
        with psycopg.connect(f"{PG_SERVER}/{database}", autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE orders (id bigint PRIMARY KEY, updated_at timestamptz, "
                "amount double precision)"
            )

    def put(self, *rows: Row) -> None:
        self.keep(rows)
        with psycopg.connect(f"{PG_SERVER}/{self.database}", autocommit=True) as conn:
            conn.cursor().executemany(
                "INSERT INTO orders (id, updated_at, amount) VALUES (%s, %s, %s) ON CONFLICT "
                "(id) DO UPDATE SET updated_at = EXCLUDED.updated_at, amount = EXCLUDED.amount",
                rows,
            )

    def config(self) -> dict[str, Any]:
        return {
            "type": "jdbc",
            "url": f"jdbc:postgresql://127.0.0.1:5432/{self.database}?user=postgres",
            "table": "orders",
            "schema": "public",
        }


class ApiOrders(Orders):
    """The orders API of ``test_column_pipeline_sources`` (``updated_at >= updated_since``),
    three records a page."""

    def __init__(self, url: str, api: type[OrdersApi]) -> None:
        super().__init__()
        self.url = url
        self.api = api

    def put(self, *rows: Row) -> None:
        self.keep(rows)
        self.api.records = [{**r, "updated_at": _text(r["updated_at"])} for r in self.records()]

    def config(self) -> dict[str, Any]:
        return http_source(self.url, 3)


def _text(at: datetime | None, pattern: str | None = None) -> str | None:
    if at is None:
        return None
    return at.strftime(pattern) if pattern else at.isoformat()


needs_jdbc = pytest.mark.skipif(
    postgres_jdbc_jar() is None,
    reason="the PostgreSQL JDBC driver /usr/share/java/postgresql.jar is missing: run `make jdbc`",
)
ALL_SOURCES = [
    "delta_table",
    "parquet",
    "csv",
    "json",
    pytest.param("jdbc", marks=needs_jdbc),
    "http_api",
]


@pytest.fixture
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Source]:
    """The source of the test's ``source_type`` parameter (indirect)."""
    kind = request.param
    if kind == "delta_table":
        yield DeltaOrders(tmp_path)
    elif kind in ("parquet", "csv", "json"):
        yield FolderOrders(tmp_path, kind)
    elif kind == "jdbc":
        with new_pg_database("wa_boundary") as database:
            yield PostgresOrders(database)
    else:
        yield ApiOrders(*request.getfixturevalue("orders_api"))


class Scene:
    def __init__(self, tmp_path: Path, source: Any, watermark: dict[str, Any], **more: Any):
        self.source = source
        self.table = str(tmp_path / "delta" / NAME)
        raw = {
            "name": NAME,
            "source": source.config(),
            "watermark": watermark,
            "table": {"uri": self.table, **more.pop("table", {})},
            **more,
        }
        self.config = project_config(raw)

    def run(self) -> dict[str, Any]:
        return run(self.config, NAME)

    def target(self) -> list[Row]:
        table = DeltaTable(self.table).to_pyarrow_table(columns=["id", "updated_at", "amount"])
        return ordered((r["id"], r["updated_at"], r["amount"]) for r in table.to_pylist())

    def quarantined(self) -> list[str]:
        table = DeltaTable(f"{self.table}_quarantine").to_pyarrow_table(columns=["raw_record"])
        return sorted(table.column("raw_record").to_pylist())


def ordered(rows: Any) -> list[Row]:
    """Rows sorted (a NULL updated_at first)."""
    return sorted(rows, key=lambda r: (r[0], r[1] is not None, r[1] or BASE, r[2]))


@pytest.mark.spark
@pytest.mark.parametrize("source", ALL_SOURCES, indirect=True)
def test_rows_inserted_later_at_the_committed_value_arrive_once(
    spark: Any, tmp_path: Path, source: Any
) -> None:
    scene = Scene(tmp_path, source, {"columns": ["updated_at"]})
    source.put(*(row(i, BASE + timedelta(minutes=i)) for i in range(3)))
    source.put(*(row(i, T) for i in range(3, 6)))
    first = scene.run()
    assert first["rows/read"] == 6
    assert first["watermark/after"] == f"updated_at={time_text(T)}"

    source.put(*(row(i, T) for i in range(6, 11)))  # 5 rows at exactly the watermark's value
    second = scene.run()
    assert second["rows/read"] == 5
    assert second["rows/boundary_reread"] == 3
    assert second["watermark/after"] == f"updated_at={time_text(T)}"
    assert scene.target() == ordered(source.history)

    third = scene.run()
    assert third["rows/read"] == 0
    assert third["rows/boundary_reread"] == 8
    assert third["delta/version"].startswith("no new commit")
    assert scene.target() == ordered(source.history)
    # The boundary is in the state file that outlives the log's cleanup (state/store.py).
    from watermark_assets.core.column.boundary import Boundary
    from watermark_assets.providers.delta_metadata import metadata_key
    from watermark_assets.state.store import state_file_uri

    stored = json.loads(Path(state_file_uri(scene.table, metadata_key(NAME))).read_text())
    boundary = Boundary.from_json(stored["state"]["boundary"])
    assert boundary.value == T and boundary.hashes is not None and len(boundary.hashes) == 8


@pytest.mark.spark
@pytest.mark.parametrize("source", ALL_SOURCES, indirect=True)
def test_a_smaller_id_and_an_update_at_the_tuple_watermarks_time_arrive_once(
    spark: Any, tmp_path: Path, source: Any
) -> None:
    scene = Scene(tmp_path, source, {"columns": ["updated_at", "id"]})
    source.put(*(row(i, BASE) for i in range(10, 15)), *(row(i, T) for i in range(15, 20)))
    first = scene.run()
    assert first["watermark/after"] == f"updated_at={time_text(T)}, id=19"

    # Committed later at the watermark's updated_at: a smaller id, and an update of id 17.
    source.put(row(3, T), row(17, T, -17.0))
    second = scene.run()
    assert second["rows/read"] == 2
    assert second["rows/boundary_reread"] == 4  # ids 15, 16, 18, 19 as committed
    assert second["watermark/after"] == f"updated_at={time_text(T)}, id=19"
    assert scene.target() == ordered(source.history)  # an append keeps both versions of 17

    third = scene.run()
    assert third["rows/read"] == 0
    assert third["delta/version"].startswith("no new commit")
    assert scene.target() == ordered(source.history)


#: A tuple watermark whose read starts behind it, on the sources that refused a bound on the
#: leading column only (ColumnMismatchError on every run after the first).
BEHIND = [
    pytest.param({"lag": "PT10M"}, {"table": {"merge_keys": ["id"]}}, id="lag, merge keys"),
    pytest.param(
        {"backward_days": 1},
        {"destination": {"replace_by_watermark": True}},
        id="backward_days, replace",
    ),
    pytest.param({}, {"destination": {"replace_by_watermark": True}}, id="replace"),
]


@pytest.mark.spark
@pytest.mark.parametrize(("lookback", "more"), BEHIND)
@pytest.mark.parametrize(
    "source", [pytest.param("jdbc", marks=needs_jdbc), "http_api"], indirect=True
)
def test_a_tuple_watermark_read_from_behind_runs_again_on_jdbc_and_http(
    spark: Any, tmp_path: Path, source: Any, lookback: dict[str, Any], more: dict[str, Any]
) -> None:
    scene = Scene(tmp_path, source, {"columns": ["updated_at", "id"], **lookback}, **more)
    source.put(*(row(i, BASE + timedelta(minutes=i)) for i in range(6)))
    assert scene.run()["rows/read"] == 6

    source.put(row(2, T, -2.0), row(6, T))  # a change and a new row
    second = scene.run()
    assert second["watermark/after"] == f"updated_at={time_text(T)}, id=6"
    assert second["read/predicate"].startswith("`updated_at` >= ")
    current = sorted(source.current.values())
    replaced_only = "replace_by_watermark" in more.get("destination", {}) and not lookback
    if replaced_only:  # id 2's old version (09:02) is below the window replaced: kept
        assert scene.target() == sorted([*current, row(2, BASE + timedelta(minutes=2))])
    else:
        assert scene.target() == current
    scene.run()  # and again
    assert len(scene.target()) == len(current) + (1 if replaced_only else 0)


@pytest.mark.spark
def test_more_rows_at_one_value_than_the_bound_read_strictly_above_it(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import watermark_assets.core.column.boundary as boundary
    import watermark_assets.runs.column as column

    monkeypatch.setattr(boundary, "MAX_BOUNDARY_ROWS", 3)
    monkeypatch.setattr(column, "MAX_BOUNDARY_ROWS", 3)
    source = DeltaOrders(tmp_path)
    scene = Scene(tmp_path, source, {"columns": ["updated_at"]})
    source.put(*(row(i, T) for i in range(4)))  # 4 rows at one value: more than 3
    assert scene.run()["rows/read"] == 4

    later = T + timedelta(minutes=1)
    source.put(row(4, T), row(5, later))
    second = scene.run()
    # Overflowed: the read is strict, as before boundaries; id 4, at T, is not read (README).
    assert second["read/predicate"] == f"`updated_at` > TIMESTAMP '{T.isoformat(sep=' ')}'"
    assert second["rows/read"] == 1
    assert sorted(r[0] for r in scene.target()) == [0, 1, 2, 3, 5]


# --- NULL watermark values ---


@pytest.mark.spark
@pytest.mark.parametrize("source", ALL_SOURCES, indirect=True)
def test_null_watermark_rows_are_counted_and_quarantined_once(
    spark: Any, tmp_path: Path, source: Any, request: pytest.FixtureRequest
) -> None:
    pushed = "http_api" not in request.node.name  # an API selects by value: first read only
    scene = Scene(tmp_path, source, {"columns": ["updated_at"]})  # default: quarantine
    source.put(*(row(i, BASE + timedelta(minutes=i)) for i in range(4)), (4, None, 4.0))
    first = scene.run()
    assert first["rows/read"] == 4
    assert first["rows/null_watermark"] == 1
    assert first["watermark/null_watermark"] == "quarantine"
    assert len(scene.quarantined()) == 1

    source.put((5, None, 5.0), row(6, T))  # a NULL row inserted later, and a row above
    second = scene.run()
    assert second["rows/read"] == 1
    assert second["rows/null_watermark"] == (2 if pushed else 0)
    third = scene.run()
    assert third["rows/null_watermark"] == (2 if pushed else 0)
    assert len(scene.quarantined()) == (2 if pushed else 1), "each NULL row quarantined once"
    assert [r[0] for r in scene.target()] == [0, 1, 2, 3, 6]


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["include", "skip"])
@pytest.mark.parametrize(
    "source", ["delta_table", pytest.param("jdbc", marks=needs_jdbc), "csv"], indirect=True
)
def test_null_watermark_rows_are_included_once_or_skipped(
    spark: Any, tmp_path: Path, source: Any, mode: str
) -> None:
    scene = Scene(tmp_path, source, {"columns": ["updated_at", "id"], "null_watermark": mode})
    source.put(row(0, BASE), (1, None, 1.0))
    assert scene.run()["rows/null_watermark"] == 1
    source.put((2, None, 2.0), row(3, T))
    second = scene.run()
    assert second["rows/null_watermark"] == 2
    third = scene.run()
    assert third["delta/version"].startswith("no new commit")
    expected = [0, 1, 2, 3] if mode == "include" else [0, 3]
    assert [r[0] for r in scene.target()] == expected, "each NULL row committed once, or never"


def test_null_watermark_include_is_refused_with_replace_by_watermark(tmp_path: Path) -> None:
    from watermark_assets.exceptions import ConfigError

    with pytest.raises(ConfigError, match="null_watermark: include"):
        project_config(
            {
                "name": NAME,
                "source": {"type": "delta_table", "uri": str(tmp_path / "s")},
                "watermark": {"columns": ["updated_at"], "null_watermark": "include"},
                "table": {"uri": str(tmp_path / "t")},
                "destination": {"replace_by_watermark": True},
            }
        )


# --- the record's boundary through the state store's codec (no Spark) ---


def test_a_boundary_round_trips_and_is_bounded() -> None:
    from watermark_assets.core.column.boundary import MAX_BOUNDARY_ROWS, Boundary

    kept = Boundary.of("updated_at", T, [3, -7, 2**62])
    assert Boundary.from_json(kept.to_json()) == kept
    assert kept.belongs_to(_watermark(T)) and not kept.belongs_to(_watermark(BASE))
    assert Boundary.of("updated_at", T, range(MAX_BOUNDARY_ROWS + 1)).overflowed
    assert kept.with_rows(range(MAX_BOUNDARY_ROWS)).overflowed
    assert Boundary.from_json(Boundary.of("id", 4, None).to_json()).hashes is None


def test_the_boundary_survives_the_state_files_codec_and_the_commit_entry() -> None:
    from watermark_assets.core.column.boundary import Boundary
    from watermark_assets.delta.log import CommitRecord
    from watermark_assets.providers.base import WatermarkRecord
    from watermark_assets.providers.delta_metadata import (
        RecordFold,
        commit_metadata_entry,
        watermark_record,
        with_boundary,
    )

    text = Boundary.of("updated_at", T, [1, 2]).to_json()
    entry = commit_metadata_entry(NAME, _watermark(T).to_json(), job_id="j", dataflow_run_id="r")
    carried = with_boundary(entry, NAME, lambda watermark: text)
    commit = CommitRecord(version=4, timestamp_ms=0, custom_metadata=carried, added=(), txns={})
    record = watermark_record(NAME, commit)
    assert record is not None and record.boundary == text
    fold = RecordFold(NAME)
    back = fold.loads(fold.dumps(record))
    assert isinstance(back, WatermarkRecord) and back.boundary == text
    # A watermark the boundary is not of: the entry carries none.
    assert with_boundary(entry, NAME, lambda watermark: None) == entry


def _watermark(at: datetime) -> Any:
    from watermark_assets.core.column.watermark import ColumnWatermark

    return ColumnWatermark.of({"updated_at": at})


@pytest.mark.spark
def test_a_time_pipeline_counts_the_rows_whose_time_column_is_null(
    spark: Any, tmp_path: Path
) -> None:
    """They fall in no window: left in the source, counted on each run."""
    from test_time_pipeline import DAILY_ORDERS, TimeScene

    scene = TimeScene(tmp_path, "2020-01-15", to="P0D", partition="none")
    nulls = [{"id": 100 + i, "updated_at": None, "amount": 0.0} for i in range(4)]
    scene.orders.put(*DAILY_ORDERS, *nulls)
    first = scene.run_unpartitioned()
    assert first["rows/null_watermark"] == 4
    assert scene.ids() == list(range(1, 15))
