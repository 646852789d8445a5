"""Range replace (seed 001's ``replace_by_watermark``): a window of rows replaced in ONE commit.

Contract:

- :class:`ReplaceWindow` (:mod:`watermark_assets.core.replace_window`, pure) is
  ``{column: (lower, upper)}`` with its closedness an explicit :class:`Interval`, ``(lower, upper]``
  by default: the read took ``> lower`` and ``upper`` is the largest value it read.
- :func:`plan_replace` reads the table's current snapshot once (its version is the plan's
  ``read_version``) and places every file from its statistics (``get_add_actions``): wholly outside
  the window (kept), wholly inside (a remove action), or neither, or unknown (no statistics, nulls
  or NaN possible, a truncated string): that file is read with pyarrow and, when it holds rows in
  the window, rewritten without them next to the original (a remove of the old file, an add of the
  remainder). Never assumed from a partition name or the window's start: every file of the table
  is placed, so a range over many hourly partitions is replaced whole.
- Fail closed, before anything is written: an invalid window (:class:`ReplaceWindowError`: bounds
  reversed, types that cannot be compared with each other or with the column, an unknown column, a
  multi-column window) or a new row outside the window or null (:class:`RowsOutsideWindowError`)
  stops the plan. There is no path to an unfiltered overwrite.
- :func:`commit_replace` makes ONE Delta commit holding the remove actions, the add actions (new
  files and rewritten remainders), the caller's ``txn`` actions and custom metadata, plus
  ``watermark_assets.replace`` (the window and the counts). It goes through
  :meth:`DeltaCommitter.commit` with ``read_version``: the commit is made on exactly the snapshot
  that was planned, or the outcome is stale (another writer committed: its rows may be in the window
  too) and the caller plans again. A stale or failed commit deletes the rewritten files it wrote.

Why ``create_write_transaction`` with remove actions (``mode="append"``), not
``write_deltalake(mode="overwrite", predicate=...)``: the data files are written by Spark, and
delta-rs would write the rows again itself; its predicate is SQL text parsed by DataFusion, where a
typo or a type mismatch in the predicate is the failure that must never widen the overwrite. The
log shows the commit as ``WRITE`` (``mode: Append``) with ``remove`` and ``add`` actions;
``watermark_assets.replace`` in ``commitInfo`` says it was a replace. Deletion vectors and column
mapping are refused (reading a file's Parquet would resurrect deleted rows or miss renamed columns).

The plan's shape, the rewrite of a file without some rows and the pinned commit are shared with
the merge on keys (:mod:`watermark_assets.delta.merge`) through
:mod:`watermark_assets.delta.rewrite`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable

from watermark_assets import names
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.replace_window import Interval, ReplaceWindow, WindowValue, value_kind
from watermark_assets.delta.committer import CommitOutcome, DeltaCommitter, TxnVersion
from watermark_assets.delta.merge import (
    key_matches,
    key_schema_of,
    key_values,
    may_hold_keys,
    new_row_keys,
    read_key_columns,
)
from watermark_assets.delta.rewrite import (
    RemovedFile,
    RewritePlan,
    RewrittenFile,
    commit_rewrite,
    delete_remainders,
    open_table,
    rewrite_without,
    snapshot_files,
)
from watermark_assets.delta.schema_change import FIXED, SchemaEvolution
from watermark_assets.delta.stats import (
    DataFile,
    stats_kind,
    stats_value,
    unsupported_read_feature,
    widen_cut_maximum,
)
from watermark_assets.exceptions import (
    DeltaCommitError,
    ReplaceWindowError,
    RowsOutsideWindowError,
)

__all__ = [
    "REPLACE_METADATA_KEY",
    "Interval",
    "KeyMoves",
    "RemovedFile",
    "ReplacePlan",
    "ReplaceWindow",
    "RewrittenFile",
    "commit_replace",
    "plan_replace",
    "plan_replace_regions",
]

REPLACE_METADATA_KEY = names.REPLACE_KEY
"""The ``commitInfo`` key of a replace commit: the window, files removed and rewritten, rows."""


@dataclass(frozen=True)
class KeyMoves:
    """``table.merge_keys`` of a table replaced window by window (a time pipeline): a key's rows
    OUTSIDE the replaced regions are removed too, in the same commit, so a row whose ``order``
    column (the time column) moved to another window is in exactly one. The newest version of a
    key wins: a table row with a greater ``order`` than the new row keeps its place and the new
    row is left out (a re-run of an old window never brings an old version back)."""

    keys: tuple[str, ...]
    order: str


@dataclass(frozen=True, kw_only=True)
class ReplacePlan(RewritePlan):
    """What one replace commits (:class:`RewritePlan`), and the region it replaces: the rows in
    every one of ``windows`` (one window per column; usually one). A range run replaces several
    regions at once (``regions``: the union of their rows), each with its own new files."""

    windows: tuple[ReplaceWindow, ...]
    #: every region replaced (the first is ``windows``); one for a replace of one window
    regions: tuple[tuple[ReplaceWindow, ...], ...] = ()
    #: the table's rows removed from each region, in the order of ``regions``
    rows_removed_by_region: tuple[int, ...] = ()
    #: rows of the table outside the regions removed because a new row has their key (KeyMoves)
    rows_moved: int = 0
    #: new rows left out: another new row or a table row of their key is newer (KeyMoves)
    rows_superseded: int = 0
    #: new files written again without their superseded rows: each original (``removed``, never
    #: committed) is deleted once the commit succeeded, its ``remainder`` is in ``new_files``
    superseded_files: tuple[RewrittenFile, ...] = ()

    @property
    def window(self) -> ReplaceWindow:
        """The first window (the only one of a single-column replace)."""
        return self.windows[0]

    def metadata(self) -> dict[str, Any]:
        """The ``watermark_assets.replace`` entry of the commit."""
        region: dict[str, Any] = {}
        if len(self.windows) > 1:
            region["windows"] = [w.to_json() for w in self.windows]
        if len(self.regions) > 1:
            region["regions"] = [[w.to_json() for w in r] for r in self.regions]
        moves = (
            {"rows_moved": self.rows_moved, "rows_superseded": self.rows_superseded}
            if self.rows_moved or self.rows_superseded
            else {}
        )
        return {"window": self.window.to_json(), **region, **super().metadata(), **moves}

    def discard(self) -> None:
        super().discard()
        delete_remainders(self.superseded_files, self._filesystem, self._root)

    def delete_superseded(self) -> None:
        """After the commit: delete the new files that were written again (never committed)."""
        for done in self.superseded_files:
            self._filesystem.rm_file(f"{self._root}/{done.removed.path}")


def _region(window: ReplaceWindow | Sequence[ReplaceWindow]) -> tuple[ReplaceWindow, ...]:
    """The windows of a region, one per column (ReplaceWindowError for none or a column twice)."""
    windows = (window,) if isinstance(window, ReplaceWindow) else tuple(window)
    columns = [w.column for w in windows]
    if not windows or len(set(columns)) != len(columns):
        raise ReplaceWindowError(
            " x ".join(str(w) for w in windows) or "(no window)",
            "a region needs at least one window and at most one window per column",
            "give each column's window once, e.g. a time window and a unit's [id, id]",
        )
    return windows


def plan_replace(
    table_uri: str,
    window: ReplaceWindow | Sequence[ReplaceWindow],
    new_files: Sequence[DataFile],
    *,
    storage_options: Mapping[str, str] | None = None,
    filesystem: fsspec.AbstractFileSystem | None = None,
) -> ReplacePlan:
    """Plan replacing ``window`` of the table at ``table_uri`` by ``new_files`` (module docstring).

    ``window`` may be a region: several windows on different columns (e.g. a time window and a
    unit's ``[id, id]``), whose rows are those in every window. ``new_files`` are already under
    the table root (described by :func:`describe_data_files`). Raises
    :class:`ReplaceWindowError` or :class:`RowsOutsideWindowError` before writing anything.
    """
    return plan_replace_regions(
        table_uri, [(window, new_files)], storage_options=storage_options, filesystem=filesystem
    )


def plan_replace_regions(
    table_uri: str,
    parts: Sequence[tuple[ReplaceWindow | Sequence[ReplaceWindow], Sequence[DataFile]]],
    *,
    moves: KeyMoves | None = None,
    storage_options: Mapping[str, str] | None = None,
    filesystem: fsspec.AbstractFileSystem | None = None,
) -> ReplacePlan:
    """Plan replacing several regions at once, each by its new files (:func:`plan_replace` for
    one): ONE commit of a range run, whose readers never see a window twice or not at all.

    A file of the table wholly inside one region is removed; one outside every region is kept,
    unless ``moves`` (:class:`KeyMoves`) finds rows of the new rows' keys in it; the others are
    read and rewritten without the rows in any region (and the moved ones). Only the key and
    ``order`` columns are read to find moved rows, and only from files whose statistics could
    hold one of the new keys (:func:`~watermark_assets.delta.merge.may_hold_keys`).
    """
    if not parts:
        raise ReplaceWindowError("(no region)", "nothing to replace", "give at least one window")
    regions = tuple(_region(region) for region, _ in parts)
    new_files = [f for _, files in parts for f in files]
    table, fs, root = open_table(table_uri, storage_options=storage_options, filesystem=filesystem)
    types: dict[str, pa.DataType] = {}
    partition_columns: list[str] = []
    for each in (w for region in regions for w in region):
        if each.column not in types:
            types[each.column], partition_columns = _column_of(
                table_uri, table, each, new_files, fs, root
            )
    for region, (_, files) in zip(regions, parts):
        for new in files:
            for each in region:
                _check_inside(table_uri, each, new, types[each.column], partition_columns, fs, root)
    moving = _Moving.of(table_uri, table, moves, types, new_files, fs, root)
    removed: list[RemovedFile] = []
    rewritten: list[RewrittenFile] = []
    by_region = [0] * len(regions)
    kept = 0
    candidates: list[_Candidate] = []
    if table is not None:
        _refuse_unsupported_features(table_uri, table, regions[0][0])
        for file, existing in snapshot_files(table, partition_columns):
            inside, partial = _place_in_regions(regions, existing, types, partition_columns)
            if inside is not None:
                removed.append(file)
                by_region[inside] += file.num_records
            elif partial or moving.may_hold(existing, partition_columns):
                candidates.append(_Candidate(file, existing, partial))
            else:
                kept += 1
    try:
        masks = [
            _candidate_masks(table_uri, c, moving, partition_columns, fs, root, i)
            for i, c in enumerate(candidates)
        ]
        drops = moving.decide()
        moved = 0
        for index, (candidate, (in_regions, per_region)) in enumerate(zip(candidates, masks)):
            drop = drops.table_rows(index, in_regions)
            dropped = int(pc.sum(drop).as_py() or 0)
            if dropped == 0:
                kept += 1
                continue
            for region_index, count in per_region.items():
                by_region[region_index] += count
            moved += dropped - int(pc.sum(in_regions).as_py() or 0)
            file = dataclasses.replace(candidate.file, num_records=len(drop))
            if dropped == len(drop):
                removed.append(file)
            else:
                rewritten.append(
                    rewrite_without(
                        table_uri, file, drop, partition_columns, fs, root, prefix="part-replace"
                    )
                )
        superseded = drops.rewrite_new(table_uri, new_files, partition_columns, fs, root)
    except BaseException:
        delete_remainders(rewritten, fs, root)
        raise
    by_path = {done.removed.path: done.remainder for done in superseded}
    added = [by_path.get(f.path, f) for f in new_files]
    return ReplacePlan(
        table_uri=table_uri,
        windows=regions[0],
        regions=regions,
        read_version=-1 if table is None else table.version(),
        new_files=tuple(f for f in added if f is not None),
        removed=tuple(removed),
        rewritten=tuple(rewritten),
        kept_files=kept,
        rows_removed_by_region=tuple(by_region),
        rows_moved=moved,
        rows_superseded=drops.superseded,
        superseded_files=tuple(superseded),
        _filesystem=fs,
        _root=root,
    )


def commit_replace(
    committer: DeltaCommitter,
    plan: ReplacePlan,
    *,
    schema: pa.Schema,
    partition_by: Sequence[str],
    txns: Sequence[TxnVersion],
    custom_metadata: Mapping[str, str],
    now: Clock = system_clock,
    evolution: SchemaEvolution = FIXED,
) -> CommitOutcome:
    """Commit ``plan`` as ONE Delta commit, or nothing: stale when the table moved since the plan.

    On a stale outcome or an error the rewritten remainders are deleted; plan again from the new
    snapshot (:func:`plan_replace`) with freshly read txn versions.
    """
    outcome = commit_rewrite(
        committer,
        plan,
        entry_key=REPLACE_METADATA_KEY,
        schema=schema,
        partition_by=partition_by,
        txns=txns,
        custom_metadata=custom_metadata,
        now=now,
        evolution=evolution,
    )
    if outcome.version is not None:
        plan.delete_superseded()
    return outcome


class _Place(Enum):
    OUTSIDE = "outside"
    INSIDE = "inside"
    UNKNOWN = "unknown"


def _place(
    window: ReplaceWindow,
    low: Any,
    high: Any,
    nulls: int | None,
    rows: int | None,
    column_type: pa.DataType,
    *,
    exact: bool = False,
) -> _Place:
    """Where a file lies from its bounds; UNKNOWN unless they prove it (``exact``: not cut;
    ``rows``/``nulls`` None: not recorded)."""
    if rows == 0 or (nulls is not None and nulls == rows):
        return _Place.OUTSIDE  # no rows, or only nulls: nothing in the window
    if low is None or high is None:
        return _Place.UNKNOWN
    if not exact:
        high = widen_cut_maximum(high, column_type)  # on a millisecond: perhaps cut there
    if window.is_below(high) or window.is_above(low):
        return _Place.OUTSIDE
    trusted = not pa.types.is_floating(column_type)  # NaN is in no window and in no statistics
    if trusted and nulls == 0 and window.contains(low) and window.contains(high):
        return _Place.INSIDE
    return _Place.UNKNOWN


def _place_existing(
    window: ReplaceWindow,
    existing: Mapping[str, Any],
    column_type: pa.DataType,
    partition_columns: Sequence[str],
) -> _Place:
    # No record count (another writer's add action without statistics) is unknown, not empty.
    counted_rows = existing.get("num_records")
    rows = None if counted_rows is None else int(counted_rows)
    if window.column in partition_columns:
        raw = existing.get(f"partition.{window.column}")
        if raw is None:
            return _Place.OUTSIDE  # a null partition value: every row is null, in no window
        value = stats_value(raw, column_type)
        return _place(window, value, value, 0, rows, column_type, exact=True)
    low = stats_value(existing.get(f"min.{window.column}"), column_type)
    high = stats_value(existing.get(f"max.{window.column}"), column_type)
    counted = existing.get(f"null_count.{window.column}")
    return _place(window, low, high, None if counted is None else int(counted), rows, column_type)


def _check_inside(
    table_uri: str,
    window: ReplaceWindow,
    new: DataFile,
    column_type: pa.DataType,
    partition_columns: Sequence[str],
    fs: fsspec.AbstractFileSystem,
    root: str,
) -> None:
    """Raise unless every row of ``new`` is in the window: statistics first, else the column."""
    if window.column in partition_columns:
        raw = new.partition_values.get(window.column)
        value = None if raw is None else stats_value(raw, column_type)
        if new.num_records and (value is None or not window.contains(value)):
            raise RowsOutsideWindowError(table_uri, str(window), new.path, new.num_records, raw)
        return
    stats = json.loads(new.stats) if new.stats else {}
    low = stats_value(stats.get("minValues", {}).get(window.column), column_type)
    high = stats_value(stats.get("maxValues", {}).get(window.column), column_type)
    nulls = stats.get("nullCount", {}).get(window.column)
    if _place(window, low, high, nulls, new.num_records, column_type) is _Place.INSIDE:
        return
    if new.num_records == 0:
        return
    values = pq.read_table(f"{root}/{new.path}", columns=[window.column], filesystem=fs)
    inside = _in_window(window, values.column(window.column))
    outside = len(inside) - pc.sum(inside).as_py() if len(inside) else 0
    if outside:
        first = pc.index(inside, False).as_py()
        example = values.column(window.column)[first].as_py()
        raise RowsOutsideWindowError(table_uri, str(window), new.path, outside, example)


def _in_window(window: ReplaceWindow, values: pa.ChunkedArray) -> pa.ChunkedArray:
    """True where a value is in the window; a null is in no window (False)."""
    column_type = values.type
    upper = _scalar(window.upper, column_type)
    inside = (pc.less_equal if window.interval.upper_inclusive else pc.less)(values, upper)
    if window.lower is not None:
        lower = _scalar(window.lower, column_type)
        above = (pc.greater_equal if window.interval.lower_inclusive else pc.greater)(values, lower)
        inside = pc.and_(inside, above)
    return pc.fill_null(inside, False)


def _scalar(value: WindowValue, column_type: pa.DataType) -> pa.Scalar:
    if isinstance(value, datetime) and pa.types.is_timestamp(column_type):
        if column_type.tz is None:  # timestamp without time zone: its wall clock read as UTC
            value = value.replace(tzinfo=None)
        return pa.scalar(value, type=pa.timestamp("us", tz=column_type.tz))
    return pa.scalar(value)


def _column_of(
    table_uri: str,
    table: DeltaTable | None,
    window: ReplaceWindow,
    new_files: Sequence[DataFile],
    fs: fsspec.AbstractFileSystem,
    root: str,
) -> tuple[pa.DataType, list[str]]:
    """The window column's Arrow type and the partition columns; refuses what cannot compare."""
    if table is not None:
        schema = pa.schema(table.schema().to_arrow())
        partition_columns = list(table.metadata().partition_columns)
    elif new_files:
        schema = pq.read_schema(f"{root}/{new_files[0].path}", filesystem=fs)
        partition_columns = list(new_files[0].partition_values)
        for column in partition_columns:
            if column not in schema.names:
                schema = schema.append(pa.field(column, pa.string()))
    else:
        raise ReplaceWindowError(
            str(window),
            f"table {table_uri!r} does not exist and there are no new files",
            "nothing to replace: skip the commit, or create the table first",
        )
    if window.column not in schema.names:
        raise ReplaceWindowError(
            str(window),
            f"table {table_uri!r} has no column {window.column!r} (it has {schema.names})",
            "name the column the watermark is read from",
        )
    column_type = schema.field(window.column).type
    expected = stats_kind(column_type)
    if expected is None or expected != value_kind(window.upper):
        raise ReplaceWindowError(
            str(window),
            f"column {window.column!r} is {column_type}, the bounds are "
            f"{type(window.upper).__name__}",
            "give bounds of the column's type (numbers, dates, aware datetimes or strings); "
            "other column types cannot be replaced by range",
        )
    return column_type, partition_columns


def _refuse_unsupported_features(table_uri: str, table: DeltaTable, window: ReplaceWindow) -> None:
    feature = unsupported_read_feature(table)
    if feature is not None:
        raise ReplaceWindowError(
            str(window),
            f"table {table_uri!r} uses {feature}, so its Parquet files cannot be rewritten row by "
            "row here",
            "replace this window with Spark and delta-spark (MERGE or replaceWhere), or rewrite "
            "the table without the feature",
        )


@dataclass(frozen=True)
class _Candidate:
    """A file of the table to read: it may overlap some regions (``partial``: each region's
    index and the windows its statistics could not place), or hold rows of a new key."""

    file: RemovedFile
    existing: Mapping[str, Any]
    partial: tuple[tuple[int, tuple[ReplaceWindow, ...]], ...]


def _place_in_regions(
    regions: Sequence[tuple[ReplaceWindow, ...]],
    existing: Mapping[str, Any],
    types: Mapping[str, pa.DataType],
    partition_columns: Sequence[str],
) -> tuple[int | None, tuple[tuple[int, tuple[ReplaceWindow, ...]], ...]]:
    """The region a file is wholly inside (its index), else the regions it may overlap."""
    partial = []
    for index, region in enumerate(regions):
        places = {
            w: _place_existing(w, existing, types[w.column], partition_columns) for w in region
        }
        if _Place.OUTSIDE in places.values():  # outside one window: outside the region
            continue
        undecided = tuple(w for w, place in places.items() if place is not _Place.INSIDE)
        if not undecided:
            return index, ()
        partial.append((index, undecided))
    return None, tuple(partial)


def _candidate_masks(
    table_uri: str,
    candidate: _Candidate,
    moving: _Moving,
    partition_columns: Sequence[str],
    fs: fsspec.AbstractFileSystem,
    root: str,
    index: int,
) -> tuple[pa.Array, dict[int, int]]:
    """True for the file's rows in any region, and how many rows each region holds; the rows
    of a new key outside the regions go to ``moving``."""
    in_regions: pa.Array | None = None
    per_region: dict[int, int] = {}
    if candidate.partial:
        path = f"{root}/{candidate.file.path}"
        columns = sorted({w.column for _, windows in candidate.partial for w in windows})
        present = pq.read_schema(path, filesystem=fs).names
        for column in columns:
            if column not in present:
                raise DeltaCommitError(
                    f"file {candidate.file.path!r} of table {table_uri!r} has no column "
                    f"{column!r}; a replace cannot tell which of its rows are in the window. "
                    "Rewrite the table with the column in every file",
                    table_uri=table_uri,
                )
        data = pq.read_table(path, columns=columns, filesystem=fs)
        for region_index, windows in candidate.partial:
            mask: pa.Array = pa.repeat(pa.scalar(True), data.num_rows)
            for window in windows:
                inside = _in_window(window, data.column(window.column)).combine_chunks()
                mask = pc.and_(mask, inside)
            if in_regions is not None:
                mask = pc.and_(mask, pc.invert(in_regions))  # a row counts for one region
            count = int(pc.sum(mask).as_py() or 0)
            if count:
                per_region[region_index] = count
            in_regions = mask if in_regions is None else pc.or_(in_regions, mask)
    rows = moving.read(index, candidate, partition_columns, in_regions)
    if in_regions is None:
        assert rows is not None, "a file with no region to read is read for its keys"
        in_regions = pa.repeat(pa.scalar(False), rows)
    return in_regions, per_region


_NEW = "__watermark_assets_new_row"
_FILE = "__watermark_assets_file"
_ROW = "__watermark_assets_row"
_NEW_MAX = "__watermark_assets_new_max"
_OLD_MAX = "__watermark_assets_old_max"
_WINS = "__watermark_assets_new_wins"


class _Moving:
    """The new rows' keys (:class:`KeyMoves`) and the table's rows of those keys found outside
    the regions; :meth:`decide` keeps the newest row of each key."""

    def __init__(
        self,
        table_uri: str,
        moves: KeyMoves | None,
        schema: pa.Schema | None = None,
        new_rows: pa.Table | None = None,
        fs: fsspec.AbstractFileSystem | None = None,
        root: str = "",
    ) -> None:
        self._table_uri, self._moves, self._schema = table_uri, moves, schema
        self._new, self._fs, self._root = new_rows, fs, root
        self._found: list[pa.Table] = []
        self._bounds = {}
        self._run_keys: pa.Table | None = None
        if moves is not None and new_rows is not None and schema is not None:
            self._run_keys = new_rows.select(list(moves.keys))
            key_schema = pa.schema([schema.field(k) for k in moves.keys])
            self._bounds = key_values(self._run_keys, key_schema)

    @classmethod
    def of(
        cls,
        table_uri: str,
        table: DeltaTable | None,
        moves: KeyMoves | None,
        types: Mapping[str, pa.DataType],
        new_files: Sequence[DataFile],
        fs: fsspec.AbstractFileSystem,
        root: str,
    ) -> _Moving:
        if moves is None:
            return cls(table_uri, None)
        if moves.order not in types or moves.order in moves.keys:
            raise ReplaceWindowError(
                moves.order,
                f"the newest row of a key is told by a window column that is not a key, not "
                f"{moves.order!r} (keys {list(moves.keys)}, windows on {sorted(types)})",
                "order the keys' rows by the time column",
            )
        key_schema, _ = key_schema_of(table_uri, table, moves.keys, new_files, fs, root)
        schema = key_schema.append(pa.field(moves.order, types[moves.order]))
        rows = new_row_keys(table_uri, moves.keys, schema, new_files, fs, root)
        rows = rows.append_column(_NEW, pa.array(range(rows.num_rows), type=pa.int64()))
        return cls(table_uri, moves, schema, rows, fs, root)

    def may_hold(self, existing: Mapping[str, Any], partition_columns: Sequence[str]) -> bool:
        """Whether a file outside the regions must be read: its statistics may hold a new key."""
        if self._schema is None or self._run_keys is None or not self._run_keys.num_rows:
            return False
        key_schema = pa.schema([self._schema.field(k) for k in self._run_keys.column_names])
        return may_hold_keys(existing, self._bounds, key_schema, partition_columns)

    def read(
        self,
        index: int,
        candidate: _Candidate,
        partition_columns: Sequence[str],
        in_regions: pa.Array | None,
    ) -> int | None:
        """Read a candidate's key and order columns (None: no need); keep its rows of a new
        key outside the regions; its row count."""
        if not self.may_hold(candidate.existing, partition_columns):
            return None
        assert self._moves is not None and self._schema is not None and self._fs is not None
        assert self._run_keys is not None
        partition = {c: candidate.existing.get(f"partition.{c}") for c in partition_columns}
        found = read_key_columns(
            self._table_uri, candidate.file.path, self._schema, partition, self._fs, self._root
        )
        hits = key_matches(found.select(list(self._moves.keys)), self._run_keys)
        if in_regions is not None:
            hits = pc.and_(hits, pc.invert(in_regions))
        rows = found.append_column(_FILE, pa.repeat(pa.scalar(index, pa.int64()), found.num_rows))
        rows = rows.append_column(_ROW, pa.array(range(found.num_rows), type=pa.int64()))
        self._found.append(rows.filter(hits))
        return int(found.num_rows)

    def decide(self) -> _Drops:
        """The newest row of each new key wins (a new row on a tie with the table's); the
        table's rows that lose, and the new rows that lose."""
        if self._moves is None or self._new is None or not self._new.num_rows:
            return _Drops({}, None)
        keys, order = list(self._moves.keys), self._moves.order
        new = self._new
        info = _max_by_key(new, keys, order, _NEW_MAX)
        old = pa.concat_tables(self._found) if self._found else None
        if old is not None and old.num_rows:
            info = info.join(_max_by_key(old, keys, order, _OLD_MAX), keys, join_type="left outer")
        else:
            info = info.append_column(
                _OLD_MAX, pa.nulls(info.num_rows, new.schema.field(order).type)
            )
        wins = pc.or_kleene(
            pc.is_null(info.column(_OLD_MAX)),
            pc.greater_equal(info.column(_NEW_MAX), info.column(_OLD_MAX)),
        )
        info = info.append_column(_WINS, pc.fill_null(wins, True))
        joined = new.join(info, keys)
        newest = pc.and_(
            joined.column(_WINS), pc.equal(joined.column(order), joined.column(_NEW_MAX))
        )
        chosen = joined.filter(pc.fill_null(newest, False))
        kept = chosen.group_by(keys).aggregate([(_NEW, "max")]).column(f"{_NEW}_max")
        superseded = pc.invert(pc.is_in(new.column(_NEW), value_set=kept.combine_chunks()))
        drops: dict[int, list[int]] = {}
        if old is not None and old.num_rows:
            judged = old.join(info.select([*keys, _OLD_MAX, _WINS]), keys)
            older = pc.or_kleene(
                pc.is_null(judged.column(order)),
                pc.less(judged.column(order), judged.column(_OLD_MAX)),
            )
            lost = judged.filter(pc.fill_null(pc.or_kleene(judged.column(_WINS), older), False))
            for file_index, row in zip(
                lost.column(_FILE).to_pylist(), lost.column(_ROW).to_pylist()
            ):
                drops.setdefault(file_index, []).append(row)
        return _Drops(drops, superseded.combine_chunks())


def _max_by_key(rows: pa.Table, keys: list[str], order: str, name: str) -> pa.Table:
    """Each key once, with its greatest ``order`` as ``name``."""
    grouped = rows.group_by(keys).aggregate([(order, "max")])
    return pa.table(
        [*(grouped.column(k) for k in keys), grouped.column(f"{order}_max")],
        names=[*keys, name],
    )


@dataclass(frozen=True)
class _Drops:
    """What :meth:`_Moving.decide` found: the table rows (by candidate file, row) and the new
    rows (True: superseded, in the new files' order) that leave."""

    table: Mapping[int, list[int]]
    new: pa.Array | None

    @property
    def superseded(self) -> int:
        return 0 if self.new is None else int(pc.sum(self.new).as_py() or 0)

    def table_rows(self, index: int, in_regions: pa.Array) -> pa.Array:
        """The rows of candidate ``index`` to drop: in a region, or moved."""
        rows = self.table.get(index)
        if not rows:
            return in_regions
        moved = pc.is_in(
            pa.array(range(len(in_regions)), type=pa.int64()), value_set=pa.array(rows)
        )
        return pc.or_(in_regions, moved)

    def rewrite_new(
        self,
        table_uri: str,
        new_files: Sequence[DataFile],
        partition_columns: Sequence[str],
        fs: fsspec.AbstractFileSystem,
        root: str,
    ) -> list[RewrittenFile]:
        """The new files written again without their superseded rows."""
        if self.new is None or not self.superseded:
            return []
        done: list[RewrittenFile] = []
        offset = 0
        try:
            for new in new_files:
                mask = self.new.slice(offset, new.num_records)
                offset += new.num_records
                if len(mask) != new.num_records:
                    raise DeltaCommitError(
                        f"new file {new.path!r} of table {table_uri!r} holds more rows than its "
                        "statistics say; stage the run again",
                        table_uri=table_uri,
                    )
                if not pc.any(mask).as_py():
                    continue
                file = RemovedFile(new.path, new.size, new.partition_values, new.num_records)
                done.append(
                    rewrite_without(
                        table_uri, file, mask, partition_columns, fs, root, prefix="part-replace"
                    )
                )
        except BaseException:
            delete_remainders(done, fs, root)
            raise
        return done
