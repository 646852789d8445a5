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

from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.replace_window import Interval, ReplaceWindow, WindowValue, value_kind
from watermark_assets.delta.committer import CommitOutcome, DeltaCommitter, TxnVersion
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
    "RemovedFile",
    "ReplacePlan",
    "ReplaceWindow",
    "RewrittenFile",
    "commit_replace",
    "plan_replace",
]

REPLACE_METADATA_KEY = "watermark_assets.replace"
"""The ``commitInfo`` key of a replace commit: the window, files removed and rewritten, rows."""


@dataclass(frozen=True, kw_only=True)
class ReplacePlan(RewritePlan):
    """What one replace commits (:class:`RewritePlan`), and the region it replaces: the rows in
    every one of ``windows`` (one window per column; usually one)."""

    windows: tuple[ReplaceWindow, ...]

    @property
    def window(self) -> ReplaceWindow:
        """The first window (the only one of a single-column replace)."""
        return self.windows[0]

    def metadata(self) -> dict[str, Any]:
        """The ``watermark_assets.replace`` entry of the commit."""
        region = {"windows": [w.to_json() for w in self.windows]} if len(self.windows) > 1 else {}
        return {"window": self.window.to_json(), **region, **super().metadata()}


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
    windows = _region(window)
    table, fs, root = open_table(table_uri, storage_options=storage_options, filesystem=filesystem)
    types: dict[str, pa.DataType] = {}
    for each in windows:
        types[each.column], partition_columns = _column_of(
            table_uri, table, each, new_files, fs, root
        )
    for new in new_files:
        for each in windows:
            _check_inside(table_uri, each, new, types[each.column], partition_columns, fs, root)
    if table is None:
        return ReplacePlan(
            table_uri=table_uri,
            windows=windows,
            read_version=-1,
            new_files=tuple(new_files),
            removed=(),
            rewritten=(),
            kept_files=0,
            _filesystem=fs,
            _root=root,
        )
    _refuse_unsupported_features(table_uri, table, windows[0])
    removed: list[RemovedFile] = []
    rewritten: list[RewrittenFile] = []
    kept = 0
    try:
        for file, existing in snapshot_files(table, partition_columns):
            places = {
                each: _place_existing(each, existing, types[each.column], partition_columns)
                for each in windows
            }
            undecided = [each for each, place in places.items() if place is not _Place.INSIDE]
            if _Place.OUTSIDE in places.values():  # outside one window: outside the region
                kept += 1
            elif not undecided:
                removed.append(file)
            else:  # the windows statistics proved hold every row: only the others are read
                done = _rewrite(table_uri, undecided, file, partition_columns, fs, root)
                if done is None:
                    kept += 1
                else:
                    rewritten.append(done)
    except BaseException:
        delete_remainders(rewritten, fs, root)
        raise
    return ReplacePlan(
        table_uri=table_uri,
        windows=windows,
        read_version=table.version(),
        new_files=tuple(new_files),
        removed=tuple(removed),
        rewritten=tuple(rewritten),
        kept_files=kept,
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
) -> CommitOutcome:
    """Commit ``plan`` as ONE Delta commit, or nothing: stale when the table moved since the plan.

    On a stale outcome or an error the rewritten remainders are deleted; plan again from the new
    snapshot (:func:`plan_replace`) with freshly read txn versions.
    """
    return commit_rewrite(
        committer,
        plan,
        entry_key=REPLACE_METADATA_KEY,
        schema=schema,
        partition_by=partition_by,
        txns=txns,
        custom_metadata=custom_metadata,
        now=now,
    )


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


def _rewrite(
    table_uri: str,
    windows: Sequence[ReplaceWindow],
    file: RemovedFile,
    partition_columns: Sequence[str],
    fs: fsspec.AbstractFileSystem,
    root: str,
) -> RewrittenFile | None:
    """Read a file the statistics could not place in ``windows`` (those that hold all of its rows
    are left out); its remainder without the rows in every window, or None (none there)."""
    data = pq.read_table(f"{root}/{file.path}", filesystem=fs)
    inside: pa.ChunkedArray | None = None
    for window in windows:
        if window.column not in data.column_names:
            raise DeltaCommitError(
                f"file {file.path!r} of table {table_uri!r} has no column {window.column!r}; a "
                "replace cannot tell which of its rows are in the window. Rewrite the table with "
                "the column in every file",
                table_uri=table_uri,
            )
        mask = _in_window(window, data.column(window.column))
        inside = mask if inside is None else pc.and_(inside, mask)
    assert inside is not None  # a region has a window
    if not pc.any(inside).as_py():
        return None
    return rewrite_without(
        table_uri, file, inside, partition_columns, fs, root, data=data, prefix="part-replace"
    )


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
