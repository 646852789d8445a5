"""Merge on keys (seed 001's merge_keys) on real Delta tables in tmp_path.

Every merge is ONE Delta commit (remove + add actions); readers are deltalake, Polars and DuckDB.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from watermark_assets.delta import merge as merge_module
from watermark_assets.delta.committer import DeltaCommitter, TxnVersion
from watermark_assets.delta.merge import MERGE_METADATA_KEY, MergePlan, commit_merge, plan_merge
from watermark_assets.delta.stats import DataFile, describe_data_files
from watermark_assets.exceptions import MergeKeyError

UTC = timezone.utc
FROZEN = datetime(2024, 1, 2, 0, 0, tzinfo=UTC)
FILE_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("region", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("amount", pa.float64()),
    ]
)
TABLE_SCHEMA = FILE_SCHEMA.append(pa.field("hour", pa.string()))
APP = "watermark_assets/orders/column"


def at(hour: int, minute: int = 0, second: int = 0, micro: int = 0) -> datetime:
    return datetime(2024, 1, 1, hour, minute, second, micro, tzinfo=UTC)


def hour_key(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H")


def row(id_: int, ts: datetime, amount: float | None = None, region: str | None = None) -> dict:
    region = region if region is not None else ("us" if id_ % 2 else "eu")
    return {
        "id": id_,
        "region": region,
        "ts": ts,
        "amount": float(id_) if amount is None else amount,
    }


# The table before every merge: hours 10-13, one file per hour, three rows each. Ids: hour*10+n,
# region "eu" for even ids, "us" for odd ones.
BASE_ROWS = [row(h * 10 + n, at(h, 20 * n)) for h in (10, 11, 12, 13) for n in range(3)]


def write_rows(table: Path, rows: Sequence[Mapping[str, Any]], name: str) -> list[str]:
    """Write rows the way Spark does: one file per hour partition, the hour only in the path."""
    by_hour: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_hour.setdefault(hour_key(r["ts"]), []).append(r)
    written = []
    for hour, hour_rows in sorted(by_hour.items()):
        relative = f"hour={hour}/{name}.parquet"
        (table / f"hour={hour}").mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(hour_rows, schema=FILE_SCHEMA), table / relative)
        written.append(relative)
    return written


def described(table: Path, relative: Sequence[str]) -> list[DataFile]:
    return describe_data_files(str(table), relative, ["hour"])


def committer(table: Path) -> DeltaCommitter:
    return DeltaCommitter(str(table), now=lambda: FROZEN)


def append(table: Path, rows: Sequence[Mapping[str, Any]], name: str, app_id: str) -> int:
    delta = committer(table)
    outcome = delta.commit(
        described(table, write_rows(table, rows, name)),
        schema=TABLE_SCHEMA,
        partition_by=["hour"],
        txns=[TxnVersion.next_of(app_id, delta.transaction_version(app_id))],
        custom_metadata={},
    )
    assert outcome.version is not None, outcome
    return outcome.version


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "orders"
    append(path, BASE_ROWS, "base", "watermark_assets/orders/load")
    return path


def merge(
    table: Path, keys: Sequence[str], new_rows: Sequence[Mapping[str, Any]], name: str = "new"
) -> tuple[MergePlan, int | None]:
    new_files = described(table, write_rows(table, new_rows, name))
    plan = plan_merge(str(table), keys, new_files)
    delta = committer(table)
    outcome = commit_merge(
        delta,
        plan,
        schema=TABLE_SCHEMA,
        partition_by=["hour"],
        txns=[TxnVersion.next_of(APP, delta.transaction_version(APP))],
        custom_metadata={"watermark_assets": "{}"},
        now=lambda: FROZEN,
    )
    return plan, outcome.version


def rows_read_by_every_reader(table: Path) -> list[tuple[int, str, float]]:
    """(id, region, amount) as deltalake, Polars and DuckDB read them (DuckDB: the live files)."""
    columns = ["id", "region", "amount"]
    by_deltalake = sorted(
        tuple(r.values())
        for r in DeltaTable(str(table)).to_pyarrow_table(columns=columns).to_pylist()
    )
    by_polars = sorted(pl.read_delta(str(table)).select(columns).iter_rows())
    uris = DeltaTable(str(table)).file_uris()
    query = f"SELECT id, region, amount FROM read_parquet({uris!r})"
    by_duckdb = sorted(duckdb.execute(query).fetchall())
    assert by_deltalake == by_polars == by_duckdb
    return by_deltalake  # type: ignore[return-value]


def log_actions(table: Path, version: int) -> list[dict[str, Any]]:
    text = (table / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def table_parquet_files(table: Path) -> set[str]:
    return {str(p.relative_to(table)) for p in table.rglob("*.parquet")}


def base_with(*changed: Mapping[str, Any], removed: Sequence[tuple[int, str]] = ()) -> list:
    """BASE_ROWS with ``changed`` rows replacing those of the same (id, region) key, plus new."""
    keyed = {(r["id"], r["region"]): r for r in BASE_ROWS}
    for key in removed:
        del keyed[key]
    for r in changed:
        keyed[(r["id"], r["region"])] = r
    return sorted((r["id"], r["region"], r["amount"]) for r in keyed.values())


@dataclass(frozen=True)
class Case:
    keys: list[str]
    new_rows: list[dict[str, Any]]
    expected: list[tuple[int, str, float]]
    removed: int
    rewritten: int
    skipped_by_statistics: int
    updated: int
    inserted: int


UPDATED_111 = row(111, at(11, 50), 999.0)
MOVED_101 = row(101, at(13, 30), 555.0)
NEW_900 = row(900, at(13, 40))

CASES = {
    "an updated row replaces its old version; its file is rewritten, the others never read": Case(
        ["id"],
        [UPDATED_111],
        base_with(UPDATED_111),
        removed=0,
        rewritten=1,
        skipped_by_statistics=3,
        updated=1,
        inserted=0,
    ),
    "a row whose new version lands in another partition leaves its old file": Case(
        ["id"],
        [MOVED_101, NEW_900],
        base_with(MOVED_101, NEW_900),
        removed=0,
        rewritten=1,
        skipped_by_statistics=3,
        updated=1,
        inserted=1,
    ),
    "a file whose every row is updated is removed, not rewritten": Case(
        ["id"],
        [row(i, at(12, 59), -1.0) for i in (120, 121, 122)],
        base_with(*(row(i, at(12, 59), -1.0) for i in (120, 121, 122))),
        removed=1,
        rewritten=0,
        skipped_by_statistics=3,
        updated=3,
        inserted=0,
    ),
    "only new keys: nothing removed, every file skipped by its statistics": Case(
        ["id"],
        [NEW_900, row(901, at(10, 1))],
        base_with(NEW_900, row(901, at(10, 1))),
        removed=0,
        rewritten=0,
        skipped_by_statistics=4,
        updated=0,
        inserted=2,
    ),
    "composite keys (region, id): only the exact pair is replaced": Case(
        ["region", "id"],
        [row(111, at(11, 55), 1.5, "us"), row(110, at(11, 55), 2.5, "us")],
        base_with(row(111, at(11, 55), 1.5, "us"), row(110, at(11, 55), 2.5, "us")),
        removed=0,
        rewritten=1,
        skipped_by_statistics=3,  # id proves it: no 110/111 outside hour 11
        updated=1,  # (us, 111); (eu, 110) stays next to the new (us, 110)
        inserted=1,
    ),
    "a partition column in the key: its folder value proves which files can hold it": Case(
        ["hour", "id"],
        [row(111, at(11, 59), 7.0), row(121, at(13, 5), 8.0)],
        # (hour 13, 121) is new: the 121 of hour 12 is another key and stays
        sorted([*base_with(row(111, at(11, 59), 7.0)), (121, "us", 8.0)]),
        removed=0,
        rewritten=1,
        skipped_by_statistics=3,  # hours 10 and 12 by their folder, hour 13 by its ids
        updated=1,
        inserted=1,
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_merge_on_keys_in_one_commit(
    table: Path, case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = DeltaTable(str(table)).version()
    base_files = {
        a["add"]["path"] for a in log_actions(table, before) if "add" in a
    }  # one per hour
    read: list[str] = []
    real_read_keys = merge_module.read_key_columns

    def spy(table_uri: str, path: str, *args: Any) -> pa.Table:
        read.append(path)
        return real_read_keys(table_uri, path, *args)

    monkeypatch.setattr(merge_module, "read_key_columns", spy)

    plan, version = merge(table, case.keys, case.new_rows)

    assert version == before + 1, "ONE commit"
    assert DeltaTable(str(table)).version() == version
    assert rows_read_by_every_reader(table) == case.expected
    assert (len(plan.removed), len(plan.rewritten), plan.files_skipped_by_statistics) == (
        case.removed,
        case.rewritten,
        case.skipped_by_statistics,
    )
    assert (plan.rows_updated, plan.rows_inserted) == (case.updated, case.inserted)
    actions = log_actions(table, version)
    assert sum("commitInfo" in a for a in actions) == 1
    removes = {a["remove"]["path"] for a in actions if "remove" in a}
    assert len(removes) == case.removed + case.rewritten
    assert removes <= base_files
    adds = [a["add"] for a in actions if "add" in a]
    assert len(adds) == len(plan.add_files())
    assert [a["txn"]["appId"] for a in actions if "txn" in a] == [APP]
    # The table's files that statistics proved keyless were never opened, nor removed.
    base_read = [p for p in read if "base" in p]
    assert len(base_read) == len(base_files) - case.skipped_by_statistics
    assert removes <= set(base_read)
    recorded = json.loads(DeltaTable(str(table)).history(1)[0][MERGE_METADATA_KEY])
    assert recorded == plan.metadata()
    assert recorded["keys"] == case.keys
    assert (recorded["rows_updated"], recorded["rows_inserted"]) == (case.updated, case.inserted)


def test_rewritten_remainders_keep_every_column_and_value(table: Path) -> None:
    merge(table, ["id"], [UPDATED_111])

    rows = sorted(DeltaTable(str(table)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    expected = sorted(
        ({**r, "hour": hour_key(r["ts"])} for r in [*BASE_ROWS[:4], UPDATED_111, *BASE_ROWS[5:]]),
        key=lambda r: r["id"],
    )
    assert rows == expected


def test_merging_the_same_rows_again_leaves_the_table_identical_in_content(table: Path) -> None:
    same = [dict(r) for r in BASE_ROWS]
    content = sorted(DeltaTable(str(table)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])

    plan, version = merge(table, ["id"], same)

    assert version == 1
    assert (plan.rows_updated, plan.rows_inserted, len(plan.removed)) == (12, 0, 4)
    after = sorted(DeltaTable(str(table)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert after == content


def test_a_key_held_twice_by_the_table_is_left_once(table: Path) -> None:
    append(table, [row(111, at(11, 5), 3.0)], "appended_twice", "someone/else")

    plan, _ = merge(table, ["id"], [UPDATED_111])

    assert (plan.rows_updated, plan.rows_removed) == (1, 2)
    assert [r for r in rows_read_by_every_reader(table) if r[0] == 111] == [(111, "us", 999.0)]


def test_a_merge_into_a_table_that_does_not_exist_yet_creates_it(tmp_path: Path) -> None:
    path = tmp_path / "fresh"

    plan, version = merge(path, ["id"], [row(1, at(10)), row(2, at(11))])

    assert (plan.read_version, version, plan.rows_inserted) == (-1, 0, 2)
    assert [r[0] for r in rows_read_by_every_reader(path)] == [1, 2]


def commit_single_file(path: Path, data: pa.Table, stats: dict[str, Any]) -> None:
    """A table of one unpartitioned file whose add action carries ``stats`` (as another writer's
    statistics, e.g. Delta Spark's cut strings)."""
    path.mkdir(parents=True)
    pq.write_table(data, path / "old.parquet")
    (file,) = describe_data_files(str(path), ["old.parquet"], [])
    forged = DataFile(
        file.path,
        file.size,
        file.modification_time,
        {},
        file.num_records,
        json.dumps({"numRecords": file.num_records, **stats}),
    )
    outcome = committer(path).commit(
        [forged],
        schema=data.schema,
        partition_by=[],
        txns=[TxnVersion("load", 1)],
        custom_metadata={},
    )
    assert outcome.version == 0


def merge_unpartitioned(path: Path, keys: Sequence[str], new: pa.Table) -> MergePlan:
    before = DeltaTable(str(path)).version()
    pq.write_table(new, path / "new.parquet")
    plan = plan_merge(str(path), keys, describe_data_files(str(path), ["new.parquet"], []))
    outcome = commit_merge(
        committer(path),
        plan,
        schema=new.schema,
        partition_by=[],
        txns=[TxnVersion(APP, 1)],
        custom_metadata={},
    )
    assert outcome.version == before + 1
    return plan


LONG = "k" * 32
STATISTICS_NOT_TRUSTED = {
    "a string maximum at the 32-character cut may have been cut": (
        pa.table({"k": [LONG + "z", "a"], "v": [1, 2]}),
        {"minValues": {"k": "a"}, "maxValues": {"k": LONG}, "nullCount": {"k": 0}},
        pa.table({"k": [LONG + "z"], "v": [10]}),
        [2, 10],
    ),
    "a float column (NaN is in no statistic)": (
        pa.table({"k": [1.0, math.nan], "v": [1, 2]}),
        {"minValues": {"k": 1.0}, "maxValues": {"k": 1.0}, "nullCount": {"k": 0}},
        pa.table({"k": [math.nan], "v": [10]}),
        [1, 10],
    ),
    "a timestamp maximum on a whole millisecond may have been cut there": (
        pa.table({"k": pa.array([at(10, 0, 0, 123_456)], pa.timestamp("us", tz="UTC")), "v": [1]}),
        {
            "minValues": {"k": "2024-01-01T10:00:00.123Z"},
            "maxValues": {"k": "2024-01-01T10:00:00.123Z"},
            "nullCount": {"k": 0},
        },
        pa.table({"k": pa.array([at(10, 0, 0, 123_456)], pa.timestamp("us", tz="UTC")), "v": [10]}),
        [10],
    ),
}


@pytest.mark.parametrize(
    ("old", "stats", "new", "values"),
    STATISTICS_NOT_TRUSTED.values(),
    ids=STATISTICS_NOT_TRUSTED.keys(),
)
def test_statistics_that_cannot_prove_a_file_keyless_make_it_read(
    tmp_path: Path, old: pa.Table, stats: dict[str, Any], new: pa.Table, values: list[int]
) -> None:
    path = tmp_path / "t"
    commit_single_file(path, old, stats)

    plan = merge_unpartitioned(path, ["k"], new)

    assert (plan.files_skipped_by_statistics, plan.files_read, plan.rows_updated) == (0, 1, 1)
    assert sorted(DeltaTable(str(path)).to_pyarrow_table().column("v").to_pylist()) == values


def test_statistics_written_by_delta_rs_skip_files_that_cannot_hold_a_key(tmp_path: Path) -> None:
    path = tmp_path / "rs"
    for ids in ([1, 2, 3], [4, 5, 6], [7, 8, 9]):
        write_deltalake(str(path), pa.table({"k": ids, "v": [0] * 3}), mode="append")

    plan = merge_unpartitioned(path, ["k"], pa.table({"k": [5, 100], "v": [1, 1]}))

    assert (plan.files_skipped_by_statistics, plan.files_read) == (2, 1)
    assert (plan.rows_updated, plan.rows_inserted) == (1, 1)
    assert sorted(DeltaTable(str(path)).to_pyarrow_table().column("k").to_pylist()) == [
        *range(1, 10),
        100,
    ]


REFUSED = {
    "a null in a key column of a new row": (["id"], [row(111, at(11, 50)) | {"id": None}], "id"),
    "a null in one column of a composite key": (
        ["region", "id"],
        [row(111, at(11, 50)) | {"region": None}],
        "region",
    ),
    "a merge key that is not a column": (["order_id"], [UPDATED_111], "order_id"),
    "the same key twice among the new rows": (
        ["id"],
        [UPDATED_111, row(111, at(11, 51))],
        None,
    ),
}


@pytest.mark.parametrize(("keys", "rows", "column"), REFUSED.values(), ids=REFUSED.keys())
def test_a_merge_that_cannot_be_exact_is_refused_before_anything_is_written(
    table: Path, keys: list[str], rows: list[dict[str, Any]], column: str | None
) -> None:
    new_files = described(table, write_rows(table, rows, "new"))
    files = table_parquet_files(table)
    content = rows_read_by_every_reader(table)

    with pytest.raises(MergeKeyError) as refused:
        plan_merge(str(table), keys, new_files)

    assert refused.value.column == column
    assert "Nothing was committed" in str(refused.value)
    if column is not None:
        assert repr(column) in str(refused.value)
    assert DeltaTable(str(table)).version() == 0
    assert table_parquet_files(table) == files  # no remainder was written
    assert rows_read_by_every_reader(table) == content


def test_a_table_with_deletion_vectors_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dv"
    write_deltalake(
        str(path),
        pa.table({"k": [1, 2], "v": [0, 0]}),
        configuration={"delta.enableDeletionVectors": "true"},
    )
    pq.write_table(pa.table({"k": [1], "v": [1]}), path / "new.parquet")

    with pytest.raises(MergeKeyError, match="deletion vectors"):
        plan_merge(str(path), ["k"], describe_data_files(str(path), ["new.parquet"], []))

    assert DeltaTable(str(path)).version() == 0


def test_a_commit_between_plan_and_commit_makes_the_merge_stale_and_a_new_plan_commits(
    table: Path,
) -> None:
    new_files = described(table, write_rows(table, [UPDATED_111], "new"))
    plan = plan_merge(str(table), ["id"], new_files)
    remainders = {r.remainder.path for r in plan.rewritten if r.remainder}
    assert remainders
    # Another writer appends a second row with key 111 after the plan: merging from the old
    # snapshot would leave it next to ours, so the plan is stale.
    append(table, [row(111, at(11, 10), 5.0)], "other", "other")
    delta = committer(table)

    outcome = commit_merge(
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

    again = plan_merge(str(table), ["id"], new_files)
    outcome = commit_merge(
        delta,
        again,
        schema=TABLE_SCHEMA,
        partition_by=["hour"],
        txns=[TxnVersion.next_of(APP, None)],
        custom_metadata={},
    )

    assert outcome.version == 2
    assert rows_read_by_every_reader(table) == base_with(UPDATED_111)


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
            append(self._table_path, [row(800, at(13, 10))], "racer", "racer")
        return loaded


def test_a_commit_landing_while_the_merge_is_written_is_never_rebased_over(table: Path) -> None:
    new_files = described(table, write_rows(table, [UPDATED_111], "new"))
    plan = plan_merge(str(table), ["id"], new_files)

    outcome = commit_merge(
        RacingCommitter(table),
        plan,
        schema=TABLE_SCHEMA,
        partition_by=["hour"],
        txns=[TxnVersion.next_of(APP, None)],
        custom_metadata={},
    )

    assert outcome.stale and outcome.version is None
    assert DeltaTable(str(table)).version() == 1  # only the racer's commit
    assert (111, "us", 111.0) in rows_read_by_every_reader(table)
