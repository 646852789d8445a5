"""Column sources over tables and files (issue 7, section 3), with real Spark and real Delta tables.

Delta tables are written with ``deltalake.write_deltalake`` in several commits, so each commit's
file has its own statistics; the sources read them through the log, without delta-spark.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, TableFeatures, write_deltalake

from watermark_assets.core.column.predicate import predicate
from watermark_assets.core.column.watermark import (
    ColumnWatermark,
    Equal,
    GreaterOrEqual,
    GreaterThan,
    WatermarkOperator,
    greatest_row,
)
from watermark_assets.exceptions import UnsupportedDeltaTableError
from watermark_assets.sources.column import ColumnRead, ColumnSource, stage_rows
from watermark_assets.sources.table import CsvJsonSource, DeltaTableSource, ParquetFilesSource

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
SCHEMA = pa.schema([("id", pa.int64()), ("updated_at", pa.timestamp("us", tz="UTC"))])


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def rows_table(rows: Sequence[tuple[int, datetime | None]]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "updated_at": ts} for i, ts in rows], schema=SCHEMA)


def write_commits(uri: Path, commits: Sequence[Sequence[tuple[int, datetime | None]]]) -> None:
    """One append commit (one file, its own statistics) per element of ``commits``."""
    for rows in commits:
        write_deltalake(str(uri), rows_table(rows), mode="append")


def ids(frame: Any) -> list[int]:
    return sorted(row["id"] for row in frame.select("id").collect())


def scan_plan(read: ColumnRead) -> str:
    return str(read.frame._jdf.queryExecution().executedPlan().toString())


def watermark_at(minutes: int) -> ColumnWatermark:
    return ColumnWatermark.of({"updated_at": at(minutes)})


# Three commits, hence three files: ids 1-4 at minutes 1-4, ids 5-8 at 5-8, ids 9-12 at 9-12.
ORDERS = [[(i, at(i)) for i in range(start, start + 4)] for start in (1, 5, 9)]


@pytest.fixture
def orders(tmp_path: Path) -> DeltaTableSource:
    write_commits(tmp_path / "orders", ORDERS)
    return DeltaTableSource("orders", str(tmp_path / "orders"))


DELTA_CASES = [
    pytest.param(ColumnWatermark.empty(["updated_at"]), GreaterThan, range(1, 13), 0,
                 id="an empty watermark reads everything and skips no file"),
    pytest.param(watermark_at(6), GreaterThan, range(7, 13), 1,
                 id="> skips the row at the watermark and the file wholly below it"),
    pytest.param(watermark_at(6), GreaterOrEqual, range(6, 13), 1,
                 id=">= (replay) includes the row at the watermark"),
    pytest.param(ColumnWatermark.of({"id": 4}), GreaterThan, range(5, 13), 1,
                 id="> at a file's exact (integer) maximum skips that file"),
    pytest.param(watermark_at(4), GreaterThan, range(5, 13), 0,
                 id="> at a timestamp maximum on a whole millisecond reads the file (maybe cut)"),
    pytest.param(watermark_at(4), GreaterOrEqual, range(4, 13), 0,
                 id=">= at a file's maximum reads that file"),
    pytest.param(watermark_at(100), GreaterThan, [], 3,
                 id="a watermark above every row skips every file"),
    pytest.param(ColumnWatermark.of({"id": 6}), Equal, [6], 2,
                 id="= (a unit) skips the files below and above the value (max, min)"),
    pytest.param(ColumnWatermark.of({"id": 13}), Equal, [], 3,
                 id="= a value no file holds skips every file"),
]  # fmt: skip


@pytest.mark.parametrize(("watermark", "operator", "expected", "skipped"), DELTA_CASES)
def test_delta_reads_exactly_the_rows_above_the_watermark_and_skips_files_by_statistics(
    spark: Any,
    orders: DeltaTableSource,
    watermark: ColumnWatermark,
    operator: WatermarkOperator,
    expected: Sequence[int],
    skipped: int,
) -> None:
    read = orders.read(spark, predicate(watermark, operator))
    assert ids(read.frame) == list(expected)
    assert read.details["files_in_table"] == 3
    assert read.details["files_skipped_by_statistics"] == skipped
    assert read.details["files_read"] == 3 - skipped
    # The skipped files are not in the scan at all, and no row comes from them.
    scanned = set(read.frame.inputFiles())
    assert len(scanned) == 3 - skipped
    files_of_rows = {r[0] for r in read.frame.select("_metadata.file_path").distinct().collect()}
    assert {Path(f).name for f in files_of_rows} <= {Path(f).name for f in scanned}


SOURCES = ["delta", "parquet"]


@pytest.fixture
def source_of(tmp_path: Path) -> Iterator[Any]:
    def make(kind: str) -> ColumnSource:
        if kind == "delta":
            write_commits(tmp_path / "delta", ORDERS)
            return DeltaTableSource("orders", str(tmp_path / "delta"))
        folder = tmp_path / "parquet"
        folder.mkdir()
        for n, rows in enumerate(ORDERS):
            pq.write_table(rows_table(rows), folder / f"part-{n}.parquet")
        return ParquetFilesSource("orders", str(folder))

    yield make


@pytest.mark.parametrize("kind", SOURCES)
def test_the_predicate_reaches_the_parquet_scan_as_pushed_filters(
    spark: Any, source_of: Any, kind: str
) -> None:
    watermark = ColumnWatermark.of({"updated_at": at(6), "id": 6})
    read = source_of(kind).read(spark, predicate(watermark, GreaterThan))
    plan = scan_plan(read)
    pushed = plan[plan.index("PushedFilters: [") :].split("]", 1)[0]
    assert "updated_at" in pushed and "id" in pushed, plan
    assert read.pushed_down == (
        "(`updated_at` > TIMESTAMP '2024-01-01 00:06:00+00:00') OR "
        "(`updated_at` = TIMESTAMP '2024-01-01 00:06:00+00:00' AND `id` > 6)"
    )
    assert ids(read.frame) == list(range(7, 13))


def test_several_watermark_columns_resume_exactly_inside_one_timestamp(
    spark: Any, tmp_path: Path
) -> None:
    """(updated_at, id): run 1 stops in the middle of 300 rows sharing a timestamp; the rows that
    arrive later at that same timestamp are read by run 2, and no row is read twice."""
    uri = tmp_path / "orders"
    same = at(10)
    write_commits(uri, [[(i, at(1)) for i in range(1, 101)], [(i, same) for i in range(101, 251)]])
    source = DeltaTableSource("orders", str(uri))
    columns = ("updated_at", "id")
    watermark = ColumnWatermark.empty(columns)
    staged_ids: list[int] = []
    for run in (1, 2):
        read = source.read(spark, predicate(watermark, GreaterThan))
        staged = stage_rows(
            read, columns=columns, start=watermark, data_dir=str(tmp_path / f"staged-{run}")
        )
        assert staged.data_dir is not None
        staged_ids += pq.read_table(staged.data_dir, columns=["id"]).column("id").to_pylist()
        watermark = staged.next_watermark
        if run == 1:
            assert watermark == ColumnWatermark(columns, (same, 250))
            assert read.details["files_skipped_by_statistics"] == 0
            # More rows at the same timestamp (higher ids) and later ones.
            write_commits(uri, [[(i, same) for i in range(251, 401)], [(401, at(11))]])
    assert watermark == ColumnWatermark(columns, (at(11), 401))
    assert sorted(staged_ids) == list(range(1, 402))  # every row exactly once
    assert read.details["files_skipped_by_statistics"] == 1  # the minute-1 file


def test_stage_rows_observes_the_greatest_tuple_and_null_rows_never_advance(
    spark: Any, tmp_path: Path
) -> None:
    rows = [(1, at(5)), (7, at(5)), (3, at(2)), (99, None), (2, at(5))]
    write_commits(tmp_path / "t", [rows[:3], rows[3:]])
    columns = ("updated_at", "id")
    start = ColumnWatermark.empty(columns)
    read = DeltaTableSource("t", str(tmp_path / "t")).read(spark, predicate(start, GreaterThan))
    staged = stage_rows(read, columns=columns, start=start, data_dir=str(tmp_path / "staged"))
    assert staged.rows == 5  # an empty watermark reads the null row too ...
    expected = greatest_row(columns, rows_table(rows).to_pylist())
    assert staged.next_watermark == expected == ColumnWatermark(columns, (at(5), 7))  # ... but
    # it never advances the watermark.


def test_rows_with_only_null_watermarks_leave_the_watermark_where_it_was(
    spark: Any, tmp_path: Path
) -> None:
    write_commits(tmp_path / "t", [[(1, None), (2, None)]])
    start = ColumnWatermark.empty(["updated_at"])
    read = DeltaTableSource("t", str(tmp_path / "t")).read(spark, predicate(start, GreaterThan))
    staged = stage_rows(read, columns=["updated_at"], start=start, data_dir=str(tmp_path / "s"))
    assert staged.rows == 2
    assert staged.next_watermark == start
    # With a watermark, a null is never above it; the all-null file is skipped by its statistics.
    read = DeltaTableSource("t", str(tmp_path / "t")).read(
        spark, predicate(watermark_at(0), GreaterOrEqual)
    )
    assert ids(read.frame) == []
    assert read.details["files_skipped_by_statistics"] == 1


@pytest.fixture
def new_york_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The Python process's local zone is New York (PySpark converts TIMESTAMPs to it)."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_stage_rows_returns_utc_aware_timestamps_whatever_the_local_zone(
    spark: Any, tmp_path: Path, new_york_time: None
) -> None:
    precise = datetime(2024, 7, 1, 12, 30, 15, 123456, tzinfo=timezone.utc)
    write_commits(tmp_path / "t", [[(1, at(1)), (2, precise)]])
    start = ColumnWatermark.empty(["updated_at"])
    read = DeltaTableSource("t", str(tmp_path / "t")).read(spark, predicate(start, GreaterThan))
    staged = stage_rows(read, columns=["updated_at"], start=start, data_dir=str(tmp_path / "s"))
    [value] = staged.next_watermark.values
    assert isinstance(value, datetime) and value.utcoffset() == timedelta(0)
    assert value == precise and value.microsecond == 123456


def test_timestamp_statistics_cut_to_milliseconds_never_skip_a_row_above_the_watermark(
    spark: Any, tmp_path: Path
) -> None:
    """delta-rs records 12:00:00.123 as the maximum of 12:00:00.123456: a watermark at .123200
    is above the recorded maximum, but the row is above the watermark."""
    base = datetime(2024, 1, 1, 12, tzinfo=timezone.utc)
    write_commits(tmp_path / "t", [[(1, base + timedelta(microseconds=123456))]])
    [stats] = pa.table(DeltaTable(str(tmp_path / "t")).get_add_actions(flatten=True)).to_pylist()
    assert stats["max.updated_at"].microsecond == 123000  # the cut this test is about
    watermark = ColumnWatermark.of({"updated_at": base + timedelta(microseconds=123200)})
    read = DeltaTableSource("t", str(tmp_path / "t")).read(spark, predicate(watermark, GreaterThan))
    assert read.details["files_skipped_by_statistics"] == 0
    assert ids(read.frame) == [1]


def test_a_string_maximum_that_may_be_cut_never_skips_a_file(spark: Any, tmp_path: Path) -> None:
    long = "k" * 40
    schema = pa.schema([("id", pa.int64()), ("code", pa.string())])
    for i, code in ((1, long + "z"), (2, "b")):
        table = pa.table({"id": [i], "code": [code]}, schema=schema)
        write_deltalake(str(tmp_path / "t"), table, mode="append")
    source = DeltaTableSource("t", str(tmp_path / "t"))
    read = source.read(spark, predicate(ColumnWatermark.of({"code": long}), GreaterThan))
    # The long maximum may be a cut prefix: its file is read. "b" is exact: its file is skipped.
    assert read.details["files_skipped_by_statistics"] == 1
    assert ids(read.frame) == [1]


def test_a_partitioned_table_keeps_its_partition_column_and_skips_by_partition_value(
    spark: Any, tmp_path: Path
) -> None:
    schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
    # Values with glob characters and a space: each file is read by its literal path.
    for day, rows in (("2024-01-01", [1, 2]), ("2024-01-02 [a*]", [3]), ("2024-01-03 {b?}", [4])):
        table = pa.table({"id": rows, "day": [day] * len(rows)}, schema=schema)
        write_deltalake(str(tmp_path / "t"), table, mode="append", partition_by=["day"])
    read = DeltaTableSource("t", str(tmp_path / "t")).read(
        spark, predicate(ColumnWatermark.of({"day": "2024-01-01"}), GreaterThan)
    )
    assert read.details["files_skipped_by_statistics"] == 1
    assert sorted((r["id"], r["day"]) for r in read.frame.collect()) == [
        (3, "2024-01-02 [a*]"),
        (4, "2024-01-03 {b?}"),
    ]


@pytest.mark.parametrize(
    ("feature", "named"),
    [
        pytest.param(TableFeatures.DeletionVectors, "deletion vectors", id="deletion vectors"),
        pytest.param(TableFeatures.ColumnMapping, "column mapping", id="column mapping"),
    ],
)
def test_tables_whose_files_do_not_hold_their_rows_are_refused(
    spark: Any, tmp_path: Path, feature: TableFeatures, named: str
) -> None:
    write_commits(tmp_path / "t", ORDERS[:1])
    DeltaTable(str(tmp_path / "t")).alter.add_feature(
        feature, allow_protocol_versions_increase=True
    )
    source = DeltaTableSource("t", str(tmp_path / "t"))
    with pytest.raises(UnsupportedDeltaTableError, match=named) as raised:
        source.read(spark, predicate(watermark_at(0), GreaterThan))
    assert raised.value.feature == named


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    """The orders as CSV (with a header) and as JSON lines, one file per commit."""
    for n, rows in enumerate(ORDERS):
        csv = "id,updated_at\n" + "".join(f"{i},{ts.isoformat()}\n" for i, ts in rows)
        (tmp_path / "csv").mkdir(exist_ok=True)
        (tmp_path / "csv" / f"part-{n}.csv").write_text(csv)
        lines = "".join(
            json.dumps({"id": i, "updated_at": ts.isoformat()}) + "\n" for i, ts in rows
        )
        (tmp_path / "json").mkdir(exist_ok=True)
        (tmp_path / "json" / f"part-{n}.json").write_text(lines)
    return tmp_path


@pytest.mark.parametrize(
    ("fmt", "options"),
    [pytest.param("csv", {"header": "true"}, id="csv"), pytest.param("json", {}, id="json")],
)
@pytest.mark.parametrize(
    ("operator", "expected"),
    [
        pytest.param(GreaterThan, range(7, 13), id=">"),
        pytest.param(GreaterOrEqual, range(6, 13), id=">="),
    ],
)  # fmt: skip
def test_csv_and_json_are_read_whole_then_filtered_in_spark(
    spark: Any,
    landing: Path,
    fmt: Any,
    options: dict[str, str],
    operator: WatermarkOperator,
    expected: Sequence[int],
) -> None:
    source = CsvJsonSource(
        "orders", str(landing / fmt), fmt, "id BIGINT, updated_at TIMESTAMP", options
    )
    read = source.read(spark, predicate(watermark_at(6), operator))
    assert ids(read.frame) == list(expected)
    assert len(read.frame.inputFiles()) == 3  # no file skipped: a full scan
    assert read.details == {"format": fmt, "full_scan": True}


def test_csv_json_source_names_the_formats_it_reads() -> None:
    with pytest.raises(ValueError, match="give 'csv' or 'json'"):
        CsvJsonSource("orders", "/nowhere", "xml", "id BIGINT")  # type: ignore[arg-type]
