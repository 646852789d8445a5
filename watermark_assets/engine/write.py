"""The run's ONE Delta commit, whatever the kind: staged files, a write mode and the run's record.

Every kind plans, stages its rows as Parquet under ``{table}/_staging/{token}`` (one folder per
read: a window, a cell, a chunk) and then calls :func:`write`, which

1. decides whether there is anything to commit at all: a read of no row into no table commits
   nothing, unless its record must be kept (``RunRecord.records_completion``) and the schema of
   its zero-row read is known: then its commit creates the table with no file;
2. moves the staged files into the table (:func:`~watermark_assets.staging.move_into_table`)
   and describes them (add actions from the Parquet footers);
3. plans and makes ONE commit in the write mode the planner chose:

   - :class:`Append`: the files are added
     (:meth:`~watermark_assets.delta.committer.DeltaCommitter.commit`; delta-rs may rebase it
     over commits that do not touch the run's txns);
   - :class:`Replace`: the table's rows in each region are replaced by that region's files,
     with :class:`~watermark_assets.delta.replace.KeyMoves` a key's rows in other regions too
     (:func:`~watermark_assets.delta.replace.plan_replace_regions`, pinned to the planned
     snapshot); a replace that would add and remove nothing commits nothing, unless the record
     must be kept;
   - :class:`Merge`: an upsert on key columns (:func:`~watermark_assets.delta.merge.plan_merge`,
     pinned to the planned snapshot);
   - :class:`ReplaceTable`: every file of the table, as the planner read it, removed and the run's
     files added, pinned to that version (an event-time aggregate's state);

   carrying the run's txns (its optimistic locks: the versions its planner read) and commitInfo
   entries: the watermark or state entries first, then the lineage (``RunRecord.lineage``, built
   once the plan says what the commit removes), then the plan's own entry
   (``watermark_assets.replace`` or ``watermark_assets.merge``);
4. on a *stale* outcome (another writer committed one of the txns, or the snapshot moved) or an
   error, removes the files it moved in (they never became part of the table); the caller plans
   and stages again.

Schema evolution: ``add_columns`` / ``widen`` (False: the staged files must fit the table's
schema, else :class:`~watermark_assets.exceptions.SchemaEvolutionError` and nothing is
committed) let the commit add the staged files' new columns as nullable columns and widen
types (:func:`~watermark_assets.delta.schema_change.reconcile`), in the same commit as the
data (a replace or merge that removes rows: the schema commit, then the data commit, see
``delta/committer.py``). The pipeline's ``schema.mode: add_columns`` sets both;
``schema_origin`` (the source file, when known) goes into the table's schema history.

Crash points (:func:`~watermark_assets.faults.crash_point`): ``before_windows_commit`` once the
files are in the table, ``after_commit`` right after the commit.

Files the caller put in the table itself (``placed``): a file-path run moves its staged files
(and its quarantined records, into the quarantine table) once, after its exact per-file decision
(``kinds/file_path/commit.decide_commit``), and commits them in as many attempts as stale outcomes
ask for; a ``parquet_commit`` run commits files another writer wrote under the table by reference;
the quarantine commits (``kinds/file_path/commit.complete_quarantine``, ``runs/column_quarantine``)
are an :class:`Append` of the quarantine files their caller moved in.
:func:`write` then commits those files as they are, with the schema as given (empty: the
table's), in the same modes and with the same record; it neither moves nor removes them, and
the crash points are the caller's (its attempts and its checkpoint come after the commit).

Not a write mode: the metadata-only commit that adds a table's missing nullable columns
(:meth:`~watermark_assets.delta.committer.DeltaCommitter.add_missing_columns`: ``file_size``
on an old quarantine table, event time's ``_rows`` on an old output or state table). It is no
run's commit: no txn (every :func:`write` carries the run's txns, its optimistic locks), no
record, idempotent (a racing writer's loser finds the columns there, nothing is stale), and
delta-rs logs it as its own ``ADD COLUMN`` operation; its callers make it before their
:func:`write`.

A run whose provider saves its watermark elsewhere (a file, Postgres) calls :func:`write` inside
``WatermarkManager.commit_then_save``: the save follows the commit, never the other way round.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from watermark_assets import storage
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.replace_window import ReplaceWindow, region_text
from watermark_assets.core.time.instant import to_millis
from watermark_assets.delta.committer import CommitOutcome, DeltaCommitter, TxnVersion
from watermark_assets.delta.merge import MergePlan, commit_merge, plan_merge
from watermark_assets.delta.replace import (
    KeyMoves,
    ReplacePlan,
    commit_replace,
    plan_replace_regions,
)
from watermark_assets.delta.rewrite import RemovedFile, RewritePlan, open_table
from watermark_assets.delta.schema_change import SchemaEvolution
from watermark_assets.delta.stats import DataFile, describe_data_files
from watermark_assets.faults import crash_point
from watermark_assets.staging import move_into_table

__all__ = [
    "Append",
    "Merge",
    "Region",
    "Replace",
    "ReplaceTable",
    "RunRecord",
    "StagedFiles",
    "WriteMode",
    "Written",
    "mode_text",
    "region_json",
    "write",
]

#: What a replace commit replaces: a window, or a region (one window per column, the rows in all).
Region = ReplaceWindow | tuple[ReplaceWindow, ...]


def region_json(region: Region) -> object:
    """A window's JSON, or a region's list of them."""
    return region.to_json() if isinstance(region, ReplaceWindow) else [w.to_json() for w in region]


@dataclass(frozen=True)
class Append:
    """Add the run's rows; the table's rows stay (a column run above its watermark)."""


@dataclass(frozen=True)
class Replace:
    """Replace the table's rows in each of ``regions`` by the rows read for it (one region per
    read: a unit's ``[u, u]``, a window ``[start, end)``, a cell ``[start, end) x [u, u]``).

    ``regions`` empty: the range the run reads, known only once its rows are staged (a column
    run with ``replace_by_watermark``: from its watermark to the greatest row read); the run
    gives it (:meth:`of`) before :func:`write`. ``moves``: a key's rows outside the regions are
    removed too (``table.merge_keys`` of a time pipeline), the newest row of a key wins.
    ``appended``: the last reads (after the regions' ones) replace nothing, their files are only
    added, after the regions' (event time's newly closed windows beside the emitted windows that
    late rows reopened); ``moves`` do not see them."""

    regions: tuple[Region, ...] = ()
    moves: KeyMoves | None = None
    appended: int = 0

    @classmethod
    def read_range(cls) -> Replace:
        """The range the run reads (``regions`` empty until it is known)."""
        return cls(())

    @property
    def is_read_range(self) -> bool:
        return not self.regions

    def of(self, regions: Sequence[Region]) -> Replace:
        """This replace of ``regions``, the same moves and appended reads."""
        return dataclasses.replace(self, regions=tuple(regions))


@dataclass(frozen=True)
class Merge:
    """Upsert the run's rows on ``keys`` (``table.merge_keys``): a row whose key the table holds
    replaces it, the others are added."""

    keys: tuple[str, ...]


@dataclass(frozen=True)
class ReplaceTable:
    """Replace every row of the table by the run's rows: each file of the table is removed, in
    the commit pinned to ``read_version``, the version the planner read (-1: no table yet), so a
    table that moved since makes it stale. An event-time aggregate's state: its open windows,
    written whole by every batch. Nothing is placed by region: the commit has no plan entry, its
    remove actions no partition values (the log's paths as they are)."""

    read_version: int


#: How the run's ONE commit writes its rows (chosen by the kind's planner).
WriteMode = Append | Replace | Merge | ReplaceTable


def mode_text(mode: WriteMode) -> str:
    """How the commit writes, in words (``watermark-assets plan``)."""
    if isinstance(mode, Append):
        return "append the rows read"
    if isinstance(mode, Merge):
        return f"merge the rows read on {', '.join(mode.keys)}"
    if isinstance(mode, ReplaceTable):
        return f"replace every row of the table (pinned to version {mode.read_version})"
    if mode.is_read_range:
        return "replace the range read (from the watermark to the greatest value read)"
    text = "replace the rows of " + "; ".join(map(region_text, mode.regions))
    if mode.moves is not None:
        text += f" (a key's rows elsewhere moved: keys {', '.join(mode.moves.keys)})"
    return text


@dataclass(frozen=True)
class StagedFiles:
    """One read's Parquet files under ``{table}/_staging/{token}`` (``data_dir``), not in the
    table yet."""

    token: str
    data_dir: str
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunRecord:
    """What the run's commit records beside its rows.

    ``txns``: one per app id, each the version its planner read (the optimistic locks).
    ``entries``: commitInfo entries (the watermark or state entry, a replay's or unit's record).
    ``lineage(plan)``: the entries known once the write is planned, e.g. the run record with
    the rows the commit removes (``plan``: the replace or merge plan; None for an append or a
    commit that creates the table with no file). ``records_completion``: commit the txns and
    entries even when no file is added or removed (a window, a unit, a completed chunk)."""

    txns: tuple[TxnVersion, ...]
    entries: Mapping[str, str]
    lineage: Callable[[RewritePlan | None], Mapping[str, str]] = field(
        default=lambda plan: {}, compare=False
    )
    records_completion: bool = False


@dataclass(frozen=True)
class Written:
    """What :func:`write` did: the outcome, the files each read added (in the table once
    committed), and the replace or merge plan the commit was made of (None: an append, a commit
    creating the table with no file, or nothing committed)."""

    outcome: CommitOutcome
    files: tuple[tuple[DataFile, ...], ...] = ()
    plan: RewritePlan | None = None

    @property
    def rows_removed(self) -> int:
        return 0 if self.plan is None else self.plan.rows_removed

    @property
    def rows_kept_by_rewrite(self) -> int:
        return 0 if self.plan is None else self.plan.rows_kept_by_rewrite

    @property
    def rows_updated(self) -> int:
        return self.plan.rows_updated if isinstance(self.plan, MergePlan) else 0

    @property
    def rows_inserted(self) -> int:
        return self.plan.rows_inserted if isinstance(self.plan, MergePlan) else 0

    @property
    def rows_moved(self) -> int:
        return self.plan.rows_moved if isinstance(self.plan, ReplacePlan) else 0

    @property
    def rows_removed_by_region(self) -> tuple[int, ...]:
        """The table's rows removed from each region (zeros: nothing replaced)."""
        if isinstance(self.plan, ReplacePlan):
            return self.plan.rows_removed_by_region
        return (0,) * len(self.files)

    def rows_added(self, index: int) -> int:
        """The rows read ``index``'s files add: all, or their remainders' once rows superseded
        by a newer row of their key were left out (:class:`~watermark_assets.delta.replace.
        KeyMoves`)."""
        superseded = (
            {d.removed.path: d.remainder for d in self.plan.superseded_files}
            if isinstance(self.plan, ReplacePlan)
            else {}
        )
        total = 0
        for file in self.files[index]:
            if file.path not in superseded:
                total += file.num_records
            else:
                remainder = superseded[file.path]
                total += 0 if remainder is None else remainder.num_records
        return total


NO_TABLE_NO_ROW = "no row read and no table yet: nothing to remove or record, nothing to commit"


def write(
    committer: DeltaCommitter,
    staged: Sequence[StagedFiles],
    mode: WriteMode,
    record: RunRecord,
    *,
    schema: pa.Schema | None,
    partition_by: Sequence[str],
    now: Clock = system_clock,
    add_columns: bool = False,
    widen: bool = False,
    schema_origin: str | None = None,
    placed: Sequence[Sequence[DataFile]] | None = None,
) -> Written:
    """Make the run's ONE commit (module docstring), or nothing: a stale outcome (plan again)
    or a skipped one with its reason.

    ``staged``: each read's files (a :class:`Replace` has one region per read). ``schema``:
    the staged files' schema; for a read of no row, the zero-row Parquet file's (None: none
    written, the table cannot be created by this run). ``add_columns``, ``widen``,
    ``schema_origin``: what the commit may change in the table's schema, and where the change
    comes from (module docstring); the change made is ``written.outcome.schema_change``.
    ``placed``: each read's files, in the table already (module docstring; ``staged`` is then
    empty): committed as they are, never moved nor removed, no crash point."""
    evolution = SchemaEvolution(add_columns=add_columns, widen=widen, origin=schema_origin)
    reads = len(staged) if placed is None else len(placed)
    if isinstance(mode, Replace) and len(mode.regions) + mode.appended != reads:
        appended = f" and {mode.appended} appended" if mode.appended else ""
        raise ValueError(
            f"a replace needs one region per read: {len(mode.regions)} region(s){appended}, "
            f"{reads} read(s)"
            + (" (the range read was not given: Replace.of)" if mode.is_read_range else "")
        )
    if placed is not None:
        if staged:
            raise ValueError("placed files, or staged files to move: not both")
        files = tuple(tuple(group) for group in placed)
        table_schema = pa.schema([]) if schema is None else schema
        return _commit(
            committer, files, mode, record, table_schema, partition_by, now, False, evolution
        )
    uri = committer.table_uri
    has_files = any(s.files for s in staged)
    creates = not has_files and committer.current_version() is None
    if creates and (schema is None or not record.records_completion):
        return Written(CommitOutcome(None, True, NO_TABLE_NO_ROW))
    moved: list[list[str]] = []
    try:
        for each in staged:
            moved.append(move_into_table(each.files, each.data_dir, uri, each.token))
        files = tuple(tuple(describe_data_files(uri, paths, partition_by)) for paths in moved)
        if has_files or creates:
            assert schema is not None, "staged files have a schema"
            table_schema = schema
        else:
            table_schema = pa.schema([])  # no file into an existing table: the table's schema
        crash_point("before_windows_commit")
        written = _commit(
            committer, files, mode, record, table_schema, partition_by, now, creates, evolution
        )
    except BaseException:
        _remove(uri, moved)
        raise
    if written.outcome.stale:
        _remove(uri, moved)
        return written
    crash_point("after_commit")  # committed; a provider with its own store is not saved yet
    return written


def _commit(
    committer: DeltaCommitter,
    files: tuple[tuple[DataFile, ...], ...],
    mode: WriteMode,
    record: RunRecord,
    schema: pa.Schema,
    partition_by: Sequence[str],
    now: Clock,
    creates: bool,
    evolution: SchemaEvolution,
) -> Written:
    """The commit of ``files`` in ``mode`` (the files are in the table)."""
    uri = committer.table_uri
    txns = list(record.txns)
    added = [f for group in files for f in group]
    if creates:  # records completion: the table is created by this commit, with no file
        custom = {**record.entries, **record.lineage(None)}
        outcome = committer.commit(
            (),
            schema=schema,
            partition_by=partition_by,
            txns=txns,
            custom_metadata=custom,
            read_version=-1,  # another writer creating it first makes this stale
        )
        return Written(outcome, files)
    if isinstance(mode, Append):
        custom = {**record.entries, **record.lineage(None)}
        outcome = committer.commit(
            added,
            schema=schema,
            partition_by=partition_by,
            txns=txns,
            custom_metadata=custom,
            evolution=evolution,
        )
        return Written(outcome, files)
    if isinstance(mode, Merge):
        merge = plan_merge(uri, mode.keys, added)
        custom = {**record.entries, **record.lineage(merge)}
        outcome = commit_merge(
            committer,
            merge,
            schema=schema,
            partition_by=partition_by,
            txns=txns,
            custom_metadata=custom,
            now=now,
            evolution=evolution,
        )
        return Written(outcome, files, merge)
    if isinstance(mode, ReplaceTable):
        return _replace_table(committer, files, mode, record, schema, partition_by, now, evolution)
    replace = plan_replace_regions(uri, list(zip(mode.regions, files)), moves=mode.moves)
    if mode.appended:  # the last reads' files replace nothing: added after the regions'
        appended = tuple(f for group in files[len(mode.regions) :] for f in group)
        replace = dataclasses.replace(replace, new_files=(*replace.new_files, *appended))
    touches = added or replace.removed or replace.rewritten
    if not touches and not record.records_completion:  # no empty commits in the log
        regions = " and ".join(region_text(r) for r in mode.regions)
        reason = f"no row read and no row of the table where {regions}: nothing to commit"
        return Written(CommitOutcome(None, True, reason), files)
    custom = {**record.entries, **record.lineage(replace)}
    outcome = commit_replace(
        committer,
        replace,
        schema=schema,
        partition_by=partition_by,
        txns=txns,
        custom_metadata=custom,
        now=now,
        evolution=evolution,
    )
    return Written(outcome, files, replace)


def _replace_table(
    committer: DeltaCommitter,
    files: tuple[tuple[DataFile, ...], ...],
    mode: ReplaceTable,
    record: RunRecord,
    schema: pa.Schema,
    partition_by: Sequence[str],
    now: Clock,
    evolution: SchemaEvolution,
) -> Written:
    """The commit of :class:`ReplaceTable`: the table's files removed, ``files`` added (a table
    at another version than the mode's: nothing removed, the committer's outcome is stale)."""
    table, fs, root = open_table(committer.table_uri)
    existing = []
    if table is not None and table.version() == mode.read_version:
        existing = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    plan = RewritePlan(
        table_uri=committer.table_uri,
        read_version=mode.read_version,
        new_files=tuple(f for group in files for f in group),
        removed=tuple(
            RemovedFile(row["path"], int(row["size_bytes"]), None, int(row["num_records"] or 0))
            for row in existing
        ),
        rewritten=(),
        kept_files=0,
        _filesystem=fs,
        _root=root,
    )
    outcome = committer.commit(
        plan.add_files(),
        schema=schema,
        partition_by=partition_by,
        txns=list(record.txns),
        custom_metadata={**record.entries, **record.lineage(plan)},
        removes=plan.remove_actions(to_millis(now())),
        read_version=mode.read_version,
        evolution=evolution,
    )
    return Written(outcome, files, plan)


def _remove(uri: str, moved: Sequence[Sequence[str]]) -> None:
    """Files moved into the table and never committed: no part of it."""
    fs, root = storage.filesystem(uri)
    for paths in moved:
        for path in paths:
            if fs.exists(f"{root}/{path}"):
                fs.rm(f"{root}/{path}")
