"""Which upstream files an event-time batch reads: by version, or by event time when the versions
are gone (issue 21 §3).

By version (the normal case): the rows input ``i`` appended since the version ``V`` the last
batch read up to are the files its commits ``(V, to]`` added with ``dataChange`` (a compaction's
files carry no new row). Two kinds of maintenance take that read away:

- log cleanup (a checkpoint, then commit JSON files older than ``delta.logRetentionDuration``
  deleted): the commits after ``V`` are not in the log any more
  (:class:`~watermark_assets.exceptions.LogHistoryLostError`);
- OPTIMIZE then VACUUM: the files those commits added were rewritten (their rows now sit in a
  compacted file beside older rows) and deleted.

Then the batch reads **by event time**: every input's rows that the watermark has not closed
(the windows still open, read from the current snapshot, files pruned by their event-time
statistics), and the aggregate *replaces* its state with their partials instead of merging into
it. That is exact for every window still open: the state held the partials of exactly the rows
those windows had at ``V``, and the snapshot holds them plus the rows appended since. An input
that had read nothing yet (``V = -1``) reads its whole snapshot either way (all of it is new).

What the read by event time cannot see is a row appended since ``V`` into a window already
closed (a late row) or without an event time: it cannot be told apart from the rows already
emitted. Those are counted, never skipped silently (``runs/event_window.py``): rows appended
(the upstream's rows now less at ``V``, from the add actions' statistics) less the rows the open
windows gained.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from watermark_assets import storage
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.exceptions import (
    LogHistoryLostError,
    UpstreamHistoryLostError,
    UpstreamNotAppendOnlyError,
)


@dataclass(frozen=True, kw_only=True)
class UpstreamRead:
    """How a batch reads one input: the versions ``(read_from, read_to]`` and the files."""

    name: str
    uri: str
    read_from: int
    read_to: int
    #: the upstream's rows at ``read_to`` (add actions' statistics; None: unknown)
    rows: int | None
    #: the files to read: the ones ``(read_from, read_to]`` added, or (by event time) the
    #: snapshot's files that may hold rows of a window still open
    files: tuple[str, ...]
    #: why ``(read_from, read_to]`` cannot be read by version (None: it can)
    lost: str | None = None
    by_event_time: bool = False

    @property
    def versions(self) -> str:
        return f"{self.read_from + 1}..{self.read_to}"


@dataclass(frozen=True)
class _Snapshot:
    version: int
    actions: pa.Table  # the add actions, flattened

    @property
    def paths(self) -> list[str]:
        return [str(p) for p in self.actions.column("path").to_pylist()]

    @property
    def rows(self) -> int | None:
        if "num_records" not in self.actions.column_names:
            return None if self.actions.num_rows else 0
        counts = self.actions.column("num_records")
        if counts.null_count:
            return None
        return int(pc.sum(counts).as_py() or 0)


def plan_reads(
    upstreams: Mapping[str, str],
    read_from: Mapping[str, int],
    upstream_to: Mapping[str, int] | None,
    *,
    event_column: str,
    open_from_ms: int | None,
) -> dict[str, UpstreamRead]:
    """Each input's read (module docstring). ``upstream_to``: the versions a recorded plan read
    up to (None: each upstream's newest). ``open_from_ms``: every row before it is in a window
    the watermark closed (None: no window closed yet); files holding only such rows are not
    read by event time."""
    reads: dict[str, UpstreamRead] = {}
    snapshots: dict[str, _Snapshot | None] = {}
    for name, uri in upstreams.items():
        after = read_from[name]
        snapshot = _snapshot(uri, None if upstream_to is None else upstream_to[name])
        snapshots[name] = snapshot
        if upstream_to is not None:
            to = upstream_to[name]
        else:
            to = after if snapshot is None else snapshot.version
        rows = None if snapshot is None else snapshot.rows
        if to <= after:
            reads[name] = UpstreamRead(
                name=name, uri=uri, read_from=after, read_to=after, rows=rows, files=()
            )
            continue
        if after < 0:  # nothing read yet: every row of the snapshot is new
            files = _files(uri, _needed(name, uri, snapshot, to, "its first batch"), None, "")
            reads[name] = UpstreamRead(
                name=name, uri=uri, read_from=after, read_to=to, rows=rows, files=files
            )
            continue
        added, lost = _appended(uri, after, to, snapshot)
        reads[name] = UpstreamRead(
            name=name, uri=uri, read_from=after, read_to=to, rows=rows, files=added, lost=lost
        )
    if not any(r.lost for r in reads.values()):
        return reads
    lost = "; ".join(f"{r.uri!r} versions {r.versions}: {r.lost}" for r in reads.values() if r.lost)
    for name, read in reads.items():
        if read.read_from < 0:
            continue  # its whole snapshot, as by version
        snapshot = _needed(name, read.uri, snapshots[name], read.read_to, lost)
        files = _files(read.uri, snapshot, open_from_ms, event_column)
        reads[name] = replace(read, files=files, by_event_time=True)
    return reads


def _snapshot(uri: str, version: int | None) -> _Snapshot | None:
    """The table at ``version`` (None: its newest), or None without a table or that version.

    A table that exists but cannot be read (a damaged log, storage refusing) raises: it is not
    "no rows yet"."""
    options = storage.delta_options(uri)
    try:
        table = DeltaTable(uri, storage_options=options)
    except TableNotFoundError:
        return None
    if version is not None and version != table.version():
        try:
            table = DeltaTable(uri, version=version, storage_options=options)
        except DeltaError:  # that version's log and checkpoint are gone
            return None
    return _Snapshot(table.version(), pa.table(table.get_add_actions(flatten=True)))


def _needed(name: str, uri: str, snapshot: _Snapshot | None, version: int, why: str) -> _Snapshot:
    if snapshot is None:
        raise UpstreamHistoryLostError(name, uri, version, why)
    return snapshot


def _files(
    uri: str, snapshot: _Snapshot, open_from_ms: int | None, event_column: str
) -> tuple[str, ...]:
    """The snapshot's files, less (with ``open_from_ms``) those whose greatest event time is
    before it: every row of theirs is in a closed window. One file is kept even then: its rows
    are filtered out, and Spark still gets the input's schema."""
    paths = snapshot.paths
    maxima = f"max.{event_column}"
    if open_from_ms is None or maxima not in snapshot.actions.column_names:
        return tuple(storage.join(uri, p) for p in paths)
    kept = [
        path
        for path, top in zip(paths, snapshot.actions.column(maxima).to_pylist(), strict=True)
        if top is None or _millis(top) >= open_from_ms
    ]
    if not kept and paths:
        kept = paths[-1:]
    return tuple(storage.join(uri, p) for p in kept)


def _millis(value: Any) -> int:
    from datetime import datetime, timezone

    from watermark_assets.core.time.instant import to_millis

    if isinstance(value, datetime):
        return to_millis(value if value.tzinfo else value.replace(tzinfo=timezone.utc))
    return int(value)  # a number column: taken as epoch milliseconds


def _appended(
    uri: str, after: int, through: int, snapshot: _Snapshot | None
) -> tuple[tuple[str, ...], str | None]:
    """The files the commits ``(after, through]`` added with new rows, or why they cannot be
    read: the commits are gone from the log, or some of their files were rewritten and deleted.

    A commit that removed rows (a delete, a replace, a merge) is refused: rows already
    aggregated and emitted cannot be taken back."""
    upstream = DeltaCommitter(uri)
    try:
        records = upstream.read_commits_after(after)
    except LogHistoryLostError as exc:
        return (), (
            f"commits {exc.first_missing}..{exc.oldest - 1} were cleaned up from its log "
            "(a checkpoint, then delta.logRetentionDuration)"
        )
    added: list[str] = []
    for record in records:
        if record.version > through:
            break
        if record.removed_data:
            raise UpstreamNotAppendOnlyError(uri, record.version, record.removed_data)
        added += [a.path for a in record.added if a.data_change]
    live = set() if snapshot is None else set(snapshot.paths)
    gone = [p for p in added if p not in live and not storage.exists(storage.join(uri, p))]
    if gone:
        return (), (
            f"{len(gone)} of the {len(added)} file(s) they added were rewritten (OPTIMIZE) and "
            f"deleted (VACUUM), e.g. {gone[0]!r}"
        )
    return tuple(storage.join(uri, p) for p in added), None
