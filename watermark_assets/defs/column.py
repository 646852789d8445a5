"""The Dagster objects of a column pipeline: its asset, the IO manager that commits, its checks.

The asset plans and stages (``runs.column``), the IO manager makes the ONE Delta commit and
records the metadata, the checks read the commit back from the Delta log. Column pipelines have
no sensor yet: the asset is materialized by hand or by a schedule a user adds (each run reads
what is above the pipeline's watermark).

With a ``partitions`` block the asset is time-partitioned and a run replays its partitions'
windows (``runs.column_replay``): one chunk per partition, read with ``>=`` the window's start
and ``<`` its end, each replacing its window in its own commit (the asset commits; no IO
manager). A UI backfill of a range is ONE run over the range (``BackfillPolicy.single_run``),
its chunks in order; ``replay.save_watermark`` applies (default false: the production watermark
is untouched).
"""

import json
from collections.abc import Callable, Iterator
from typing import Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    BackfillPolicy,
    DagsterEventType,
    MaterializeResult,
    OutputContext,
    TimeWindowPartitionsDefinition,
    asset,
    multi_asset_check,
)

from watermark_assets import names
from watermark_assets.config import (
    ColumnPipelineConfig,
    ReplayChunkConfig,
    ReplayConfig,
    TimePipelineConfig,
    UnitPipelineConfig,
)
from watermark_assets.core.clock import Clock
from watermark_assets.core.column.replay import ReplayChunk
from watermark_assets.core.column.watermark import ColumnWatermark
from watermark_assets.defs.checks import (
    MONOTONE_CHECK,
    RECONCILE_CHECK,
    check_results,
    readable_commits,
)
from watermark_assets.defs.io_manager import WatermarkDeltaIOManager
from watermark_assets.defs.keys import asset_key
from watermark_assets.defs.metadata import column_metadata, replay_metadata
from watermark_assets.defs.partitions import partitions_definition
from watermark_assets.defs.resources import WatermarkSparkResource
from watermark_assets.defs.table_schema import metadata_versions, with_table_schema
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.delta.log import CommitRecord, table_row_count
from watermark_assets.exceptions import DeltaCommitError
from watermark_assets.providers.base import WatermarkRecord
from watermark_assets.providers.delta_metadata import watermark_record
from watermark_assets.runs.column import (
    RUN_METADATA_KEY,
    ColumnRunRequest,
    StagedColumnBatch,
    commit_column_batch,
    plan_column_batch,
    stage_column_batch,
)
from watermark_assets.runs.column_replay import run_replay
from watermark_assets.runs.column_spec import ColumnSpec
from watermark_assets.sources.locations import check_source

COLUMN_IO_MANAGER_KEY = "column_watermark_io_manager"


def describe(pipeline: ColumnPipelineConfig) -> str:
    """The asset's description: its pipeline in a paragraph."""
    lead = pipeline.description.strip() + "\n\n" if pipeline.description else ""
    columns = ", ".join(f"`{c}`" for c in pipeline.watermark.columns)
    how = (
        "replaces the window it read (rows between the watermark before and after, look-back "
        "included) in ONE Delta commit"
        if pipeline.destination.replace_by_watermark
        else "appends them in ONE Delta commit"
    )
    source = f"{pipeline.source.type} source `{pipeline.source.location}`"
    return (
        f"{lead}Reads the rows of the {source} whose "
        f"({columns}) is above the watermark (compared as a tuple, in that order; the predicate "
        f"is pushed down to the source) and {how} to `{pipeline.table.uri}`. The watermark is kept "
        f"by the `{pipeline.watermark.provider.type}` provider, saved only with or after the "
        "commit. Metadata: `watermark/before` and `watermark/after`, `read/predicate`, "
        "`rows/read`, `rows/committed`, `replace/window`."
    )


def _asset_decorator(
    pipeline: ColumnPipelineConfig, partitions_def: TimeWindowPartitionsDefinition | None
) -> Callable[[Callable[..., Any]], AssetsDefinition]:
    return asset(
        key=asset_key(pipeline),
        description=describe(pipeline),
        io_manager_key=COLUMN_IO_MANAGER_KEY,
        group_name="watermark_column_ingestion",
        kinds={"spark", "delta"},
        metadata={
            "table_uri": pipeline.table.uri,
            "source": pipeline.source.location,
            "source_type": pipeline.source.type,
            "watermark_columns": list(pipeline.watermark.columns),
            "watermark_provider": pipeline.watermark.provider.type,
        },
        op_tags={names.PIPELINE_TAG: pipeline.name},
        partitions_def=partitions_def,
        backfill_policy=None if partitions_def is None else BackfillPolicy.single_run(),
    )


def column_partitions(pipeline: ColumnPipelineConfig) -> TimeWindowPartitionsDefinition | None:
    """The asset's time partitions, or None (unpartitioned) without a ``partitions`` block."""
    return None if pipeline.partitions is None else partitions_definition(pipeline)


def partition_chunks(
    pipeline: ColumnPipelineConfig,
    partitions_def: TimeWindowPartitionsDefinition,
    keys: list[str],
) -> list[ReplayChunk]:
    """One replay chunk per partition key: its window ``[start, end)`` on the leading column."""
    column = (pipeline.watermark.columns[0],)
    windows = sorted(
        (partitions_def.time_window_for_partition_key(key) for key in keys),
        key=lambda window: window.start,
    )
    return [
        ReplayChunk(ColumnWatermark(column, (w.start,)), ColumnWatermark(column, (w.end,)))
        for w in windows
    ]


def build_column_asset(pipeline: ColumnPipelineConfig, clock: Clock) -> AssetsDefinition:
    """The pipeline's asset: unpartitioned (plans and stages; its IO manager commits), or
    time-partitioned (replays its partitions' windows: :func:`build_partitioned_column_asset`)."""
    partitions_def = column_partitions(pipeline)
    if partitions_def is not None:
        return build_partitioned_column_asset(pipeline, partitions_def, clock)

    @_asset_decorator(pipeline, None)
    def column_asset(
        context: AssetExecutionContext, spark: WatermarkSparkResource
    ) -> StagedColumnBatch:
        request = ColumnRunRequest(
            pipeline=ColumnSpec.of(pipeline),
            run_id=context.run.run_id,
            job_name=context.run.job_name,
            clock=clock,
        )
        now = clock()
        check_source(pipeline)  # before Spark: a clear error, not Spark's
        plan = plan_column_batch(request, now=now)
        context.log.info(
            f"{pipeline.name}: watermark {plan.watermark_before} ({plan.provider}); reading "
            f"{plan.predicate_text}"
        )
        return stage_column_batch(plan, spark.spark_session, now=now)

    return column_asset


def build_partitioned_column_asset(
    pipeline: ColumnPipelineConfig, partitions_def: TimeWindowPartitionsDefinition, clock: Clock
) -> AssetsDefinition:
    """The time-partitioned asset: a run replays its partitions' windows (module docstring)."""
    save_watermark = pipeline.replay is not None and pipeline.replay.save_watermark

    @_asset_decorator(pipeline, partitions_def)
    def column_partitions_asset(
        context: AssetExecutionContext, spark: WatermarkSparkResource
    ) -> MaterializeResult[None]:
        check_source(pipeline)  # before Spark: a clear error, not Spark's
        chunks = partition_chunks(pipeline, partitions_def, list(context.partition_keys))
        replay = ReplayConfig(
            start=chunks[0].lower.values[0],  # type: ignore[arg-type]
            end=chunks[-1].upper.values[0],  # type: ignore[arg-type]
            chunk=ReplayChunkConfig(hours=1),  # unused: the chunks are the partitions
            save_watermark=save_watermark,
        )
        result = run_replay(
            pipeline,
            replay,
            spark.spark_session,
            run_id=context.run.run_id,
            clock=clock,
            log=context.log.info,
            chunks=chunks,
        )
        uri = pipeline.table.uri
        metadata = replay_metadata(result, table_rows=table_row_count(uri))
        return MaterializeResult(metadata=with_table_schema(metadata, uri))

    return column_partitions_asset


class ColumnWatermarkIOManager(WatermarkDeltaIOManager):
    """Commits a column pipeline's staged rows (and its watermark) to Delta; loading returns the
    table as a ``deltalake.DeltaTable``, as for the file pipelines."""

    def handle_output(self, context: OutputContext, obj: StagedColumnBatch) -> None:  # type: ignore[override]
        result = commit_column_batch(obj, now=obj.plan.request.clock())
        uri = obj.plan.request.pipeline.table.uri
        metadata = column_metadata(result, table_rows=table_row_count(uri))
        context.add_output_metadata(with_table_schema(metadata, uri))
        context.log.info(
            f"{obj.plan.request.pipeline.name}: {result.staged.rows_read} rows read, "
            f"{result.rows_committed} committed, {obj.rows_quarantined} quarantined, "
            f"watermark {result.watermark_after} "
            f"({result.outcome.reason})"
        )


def run_versions(context: AssetCheckExecutionContext, asset_key: AssetKey) -> list[int]:
    records = context.instance.get_records_for_run(
        context.run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION
    ).records
    versions = set()
    for record in records:
        materialization = record.event_log_entry.asset_materialization
        if materialization is None or materialization.asset_key != asset_key:
            continue
        versions |= metadata_versions(materialization.metadata)
    return sorted(versions)


def _previous_carried(
    committer: DeltaCommitter, dataflow_id: str, version: int
) -> WatermarkRecord | None:
    """The watermark the newest commit before ``version`` carries for ``dataflow_id``."""
    for earlier in range(version - 1, -1, -1):
        try:
            record = watermark_record(dataflow_id, committer.read_commit(earlier))
        except DeltaCommitError:
            return None  # cleaned up by log retention: nothing to compare with
        if record is not None:
            return record
    return None


def reconcile_mismatch(version: int, record: dict[str, Any], commit: CommitRecord) -> str | None:
    """Why the rows ``commit`` adds differ from its ``column_run`` record's count, or None:
    rows added = rows read - rows deduplicated on merge keys + rows kept by rewrite."""
    logged = sum(add.num_records or 0 for add in commit.added)
    duplicates = int(record.get("rows_deduplicated", 0))
    kept = int(record["rows_kept_by_rewrite"])
    expected = int(record["rows_read"]) - duplicates + kept
    if logged == expected:
        return None
    return (
        f"v{version}: log adds {logged} rows, read {record['rows_read']} - "
        f"deduplicated on the merge keys {duplicates} + kept by rewrite {kept} = {expected}"
    )


def build_column_checks(
    pipeline: ColumnPipelineConfig | TimePipelineConfig | UnitPipelineConfig, asset_key: AssetKey
) -> AssetChecksDefinition:
    """Both checks, read from this run's commit in the Delta log (not from the run's claims):
    of a column pipeline, and of the time and unit pipelines that commit through the column
    engine (their name, table and dataflow id are all the checks read)."""

    @multi_asset_check(
        specs=[
            AssetCheckSpec(
                MONOTONE_CHECK,
                asset=asset_key,
                description="The watermark a commit stores is at or above the one it read "
                "and the one the previous commit stored.",
            ),
            AssetCheckSpec(
                RECONCILE_CHECK,
                asset=asset_key,
                description="Rows added by the commit = rows read (- rows of a merge key read "
                "twice, one kept; + rows a replace or merge kept when it rewrote a file).",
            ),
        ],
        name=f"{pipeline.name}_checks",
    )
    def checks(context: AssetCheckExecutionContext) -> Iterator[AssetCheckResult]:
        versions = run_versions(context, asset_key)
        committer = DeltaCommitter(pipeline.table.uri)
        regressions: list[str] = []
        mismatches: list[str] = []
        commits, gone = readable_commits(committer, versions)
        for commit in commits:
            version = commit.version
            text = commit.custom_metadata.get(RUN_METADATA_KEY)
            if not text:
                continue
            record = json.loads(text)
            before = ColumnWatermark.from_json(record["watermark_before"])
            after = ColumnWatermark.from_json(record["watermark_after"])
            if not after.covers(before):
                regressions.append(f"v{version}: {before} -> {after}")
            carried = watermark_record(pipeline.dataflow_id, commit)
            previous = _previous_carried(committer, pipeline.dataflow_id, version)
            if carried is not None and previous is not None:
                now, was = (ColumnWatermark.from_json(r.watermark) for r in (carried, previous))
                if not now.covers(was):
                    regressions.append(
                        f"v{version} stores {now}, below v{previous.delta_version}'s {was}"
                    )
            mismatch = reconcile_mismatch(version, record, commit)
            if mismatch is not None:
                mismatches.append(mismatch)
        if not versions:
            note = "this run made no commit (nothing above the watermark)"
            yield AssetCheckResult(check_name=MONOTONE_CHECK, passed=True, description=note)
            yield AssetCheckResult(check_name=RECONCILE_CHECK, passed=True, description=note)
            return
        yield from check_results(versions, regressions, mismatches, gone)

    return checks
