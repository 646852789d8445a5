"""One batch of a pipeline, from files above the watermark to one Delta commit (no Dagster).

``plan_batch`` decides which files a run ingests, ``stage_batch`` makes the data files (Spark
for ingest pipelines; the other writer's Parquet files for commit pipelines), ``commit_batch``
moves them into the table's partition directories and makes ONE Delta commit holding the add
actions, a txn action per Dagster partition and the watermark advance, then writes the
checkpoint when it is due.

Crash anywhere and run again: files at or below the committed watermark are dropped from the batch,
and a txn version that is already in the log is never committed twice.
"""

from __future__ import annotations

import os
import posixpath
import signal
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from watermark_assets import storage
from watermark_assets.config import CommitPipelineConfig, IngestPipelineConfig
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.file_watermark import FileWatermark, components_below
from watermark_assets.core.filepath import prefix_components, split_path
from watermark_assets.delta import (
    CommitOutcome,
    DataFile,
    DeltaCommitter,
    TxnVersion,
    describe_data_files,
)
from watermark_assets.discovery import PartitionOf, discover_files, partition_key_of
from watermark_assets.exceptions import SourceFileMissingError
from watermark_assets.state_store import (
    COMMIT_METADATA_KEY,
    CommitMetadata,
    PipelineState,
    listing_horizon,
    load_state,
    restore_partitions,
    save_checkpoint,
    txn_app_id,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Pipeline = IngestPipelineConfig | CommitPipelineConfig

CRASH_ENV_VAR = "WATERMARK_ASSETS_CRASH_AT"
STAGING_DIR = "_staging"
#: Staging folders older than this were left by a crashed run (never committed): removed.
STAGING_RETENTION = timedelta(hours=6)


def crash_point(name: str, env: Mapping[str, str] | None = None) -> None:
    """Fault injection for the exactly-once tests: SIGKILL this process at the named point.

    Set WATERMARK_ASSETS_CRASH_AT to ``after_data_written`` or ``after_commit``. Never set in
    production; reading one environment variable costs nothing.
    """
    env = os.environ if env is None else env
    if env.get(CRASH_ENV_VAR) == name:
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class BatchRequest:
    """What one run was asked to do, taken from the Dagster context once, at the edge."""

    pipeline: Pipeline
    partition_keys: tuple[str, ...]
    run_id: str
    files: tuple[str, ...] | None = None  # None: discover the files above the watermark
    window_start: datetime | None = None  # start of the partitions' time window (for discovery)
    clock: Clock = system_clock  # the definitions' clock, for the commit's "now"


@dataclass(frozen=True)
class BatchPlan:
    """The files a run will ingest, and the state it starts from."""

    request: BatchRequest
    state: PipelineState
    files: tuple[str, ...]
    file_partitions: Mapping[str, str]
    already_committed: tuple[str, ...]
    txns: tuple[TxnVersion, ...]


def plan_batch(request: BatchRequest, partition_of: PartitionOf, *, now: datetime) -> BatchPlan:
    """Choose the files: the requested ones still above the watermark, or all above it."""
    pipeline = request.pipeline
    state = load_state(pipeline, now=now)
    wanted = set(request.partition_keys)
    since = (
        pipeline.source.template.format(request.window_start)
        if request.window_start is not None
        else None
    )
    horizon = listing_horizon(pipeline, state.watermark, now)
    restored = bool(
        since and horizon and components_below(prefix_components(since), prefix_components(horizon))
    )
    if restored:  # an old window: its per-partition watermarks may have been pruned
        watermark = restore_partitions(pipeline, state.watermark, request.partition_keys)
        state = replace(state, watermark=watermark)
    if request.files is None:
        groups = discover_files(
            pipeline, state.watermark, partition_of, now=now, since=since, restored=restored
        )
        candidates = sorted(p for key in wanted for p in groups.by_partition.get(key, ()))
        already: list[str] = []
    else:
        candidates, already = [], []
        for path in sorted(set(request.files)):
            (candidates if state.watermark.is_above(path) else already).append(path)
        missing = [
            p for p in candidates if not storage.exists(storage.join(pipeline.source.uri, p))
        ]
        if missing:
            raise SourceFileMissingError(missing[0], pipeline.source.uri)
    file_partitions: dict[str, str] = {}
    for path in candidates:
        key = partition_key_of(pipeline, path, partition_of)
        if key in wanted:
            file_partitions[path] = key
    app_ids = [txn_app_id(pipeline.name, key) for key in sorted(wanted)]
    committed = DeltaCommitter(pipeline.table.uri).transaction_versions(app_ids)
    txns = tuple(TxnVersion(app_id, (committed[app_id] or 0) + 1) for app_id in app_ids)
    return BatchPlan(
        request, state, tuple(sorted(file_partitions)), file_partitions, tuple(already), txns
    )


@dataclass(frozen=True)
class StagedBatch:
    """A planned batch whose data files exist but are not committed yet (the asset's output)."""

    plan: BatchPlan
    token: str
    rows_read: int
    rows_quarantined: int
    data_files: tuple[str, ...]  # URIs of the files to commit (staged or the other writer's)
    data_root: str | None  # staging root of the data files; None when they are already in place
    data_schema: pa.Schema | None
    quarantine_files: tuple[str, ...]
    per_partition: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: add actions already read from the footers (commit pipelines: the files do not move)
    described: tuple[DataFile, ...] = ()

    @property
    def watermark_before(self) -> FileWatermark:
        return self.plan.state.watermark

    @property
    def watermark_after(self) -> FileWatermark:
        return self.plan.state.watermark.advance(self.plan.files)


def _list_parquet(uri: str) -> tuple[str, ...]:
    """URIs of the Parquet files Spark wrote under ``uri`` (hidden .crc/_SUCCESS files skipped)."""
    fs, root = storage.filesystem(uri)
    if not fs.exists(root):
        return ()
    names = (p for p in fs.find(root) if p.endswith(".parquet"))
    return tuple(
        sorted(
            fs.unstrip_protocol(p) for p in names if not storage.is_hidden(posixpath.basename(p))
        )
    )


def stage_batch(plan: BatchPlan, spark: SparkSession | None, *, now: datetime) -> StagedBatch:
    """Make the batch's data files: Spark for an ingest pipeline, nothing to do for a commit one."""
    pipeline = plan.request.pipeline
    token = f"{now.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"
    if not plan.files:
        return StagedBatch(plan, token, 0, 0, (), None, None, ())
    if isinstance(pipeline, CommitPipelineConfig):
        # The other writer's files are committed where they are: read each footer once, here.
        described = tuple(
            describe_data_files(
                pipeline.table.uri,
                _relative_to_table(pipeline, plan.files),
                pipeline.table.partition_by,
            )
        )
        rows = Counter[str]()
        for path, data_file in zip(plan.files, described):
            rows[plan.file_partitions[path]] += data_file.num_records
        uris = tuple(storage.join(pipeline.source.uri, p) for p in plan.files)
        schema = _parquet_schema(uris[0], pipeline.table.partition_by)
        per_partition = {
            k: {"files": _count(plan, k), "rows_read": n, "rows_quarantined": 0}
            for k, n in rows.items()
        }
        return StagedBatch(
            plan, token, sum(rows.values()), 0, uris, None, schema, (), per_partition, described
        )
    from watermark_assets import spark as spark_adapter

    spec = spark_adapter.ReadSpec(
        source_uri=pipeline.source.uri,
        files=plan.files,
        file_partitions=plan.file_partitions,
        format=pipeline.source.format.value,
        schema_ddl=pipeline.source.schema_ddl,
        csv_options=pipeline.source.csv_options,
        derived_columns=pipeline.table.derived_columns,
        partition_by=pipeline.table.partition_by,
        ingested_at_iso=now.isoformat(),
    )
    for table_uri in (pipeline.table.uri, pipeline.table.quarantine):
        remove_stale_staging(table_uri, now)
    data_dir = storage.join(pipeline.table.uri, f"{STAGING_DIR}/{token}")
    quarantine_dir = storage.join(pipeline.table.quarantine, f"{STAGING_DIR}/{token}")
    if spark is None:
        raise ValueError(f"pipeline {pipeline.name!r} has files to ingest but no Spark session")
    output = spark_adapter.stage_batch(
        spark, spec, data_dir=data_dir, quarantine_dir=quarantine_dir
    )
    crash_point("after_data_written")
    return StagedBatch(
        plan,
        token,
        output.rows_read,
        output.rows_quarantined,
        _list_parquet(output.data_dir) if output.data_dir else (),
        output.data_dir,
        output.data_schema,
        _list_parquet(output.quarantine_dir) if output.quarantine_dir else (),
        {k: {"files": _count(plan, k), **v} for k, v in output.per_partition.items()},
    )


def remove_stale_staging(table_uri: str, now: datetime) -> list[str]:
    """Delete ``_staging/{token}`` folders older than STAGING_RETENTION; their names.

    A run that crashed after Spark wrote its files leaves its staging folder behind; nothing in
    the Delta log references it. The token starts with the staging time, so no stat is needed.
    """
    fs, root = storage.filesystem(storage.join(table_uri, STAGING_DIR))
    if not fs.exists(root):
        return []
    removed = []
    for path in fs.ls(root, detail=False):
        token = posixpath.basename(path.rstrip("/"))
        try:
            staged_at = datetime.strptime(token[:15], "%Y%m%dT%H%M%S").replace(tzinfo=timezone.utc)
        except ValueError:
            continue  # not ours
        if now - staged_at > STAGING_RETENTION:
            fs.rm(path, recursive=True)
            removed.append(token)
    return removed


def _count(plan: BatchPlan, key: str) -> int:
    return sum(1 for k in plan.file_partitions.values() if k == key)


def _parquet_schema(uri: str, partition_by: Sequence[str]) -> pa.Schema:
    fs, inner = storage.filesystem(uri)
    with fs.open(inner, "rb") as handle:
        schema = pq.read_schema(handle)
    for column in partition_by:
        if column not in schema.names:
            schema = schema.append(pa.field(column, pa.string()))
    return schema


def _move_into_table(
    staged_files: Sequence[str], staging_root: str, table_uri: str, token: str
) -> list[str]:
    """Move staged files into the table's partition directories; their paths relative to it."""
    fs, table_root = storage.filesystem(table_uri)
    _, staging = storage.filesystem(staging_root)
    moved = []
    for number, uri in enumerate(staged_files):
        _, inner = storage.filesystem(uri)
        directory = posixpath.dirname(posixpath.relpath(inner, staging))
        name = f"part-{number:05d}-{token}.parquet"
        relative = posixpath.normpath(posixpath.join(directory, name))
        fs.makedirs(posixpath.join(table_root, posixpath.dirname(relative)), exist_ok=True)
        fs.mv(inner, posixpath.join(table_root, relative))
        moved.append(relative)
    return moved


@dataclass(frozen=True)
class BatchResult:
    """What a run did, for the materialization metadata and the summary."""

    staged: StagedBatch
    outcome: CommitOutcome
    quarantine_outcome: CommitOutcome | None
    rows_committed: int
    state_after: PipelineState
    checkpoint_written: bool


def commit_batch(staged: StagedBatch, *, now: datetime) -> BatchResult:
    """Commit the staged files and the watermark advance in ONE Delta commit, then checkpoint."""
    plan = staged.plan
    pipeline = plan.request.pipeline
    if not plan.files:
        state = load_state(pipeline, now=now)
        # A crash between commit and checkpoint (or a deleted checkpoint) leaves the state only in
        # the Delta log: write the checkpoint it replayed to, when due, even with nothing to commit.
        written = save_checkpoint(pipeline, state, now=now)
        nothing = CommitOutcome(None, True, "no files above the watermark: nothing to commit")
        return BatchResult(staged, nothing, None, 0, state, written)
    committer = DeltaCommitter(pipeline.table.uri)
    quarantine_outcome = None
    if staged.quarantine_files:
        quarantine_outcome = _commit_quarantine(staged, pipeline)
    files: list[DataFile] = list(staged.described)
    if staged.data_root is not None and staged.data_files:  # Spark's files, staged: move them in
        relative = _move_into_table(
            staged.data_files, staged.data_root, pipeline.table.uri, staged.token
        )
        files = describe_data_files(pipeline.table.uri, relative, pipeline.table.partition_by)
    rows_committed = sum(f.num_records for f in files)
    metadata = CommitMetadata(
        pipeline=pipeline.name,
        source=pipeline.source.name,
        run_id=plan.request.run_id,
        partition_keys=plan.request.partition_keys,
        watermark_before=staged.watermark_before,
        watermark_after=staged.watermark_after,
        files=len(plan.files),
        rows_read=staged.rows_read,
        rows_quarantined=staged.rows_quarantined,
        rows_committed=rows_committed,
        per_partition=staged.per_partition,
        partition_files=dict(Counter(split_path(path)[0] for path in plan.files)),
    )
    outcome = committer.commit(
        files,
        schema=staged.data_schema if staged.data_schema is not None else pa.schema([]),
        partition_by=pipeline.table.partition_by,
        txns=plan.txns,
        custom_metadata={COMMIT_METADATA_KEY: metadata.to_json()},
    )
    crash_point("after_commit")
    state = load_state(pipeline, now=now)
    written = save_checkpoint(pipeline, state, now=now)
    if staged.data_root is not None:
        _remove_tree(staged.data_root)
    return BatchResult(
        staged,
        outcome,
        quarantine_outcome,
        0 if outcome.skipped else rows_committed,
        state,
        written,
    )


def _commit_quarantine(staged: StagedBatch, pipeline: Pipeline) -> CommitOutcome:
    from watermark_assets.spark import QUARANTINE_SCHEMA

    uri = pipeline.table.quarantine
    staging_root = storage.join(uri, f"{STAGING_DIR}/{staged.token}")
    relative = _move_into_table(staged.quarantine_files, staging_root, uri, staged.token)
    files = describe_data_files(uri, relative, [])
    outcome = DeltaCommitter(uri).commit(
        files,
        schema=QUARANTINE_SCHEMA,
        partition_by=[],
        txns=staged.plan.txns,
        custom_metadata={"watermark_assets_quarantine": staged.plan.request.run_id},
    )
    _remove_tree(staging_root)
    return outcome


def _remove_tree(uri: str) -> None:
    fs, root = storage.filesystem(uri)
    if fs.exists(root):
        fs.rm(root, recursive=True)


def _relative_to_table(pipeline: Pipeline, paths: Sequence[str]) -> list[str]:
    """Source-relative paths as table-relative ones (a commit pipeline's source is in the table)."""
    prefix = posixpath.relpath(
        storage.filesystem(pipeline.source.uri)[1], storage.filesystem(pipeline.table.uri)[1]
    )
    return [posixpath.normpath(posixpath.join(prefix, path)) for path in paths]
