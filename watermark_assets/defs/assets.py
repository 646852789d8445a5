"""One partitioned ingestion asset per pipeline, and the job its sensor targets."""

import warnings
from collections.abc import Callable
from datetime import datetime

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    BackfillPolicy,
    Config,
    TimeWindowPartitionsDefinition,
    asset,
)
from dagster._utils.warnings import BetaWarning
from pydantic import Field

from watermark_assets.config import Pipeline
from watermark_assets.core.clock import Clock
from watermark_assets.defs.partitions import partition_selection
from watermark_assets.defs.resources import WatermarkSparkResource
from watermark_assets.runs.file_plan import BatchRequest, plan_batch
from watermark_assets.runs.file_stage import StagedBatch, stage_batch

# BackfillPolicy is "beta" in dagster 1.13; the warning would repeat on every code-location load.
warnings.filterwarnings("ignore", message=".*backfill_policy.*", category=BetaWarning)

IO_MANAGER_KEY = "watermark_io_manager"
SPARK_RESOURCE_KEY = "spark"
PIPELINE_TAG = "watermark_assets/pipeline"
BATCH_TAG = "watermark_assets/batch"
GROUP_NAME = "watermark_ingestion"


class IngestRunConfig(Config):
    """Run configuration of an ingestion asset."""

    files: list[str] | None = Field(
        default=None,
        description="Paths, relative to the source, that this run ingests (the sensor sets them). "
        "Files at or below the committed watermark are skipped. Empty: ingest every file above "
        "the watermark in the run's partitions (what a backfill does).",
    )


def describe(pipeline: Pipeline) -> str:
    """The asset's description: its pipeline in a paragraph."""
    lead = pipeline.description.strip() + "\n\n" if pipeline.description else ""
    how = pipeline.file_source.describe()
    return (
        f"{lead}{how} A file-path watermark per landing partition "
        f"(`{pipeline.watermark.partition_template}`) remembers the last file committed, so each "
        "run reads only files above it; data, txn and watermark go into ONE Delta commit, so a "
        "crash at any point loses and duplicates nothing. Metadata: `watermark/state` is Initial "
        "(nothing ingested yet), Active (the last poll found new files) or Idle (files exist, "
        "none above the watermark); `watermark/partitions_after` shows each landing partition's "
        "watermark."
    )


def build_asset(
    pipeline: Pipeline,
    partitions_def: TimeWindowPartitionsDefinition,
    partition_of: Callable[[datetime], str | None],
    clock: Clock,
) -> AssetsDefinition:
    """The pipeline's ingestion asset; its IO manager makes the Delta commit."""
    per_run = pipeline.backfill.max_partitions_per_run
    policy = BackfillPolicy.single_run() if per_run is None else BackfillPolicy.multi_run(per_run)
    source = pipeline.file_source

    @asset(
        key=AssetKey([pipeline.name]),
        description=describe(pipeline),
        partitions_def=partitions_def,
        backfill_policy=policy,
        io_manager_key=IO_MANAGER_KEY,
        group_name=GROUP_NAME,
        kinds=set(source.compute_kinds),
        metadata={
            "table_uri": pipeline.table.uri,
            "source_uri": pipeline.source.uri,
            "partition_template": pipeline.watermark.partition_template,
            "checkpoint_uri": pipeline.checkpoint_uri,
        },
        op_tags={PIPELINE_TAG: pipeline.name},
    )
    def ingestion_asset(
        context: AssetExecutionContext, config: IngestRunConfig, spark: WatermarkSparkResource
    ) -> StagedBatch:
        request = BatchRequest(
            pipeline=pipeline,
            selection=partition_selection(context),
            run_id=context.run.run_id,
            files=tuple(config.files) if config.files else None,
            clock=clock,
        )
        now = clock()
        plan = plan_batch(request, partition_of, now=now)
        context.log.info(
            f"{pipeline.name} {request.partition_keys[0]}..{request.partition_keys[-1]}: "
            f"{len(plan.files)} files above the watermark, {len(plan.already_committed)} already "
            f"committed; watermark {plan.state.watermark.value!r} "
            f"({plan.state.watermark.state.value})"
        )
        if plan.unreadable:
            first = sorted(plan.unreadable)[:5]
            context.log.warning(
                f"{len(plan.unreadable)} files Spark cannot read by their exact path are held "
                f"back with the later files of their landing partitions (first {first}): rename "
                "them without ':' (see the sensor's skip reason)"
            )
        needs_spark = plan.files and source.needs_spark
        return stage_batch(plan, spark.spark_session if needs_spark else None, now=now)

    return ingestion_asset
