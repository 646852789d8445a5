"""A pipeline's state that outlives the Delta log: a snapshot file plus the commits after it.

Every kind keeps its progress in the data commit itself, an entry of the commit's ``commitInfo``
(one atomic commit for data and progress). A Delta checkpoint does not keep ``commitInfo``, and log
cleanup deletes the commit files older than ``delta.logRetentionDuration`` after a checkpoint, so
the entries alone do not survive a year. :class:`StateLog` reads one entry key's state as:

- the **snapshot** ``{table}/_watermarks/state/{key}.json`` (:class:`StateSnapshot`): the entries
  of every commit up to ``table_version`` folded into one value, written atomically and never
  replaced by an older one (``storage.replace_text_unless``: two writers at once keep the newer);
- then the **journal**: the commits after ``table_version`` only, folded on top. Whoever reads
  commits past the snapshot writes a new one (the run that committed, the next tick after a crash),
  so the snapshot trails the table by at most a tick and no reader needs a commit older than it.

A reader never needs an old commit, so the cost of a read does not grow with the history.

**A gap** (commits after the snapshot cleaned up before anyone read them: more than the retention
with no tick or run, e.g. a quiet pipeline while a maintenance job checkpoints the table) is decided
by the ``txn`` actions, which every checkpoint keeps: each commit of the pipeline carries at least
one txn of an app id under ``txn_prefix``, whose version only grows. The snapshot records
``txn_sum``, a lower bound of Σ version over those app ids at ``table_version`` (exact when
computed from the table, +1 per txn action of version >= 1 when folded). If the last Delta
checkpoint's sum equals
it, no commit of the pipeline was among the cleaned ones (each adds at least 1): the gap only held
other writers' commits (OPTIMIZE, VACUUM, another pipeline) and reading goes on after it. Otherwise
the entries are gone: :class:`~watermark_assets.exceptions.StateHistoryLostError` names the gap and
the one command that recovers.

**Migration**: a table written before snapshots existed has none; the first read uses the kind's
``legacy`` reader (its old log walk) once, then writes the snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import quote

from watermark_assets import storage
from watermark_assets.core.watermark import Watermark
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.delta.log import CommitRecord
from watermark_assets.exceptions import (
    CheckpointError,
    LogHistoryLostError,
    StateHistoryLostError,
)

S = TypeVar("S")
W = TypeVar("W", bound=Watermark[Any])

SNAPSHOT_SCHEMA_VERSION = 1
SNAPSHOT_FOLDER = "_watermarks/state"


def pipeline_txn_prefix(pipeline: str) -> str:
    """The prefix of every txn app id the pipeline's commits carry (``watermark_assets/{name}/``:
    windows, units, cells, replay chunks, the column watermark)."""
    return f"watermark_assets/{pipeline}/"


def snapshot_uri(table_uri: str, key: str) -> str:
    """Where the snapshot of ``key``'s state lives: under the table's ``_watermarks`` folder
    (a hidden folder: Delta readers, OPTIMIZE and VACUUM leave it alone); the key quoted, so a
    ``/``, a space or a ``*`` in a pipeline name is one file name."""
    return storage.join(table_uri, f"{SNAPSHOT_FOLDER}/{quote(key, safe='')}.json")


class EntryFold(Protocol[S]):
    """How the entries of one commitInfo key fold into a state (one per kind)."""

    def empty(self) -> S:
        """The state before any commit."""
        ...

    def fold(self, state: S, entry: str, commit: CommitRecord) -> S:
        """``state`` with one commit's entry added (commits come in version order)."""
        ...

    def dumps(self, state: S) -> str:
        """The state as JSON text (stored in the snapshot)."""
        ...

    def loads(self, text: str) -> S:
        """The state back from :meth:`dumps`' text."""
        ...


class WatermarkFold(Generic[W]):
    """Entries ``{"watermark": <W's JSON>, ...}`` folded by :meth:`Watermark.merge` (a union:
    the order of concurrent commits does not matter)."""

    def __init__(self, empty: W, parse: Callable[[str], W]) -> None:
        self._empty = empty
        self._parse = parse

    def empty(self) -> W:
        return self._empty

    def fold(self, state: W, entry: str, commit: CommitRecord) -> W:
        return state.merge(self._parse(json.loads(entry)["watermark"]))

    def dumps(self, state: W) -> str:
        return state.to_json()

    def loads(self, text: str) -> W:
        return self._parse(text)


@dataclass(frozen=True)
class StateSnapshot:
    """One key's state folded over every commit up to ``table_version`` (module docstring)."""

    key: str
    table_version: int
    state: str
    txn_sum: int

    def to_json(self) -> str:
        return json.dumps(
            {
                "schema_version": SNAPSHOT_SCHEMA_VERSION,
                "key": self.key,
                "table_version": self.table_version,
                "txn_sum": self.txn_sum,
                "state": json.loads(self.state),
            },
            indent=1,
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str, *, location: str) -> StateSnapshot:
        try:
            raw = json.loads(text)
            if raw["schema_version"] != SNAPSHOT_SCHEMA_VERSION:
                raise ValueError(f"schema_version {raw['schema_version']!r} is not 1")
            return cls(
                key=str(raw["key"]),
                table_version=int(raw["table_version"]),
                state=json.dumps(raw["state"]),
                txn_sum=int(raw["txn_sum"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(
                f"state snapshot {location!r} is unreadable ({exc}); delete it: the next read "
                "rebuilds it from the table's log if the log still holds the history, or says "
                "which command recovers",
                location=location,
            ) from exc


def txn_weight(app_ids_and_versions: dict[str, int]) -> int:
    """Σ version: a commit that carries one of these app ids at version v >= 1 adds at least 1
    (a new app id adds v; an existing one moves from p < v to v); one at version 0 adds 0."""
    return sum(app_ids_and_versions.values())


class StateLog(Generic[S]):
    """The state of one commitInfo ``key`` of the table at ``table_uri`` (module docstring).

    ``read()`` folds the commits it has not seen yet; a run keeps one instance and reads again
    after each commit (each commit is read once). ``pipeline`` names the recovery command.
    """

    def __init__(
        self,
        table_uri: str,
        key: str,
        fold: EntryFold[S],
        *,
        txn_prefix: str,
        pipeline: str,
        legacy: Callable[[DeltaCommitter], tuple[S, int]] | None = None,
    ) -> None:
        self._committer = DeltaCommitter(table_uri)
        self.table_uri = table_uri
        self.key = key
        self._fold = fold
        self._txn_prefix = txn_prefix
        self._pipeline = pipeline
        self._legacy = legacy
        self._location = snapshot_uri(table_uri, key)
        self.state: S = fold.empty()
        #: the newest table version folded (None: nothing read yet; -1: no table)
        self.version: int | None = None
        self._txn_sum = 0
        self._written_version: int | None = None

    def read(self) -> S:
        """The state folded over every commit up to the table's current version."""
        if self.version is None:
            self._start()
        self._fold_commits_after()
        self._write()  # only when the version moved past the snapshot's
        return self.state

    def repair(self, replace: Callable[[S], S] | None = None) -> str:
        """Rebuild the snapshot from what survives (the recovery of StateHistoryLostError): the
        snapshot (if any) and every commit still in the log, folded; ``replace`` may then put
        in a state recovered from the table itself. Writes it at the latest version with the
        exact txn sum; returns what it could not recover, in words."""
        text = storage.read_text(self._location)
        if text is not None:
            snapshot = StateSnapshot.from_json(text, location=self._location)
            self.state = self._fold.loads(snapshot.state)
            self.version = snapshot.table_version
        else:
            self.state, self.version = self._fold.empty(), -1
        start = self.version
        commits = self._committer.read_commits_after(start, lost="skip")
        lost = ""
        if commits and commits[0].version > start + 1:
            lost = (
                f"commits {start + 1} to {commits[0].version - 1} were no longer in the log: "
                "what only they recorded is not in the rebuilt state"
            )
        for commit in commits:
            entry = commit.custom_metadata.get(self.key)
            if entry is not None:
                self.state = self._fold.fold(self.state, entry, commit)
            self.version = commit.version
        if replace is not None:
            self.state = replace(self.state)
        self._txn_sum = -1
        self._written_version = None
        self._write()
        return lost or "no commit was missing"

    def _start(self) -> None:
        text = storage.read_text(self._location)
        if text is not None:
            snapshot = StateSnapshot.from_json(text, location=self._location)
            self.state = self._fold.loads(snapshot.state)
            self.version, self._txn_sum = snapshot.table_version, snapshot.txn_sum
            self._written_version = snapshot.table_version
            return
        latest = self._committer.log.latest_version()
        if latest is None:
            self.version = -1
            return
        if self._legacy is not None:  # a table from before snapshots: its old reader, once
            self.state, self.version = self._legacy(self._committer)
        else:
            self.version = -1
        self._txn_sum = -1  # unknown until computed from the table (_write)

    def _fold_commits_after(self) -> None:
        try:
            commits = self._committer.read_commits_after(self.version)
        except LogHistoryLostError as lost:
            commits = self._commits_after_gap(lost)
        for commit in commits:
            entry = commit.custom_metadata.get(self.key)
            if entry is not None:
                self.state = self._fold.fold(self.state, entry, commit)
            ours = sum(  # a lower bound of what the commit added to txn_weight
                1
                for app_id, version in commit.txns.items()
                if app_id.startswith(self._txn_prefix) and version >= 1
            )
            if self._txn_sum >= 0:
                self._txn_sum += ours
            self.version = commit.version

    def _commits_after_gap(self, lost: LogHistoryLostError) -> list[CommitRecord]:
        """The commits after a gap that held none of the pipeline's commits (module docstring);
        StateHistoryLostError when it may have held some."""
        checkpoint = self._committer.log.checkpoint_txns(self._txn_prefix)
        if checkpoint is not None and self._txn_sum >= 0:
            checkpoint_version, txns = checkpoint
            if txn_weight(txns) == self._txn_sum and checkpoint_version >= lost.first_missing:
                self.version = checkpoint_version  # nothing of ours up to here: go on after it
                return self._committer.read_commits_after(checkpoint_version)
        raise StateHistoryLostError(
            self.table_uri,
            self._pipeline,
            self.key,
            snapshot_version=self.version,
            first_missing=lost.first_missing,
            oldest=lost.oldest,
        )

    def _write(self) -> None:
        """Write the snapshot at the version folded (never replacing a newer one)."""
        assert self.version is not None
        if self.version < 0 or self.version == self._written_version:
            return
        if self._txn_sum < 0:  # first snapshot of a table: the exact sum at a checkpoint-free read
            self._txn_sum = self._exact_txn_sum()
            if self._txn_sum < 0:
                return  # the table moved while it was read: the next read tries again
        snapshot = StateSnapshot(
            self.key, self.version, self._fold.dumps(self.state), self._txn_sum
        )
        version = self.version
        storage.replace_text_unless(
            self._location,
            snapshot.to_json(),
            keep=lambda current: _snapshot_version(current) >= version,
        )
        self._written_version = version

    def _exact_txn_sum(self) -> int:
        """Σ version of the pipeline's app ids at ``self.version``: the last checkpoint's
        txns plus the commits after it up to that version; -1 when the log moved past it."""
        assert self.version is not None
        checkpoint = self._committer.log.checkpoint_txns(self._txn_prefix)
        txns: dict[str, int] = {}
        after: int | None = None
        if checkpoint is not None:
            after, txns = checkpoint
            if after > self.version:
                return -1
        for commit in self._committer.read_commits_after(after):
            if commit.version > self.version:
                break
            for app_id, version in commit.txns.items():
                if app_id.startswith(self._txn_prefix):
                    txns[app_id] = version
        return txn_weight(txns)


def _snapshot_version(text: str) -> int:
    try:
        return int(json.loads(text)["table_version"])
    except (ValueError, KeyError, TypeError):
        return -1  # an unreadable snapshot is replaced
