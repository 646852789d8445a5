"""An event-time aggregate's progress, kept by the one state store (``state/store.py``).

The progress of batch ``b`` (its watermark, the upstream versions and row counts it read up to,
the windows and rows still open) is recorded in the ``commitInfo`` of its state commit, which
holds txn ``b``; its *plan* in the output commit's. A Delta checkpoint keeps the txn versions but
not ``commitInfo``, so both are kept by the state store as well, for the state table: the file
``{state}/_watermarks/state/{quoted state key}.json`` holds the newest batches' entries (plan,
progress, the state version holding it) and, as every state file, the state table version it
reflects and the txn sum there (here: the batch committed, the only app id of the pipeline on
the state table). Reading it is the store's read: the file, then the state table's commits after
its version (a commit holding txn ``b`` is batch ``b``'s; OPTIMIZE and VACUUM commits hold none).

Order of writes of batch ``b``: the entry (plan and progress) before the output commit, then the
three commits, then the entry again with the state version. A crash anywhere leaves either txn
``b`` absent from the state table (the entry of ``b`` is ignored and the batch redone) or present
with its entry already there: so when the state table's log lost the commits after the file's
version, the checkpoint's txn names the batch and the file its progress
(:meth:`_ProgressCommits.across_gap`). Of two runs planning batch ``b`` at once, the
second to write stops before committing anything
(:class:`~watermark_assets.exceptions.EventWindowConflictError`); any other write in between
(a reader catching the file up, as every reader of the store does) is merged.

Older tables: the progress file ``{state}/_watermarks/event_window.json`` of earlier versions is
read when the store's file is not there yet (the next batch writes the store's file); a table from
before either is read from its state commits (once, if still in the log).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from watermark_assets import names, storage
from watermark_assets.core.event_time import EventTimeWatermark
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.delta.log import CommitRecord
from watermark_assets.exceptions import EVENT_TIME_RECOVERY, ConcurrentWriteError
from watermark_assets.state.store import CommitFold, Envelope, Read, StateStore, Stored

#: How many of the newest batches' entries the file keeps (the committed one, the one being
#: committed, and one more for a run that read the file just before the other committed).
KEPT_BATCHES = 3


def legacy_progress_uri(state_uri: str) -> str:
    """The progress file of earlier versions (read, never written)."""
    return f"{state_uri.rstrip('/')}/{names.LEGACY_EVENT_PROGRESS}"


@dataclass(frozen=True, kw_only=True)
class WindowProgress:
    """Where the aggregate stands after batch ``batch``: its watermark, the upstream version
    each input was read up to (-1: none yet) and the windows still open."""

    batch: int
    watermark: EventTimeWatermark
    #: input -> the upstream version read up to (-1: none yet)
    upstream_versions: Mapping[str, int]
    open_windows: int
    #: input -> the upstream table's rows at that version (its statistics; None: unknown)
    upstream_rows: Mapping[str, int | None] = field(default_factory=dict)
    #: the upstream rows the open windows hold (None: unknown, e.g. a state from before counts)
    open_rows: int | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "batch": self.batch,
            "watermark": self.watermark.to_json(),
            "upstream_versions": dict(self.upstream_versions),
            "upstream_rows": dict(self.upstream_rows),
            "open_windows": self.open_windows,
            "open_rows": self.open_rows,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, object], inputs: Mapping[str, object]) -> WindowProgress:
        """Read back :meth:`to_dict` (or a state commit's metadata); ``inputs``: the inputs
        configured now (one added since has read nothing yet)."""
        versions = raw.get("upstream_versions") or {}
        rows = raw.get("upstream_rows") or {}
        assert isinstance(versions, Mapping) and isinstance(rows, Mapping)
        open_rows = raw.get("open_rows")
        return cls(
            batch=int(str(raw["batch"])),
            watermark=EventTimeWatermark.from_json(str(raw["watermark"])),
            upstream_versions={name: int(versions.get(name, -1)) for name in inputs},
            upstream_rows={
                name: None if rows.get(name) is None else int(rows[name]) for name in inputs
            },
            open_windows=int(str(raw["open_windows"])),
            open_rows=None if open_rows is None else int(str(open_rows)),
        )


@dataclass(frozen=True, kw_only=True)
class BatchPlan:
    """What batch ``batch`` reads and decides; recorded before its first commit."""

    batch: int
    #: input -> versions read: (from, to]
    upstream_from: Mapping[str, int]
    upstream_to: Mapping[str, int]
    watermark_before: EventTimeWatermark
    watermark_after: EventTimeWatermark
    #: input -> the upstream's rows at ``upstream_to`` (None: unknown)
    upstream_rows: Mapping[str, int | None] = field(default_factory=dict)
    #: ``repair-state``: the versions the plan first read up to, gone from the upstream, which
    #: ``upstream_to`` (the upstreams' versions at the repair) replaced; None: not replanned
    replanned_from: Mapping[str, int] | None = None

    def to_json(self) -> str:
        raw: dict[str, object] = {
            "batch": self.batch,
            "upstream_from": dict(self.upstream_from),
            "upstream_to": dict(self.upstream_to),
            "upstream_rows": dict(self.upstream_rows),
            "watermark_before": self.watermark_before.to_json(),
            "watermark_after": self.watermark_after.to_json(),
        }
        if self.replanned_from is not None:
            raw["replanned_from"] = dict(self.replanned_from)
        return json.dumps(raw)

    @classmethod
    def from_json(cls, text: str) -> BatchPlan:
        raw = json.loads(text)
        return cls(
            batch=int(raw["batch"]),
            upstream_from={k: int(v) for k, v in raw["upstream_from"].items()},
            upstream_to={k: int(v) for k, v in raw["upstream_to"].items()},
            upstream_rows={
                k: None if v is None else int(v) for k, v in raw.get("upstream_rows", {}).items()
            },
            watermark_before=EventTimeWatermark.from_json(raw["watermark_before"]),
            watermark_after=EventTimeWatermark.from_json(raw["watermark_after"]),
            replanned_from=None
            if raw.get("replanned_from") is None
            else {k: int(v) for k, v in raw["replanned_from"].items()},
        )


@dataclass(frozen=True)
class ProgressEntry:
    """One batch in the file: its plan (None: known from its state commit only), the progress
    after it, and the state table version holding it (None: not committed yet, or not known)."""

    plan: BatchPlan | None
    progress: WindowProgress
    state_version: int | None

    def to_dict(self) -> dict[str, object]:
        return {
            "plan": None if self.plan is None else self.plan.to_json(),
            "progress": self.progress.to_dict(),
            "state_version": self.state_version,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, object], inputs: Mapping[str, object]) -> ProgressEntry:
        plan, progress, version = raw["plan"], raw["progress"], raw["state_version"]
        assert isinstance(progress, Mapping)
        return cls(
            None if plan is None else BatchPlan.from_json(str(plan)),
            WindowProgress.from_dict(progress, inputs),
            None if version is None else int(str(version)),
        )


@dataclass(frozen=True)
class Progress:
    """The stored state: the batch the state table holds (0: none) and the newest entries."""

    committed: int
    entries: Mapping[int, ProgressEntry]


def _entries(raw: Mapping[str, object], inputs: Mapping[str, object]) -> dict[int, ProgressEntry]:
    batches = raw.get("batches") or {}
    assert isinstance(batches, Mapping)
    return {int(b): ProgressEntry.from_dict(entry, inputs) for b, entry in batches.items()}


class _ProgressCommits(CommitFold[Progress]):
    """The state table's commits: the one holding txn ``b`` of the pipeline's app id is batch
    ``b``'s, its progress in its ``commitInfo`` (maintenance commits hold no txn)."""

    def __init__(self, app_id: str, state_key: str, inputs: Mapping[str, object]) -> None:
        self._app_id = app_id
        self._state_key = state_key
        self._inputs = inputs

    def empty(self) -> Progress:
        return Progress(0, {})

    def fold(self, state: Progress, commit: CommitRecord) -> Progress:
        batch = commit.txns.get(self._app_id)
        if batch is None or batch <= state.committed:
            return state
        known = state.entries.get(batch)
        raw = commit.custom_metadata.get(self._state_key)
        if raw is not None:
            progress = WindowProgress.from_dict(json.loads(raw), self._inputs)
        elif known is not None:
            progress = known.progress
        else:
            return replace(state, committed=batch)  # no progress known: load_progress says so
        entry = ProgressEntry(None if known is None else known.plan, progress, commit.version)
        return Progress(batch, {**state.entries, batch: entry})

    def across_gap(self, state: Progress, txns: Mapping[str, int]) -> Progress | None:
        """The batch the checkpoint's txn names, if its entry was written (before its commits)."""
        batch = txns.get(self._app_id, 0)
        if batch < state.committed or batch not in state.entries:
            return None
        return replace(state, committed=batch)


@dataclass(frozen=True)
class ProgressFile:
    """The progress as read (``read``: what the store read and folded), for the writes after."""

    store: StateStore[Progress]
    read: Read[Progress]

    @property
    def uri(self) -> str:
        return self.store.location

    @property
    def committed(self) -> int:
        """The batch the state table holds (0: none)."""
        return self.read.current.state.committed

    @property
    def entries(self) -> Mapping[int, ProgressEntry]:
        return self.read.current.state.entries


def progress_store(
    *, pipeline: str, state_uri: str, app_id: str, state_key: str, inputs: Mapping[str, object]
) -> StateStore[Progress]:
    """The aggregate's progress in the state store of its state table."""

    def dumps(state: Progress) -> str:
        kept = sorted(state.entries)[-KEPT_BATCHES:]
        batches = {str(b): state.entries[b].to_dict() for b in kept}
        return json.dumps({"committed": state.committed, "batches": batches})

    def loads(text: str) -> Progress:
        raw = json.loads(text)
        return Progress(int(raw["committed"]), _entries(raw, inputs))

    def legacy(committer: DeltaCommitter) -> Stored[Progress] | None:
        text = storage.read_text(legacy_progress_uri(state_uri))
        if text is None:
            return None  # a table from before any file: its state commits, from the first
        entries = _entries(json.loads(text), inputs)
        done = [b for b, entry in entries.items() if entry.state_version is not None]
        if not done:
            return Stored(Progress(0, entries), -1, 0)
        batch = max(done)
        version = entries[batch].state_version
        assert version is not None
        return Stored(Progress(batch, entries), version, None)  # the sum: counted from the table

    return StateStore(
        state_uri,
        state_key,
        Envelope(state_key, dumps, loads),
        _ProgressCommits(app_id, state_key, inputs),
        pipeline=pipeline,
        legacy=legacy,
        recovery=EVENT_TIME_RECOVERY,
    )


def read_progress(store: StateStore[Progress]) -> ProgressFile:
    """The progress: the file (or the older one) and the state table's commits after it; the
    file written again when the read went past it (a crash after a state commit, then a month
    of log cleanup, finds the progress here, as for every kind: ``state/store.py``)."""
    read = store.read()
    stored = read.on_storage
    if read.current.table_version >= 0 and (stored is None or stored.order < read.current.order):
        store.write_merged(read.current, _merge)
    return ProgressFile(store, read)


def write_planned(file: ProgressFile, entry: ProgressEntry) -> None:
    """Record ``entry`` (before the batch's first commit), keeping what others wrote since the
    file was read unless another run planned or committed this batch meanwhile:
    ConcurrentWriteError then, and nothing written."""
    assert entry.plan is not None
    batch, current = entry.plan.batch, file.read.current
    seen = current.state.entries.get(batch)

    def unless_planned_since(now: Stored[Progress], mine: Stored[Progress]) -> Stored[Progress]:
        if now.state.committed >= batch or now.state.entries.get(batch) != seen:
            raise ConcurrentWriteError(
                file.uri, f"another run planned or committed batch {batch} since it was read"
            )
        return _merge(now, mine)

    planned = Progress(current.state.committed, {**current.state.entries, batch: entry})
    file.store.write_merged(replace(current, state=planned), unless_planned_since)


def write_committed(file: ProgressFile, entry: ProgressEntry) -> None:
    """Record ``entry`` with its state version (after the state commit), keeping the entries
    other runs wrote meanwhile (read, merge, conditional write; again on a lost race)."""
    assert entry.plan is not None
    batch, current = entry.plan.batch, file.read.current
    entries = {**current.state.entries, batch: entry}
    if entry.state_version is None:  # its state commit is known, not its version: read later
        stored = replace(current, state=Progress(current.state.committed, entries))
    else:
        # the batch's commit moved the sum of the pipeline's txns on the state table by one
        steps = batch - current.state.committed
        txn_sum = None if current.txn_sum is None else current.txn_sum + steps
        stored = Stored(Progress(batch, entries), entry.state_version, txn_sum)
    file.store.write_merged(stored, _merge)


def _merge(current: Stored[Progress], mine: Stored[Progress]) -> Stored[Progress]:
    """Both files' entries (``mine`` wins for its batches), the newer state's version."""
    newer = mine if mine.order >= current.order else current
    entries = {**current.state.entries, **mine.state.entries}
    return replace(newer, state=Progress(newer.state.committed, entries))
