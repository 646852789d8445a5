"""Reading a file-path pipeline's state back after any crash, and after Delta's log maintenance.

The state is the checkpoint file (written after every data commit, recording the Delta version it
reflects) plus the pipeline's commits newer than that version, merged with
:meth:`FileWatermark.merge`, a per-key maximum, so concurrent runs never lose each other's
progress. Only commits after the checkpoint are ever read: they are the recent ones (a crash
between a commit and its checkpoint write, which the next load writes), which delta-rs's log
cleanup keeps (it removes commit JSONs older than ``delta.logRetentionDuration`` AND older than its
own latest checkpoint). Older commits' ``commitInfo`` may be gone: nothing here needs them.

Every map the state keeps is bounded by the retained landing partitions (``retention_horizon``):
per-partition watermarks, files per landing partition, rows per Dagster partition (pruned with the
newest landing partition it committed, ``partition_prefixes``); what grows with the history is one
running number each (:class:`~watermark_assets.core.checkpoint.Totals`). A partition pruned from
the state is restored from the table itself when a run needs it (:func:`restore_partitions`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from watermark_assets import storage
from watermark_assets.config import Pipeline
from watermark_assets.core.checkpoint import Checkpoint, Totals
from watermark_assets.core.filepath.path import NameOrdering, is_sortable, split_path
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.delta.log import CommitRecord
from watermark_assets.exceptions import CheckpointError, LogHistoryLostError, StateHistoryLostError
from watermark_assets.state.commit_metadata import (
    pipeline_metadata,
    pipeline_txn_steps,
    txn_prefix,
)
from watermark_assets.state.horizons import pruned_watermark, retained_files


@dataclass(frozen=True)
class PipelineState:
    """A pipeline's watermark as of ``delta_version`` of its table."""

    watermark: FileWatermark
    delta_version: int | None
    checkpoint: Checkpoint[FileWatermark] | None
    files_since_checkpoint: int
    partition_rows: Mapping[str, int] = field(default_factory=dict)
    partition_files: Mapping[str, int] = field(default_factory=dict)  # per landing partition
    #: (data version, quarantine files) of commits newer than the checkpoint that quarantined
    #: records: their quarantine may not be in the quarantine table yet (complete_quarantine)
    quarantine_pending: tuple[tuple[int, tuple[str, ...]], ...] = ()
    #: per Dagster partition of ``partition_rows``, the newest landing partition it committed
    partition_prefixes: Mapping[str, str] = field(default_factory=dict)
    totals: Totals = field(default_factory=Totals)
    #: the sum of the pipeline's txn versions at ``delta_version`` (None: a checkpoint written
    #: before it was recorded; see :func:`_records_after`)
    txn_sum: int | None = 0
    #: per committed landing file of the retained landing partitions, its content signature
    #: when it was committed (``storage.content_signature``); a file committed before they were
    #: recorded, or by a state rebuilt from the table, has none (never found rewritten)
    file_signatures: Mapping[str, str] = field(default_factory=dict)
    #: files the table wrote under the landing folder itself (``FileSource.own_files``: where
    #: the landing folder is the table's), recorded from the commits read: never landing files
    own_files: frozenset[str] = frozenset()

    def to_checkpoint(self, saved_at: int) -> Checkpoint[FileWatermark]:
        """This state as the checkpoint JSON records it (``saved_at``: epoch seconds)."""
        return Checkpoint(
            self.watermark,
            saved_at,
            self.delta_version,
            self.partition_rows,
            self.partition_files,
            self.partition_prefixes,
            self.totals,
            self.txn_sum,
            self.file_signatures,
            self.own_files,
        )

    @property
    def checkpoint_behind(self) -> bool:
        """Whether the checkpoint does not reflect this state's table version (commits after it:
        a crash between a commit and its checkpoint, or another writer's commits)."""
        if self.delta_version is None:
            return False
        if self.checkpoint is None or self.checkpoint.delta_version != self.delta_version:
            return True
        return self.checkpoint.txn_sum is None and self.txn_sum is not None


def read_checkpoint(pipeline: Pipeline) -> Checkpoint[FileWatermark] | None:
    location = pipeline.checkpoint_uri
    text = storage.read_text(location)
    if text is None:
        return None
    return Checkpoint.loads(text, location=location, kind=FileWatermark)


def load_state(pipeline: Pipeline, *, now: datetime) -> PipelineState:
    """The pipeline's state: the checkpoint, caught up with the commits after its version.

    Costs one checkpoint read, the table's latest version (``O(log n)`` probes of the log, no
    snapshot load) and the commits after the checkpoint: the same at 5,000 commits as at 50.
    Raises :class:`StateHistoryLostError` (naming ``watermark-assets repair-state``) when commits
    after the checkpoint were cleaned from the log (a checkpoint deleted or restored from an old
    backup, or a crash followed by a month without any load): never in normal operation.
    """
    location = pipeline.checkpoint_uri
    checkpoint = read_checkpoint(pipeline)
    committer = DeltaCommitter(pipeline.table.uri)
    table_version = committer.log.latest_version()
    watermark = checkpoint.watermark if checkpoint else FileWatermark.initial()
    after = checkpoint.delta_version if checkpoint else None
    if after is not None and (table_version is None or after > table_version):
        raise CheckpointError(
            f"checkpoint {location!r} reflects Delta version {after} but the table "
            f"{pipeline.table.uri!r} is at {table_version}; the table was replaced or deleted. "
            f"Rebuild the state from the table: watermark-assets repair-state {pipeline.name}",
            location=location,
        )
    files = 0
    rows: Counter[str] = Counter(checkpoint.partition_rows if checkpoint else {})
    landed: Counter[str] = Counter(checkpoint.partition_files if checkpoint else {})
    prefixes: dict[str, str] = dict(checkpoint.partition_prefixes if checkpoint else {})
    signatures: dict[str, str] = dict(checkpoint.file_signatures if checkpoint else {})
    own: set[str] = set(checkpoint.own_files if checkpoint else ())
    totals = checkpoint.legacy_totals() if checkpoint else Totals()
    txn_sum = checkpoint.txn_sum if checkpoint else 0
    pending: list[tuple[int, tuple[str, ...]]] = []
    if table_version is not None and table_version != after:
        records = _records_after(pipeline, committer, checkpoint, txn_sum)
        for record in records:
            if txn_sum is not None:
                txn_sum += pipeline_txn_steps(record, pipeline.name)
            metadata = pipeline_metadata(record, pipeline)
            # a commit that landed after the latest version was read is included: count it
            table_version = max(table_version, record.version)
            if metadata is None:  # OPTIMIZE, VACUUM, a DML, another writer
                own.update(p for p in pipeline.file_source.own_files(record) if p not in signatures)
                continue
            watermark = watermark.merge(metadata.watermark_after)
            files += metadata.files
            signatures.update(metadata.source_signatures)
            if metadata.rows_replaced is not None:  # a rewrite: its file was counted before
                net = metadata.rows_committed - metadata.rows_replaced
                totals = totals.plus(files=0, rows=net, partitions=0)
                for key in metadata.partition_keys:
                    rows[key] = rows.get(key, 0) + net
                if metadata.quarantine_files:
                    pending.append((record.version, metadata.quarantine_files))
                continue
            by_partition = metadata.rows_committed_by_partition()
            new = (
                metadata.new_partitions
                if metadata.new_partitions is not None
                else tuple(k for k in by_partition if k not in rows and not metadata.late)
            )
            totals = totals.plus(
                files=metadata.files, rows=metadata.rows_committed, partitions=len(new)
            )
            rows.update(by_partition)
            landed.update(metadata.partition_files)
            for key, prefix in metadata.prefixes_by_partition().items():
                prefixes[key] = max(prefixes.get(key, prefix), prefix)
            if metadata.quarantine_files:
                pending.append((record.version, metadata.quarantine_files))
    if txn_sum is None and table_version is not None:
        # a checkpoint written before txn_sum: counted once from the table (catch_up records it)
        txn_sum = txn_sum_now(committer, pipeline.name)
    own_kept = retained_files(pipeline, watermark, now, own)
    watermark = pruned_watermark(pipeline, watermark, now)
    kept = watermark.partition_watermarks
    # counts follow their landing partition's watermark: pruned with it (a Dagster partition
    # with no known landing partition, from a checkpoint older than partition_prefixes, stays)
    retained = {k for k in rows if k not in prefixes or prefixes[k] in kept}
    return PipelineState(
        watermark=watermark,
        delta_version=table_version,
        checkpoint=checkpoint,
        files_since_checkpoint=files,
        partition_rows={k: n for k, n in rows.items() if k in retained},
        partition_files={p: n for p, n in landed.items() if p in kept},
        quarantine_pending=tuple(pending),
        partition_prefixes={k: p for k, p in prefixes.items() if k in retained},
        totals=totals,
        txn_sum=txn_sum,
        file_signatures={
            path: signature for path, signature in signatures.items() if split_path(path)[0] in kept
        },
        own_files=own_kept,
    )


def _records_after(
    pipeline: Pipeline,
    committer: DeltaCommitter,
    checkpoint: Checkpoint[FileWatermark] | None,
    txn_sum: int | None,
) -> list[CommitRecord]:
    """The commits after the checkpoint's version, every one of the pipeline's among them.

    When some were cleaned from the log (another writer's commits after the checkpoint, then a
    month without a load: OPTIMIZE, VACUUM, a property change), the table's txn versions, which
    its Delta checkpoint keeps, tell whether any was the pipeline's: every pipeline commit moves
    the sum of its txn versions, so the sum now, less the steps of the commits left, equals the
    checkpoint's ``txn_sum`` exactly when none of the cleaned commits was the pipeline's. Then
    the state is whole; else :class:`StateHistoryLostError`.
    """
    after = checkpoint.delta_version if checkpoint else None
    try:
        return committer.read_commits_after(after)
    except LogHistoryLostError as lost:
        left = committer.read_commits_after(after, lost="skip")
        now = txn_sum_now(committer, pipeline.name)
        steps = sum(pipeline_txn_steps(record, pipeline.name) for record in left)
        if txn_sum is None or now is None or now - steps != txn_sum:
            raise StateHistoryLostError(
                pipeline.table.uri,
                pipeline.name,
                pipeline.checkpoint_uri,
                snapshot_version=after,
                first_missing=lost.first_missing,
                oldest=lost.oldest,
            ) from lost
        return left


def txn_sum_now(committer: DeltaCommitter, pipeline: str) -> int | None:
    """The sum of the pipeline's txn versions in the table's latest snapshot: the last Delta
    checkpoint's ``txn`` actions (which log cleanup keeps) and the commits after it (never
    cleaned). None when the checkpoint cannot be read (a part missing). The rare path of a
    reader whose commits are gone: it costs the checkpoint's ``txn`` column."""
    prefix = txn_prefix(pipeline)
    try:
        found = committer.log.checkpoint_txns(prefix)
    except FileNotFoundError:
        return None
    after, versions = (None, {}) if found is None else (found[0], dict(found[1]))
    for record in committer.read_commits_after(after, lost="skip"):
        for app_id, version in record.txns.items():
            if app_id.startswith(prefix):
                versions[app_id] = version
    return sum(versions.values())


@dataclass(frozen=True)
class TableLineage:
    """What the tables hold now, per landing file: the files with rows in the data table (or
    records in the quarantine table) and their data rows. The answer to "was this file committed?"
    that survives log cleanup, OPTIMIZE and VACUUM: each row carries its source file (the
    ``files`` source's lineage column; for ``parquet_commit`` the add actions name the file)."""

    version: int | None
    rows: Mapping[str, int]  # committed file -> rows in the data table (0: all quarantined)

    @property
    def files(self) -> frozenset[str]:
        return frozenset(self.rows)


def table_lineage(pipeline: Pipeline, wanted: Callable[[str], bool] | None = None) -> TableLineage:
    """The landing files the pipeline's tables hold now (those ``wanted`` accepts), with their
    rows in the data table. Reads the lineage (one column, or the add actions) of the table's
    current version: a backfill's, a sweep's or a rebuild's cost, never a tick's."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(
            pipeline.table.uri, storage_options=storage.delta_options(pipeline.table.uri)
        )
    except TableNotFoundError:
        return TableLineage(None, {})
    ordering = pipeline.watermark.file_name_ordering
    # a name no listing returns is no landing file (e.g. OPTIMIZE's output in a parquet_commit
    # folder): it must never raise a watermark
    keep = wanted or (lambda _path: True)
    found = {
        p
        for p in pipeline.file_source.files_in_table(table)
        if is_sortable(p, ordering) and keep(p)
    }
    rows = pipeline.file_source.rows_in_table(table, sorted(found))
    for path in _quarantined_files(pipeline):
        if keep(path):
            rows.setdefault(path, 0)
    return TableLineage(table.version(), rows)


def _quarantined_files(pipeline: Pipeline) -> set[str]:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    uri = pipeline.table.quarantine
    try:
        table = DeltaTable(uri, storage_options=storage.delta_options(uri))
    except TableNotFoundError:
        return set()
    if "_source_file" not in table.schema().to_arrow().names:
        return set()
    column = table.to_pyarrow_table(columns=["_source_file"]).column("_source_file")
    return {str(value) for value in column.unique().to_pylist() if value is not None}


def watermark_of(files: Iterable[str], ordering: NameOrdering | None = None) -> FileWatermark:
    """The watermark that committing exactly ``files`` reaches (per landing partition the
    greatest file; the global value the greatest path); with ``ordering``, names it does not
    sort are left out (no listing returns them: they never raise a watermark)."""
    ordered = sorted(p for p in files if ordering is None or is_sortable(p, ordering))
    return FileWatermark.initial().advance(ordered) if ordered else FileWatermark.initial()


def restore_partitions(
    pipeline: Pipeline,
    state: PipelineState,
    partition_keys: Sequence[str],
    key_of: Callable[[str], str | None],
) -> PipelineState:
    """``state`` with the per-partition watermarks and row counts of these Dagster partitions
    put back from the tables (``key_of``: a landing file's Dagster partition key).

    Pruning drops the watermarks of old landing partitions; a backfill or a late request of an
    old Dagster partition needs them, or it would re-ingest committed files. The tables' lineage
    names every file committed there whose rows (or quarantined records) are still in the tables,
    whatever happened to the Delta log since (cleanup, OPTIMIZE, VACUUM): each landing
    partition's watermark is its greatest such file, merged into the state's. A backfill's cost,
    never a sensor tick's.
    """
    wanted = set(partition_keys)
    lineage = table_lineage(pipeline, lambda path: key_of(path) in wanted)
    restored = watermark_of(lineage.files)
    rows: Counter[str] = Counter()
    prefixes: dict[str, str] = {}
    for path, count in lineage.rows.items():
        key = key_of(path)
        if key is None:
            continue
        rows[key] += count
        prefix = split_path(path)[0]
        prefixes[key] = max(prefixes.get(key, prefix), prefix)
    return PipelineState(
        watermark=state.watermark.merge(restored),
        delta_version=state.delta_version,
        checkpoint=state.checkpoint,
        files_since_checkpoint=state.files_since_checkpoint,
        # the state's own count wins where it has one (it also counts files of no rows left)
        partition_rows={**rows, **state.partition_rows},
        partition_files=state.partition_files,
        quarantine_pending=state.quarantine_pending,
        partition_prefixes={**prefixes, **state.partition_prefixes},
        totals=state.totals,
        txn_sum=state.txn_sum,
        file_signatures=state.file_signatures,
        own_files=state.own_files,
    )
