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

A row appended since ``V`` into a window already closed (a late row) or without an event time
is not in that read: ``kinds/event_time/recover.py`` finds those by counting each closed window's
rows against the output and the late table (from the files :attr:`UpstreamRead.closed_files`
names) and keeps them as late records.

A batch whose output commit a run that died made has a recorded plan: it must read exactly the
versions that plan names. When one of them cannot be loaded any more (its log and checkpoint
cleaned) or its files were vacuumed, the batch stops with
:class:`~watermark_assets.exceptions.UpstreamHistoryLostError`, naming the version and the one
recovery, ``watermark-assets repair-state PIPELINE``, which moves the plan to the upstreams'
current versions (``replanned``): then every input is read by event time.
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
from watermark_assets.delta.committer import committer_for
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
    #: by event time: the snapshot's files that may hold rows of a closed window or without an
    #: event time (paths relative to the table), each with its modification time (ms), for
    #: ``kinds/event_time/recover.py``
    closed_files: tuple[tuple[str, int], ...] = ()

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

    def stat(self, kind: str, column: str) -> list[Any] | None:
        """Each file's statistic (``min``, ``max``, ``null_count``) of ``column``; None
        without it."""
        name = f"{kind}.{column}"
        if name not in self.actions.column_names:
            return None
        return list(self.actions.column(name).to_pylist())


@dataclass(frozen=True, kw_only=True)
class ReadBounds:
    """What a batch's reads by event time are cut by: the event column, the bound that closes a
    window (``end <= closed_ms``; None: no window closed yet) and the window size."""

    event_column: str
    closed_ms: int | None
    window_ms: int

    @property
    def open_from_ms(self) -> int | None:
        """Every row before it is in a window the bound closed."""
        return None if self.closed_ms is None else self.closed_ms - self.window_ms


def plan_reads(
    upstreams: Mapping[str, str],
    read_from: Mapping[str, int],
    upstream_to: Mapping[str, int] | None,
    bounds: ReadBounds,
    *,
    pipeline: str,
    batch: int,
    replanned: bool = False,
) -> dict[str, UpstreamRead]:
    """Each input's read (module docstring). ``upstream_to``: the versions a recorded plan read
    up to (None: each upstream's newest); files holding only rows of windows ``bounds`` closed
    are not read by event time. ``replanned``: the plan was moved to the upstreams' newer
    versions by ``repair-state`` (``kinds/event_time/window.replan_batch``): every input is read by
    event time. ``pipeline`` and ``batch`` name the recovery when a version is gone."""
    reads: dict[str, UpstreamRead] = {}
    snapshots: dict[str, _Snapshot | None] = {}
    lost_how = _Lost(pipeline, batch, recorded=upstream_to is not None)
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
        if after < 0 and not replanned:  # nothing read yet: every row of the snapshot is new
            whole = lost_how.needed(name, uri, snapshot, to, "its first batch")
            files = lost_how.present(name, uri, to, _files(uri, whole, None, ""))
            reads[name] = UpstreamRead(
                name=name, uri=uri, read_from=after, read_to=to, rows=rows, files=files
            )
            continue
        read_by_version = after >= 0 and not replanned
        added, lost = _appended(uri, after, to, snapshot) if read_by_version else ((), None)
        reads[name] = UpstreamRead(
            name=name, uri=uri, read_from=after, read_to=to, rows=rows, files=added, lost=lost
        )
    if replanned:
        lost = "replanned by repair-state: the versions it first read are gone"
    elif any(r.lost for r in reads.values()):
        lost = "; ".join(
            f"{r.uri!r} versions {r.versions}: {r.lost}" for r in reads.values() if r.lost
        )
    else:
        return reads
    for name, read in reads.items():
        if read.read_to < 0 or (read.read_from < 0 and not replanned):
            continue  # no table yet, or its whole snapshot, as by version
        snapshot = lost_how.needed(name, read.uri, snapshots[name], read.read_to, lost)
        files = _files(read.uri, snapshot, bounds.open_from_ms, bounds.event_column)
        reads[name] = replace(
            read,
            files=lost_how.present(name, read.uri, read.read_to, files),
            by_event_time=True,
            closed_files=_closed_files(snapshot, bounds),
        )
    return reads


def current_versions(
    upstreams: Mapping[str, str],
) -> tuple[dict[str, int], dict[str, int | None]]:
    """Each input's newest version and its rows then (-1 and 0 without a table)."""
    versions: dict[str, int] = {}
    rows: dict[str, int | None] = {}
    for name, uri in upstreams.items():
        snapshot = _snapshot(uri, None)
        versions[name] = -1 if snapshot is None else snapshot.version
        rows[name] = 0 if snapshot is None else snapshot.rows
    return versions, rows


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


@dataclass(frozen=True)
class _Lost:
    """Stops a batch whose upstream version is gone, naming what is missing and the recovery
    (``recorded``: the version is a recorded plan's, which ``repair-state`` moves on)."""

    pipeline: str
    batch: int
    recorded: bool

    def needed(
        self, name: str, uri: str, snapshot: _Snapshot | None, version: int, why: str
    ) -> _Snapshot:
        if snapshot is None:
            missing = (
                "its log and checkpoint are gone (cleaned up)"
                if _snapshot(uri, None) is not None
                else "the table does not exist"
            )
            raise self._error(name, uri, version, missing, why)
        return snapshot

    def present(self, name: str, uri: str, version: int, files: tuple[str, ...]) -> tuple[str, ...]:
        """``files`` of a recorded plan's version, checked to exist: VACUUM deletes the files a
        later OPTIMIZE replaced (a current snapshot's files always exist)."""
        if not self.recorded:
            return files
        gone = [f for f in files if not storage.exists(f)]
        if gone:
            missing = (
                f"{len(gone)} of the {len(files)} file(s) it reads were rewritten by OPTIMIZE "
                f"and deleted by VACUUM, e.g. {gone[0]!r}"
            )
            raise self._error(name, uri, version, missing, "the batch's recorded plan")
        return files

    def _error(
        self, name: str, uri: str, version: int, missing: str, why: str
    ) -> UpstreamHistoryLostError:
        return UpstreamHistoryLostError(
            name,
            uri,
            version,
            why,
            pipeline=self.pipeline,
            batch=self.batch,
            missing=missing,
            repairable=self.recorded and missing != "the table does not exist",
        )


def _files(
    uri: str, snapshot: _Snapshot, open_from_ms: int | None, event_column: str
) -> tuple[str, ...]:
    """The snapshot's files, less (with ``open_from_ms``) those whose greatest event time is
    before it: every row of theirs is in a closed window. One file is kept even then: its rows
    are filtered out, and Spark still gets the input's schema."""
    paths = snapshot.paths
    maxima = None if open_from_ms is None else snapshot.stat("max", event_column)
    if open_from_ms is None or maxima is None:
        return tuple(storage.join(uri, p) for p in paths)
    kept = [
        path
        for path, top in zip(paths, maxima, strict=True)
        if top is None or _millis(top) >= open_from_ms
    ]
    if not kept and paths:
        kept = paths[-1:]
    return tuple(storage.join(uri, p) for p in kept)


def _closed_files(snapshot: _Snapshot, bounds: ReadBounds) -> tuple[tuple[str, int], ...]:
    """The snapshot's files (relative paths) that may hold a row of a window ``bounds`` closed
    (least event time before the bound) or a row without an event time, with their
    modification times."""
    paths = snapshot.paths
    written = [int(t or 0) for t in snapshot.actions.column("modification_time").to_pylist()]
    minima = snapshot.stat("min", bounds.event_column)
    nulls = snapshot.stat("null_count", bounds.event_column)
    kept = []
    for i, path in enumerate(paths):
        low = None if minima is None else minima[i]
        closed = bounds.closed_ms is not None and (low is None or _millis(low) < bounds.closed_ms)
        unknown_nulls = nulls is None or nulls[i] is None or nulls[i] > 0
        if closed or unknown_nulls:
            kept.append((path, written[i]))
    return tuple(kept)


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
    upstream = committer_for(uri)
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
