"""Reading a file-path pipeline's state back after any crash.

The Delta log is the truth; the checkpoint file is the fast path. Loading the state reads the
checkpoint, then replays the commits newer than the version it records (a crash between commit and
checkpoint, or an interval not yet due) with :meth:`FileWatermark.merge`, a per-key maximum, so
concurrent runs never lose each other's progress.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from watermark_assets import storage
from watermark_assets.config import Pipeline
from watermark_assets.core.checkpoint import Checkpoint
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.exceptions import CheckpointError, DeltaCommitError
from watermark_assets.state.commit_metadata import (
    COMMIT_METADATA_KEY,
    CommitMetadata,
    pipeline_commits,
    txn_app_id,
)
from watermark_assets.state.horizons import pruned_watermark


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


def load_state(pipeline: Pipeline, *, now: datetime) -> PipelineState:
    """The pipeline's state: the checkpoint, caught up with the Delta log."""
    location = pipeline.checkpoint_uri
    text = storage.read_text(location)
    checkpoint = (
        Checkpoint.loads(text, location=location, kind=FileWatermark) if text is not None else None
    )
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
    watermark = pruned_watermark(pipeline, watermark, now)
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
