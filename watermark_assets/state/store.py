"""The one state store: every kind's state that outlives the Delta log (issue 21).

Every kind keeps its progress in its data commits (``commitInfo`` entries, ``txn`` actions), one
atomic commit for data and progress. A Delta checkpoint keeps the txn versions but not the
``commitInfo``, and log cleanup deletes the commit files older than ``delta.logRetentionDuration``
after a checkpoint: what a commit recorded must be kept somewhere the log's life does not reach.
A :class:`StateStore` is that place, the same for every kind (a kind only brings its fold and, for
the file-path checkpoint, its seed format):

- **where**: one small JSON file per state, ``{table}/_watermarks/state/{quoted key}.json``
  (:func:`state_file_uri`; the ``_`` folder is left alone by Delta readers, OPTIMIZE and VACUUM).
  The file-path checkpoint keeps the seed's name and format (``{pipeline}_{source}_checkpoint.json``
  next to that folder), through its own :class:`Codec`;
- **what**: :class:`Stored`, the state folded over every commit up to ``table_version``, and
  ``txn_sum``, Σ version of the pipeline's txn app ids (``{txn_prefix}``) at that version;
- **write**: atomic, and never replaced by an older state (:meth:`StateStore.write`: ordered by
  ``(table_version, txn_sum)``, checked and written as one step, a conditional put on S3); a
  client that must not race at all writes on the version it read (:meth:`write_if_unchanged`) or
  merges with whatever another writer put there (:meth:`write_merged`);
- **read** (:meth:`StateStore.read`): the stored state, then the commits after its version only,
  each folded by the kind's :class:`CommitFold`. So no reader needs a commit older than the file,
  and a read costs the same at 5,000 commits as at 50;
- **a gap**: the commits after the stored version were cleaned before anyone read them. Every
  commit of the pipeline moves ``txn_sum`` by at least one (its txns are the next versions of
  their app ids), and every Delta checkpoint keeps every app id's version. If the last
  checkpoint's Σ equals the stored one, none of the cleaned commits was the pipeline's (OPTIMIZE,
  VACUUM, another writer): reading goes on after the checkpoint. Else the kind's fold may bridge
  it from what it stored ahead (:meth:`CommitFold.across_gap`: the event-time plan written before
  its commits); otherwise :class:`~watermark_assets.exceptions.StateHistoryLostError`, the one
  error, naming the one recovery command ``watermark-assets repair-state PIPELINE``;
- **migration**: a table from before its file is read once by the kind's ``legacy`` reader (the
  old log walk, or the old file); the next write puts the file in place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from watermark_assets import names, storage
from watermark_assets.delta.committer import DeltaCommitter, committer_for
from watermark_assets.delta.log import CommitRecord
from watermark_assets.exceptions import (
    CheckpointError,
    ConcurrentWriteError,
    LogHistoryLostError,
    StateHistoryLostError,
)

S = TypeVar("S")

STATE_FOLDER = names.STATE_FOLDER
ENVELOPE_SCHEMA_VERSION = 1
#: attempts of :meth:`StateStore.write_merged` when other writers keep winning
MERGE_ATTEMPTS = 8


#: The prefix of every txn app id the pipeline's commits carry (``watermark_assets/{name}/``:
#: partitions, windows, units, cells, replay chunks, event-time batches).
pipeline_txn_prefix = names.pipeline_txn_prefix


def state_file_uri(table_uri: str, key: str) -> str:
    """Where the state ``key`` of the table at ``table_uri`` lives; the key quoted, so a ``/``,
    a space or a ``*`` in a pipeline name is one file name."""
    return storage.join(table_uri, names.state_file(key))


def txn_weight(versions: Mapping[str, int]) -> int:
    """Σ version over these app ids: what :attr:`Stored.txn_sum` counts."""
    return sum(versions.values())


def txn_steps(commit: CommitRecord, prefix: str) -> int:
    """A lower bound of how much ``commit`` moves the Σ of the app ids under ``prefix``: one per
    txn of version >= 1 (the next version of its app id, ``TxnVersion.next_of``)."""
    return sum(1 for app, version in commit.txns.items() if app.startswith(prefix) and version >= 1)


@dataclass(frozen=True)
class Stored(Generic[S]):
    """A state folded over every commit of the table up to ``table_version`` (-1: before the
    first commit) and Σ version of the pipeline's txn app ids there (a lower bound, exact when
    computed from the table; None: unknown, e.g. a file from before it was recorded)."""

    state: S
    table_version: int
    txn_sum: int | None

    @property
    def order(self) -> tuple[int, int]:
        """What makes one stored state newer than another: a newer state is never replaced."""
        return self.table_version, -1 if self.txn_sum is None else self.txn_sum


class CommitFold(Generic[S]):
    """How one kind's state folds the table's commits (commits come in version order)."""

    def empty(self) -> S:
        """The state before any commit."""
        raise NotImplementedError

    def fold(self, state: S, commit: CommitRecord) -> S:
        """``state`` with ``commit`` added (a commit of another writer leaves it as it is)."""
        raise NotImplementedError

    def across_gap(self, state: S, txns: Mapping[str, int]) -> S | None:
        """The state at a Delta checkpoint whose txn versions of the pipeline are ``txns``, when
        commits of the pipeline between the stored version and it were cleaned (a state that
        recorded them before they were committed knows it); None: it cannot know."""
        return None


class Codec(Protocol[S]):
    """A stored state as the text of its file, and back."""

    def dumps(self, stored: Stored[S]) -> str: ...

    def loads(self, text: str, *, location: str) -> Stored[S]: ...


class Envelope(Generic[S]):
    """The store's own format: ``{"schema_version": 1, "key", "table_version", "txn_sum",
    "state": <the kind's JSON>}`` (``dumps``/``loads``: the kind's state as JSON text)."""

    def __init__(self, key: str, dumps: Callable[[S], str], loads: Callable[[str], S]) -> None:
        self.key = key
        self._dumps = dumps
        self._loads = loads

    def dumps(self, stored: Stored[S]) -> str:
        return json.dumps(
            {
                "schema_version": ENVELOPE_SCHEMA_VERSION,
                "key": self.key,
                "table_version": stored.table_version,
                "txn_sum": stored.txn_sum,
                "state": json.loads(self._dumps(stored.state)),
            },
            indent=1,
            sort_keys=True,
        )

    def loads(self, text: str, *, location: str) -> Stored[S]:
        try:
            raw = json.loads(text)
            if raw["schema_version"] != ENVELOPE_SCHEMA_VERSION:
                raise ValueError(f"schema_version {raw['schema_version']!r} is not 1")
            txn_sum = raw["txn_sum"]
            return Stored(
                self._loads(json.dumps(raw["state"])),
                int(raw["table_version"]),
                None if txn_sum is None else int(txn_sum),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(
                f"state file {location!r} is unreadable ({exc}); delete it: the next read "
                "rebuilds it from the table's log if the log still holds the history, or says "
                "which command recovers",
                location=location,
            ) from exc


@dataclass(frozen=True)
class Read(Generic[S]):
    """What :meth:`StateStore.read` found and folded."""

    #: the file as read (None: none at the store's location; ``start`` came from elsewhere)
    on_storage: Stored[S] | None
    #: the file's content version, for :meth:`StateStore.write_if_unchanged`
    read_as: storage.Versioned | None
    #: the state folded up to the newest commit (on the file, the legacy reader's state, the
    #: empty state, or a previous read's)
    current: Stored[S]
    #: the commits folded, in order
    commits: Sequence[CommitRecord]
    #: (first, last) versions passed over in a gap none of whose commits was the pipeline's
    skipped: tuple[int, int] | None = None


class StateStore(Generic[S]):
    """One state of the table at ``table_uri`` (module docstring): ``key`` names it (and its
    file, unless ``location`` says where), ``pipeline`` the recovery command, ``txn_prefix``
    (default: the pipeline's) the app ids that decide a gap. ``legacy`` reads a table from
    before the file once; ``recovery`` says what ``repair-state`` does for this kind.
    ``txns_mark_commits``: every commit of the key carries a txn of ``txn_prefix`` (False: a
    checkpoint's txn sum proves nothing about the commits it replaced)."""

    def __init__(
        self,
        table_uri: str,
        key: str,
        codec: Codec[S],
        fold: CommitFold[S],
        *,
        pipeline: str,
        txn_prefix: str | None = None,
        location: str | None = None,
        legacy: Callable[[DeltaCommitter], Stored[S] | None] | None = None,
        recovery: str | None = None,
        txns_mark_commits: bool = True,
    ) -> None:
        self.table_uri = table_uri
        self.txns_mark_commits = txns_mark_commits
        self.key = key
        self.pipeline = pipeline
        self.location = location or state_file_uri(table_uri, key)
        self.txn_prefix = txn_prefix or pipeline_txn_prefix(pipeline)
        self._codec = codec
        self._fold = fold
        self._legacy = legacy
        self._recovery = recovery
        self.committer = committer_for(table_uri)

    def empty(self) -> Stored[S]:
        """The state before the first commit (Σ of no txn: 0)."""
        return Stored(self._fold.empty(), -1, 0)

    def load(self) -> tuple[Stored[S] | None, storage.Versioned | None]:
        """The file (None: not there) and its content version."""
        current = storage.read_versioned(self.location)
        if current is None:
            return None, None
        return self._codec.loads(current.text, location=self.location), current

    def read(self, after: Stored[S] | None = None) -> Read[S]:
        """The stored state (or ``after``, a previous read's) with the commits after it folded.

        Raises :class:`~watermark_assets.exceptions.StateHistoryLostError` when commits of the
        pipeline after it are gone from the log (module docstring), and
        :class:`~watermark_assets.exceptions.CheckpointError` when the file reflects a version
        the table does not have (the table was replaced or deleted)."""
        on_storage: Stored[S] | None = None
        read_as: storage.Versioned | None = None
        if after is None:
            on_storage, read_as = self.load()
            start = on_storage or self._legacy_start()
        else:
            start = after
        state, version, txn_sum = start.state, start.table_version, start.txn_sum
        skipped: tuple[int, int] | None = None
        try:
            commits = self.committer.read_commits_after(version if version >= 0 else None)
        except LogHistoryLostError as lost:
            state, version, txn_sum, commits = self._across_gap(start, lost)
            skipped = (lost.first_missing, version)
        if after is None and not commits and start.table_version >= 0:
            self._check_table_has(start.table_version)
        for commit in commits:
            state = self._fold.fold(state, commit)
            if txn_sum is not None:
                txn_sum += txn_steps(commit, self.txn_prefix)
            version = commit.version
        if txn_sum is None and version >= 0:  # a state from before txn_sum: counted once
            txn_sum = self.exact_txn_sum(version)
        current = Stored(state, version, txn_sum)
        return Read(on_storage, read_as, current, commits, skipped)

    def write(self, stored: Stored[S], *, force: bool = False) -> bool:
        """Write ``stored`` unless the file holds a newer state (:attr:`Stored.order`; checked
        and written as one step: ``storage.replace_text_unless``); ``force``: whatever it
        holds (a repair). True when written."""
        text = self._codec.dumps(stored)
        if force:
            storage.write_text_atomic(self.location, text)
            return True
        order = stored.order
        return storage.replace_text_unless(
            self.location, text, keep=lambda current: self._order_of(current) > order
        )

    def write_if_unchanged(self, stored: Stored[S], read_as: storage.Versioned | None) -> None:
        """Write ``stored`` only if the file is still the version ``read_as`` (None: absent);
        :class:`~watermark_assets.exceptions.ConcurrentWriteError` when another writer wrote
        it since."""
        storage.write_text_atomic(self.location, self._codec.dumps(stored), replacing=read_as)

    def write_merged(
        self, stored: Stored[S], merge: Callable[[Stored[S], Stored[S]], Stored[S]]
    ) -> None:
        """Write ``merge(what the file holds now, stored)`` (just ``stored`` with no file),
        reading again when another writer wrote in between (``merge`` may refuse by raising:
        nothing is written then)."""
        lost: ConcurrentWriteError | None = None
        for _ in range(MERGE_ATTEMPTS):
            current, read_as = self.load()
            merged = stored if current is None else merge(current, stored)
            try:
                self.write_if_unchanged(merged, read_as)
                return
            except ConcurrentWriteError as exc:
                lost = exc
        assert lost is not None
        raise lost

    def rebuild(self, replace: Callable[[S], S] | None = None) -> tuple[Stored[S], str]:
        """The recovery of StateHistoryLostError (``repair-state``): the file (if it reflects a
        version the table has) and every commit still in the log folded, ``replace`` then
        putting in what the table itself tells; written at the latest version with the exact
        txn sum whatever the file held. The state, and what it could not recover, in words."""
        start = self.load()[0] or self._legacy_start()
        latest = self.committer.log.latest_version()
        if latest is None or start.table_version > latest:
            start = self.empty()  # the file describes a table that is gone
        state, version = start.state, start.table_version
        commits = self.committer.read_commits_after(version if version >= 0 else None, lost="skip")
        lost = "no commit was missing"
        if commits and commits[0].version > version + 1:
            lost = (
                f"commits {version + 1} to {commits[0].version - 1} were no longer in the log: "
                "what only they recorded is not in the rebuilt state"
            )
        for commit in commits:
            state = self._fold.fold(state, commit)
            version = commit.version
        if replace is not None:
            state = replace(state)
        rebuilt = Stored(state, version, self.exact_txn_sum(version) if version >= 0 else 0)
        self.write(rebuilt, force=True)
        return rebuilt, lost

    def exact_txn_sum(self, at: int) -> int | None:
        """Σ version of the pipeline's app ids at version ``at``: the last Delta checkpoint's
        txns and the commits after it up to ``at``; None when the checkpoint is past ``at`` or
        cannot be read (the next write tries again). The rare path: it reads the checkpoint's
        ``txn`` column."""
        try:
            checkpoint = self.committer.log.checkpoint_txns(self.txn_prefix)
        except FileNotFoundError:
            return None
        after, versions = (None, {}) if checkpoint is None else checkpoint
        if after is not None and after > at:
            return None
        try:
            commits = self.committer.read_commits_after(after)
        except LogHistoryLostError:
            return None
        for commit in commits:
            if commit.version > at:
                break
            versions.update(
                (app, v) for app, v in commit.txns.items() if app.startswith(self.txn_prefix)
            )
        return txn_weight(versions)

    def describe(self, read: Read[S]) -> str:
        """Where a state read came from, in words (``watermark-assets explain``): the file and the
        version it reflects, the commits folded after it, a gap passed over."""
        stored = read.on_storage
        if stored is None:
            origin = f"no state file at {self.location} yet: read from the table's log"
        else:
            origin = (
                f"state file {self.location} reflects Delta version {stored.table_version} "
                f"(txn sum {'unknown' if stored.txn_sum is None else stored.txn_sum})"
            )
        version = read.current.table_version
        now = "no table yet" if version < 0 else f"the table read up to version {version}"
        text = f"{origin}; {len(read.commits)} commit(s) after it folded; {now}"
        if read.skipped is not None:
            first, last = read.skipped
            text += (
                f"; versions {first} to {last} were cleaned from the log before they were "
                "read: none was this pipeline's (the txn sums agree), or the state recorded "
                "them ahead"
            )
        return text

    def lost_error(
        self, stored_version: int | None, first_missing: int, oldest: int
    ) -> StateHistoryLostError:
        """The one error of a state whose history is gone, naming its recovery."""
        return StateHistoryLostError(
            self.table_uri,
            self.pipeline,
            self.key,
            snapshot_version=stored_version,
            first_missing=first_missing,
            oldest=oldest,
            location=self.location,
            recovery=self._recovery,
        )

    def _legacy_start(self) -> Stored[S]:
        """No file: a table from before it (the kind's old reader, once), or none of whose
        commits was the pipeline's up to its last Delta checkpoint (the empty state: the
        commits after the checkpoint are read, none before it is needed)."""
        if self._legacy is None or self.committer.log.latest_version() is None:
            return self.empty()
        try:
            checkpoint = self.committer.log.checkpoint_txns(self.txn_prefix)
        except FileNotFoundError:
            checkpoint = None
        if self.txns_mark_commits and checkpoint is not None and txn_weight(checkpoint[1]) == 0:
            return self.empty()
        return self._legacy(self.committer) or self.empty()

    def _across_gap(
        self, start: Stored[S], lost: LogHistoryLostError
    ) -> tuple[S, int, int, list[CommitRecord]]:
        """The state at the last Delta checkpoint and the commits after it, when the gap before
        it held no commit of the pipeline, or the fold knows what those commits did."""
        try:
            checkpoint = self.committer.log.checkpoint_txns(self.txn_prefix)
        except FileNotFoundError:  # a part of the checkpoint is missing: nothing to decide by
            checkpoint = None
        if checkpoint is not None and checkpoint[0] >= lost.first_missing:
            version, versions = checkpoint
            weight = txn_weight(versions)
            after = self.committer.read_commits_after
            if self.txns_mark_commits and start.txn_sum == weight:  # none was the pipeline's
                return start.state, version, weight, after(version)
            bridged = self._fold.across_gap(start.state, versions)
            if bridged is not None:
                return bridged, version, weight, after(version)
        raise self.lost_error(start.table_version, lost.first_missing, lost.oldest) from lost

    def _check_table_has(self, version: int) -> None:
        latest = self.committer.log.latest_version()
        if latest is None or latest < version:
            raise CheckpointError(
                f"state file {self.location!r} reflects Delta version {version} but the table "
                f"{self.table_uri!r} is at {latest}; the table was replaced or deleted. Rebuild "
                f"the state from the table: watermark-assets repair-state {self.pipeline}",
                location=self.location,
            )

    def _order_of(self, text: str) -> tuple[int, int]:
        try:
            return self._codec.loads(text, location=self.location).order
        except CheckpointError:
            return -2, -2  # an unreadable file is replaced
