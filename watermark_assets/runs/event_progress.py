"""An event-time aggregate's progress, kept where its own tables' maintenance cannot reach it.

The progress of batch ``b`` (its watermark, the upstream versions and row counts it read up to,
the windows and rows still open) and its *plan* used to live only in the ``commitInfo`` of the
state and output commits holding txn ``b``. A Delta checkpoint keeps the txn versions but not
``commitInfo``: once a maintenance job (OPTIMIZE, VACUUM, a checkpoint and log cleanup) put other
commits after the batch's and cleaned the log, the progress was gone and every tick failed.

So it is kept in a small JSON file next to the state table, ``{state}/_watermarks/
event_window.json`` (VACUUM leaves folders starting with ``_`` alone), written atomically
(``storage.write_text_atomic``: a rename, a conditional put on S3). It holds the newest batches'
entries by batch number; each entry records the state table version it reflects (None until the
state commit is known). The state table's txn version says which batch is committed, and
that batch's entry is read: the txn survives every maintenance, the file does not depend on the
log.

Order of writes of batch ``b``: the entry (plan and progress) before the output commit, then the
three commits, then the entry again with the state version. A crash anywhere leaves either txn
``b`` absent from the state table (the entry of ``b`` is ignored and the batch redone) or present
with its entry already there. The first write is conditional on the file being as it was read
when the batch was planned: of two runs planning batch ``b`` at once, the second to write stops
before committing anything (:class:`~watermark_assets.exceptions.EventWindowConflictError`).

Tables made before this file existed have no entry for their last batch: their progress is read
once from the state commit's ``commitInfo`` (if still in the log) and the next batch writes the
file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from watermark_assets import storage
from watermark_assets.core.event_time import EventTimeWatermark
from watermark_assets.exceptions import ConcurrentWriteError

#: How many of the newest batches' entries the file keeps (the committed one, the one being
#: committed, and one more for a run that read the file just before the other committed).
KEPT_BATCHES = 3
SCHEMA_VERSION = 1


def progress_uri(state_uri: str) -> str:
    """The progress file of the aggregate whose state table is ``state_uri``."""
    return f"{state_uri.rstrip('/')}/_watermarks/event_window.json"


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
    """One batch in the file: its plan, the progress after it, and the state table version
    holding it (None: written before the state commit)."""

    plan: BatchPlan
    progress: WindowProgress
    state_version: int | None


@dataclass(frozen=True)
class ProgressFile:
    """The file as read (``read_as``: the version a conditional write names; None: no file)."""

    uri: str
    read_as: storage.Versioned | None
    entries: Mapping[int, ProgressEntry]


def read_progress_file(uri: str, inputs: Mapping[str, object]) -> ProgressFile:
    """The progress file at ``uri`` (no entries when there is none yet)."""
    current = storage.read_versioned(uri)
    if current is None:
        return ProgressFile(uri, None, {})
    return ProgressFile(uri, current, _entries(current.text, inputs))


def _entries(text: str, inputs: Mapping[str, object]) -> dict[int, ProgressEntry]:
    raw = json.loads(text)
    return {
        int(batch): ProgressEntry(
            BatchPlan.from_json(entry["plan"]),
            WindowProgress.from_dict(entry["progress"], inputs),
            entry["state_version"],
        )
        for batch, entry in raw.get("batches", {}).items()
    }


def _text(entries: Mapping[int, ProgressEntry]) -> str:
    kept = sorted(entries)[-KEPT_BATCHES:]
    return json.dumps(
        {
            "schema_version": SCHEMA_VERSION,
            "batches": {
                str(b): {
                    "plan": entries[b].plan.to_json(),
                    "progress": entries[b].progress.to_dict(),
                    "state_version": entries[b].state_version,
                }
                for b in kept
            },
        },
        indent=1,
    )


def write_planned(read: ProgressFile, entry: ProgressEntry) -> None:
    """Record ``entry`` (before the batch's first commit), only if the file is still as
    ``read``: ConcurrentWriteError when another run wrote it since."""
    entries = {**read.entries, entry.plan.batch: entry}
    storage.write_text_atomic(read.uri, _text(entries), replacing=read.read_as)


#: attempts of :func:`write_committed` when other writers keep winning
WRITE_ATTEMPTS = 8


def write_committed(uri: str, entry: ProgressEntry, inputs: Mapping[str, object]) -> None:
    """Record ``entry`` with its state version (after the state commit), keeping the entries
    other runs wrote meanwhile (read, merge, conditional write; again on a lost race)."""
    lost: ConcurrentWriteError | None = None
    for _ in range(WRITE_ATTEMPTS):
        read = read_progress_file(uri, inputs)
        entries = {**read.entries, entry.plan.batch: entry}
        try:
            storage.write_text_atomic(uri, _text(entries), replacing=read.read_as)
            return
        except ConcurrentWriteError as exc:
            lost = exc
    assert lost is not None
    raise lost
