"""The Dagster objects of a column pipeline: its asset, the IO manager that commits, its checks.

The asset plans and stages (``runs.column``), the IO manager makes the ONE Delta commit and
records the metadata, the checks read the commit back from the Delta log. Column pipelines have
no sensor yet: the asset is materialized by hand or by a schedule a user adds (each run reads
what is above the pipeline's watermark).

With a ``partitions`` block the asset is time-partitioned and a run replays its partitions'
windows (``kinds.column.replay``): one chunk per partition, read with ``>=`` the window's start
and ``<`` its end, each replacing its window in its own commit (the asset commits; no IO
manager). A UI backfill of a range is ONE run over the range (``BackfillPolicy.single_run``),
its chunks in order; ``replay.save_watermark`` applies (default false: the production watermark
is untouched).
"""

from collections.abc import Callable
from typing import Any

from dagster import (
    AssetsDefinition,
    BackfillPolicy,
    TimeWindowPartitionsDefinition,
    asset,
)

from watermark_assets import names
from watermark_assets.config import (
    ColumnPipelineConfig,
)
from watermark_assets.core.clock import Clock
from watermark_assets.core.column.replay import PartitionsReplay, ReplayChunk
from watermark_assets.core.column.watermark import ColumnWatermark
from watermark_assets.core.partition_selection import PartitionSelection
from watermark_assets.defs.asset_body import AssetOutcome, AssetRun, run_asset
from watermark_assets.defs.column_checks import build_column_checks
from watermark_assets.defs.columns import source_schema
from watermark_assets.defs.freshness import freshness_policy
from watermark_assets.defs.io_manager import COLUMN_IO_MANAGER_KEY
from watermark_assets.defs.jobs import pipeline_job
from watermark_assets.defs.keys import asset_key
from watermark_assets.defs.partitions import partitions_definition
from watermark_assets.defs.pipeline_defs import PipelineDefs
from watermark_assets.delta.log import table_row_count
from watermark_assets.kinds.column.metadata import column_metadata, replay_metadata
from watermark_assets.kinds.column.replay import run_replay
from watermark_assets.runs.column import (
    ColumnRunRequest,
    commit_column_batch,
    plan_column_batch,
    stage_column_batch,
)
from watermark_assets.runs.column_spec import ColumnSpec
from watermark_assets.sources.locations import check_source


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


def partition_replay(
    pipeline: ColumnPipelineConfig,
    partitions_def: TimeWindowPartitionsDefinition,
    selection: PartitionSelection,
) -> PartitionsReplay:
    """The replay of a run's partitions: one chunk per partition, its window ``[start, end)`` on
    the leading column (each key's window as its partitions define it), saving the chunks'
    bounds when the pipeline's ``replay.save_watermark`` says so."""
    column = (pipeline.watermark.columns[0],)
    windows = sorted(
        (partitions_def.time_window_for_partition_key(key) for key in selection.keys),
        key=lambda window: window.start,
    )
    return PartitionsReplay(
        windows[0].start,
        windows[-1].end,
        tuple(
            ReplayChunk(ColumnWatermark(column, (w.start,)), ColumnWatermark(column, (w.end,)))
            for w in windows
        ),
        save_watermark=pipeline.replay is not None and pipeline.replay.save_watermark,
    )


def build_column_asset(pipeline: ColumnPipelineConfig, clock: Clock) -> AssetsDefinition:
    """The pipeline's asset: unpartitioned (plans, stages and makes its ONE commit in its body,
    as every kind does), or time-partitioned (replays its partitions' windows:
    :func:`build_partitioned_column_asset`)."""
    partitions_def = column_partitions(pipeline)
    if partitions_def is not None:
        return build_partitioned_column_asset(pipeline, partitions_def, clock)

    def column_run(run: AssetRun) -> AssetOutcome:
        request = ColumnRunRequest(
            pipeline=ColumnSpec.of(pipeline),
            run_id=run.run_id,
            job_name=run.job_name,
            clock=clock,
        )
        now = clock()
        check_source(pipeline)  # before Spark: a clear error, not Spark's
        plan = plan_column_batch(request, now=now)
        run.info(
            f"{pipeline.name}: watermark {plan.watermark_before} ({plan.provider}); reading "
            f"{plan.predicate_text}"
        )
        staged = stage_column_batch(plan, run.spark, now=now)
        result = commit_column_batch(staged, now=clock())
        uri = pipeline.table.uri
        metadata = column_metadata(result, table_rows=table_row_count(uri))
        run.info(
            f"{pipeline.name}: {staged.rows_read} rows read, {result.rows_committed} committed, "
            f"{staged.rows_quarantined} quarantined, watermark {result.watermark_after} "
            f"({result.outcome.reason})"
        )
        return AssetOutcome(metadata, uri)

    return run_asset(_asset_decorator(pipeline, None), column_run)


def build_partitioned_column_asset(
    pipeline: ColumnPipelineConfig, partitions_def: TimeWindowPartitionsDefinition, clock: Clock
) -> AssetsDefinition:
    """The time-partitioned asset: a run replays its partitions' windows (module docstring)."""

    def replay_run(run: AssetRun) -> AssetOutcome:
        check_source(pipeline)  # before Spark: a clear error, not Spark's
        result = run_replay(
            pipeline,
            partition_replay(pipeline, partitions_def, run.partitions),
            run.spark,
            run_id=run.run_id,
            clock=clock,
            log=run.info,
        )
        uri = pipeline.table.uri
        metadata = replay_metadata(result, table_rows=table_row_count(uri))
        return AssetOutcome(metadata, uri)

    decorator = _asset_decorator(pipeline, partitions_def)
    return run_asset(decorator, replay_run)


def build_column_pipeline(pipeline: ColumnPipelineConfig, clock: Clock) -> PipelineDefs:
    """Everything of one column pipeline (the column kind's ``dagster_defs``): materialized by
    hand or by a backfill (no sensor); fresh by its ``freshness`` alone."""
    asset = build_column_asset(pipeline, clock)
    check = build_column_checks(pipeline, asset.key)
    job = pipeline_job(
        pipeline.name,
        asset,
        check,
        column_partitions(pipeline),
        f"Reads the rows of {pipeline.name} above its column watermark"
        if pipeline.partitions is None
        else f"Replays the windows of {pipeline.name}'s partitions (one chunk each)",
    )
    return PipelineDefs(
        asset,
        check,
        job,
        freshness=freshness_policy(pipeline.freshness, None),
        column_schema=source_schema(pipeline.source),
    )
