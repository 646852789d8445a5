"""Where a pipeline's watermark state lives, and how it is read back after any crash.

The Delta log is the truth; the checkpoint file is the fast path. Every commit of a pipeline carries
a ``watermark_assets`` entry in its commitInfo (see :class:`CommitMetadata`); the checkpoint records
the table version it reflects. Loading the state reads the checkpoint, then replays the commits
newer than that version (a crash between commit and checkpoint, or an interval not yet due) with
:meth:`FileWatermark.merge`, a per-key maximum, so concurrent runs never lose each other's progress.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import pyarrow as pa

from watermark_assets import storage
from watermark_assets.config import Pipeline
from watermark_assets.core.checkpoint import Checkpoint, CheckpointPolicy
from watermark_assets.core.coldstart import lookback_horizon
from watermark_assets.core.file_watermark import FileWatermark
from watermark_assets.core.filepath import split_path
from watermark_assets.delta import DeltaCommitter, TxnVersion, describe_data_files
from watermark_assets.exceptions import CheckpointError, DeltaCommitError

#: The commitInfo key under which each commit records the progress it made.
COMMIT_METADATA_KEY = "watermark_assets"
#: The commitInfo key of a quarantine table's commits: the data commit they complete.
QUARANTINE_METADATA_KEY = "watermark_assets_quarantine"


@dataclass(frozen=True)
class CommitMetadata:
    """What one commit records about a pipeline's progress (JSON in the commitInfo).

    ``source_files`` are the landing files the commit ingested (exact: a run that planned before
    this commit finds its own files here and never commits them twice). ``quarantine_files`` are
    the Parquet files of the batch's quarantined records, already in the quarantine table's folder
    (paths relative to it): this commit is their single decision point, and
    :func:`complete_quarantine` adds them to the quarantine table right after, exactly once.
    """

    pipeline: str
    source: str
    run_id: str
    partition_keys: tuple[str, ...]
    watermark_before: FileWatermark
    watermark_after: FileWatermark
    files: int
    rows_read: int
    rows_quarantined: int
    rows_committed: int
    per_partition: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: files this commit added per landing partition prefix
    partition_files: Mapping[str, int] = field(default_factory=dict)
    source_files: tuple[str, ...] = ()
    quarantine_files: tuple[str, ...] = ()
    files_quarantined: int = 0

    def rows_committed_by_partition(self) -> dict[str, int]:
        """Rows this commit added per Dagster partition (read minus quarantined)."""
        return {
            key: int(counts.get("rows_read", 0)) - int(counts.get("rows_quarantined", 0))
            for key, counts in self.per_partition.items()
        }

    def to_json(self) -> str:
        return json.dumps(
            {
                "pipeline": self.pipeline,
                "source": self.source,
                "run_id": self.run_id,
                "partition_keys": list(self.partition_keys),
                "watermark_before": _watermark_json(self.watermark_before),
                "watermark_after": _watermark_json(self.watermark_after),
                "files": self.files,
                "rows_read": self.rows_read,
                "rows_quarantined": self.rows_quarantined,
                "rows_committed": self.rows_committed,
                "per_partition": {k: dict(v) for k, v in self.per_partition.items()},
                "partition_files": dict(self.partition_files),
                "source_files": list(self.source_files),
                "quarantine_files": list(self.quarantine_files),
                "files_quarantined": self.files_quarantined,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> CommitMetadata:
        raw = json.loads(text)
        return cls(
            pipeline=raw["pipeline"],
            source=raw["source"],
            run_id=raw["run_id"],
            partition_keys=tuple(raw["partition_keys"]),
            watermark_before=_watermark_from_json(raw["watermark_before"]),
            watermark_after=_watermark_from_json(raw["watermark_after"]),
            files=int(raw["files"]),
            rows_read=int(raw["rows_read"]),
            rows_quarantined=int(raw["rows_quarantined"]),
            rows_committed=int(raw["rows_committed"]),
            per_partition=raw.get("per_partition", {}),
            partition_files=raw.get("partition_files", {}),
            source_files=tuple(raw.get("source_files", ())),
            quarantine_files=tuple(raw.get("quarantine_files", ())),
            files_quarantined=int(raw.get("files_quarantined", 0)),
        )


def _watermark_json(watermark: FileWatermark) -> dict[str, object]:
    """The watermark in a commit's metadata, tagged with its kind (the contract's name)."""
    return {"kind": watermark.kind, **watermark.to_dict()}


def _watermark_from_json(raw: Mapping[str, object]) -> FileWatermark:
    """Read :func:`_watermark_json`'s shape; commits written before the tag are file-path ones."""
    kind = raw.get("kind", FileWatermark.kind)
    if kind != FileWatermark.kind:
        raise ValueError(
            f"a commit holds a {kind!r} watermark where this pipeline keeps file-path watermarks; "
            "was the table written by another pipeline kind?"
        )
    return FileWatermark.from_dict(
        raw["watermark"],  # type: ignore[arg-type]
        raw["partition_watermarks"],  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class PipelineState:
    """A pipeline's watermark as of ``delta_version`` of its table."""

    watermark: FileWatermark
    delta_version: int | None
    checkpoint: Checkpoint | None
    files_since_checkpoint: int
    partition_rows: Mapping[str, int] = field(default_factory=dict)
    partition_files: Mapping[str, int] = field(default_factory=dict)  # per landing partition
    #: (data version, quarantine files) of commits newer than the checkpoint that quarantined
    #: records: their quarantine may not be in the quarantine table yet (complete_quarantine)
    quarantine_pending: tuple[tuple[int, tuple[str, ...]], ...] = ()


def pipeline_commits(
    committer: DeltaCommitter, pipeline: Pipeline, after: int | None
) -> list[tuple[int, CommitMetadata]]:
    """This pipeline's commits newer than ``after``, ascending, with their metadata."""
    found = []
    for record in committer.read_commits_after(after):
        text = record.custom_metadata.get(COMMIT_METADATA_KEY)
        if not text:
            continue
        metadata = CommitMetadata.from_json(text)
        if metadata.pipeline == pipeline.name and metadata.source == pipeline.source.name:
            found.append((record.version, metadata))
    return found


def load_state(pipeline: Pipeline, *, now: datetime) -> PipelineState:
    """The pipeline's state: the checkpoint, caught up with the Delta log."""
    location = pipeline.checkpoint_uri
    text = storage.read_text(location)
    checkpoint = Checkpoint.loads(text, location=location) if text is not None else None
    committer = DeltaCommitter(pipeline.table.uri)
    table_version = committer.current_version()
    watermark = checkpoint.watermark if checkpoint else FileWatermark.initial()
    after = checkpoint.delta_version if checkpoint else None
    if after is not None and (table_version is None or after > table_version):
        raise CheckpointError(
            f"checkpoint {location!r} reflects Delta version {after} but the table "
            f"{pipeline.table.uri!r} is at {table_version}; the table was replaced or deleted. "
            "Delete the checkpoint to rebuild the state from the table's log",
            location=location,
        )
    files = 0
    rows: Counter[str] = Counter(checkpoint.partition_rows if checkpoint else {})
    landed: Counter[str] = Counter(checkpoint.partition_files if checkpoint else {})
    pending: list[tuple[int, tuple[str, ...]]] = []
    if table_version is not None and table_version != after:
        for version, metadata in pipeline_commits(committer, pipeline, after):
            watermark = watermark.merge(metadata.watermark_after)
            files += metadata.files
            rows.update(metadata.rows_committed_by_partition())
            landed.update(metadata.partition_files)
            if metadata.quarantine_files:
                pending.append((version, metadata.quarantine_files))
            # a commit that landed after current_version() was read is included: count it
            table_version = max(table_version, version)
    watermark = _pruned(pipeline, watermark, now)
    return PipelineState(
        watermark=watermark,
        delta_version=table_version,
        checkpoint=checkpoint,
        files_since_checkpoint=files,
        partition_rows=dict(rows),
        # counts follow their partition's watermark: pruned with it
        partition_files={p: n for p, n in landed.items() if p in watermark.partition_watermarks},
        quarantine_pending=tuple(pending),
    )


def quarantine_app_id(pipeline: str) -> str:
    """The txn appId under which a pipeline's quarantine table records the data version whose
    quarantined records it holds last (data commits complete into it in version order)."""
    return f"watermark_assets/{pipeline}/quarantine"


def complete_quarantine(pipeline: Pipeline, state: PipelineState) -> list[int]:
    """Add the quarantine files of ``state.quarantine_pending`` to the quarantine table, exactly
    once and in data-version order; the data versions completed by this call.

    The data commit decided them (and moved the files into the quarantine table's folder); this
    only makes them visible. The quarantine table's txn of :func:`quarantine_app_id` holds the
    last data version completed: pending commits at or below it are done (by this process before
    a crash, or by another one), and a concurrent completion is a stale outcome, re-checked.
    """
    uri = pipeline.table.quarantine
    committer = DeltaCommitter(uri)
    app_id = quarantine_app_id(pipeline.name)
    done: list[int] = []
    for version, relative in state.quarantine_pending:
        while True:
            current = committer.transaction_version(app_id)
            if current is not None and current >= version:
                break
            files = describe_data_files(uri, relative, [])
            schema = pa.unify_schemas(
                [storage.parquet_schema(storage.join(uri, path)) for path in relative]
            )
            committer.add_missing_columns(schema)  # e.g. file_size, added after 0.1
            outcome = committer.commit(
                files,
                schema=schema,
                partition_by=[],
                txns=[TxnVersion(app_id, version, current)],
                custom_metadata={
                    QUARANTINE_METADATA_KEY: json.dumps(
                        {"pipeline": pipeline.name, "data_version": version}
                    )
                },
            )
            if not outcome.stale:
                done.append(version)
                break
    return done


def txn_app_id(pipeline: str, partition_key: str) -> str:
    """The Delta txn appId of one Dagster partition of one pipeline."""
    return f"watermark_assets/{pipeline}/{partition_key}"


def restore_partitions(
    pipeline: Pipeline, watermark: FileWatermark, partition_keys: Sequence[str]
) -> FileWatermark:
    """``watermark`` with the per-partition watermarks of these Dagster partitions put back.

    Pruning drops the watermarks of old landing partitions; a backfill or a late request of an
    old Dagster partition needs them, or it would re-ingest committed files. Each Dagster
    partition's latest commit (found by its txn app id, reading the log backwards: a backfill's
    cost, never a sensor tick's) recorded the watermarks it reached; they are merged back.
    """
    committer = DeltaCommitter(pipeline.table.uri)
    version = committer.current_version()
    wanted = {txn_app_id(pipeline.name, key) for key in partition_keys}
    while version is not None and version >= 0 and wanted:
        try:
            record = committer.read_commit(version)
        except DeltaCommitError:
            break  # older commits were cleaned up after a Delta checkpoint
        found = wanted & set(record.txns)
        text = record.custom_metadata.get(COMMIT_METADATA_KEY)
        if found and text:
            watermark = watermark.merge(CommitMetadata.from_json(text).watermark_after)
            wanted -= found
        version -= 1
    return watermark


def listing_horizon(
    pipeline: Pipeline, watermark: FileWatermark, now: datetime, *, extra_days: int = 0
) -> str | None:
    """The oldest landing partition a listing still looks at (None: no lower bound).

    Cold start (no watermark yet): the ``cold_start.lookback_days`` window before ``now`` (None is
    a full scan). Afterwards: ``late_arrival_days`` before the newest partition processed, so
    late files and late new partitions in that window are found, and older per-partition
    watermarks are only kept for the sweep (see :func:`retention_horizon`). Relative to the
    watermark, not to ``now``, so a historical load keeps watching the partitions around its
    progress. ``extra_days`` moves the horizon that many days further back.
    """
    template = pipeline.source.template
    if watermark.value is None:
        days = pipeline.source.cold_start.lookback_days
        return None if days is None else lookback_horizon(template, days + extra_days, now)
    days = pipeline.source.late_arrival_days
    newest = template.try_parse(split_path(watermark.value)[0])
    if days is None or newest is None:
        return None
    return lookback_horizon(template, days + extra_days, newest)


def retention_horizon(pipeline: Pipeline, watermark: FileWatermark, now: datetime) -> str | None:
    """The oldest landing partition whose watermark is kept: ``sweep.days`` below the listing
    horizon. Between the two, the sweep tells files that landed after their partition's
    late-arrival window closed from files that were committed; older entries are pruned."""
    days = pipeline.source.sweep.days
    return listing_horizon(pipeline, watermark, now, extra_days=days)


def _pruned(pipeline: Pipeline, watermark: FileWatermark, now: datetime) -> FileWatermark:
    horizon = retention_horizon(pipeline, watermark, now)
    return watermark if horizon is None or watermark.value is None else watermark.prune(horizon)


def save_checkpoint(
    pipeline: Pipeline, state: PipelineState, *, now: datetime, force: bool = False
) -> bool:
    """Write the checkpoint when its interval is due (or ``force``); True if written.

    A checkpoint already on storage for a newer table version is never overwritten by an older one
    (checked and written as one step, see :func:`storage.replace_text_unless`). The quarantine of
    every commit up to the state's version is completed first.
    """
    policy = CheckpointPolicy(pipeline.checkpoint.interval_files, pipeline.checkpoint.interval_secs)
    now_ts = int(now.timestamp())
    last = state.checkpoint.last_update_ts if state.checkpoint else None
    if not force and not policy.is_due(state.files_since_checkpoint, last, now_ts):
        return False
    if state.quarantine_pending:
        # the checkpoint promises that every quarantine up to its version is in the table
        complete_quarantine(pipeline, state)
    location = pipeline.checkpoint_uri
    checkpoint = Checkpoint(
        state.watermark, now_ts, state.delta_version, state.partition_rows, state.partition_files
    )

    def newer_on_storage(text: str) -> bool:
        current = Checkpoint.loads(text, location=location)
        return (current.delta_version or -1) > (state.delta_version or -1)

    return storage.replace_text_unless(location, checkpoint.dumps(), keep=newer_on_storage)


def mark_idle(pipeline: Pipeline, state: PipelineState, *, now: datetime) -> PipelineState:
    """Record that a poll found files, none above the watermark (Active -> Idle), if it changes."""
    idle = state.watermark.mark_idle()
    if idle == state.watermark:
        return state
    new_state = replace(state, watermark=idle)
    save_checkpoint(pipeline, new_state, now=now, force=True)
    return new_state
