"""What a range replace and a merge on keys share: ONE commit of removes, rewrites and adds.

Both plan on one snapshot of the table and place each of its files: kept, removed whole, or read
and rewritten without some of its rows next to the original (a remove of the old file, an add of
the remainder). Both commit through :meth:`DeltaCommitter.commit` with the remove actions and the
snapshot's version as ``read_version``: the commit is made on exactly the planned snapshot or the
outcome is stale, and a plan that is not committed deletes the remainders it wrote.

- :class:`RemovedFile`, :class:`RewrittenFile`: a file of the snapshot removed, or rewritten.
- :class:`RewritePlan`: what such a commit holds (the base of ``ReplacePlan`` and ``MergePlan``):
  its remove actions, its add files (new files, then remainders), ``discard``.
- :func:`open_table`: the table (None: none yet), its fsspec filesystem and root.
- :func:`snapshot_files`: every add action of the snapshot, as a :class:`RemovedFile` with the
  flattened ``get_add_actions`` row (statistics, typed partition values).
- :func:`rewrite_without`: a file written again without the rows a mask drops.
- :func:`commit_rewrite`: the pinned commit, with the plan's entry in ``commitInfo``.
"""

from __future__ import annotations

import json
import posixpath
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from deltalake.transaction import RemoveAction

from watermark_assets import storage
from watermark_assets.core.clock import Clock, ensure_utc, system_clock
from watermark_assets.delta.committer import CommitOutcome, DeltaCommitter, TxnVersion
from watermark_assets.delta.schema_change import FIXED, SchemaEvolution
from watermark_assets.delta.stats import DataFile, describe_data_files
from watermark_assets.exceptions import DeltaCommitError

__all__ = [
    "RemovedFile",
    "RewritePlan",
    "RewrittenFile",
    "commit_rewrite",
    "open_table",
    "rewrite_without",
    "snapshot_files",
]


@dataclass(frozen=True)
class RemovedFile:
    """A file of the snapshot that the commit removes; ``path`` as in :class:`DataFile`."""

    path: str
    size: int
    partition_values: Mapping[str, str | None] | None
    """As in the log; None when the snapshot gave typed values (the remove then omits them)."""
    num_records: int


@dataclass(frozen=True)
class RewrittenFile:
    """A file with some rows to drop: removed, and its other rows added back as ``remainder``."""

    removed: RemovedFile
    remainder: DataFile | None
    """None when every row was dropped (the file is only removed)."""


@dataclass(frozen=True, kw_only=True)
class RewritePlan:
    """What one commit of removes, rewrites and adds holds, planned on the snapshot
    ``read_version`` (-1: no table yet)."""

    table_uri: str
    read_version: int
    new_files: tuple[DataFile, ...]
    removed: tuple[RemovedFile, ...]
    rewritten: tuple[RewrittenFile, ...]
    kept_files: int
    _filesystem: fsspec.AbstractFileSystem = field(repr=False, compare=False)
    _root: str = field(repr=False, compare=False)

    @property
    def rows_removed(self) -> int:
        """Rows of the table dropped: in removed files and cut out of rewritten ones."""
        cut = sum(
            r.removed.num_records - (r.remainder.num_records if r.remainder else 0)
            for r in self.rewritten
        )
        return sum(f.num_records for f in self.removed) + cut

    @property
    def rows_added(self) -> int:
        """Rows of the new files (the remainders are not counted: they were in the table)."""
        return sum(f.num_records for f in self.new_files)

    @property
    def rows_kept_by_rewrite(self) -> int:
        """Rows the remainders add back (they were in the rewritten files)."""
        return sum(r.remainder.num_records for r in self.rewritten if r.remainder)

    def remove_actions(self, now_ms: int) -> list[RemoveAction]:
        files = [*self.removed, *(r.removed for r in self.rewritten)]
        return [
            RemoveAction(
                f.path,
                True,
                now_ms,
                f.size,
                None if f.partition_values is None else dict(f.partition_values),
            )
            for f in files
        ]

    def add_files(self) -> list[DataFile]:
        return [*self.new_files, *(r.remainder for r in self.rewritten if r.remainder)]

    def metadata(self) -> dict[str, Any]:
        """The plan's ``commitInfo`` entry (each kind of plan adds its own fields)."""
        return {
            "read_version": self.read_version,
            "removed_files": len(self.removed),
            "rewritten_files": len(self.rewritten),
            "rows_removed": self.rows_removed,
            "rows_added": self.rows_added,
        }

    def discard(self) -> None:
        """Delete the rewritten remainders of a plan that was NOT committed (stale, refused).

        The new files are the caller's and stay. :func:`commit_rewrite` calls this itself.
        """
        delete_remainders(self.rewritten, self._filesystem, self._root)


def open_table(
    table_uri: str,
    *,
    storage_options: Mapping[str, str] | None = None,
    filesystem: fsspec.AbstractFileSystem | None = None,
) -> tuple[DeltaTable | None, fsspec.AbstractFileSystem, str]:
    """The table's latest snapshot (None: no table yet), its filesystem and its root path."""
    if filesystem is None:
        fs, root = storage.filesystem(table_uri)
    else:
        fs, root = filesystem, filesystem._strip_protocol(table_uri)
    options = dict(storage_options) if storage_options else storage.delta_options(table_uri)
    try:
        table: DeltaTable | None = DeltaTable(table_uri, storage_options=options)
    except TableNotFoundError:
        table = None
    return table, fs, str(root).rstrip("/")


def snapshot_files(
    table: DeltaTable, partition_columns: Sequence[str]
) -> Iterator[tuple[RemovedFile, dict[str, Any]]]:
    """Every file of the snapshot: as it would be removed, and its flattened add action row."""
    for existing in pa.table(table.get_add_actions(flatten=True)).to_pylist():
        file = RemovedFile(
            unquote(existing["path"]),  # the log's form is percent-encoded
            int(existing["size_bytes"]),
            _partition_texts({c: existing.get(f"partition.{c}") for c in partition_columns}),
            int(existing["num_records"] or 0),
        )
        yield file, existing


def rewrite_without(
    table_uri: str,
    file: RemovedFile,
    drop: pa.Array | pa.ChunkedArray,
    partition_columns: Sequence[str],
    fs: fsspec.AbstractFileSystem,
    root: str,
    *,
    data: pa.Table | None = None,
    prefix: str = "part-rewrite",
) -> RewrittenFile:
    """``file`` without the rows where ``drop`` is True (``data``: the file already read, else it
    is read whole), written next to the original as ``{prefix}-{uuid}.parquet``; no remainder
    when every row is dropped. Timestamps are written in microseconds, refusing to truncate."""
    if data is None:
        data = pq.read_table(f"{root}/{file.path}", filesystem=fs)
    if len(drop) != data.num_rows:
        raise DeltaCommitError(
            f"file {file.path!r} of table {table_uri!r} changed while it was rewritten "
            f"({data.num_rows} rows, {len(drop)} expected); plan again",
            table_uri=table_uri,
        )
    remainder = data.filter(pc.invert(drop))
    if remainder.num_rows == 0:
        return RewrittenFile(file, None)
    folder = posixpath.dirname(file.path)
    name = f"{prefix}-{uuid.uuid4()}.parquet"
    relative = f"{folder}/{name}" if folder else name
    with fs.open(f"{root}/{relative}", "wb") as out:
        pq.write_table(remainder, out, coerce_timestamps="us", allow_truncated_timestamps=False)
    described = describe_data_files(table_uri, [relative], partition_columns, filesystem=fs)[0]
    return RewrittenFile(file, described)


def delete_remainders(
    rewritten: Sequence[RewrittenFile], fs: fsspec.AbstractFileSystem, root: str
) -> None:
    """Delete the remainders written for a plan that will not be committed."""
    for done in rewritten:
        if done.remainder is not None:
            fs.rm_file(f"{root}/{done.remainder.path}")


def commit_rewrite(
    committer: DeltaCommitter,
    plan: RewritePlan,
    *,
    entry_key: str,
    schema: pa.Schema,
    partition_by: Sequence[str],
    txns: Sequence[TxnVersion],
    custom_metadata: Mapping[str, str],
    now: Clock = system_clock,
    evolution: SchemaEvolution = FIXED,
) -> CommitOutcome:
    """Commit ``plan`` as ONE Delta commit pinned to its snapshot (``plan.metadata()`` under
    ``entry_key``), or nothing: stale when the table moved since the plan. On a stale outcome or
    an error the rewritten remainders are deleted; the caller plans again."""
    if committer.table_uri != plan.table_uri:
        raise DeltaCommitError(
            f"the plan was made on {plan.table_uri!r}, not on {committer.table_uri!r}; "
            "plan and commit against the same table",
            table_uri=committer.table_uri,
        )
    metadata = {**custom_metadata, entry_key: json.dumps(plan.metadata())}
    now_ms = int(ensure_utc(now()).timestamp() * 1000)
    try:
        outcome = committer.commit(
            plan.add_files(),
            schema=schema,
            partition_by=partition_by,
            txns=txns,
            custom_metadata=metadata,
            removes=plan.remove_actions(now_ms),
            read_version=plan.read_version,
            evolution=evolution,
        )
    except BaseException:
        plan.discard()
        raise
    if outcome.version is None:
        plan.discard()
    return outcome


def _partition_texts(values: Mapping[str, Any]) -> dict[str, str | None] | None:
    if all(v is None or isinstance(v, str) for v in values.values()):
        return dict(values)
    return None
