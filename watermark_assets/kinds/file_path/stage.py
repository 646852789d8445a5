"""Stage a planned file batch: its source strategy makes the data files (not committed yet).

A landing file that cannot be read at all (not gzip, truncated, no Parquet footer) is set aside
by the source and staged here as one quarantine record (path, error, size): the rest of the batch
commits, and the commit that passes the file with the watermark is the one that records it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from watermark_assets import storage
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.kinds.file_path.plan import BatchPlan
from watermark_assets.runs.faults import crash_point
from watermark_assets.sources.files import FileBatch, SparkOnDemand, StagedFiles
from watermark_assets.staging import list_parquet, remove_stale_staging, staging_dir

if TYPE_CHECKING:
    from watermark_assets.spark.batch import UnreadableFile


@dataclass(frozen=True, kw_only=True)
class StagedBatch(StagedFiles):
    """A planned batch whose data files exist but are not committed yet (the asset's output):
    what its source staged, plus the plan and the quarantine records of unreadable files."""

    plan: BatchPlan
    token: str
    #: landing files that could not be read at all, recorded in the quarantine as files
    files_quarantined: int = 0
    #: what crashed runs left under the table and its quarantine, removed before this run
    #: (:func:`~watermark_assets.staging.remove_stale_staging`)
    leftovers_removed: tuple[str, ...] = ()

    @property
    def watermark_before(self) -> FileWatermark:
        return self.plan.state.watermark

    @property
    def watermark_after(self) -> FileWatermark:
        if self.plan.request.late or self.plan.request.rewrite:  # files below it: it stays
            return self.plan.state.watermark
        return self.plan.state.watermark.advance(self.plan.files)


def stage_batch(plan: BatchPlan, spark: SparkOnDemand | None, *, now: datetime) -> StagedBatch:
    """Make the batch's data files with the pipeline's source strategy (``source.type``).
    ``spark``: the run's session on demand; the source asks for it once it has done what needs
    no Spark (the leftovers of crashed runs are removed before it is asked for, too)."""
    pipeline = plan.request.pipeline
    token = f"{now.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"
    if not plan.files:
        return StagedBatch(plan=plan, token=token)
    leftovers = [  # what crashed runs left, older than the table's window
        name
        for table_uri in (pipeline.table.uri, pipeline.table.quarantine)
        for name in remove_stale_staging(
            table_uri, now, data_files=pipeline.source.type != "parquet_commit"
        )
    ]
    quarantine_dir = staging_dir(pipeline.table.quarantine, token)
    source = pipeline.file_source
    batch = FileBatch(plan.files, plan.file_partitions, token, quarantine_dir)
    made = source.stage(batch, spark, now=now)
    staged = StagedBatch(
        plan=plan,
        token=token,
        leftovers_removed=tuple(leftovers),
        **{f.name: getattr(made, f.name) for f in fields(made)},
    )
    if made.unreadable:
        staged = _quarantine_unreadable(staged, made.unreadable, batch, now)
    if source.needs_spark:
        crash_point("after_data_written")
    return staged


def _quarantine_unreadable(
    staged: StagedBatch, unreadable: Sequence[UnreadableFile], batch: FileBatch, now: datetime
) -> StagedBatch:
    """``staged`` with one quarantine record per unreadable file (path, error, size) staged
    beside Spark's, counted per Dagster partition."""
    plan = staged.plan
    _write_unreadable_records(unreadable, plan, batch.quarantine_dir, now)
    per_partition = {k: dict(v) for k, v in staged.per_partition.items()}
    for item in unreadable:
        key = plan.file_partitions[item.path]
        tally = per_partition.setdefault(key, {"files": batch.files_of(key), "rows_read": 0})
        tally["files_quarantined"] = tally.get("files_quarantined", 0) + 1
    return replace(
        staged,
        quarantine_files=list_parquet(batch.quarantine_dir),
        quarantine_root=batch.quarantine_dir,
        files_quarantined=len(unreadable),
        per_partition=per_partition,
    )


def _write_unreadable_records(
    unreadable: Sequence[UnreadableFile], plan: BatchPlan, quarantine_dir: str, now: datetime
) -> None:
    """One quarantine record per unreadable file (path, error, size), staged beside Spark's."""
    import watermark_assets.spark.batch as spark_adapter

    fs, root = storage.filesystem(plan.request.pipeline.source.uri)
    records = pa.Table.from_pylist(
        [
            {
                spark_adapter.SOURCE_FILE_COLUMN: item.path,
                spark_adapter.INGESTED_AT_COLUMN: now,
                spark_adapter.PARTITION_KEY_COLUMN: plan.file_partitions[item.path],
                "raw_record": None,
                "error": item.error,
                "file_size": fs.size(f"{root.rstrip('/')}/{item.path}"),
            }
            for item in unreadable
        ],
        schema=spark_adapter.QUARANTINE_SCHEMA,
    )
    storage.write_parquet(storage.join(quarantine_dir, "unreadable-files.parquet"), records)
