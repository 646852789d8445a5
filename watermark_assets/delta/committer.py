"""Delta Lake adapter: commit Parquet files written elsewhere, with txn actions and custom metadata.

Contract:

- Spark (or another writer) puts the Parquet files under the table root; :func:`describe_data_files`
  turns them into add actions (footer statistics, Hive partition values). Nothing here reads data.
- :meth:`DeltaCommitter.commit` makes ONE atomic Delta commit (through deltalake, delta-rs) holding
  every add action, one ``txn`` action per :class:`TxnVersion` and the caller's custom metadata in
  ``commitInfo``. When the table does not exist yet, that same commit creates it (version 0, with
  ``create_table_with_add_actions``): there is never an empty "create" commit before the data.
- Exactly-once rests on the caller's decision (which files are not committed yet) and on ``txn``
  actions used as optimistic locks: each :class:`TxnVersion` names the version it builds on (the
  one the caller read when it decided). delta-rs records ``txn`` actions but accepts any version,
  so before committing the committer reads ``transaction_version(app_id)`` of every txn itself; if
  any differs from what the caller read, another writer committed in between and nothing is
  committed: the outcome is *stale* and the caller decides again from a fresh state.
- Races: delta-rs rebases an append over concurrent commits, and refuses with "Concurrent
  transaction failed" when a concurrent commit carries one of our app ids; the loser of a race to
  create the table gets "already exists". Both are *stale* outcomes too, never a blind retry.
- delta-rs ignores the schema given to an append (it neither checks nor evolves the table's), so
  the committer compares it with the table's (:func:`~watermark_assets.delta.schema_change.
  reconcile`) and raises :class:`DeltaSchemaMismatchError` naming the columns, unless the
  caller's :class:`~watermark_assets.delta.schema_change.SchemaEvolution` allows the change.
- Schema evolution (new nullable columns, widened types) goes in the SAME commit as the data:
  delta-rs writes a ``metaData`` action with the given schema only for a write in "overwrite"
  mode, which removes the files its partition filters match; the committer gives a filter no
  file matches (``col in ()``), so the commit holds the new ``metaData`` (with the schema
  history in the changed columns' metadata), the add actions and the txns, and removes nothing.
  Such a commit is pinned (no rebase: a rebased schema would drop a concurrent writer's
  change): a commit landing first makes it stale. delta-rs refuses remove actions in overwrite
  mode, so a replace or merge that evolves the schema is two pinned commits: the schema alone,
  then the data on exactly that version (crash point ``between_schema_and_data_commit``). The
  schema commit carries no txn: a crash after it leaves a table whose schema is a superset of
  its data's, and the re-run finds nothing to evolve and commits its data once.
- :meth:`DeltaCommitter.read_commits_after` reads the log back (:mod:`watermark_assets.delta.log`).

On S3 the delta-rs ``storage_options`` default to the project's (``storage.delta_options``:
endpoint, region, credentials and ``conditional_put: etag``, so two writers never both write one
log entry); given explicitly, they are used as they are.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

import fsspec
import pyarrow as pa
from deltalake import DeltaTable
from deltalake import Field as DeltaField
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import (
    AddAction,
    CommitProperties,
    RemoveAction,
    Transaction,
    create_table_with_add_actions,
)

from watermark_assets import storage
from watermark_assets.core.clock import Clock, ensure_utc, system_clock
from watermark_assets.delta.log import COMMIT_INFO_KEYS, AddedFile, CommitRecord, DeltaLog
from watermark_assets.delta.schema_change import (
    FIXED,
    NO_CHANGE,
    SchemaChange,
    SchemaEvolution,
    evolved_schema,
    reconcile,
)
from watermark_assets.delta.stats import DataFile, describe_data_files
from watermark_assets.exceptions import (
    DeltaCommitError,
    DeltaSchemaMismatchError,
)
from watermark_assets.faults import crash_point

__all__ = [
    "AddedFile",
    "CommitOutcome",
    "CommitRecord",
    "DataFile",
    "DeltaCommitter",
    "SchemaEvolution",
    "TxnVersion",
    "committer_for",
    "describe_data_files",
]


_PREVIOUS_OF_SEQUENCE: Any = object()


@dataclass(frozen=True)
class TxnVersion:
    """The ``txn`` action of one application id, and the committed version it builds on.

    ``previous`` is the app id's txn version the caller read when it decided what to commit
    (None: the app id had none). The commit happens only if the table still has exactly that.
    Left out, it is ``version - 1`` (None for version 1): the next version of a sequence.
    """

    app_id: str
    version: int
    previous: int | None = dataclasses.field(default=cast(int, _PREVIOUS_OF_SEQUENCE))

    def __post_init__(self) -> None:
        if self.previous is _PREVIOUS_OF_SEQUENCE:
            object.__setattr__(self, "previous", self.version - 1 if self.version > 1 else None)

    @classmethod
    def next_of(cls, app_id: str, committed: int | None) -> TxnVersion:
        """The txn after ``committed`` (the app id's current version, None for none): +1."""
        return cls(app_id, (committed or 0) + 1, committed)


@dataclass(frozen=True)
class CommitOutcome:
    """What :meth:`DeltaCommitter.commit` did: the new table version, or nothing and why.

    ``stale``: another writer committed one of the app ids since the caller read it (or won the
    race to create the table); nothing was committed and the caller must decide again.
    ``schema_change``: what the commit changed in the table's schema (its history records it
    under the version that changed it: ``version``, or the one before for a replace or merge,
    whose schema commit comes first).
    """

    version: int | None
    skipped: bool
    reason: str
    stale: bool = False
    schema_change: SchemaChange = NO_CHANGE


class DeltaCommitter:
    """Commits data files to the Delta table at ``table_uri`` and reads its log back."""

    def __init__(
        self,
        table_uri: str,
        *,
        storage_options: Mapping[str, str] | None = None,
        filesystem: fsspec.AbstractFileSystem | None = None,
        now: Clock = system_clock,
    ) -> None:
        self.table_uri = table_uri
        # not given: the project's storage settings for this URI (storage.configure)
        self._storage_options = (
            dict(storage_options) if storage_options else storage.delta_options(table_uri)
        )
        if filesystem is None and not storage_options:
            fs, root = storage.filesystem(table_uri)
        elif filesystem is None:
            fs, root = fsspec.core.url_to_fs(
                table_uri, **_fsspec_options(table_uri, storage_options)
            )
        else:
            fs, root = filesystem, filesystem._strip_protocol(table_uri)
        self.log = DeltaLog(table_uri, fs, str(root))
        self._now = now

    def current_version(self) -> int | None:
        """The table's latest version, or None when there is no table yet."""
        table = self._load_table()
        return None if table is None else table.version()

    def transaction_versions(self, app_ids: Sequence[str]) -> dict[str, int | None]:
        """The latest committed txn version of each app id, from ONE snapshot of the table."""
        table = self._load_table()
        return {a: None if table is None else table.transaction_version(a) for a in app_ids}

    def transaction_version(self, app_id: str) -> int | None:
        """The latest committed txn version of ``app_id``; None without table or txn."""
        table = self._load_table()
        return None if table is None else table.transaction_version(app_id)

    def commit(
        self,
        files: Sequence[DataFile],
        *,
        schema: pa.Schema,
        partition_by: Sequence[str],
        txns: Sequence[TxnVersion],
        custom_metadata: Mapping[str, str],
        removes: Sequence[RemoveAction] = (),
        read_version: int | None = None,
        evolution: SchemaEvolution = FIXED,
    ) -> CommitOutcome:
        """Commit ``files``, ``txns`` and ``custom_metadata`` atomically, or nothing when stale.

        ``schema`` is the table's schema including the partition columns. ``files`` may be empty:
        the commit then only records the txns and the metadata (a batch whose every record was
        quarantined still advances). With no files, an empty ``schema`` means "the table's".

        ``removes`` (a replace, see :mod:`watermark_assets.delta.replace`) are marked removed in
        the same commit; they need ``read_version``, the table version they were planned on (-1:
        no table yet). With ``read_version`` the commit is made on exactly that version or not at
        all: a table that moved, or a commit landing while this one is written (delta-rs is told
        not to rebase it), makes the outcome stale.

        ``evolution``: what the commit may change in the table's schema when ``schema`` differs
        from it (module docstring); the change is in the outcome's ``schema_change``.
        """
        self._validate(files, partition_by, txns, custom_metadata, removes, read_version)
        actions = [
            AddAction(f.path, f.size, dict(f.partition_values), f.modification_time, True, f.stats)
            for f in files
        ]
        records = sum(f.num_records for f in files)
        table = self._load_table()
        current = -1 if table is None else table.version()
        pinned = read_version is not None
        if pinned and current != read_version:
            moved_on = f"the table moved from version {read_version} to {current} since it was read"
            return CommitOutcome(None, True, moved_on, stale=True)
        moved = _moved_txns(table, txns)
        if moved:
            return CommitOutcome(None, True, moved, stale=True)
        now_ms = int(ensure_utc(self._now()).timestamp() * 1000)
        properties = CommitProperties(
            custom_metadata=dict(custom_metadata),
            app_transactions=[Transaction(t.app_id, t.version, now_ms) for t in txns],
            # No rebase for a pinned commit, nor for a create: delta-rs would retry a losing
            # create as version 1 of the winner's table, committing its files a second time.
            max_commit_retries=0 if pinned or table is None else None,
        )
        removed = f", {len(removes)} removed file(s)" if removes else ""
        what = f"{len(files)} file(s){removed}, {records} record(s), txns {_txn_text(txns)}"
        try:
            if table is None:
                self._create(schema, partition_by, actions, properties)
                return CommitOutcome(0, False, f"created the table with {what} as version 0")
            write_schema, change = _checked_schema(
                self.table_uri, table, schema, partition_by, files, evolution
            )
            if change.changed:
                evolving = _Evolving(change, evolution.origin, now_ms, txns, custom_metadata)
                return self._commit_evolving(table, evolving, actions, removes, partition_by, what)
            appended: list[AddAction | RemoveAction] = [*actions, *removes]
            table.create_write_transaction(
                appended, "append", write_schema, list(partition_by), commit_properties=properties
            )
        except DeltaError as exc:
            if isinstance(exc, CommitFailedError) or (
                table is None and self._load_table() is not None
            ):
                reason = f"another writer committed first ({storage.redact(str(exc))})"
                return CommitOutcome(None, True, reason, stale=True)
            raise DeltaCommitError(
                f"Delta commit to {self.table_uri!r} failed: {storage.redact(str(exc))}",
                table_uri=self.table_uri,
            ) from exc
        version = self._version_holding(current, txns[0])
        return CommitOutcome(version, False, f"committed {what} as version {version}")

    def _commit_evolving(
        self,
        table: DeltaTable,
        evolving: _Evolving,
        actions: list[AddAction],
        removes: Sequence[RemoveAction],
        partition_by: Sequence[str],
        what: str,
    ) -> CommitOutcome:
        """The commit that changes the schema (module docstring): ONE commit for an append, the
        schema then the data for a replace or merge; each pinned on the version it builds on."""
        current = table.version()
        change = evolving.change
        evolved = evolved_schema(
            table.schema(),
            change,
            version=current + 1,
            origin=evolving.origin,
            at_ms=evolving.now_ms,
            data_version=current + 2 if removes else None,
        )
        no_file = _matching_no_file(table, partition_by)
        if not removes:
            table.create_write_transaction(
                list(actions),
                "overwrite",
                evolved,
                list(partition_by),
                partition_filters=no_file,
                commit_properties=evolving.properties(with_txns=True),
            )
            version = current + 1  # pinned: no rebase, so exactly the next version
            reason = (
                f"committed {what} and evolved the schema ({change.describe()}) as version "
                f"{version}"
            )
            return CommitOutcome(version, False, reason, schema_change=change)
        table.create_write_transaction(
            [],
            "overwrite",
            evolved,
            list(partition_by),
            partition_filters=no_file,
            commit_properties=evolving.properties(with_txns=False),
        )
        crash_point("between_schema_and_data_commit")
        evolved_table = self._load_table()
        assert evolved_table is not None, "a table whose schema was just committed exists"
        if evolved_table.version() != current + 1:
            moved_on = (
                f"the schema was evolved as version {current + 1} ({change.describe()}), then "
                f"the table moved to {evolved_table.version()} before the data commit"
            )
            return CommitOutcome(None, True, moved_on, stale=True, schema_change=change)
        evolved_table.create_write_transaction(
            [*actions, *removes],
            "append",
            evolved_table.schema(),
            list(partition_by),
            commit_properties=evolving.properties(with_txns=True),
        )
        version = current + 2
        reason = (
            f"evolved the schema ({change.describe()}) as version {current + 1}, then committed "
            f"{what} as version {version}"
        )
        return CommitOutcome(version, False, reason, schema_change=change)

    def add_missing_columns(self, schema: pa.Schema) -> list[str]:
        """Add to the table, as nullable columns, the fields of ``schema`` it lacks; their names.

        Schema evolution for tables this project owns (the quarantine table gained
        ``file_size``): one metadata-only commit, idempotent, and safe when two writers race
        (the loser finds the columns there). No table yet: nothing to do (creating it uses the
        files' schema).
        """
        table = self._load_table()
        if table is None:
            return []
        present = set(table.schema().to_arrow().names)
        missing = [field for field in schema if field.name not in present]
        if not missing:
            return []
        fields = [
            DeltaField(f.name, _delta_schema(self.table_uri, pa.schema([f])).fields[0].type)
            for f in missing
        ]
        try:
            table.alter.add_columns(fields)
        except DeltaError as exc:
            table = self._load_table()
            assert table is not None
            if {f.name for f in missing} - set(table.schema().to_arrow().names):
                raise DeltaCommitError(
                    f"could not add columns {[f.name for f in missing]} to {self.table_uri!r}: "
                    f"{exc}",
                    table_uri=self.table_uri,
                ) from exc
        return [f.name for f in missing]

    def read_commits_after(
        self, version: int | None, *, lost: Literal["raise", "skip"] = "raise"
    ) -> list[CommitRecord]:
        """The commits newer than ``version`` (all when None), ascending (see DeltaLog)."""
        return self.log.read_commits_after(version, lost=lost)

    def read_commit(self, version: int) -> CommitRecord:
        """The commit ``version``; DeltaCommitError when its JSON is not (or no longer) there."""
        return self.log.read_commit(version)

    def _load_table(self) -> DeltaTable | None:
        """The latest snapshot, or None when there is no table (tests override this to race)."""
        try:
            return DeltaTable(self.table_uri, storage_options=self._storage_options)
        except TableNotFoundError:
            return None

    def _create(
        self,
        schema: pa.Schema,
        partition_by: Sequence[str],
        actions: list[AddAction],
        properties: CommitProperties,
    ) -> None:
        missing = [c for c in partition_by if c not in schema.names]
        if not schema.names or missing:
            problem = f"partition columns {missing} are not in" if missing else "no columns in"
            raise DeltaCommitError(
                f"cannot create table {self.table_uri!r}: {problem} the schema {schema.names}; "
                "the first commit needs the data's full schema, partition columns included, "
                "even when it adds no files",
                table_uri=self.table_uri,
            )
        create_table_with_add_actions(
            self.table_uri,
            _delta_schema(self.table_uri, schema),
            actions,
            mode="error",
            partition_by=list(partition_by),
            storage_options=self._storage_options,
            commit_properties=properties,
        )

    def _validate(
        self,
        files: Sequence[DataFile],
        partition_by: Sequence[str],
        txns: Sequence[TxnVersion],
        custom_metadata: Mapping[str, str],
        removes: Sequence[RemoveAction],
        read_version: int | None,
    ) -> None:
        app_ids = [t.app_id for t in txns]
        both = sorted({f.path for f in files} & {r.path for r in removes})
        reserved = sorted(set(custom_metadata) & COMMIT_INFO_KEYS)
        wrong_partitions = [f.path for f in files if set(f.partition_values) != set(partition_by)]
        problem = (
            "a commit needs at least one txn (exactly-once rests on it)"
            if not txns
            else f"app ids repeat: {app_ids}"
            if len(set(app_ids)) != len(app_ids)
            else f"txn versions must be above the version they build on: {_txn_text(txns)}"
            if any(
                t.version < 0 or (t.previous is not None and t.version <= t.previous) for t in txns
            )
            else f"custom metadata keys {reserved} are reserved by Delta's commitInfo"
            if reserved
            else f"files {wrong_partitions[:3]} do not have partition values for exactly "
            f"{list(partition_by)}"
            if wrong_partitions
            else "remove actions need the table version they were planned on (read_version)"
            if removes and (read_version is None or read_version < 0)
            else f"files {both[:3]} are both added and removed"
            if both
            else None
        )
        if problem is not None:
            raise DeltaCommitError(
                f"invalid commit to {self.table_uri!r}: {problem}", table_uri=self.table_uri
            )

    def _version_holding(self, read_version: int, txn: TxnVersion) -> int:
        """The version of our commit: delta-rs does not return it and may have rebased it."""
        for record in self.read_commits_after(read_version):
            if record.txns.get(txn.app_id) == txn.version:
                return record.version
        raise DeltaCommitError(  # only if the log was cleaned up within the commit itself
            f"committed to {self.table_uri!r} but no commit after version {read_version} holds "
            f"txn {txn.app_id!r}={txn.version}; check the table's history",
            table_uri=self.table_uri,
        )


class HasUri(Protocol):
    """A table's configuration (any with its ``uri``)."""

    @property
    def uri(self) -> str: ...


def committer_for(table: HasUri | str, *, now: Clock = system_clock) -> DeltaCommitter:
    """The committer of a table, from its configuration (or its URI): the ONE place a run,
    sensor or command gets one. The storage options are worked out here, once per committer
    (``storage.delta_options`` and the fsspec filesystem of the configured storage, credentials
    from environment variables read now), never cached across committers: credentials may
    rotate between runs. Pass the committer on rather than building another for the same
    table."""
    return DeltaCommitter(table if isinstance(table, str) else table.uri, now=now)


def _moved_txns(table: DeltaTable | None, txns: Sequence[TxnVersion]) -> str | None:
    """Why the txns are stale (an app id's version is not the one the caller read), or None."""
    moved = {
        t.app_id: (t.previous, current)
        for t in txns
        if (current := None if table is None else table.transaction_version(t.app_id)) != t.previous
    }
    if not moved:
        return None
    listed = ", ".join(f"{a!r} {was} -> {now}" for a, (was, now) in sorted(moved.items()))
    return f"another writer committed since this run decided: txn versions moved ({listed})"


@dataclass(frozen=True)
class _Evolving:
    """A commit that changes the schema: the change and what its commit(s) carry."""

    change: SchemaChange
    origin: str | None
    now_ms: int
    txns: Sequence[TxnVersion]
    custom_metadata: Mapping[str, str]

    def properties(self, *, with_txns: bool) -> CommitProperties:
        """Never rebased (``max_commit_retries=0``): the schema was evolved from this snapshot's."""
        if not with_txns:  # the schema commit of a replace or merge: no txn, no run record
            return CommitProperties(max_commit_retries=0)
        return CommitProperties(
            custom_metadata=dict(self.custom_metadata),
            app_transactions=[Transaction(t.app_id, t.version, self.now_ms) for t in self.txns],
            max_commit_retries=0,
        )


def _matching_no_file(table: DeltaTable, partition_by: Sequence[str]) -> list[tuple[str, str, Any]]:
    """A partition filter no file matches: an overwrite given it removes nothing (tested for a
    partitioned and an unpartitioned table in tests/test_schema_evolution.py)."""
    column = partition_by[0] if partition_by else table.schema().fields[0].name
    return [(column, "in", [])]


def _checked_schema(
    table_uri: str,
    table: DeltaTable,
    schema: pa.Schema,
    partition_by: Sequence[str],
    files: Sequence[DataFile],
    evolution: SchemaEvolution = FIXED,
) -> tuple[DeltaSchema, SchemaChange]:
    """The table's schema and what ``schema`` (the files') changes in it, once the files and
    ``partition_by`` are found to fit it (:func:`~watermark_assets.delta.schema_change.
    reconcile` for the columns' names and types, with ``evolution``'s permissions)."""
    table_schema = table.schema()
    table_partitions = list(table.metadata().partition_columns)
    if table_partitions != list(partition_by):
        differ = f"the table has {table_partitions}, the commit {list(partition_by)}"
        raise DeltaSchemaMismatchError(table_uri, {"partition columns": differ})
    if not files and not schema.names:
        return table_schema, NO_CHANGE
    files_schema = _delta_schema(table_uri, schema)
    change = reconcile(
        table_schema,
        files_schema,
        add_columns=evolution.add_columns,
        widen=evolution.widen,
        table_uri=table_uri,
    )
    theirs = {f["name"]: f for f in json.loads(table_schema.to_json())["fields"]}
    ours = {f["name"] for f in json.loads(files_schema.to_json())["fields"]}
    differences: dict[str, str] = {}
    for name, field in theirs.items():
        if field["nullable"]:
            continue
        if name not in ours:
            differences[name] = "NOT NULL in the table but missing from the files"
        elif any(json.loads(f.stats).get("nullCount", {}).get(name, 0) for f in files):
            differences[name] = "NOT NULL in the table but the files hold nulls"
    if differences:
        raise DeltaSchemaMismatchError(table_uri, differences)
    return table_schema, change


def _delta_schema(table_uri: str, schema: pa.Schema) -> DeltaSchema:
    try:
        return DeltaSchema.from_arrow(schema)
    except Exception as exc:  # delta-rs raises several types for unsupported Arrow types
        raise DeltaCommitError(
            f"schema {schema} cannot be a Delta schema for {table_uri!r}: {exc}. Use Delta types "
            "(timestamps in microseconds, no unsigned integers)",
            table_uri=table_uri,
        ) from exc


def _txn_text(txns: Sequence[TxnVersion]) -> str:
    return ", ".join(f"{t.app_id!r}={t.version}" for t in txns)


def _fsspec_options(table_uri: str, storage_options: Mapping[str, str] | None) -> dict[str, Any]:
    """s3fs arguments from delta-rs S3 ``storage_options`` (other schemes: none)."""
    if not storage_options or not table_uri.startswith(("s3://", "s3a://")):
        return {}
    options = {key.upper(): value for key, value in storage_options.items()}
    client: dict[str, str] = {}
    if "AWS_ENDPOINT_URL" in options:
        client["endpoint_url"] = options["AWS_ENDPOINT_URL"]
    if "AWS_REGION" in options:
        client["region_name"] = options["AWS_REGION"]
    named = {
        "key": "AWS_ACCESS_KEY_ID",
        "secret": "AWS_SECRET_ACCESS_KEY",
        "token": "AWS_SESSION_TOKEN",
    }
    result: dict[str, Any] = {arg: options[k] for arg, k in named.items() if k in options}
    if client:
        result["client_kwargs"] = client
    return result
