"""Reading a file-path pipeline's state back after any crash, and after Delta's log maintenance.

The state is kept by the one state store (``state/store.py``): the checkpoint file (the seed's
name and format, written after every data commit, recording the Delta version it reflects and the
pipeline's txn sum there) plus the pipeline's commits newer than that version, folded by
:class:`_FileCommits` (the watermark merged with :meth:`FileWatermark.merge`, a per-key maximum,
so concurrent runs never lose each other's progress). Only commits after the checkpoint are ever
read: the recent ones (a crash between a commit and its checkpoint write, which the next load
writes); older commits' ``commitInfo`` may be gone: nothing here needs them. A gap after the
checkpoint is decided by the txn sums, as for every kind.

Every map the state keeps is bounded by the retained landing partitions (``retention_horizon``):
per-partition watermarks, files per landing partition, rows per Dagster partition (pruned with the
newest landing partition it committed, ``partition_prefixes``); what grows with the history is one
running number each (:class:`~watermark_assets.core.checkpoint.Totals`). A partition pruned from
the state is restored from the table itself when a run needs it (:func:`restore_partitions`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from watermark_assets import sources as _sources  # noqa: F401  (registers file_source)
from watermark_assets import storage
from watermark_assets.config import Pipeline
from watermark_assets.core.checkpoint import Checkpoint, Totals
from watermark_assets.core.filepath.path import NameOrdering, is_sortable, split_path
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.delta.log import CommitRecord
from watermark_assets.delta.read import read_columns
from watermark_assets.state.commit_metadata import pipeline_metadata
from watermark_assets.state.horizons import pruned_watermark, retained_files
from watermark_assets.state.store import CommitFold, StateStore, Stored


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
    #: the sum of the pipeline's txn versions at ``delta_version`` (None: not known, a checkpoint
    #: written before it was recorded whose sum could not be counted yet; ``state/store.py``)
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


class _CheckpointCodec:
    """The seed's checkpoint file as the store's :class:`Stored`: ``delta_version`` is the table
    version, ``txn_sum`` the sum (a seed file without ``delta_version`` reflects no commit yet:
    every commit is read on top of it, from a sum of 0)."""

    def dumps(self, stored: Stored[Checkpoint[FileWatermark]]) -> str:
        version = stored.table_version
        return replace(
            stored.state, delta_version=None if version < 0 else version, txn_sum=stored.txn_sum
        ).dumps()

    def loads(self, text: str, *, location: str) -> Stored[Checkpoint[FileWatermark]]:
        checkpoint = Checkpoint.loads(text, location=location, kind=FileWatermark)
        if checkpoint.delta_version is None:
            return Stored(checkpoint, -1, 0)
        return Stored(checkpoint, checkpoint.delta_version, checkpoint.txn_sum)


class _FileCommits(CommitFold[Checkpoint[FileWatermark]]):
    """The pipeline's commits folded into its checkpoint: the watermark merged (a per-key
    maximum, so concurrent runs never lose each other's progress), the counts added."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    def empty(self) -> Checkpoint[FileWatermark]:
        return Checkpoint(FileWatermark.initial(), 0, totals=Totals())

    def fold(
        self, checkpoint: Checkpoint[FileWatermark], commit: CommitRecord
    ) -> Checkpoint[FileWatermark]:
        metadata = pipeline_metadata(commit, self._pipeline)
        if metadata is None:  # OPTIMIZE, VACUUM, a DML, another writer
            own = self._pipeline.file_source.own_files(commit)
            signatures = checkpoint.file_signatures
            mine = {p for p in own if p not in signatures} - checkpoint.own_files
            return (
                replace(checkpoint, own_files=checkpoint.own_files | mine) if mine else checkpoint
            )
        totals = checkpoint.legacy_totals()
        rows: Counter[str] = Counter(checkpoint.partition_rows)
        folded = replace(
            checkpoint,
            watermark=checkpoint.watermark.merge(metadata.watermark_after),
            file_signatures={**checkpoint.file_signatures, **metadata.source_signatures},
        )
        if metadata.rows_replaced is not None:  # a rewrite: its file was counted before
            net = metadata.rows_committed - metadata.rows_replaced
            for key in metadata.partition_keys:
                rows[key] += net
            totals = totals.plus(files=0, rows=net, partitions=0)
            return replace(folded, partition_rows=dict(rows), totals=totals)
        by_partition = metadata.rows_committed_by_partition()
        new = (
            metadata.new_partitions
            if metadata.new_partitions is not None
            else tuple(k for k in by_partition if k not in rows and not metadata.late)
        )
        rows.update(by_partition)
        landed: Counter[str] = Counter(checkpoint.partition_files)
        landed.update(metadata.partition_files)
        prefixes = dict(checkpoint.partition_prefixes)
        for key, prefix in metadata.prefixes_by_partition().items():
            prefixes[key] = max(prefixes.get(key, prefix), prefix)
        return replace(
            folded,
            partition_rows=dict(rows),
            partition_files=dict(landed),
            partition_prefixes=prefixes,
            totals=totals.plus(
                files=metadata.files, rows=metadata.rows_committed, partitions=len(new)
            ),
        )


def checkpoint_store(pipeline: Pipeline) -> StateStore[Checkpoint[FileWatermark]]:
    """The pipeline's state in the one state store (``state/store.py``): its checkpoint file,
    at the seed's place and in the seed's format, read with the commits after its version."""
    return StateStore(
        pipeline.table.uri,
        pipeline.checkpoint_uri,
        _CheckpointCodec(),
        _FileCommits(pipeline),
        pipeline=pipeline.name,
        location=pipeline.checkpoint_uri,
    )


def read_checkpoint(pipeline: Pipeline) -> Checkpoint[FileWatermark] | None:
    stored = checkpoint_store(pipeline).load()[0]
    return None if stored is None else stored.state


def load_state(pipeline: Pipeline, *, now: datetime) -> PipelineState:
    """The pipeline's state: the checkpoint, caught up with the commits after its version
    (:meth:`StateStore.read`).

    Costs one checkpoint read and the commits after the checkpoint (the table's latest version,
    ``O(log n)`` probes of the log, when there are none): the same at 5,000 commits as at 50.
    Raises :class:`StateHistoryLostError` (naming ``watermark-assets repair-state``) when commits
    of the pipeline after the checkpoint were cleaned from the log (a checkpoint deleted or
    restored from an old backup, or a crash followed by a month without any load): never in
    normal operation.
    """
    read = checkpoint_store(pipeline).read()
    folded = read.current.state
    files = 0
    pending: list[tuple[int, tuple[str, ...]]] = []
    for record in read.commits:
        metadata = pipeline_metadata(record, pipeline)
        if metadata is None:
            continue
        files += metadata.files
        if metadata.quarantine_files:
            pending.append((record.version, metadata.quarantine_files))
    own_kept = retained_files(pipeline, folded.watermark, now, folded.own_files)
    watermark = pruned_watermark(pipeline, folded.watermark, now)
    kept = watermark.partition_watermarks
    rows, prefixes = folded.partition_rows, folded.partition_prefixes
    # counts follow their landing partition's watermark: pruned with it (a Dagster partition
    # with no known landing partition, from a checkpoint older than partition_prefixes, stays)
    retained = {k for k in rows if k not in prefixes or prefixes[k] in kept}
    version = read.current.table_version
    return PipelineState(
        watermark=watermark,
        delta_version=None if version < 0 else version,
        checkpoint=None if read.on_storage is None else read.on_storage.state,
        files_since_checkpoint=files,
        partition_rows={k: n for k, n in rows.items() if k in retained},
        partition_files={p: n for p, n in folded.partition_files.items() if p in kept},
        quarantine_pending=tuple(pending),
        partition_prefixes={k: p for k, p in prefixes.items() if k in retained},
        totals=folded.legacy_totals(),
        txn_sum=read.current.txn_sum,
        file_signatures={
            path: signature
            for path, signature in folded.file_signatures.items()
            if split_path(path)[0] in kept
        },
        own_files=own_kept,
    )


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
    column = read_columns(table, ["_source_file"]).column("_source_file")
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
