"""Range replace (seed 001's replace_by_watermark) on real Delta tables in tmp_path.

Every replace is ONE Delta commit (remove + add actions); readers are deltalake, Polars and DuckDB.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from watermark_assets.core.replace_window import Interval, ReplaceWindow
from watermark_assets.delta.committer import DeltaCommitter, TxnVersion
from watermark_assets.delta.replace import (
    REPLACE_METADATA_KEY,
    KeyMoves,
    ReplacePlan,
    commit_replace,
    plan_replace,
    plan_replace_regions,
)
from watermark_assets.delta.stats import DataFile, describe_data_files
from watermark_assets.exceptions import (
    DeltaCommitError,
    ReplaceWindowError,
    RowsOutsideWindowError,
)

UTC = timezone.utc
FROZEN = datetime(2024, 1, 2, 0, 0, tzinfo=UTC)
FILE_SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])
TABLE_SCHEMA = FILE_SCHEMA.append(pa.field("hour", pa.string()))
APP = "watermark_assets/orders/replace"


def at(hour: int, minute: int = 0, second: int = 0, micro: int = 0) -> datetime:
    return datetime(2024, 1, 1, hour, minute, second, micro, tzinfo=UTC)


END_OF_HOUR = (59, 59, 999_999)


def hour_key(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H")


# The table before every replace: hours 10-13, one file per hour, three rows each. Ids: hour*10+n.
BASE_ROWS = [
    {"id": h * 10 + n, "ts": t}
    for h in (10, 11, 12, 13)
    for n, t in enumerate([at(h), at(h, 30), at(h, *END_OF_HOUR)])
]


def write_rows(
    table: Path, rows: Sequence[Mapping[str, Any]], name: str, **options: Any
) -> list[str]:
    """Write rows the way Spark does: one file per hour partition, the hour only in the path."""
    by_hour: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_hour.setdefault(hour_key(row["ts"]), []).append(row)
    written = []
    for hour, hour_rows in sorted(by_hour.items()):
        relative = f"hour={hour}/{name}.parquet"
        (table / f"hour={hour}").mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.Table.from_pylist(hour_rows, schema=FILE_SCHEMA), table / relative, **options
        )
        written.append(relative)
    return written


def described(table: Path, relative: Sequence[str]) -> list[DataFile]:
    return describe_data_files(str(table), relative, ["hour"])


def committer(table: Path) -> DeltaCommitter:
    return DeltaCommitter(str(table), now=lambda: FROZEN)


def append(table: Path, rows: Sequence[Mapping[str, Any]], name: str, app_id: str) -> int:
    delta = committer(table)
    txn = TxnVersion.next_of(app_id, delta.transaction_version(app_id))
    outcome = delta.commit(
        described(table, write_rows(table, rows, name)),
        schema=TABLE_SCHEMA,
        partition_by=["hour"],
        txns=[txn],
        custom_metadata={"watermark_assets": "{}"},
    )
    assert outcome.version is not None, outcome
    return outcome.version


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "orders"
    append(path, BASE_ROWS, "base", "watermark_assets/orders/load")
    return path


def replace(
    table: Path, window: ReplaceWindow, new_rows: Sequence[Mapping[str, Any]]
) -> tuple[ReplacePlan, int | None]:
    new_files = described(table, write_rows(table, new_rows, "new")) if new_rows else []
    plan = plan_replace(str(table), window, new_files)
    delta = committer(table)
    outcome = commit_replace(
        delta,
        plan,
        schema=TABLE_SCHEMA,
        partition_by=["hour"],
        txns=[TxnVersion.next_of(APP, delta.transaction_version(APP))],
        custom_metadata={"watermark_assets": json.dumps({"window": window.to_json()})},
        now=lambda: FROZEN,
    )
    return plan, outcome.version


def ids_read_by_every_reader(table: Path) -> list[int]:
    """The ids deltalake, Polars and DuckDB read (DuckDB: the live files, its delta extension
    cannot be downloaded here)."""
    by_deltalake = sorted(DeltaTable(str(table)).to_pyarrow_table().column("id").to_pylist())
    by_polars = sorted(pl.read_delta(str(table))["id"].to_list())
    uris = DeltaTable(str(table)).file_uris()
    query = f"SELECT id FROM read_parquet({uris!r})"
    by_duckdb = sorted(r[0] for r in duckdb.execute(query).fetchall()) if uris else []
    assert by_deltalake == by_polars == by_duckdb
    return by_deltalake


def log_actions(table: Path, version: int) -> list[dict[str, Any]]:
    text = (table / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def table_parquet_files(table: Path) -> set[str]:
    return {str(p.relative_to(table)) for p in table.rglob("*.parquet")}


@dataclass(frozen=True)
class Case:
    window: ReplaceWindow
    new_rows: list[dict[str, Any]]
    expected_ids: list[int]
    removed: int
    rewritten: int
    kept: int
    new_ids: list[int] = field(default_factory=list)


BASE_IDS = sorted(r["id"] for r in BASE_ROWS)


def without(*ids: int) -> list[int]:
    return [i for i in BASE_IDS if i not in ids]


CASES = {
    "a closed-open window covering whole hour files removes them without reading": Case(
        ReplaceWindow("ts", at(11), at(13), Interval.CLOSED_OPEN),
        [{"id": 900, "ts": at(11, 5)}, {"id": 901, "ts": at(12, 5)}],
        sorted([*without(110, 111, 112, 120, 121, 122), 900, 901]),
        removed=2,
        rewritten=0,
        kept=2,
    ),
    "files straddling (10:30, 11:30] are rewritten and their rows outside kept exactly": Case(
        ReplaceWindow("ts", at(10, 30), at(11, 30)),
        [{"id": 900, "ts": at(10, 45)}, {"id": 901, "ts": at(11, 30)}],
        sorted([*without(102, 110, 111), 900, 901]),
        removed=0,
        rewritten=2,
        kept=2,
    ),
    "a range backfill [10:00, 13:00) replaces every hour partition, not only the first": Case(
        ReplaceWindow("ts", at(10), at(13), Interval.CLOSED_OPEN),
        [{"id": 900 + h, "ts": at(h, 1)} for h in (10, 11, 12)],
        sorted([130, 131, 132, 910, 911, 912]),
        removed=3,
        rewritten=0,
        kept=1,
    ),
    "a window from the beginning with no new rows removes every row in it": Case(
        ReplaceWindow("ts", None, at(13, *END_OF_HOUR), Interval.CLOSED_CLOSED),
        [],
        [],
        removed=4,
        rewritten=0,
        kept=0,
    ),
    "a straddling file whose rows all fall in the window is removed, not rewritten": Case(
        ReplaceWindow("ts", at(12, 29), at(12, *END_OF_HOUR)),
        [],
        without(121, 122),
        removed=0,
        rewritten=1,
        kept=3,
    ),
    "a window on the partition column itself removes whole partitions": Case(
        ReplaceWindow("hour", "2024-01-01T11", "2024-01-01T12", Interval.CLOSED_CLOSED),
        [{"id": 900, "ts": at(12, 7)}],
        sorted([*without(110, 111, 112, 120, 121, 122), 900]),
        removed=2,
        rewritten=0,
        kept=2,
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_replace_window_in_one_commit(table: Path, case: Case) -> None:
    before = DeltaTable(str(table)).version()

    plan, version = replace(table, case.window, case.new_rows)

    assert version == before + 1
    assert (len(plan.removed), len(plan.rewritten), plan.kept_files) == (
        case.removed,
        case.rewritten,
        case.kept,
    )
    assert ids_read_by_every_reader(table) == case.expected_ids
    actions = log_actions(table, version)
    assert sum("commitInfo" in a for a in actions) == 1
    removes = [a["remove"] for a in actions if "remove" in a]
    adds = [a["add"] for a in actions if "add" in a]
    assert len(removes) == case.removed + case.rewritten
    assert len(adds) == len(plan.add_files())
    assert [a["txn"]["appId"] for a in actions if "txn" in a] == [APP]


def test_history_shows_one_commit_with_removes_adds_and_the_window(table: Path) -> None:
    window = ReplaceWindow("ts", at(10, 30), at(11, 30))

    plan, version = replace(table, window, [{"id": 900, "ts": at(11)}])

    assert version is not None
    (last,) = DeltaTable(str(table)).history(1)
    assert last["version"] == version
    assert last["operation"] == "WRITE"
    recorded = json.loads(last[REPLACE_METADATA_KEY])
    assert recorded["window"] == {
        "column": "ts",
        "lower": "2024-01-01T10:30:00+00:00",
        "upper": "2024-01-01T11:30:00+00:00",
        "interval": "(lower, upper]",
    }
    assert (recorded["rows_removed"], recorded["rows_added"]) == (3, 1)
    assert recorded == plan.metadata()
    kinds = [next(iter(a)) for a in log_actions(table, version)]
    assert kinds.count("remove") == 2
    assert kinds.count("add") == 3  # the new file and the two rewritten remainders


def test_rewritten_remainders_keep_every_column_and_value(table: Path) -> None:
    replace(table, ReplaceWindow("ts", at(10, 30), at(11, 30)), [])

    rows = sorted(DeltaTable(str(table)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    expected = sorted(
        (
            {**r, "hour": hour_key(r["ts"])}
            for r in BASE_ROWS
            if not at(10, 30) < r["ts"] <= at(11, 30)
        ),
        key=lambda r: r["id"],
    )
    assert rows == expected


def test_statistics_cut_to_milliseconds_never_remove_a_row_past_the_upper_bound(
    tmp_path: Path,
) -> None:
    # delta-rs writes timestamp statistics cut to milliseconds: this file's max reads as .123.
    path = tmp_path / "cut"
    rows = pa.Table.from_pylist(
        [{"id": 1, "ts": at(10, 0, 0, 100)}, {"id": 2, "ts": at(10, 0, 0, 123_456)}],
        schema=FILE_SCHEMA,
    )
    write_deltalake(str(path), rows)
    (stats,) = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).to_pylist()
    assert stats["max.ts"] == at(10, 0, 0, 123_000)
    window = ReplaceWindow("ts", at(9), at(10, 0, 0, 123_000))

    plan = plan_replace(str(path), window, [])
    outcome = commit_replace(
        committer(path),
        plan,
        schema=FILE_SCHEMA,
        partition_by=[],
        txns=[TxnVersion(APP, 1)],
        custom_metadata={},
    )

    assert (len(plan.removed), len(plan.rewritten)) == (0, 1)
    assert outcome.version == 1
    assert DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist() == [2]


#: How another writer may leave a file's add action: no column statistics (Parquet written
#: without them), or no statistics at all, not even the record count.
BARE_ADD_ACTIONS = {
    "no column statistics": lambda file: file,
    "no record count either": lambda file: DataFile(
        file.path, file.size, file.modification_time, file.partition_values, 0, "{}"
    ),
}


@pytest.mark.parametrize("bare", BARE_ADD_ACTIONS.values(), ids=BARE_ADD_ACTIONS.keys())
def test_a_file_without_statistics_is_read_never_assumed(
    tmp_path: Path, bare: Callable[[DataFile], DataFile]
) -> None:
    path = tmp_path / "nostats"
    rows = [{"id": 1, "ts": at(10, 1)}, {"id": 2, "ts": at(10, 50)}]
    relative = write_rows(path, rows, "x", write_statistics=False)
    outcome = committer(path).commit(
        [bare(file) for file in described(path, relative)],
        schema=TABLE_SCHEMA,
        partition_by=["hour"],
        txns=[TxnVersion("load", 1)],
        custom_metadata={},
    )
    assert outcome.version == 0
    (action,) = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).to_pylist()
    assert action.get("min.ts") is None

    plan, version = replace(path, ReplaceWindow("ts", at(10, 30), at(11)), [])

    assert (len(plan.removed), len(plan.rewritten), version) == (0, 1, 1)
    assert ids_read_by_every_reader(path) == [1]


def test_a_replace_on_a_table_that_does_not_exist_yet_creates_it(tmp_path: Path) -> None:
    path = tmp_path / "fresh"

    plan, version = replace(path, ReplaceWindow("ts", None, at(11)), [{"id": 1, "ts": at(10)}])

    assert (plan.read_version, version) == (-1, 0)
    assert ids_read_by_every_reader(path) == [1]


WINDOWS_THAT_DO_NOT_FIT_THE_TABLE = {
    "an unknown column": ReplaceWindow("updated_at", None, at(11)),
    "number bounds on a timestamp column": ReplaceWindow("ts", 1, 2),
    "date bounds on a timestamp column": ReplaceWindow("ts", date(2024, 1, 1), date(2024, 1, 2)),
}


@pytest.mark.parametrize(
    "window",
    WINDOWS_THAT_DO_NOT_FIT_THE_TABLE.values(),
    ids=WINDOWS_THAT_DO_NOT_FIT_THE_TABLE.keys(),
)
def test_a_window_that_does_not_fit_the_table_is_refused_before_anything_is_written(
    table: Path, window: ReplaceWindow
) -> None:
    files = table_parquet_files(table)

    with pytest.raises(ReplaceWindowError):
        plan_replace(str(table), window, [])

    assert table_parquet_files(table) == files
    assert DeltaTable(str(table)).version() == 0


OUTSIDE_ROWS = {
    "a new row below the window": {"id": 900, "ts": at(10, 30)},
    "a new row above the window": {"id": 900, "ts": at(12, 0, 0, 1)},
    "a new row with a null watermark column": {"id": 900, "ts": None},
}


@pytest.mark.parametrize("row", OUTSIDE_ROWS.values(), ids=OUTSIDE_ROWS.keys())
def test_a_new_row_outside_the_window_stops_the_replace_with_nothing_committed(
    table: Path, row: dict[str, Any]
) -> None:
    window = ReplaceWindow("ts", at(10, 30), at(12))  # straddles hour 10: a rewrite if it ran
    inside = {"id": 901, "ts": at(11, 15)}
    rows = [inside, row]
    relative = []
    for n, r in enumerate(rows):  # one file per row, the hour from the ts (or hour 11 for null)
        folder = f"hour={hour_key(r['ts']) if r['ts'] else '2024-01-01T11'}"
        (table / folder).mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.Table.from_pylist([r], schema=FILE_SCHEMA), table / folder / f"n{n}.parquet"
        )
        relative.append(f"{folder}/n{n}.parquet")
    files_before = table_parquet_files(table)
    ids_before = ids_read_by_every_reader(table)

    with pytest.raises(RowsOutsideWindowError) as refused:
        plan_replace(str(table), window, described(table, relative))

    assert refused.value.path == relative[1]
    assert refused.value.outside == 1
    assert DeltaTable(str(table)).version() == 0
    assert table_parquet_files(table) == files_before  # no remainder was written
    assert ids_read_by_every_reader(table) == ids_before


def test_a_new_file_without_statistics_is_checked_row_by_row(table: Path) -> None:
    relative = write_rows(table, [{"id": 900, "ts": at(13, 1)}], "nostats", write_statistics=False)

    with pytest.raises(RowsOutsideWindowError, match="2024"):
        plan_replace(str(table), ReplaceWindow("ts", at(10), at(12)), described(table, relative))


def test_a_commit_between_plan_and_commit_makes_the_outcome_stale_and_a_new_plan_commits(
    table: Path,
) -> None:
    window = ReplaceWindow("ts", at(10, 30), at(11, 30))
    new_files = described(table, write_rows(table, [{"id": 900, "ts": at(11)}], "new"))
    plan = plan_replace(str(table), window, new_files)
    remainders = {r.remainder.path for r in plan.rewritten if r.remainder}
    assert remainders
    # Another writer appends a row inside the window after the plan: replacing from the old
    # snapshot would keep it, so the plan is stale.
    append(table, [{"id": 800, "ts": at(11, 10)}, {"id": 801, "ts": at(13, 10)}], "other", "other")
    delta = committer(table)

    outcome = commit_replace(
        delta,
        plan,
        schema=TABLE_SCHEMA,
        partition_by=["hour"],
        txns=[TxnVersion.next_of(APP, None)],
        custom_metadata={},
    )

    assert outcome.stale and outcome.version is None
    assert "moved from version 0 to 1" in outcome.reason
    assert DeltaTable(str(table)).version() == 1
    assert not remainders & table_parquet_files(table)  # the stale plan's rewrites are gone

    again = plan_replace(str(table), window, new_files)
    outcome = commit_replace(
        delta,
        again,
        schema=TABLE_SCHEMA,
        partition_by=["hour"],
        txns=[TxnVersion.next_of(APP, None)],
        custom_metadata={},
    )

    assert outcome.version == 2
    assert ids_read_by_every_reader(table) == sorted([*without(102, 110, 111), 801, 900])


class RacingCommitter(DeltaCommitter):
    """Another writer commits right after the committer loaded the snapshot (inside commit)."""

    def __init__(self, table: Path) -> None:
        super().__init__(str(table), now=lambda: FROZEN)
        self._table_path = table
        self._raced = False

    def _load_table(self) -> DeltaTable | None:
        loaded = super()._load_table()
        if not self._raced:
            self._raced = True
            append(self._table_path, [{"id": 800, "ts": at(13, 10)}], "racer", "racer")
        return loaded


def test_a_commit_landing_while_the_replace_is_written_is_never_rebased_over(table: Path) -> None:
    plan = plan_replace(str(table), ReplaceWindow("ts", at(10, 30), at(11, 30)), [])

    outcome = commit_replace(
        RacingCommitter(table),
        plan,
        schema=TABLE_SCHEMA,
        partition_by=["hour"],
        txns=[TxnVersion.next_of(APP, None)],
        custom_metadata={},
    )

    assert outcome.stale and outcome.version is None
    assert DeltaTable(str(table)).version() == 1  # only the racer's commit
    assert 102 in ids_read_by_every_reader(table)


def test_a_moved_txn_makes_the_replace_stale(table: Path) -> None:
    plan = plan_replace(str(table), ReplaceWindow("ts", at(10, 30), at(11, 30)), [])

    outcome = commit_replace(
        committer(table),
        plan,
        schema=TABLE_SCHEMA,
        partition_by=["hour"],
        txns=[TxnVersion(APP, 5, previous=4)],
        custom_metadata={},
    )

    assert outcome.stale
    assert "txn versions moved" in outcome.reason
    assert DeltaTable(str(table)).version() == 0


def test_removes_without_a_read_version_are_refused(table: Path) -> None:
    plan = plan_replace(str(table), ReplaceWindow("ts", at(10), at(11), Interval.CLOSED_OPEN), [])

    with pytest.raises(DeltaCommitError, match="read_version"):
        committer(table).commit(
            [],
            schema=pa.schema([]),
            partition_by=["hour"],
            txns=[TxnVersion(APP, 1)],
            custom_metadata={},
            removes=plan.remove_actions(0),
        )


def test_escaped_partition_paths_are_read_removed_and_rewritten_under_their_real_names(
    tmp_path: Path,
) -> None:
    # delta-rs escapes ' ' and ':' in the directory and escapes that again in the log.
    path = tmp_path / "escaped"
    rows = {"id": [1, 2], "ts": [at(10), at(10, 40)], "hour": ["2024-01-01 10:00"] * 2}
    write_deltalake(str(path), pa.table(rows, schema=TABLE_SCHEMA), partition_by=["hour"])

    plan = plan_replace(str(path), ReplaceWindow("ts", at(10, 30), at(11)), [])
    outcome = commit_replace(
        committer(path),
        plan,
        schema=TABLE_SCHEMA,
        partition_by=["hour"],
        txns=[TxnVersion(APP, 1)],
        custom_metadata={},
    )

    assert outcome.version == 1
    (rewritten,) = plan.rewritten
    assert rewritten.removed.path.startswith("hour=2024-01-01%2010%3A00/")
    assert ids_read_by_every_reader(path) == [1]
    assert DeltaTable(str(path)).to_pyarrow_table().column("hour").to_pylist() == [
        "2024-01-01 10:00"
    ]


def test_rows_with_a_null_watermark_column_are_in_no_window_and_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "nulls"
    (path / "hour=2024-01-01T10").mkdir(parents=True)
    mixed = [{"id": 1, "ts": at(10, 10)}, {"id": 2, "ts": None}]
    only_null = [{"id": 3, "ts": None}]
    for name, rows in (("mixed", mixed), ("null", only_null)):
        table = pa.Table.from_pylist(rows, schema=FILE_SCHEMA)
        pq.write_table(table, path / f"hour=2024-01-01T10/{name}.parquet")
    relative = ["hour=2024-01-01T10/mixed.parquet", "hour=2024-01-01T10/null.parquet"]
    outcome = committer(path).commit(
        described(path, relative),
        schema=TABLE_SCHEMA,
        partition_by=["hour"],
        txns=[TxnVersion("load", 1)],
        custom_metadata={},
    )
    assert outcome.version == 0

    plan, version = replace(path, ReplaceWindow("ts", None, at(11)), [])

    assert (len(plan.removed), len(plan.rewritten), plan.kept_files, version) == (0, 1, 1, 1)
    assert ids_read_by_every_reader(path) == [2, 3]


# What an empty replay chunk commits (runs.column.commit_column_batch): no new file, the table's
# schema (an empty one given), remove actions and rewritten remainders only, or nothing but its
# txn and metadata. delta-rs 1.6.6's create_write_transaction(mode="append") takes both.
NO_NEW_FILE_CASES = {
    "whole hour files in the window: remove actions only": (
        ReplaceWindow("ts", at(11), at(13), Interval.CLOSED_OPEN),
        without(110, 111, 112, 120, 121, 122),
        {"remove": 2},
    ),
    "straddling files: removed, their remainders added back": (
        ReplaceWindow("ts", at(10, 30), at(11, 30)),
        without(102, 110, 111),
        {"remove": 2, "add": 2},
    ),
    "the partition column's window: whole partitions removed": (
        ReplaceWindow("hour", "2024-01-01T10", "2024-01-01T10", Interval.CLOSED_CLOSED),
        without(100, 101, 102),
        {"remove": 1},
    ),
    "no row of the table in the window: the txn and the metadata only": (
        ReplaceWindow("ts", at(20), at(22), Interval.CLOSED_OPEN),
        BASE_IDS,
        {},
    ),
}


@pytest.mark.parametrize(
    ("window", "expected_ids", "data_actions"),
    NO_NEW_FILE_CASES.values(),
    ids=NO_NEW_FILE_CASES.keys(),
)
def test_a_replace_with_no_new_file_is_one_commit_of_removes_with_the_txn_and_metadata(
    table: Path, window: ReplaceWindow, expected_ids: list[int], data_actions: dict[str, int]
) -> None:
    plan = plan_replace(str(table), window, [])
    outcome = commit_replace(
        committer(table),
        plan,
        schema=pa.schema([]),  # what a chunk that read no row has: the table's schema is used
        partition_by=["hour"],
        txns=[TxnVersion(APP, 1)],
        custom_metadata={"watermark_assets.replay": '{"chunk": 4}'},
        now=lambda: FROZEN,
    )

    assert outcome.version == 1, outcome
    assert plan.rows_added == 0
    assert ids_read_by_every_reader(table) == expected_ids
    actions = log_actions(table, 1)
    kinds = {kind: sum(kind in a for a in actions) for kind in ("add", "remove")}
    assert kinds == {"add": 0, "remove": 0, **data_actions}
    assert [a["txn"] for a in actions if "txn" in a] == [
        {"appId": APP, "version": 1, "lastUpdated": int(FROZEN.timestamp() * 1000)}
    ]
    (info,) = [a["commitInfo"] for a in actions if "commitInfo" in a]
    assert (info["operation"], info["operationParameters"]["mode"]) == ("WRITE", "Append")
    assert info["watermark_assets.replay"] == '{"chunk": 4}'
    assert json.loads(info[REPLACE_METADATA_KEY])["rows_removed"] == len(BASE_IDS) - len(
        expected_ids
    )
    assert DeltaTable(str(table)).transaction_version(APP) == 1


#: A region: the rows in every window (a time window and a unit's [id, id], issue 8's time x unit).
HOUR_11 = ReplaceWindow("hour", "2024-01-01T11", "2024-01-01T11", Interval.CLOSED_CLOSED)
REGIONS = {
    "a time window within one partition value (whole file)": (
        [ReplaceWindow("ts", at(10, 30), at(12, 30), Interval.CLOSED_OPEN), HOUR_11],
        [{"id": 999, "ts": at(11, 20)}],
        (1, 0),
        sorted([*(r["id"] for r in BASE_ROWS if r["id"] // 10 != 11), 999]),
    ),
    "a time window cutting the partition's file": (
        [ReplaceWindow("ts", at(11, 15), at(13), Interval.CLOSED_OPEN), HOUR_11],
        [],
        (0, 1),
        sorted(r["id"] for r in BASE_ROWS if r["id"] not in (111, 112)),
    ),
    "two data columns": (
        [
            ReplaceWindow("ts", at(10, 15), at(12, 15), Interval.CLOSED_OPEN),
            ReplaceWindow("id", 101, 111, Interval.CLOSED_CLOSED),
        ],
        [],
        (0, 2),
        sorted(r["id"] for r in BASE_ROWS if r["id"] not in (101, 102, 110, 111)),
    ),
}


@pytest.mark.parametrize(("windows", "new", "files", "ids"), REGIONS.values(), ids=REGIONS.keys())
def test_a_region_replaces_only_the_rows_in_every_window(
    table: Path,
    windows: list[ReplaceWindow],
    new: list[dict[str, Any]],
    files: tuple[int, int],
    ids: list[int],
) -> None:
    new_files = described(table, write_rows(table, new, "new")) if new else []
    plan = plan_replace(str(table), windows, new_files)
    delta = committer(table)
    outcome = commit_replace(
        delta,
        plan,
        schema=TABLE_SCHEMA,
        partition_by=["hour"],
        txns=[TxnVersion.next_of(APP, delta.transaction_version(APP))],
        custom_metadata={},
        now=lambda: FROZEN,
    )

    assert (len(plan.removed), len(plan.rewritten)) == files
    assert outcome.version == 1  # ONE commit
    assert ids_read_by_every_reader(table) == ids
    entry = json.loads(DeltaTable(str(table)).history(1)[0]["watermark_assets.replace"])
    assert [w["column"] for w in entry["windows"]] == [w.column for w in windows]


def test_a_new_row_outside_one_window_of_the_region_stops_the_replace(table: Path) -> None:
    region = [ReplaceWindow("ts", at(10), at(14), Interval.CLOSED_OPEN), HOUR_11]
    outside = described(table, write_rows(table, [{"id": 7, "ts": at(12, 5)}], "new"))

    with pytest.raises(RowsOutsideWindowError):
        plan_replace(str(table), region, outside)


def test_a_region_naming_a_column_twice_is_refused(table: Path) -> None:
    twice = [
        HOUR_11,
        ReplaceWindow("hour", "2024-01-01T12", "2024-01-01T12", Interval.CLOSED_CLOSED),
    ]

    with pytest.raises(ReplaceWindowError, match="at most one window per column"):
        plan_replace(str(table), twice, [])


# --- several regions in ONE commit, and merge keys moving a key's rows out of other windows ---


def hour_window(hour: int) -> ReplaceWindow:
    return ReplaceWindow("ts", at(hour), at(hour + 1), Interval.CLOSED_OPEN)


def hour_rows(hour: int) -> list[dict[str, Any]]:
    return [r for r in BASE_ROWS if r["ts"].hour == hour]


@dataclass(frozen=True)
class RangeCase:
    #: each region (an hour, or a window) and the new rows replacing it
    parts: list[tuple[int | ReplaceWindow, list[dict[str, Any]]]]
    moves: bool
    #: id -> its one row's ts after the commit, for the ids that changed
    expected_ts: dict[int, datetime]
    removed_by_region: tuple[int, ...]
    moved: int
    superseded: int
    #: table files whose key columns are read (the others are skipped by their statistics)
    keys_read: set[str] = field(default_factory=set)


RANGE_CASES = {
    "two windows, one commit, no keys": RangeCase(
        [(10, hour_rows(10)), (11, [*hour_rows(11), {"id": 999, "ts": at(11, 5)}])],
        moves=False,
        expected_ts={999: at(11, 5)},
        removed_by_region=(3, 3),
        moved=0,
        superseded=0,
    ),
    "a row whose time moved into the replaced window leaves its old window": RangeCase(
        [(12, [*hour_rows(12), {"id": 101, "ts": at(12, 45)}])],
        moves=True,
        expected_ts={101: at(12, 45)},
        removed_by_region=(3,),
        moved=1,
        superseded=0,
        keys_read={"hour=2024-01-01T10/base.parquet"},  # ids 100..102; 11 and 13 are skipped
    ),
    "an old version read again never replaces the table's newer row": RangeCase(
        [(11, [*hour_rows(11), {"id": 131, "ts": at(11, 15)}])],
        moves=True,
        expected_ts={131: at(13, 30)},
        removed_by_region=(3,),
        moved=0,
        superseded=1,
        keys_read={"hour=2024-01-01T13/base.parquet"},
    ),
    "a file straddling the region is rewritten; a moved key's file too": RangeCase(
        [
            (
                ReplaceWindow("ts", at(13), at(13, 30), Interval.CLOSED_OPEN),
                [{"id": 130, "ts": at(13)}, {"id": 101, "ts": at(13, 20)}],
            )
        ],
        moves=True,
        expected_ts={101: at(13, 20), 131: at(13, 30)},
        removed_by_region=(1,),
        moved=1,
        superseded=0,
        keys_read={"hour=2024-01-01T10/base.parquet", "hour=2024-01-01T13/base.parquet"},
    ),
    "one key in two windows of one run: the newest row wins": RangeCase(
        [
            (10, [*hour_rows(10), {"id": 777, "ts": at(10, 10)}]),
            (11, [*hour_rows(11), {"id": 777, "ts": at(11, 10)}]),
        ],
        moves=True,
        expected_ts={777: at(11, 10)},
        removed_by_region=(3, 3),
        moved=0,
        superseded=1,
    ),
}


@pytest.mark.parametrize("case", RANGE_CASES.values(), ids=RANGE_CASES.keys())
def test_regions_replaced_in_one_commit_and_keys_moved_out_of_other_windows(
    table: Path, case: RangeCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A range run replaces all its windows in ONE commit; with merge keys every key ends in
    exactly one window, its newest row's."""
    import watermark_assets.delta.replace as replace_module

    real = replace_module.read_key_columns
    read: list[str] = []

    def spy(table_uri: str, path: str, *args: Any) -> pa.Table:
        read.append(path)
        return real(table_uri, path, *args)

    monkeypatch.setattr(replace_module, "read_key_columns", spy)
    parts = [
        (
            hour_window(region) if isinstance(region, int) else region,
            described(table, write_rows(table, rows, f"new{number}")),
        )
        for number, (region, rows) in enumerate(case.parts)
    ]
    before = committer(table).current_version()
    plan = plan_replace_regions(
        str(table), parts, moves=KeyMoves(("id",), "ts") if case.moves else None
    )
    delta = committer(table)
    outcome = commit_replace(
        delta,
        plan,
        schema=TABLE_SCHEMA,
        partition_by=["hour"],
        txns=[TxnVersion.next_of(APP, delta.transaction_version(APP))],
        custom_metadata={},
        now=lambda: FROZEN,
    )

    assert outcome.version == (before or 0) + 1, "ONE commit"
    rows = DeltaTable(str(table)).to_pyarrow_table(columns=["id", "ts"]).to_pylist()
    ids = [r["id"] for r in rows]
    assert sorted(ids) == sorted(set(BASE_IDS) | set(case.expected_ts)), "each id exactly once"
    for id_, ts in case.expected_ts.items():
        assert [r["ts"] for r in rows if r["id"] == id_] == [ts]
    assert plan.rows_removed_by_region == case.removed_by_region
    assert (plan.rows_moved, plan.rows_superseded) == (case.moved, case.superseded)
    assert {p for p in read if "base" in p} == case.keys_read
    assert outcome.version is not None
    commit = DeltaCommitter(str(table)).read_commit(outcome.version)
    entry = json.loads(commit.custom_metadata[REPLACE_METADATA_KEY])
    assert len(entry.get("regions", [entry["window"]])) == len(case.parts)
    live = {
        Path(unquote(uri.removeprefix("file://"))).name
        for uri in DeltaTable(str(table)).file_uris()
    }
    stray = {p for p in table_parquet_files(table) if "/new" in p and Path(p).name not in live}
    assert not stray, "a superseded new file is deleted once its remainder is committed"
