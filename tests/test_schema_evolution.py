"""Schema evolution on the commit side (issue 25): reconcile, the evolving commit, its history.

- ``reconcile`` (pure): what a commit's files change in the table's schema, or one error naming
  each refused column, both types and the fix;
- the evolving commit: the new ``metaData`` (schema), the add actions and the txns in ONE Delta
  commit (a replace or merge: the schema commit, then the data commit on exactly that version);
  older files read back with NULL in the new columns and widened values;
- the history in the columns' metadata: kept by checkpoints, untouched by log cleanup;
- exactly-once: a crash between staging and commit, a crash between a replace's schema and data
  commits, two runs evolving at once, a backfill of a partition written under the old schema.

No Spark: the staged files are written with pyarrow, the tables are real Delta tables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from watermark_assets.core.replace_window import Interval, ReplaceWindow
from watermark_assets.delta.committer import CommitOutcome, DeltaCommitter, TxnVersion
from watermark_assets.delta.schema_change import (
    FIXED,
    ColumnAdded,
    ColumnWidened,
    SchemaChange,
    SchemaEvolution,
    events_of_versions,
    reconcile,
    schema_history,
)
from watermark_assets.delta.stats import describe_data_files
from watermark_assets.engine.write import Append, Replace, RunRecord, StagedFiles, write
from watermark_assets.exceptions import DeltaSchemaMismatchError, SchemaEvolutionError
from watermark_assets.faults import CRASH_ENV_VAR

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2024, 1, 2, tzinfo=timezone.utc)
ADD = SchemaEvolution(add_columns=True, widen=True)
BASE = pa.schema([("id", pa.int32()), ("value", pa.string())])


def schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema(list(fields))


# --- reconcile: pure, no table -------------------------------------------------------------

EVOLVES = {
    "the same columns: no change": (BASE, BASE, SchemaChange()),
    "a column the files lack: no change (it reads NULL)": (
        BASE,
        schema(("id", pa.int32())),
        SchemaChange(),
    ),
    "a new column at the end: added": (
        BASE,
        BASE.append(pa.field("note", pa.string())),
        SchemaChange(added=(ColumnAdded("note", "string"),)),
    ),
    "a new column in the middle: added at the end of the table": (
        BASE,
        schema(("id", pa.int32()), ("note", pa.string()), ("value", pa.string())),
        SchemaChange(added=(ColumnAdded("note", "string"),)),
    ),
    "a new NOT NULL column: added as nullable (older files lack it)": (
        BASE,
        BASE.append(pa.field("n", pa.int64(), nullable=False)),
        SchemaChange(added=(ColumnAdded("n", "long"),)),
    ),
    "int -> long: widened": (
        BASE,
        schema(("id", pa.int64()), ("value", pa.string())),
        SchemaChange(widened=(ColumnWidened("id", "integer", "long"),)),
    ),
    "int -> double: widened": (
        BASE,
        schema(("id", pa.float64()), ("value", pa.string())),
        SchemaChange(widened=(ColumnWidened("id", "integer", "double"),)),
    ),
    "byte -> short, short -> long, float -> double: widened": (
        schema(("b", pa.int8()), ("s", pa.int16()), ("f", pa.float32())),
        schema(("b", pa.int16()), ("s", pa.int64()), ("f", pa.float64())),
        SchemaChange(
            widened=(
                ColumnWidened("b", "byte", "short"),
                ColumnWidened("s", "short", "long"),
                ColumnWidened("f", "float", "double"),
            )
        ),
    ),
    "a file narrower than the widened table (a backfill of an old file): fits as it is": (
        schema(("id", pa.int64()), ("value", pa.string())),
        BASE,
        SchemaChange(),
    ),
    "a new nested column: added with its struct type": (
        BASE,
        BASE.append(pa.field("geo", pa.struct([("lat", pa.float64())]))),
        SchemaChange(
            added=(
                ColumnAdded(
                    "geo",
                    {
                        "type": "struct",
                        "fields": [
                            {"name": "lat", "type": "double", "nullable": True, "metadata": {}}
                        ],
                    },
                ),
            )
        ),
    ),
}


@pytest.mark.parametrize(("table", "files", "expected"), EVOLVES.values(), ids=list(EVOLVES))
def test_reconcile_says_what_the_commit_changes(
    table: pa.Schema, files: pa.Schema, expected: SchemaChange
) -> None:
    assert reconcile(table, files, add_columns=True, widen=True) == expected


REFUSED = {
    "a new column without add_columns": (
        BASE.append(pa.field("note", pa.string())),
        SchemaEvolution(widen=True),
        ("note", None, "string"),
        "schema.mode: add_columns",
    ),
    "a widening without widen": (
        schema(("id", pa.int64()), ("value", pa.string())),
        SchemaEvolution(add_columns=True),
        ("id", "integer", "long"),
        "schema.mode: add_columns",
    ),
    "a file narrower than the table without widen (today's behaviour)": (
        schema(("id", pa.int16()), ("value", pa.string())),
        SchemaEvolution(),
        ("id", "integer", "short"),
        "schema.mode: add_columns",
    ),
    "int -> string: Delta cannot": (
        schema(("id", pa.string()), ("value", pa.string())),
        ADD,
        ("id", "integer", "string"),
        "Delta cannot change integer to string",
    ),
    "string -> int: Delta cannot": (
        schema(("id", pa.int32()), ("value", pa.int32())),
        ADD,
        ("value", "string", "integer"),
        "schema.mode: rescue",
    ),
    "a column that differs only in case": (
        schema(("ID", pa.int32()), ("value", pa.string())),
        ADD,
        ("ID", None, "integer"),
        "Delta column names ignore case",
    ),
}


@pytest.mark.parametrize(
    ("files", "evolution", "first", "fix"), REFUSED.values(), ids=list(REFUSED)
)
def test_reconcile_refuses_naming_the_column_both_types_and_the_fix(
    files: pa.Schema, evolution: SchemaEvolution, first: tuple[Any, ...], fix: str
) -> None:
    with pytest.raises(SchemaEvolutionError) as caught:
        reconcile(
            BASE,
            files,
            add_columns=evolution.add_columns,
            widen=evolution.widen,
            table_uri="s3://lake/orders",
        )
    error = caught.value
    assert (error.column, error.table_type, error.file_type) == first
    assert isinstance(error, DeltaSchemaMismatchError), "callers catching the old error still do"
    assert repr(first[0]) in str(error) and "s3://lake/orders" in str(error)
    assert fix in str(error)
    assert "Nothing was committed" in str(error)


@pytest.mark.parametrize(
    ("table", "files", "reason"),
    [
        pytest.param(pa.int64(), pa.float64(), "2\\*\\*53", id="long -> double loses precision"),
        pytest.param(pa.date32(), pa.timestamp("us"), "timestamp_ntz", id="date -> timestamp_ntz"),
        pytest.param(
            pa.date32(),
            pa.timestamp("us", tz="UTC"),
            "Spark cannot read",
            id="date -> timestamp: Spark refuses the older files",
        ),
        pytest.param(
            pa.decimal128(10, 2),
            pa.decimal128(12, 2),
            "cannot change decimal\\(10,2\\) to decimal\\(12,2\\)",
            id="decimals",
        ),
        pytest.param(pa.int64(), pa.string(), "long to string", id="to string"),
    ],
)
def test_reconcile_refuses_what_delta_or_delta_rs_cannot_widen(
    table: pa.DataType, files: pa.DataType, reason: str
) -> None:
    with pytest.raises(SchemaEvolutionError, match=reason):
        reconcile(schema(("c", table)), schema(("c", files)), add_columns=True, widen=True)


@pytest.mark.parametrize(
    ("mode", "add_columns", "widen"),
    [
        ("fail", False, False),
        ("add_columns", True, True),
        ("rescue", True, False),
        ("ignore", False, False),
    ],
)
def test_each_schema_mode_gives_the_commit_its_permissions(
    mode: str, add_columns: bool, widen: bool
) -> None:
    evolution = SchemaEvolution.for_mode(mode, origin="f.csv")
    assert (evolution.add_columns, evolution.widen, evolution.origin) == (
        add_columns,
        widen,
        "f.csv",
    )


def test_an_unknown_schema_mode_is_refused_naming_the_modes() -> None:
    with pytest.raises(ValueError, match="'evolve' is none of"):
        SchemaEvolution.for_mode("evolve")


def test_reconcile_names_every_refused_column_in_one_error() -> None:
    files = schema(("id", pa.string()), ("value", pa.int32()), ("note", pa.string()))
    with pytest.raises(SchemaEvolutionError) as caught:
        reconcile(BASE, files, add_columns=False, widen=False)
    assert [r[0] for r in caught.value.refused] == ["id", "value", "note"]


# --- the evolving commit on real Delta tables ----------------------------------------------


def write_file(root: Path, relative: str, rows: Sequence[Mapping[str, Any]], s: pa.Schema) -> str:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows), schema=s), path)
    return relative


def committer(table: Path) -> DeltaCommitter:
    return DeltaCommitter(str(table), now=lambda: NOW)


def commit_file(
    table: Path,
    relative: str,
    rows: Sequence[Mapping[str, Any]],
    s: pa.Schema,
    txn: TxnVersion,
    *,
    partition_by: Sequence[str] = (),
    evolution: SchemaEvolution = FIXED,
    c: DeltaCommitter | None = None,
) -> CommitOutcome:
    """Write one file of ``rows`` (partition columns only in the path) and commit it."""
    data_schema = pa.schema([f for f in s if f.name not in partition_by])
    write_file(
        table,
        relative,
        [{k: v for k, v in r.items() if k not in partition_by} for r in rows],
        data_schema,
    )
    files = describe_data_files(str(table), [relative], list(partition_by))
    return (c or committer(table)).commit(
        files,
        schema=s,
        partition_by=partition_by,
        txns=[txn],
        custom_metadata={"run": "test"},
        evolution=evolution,
    )


def log_actions(table: Path, version: int) -> list[str]:
    """The kinds of the actions in commit ``version``'s JSON, in order."""
    text = (table / "_delta_log" / f"{version:020d}.json").read_text()
    return [next(iter(json.loads(line))) for line in text.splitlines() if line.strip()]


def rows(table: Path) -> list[dict[str, Any]]:
    return sorted(DeltaTable(str(table)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_a_new_column_is_added_in_the_same_commit_as_its_data(
    tmp_path: Path, partitioned: bool
) -> None:
    table = tmp_path / "orders with space*"
    parts = ("day",) if partitioned else ()
    old = BASE.append(pa.field("day", pa.string()))
    path = "day=d1/a.parquet" if partitioned else "a.parquet"
    commit_file(
        table,
        path,
        [{"id": 1, "value": "a", "day": "d1"}],
        old,
        TxnVersion("t", 1),
        partition_by=parts,
    )
    new = old.append(pa.field("note", pa.string()))
    path = "day=d2/b.parquet" if partitioned else "b.parquet"
    outcome = commit_file(
        table,
        path,
        [{"id": 2, "value": "b", "day": "d2", "note": "hi"}],
        new,
        TxnVersion("t", 2),
        partition_by=parts,
        evolution=SchemaEvolution(add_columns=True, origin="landing/2024/b.csv"),
    )

    assert outcome.version == 1 and not outcome.stale, outcome.reason
    assert outcome.schema_change == SchemaChange(added=(ColumnAdded("note", "string"),))
    actions = log_actions(table, 1)
    assert sorted(set(actions)) == ["add", "commitInfo", "metaData", "txn"], "ONE commit, no remove"
    assert actions.count("add") == 1
    assert rows(table) == [
        {"id": 1, "value": "a", "day": "d1", "note": None},
        {"id": 2, "value": "b", "day": "d2", "note": "hi"},
    ]
    assert committer(table).transaction_version("t") == 2
    [event] = schema_history(DeltaTable(str(table)).schema())
    assert (event.column, event.version, event.change, event.to_type) == (
        "note",
        1,
        "added",
        "string",
    )
    assert event.origin == "landing/2024/b.csv"


def test_widened_types_read_the_older_files_widened(tmp_path: Path) -> None:
    table = tmp_path / "t"
    old = schema(("id", pa.int32()), ("n", pa.int32()), ("f", pa.float32()))
    commit_file(table, "a.parquet", [{"id": 1, "n": 7, "f": 0.5}], old, TxnVersion("t", 1))
    new = schema(("id", pa.int64()), ("n", pa.float64()), ("f", pa.float64()))
    outcome = commit_file(
        table,
        "b.parquet",
        [{"id": 2, "n": 1.5, "f": 2.25}],
        new,
        TxnVersion("t", 2),
        evolution=SchemaEvolution(widen=True),
    )

    assert outcome.version == 1, outcome.reason
    assert [(w.name, w.from_type, w.to_type) for w in outcome.schema_change.widened] == [
        ("id", "integer", "long"),
        ("n", "integer", "double"),
        ("f", "float", "double"),
    ]
    read = DeltaTable(str(table)).to_pyarrow_table()
    assert read.schema.field("id").type == pa.int64()
    assert read.sort_by("id").to_pylist() == [
        {"id": 1, "n": 7.0, "f": 0.5},
        {"id": 2, "n": 1.5, "f": 2.25},
    ]
    history = schema_history(DeltaTable(str(table)).schema())
    assert [(e.column, e.version, e.from_type, e.to_type) for e in history] == [
        ("f", 1, "float", "double"),
        ("id", 1, "integer", "long"),
        ("n", 1, "integer", "double"),
    ]


def test_without_evolution_a_new_column_is_refused_and_nothing_committed(tmp_path: Path) -> None:
    table = tmp_path / "t"
    commit_file(table, "a.parquet", [{"id": 1, "value": "a"}], BASE, TxnVersion("t", 1))
    with pytest.raises(SchemaEvolutionError, match=r"schema\.mode: add_columns"):
        commit_file(
            table,
            "b.parquet",
            [{"id": 2, "value": "b", "note": "x"}],
            BASE.append(pa.field("note", pa.string())),
            TxnVersion("t", 2),
        )
    assert DeltaTable(str(table)).version() == 0
    assert committer(table).transaction_version("t") == 1


def test_the_history_survives_checkpoints_and_log_cleanup(tmp_path: Path) -> None:
    """Evolutions at versions 1 and 3, then 30 more commits, a checkpoint and the cleanup of
    every older commit JSON: the history is read from the snapshot's schema alone."""
    table = tmp_path / "t"
    commit_file(table, "v0.parquet", [{"id": 0, "value": "a"}], BASE, TxnVersion("t", 1))
    s1 = BASE.append(pa.field("a", pa.string()))
    commit_file(
        table,
        "v1.parquet",
        [{"id": 1, "value": "a", "a": "x"}],
        s1,
        TxnVersion("t", 2),
        evolution=ADD,
    )
    commit_file(table, "v2.parquet", [{"id": 2, "value": "a"}], BASE, TxnVersion("t", 3))
    s3 = pa.schema(
        [("id", pa.int64()), ("value", pa.string()), ("a", pa.string()), ("b", pa.int64())]
    )
    commit_file(
        table,
        "v3.parquet",
        [{"id": 3, "value": "a", "a": "y", "b": 5}],
        s3,
        TxnVersion("t", 4),
        evolution=SchemaEvolution(add_columns=True, widen=True, origin="f3.json"),
    )
    for n in range(4, 34):
        commit_file(
            table,
            f"v{n}.parquet",
            [{"id": n, "value": "z"}],
            BASE,
            TxnVersion("t", n + 1),
            evolution=ADD,
        )
    dt = DeltaTable(str(table))
    dt.create_checkpoint()
    old = NOW.timestamp() - 400 * 86400  # backdate: the logs look 400 days old
    for log in (table / "_delta_log").glob("*.json"):
        if int(log.stem) < dt.version():
            os.utime(log, (old, old))
    DeltaTable(str(table)).cleanup_metadata()
    assert not (table / "_delta_log" / f"{1:020d}.json").exists(), "the evolving commits are gone"

    history = schema_history(DeltaTable(str(table)).schema())
    assert [(e.column, e.version, e.change, e.origin) for e in history] == [
        ("a", 1, "added", None),
        ("b", 3, "added", "f3.json"),
        ("id", 3, "widened", "f3.json"),
    ]
    assert len(rows(table)) == 34


def test_two_runs_evolving_at_once_one_wins_the_other_is_stale(tmp_path: Path) -> None:
    """B commits its evolution between A's read of the table and A's commit: A's pinned commit
    is stale (nothing of A's committed), A decides again and commits once, finding the column
    there; no row twice, one history entry."""
    table = tmp_path / "t"
    commit_file(table, "a.parquet", [{"id": 1, "value": "a"}], BASE, TxnVersion("a", 1))
    new = BASE.append(pa.field("note", pa.string()))

    class Racing(DeltaCommitter):
        raced = False

        def _load_table(self) -> DeltaTable | None:
            snapshot = super()._load_table()
            if not self.raced:
                self.raced = True
                commit_file(
                    table,
                    "b.parquet",
                    [{"id": 2, "value": "b", "note": "B"}],
                    new,
                    TxnVersion("b", 1),
                    evolution=ADD,
                )
            return snapshot

    def commit_a(c: DeltaCommitter | None = None) -> CommitOutcome:
        row = {"id": 3, "value": "c", "note": "A"}
        return commit_file(table, "c.parquet", [row], new, TxnVersion("a", 2), evolution=ADD, c=c)

    first = commit_a(Racing(str(table), now=lambda: NOW))
    assert first.stale and first.version is None, first.reason
    assert committer(table).transaction_version("a") == 1, "nothing of A's committed"

    again = commit_a()  # decided again: the column is there, a plain append
    assert again.version == 2 and again.schema_change == SchemaChange(), again.reason
    assert [(r["id"], r["note"]) for r in rows(table)] == [(1, None), (2, "B"), (3, "A")]
    assert [e.version for e in schema_history(DeltaTable(str(table)).schema())] == [1]


# --- engine/write: append and replace, crashes, the backfill -------------------------------

WIDE = pa.schema([("id", pa.int64()), ("value", pa.string()), ("note", pa.string())])


def stage(uri: Path, token: str, rows_: Sequence[Mapping[str, Any]], s: pa.Schema) -> StagedFiles:
    folder = uri / "_staging" / token
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(list(rows_), schema=s), folder / "part-0.parquet")
    return StagedFiles(token, str(folder), (str(folder / "part-0.parquet"),))


def engine_write(
    uri: Path,
    staged: StagedFiles,
    mode: Append | Replace,
    txn: TxnVersion,
    s: pa.Schema,
    *,
    evolve: bool = True,
) -> CommitOutcome:
    written = write(
        DeltaCommitter(str(uri), now=lambda: NOW),
        [staged],
        mode,
        RunRecord((txn,), {"watermark_assets.state": "{}"}),
        schema=s,
        partition_by=[],
        now=lambda: NOW,
        add_columns=evolve,
        widen=evolve,
        schema_origin="landing/new.csv",
    )
    return written.outcome


def window(lower: int, upper: int) -> ReplaceWindow:
    return ReplaceWindow("id", lower, upper, Interval.CLOSED_CLOSED)


def base_table(uri: Path) -> None:
    staged = stage(uri, "base", [{"id": i, "value": "old"} for i in (1, 2, 3)], BASE)
    assert (
        engine_write(uri, staged, Append(), TxnVersion("app", 1), BASE, evolve=False).version == 0
    )


def test_a_replace_that_evolves_is_the_schema_commit_then_the_data_commit(tmp_path: Path) -> None:
    uri = tmp_path / "orders"
    base_table(uri)
    staged = stage(uri, "t1", [{"id": 2, "value": "new", "note": "n"}], WIDE)
    outcome = engine_write(uri, staged, Replace((window(2, 2),)), TxnVersion("app", 2), WIDE)

    assert outcome.version == 2, outcome.reason
    assert log_actions(uri, 1) == ["commitInfo", "metaData"], "the schema alone, no txn"
    assert {"add", "remove", "txn"} <= set(log_actions(uri, 2))
    assert [(r["id"], r["value"], r["note"]) for r in rows(uri)] == [
        (1, "old", None),
        (2, "new", "n"),
        (3, "old", None),
    ]
    history = schema_history(DeltaTable(str(uri)).schema())
    assert [(e.column, e.version, e.origin, e.data_version) for e in history] == [
        ("id", 1, "landing/new.csv", 2),
        ("note", 1, "landing/new.csv", 2),
    ]
    # the run's metadata names its data commit (2): the entries made for it count as its own
    assert [e.column for e in events_of_versions(DeltaTable(str(uri)).schema(), [2])] == [
        "id",
        "note",
    ]


CRASH_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    from pathlib import Path
    import test_schema_evolution as t
    uri = Path({uri!r})
    mode = t.Append() if {append!r} else t.Replace((t.window(2, 2),))
    staged = t.stage(uri, "crash", [{{"id": 2, "value": "new", "note": "n"}}], t.WIDE)
    print(t.engine_write(uri, staged, mode, t.TxnVersion("app", 2), t.WIDE))
    """
)


def crash_run(uri: Path, point: str, *, append: bool) -> int:
    script = CRASH_SCRIPT.format(tests=str(ROOT / "tests"), uri=str(uri), append=append)
    env = {**os.environ, CRASH_ENV_VAR: point, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", script], env=env, check=False).returncode


@pytest.mark.parametrize(
    ("point", "append", "versions_after_crash"),
    [
        pytest.param(
            "before_windows_commit", True, 0, id="append: staged and moved, not committed"
        ),
        pytest.param(
            "before_windows_commit", False, 0, id="replace: staged and moved, not committed"
        ),
        pytest.param(
            "between_schema_and_data_commit", False, 1, id="replace: schema committed, data not"
        ),
    ],
)
def test_a_crash_during_an_evolution_then_a_rerun_commits_once(
    tmp_path: Path, point: str, append: bool, versions_after_crash: int
) -> None:
    uri = tmp_path / "orders"
    base_table(uri)
    assert crash_run(uri, point, append=append) == -9

    after_crash = DeltaTable(str(uri))
    assert after_crash.version() == versions_after_crash
    assert after_crash.transaction_version("app") == 1, "the run's txn did not move"
    assert [r["id"] for r in rows(uri)] == [1, 2, 3], "no row of the crashed run"
    for leftover in (uri / "_staging").glob("crash"):
        import shutil

        shutil.rmtree(leftover)  # a re-run stages again (the sweep removes leftovers)

    mode: Append | Replace = Append() if append else Replace((window(2, 2),))
    staged = stage(uri, "rerun", [{"id": 2, "value": "new", "note": "n"}], WIDE)
    outcome = engine_write(uri, staged, mode, TxnVersion("app", 2), WIDE)

    assert outcome.version is not None and not outcome.stale, outcome.reason
    expected = [1, 2, 2, 3] if append else [1, 2, 3]
    assert [r["id"] for r in rows(uri)] == expected, "the re-run's rows once"
    assert DeltaTable(str(uri)).transaction_version("app") == 2
    history = schema_history(DeltaTable(str(uri)).schema())
    assert sorted({e.version for e in history}) == [1], "the schema evolved once"


def test_a_backfill_of_a_partition_written_under_the_old_schema(tmp_path: Path) -> None:
    """After the evolution (id widened, note added), a backfill re-reads an old file: its
    staged files have the OLD schema (int id, no note); the replace fits them as they are."""
    uri = tmp_path / "orders"
    base_table(uri)
    staged = stage(uri, "evolve", [{"id": 4, "value": "new", "note": "n"}], WIDE)
    assert engine_write(uri, staged, Append(), TxnVersion("app", 2), WIDE).version == 1
    backfill = stage(uri, "backfill", [{"id": 2, "value": "again"}], BASE)
    outcome = engine_write(uri, backfill, Replace((window(2, 2),)), TxnVersion("app", 3), BASE)

    assert outcome.version == 2 and outcome.schema_change == SchemaChange(), outcome.reason
    assert [(r["id"], r["value"], r["note"]) for r in rows(uri)] == [
        (1, "old", None),
        (2, "again", None),
        (3, "old", None),
        (4, "new", "n"),
    ]
    assert DeltaTable(str(uri)).schema().to_arrow().field("id").type == pa.int64()


# --- Spark reads the evolved table's older files (the way sources/table.py reads a table) ---


@pytest.mark.spark
def test_spark_reads_the_older_files_with_null_and_widened_values(
    spark: Any, tmp_path: Path
) -> None:
    """The table's files by their paths, with the Delta schema (as ``DeltaTableSource`` reads
    them): a file from before the evolution lacks ``note`` (NULL) and has int ``id`` / ``n``,
    read as long and double."""
    from pyspark.sql.types import StructType

    table = tmp_path / "t"
    old = schema(("id", pa.int32()), ("n", pa.int32()))
    commit_file(table, "a.parquet", [{"id": 1, "n": 7}], old, TxnVersion("t", 1))
    new = schema(
        ("id", pa.int64()),
        ("n", pa.float64()),
        ("note", pa.string()),
    )
    row = {"id": 2, "n": 1.5, "note": "x"}
    assert (
        commit_file(table, "b.parquet", [row], new, TxnVersion("t", 2), evolution=ADD).version == 1
    )

    dt = DeltaTable(str(table))
    struct = StructType.fromJson(json.loads(dt.schema().to_json()))
    paths = dt.file_uris()
    read = spark.read.schema(struct).parquet(*paths).orderBy("id").collect()
    assert [(r["id"], r["n"], r["note"]) for r in read] == [(1, 7.0, None), (2, 1.5, "x")]
