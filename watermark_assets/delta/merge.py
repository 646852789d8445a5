"""Merge on keys (seed 001's "merge on configured keys"): a run's rows upserted in ONE commit.

Contract:

- :func:`plan_merge` reads the run's keys from its new files (the key columns only; a key that is
  a partition column comes from the file's folder) and refuses, before anything is written
  (:class:`MergeKeyError`): a key column missing from the table or from a new file, a null in a
  key column of a new row, the same key twice among the new rows (the caller keeps one per key:
  ``stage_rows`` does, the greatest watermark tuple), a table with deletion vectors or column
  mapping. It reads the table's current snapshot once (its version is the plan's
  ``read_version``) and places every file:

  - skipped, from the statistics alone, when ONE key column proves that the file holds none of
    the run's values of that column (its ``[min, max]``, or its partition value, contains none of
    them; an empty file or one whose key column is all null holds no key). Statistics are trusted
    as range replace trusts them (:func:`~watermark_assets.delta.stats.stats_value`): not for a
    float column (NaN is in no statistic), a string at the 32-character cut is unknown, a
    timestamp maximum on a whole millisecond is widened by 999 µs;
  - otherwise its key columns are read with pyarrow and tested (``pyarrow.compute.is_in`` for one
    key column; a semi join on several): no row matches → kept; every row → removed; some →
    rewritten without those rows next to the original (:func:`~watermark_assets.delta.rewrite.
    rewrite_without`).

  ``rows_updated`` counts the new rows whose key the table held, ``rows_inserted`` the others;
  ``rows_removed`` the table's rows dropped (more than ``rows_updated`` only if the table held a
  key twice, e.g. appended before ``merge_keys`` was set: the merge leaves it once).
- :func:`commit_merge` makes ONE Delta commit of the remove actions, the add actions (new files,
  then remainders), the caller's txns and custom metadata, plus ``watermark_assets.merge`` (keys,
  counts), pinned to the planned snapshot (:func:`~watermark_assets.delta.rewrite.commit_rewrite`,
  shared with range replace): another commit landing since the plan makes the outcome stale, the
  plan's remainders are deleted and the caller plans again. Never a delete commit, then an insert.

Why not delta-rs's ``TableMerger`` (``DeltaTable.merge``): it writes the rows itself (ours are
Spark's files, written once) and takes its predicate as SQL text; and it commits without our txn
actions' optimistic lock on the planned snapshot.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable

from watermark_assets import names
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.column.merge import KeyValues, merge_key_names
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
from watermark_assets.delta.schema_change import FIXED, SchemaEvolution
from watermark_assets.delta.stats import (
    DataFile,
    stats_kind,
    stats_value,
    unsupported_read_feature,
    widen_cut_maximum,
)
from watermark_assets.exceptions import MergeKeyError

__all__ = [
    "MERGE_METADATA_KEY",
    "MergePlan",
    "commit_merge",
    "key_matches",
    "key_schema_of",
    "key_values",
    "may_hold_keys",
    "new_row_keys",
    "plan_merge",
    "read_key_columns",
]

MERGE_METADATA_KEY = names.MERGE_KEY
"""The ``commitInfo`` key of a merge commit: the keys, files removed and rewritten, rows."""

_ROW = "__watermark_assets_row"


@dataclass(frozen=True, kw_only=True)
class MergePlan(RewritePlan):
    """What one merge commits (:class:`RewritePlan`), on which keys, and what it matched."""

    keys: tuple[str, ...]
    rows_updated: int
    """New rows whose key the table held (their old rows are removed)."""
    files_skipped_by_statistics: int
    files_read: int

    @property
    def rows_inserted(self) -> int:
        """New rows whose key the table did not hold."""
        return self.rows_added - self.rows_updated

    def metadata(self) -> dict[str, Any]:
        """The ``watermark_assets.merge`` entry of the commit."""
        return {
            "keys": list(self.keys),
            **super().metadata(),
            "rows_updated": self.rows_updated,
            "rows_inserted": self.rows_inserted,
            "files_skipped_by_statistics": self.files_skipped_by_statistics,
            "files_read": self.files_read,
        }


def plan_merge(
    table_uri: str,
    keys: Sequence[str],
    new_files: Sequence[DataFile],
    *,
    storage_options: Mapping[str, str] | None = None,
    filesystem: fsspec.AbstractFileSystem | None = None,
) -> MergePlan:
    """Plan upserting ``new_files`` into the table at ``table_uri`` on ``keys`` (module docstring).

    ``new_files`` are already under the table root (described by ``describe_data_files``).
    Raises :class:`MergeKeyError` before writing anything.
    """
    try:
        names = merge_key_names(keys)
    except ValueError as error:
        raise MergeKeyError(table_uri, keys, str(error), "fix table.merge_keys") from None
    table, fs, root = open_table(table_uri, storage_options=storage_options, filesystem=filesystem)
    key_schema, partition_columns = key_schema_of(table_uri, table, names, new_files, fs, root)
    run_keys = _run_keys(table_uri, names, key_schema, new_files, fs, root)
    empty = {"rows_updated": 0, "files_skipped_by_statistics": 0, "files_read": 0}
    if table is None:
        return MergePlan(
            table_uri=table_uri,
            keys=names,
            read_version=-1,
            new_files=tuple(new_files),
            removed=(),
            rewritten=(),
            kept_files=0,
            **empty,
            _filesystem=fs,
            _root=root,
        )
    feature = unsupported_read_feature(table)
    if feature is not None:
        raise MergeKeyError(
            table_uri,
            names,
            f"the table uses {feature}, so its Parquet files cannot be rewritten row by row here",
            "merge with Spark and delta-spark (MERGE INTO), or rewrite the table without the "
            "feature (REORG TABLE ... APPLY (PURGE), then disable it)",
        )
    bounds = key_values(run_keys, key_schema)
    removed: list[RemovedFile] = []
    rewritten: list[RewrittenFile] = []
    matched: list[pa.Table] = []
    kept = skipped = read = 0
    try:
        for file, existing in snapshot_files(table, partition_columns):
            if not may_hold_keys(existing, bounds, key_schema, partition_columns):
                kept += 1
                skipped += 1
                continue
            read += 1
            partition = {c: existing.get(f"partition.{c}") for c in partition_columns}
            found = read_key_columns(table_uri, file.path, key_schema, partition, fs, root)
            hits = key_matches(found, run_keys)
            count = int(pc.sum(hits).as_py() or 0)
            if count == 0:
                kept += 1
                continue
            matched.append(found.filter(hits))
            file = dataclasses.replace(file, num_records=found.num_rows)  # the log may lack it
            if count == found.num_rows:
                removed.append(file)
            else:
                rewritten.append(
                    rewrite_without(
                        table_uri, file, hits, partition_columns, fs, root, prefix="part-merge"
                    )
                )
    except BaseException:
        delete_remainders(rewritten, fs, root)
        raise
    updated = 0
    if matched:
        updated = int(pc.sum(key_matches(run_keys, pa.concat_tables(matched))).as_py() or 0)
    return MergePlan(
        table_uri=table_uri,
        keys=names,
        read_version=table.version(),
        new_files=tuple(new_files),
        removed=tuple(removed),
        rewritten=tuple(rewritten),
        kept_files=kept,
        rows_updated=updated,
        files_skipped_by_statistics=skipped,
        files_read=read,
        _filesystem=fs,
        _root=root,
    )


def commit_merge(
    committer: DeltaCommitter,
    plan: MergePlan,
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
    snapshot (:func:`plan_merge`) with freshly read txn versions.
    """
    return commit_rewrite(
        committer,
        plan,
        entry_key=MERGE_METADATA_KEY,
        schema=schema,
        partition_by=partition_by,
        txns=txns,
        custom_metadata=custom_metadata,
        now=now,
        evolution=evolution,
    )


def key_schema_of(
    table_uri: str,
    table: DeltaTable | None,
    keys: tuple[str, ...],
    new_files: Sequence[DataFile],
    fs: fsspec.AbstractFileSystem,
    root: str,
) -> tuple[pa.Schema, list[str]]:
    """The key columns' Arrow types (the table's, else the first new file's) and the partition
    columns; refuses a key that is not a column."""
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
        raise MergeKeyError(
            table_uri,
            keys,
            "the table does not exist and there are no new files",
            "nothing to merge: skip the commit",
        )
    for key in keys:
        if key not in schema.names:
            raise MergeKeyError(
                table_uri,
                keys,
                f"merge key {key!r} is not a column of the table (it has {schema.names})",
                "name columns of the table in table.merge_keys",
                column=key,
            )
    return pa.schema([schema.field(k) for k in keys]), partition_columns


def _run_keys(
    table_uri: str,
    keys: tuple[str, ...],
    key_schema: pa.Schema,
    new_files: Sequence[DataFile],
    fs: fsspec.AbstractFileSystem,
    root: str,
) -> pa.Table:
    """The new rows' keys; refuses a missing key column, a null key and a key given twice."""
    run_keys = new_row_keys(table_uri, keys, key_schema, new_files, fs, root)
    counts = run_keys.group_by(list(keys)).aggregate([([], "count_all")])
    twice = counts.filter(pc.greater(counts.column("count_all"), 1))
    if twice.num_rows:
        example = {k: twice.column(k)[0].as_py() for k in keys}
        raise MergeKeyError(
            table_uri,
            keys,
            f"{twice.num_rows} key(s) occur more than once among the new rows (e.g. {example!r}, "
            f"{twice.column('count_all')[0].as_py()} times); a merge would insert each of them",
            "keep one row per key before the merge (a column pipeline keeps the row with the "
            "greatest watermark)",
            value=example,
        )
    return run_keys


def new_row_keys(
    table_uri: str,
    keys: Sequence[str],
    schema: pa.Schema,
    new_files: Sequence[DataFile],
    fs: fsspec.AbstractFileSystem,
    root: str,
) -> pa.Table:
    """The ``schema`` columns (the keys, perhaps more) of the new files' rows, file after file;
    refuses a missing key column and a null key."""
    parts = []
    for new in new_files:
        found = read_key_columns(table_uri, new.path, schema, new.partition_values, fs, root)
        for key in keys:
            nulls = found.column(key).null_count
            if nulls:
                first = pc.index(pc.is_null(found.column(key)), True).as_py()
                example = {k: v for k, v in found.slice(first, 1).to_pylist()[0].items()}
                raise MergeKeyError(
                    table_uri,
                    keys,
                    f"new file {new.path!r} holds {nulls} row(s) with a null in key column "
                    f"{key!r} (e.g. {example!r}); a row without a key cannot be merged",
                    f"filter or fill the nulls of {key!r} in the source (e.g. read it through a "
                    f"query with WHERE {key} IS NOT NULL), or merge on columns that are never null",
                    column=key,
                    value=None,
                )
        parts.append(found)
    return pa.concat_tables(parts) if parts else schema.empty_table()


def read_key_columns(
    table_uri: str,
    path: str,
    key_schema: pa.Schema,
    partition_values: Mapping[str, Any],
    fs: fsspec.AbstractFileSystem,
    root: str,
) -> pa.Table:
    """The key columns of one data file, typed as ``key_schema``; a partition column's value
    comes from ``partition_values`` (typed from the snapshot, or the folder's text)."""
    in_file = [f.name for f in key_schema if f.name not in partition_values]
    try:
        data = pq.read_table(f"{root}/{path}", columns=in_file, filesystem=fs)
    except pa.ArrowInvalid as error:
        missing = [c for c in in_file if c not in pq.read_schema(f"{root}/{path}", filesystem=fs)]
        if not missing:
            raise
        raise MergeKeyError(
            table_uri,
            key_schema.names,
            f"data file {path!r} has no column {missing[0]!r} (a merge key): its rows' keys "
            "cannot be known",
            "write every row with all key columns (the source must have them), or rewrite the "
            "table's old files with the column",
            column=missing[0],
        ) from error
    columns = []
    for field in key_schema:
        if field.name in partition_values:
            value = _typed(table_uri, key_schema, field, partition_values[field.name], path)
            column: pa.Array | pa.ChunkedArray = pa.repeat(value, data.num_rows)
        else:
            column = data.column(field.name)
        if column.type != field.type:
            try:
                column = column.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise MergeKeyError(
                    table_uri,
                    key_schema.names,
                    f"key column {field.name!r} of data file {path!r} is {column.type}, the "
                    f"table's is {field.type}, and its values do not convert exactly ({error})",
                    "write the key columns with the table's types",
                    column=field.name,
                ) from error
        columns.append(column)
    return pa.table(columns, schema=key_schema)


def _typed(
    table_uri: str, key_schema: pa.Schema, field: pa.Field, raw: Any, path: str
) -> pa.Scalar:
    """A partition value as a scalar of the key column's type (None: a null)."""
    if raw is None:
        return pa.scalar(None, type=field.type)
    try:
        if isinstance(raw, str) and not pa.types.is_string(field.type):
            return pa.array([raw]).cast(field.type)[0]
        return pa.scalar(raw, type=field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
        raise MergeKeyError(
            table_uri,
            key_schema.names,
            f"partition value {raw!r} of key column {field.name!r} in {path!r} is not a "
            f"{field.type} ({error})",
            "merge on key columns that are not partition columns, or on partition columns of a "
            "string, integer or date type",
            column=field.name,
            value=raw,
        ) from error


def key_matches(found: pa.Table, run_keys: pa.Table) -> pa.Array:
    """True for each row of ``found`` whose key is one of ``run_keys`` (a null key: False)."""
    if found.num_rows == 0 or run_keys.num_rows == 0:
        return pa.repeat(pa.scalar(False), found.num_rows)
    if found.num_columns == 1:
        values = run_keys.column(0).combine_chunks()
        return pc.fill_null(pc.is_in(found.column(0), value_set=values), False).combine_chunks()
    rows = found.append_column(_ROW, pa.array(range(found.num_rows), type=pa.int64()))
    joined = rows.join(run_keys, keys=run_keys.column_names, join_type="left semi")
    hit_rows = joined.column(_ROW).combine_chunks()
    return pc.is_in(rows.column(_ROW), value_set=hit_rows).combine_chunks()


def key_values(run_keys: pa.Table, key_schema: pa.Schema) -> dict[str, KeyValues]:
    """The run's sorted distinct values of each key column whose statistics can be trusted."""
    trusted = {}
    for field in key_schema:
        if stats_kind(field.type) is None or pa.types.is_floating(field.type):
            continue  # no statistics read back, or NaN (in no statistic) could be a key
        values = pc.unique(run_keys.column(field.name)).to_pylist()
        trusted[field.name] = KeyValues.of(field.name, (_comparable(v) for v in values))
    return trusted


def _comparable(value: Any) -> Any:
    """A key value as :func:`stats_value` returns statistics: datetimes aware UTC (a timestamp
    without time zone: its wall clock read as UTC)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)
    return value


def may_hold_keys(
    existing: Mapping[str, Any],
    bounds: Mapping[str, KeyValues],
    key_schema: pa.Schema,
    partition_columns: Sequence[str],
) -> bool:
    """False only when the file's statistics or partition values prove it holds no run key."""
    counted = existing.get("num_records")
    rows = None if counted is None else int(counted)
    if rows == 0:
        return False
    for column, values in bounds.items():
        column_type = key_schema.field(column).type
        if column in partition_columns:
            raw = existing.get(f"partition.{column}")
            if raw is None:
                return False  # a null partition: every row's key is null, none matches
            low = high = stats_value(raw, column_type)
        else:
            nulls = existing.get(f"null_count.{column}")
            if rows is not None and nulls is not None and int(nulls) == rows:
                return False  # only nulls in a key column: no key matches
            low = stats_value(existing.get(f"min.{column}"), column_type)
            high = widen_cut_maximum(
                stats_value(existing.get(f"max.{column}"), column_type), column_type
            )
        if low is None and high is None:
            continue
        try:
            if not values.any_within(low, high):
                return False
        except TypeError:  # a statistic of another kind (a date next to datetimes): no proof
            continue
    return True
