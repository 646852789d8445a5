"""engine/write.py: the run's ONE commit in each write mode, on small Delta tables (no Spark).

Table-driven: each case starts from a table (none, or ids 1-4) and some staged rows, writes them
in one mode with one record, and states the commit: its version (or why there is none), the
table's ids after it, the commitInfo entries and what the lineage was told.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from watermark_assets.core.replace_window import Interval, ReplaceWindow
from watermark_assets.delta.committer import DeltaCommitter, TxnVersion, committer_for
from watermark_assets.delta.log import DeltaLog
from watermark_assets.delta.merge import MERGE_METADATA_KEY, MergePlan
from watermark_assets.delta.replace import REPLACE_METADATA_KEY, KeyMoves, ReplacePlan
from watermark_assets.delta.rewrite import RewritePlan
from watermark_assets.engine.write import (
    Append,
    Merge,
    Replace,
    ReplaceTable,
    RunRecord,
    StagedFiles,
    WriteMode,
    Written,
    write,
)

NOW = datetime(2024, 1, 2, tzinfo=timezone.utc)
SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string())])
APP = "watermark_assets/orders/test"
LINEAGE = "watermark_assets.column_run"


def window(lower: int | None, upper: int) -> ReplaceWindow:
    return ReplaceWindow("id", lower, upper, Interval.CLOSED_CLOSED)


@dataclass(frozen=True)
class Case:
    mode: WriteMode
    staged: Sequence[Sequence[tuple[int, str]]]  # each read's rows (one staged file each)
    table: bool = True  # the table holds ids 1-4 (value "old") before the write
    records_completion: bool = False
    #: the schema of a read of no row (a zero-row Parquet file's); None: not written
    empty_schema: pa.Schema | None = None
    #: the version committed, or None with a reason containing ``skipped``
    version: int | None = 1
    skipped: str = ""
    rows: Mapping[int, str] = field(default_factory=dict)  # id -> value after the write
    plan: type[RewritePlan] | None = None  # what the lineage was given
    entry: str | None = None  # the plan's own commitInfo entry
    removed: int = 0
    added: Sequence[int] = ()  # rows each read added


OLD = {i: "old" for i in (1, 2, 3, 4)}

CASES = {
    "append into a table": Case(
        Append(), [[(5, "new"), (6, "new")]], rows={**OLD, 5: "new", 6: "new"}, added=[2]
    ),
    "append creates the table with its files": Case(
        Append(), [[(5, "new")]], table=False, version=0, rows={5: "new"}, added=[1]
    ),
    "replace one region": Case(
        Replace((window(2, 3),)),
        [[(2, "new")]],
        rows={1: "old", 2: "new", 4: "old"},
        plan=ReplacePlan,
        entry=REPLACE_METADATA_KEY,
        removed=2,
        added=[1],
    ),
    "replace two regions, each by its read, in one commit": Case(
        Replace((window(1, 1), window(3, 4))),
        [[(1, "new")], [(3, "new")]],
        rows={1: "new", 2: "old", 3: "new"},
        plan=ReplacePlan,
        entry=REPLACE_METADATA_KEY,
        removed=3,
        added=[1, 1],
    ),
    "replace a region of rows deleted at the source: removes them": Case(
        Replace((window(3, 4),)),
        [[]],
        rows={1: "old", 2: "old"},
        plan=ReplacePlan,
        entry=REPLACE_METADATA_KEY,
        removed=2,
        added=[0],
    ),
    "replace nothing by nothing: no empty commit": Case(
        Replace((window(7, 9),)),
        [[]],
        version=None,
        skipped="no row read and no row of the table where id in [7, 9]: nothing to commit",
        rows=OLD,
    ),
    "replace nothing by nothing, recording completion: txns and entries only": Case(
        Replace((window(7, 9),)),
        [[]],
        records_completion=True,
        rows=OLD,
        plan=ReplacePlan,
        entry=REPLACE_METADATA_KEY,
        added=[0],
    ),
    "merge on keys: updates and inserts": Case(
        Merge(("id",)),
        [[(2, "new"), (9, "new")]],
        rows={**OLD, 2: "new", 9: "new"},
        plan=MergePlan,
        entry=MERGE_METADATA_KEY,
        removed=1,
        added=[2],
    ),
    "merge into no table creates it": Case(
        Merge(("id",)),
        [[(2, "new")]],
        table=False,
        version=0,
        rows={2: "new"},
        plan=MergePlan,
        entry=MERGE_METADATA_KEY,
        added=[1],
    ),
    "replace a region, the last read appended beside it": Case(
        Replace((window(2, 3),), appended=1),
        [[(2, "new")], [(9, "new")]],
        rows={1: "old", 2: "new", 4: "old", 9: "new"},
        plan=ReplacePlan,
        entry=REPLACE_METADATA_KEY,
        removed=2,
        added=[1, 1],
    ),
    "replace the table: every file of the version read removed": Case(
        ReplaceTable(0),
        [[(5, "new"), (6, "new")]],
        rows={5: "new", 6: "new"},
        plan=RewritePlan,
        removed=4,
        added=[2],
    ),
    "replace the table by no row, recording completion: emptied": Case(
        ReplaceTable(0),
        [[]],
        records_completion=True,
        plan=RewritePlan,
        removed=4,
        added=[0],
    ),
    "replace a table read before it existed: the commit creates it": Case(
        ReplaceTable(-1),
        [[(5, "new")]],
        table=False,
        version=0,
        rows={5: "new"},
        plan=RewritePlan,
        added=[1],
    ),
    "no row, no table, recording completion: the commit creates the table, no file": Case(
        Replace((window(1, 2),)),
        [[]],
        table=False,
        records_completion=True,
        empty_schema=SCHEMA,
        version=0,
        added=[0],
    ),
    "no row, no table, no schema: nothing": Case(
        Replace((window(1, 2),)),
        [[]],
        table=False,
        records_completion=True,
        version=None,
        skipped="no row read and no table yet",
    ),
    "no row, no table, no completion to record: nothing": Case(
        Append(),
        [[]],
        table=False,
        empty_schema=SCHEMA,
        version=None,
        skipped="no row read and no table yet",
    ),
}


def make_table(uri: Path) -> None:
    path = uri / "base.parquet"
    uri.mkdir(parents=True)
    rows = [{"id": i, "value": "old"} for i in OLD]
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)
    committer = DeltaCommitter(str(uri))
    from watermark_assets.delta.stats import describe_data_files

    outcome = committer.commit(
        describe_data_files(str(uri), ["base.parquet"], []),
        schema=SCHEMA,
        partition_by=[],
        txns=[TxnVersion("someone/else", 1)],
        custom_metadata={},
    )
    assert outcome.version == 0


def stage(uri: Path, reads: Sequence[Sequence[tuple[int, str]]]) -> list[StagedFiles]:
    """Each read's rows as one Parquet file under ``_staging/{token}`` (none for no row)."""
    staged = []
    for n, rows in enumerate(reads):
        token = f"token{n}"
        folder = uri / "_staging" / token
        folder.mkdir(parents=True)
        files: tuple[str, ...] = ()
        if rows:
            table = pa.Table.from_pylist([{"id": i, "value": v} for i, v in rows], schema=SCHEMA)
            pq.write_table(table, folder / "part-0.parquet")
            files = (str(folder / "part-0.parquet"),)
        staged.append(StagedFiles(token, str(folder), files))
    return staged


def ids(uri: Path) -> dict[int, str]:
    if not (uri / "_delta_log").exists():
        return {}
    rows = DeltaTable(str(uri)).to_pyarrow_table().to_pylist()
    return {r["id"]: r["value"] for r in sorted(rows, key=lambda r: r["id"])}


def run(case: Case, uri: Path, txns: Sequence[TxnVersion] = ()) -> tuple[Written, list[Any]]:
    if case.table:
        make_table(uri)
    staged = stage(uri, case.staged)
    seen: list[Any] = []

    def lineage(plan: RewritePlan | None) -> dict[str, str]:
        seen.append(plan)
        return {LINEAGE: json.dumps({"rows_removed": 0 if plan is None else plan.rows_removed})}

    written = write(
        committer_for(str(uri), now=lambda: NOW),
        staged,
        case.mode,
        RunRecord(
            tuple(txns) or (TxnVersion(APP, 1, None),),
            {"watermark_assets.state": "{}"},
            lineage,
            records_completion=case.records_completion,
        ),
        schema=SCHEMA if any(case.staged) else case.empty_schema,
        partition_by=[],
        now=lambda: NOW,
    )
    return written, seen


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_the_write_mode_makes_one_commit(case: Case, tmp_path: Path) -> None:
    uri = tmp_path / "orders"
    written, seen = run(case, uri)

    assert written.outcome.version == case.version, written.outcome.reason
    assert not written.outcome.stale
    assert ids(uri) == dict(case.rows)
    if case.version is None:
        assert case.skipped in written.outcome.reason
        assert seen == []
        return
    commit = DeltaLog(str(uri), *_fs(uri)).read_commit(case.version)
    assert commit.txns == {APP: 1}, "the run's txn, once"
    keys = ["watermark_assets.state", LINEAGE] + ([case.entry] if case.entry else [])
    assert sorted(commit.custom_metadata) == sorted(keys)
    assert json.loads(commit.custom_metadata[LINEAGE]) == {"rows_removed": case.removed}
    assert len(seen) == 1
    assert (None if seen[0] is None else type(seen[0])) == case.plan
    assert written.rows_removed == case.removed
    assert [written.rows_added(i) for i in range(len(case.staged))] == list(case.added)
    assert not list((uri / "_staging").glob("*/*.parquet")), "every staged file moved"


def _fs(uri: Path) -> tuple[Any, str]:
    from watermark_assets import storage

    return storage.filesystem(str(uri))


@pytest.mark.parametrize(
    "mode",
    [Append(), Replace((window(2, 3),)), Merge(("id",)), ReplaceTable(0)],
    ids=["append", "replace", "merge", "replace the table"],
)
def test_a_stale_txn_commits_nothing_and_takes_the_moved_files_out(
    mode: WriteMode, tmp_path: Path
) -> None:
    """Another writer committed the run's app id since it planned: nothing is committed and the
    files moved into the table are deleted (no orphan); the caller plans again."""
    uri = tmp_path / "orders"
    case = Case(mode, [[(2, "new")]])
    written, _ = run(case, uri, txns=[TxnVersion(APP, 2, 1)])  # the table has none

    assert written.outcome.stale and written.outcome.version is None
    assert ids(uri) == OLD
    data = {p.name for p in uri.glob("*.parquet")}
    assert data == {"base.parquet"}, "the moved file is no part of the table"
    assert DeltaTable(str(uri)).version() == 0


def test_a_replace_needs_one_region_per_read(tmp_path: Path) -> None:
    uri = tmp_path / "orders"
    with pytest.raises(ValueError, match="the range read was not given"):
        run(Case(Replace.read_range(), [[(2, "new")]]), uri)
    with pytest.raises(ValueError, match="one region per read: 1 region"):
        run(Case(Replace((window(1, 2),)), [[], []]), tmp_path / "other")
    with pytest.raises(ValueError, match=r"1 region\(s\) and 1 appended, 1 read\(s\)"):
        run(Case(Replace((window(1, 2),), appended=1), [[]]), tmp_path / "third")


@pytest.mark.parametrize(
    ("read_version", "stale"),
    [(0, False), (-1, True)],
    ids=["the version read", "a table that moved since (created)"],
)
def test_replace_table_removes_the_files_of_the_version_read_pinned_to_it(
    read_version: int, stale: bool, tmp_path: Path
) -> None:
    """``ReplaceTable(read_version)``: remove actions for every file of that version (the log's
    path, no partition values, deleted at the run's clock), in a commit pinned to it; a table
    that moved since makes it stale, and the moved files are taken out again."""
    uri = tmp_path / "state"
    written, _ = run(Case(ReplaceTable(read_version), [[(5, "new")]]), uri)

    assert written.outcome.stale is stale, written.outcome.reason
    if stale:
        assert "moved from version -1 to 0" in written.outcome.reason
        assert ids(uri) == OLD and {p.name for p in uri.glob("*.parquet")} == {"base.parquet"}
        return
    actions = [json.loads(line) for line in (uri / "_delta_log" / f"{1:020d}.json").open()]
    removes = [a["remove"] for a in actions if "remove" in a]
    assert removes == [
        {
            "path": "base.parquet",
            "dataChange": True,
            "deletionTimestamp": int(NOW.timestamp() * 1000),
            "extendedFileMetadata": False,
            "size": (uri / "base.parquet").stat().st_size,
        }
    ]
    assert written.rows_removed == 4 and ids(uri) == {5: "new"}


def test_key_moves_take_a_keys_rows_out_of_other_regions(tmp_path: Path) -> None:
    """``Replace(regions, moves)``: the new row of key ``"old"`` (ordered by ``id``: the newest)
    moves that key's rows out of the rest of the table, in the same commit."""
    uri = tmp_path / "orders"
    make_table(uri)
    written = write(
        committer_for(str(uri)),
        stage(uri, [[(5, "old")]]),
        Replace((window(5, 5),), KeyMoves(("value",), "id")),
        RunRecord((TxnVersion(APP, 1, None),), {}),
        schema=SCHEMA,
        partition_by=[],
    )
    assert written.outcome.version == 1
    assert ids(uri) == {5: "old"}
    assert (written.rows_moved, written.rows_removed_by_region) == (4, (0,))
    assert written.rows_added(0) == 1


def test_committer_for_takes_a_table_config_or_its_uri(tmp_path: Path) -> None:
    @dataclass
    class Table:
        uri: str

    uri = str(tmp_path / "t")
    assert committer_for(Table(uri)).table_uri == uri == committer_for(uri).table_uri
