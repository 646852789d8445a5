"""Stage a planned file batch: its source strategy makes the data files (not committed yet).

A landing file that cannot be read at all is set aside and staged as one quarantine record.
"""

from __future__ import annotations

import posixpath
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from watermark_assets import storage
from watermark_assets.config import CommitPipelineConfig, IngestPipelineConfig, Pipeline
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.delta.stats import DataFile, describe_data_files
from watermark_assets.exceptions import (
    UnreadableDataFileError,
    UnreadableFilesError,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from watermark_assets.spark.batch import ReadSpec, UnreadableFile
from watermark_assets.runs.faults import crash_point
from watermark_assets.runs.file_plan import BatchPlan
from watermark_assets.runs.staging import (
    STAGING_DIR,
    list_parquet,
    remove_stale_staging,
    remove_tree,
)


@dataclass(frozen=True, kw_only=True)
class StagedBatch:
    """A planned batch whose data files exist but are not committed yet (the asset's output)."""

    plan: BatchPlan
    token: str
    rows_read: int = 0
    rows_quarantined: int = 0
    #: URIs of the files to commit (staged, or the other writer's in place)
    data_files: tuple[str, ...] = ()
    #: staging root of the data files; None when they are already in place
    data_root: str | None = None
    data_schema: pa.Schema | None = None
    quarantine_files: tuple[str, ...] = ()
    quarantine_root: str | None = None
    #: landing files that could not be read at all, recorded in the quarantine as files
    files_quarantined: int = 0
    per_partition: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: add actions already read from the footers (commit pipelines: the files do not move)
    described: tuple[DataFile, ...] = ()

    @property
    def watermark_before(self) -> FileWatermark:
        return self.plan.state.watermark

    @property
    def watermark_after(self) -> FileWatermark:
        return self.plan.state.watermark.advance(self.plan.files)


def stage_batch(plan: BatchPlan, spark: SparkSession | None, *, now: datetime) -> StagedBatch:
    """Make the batch's data files: Spark for an ingest pipeline, nothing to do for a commit one.

    A landing file that cannot be read at all (not gzip, truncated, no Parquet footer) is set
    aside and staged as one quarantine record (path, error, size): the rest of the batch commits,
    and the commit that passes the file with the watermark is the one that records it.
    """
    pipeline = plan.request.pipeline
    token = f"{now.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"
    if not plan.files:
        return StagedBatch(plan=plan, token=token)
    for table_uri in (pipeline.table.uri, pipeline.table.quarantine):
        remove_stale_staging(table_uri, now)
    quarantine_dir = storage.join(pipeline.table.quarantine, f"{STAGING_DIR}/{token}")
    if isinstance(pipeline, CommitPipelineConfig):
        staged, unreadable = _stage_in_place(plan, pipeline, token)
    else:
        if spark is None:
            raise ValueError(f"pipeline {pipeline.name!r} has files to ingest but no Spark session")
        staged, unreadable = _stage_with_spark(plan, pipeline, spark, token, quarantine_dir, now)
    if unreadable:
        staged = _quarantine_unreadable(staged, unreadable, quarantine_dir, now)
    if not isinstance(pipeline, CommitPipelineConfig):
        crash_point("after_data_written")
    return staged


def _stage_in_place(
    plan: BatchPlan, pipeline: CommitPipelineConfig, token: str
) -> tuple[StagedBatch, list[UnreadableFile]]:
    """The other writer's files are committed where they are: read each footer once, here."""
    from watermark_assets.spark.batch import UnreadableFile

    described: list[DataFile] = []
    unreadable: list[UnreadableFile] = []
    for path, relative in zip(plan.files, _relative_to_table(pipeline, plan.files)):
        try:
            described.extend(
                describe_data_files(pipeline.table.uri, [relative], pipeline.table.partition_by)
            )
        except UnreadableDataFileError as exc:
            unreadable.append(UnreadableFile(path, f"not a readable Parquet file: {exc.reason}"))
    aside = {u.path for u in unreadable}
    readable = [p for p in plan.files if p not in aside]
    rows = Counter[str]()
    for path, data_file in zip(readable, described):
        rows[plan.file_partitions[path]] += data_file.num_records
    uris = tuple(storage.join(pipeline.source.uri, p) for p in readable)
    schema = (
        _parquet_schema(uris[0], pipeline.table.partition_by)
        if uris
        else _known_table_schema(pipeline, unreadable)
    )
    counts = {
        k: {"files": _count(plan, k), "rows_read": n, "rows_quarantined": 0}
        for k, n in rows.items()
    }
    staged = StagedBatch(
        plan=plan,
        token=token,
        rows_read=sum(rows.values()),
        data_files=uris,
        data_schema=schema,
        per_partition=counts,
        described=tuple(described),
    )
    return staged, unreadable


def _stage_with_spark(
    plan: BatchPlan,
    pipeline: IngestPipelineConfig,
    spark: SparkSession,
    token: str,
    quarantine_dir: str,
    now: datetime,
) -> tuple[StagedBatch, list[UnreadableFile]]:
    """Spark's pass over the batch; a file Spark cannot read is set aside and the pass redone."""
    import watermark_assets.spark.batch as spark_adapter

    data_dir = storage.join(pipeline.table.uri, f"{STAGING_DIR}/{token}")
    unreadable: list[spark_adapter.UnreadableFile] = []
    while True:
        # A file Spark cannot read at all fails the whole job: set it aside and read the others
        # again (each costs one more pass; a batch has few).
        aside = {u.path for u in unreadable}
        spec = _read_spec(pipeline, [p for p in plan.files if p not in aside], plan, now)
        try:
            if spec.files or spec.schema_ddl is not None:  # no files: the schema's empty batch
                output = spark_adapter.write_batch(
                    spark, spec, data_dir=data_dir, quarantine_dir=quarantine_dir
                )
            else:  # Parquet without a configured schema, and no file left to read
                empty = pa.schema([])
                schema = _known_table_schema(pipeline, unreadable)
                output = spark_adapter.StagedOutput(0, 0, {}, None, None, schema, empty)
            break
        except Exception as exc:
            found = spark_adapter.unreadable_file(exc, spec)
            if found is None:
                raise
            unreadable.append(found)
            remove_tree(data_dir)
            remove_tree(quarantine_dir)
            if len(unreadable) > MAX_UNREADABLE_FILES:
                raise UnreadableFilesError(
                    pipeline.name,
                    tuple(u.path for u in unreadable),
                    f"more than {MAX_UNREADABLE_FILES} in one batch (each costs a pass over the "
                    "batch)",
                    "check the producer, then move the broken files out of the source folder or "
                    "request the rest in smaller batches",
                ) from exc
    staged = StagedBatch(
        plan=plan,
        token=token,
        rows_read=output.rows_read,
        rows_quarantined=output.rows_quarantined,
        data_files=list_parquet(output.data_dir) if output.data_dir else (),
        data_root=output.data_dir,
        data_schema=output.data_schema,
        quarantine_files=list_parquet(quarantine_dir) if output.quarantine_dir else (),
        quarantine_root=output.quarantine_dir,
        per_partition={k: {"files": _count(plan, k), **v} for k, v in output.per_partition.items()},
    )
    return staged, unreadable


#: Unreadable files one batch may set aside (each costs one more Spark pass); more fail the run.
MAX_UNREADABLE_FILES = 10


def _read_spec(
    pipeline: IngestPipelineConfig, files: Sequence[str], plan: BatchPlan, now: datetime
) -> ReadSpec:
    from watermark_assets.spark.batch import ReadSpec

    return ReadSpec(
        source_uri=pipeline.source.uri,
        files=tuple(files),
        file_partitions={p: plan.file_partitions[p] for p in files},
        format=pipeline.source.format.value,
        schema_ddl=pipeline.source.schema_ddl,
        csv_options=pipeline.source.csv_options,
        derived_columns=pipeline.table.derived_columns,
        partition_by=pipeline.table.partition_by,
        ingested_at_iso=now.isoformat(),
    )


def _known_table_schema(pipeline: Pipeline, unreadable: Sequence[UnreadableFile]) -> pa.Schema:
    """An empty schema ("the table's") for a batch with no readable file; none to take from a
    table that does not exist yet."""
    if DeltaCommitter(pipeline.table.uri).current_version() is None:
        raise UnreadableFilesError(
            pipeline.name,
            tuple(u.path for u in unreadable),
            "every file of the pipeline's first batch is unreadable, so the table's schema is "
            "unknown",
            "fix or remove them, or let a readable file land first",
        )
    return pa.schema([])


def _quarantine_unreadable(
    staged: StagedBatch, unreadable: Sequence[UnreadableFile], quarantine_dir: str, now: datetime
) -> StagedBatch:
    """``staged`` with one quarantine record per unreadable file (path, error, size) staged
    beside Spark's, counted per Dagster partition."""
    plan = staged.plan
    _write_unreadable_records(unreadable, plan, quarantine_dir, now)
    per_partition = {k: dict(v) for k, v in staged.per_partition.items()}
    for item in unreadable:
        key = plan.file_partitions[item.path]
        tally = per_partition.setdefault(key, {"files": _count(plan, key), "rows_read": 0})
        tally["files_quarantined"] = tally.get("files_quarantined", 0) + 1
    return replace(
        staged,
        quarantine_files=list_parquet(quarantine_dir),
        quarantine_root=quarantine_dir,
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


def _count(plan: BatchPlan, key: str) -> int:
    return sum(1 for k in plan.file_partitions.values() if k == key)


def _parquet_schema(uri: str, partition_by: Sequence[str]) -> pa.Schema:
    schema = storage.parquet_schema(uri)
    for column in partition_by:
        if column not in schema.names:
            schema = schema.append(pa.field(column, pa.string()))
    return schema


def _relative_to_table(pipeline: Pipeline, paths: Sequence[str]) -> list[str]:
    """Source-relative paths as table-relative ones (a commit pipeline's source is in the table)."""
    prefix = posixpath.relpath(
        storage.filesystem(pipeline.source.uri)[1], storage.filesystem(pipeline.table.uri)[1]
    )
    return [posixpath.normpath(posixpath.join(prefix, path)) for path in paths]
