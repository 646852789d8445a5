"""The state of one commitInfo entry key, kept by the state store (``state/store.py``).

Column (``delta_metadata``), time, time x unit, unit and replay pipelines record their progress
as an entry of each data commit's ``commitInfo``. :class:`StateLog` reads one entry key's state
as the store holds it (the file ``{table}/_watermarks/state/{quoted key}.json`` and the commits
after its version, each commit's entry folded by the kind's :class:`EntryFold`) and writes the
file again whenever it read past it: the run that committed, or the next tick after a crash. So
the file trails the table by at most a tick and no reader needs a commit older than it.

**Migration**: a table written before state files existed has none; the first read uses the
kind's ``legacy`` reader (its old log walk) once, then writes the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from watermark_assets.core.watermark import Watermark
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.delta.log import CommitRecord
from watermark_assets.state.store import (
    CommitFold,
    Envelope,
    Read,
    StateStore,
    Stored,
    pipeline_txn_prefix,
    state_file_uri,
)

S = TypeVar("S")
W = TypeVar("W", bound=Watermark[Any])

__all__ = ["EntryFold", "StateLog", "WatermarkFold", "pipeline_txn_prefix", "state_file_uri"]


class EntryFold(Protocol[S]):
    """How the entries of one commitInfo key fold into a state (one per kind)."""

    def empty(self) -> S:
        """The state before any commit."""
        ...

    def fold(self, state: S, entry: str, commit: CommitRecord) -> S:
        """``state`` with one commit's entry added (commits come in version order)."""
        ...

    def dumps(self, state: S) -> str:
        """The state as JSON text (stored in the file)."""
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


class _EntryCommits(CommitFold[S]):
    """An :class:`EntryFold` as the store's commit fold: a commit without the key is another
    writer's (or carries nothing of this state)."""

    def __init__(self, key: str, entries: EntryFold[S]) -> None:
        self._key = key
        self._entries = entries

    def empty(self) -> S:
        return self._entries.empty()

    def fold(self, state: S, commit: CommitRecord) -> S:
        entry = commit.custom_metadata.get(self._key)
        return state if entry is None else self._entries.fold(state, entry, commit)


class StateLog(Generic[S]):
    """The state of one commitInfo ``key`` of the table at ``table_uri`` (module docstring).

    ``read()`` folds the commits it has not seen yet; a run keeps one instance and reads again
    after each commit (each commit is read once). ``pipeline`` names the recovery command;
    ``legacy`` reads a table from before state files: (state, the version it reflects);
    ``txns_mark_commits`` as :class:`~watermark_assets.state.store.StateStore`'s.
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
        txns_mark_commits: bool = True,
    ) -> None:
        self.table_uri = table_uri
        self.key = key
        self._store = StateStore(
            table_uri,
            key,
            Envelope(key, fold.dumps, fold.loads),
            _EntryCommits(key, fold),
            pipeline=pipeline,
            txn_prefix=txn_prefix,
            legacy=None if legacy is None else _legacy_of(legacy),
            txns_mark_commits=txns_mark_commits,
        )
        self.state: S = fold.empty()
        #: the newest table version folded (None: nothing read yet; -1: no table)
        self.version: int | None = None
        self._current: Stored[S] | None = None
        self._written: tuple[int, int] | None = None
        self._first: Read[S] | None = None

    @property
    def location(self) -> str:
        """Where the state file lives."""
        return self._store.location

    def read(self) -> S:
        """The state folded over every commit up to the table's current version; the file
        written when that moved past it."""
        read = self._store.read(self._current)
        if self._current is None:
            self._first = read
            self._written = None if read.on_storage is None else read.on_storage.order
        current = self._current = read.current
        self.state, self.version = current.state, current.table_version
        known = current.table_version >= 0 and current.txn_sum is not None
        if known and current.order != self._written:
            self._store.write(current)
            self._written = current.order
        return self.state

    def provenance(self) -> str:
        """Where the first :meth:`read` found the state (``state.store.describe``)."""
        if self._first is None:
            self.read()
        assert self._first is not None
        return self._store.describe(self._first)

    def repair(self, replace: Callable[[S], S] | None = None) -> str:
        """Rebuild the file from what survives (``StateStore.rebuild``); ``replace`` may put in
        a state recovered from the table itself. What it could not recover, in words."""
        rebuilt, lost = self._store.rebuild(replace)
        self._current = rebuilt
        self._written = rebuilt.order
        self.state, self.version = rebuilt.state, rebuilt.table_version
        return lost


def _legacy_of(
    legacy: Callable[[DeltaCommitter], tuple[S, int]],
) -> Callable[[DeltaCommitter], Stored[S]]:
    def start(committer: DeltaCommitter) -> Stored[S]:
        state, version = legacy(committer)
        # the sum is known before the first commit only; else counted from the table
        return Stored(state, version, 0 if version < 0 else None)

    return start
