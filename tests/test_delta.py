"""The Delta adapter on real Delta tables in tmp_path, read back by deltalake, DuckDB and Polars."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from fsspec.implementations.local import LocalFileSystem

from watermark_assets.delta.committer import CommitOutcome, DeltaCommitter, TxnVersion
from watermark_assets.delta.stats import DataFile, describe_data_files
from watermark_assets.exceptions import (
    DeltaCommitError,
    DeltaPartitionPathError,
    DeltaSchemaMismatchError,
    LogHistoryLostError,
)

UTC = timezone.utc
FILE_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
    ]
)
TABLE_SCHEMA = FILE_SCHEMA.append(pa.field("day", pa.string()))
FROZEN = datetime(2024, 1, 28, 12, 0, tzinfo=UTC)


def ts(day: int, micro: int = 0) -> datetime:
    return datetime(2024, 1, day, 10, 30, 0, micro, tzinfo=UTC)


def write_file(
    root: Path,
    relative: str,
    rows: Sequence[Mapping[str, Any]],
    schema: pa.Schema = FILE_SCHEMA,
    **options: Any,
) -> str:
    """Write a Parquet file the way Spark lays it out (partition columns only in the path)."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows), schema=schema), path, **options)
    return relative


def committer(table: Path, **kwargs: Any) -> DeltaCommitter:
    return DeltaCommitter(str(table), now=lambda: FROZEN, **kwargs)


def commit(
    table: Path,
    files: Sequence[DataFile],
    txns: Sequence[TxnVersion],
    metadata: Mapping[str, str] | None = None,
    *,
    schema: pa.Schema = TABLE_SCHEMA,
    partition_by: Sequence[str] = ("day",),
) -> CommitOutcome:
    return committer(table).commit(
        files,
        schema=schema,
        partition_by=partition_by,
        txns=txns,
        custom_metadata=metadata or {"watermark_assets": "{}"},
    )


@pytest.fixture
def table(tmp_path: Path) -> Path:
    return tmp_path / "events"


@pytest.fixture
def two_days(table: Path) -> list[DataFile]:
    """Three files in two day partitions, one row with a null timestamp."""
    relative = [
        write_file(
            table,
            "day=2024-01-27/part-0.parquet",
            [{"id": 1, "name": "a", "ts": ts(27, 1)}, {"id": 2, "name": "b", "ts": None}],
        ),
        write_file(
            table, "day=2024-01-28/part-0.parquet", [{"id": 3, "name": "c", "ts": ts(28, 123456)}]
        ),
        write_file(
            table, "day=2024-01-28/part-1.parquet", [{"id": 4, "name": "d", "ts": ts(28, 999999)}]
        ),
    ]
    return describe_data_files(str(table), relative, ["day"])


def rows_of(table: Path) -> list[dict[str, Any]]:
    return sorted(DeltaTable(str(table)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


EXPECTED_ROWS = [
    {"id": 1, "name": "a", "ts": ts(27, 1), "day": "2024-01-27"},
    {"id": 2, "name": "b", "ts": None, "day": "2024-01-27"},
    {"id": 3, "name": "c", "ts": ts(28, 123456), "day": "2024-01-28"},
    {"id": 4, "name": "d", "ts": ts(28, 999999), "day": "2024-01-28"},
]


# --- describing files -----------------------------------------------------------------------


STATS_CASES = [
    pytest.param(
        [{"id": 5, "ts": ts(1, 7)}, {"id": -2, "ts": None}, {"id": 9, "ts": ts(3)}],
        {},
        {
            "numRecords": 3,
            "minValues": {"id": -2, "ts": "2024-01-01T10:30:00.000007Z"},
            "maxValues": {"id": 9, "ts": "2024-01-03T10:30:00.000000Z"},
            "nullCount": {"id": 0, "ts": 1},
        },
        id="timestamps at microsecond precision in UTC with Z, and a null counted",
    ),
    pytest.param(
        [{"id": i, "ts": ts(1 + i)} for i in range(5)],
        {"row_group_size": 2},
        {
            "numRecords": 5,
            "minValues": {"id": 0, "ts": "2024-01-01T10:30:00.000000Z"},
            "maxValues": {"id": 4, "ts": "2024-01-05T10:30:00.000000Z"},
            "nullCount": {"id": 0, "ts": 0},
        },
        id="several row groups are combined",
    ),
    pytest.param(
        [{"id": None, "ts": ts(2)}, {"id": None, "ts": ts(2)}],
        {"row_group_size": 1},
        {
            "numRecords": 2,
            "minValues": {"ts": "2024-01-02T10:30:00.000000Z"},
            "maxValues": {"ts": "2024-01-02T10:30:00.000000Z"},
            "nullCount": {"id": 2, "ts": 0},
        },
        id="an all-null column has a null count and no bounds",
    ),
    pytest.param(
        [{"id": 1, "ts": ts(2)}],
        {"write_statistics": False},
        {"numRecords": 1, "minValues": {}, "maxValues": {}, "nullCount": {}},
        id="a file written without statistics still has its row count",
    ),
]


@pytest.mark.parametrize(("rows", "options", "expected"), STATS_CASES)
def test_stats_come_from_the_footer(
    tmp_path: Path, rows: list[dict[str, Any]], options: dict[str, Any], expected: dict[str, Any]
) -> None:
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])
    relative = write_file(tmp_path, "f.parquet", rows, schema, **options)
    (described,) = describe_data_files(str(tmp_path), [relative], [])
    assert json.loads(described.stats) == expected
    assert described.num_records == expected["numRecords"]


def test_stats_of_other_types_follow_delta(tmp_path: Path) -> None:
    schema = pa.schema(
        [
            ("d", pa.date32()),
            ("s", pa.string()),
            ("f", pa.float64()),
            ("b", pa.bool_()),
            ("dec", pa.decimal128(5, 2)),
            ("ntz", pa.timestamp("us")),
            ("bin", pa.binary()),
            ("nested", pa.struct([("x", pa.int64())])),
            ("tags", pa.list_(pa.string())),
        ]
    )
    long_text = "x" * 40
    rows: list[dict[str, Any]] = [
        {
            "d": date(2024, 2, 29),
            "s": long_text,
            "f": 1.5,
            "b": True,
            "dec": Decimal("1.25"),
            "ntz": datetime(2024, 1, 1, 0, 0, 0, 5),
            "bin": b"\x00",
            "nested": {"x": 1},
            "tags": ["a"],
        },
        {
            "d": date(2024, 1, 1),
            "s": "a",
            "f": float("nan"),
            "b": False,
            "dec": Decimal("-3.10"),
            "ntz": datetime(2024, 1, 2),
            "bin": b"\xff",
            "nested": {"x": 2},
            "tags": [],
        },
    ]
    (described,) = describe_data_files(
        str(tmp_path), [write_file(tmp_path, "f.parquet", rows, schema)], []
    )
    stats = json.loads(described.stats)
    assert stats["minValues"] == {
        "d": "2024-01-01",
        "s": "a",
        "f": 1.5,
        "b": False,
        "dec": -3.1,
        "ntz": "2024-01-01T00:00:00.000005",
    }
    # the long string's maximum is left out: cut to 32 characters it would be too low
    assert stats["maxValues"] == {
        "d": "2024-02-29",
        "f": 1.5,
        "b": True,
        "dec": 1.25,
        "ntz": "2024-01-02T00:00:00.000000",
    }
    assert set(stats["nullCount"]) == {"d", "s", "f", "b", "dec", "ntz"}


PARTITION_CASES = [
    pytest.param(
        "day=2024-01-28/part-0.parquet",
        ["day"],
        {"day": "2024-01-28"},
        id="one partition directory",
    ),
    pytest.param(
        "region=eu/day=2024-01-28/part-0.parquet",
        ["day", "region"],
        {"day": "2024-01-28", "region": "eu"},
        id="two levels, in partition_by order",
    ),
    pytest.param(
        "city=New York & Co%3A 50%25/part-0.parquet",
        ["city"],
        {"city": "New York & Co: 50%"},
        id="space and special characters escaped the way Spark does",
    ),
    pytest.param(
        "city=a%2Fb%3Dc/part-0.parquet",
        ["city"],
        {"city": "a/b=c"},
        id="slash and equals sign escaped the way delta-rs does",
    ),
    pytest.param(
        "city=__HIVE_DEFAULT_PARTITION__/part-0.parquet",
        ["city"],
        {"city": None},
        id="Hive's default partition is a null value",
    ),
    pytest.param("part-0.parquet", [], {}, id="an unpartitioned table"),
]


@pytest.mark.parametrize(("relative", "partition_by", "expected"), PARTITION_CASES)
def test_partition_values_come_from_the_path(
    tmp_path: Path, relative: str, partition_by: list[str], expected: dict[str, str | None]
) -> None:
    write_file(tmp_path, relative, [{"id": 1, "name": "a", "ts": ts(1)}])
    (described,) = describe_data_files(str(tmp_path), [relative], partition_by)
    assert described.partition_values == expected
    assert described.path == relative
    assert described.size == (tmp_path / relative).stat().st_size
    assert described.modification_time == int((tmp_path / relative).stat().st_mtime * 1000)


def test_a_partition_column_missing_from_the_path_is_named(tmp_path: Path) -> None:
    relative = write_file(tmp_path, "day=2024-01-28/part-0.parquet", [{"id": 1}])
    with pytest.raises(DeltaPartitionPathError, match="'region=<value>'") as caught:
        describe_data_files(str(tmp_path), [relative], ["day", "region"])
    assert (caught.value.path, caught.value.column) == (relative, "region")


@pytest.mark.parametrize(
    ("relative", "message"),
    [
        pytest.param("day=1/missing.parquet", "is not under table", id="a file that is not there"),
        pytest.param("notes.txt", "not a readable Parquet file", id="a file that is not Parquet"),
        pytest.param("../outside.parquet", "relative to table", id="a path leaving the table root"),
    ],
)
def test_unusable_files_are_refused(tmp_path: Path, relative: str, message: str) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(DeltaCommitError, match=message):
        describe_data_files(str(tmp_path), [relative], [])


# --- committing -----------------------------------------------------------------------------


def test_first_commit_creates_the_table_with_data_txn_and_metadata(
    table: Path, two_days: list[DataFile]
) -> None:
    outcome = commit(
        table,
        two_days,
        [TxnVersion("wa/events/2024-01-28", 1)],
        {"watermark_assets": '{"run": "r1"}'},
    )
    assert outcome == CommitOutcome(0, False, outcome.reason)
    assert "created the table" in outcome.reason
    delta = DeltaTable(str(table))
    assert delta.version() == 0
    assert delta.metadata().partition_columns == ["day"]
    assert delta.transaction_version("wa/events/2024-01-28") == 1
    assert rows_of(table) == EXPECTED_ROWS
    assert (
        json.loads((table / "_delta_log" / f"{0:020d}.json").read_text().splitlines()[0])[
            "commitInfo"
        ]["watermark_assets"]
        == '{"run": "r1"}'
    )


def test_other_engines_read_the_committed_rows(table: Path, two_days: list[DataFile]) -> None:
    commit(table, two_days, [TxnVersion("p", 1)])
    by_id = sorted(pl.read_delta(str(table)).to_dicts(), key=lambda r: r["id"])
    assert by_id == EXPECTED_ROWS
    # DuckDB's delta extension cannot be downloaded here: read the table's live files instead.
    uris = DeltaTable(str(table)).file_uris()
    duck = duckdb.execute(f"SELECT id, name, ts FROM read_parquet({uris!r}) ORDER BY id").fetchall()
    assert duck == [(r["id"], r["name"], r["ts"]) for r in EXPECTED_ROWS]


def test_committing_the_same_txn_version_again_is_stale(
    table: Path, two_days: list[DataFile]
) -> None:
    first = commit(table, two_days, [TxnVersion("p", 1)])
    again = commit(table, two_days, [TxnVersion("p", 1)])
    assert (first.stale, again.stale, again.skipped, again.version) == (False, True, True, None)
    assert "'p' None -> 1" in again.reason and "another writer committed" in again.reason
    assert DeltaTable(str(table)).version() == 0
    assert len(rows_of(table)) == 4


def test_an_empty_commit_still_advances_the_txn(table: Path, two_days: list[DataFile]) -> None:
    commit(table, two_days, [TxnVersion("p", 1)])
    outcome = commit(
        table,
        [],
        [TxnVersion("p", 2)],
        {"watermark_assets": "all quarantined"},
        schema=pa.schema([]),
    )
    assert (outcome.version, outcome.skipped) == (1, False)
    assert committer(table).transaction_version("p") == 2
    assert len(rows_of(table)) == 4
    assert committer(table).read_commit(1).custom_metadata == {
        "watermark_assets": "all quarantined"
    }


def test_an_empty_first_commit_creates_an_empty_table(table: Path) -> None:
    outcome = commit(table, [], [TxnVersion("p", 1)])
    assert outcome.version == 0
    assert DeltaTable(str(table)).to_pyarrow_table().num_rows == 0
    assert committer(table).transaction_version("p") == 1


def test_an_empty_create_pinned_on_no_table_is_stale_once_another_run_created_it(
    table: Path,
) -> None:
    """What an empty first window commits (``runs.column``): no file, the schema, its txn, pinned
    on "no table" (read_version -1). A second run that planned on "no table" too must not commit
    on the table the first created: stale, so it plans again on that table."""

    def create(app_id: str) -> CommitOutcome:
        return committer(table).commit(
            [],
            schema=TABLE_SCHEMA,
            partition_by=("day",),
            txns=[TxnVersion(app_id, 1)],
            custom_metadata={"watermark_assets": app_id},
            read_version=-1,
        )

    assert create("window-1").version == 0
    second = create("window-2")
    assert (second.stale, second.version) == (True, None)
    assert DeltaTable(str(table)).version() == 0
    assert committer(table).transaction_versions(["window-1", "window-2"]) == {
        "window-1": 1,
        "window-2": None,
    }


def test_two_dagster_partitions_commit_in_one_commit(table: Path, two_days: list[DataFile]) -> None:
    txns = [TxnVersion("wa/events/2024-01-27", 1), TxnVersion("wa/events/2024-01-28", 1)]
    assert commit(table, two_days, txns).version == 0
    record = committer(table).read_commit(0)
    assert record.txns == {"wa/events/2024-01-27": 1, "wa/events/2024-01-28": 1}
    assert commit(table, two_days, txns).stale
    assert committer(table).transaction_versions(["wa/events/2024-01-28", "wa/events/new"]) == {
        "wa/events/2024-01-28": 1,
        "wa/events/new": None,
    }


STALE_CASES = [
    pytest.param(
        [TxnVersion("a", 3)],
        "'a' 2 -> 1",
        id="built on a version the table does not have",
    ),
    pytest.param(
        [TxnVersion("a", 1), TxnVersion("b", 1)],
        "'a' None -> 1",
        id="one partition committed meanwhile and one not",
    ),
    pytest.param(
        [TxnVersion("a", 7, previous=0)],
        "'a' 0 -> 1",
        id="a jump built on an older version",
    ),
]


@pytest.mark.parametrize(("txns", "message"), STALE_CASES)
def test_txns_built_on_a_version_that_moved_are_stale(
    table: Path, two_days: list[DataFile], txns: list[TxnVersion], message: str
) -> None:
    commit(table, two_days[:1], [TxnVersion("a", 1)])
    outcome = commit(table, two_days[1:], txns)
    assert (outcome.stale, outcome.version) == (True, None)
    assert message in outcome.reason
    assert DeltaTable(str(table)).version() == 0


def test_a_txn_may_jump_from_the_version_it_builds_on(
    table: Path, two_days: list[DataFile]
) -> None:
    commit(table, two_days[:1], [TxnVersion("a", 1)])
    outcome = commit(table, two_days[1:], [TxnVersion("a", 7, previous=1)])
    assert (outcome.stale, outcome.version) == (False, 1)
    assert committer(table).transaction_version("a") == 7


@pytest.mark.parametrize(
    ("txns", "metadata", "message"),
    [
        pytest.param([], {}, "at least one txn", id="no txn at all"),
        pytest.param(
            [TxnVersion("a", 1), TxnVersion("a", 2)],
            {},
            "app ids repeat",
            id="the same app id twice",
        ),
        pytest.param(
            [TxnVersion("a", 1)], {"operation": "x"}, "reserved", id="a custom key that Delta owns"
        ),
        pytest.param(
            [TxnVersion("a", 2, previous=2)],
            {},
            "above the version they build on",
            id="a version that does not move forward",
        ),
    ],
)
def test_invalid_commits_are_refused(
    table: Path,
    two_days: list[DataFile],
    txns: list[TxnVersion],
    metadata: dict[str, str],
    message: str,
) -> None:
    with pytest.raises(DeltaCommitError, match=message):
        committer(table).commit(
            two_days, schema=TABLE_SCHEMA, partition_by=["day"], txns=txns, custom_metadata=metadata
        )
    assert not DeltaTable.is_deltatable(str(table))


SCHEMA_CASES = [
    pytest.param(
        TABLE_SCHEMA.append(pa.field("extra", pa.int32())),
        ["day"],
        "'extra': in the files (\"integer\") but not in the table",
        id="a column the table does not have",
    ),
    pytest.param(
        TABLE_SCHEMA.set(0, pa.field("id", pa.string())),
        ["day"],
        '\'id\': the table has "long", the files "string"',
        id="a column changed type",
    ),
    pytest.param(
        TABLE_SCHEMA, [], "the table has ['day'], the commit []", id="different partition columns"
    ),
]


@pytest.mark.parametrize(("schema", "partition_by", "message"), SCHEMA_CASES)
def test_a_schema_mismatch_names_the_column_and_the_fix(
    table: Path, two_days: list[DataFile], schema: pa.Schema, partition_by: list[str], message: str
) -> None:
    commit(table, two_days[:1], [TxnVersion("a", 1)])
    files = (
        two_days[1:]
        if partition_by
        else [
            DataFile(f.path, f.size, f.modification_time, {}, f.num_records, f.stats)
            for f in two_days[1:]
        ]
    )
    with pytest.raises(DeltaSchemaMismatchError) as caught:
        commit(table, files, [TxnVersion("a", 2)], schema=schema, partition_by=partition_by)
    assert message in str(caught.value)
    assert "evolve the table" in str(caught.value)
    assert committer(table).transaction_version("a") == 1


def test_a_nullable_column_missing_from_new_files_is_accepted(
    table: Path, two_days: list[DataFile]
) -> None:
    commit(table, two_days[:1], [TxnVersion("a", 1)])
    narrower = pa.schema([("id", pa.int64()), ("day", pa.string())])
    relative = write_file(
        table, "day=2024-01-29/part-0.parquet", [{"id": 9}], pa.schema([("id", pa.int64())])
    )
    files = describe_data_files(str(table), [relative], ["day"])
    assert commit(table, files, [TxnVersion("a", 2)], schema=narrower).version == 1
    assert rows_of(table)[-1] == {"id": 9, "name": None, "ts": None, "day": "2024-01-29"}


def test_a_special_partition_value_round_trips(table: Path) -> None:
    relative = write_file(
        table, "city=New York & Co%3A 50%25/part-0.parquet", [{"id": 1, "name": "a", "ts": ts(1)}]
    )
    files = describe_data_files(str(table), [relative], ["city"])
    schema = FILE_SCHEMA.append(pa.field("city", pa.string()))
    commit(table, files, [TxnVersion("p", 1)], schema=schema, partition_by=["city"])
    assert DeltaTable(str(table)).to_pyarrow_table().to_pylist() == [
        {"id": 1, "name": "a", "ts": ts(1), "city": "New York & Co: 50%"}
    ]
    assert pl.read_delta(str(table))["city"].to_list() == ["New York & Co: 50%"]
    (added,) = committer(table).read_commit(0).added
    assert (added.path, added.partition_values) == (relative, {"city": "New York & Co: 50%"})


def test_a_file_uri_works_like_a_path(table: Path, two_days: list[DataFile]) -> None:
    uri = table.as_uri()
    files = describe_data_files(uri, [f.path for f in two_days], ["day"])
    assert files == two_days
    outcome = DeltaCommitter(uri).commit(
        files,
        schema=TABLE_SCHEMA,
        partition_by=["day"],
        txns=[TxnVersion("p", 1)],
        custom_metadata={},
    )
    assert outcome.version == 0
    assert DeltaCommitter(uri).read_commits_after(None)[0].txns == {"p": 1}


# --- races ----------------------------------------------------------------------------------


class StaleFirstLoad(DeltaCommitter):
    """A run that loaded the table at ``stale_version`` before another run committed."""

    def __init__(self, table_uri: str, stale_version: int) -> None:
        super().__init__(table_uri, now=lambda: FROZEN)
        self.stale_version: int | None = stale_version

    def _load_table(self) -> DeltaTable | None:
        if self.stale_version is None:
            return super()._load_table()
        stale, self.stale_version = DeltaTable(self.table_uri, version=self.stale_version), None
        return stale


def test_a_run_racing_the_same_partition_is_stale(table: Path, two_days: list[DataFile]) -> None:
    commit(table, two_days[:1], [TxnVersion("p", 1)])
    commit(table, two_days[1:2], [TxnVersion("p", 2)])  # the winner of the race
    loser = StaleFirstLoad(str(table), stale_version=0)  # also saw p=1, also planned p=2
    outcome = loser.commit(
        two_days[1:2],
        schema=TABLE_SCHEMA,
        partition_by=["day"],
        txns=[TxnVersion("p", 2)],
        custom_metadata={},
    )
    assert (outcome.version, outcome.stale) == (None, True)
    assert DeltaTable(str(table)).version() == 1
    assert len(rows_of(table)) == 3


def test_a_run_racing_another_partition_is_rebased(table: Path, two_days: list[DataFile]) -> None:
    commit(table, two_days[:1], [TxnVersion("p", 1)])
    commit(table, [], [TxnVersion("q", 1)], schema=pa.schema([]))  # another partition's run
    late = StaleFirstLoad(str(table), stale_version=0)
    outcome = late.commit(
        two_days[1:],
        schema=TABLE_SCHEMA,
        partition_by=["day"],
        txns=[TxnVersion("p", 2)],
        custom_metadata={},
    )
    assert (outcome.version, outcome.skipped) == (2, False)
    assert len(rows_of(table)) == 4


class NoTableAtFirst(DeltaCommitter):
    """A run that found no table, then lost the race to create it."""

    def __init__(self, table_uri: str) -> None:
        super().__init__(table_uri, now=lambda: FROZEN)
        self.first = True

    def _load_table(self) -> DeltaTable | None:
        if self.first:
            self.first = False
            return None
        return super()._load_table()


@pytest.mark.parametrize("app_id", ["p", "q"], ids=["the same partition", "another partition"])
def test_the_loser_of_the_race_to_create_the_table_is_stale(
    table: Path, two_days: list[DataFile], app_id: str
) -> None:
    commit(table, two_days[:1], [TxnVersion("p", 1)])  # the winner created the table
    outcome = NoTableAtFirst(str(table)).commit(
        two_days[1:],
        schema=TABLE_SCHEMA,
        partition_by=["day"],
        txns=[TxnVersion(app_id, 1)],
        custom_metadata={},
    )
    assert (outcome.stale, outcome.version) == (True, None)
    assert "already exists" in outcome.reason
    assert DeltaTable(str(table)).version() == 0
    assert len(rows_of(table)) == two_days[0].num_records


def test_threads_committing_the_same_txn_commit_once(table: Path, two_days: list[DataFile]) -> None:
    commit(table, two_days[:1], [TxnVersion("p", 1)])
    start = threading.Barrier(4)
    outcomes: list[CommitOutcome] = []

    def run() -> None:
        start.wait()
        outcomes.append(commit(table, two_days[1:], [TxnVersion("p", 2)]))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(o.stale for o in outcomes) == [False, True, True, True]
    assert len(rows_of(table)) == 4


# --- reading the log ------------------------------------------------------------------------


def three_commits(table: Path, files: list[DataFile]) -> None:
    for version, file in enumerate(files, start=1):
        commit(table, [file], [TxnVersion("p", version)], {"watermark_assets": f"batch {version}"})


def test_read_commits_after_returns_our_metadata_in_order(
    table: Path, two_days: list[DataFile]
) -> None:
    three_commits(table, two_days)
    reader = committer(table)
    records = reader.read_commits_after(None)
    assert [r.version for r in records] == [0, 1, 2]
    assert [r.custom_metadata for r in records] == [
        {"watermark_assets": f"batch {n}"} for n in (1, 2, 3)
    ]
    assert [r.txns for r in records] == [{"p": 1}, {"p": 2}, {"p": 3}]
    assert [(a.path, a.num_records) for a in records[0].added] == [
        ("day=2024-01-27/part-0.parquet", 2)
    ]
    assert records[0].timestamp_ms > 0
    assert [r.version for r in reader.read_commits_after(0)] == [1, 2]
    assert reader.read_commits_after(2) == []
    assert reader.read_commit(1) == records[1]


class CountingFileSystem(LocalFileSystem):  # type: ignore[misc]
    cachable = False

    def __init__(self) -> None:
        super().__init__()
        self.listings = 0

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
        self.listings += 1
        return super().ls(path, detail=detail, **kwargs)


def test_reading_commits_after_a_cleaned_up_log_says_which_are_gone_or_skips_them_when_asked(
    table: Path, two_days: list[DataFile]
) -> None:
    """Log cleanup removes commit JSONs older than a Delta checkpoint. "The commits after V" when
    V + 1 is gone is an error naming the lost range, never a read that quietly starts later;
    ``lost="skip"`` reads what is left."""
    three_commits(table, two_days)
    commit(table, [], [TxnVersion("p", 4)], schema=pa.schema([]))
    DeltaTable(str(table)).create_checkpoint()  # at version 3
    for version in (0, 1):  # what log cleanup does to commits older than the retention
        (table / "_delta_log" / f"{version:020d}.json").unlink()
    fs = CountingFileSystem()
    reader = DeltaCommitter(str(table), filesystem=fs)
    for after, first_missing in [(None, 0), (0, 1)]:
        with pytest.raises(LogHistoryLostError) as lost:
            reader.read_commits_after(after)
        assert (lost.value.first_missing, lost.value.oldest) == (first_missing, 2)
        assert f"commits {first_missing} to 1 of table" in str(lost.value)
    assert [r.version for r in reader.read_commits_after(None, lost="skip")] == [2, 3]
    assert [r.version for r in reader.read_commits_after(0, lost="skip")] == [2, 3]
    assert fs.listings == 4
    assert [r.version for r in reader.read_commits_after(2)] == [3]
    assert reader.read_commits_after(3) == []
    assert fs.listings == 4  # a missing commit above the checkpoint means "none yet": no listing
    with pytest.raises(DeltaCommitError, match="cleaned up after a checkpoint"):
        reader.read_commit(1)
    assert reader.current_version() == 3
    assert reader.log.latest_version() == 3
    assert reader.transaction_version("p") == 4


@pytest.mark.parametrize("commits", [1, 2, 3, 7, 12])
@pytest.mark.parametrize("checkpoint_at", [None, 0, 2, 6], ids=lambda c: f"checkpoint {c}")
def test_the_latest_version_is_found_without_loading_the_snapshot(
    tmp_path: Path, commits: int, checkpoint_at: int | None
) -> None:
    table = tmp_path / "t"
    for version in range(commits):
        commit(table, [], [TxnVersion("p", version + 1)])
        if version == checkpoint_at:
            DeltaTable(str(table)).create_checkpoint()
    reader = committer(table)
    assert reader.log.latest_version() == reader.current_version() == commits - 1


#: Commits of one table (None: a commit without the key, another writer's or OPTIMIZE's), the
#: versions the log cleaned up, and what the walk back to the newest commit with the key finds.
NEWEST_WITH_KEY = [
    pytest.param(
        ["a", None, "b", None], (), (2, 3), id="the newest with the key, later ones passed"
    ),
    pytest.param(["a"], (), (0, 0), id="the only commit"),
    pytest.param([None, None], (), (None, 1), id="no commit holds it: None and the latest"),
    pytest.param(["a", "b", None, None], (0, 1), (None, 3), id="cleaned up before one is found"),
    pytest.param(["a", "b", "c", None], (0, 1), (2, 3), id="found above the cleaned-up commits"),
]


@pytest.mark.parametrize(("entries", "cleaned", "expected"), NEWEST_WITH_KEY)
def test_the_walk_back_finds_the_newest_commit_holding_a_key_or_says_its_history_is_lost(
    table: Path,
    entries: list[str | None],
    cleaned: tuple[int, ...],
    expected: tuple[int | None, int],
) -> None:
    """``DeltaLog.newest_commit_with``: the one walk of the legacy readers (a column pipeline's
    watermark record, a time pipeline's entry). A commit cleaned up before the key is found
    may have held its newest value: an error naming the oldest commit left, never "no value"."""
    from deltalake import CommitProperties, write_deltalake

    from watermark_assets.core.errors import WatermarkHistoryLostError

    key = "watermark_assets.time/orders"
    for entry in entries:
        metadata = {"other": "writer"} if entry is None else {key: entry}
        properties = CommitProperties(custom_metadata=metadata)
        write_deltalake(
            str(table), pa.table({"a": [1]}), mode="append", commit_properties=properties
        )
    if cleaned:
        DeltaTable(str(table)).create_checkpoint()
        for version in cleaned:
            (table / "_delta_log" / f"{version:020d}.json").unlink()
    log = committer(table).log
    found_version, latest = expected
    if found_version is None and cleaned:
        with pytest.raises(WatermarkHistoryLostError, match="'orders'") as lost:
            log.newest_commit_with(key, dataflow="orders")
        assert lost.value.oldest_version == max(cleaned) + 1
        return
    found, at = log.newest_commit_with(key, dataflow="orders")
    assert at == latest
    if found_version is None:
        assert found is None
    else:
        assert found is not None and found.version == found_version
        assert found.custom_metadata[key] == entries[found_version]


def test_the_walk_back_over_no_table_finds_nothing(table: Path) -> None:
    assert committer(table).log.newest_commit_with("k", dataflow="orders") == (None, -1)


def test_a_missing_table_has_no_version_and_no_commits(table: Path) -> None:
    reader = committer(table)
    assert reader.log.latest_version() is None
    assert reader.current_version() is None
    assert reader.transaction_version("p") is None
    assert reader.transaction_versions(["p"]) == {"p": None}
    assert reader.read_commits_after(None) == []


def test_a_first_commit_without_a_schema_says_what_to_pass(table: Path) -> None:
    with pytest.raises(DeltaCommitError, match="the first commit needs the data's full schema"):
        commit(table, [], [TxnVersion("p", 1)], schema=pa.schema([]))
    assert committer(table).current_version() is None
