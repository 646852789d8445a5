"""One partitioned ingestion asset per pipeline, and the job its sensor targets."""

import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from dagster import (
    AssetChecksDefinition,
    AssetExecutionContext,
    AssetsDefinition,
    AssetSelection,
    BackfillPolicy,
    Config,
    PartitionsDefinition,
    TimeWindowPartitionsDefinition,
    asset,
    define_asset_job,
)
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition
from dagster._utils.warnings import BetaWarning
from pydantic import Field

from watermark_assets import names
from watermark_assets.config import Pipeline
from watermark_assets.core.clock import Clock
from watermark_assets.defs.keys import asset_key
from watermark_assets.defs.partitions import partition_selection
from watermark_assets.defs.resources import WatermarkSparkResource
from watermark_assets.runs.file_plan import BatchRequest, plan_batch
from watermark_assets.runs.file_stage import StagedBatch, stage_batch

# BackfillPolicy is "beta" in dagster 1.13; the warning would repeat on every code-location load.
warnings.filterwarnings("ignore", message=".*backfill_policy.*", category=BetaWarning)

IO_MANAGER_KEY = "watermark_io_manager"
SPARK_RESOURCE_KEY = "spark"
PIPELINE_TAG = names.PIPELINE_TAG
BATCH_TAG = names.BATCH_TAG
#: on the runs of the late mode (files below their partition's watermark, sweep.ingest)
LATE_TAG = names.LATE_TAG
GROUP_NAME = "watermark_ingestion"


def job_name(pipeline_name: str) -> str:
    return f"{pipeline_name}_job"


def pipeline_job(
    pipeline_name: str,
    asset_def: AssetsDefinition,
    checks: AssetChecksDefinition,
    partitions_def: PartitionsDefinition[Any] | None,
    description: str,
) -> UnresolvedAssetJobDefinition:
    """``{pipeline}_job``: the pipeline's asset and its checks, over its partitions."""
    return define_asset_job(
        job_name(pipeline_name),
        selection=AssetSelection.assets(asset_def) | AssetSelection.checks(checks),
        partitions_def=partitions_def,
        description=description,
    )


def files_run_config(
    node: str, files: Sequence[str] | None, *, late: bool = False, rewrite: bool = False
) -> dict[str, Any]:
    """The run config of a file-path pipeline's run: ingest ``files`` (None: every file above
    the watermark in the run's partitions, what a backfill does); ``late``: files that landed at
    or below their partition's watermark (the sweep's runs); ``rewrite``: a committed file
    rewritten in place, whose rows are replaced (``on_rewrite: replace``). The one place its
    shape is written; :func:`requested_files` reads it back. ``node``: the op of the pipeline's
    asset (``defs/keys.node_name``: its name when it has no ``key_prefix``)."""
    config: dict[str, Any] = {} if files is None else {"files": list(files)}
    if late:
        config["late"] = True
    if rewrite:
        config["rewrite"] = True
    return {"ops": {node: {"config": config}}}


def requested_files(run_config: Mapping[str, Any], node: str) -> list[str] | None:
    """The files a run config of :func:`files_run_config` requests (None: every file above)."""
    files = run_config.get("ops", {}).get(node, {}).get("config", {}).get("files")
    return None if files is None else list(files)


class IngestRunConfig(Config):
    """Run configuration of an ingestion asset."""

    files: list[str] | None = Field(
        default=None,
        description="Paths, relative to the source, that this run ingests (the sensor sets them). "
        "Files at or below the committed watermark are skipped. Empty: ingest every file above "
        "the watermark in the run's partitions (what a backfill does).",
    )
    late: bool = Field(
        default=False,
        description="Ingest the listed files that landed AT OR BELOW their partition's watermark "
        "and that no commit recorded (the reconciliation sweep's runs, sweep.ingest). The "
        "watermark stays; the commit has txn ids of its own, so a file is never ingested twice.",
    )
    rewrite: bool = Field(
        default=False,
        description="Replace the rows of ONE committed file that was rewritten in place (its size "
        "or modification time/ETag differs from its commit's): its old rows are removed and its "
        "new rows added in ONE commit (on_rewrite: replace; the sensor sets it). A file whose "
        "content is the one last committed is left alone, so a retry never replaces twice.",
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
        key=asset_key(pipeline),
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
            late=config.late,
            rewrite=config.rewrite,
        )
        now = clock()
        plan = plan_batch(request, partition_of, now=now)
        context.log.info(
            f"{pipeline.name} {request.partition_keys[0]}..{request.partition_keys[-1]}: "
            f"{len(plan.files)} files "
            f"{'rewritten' if request.rewrite else 'below (late)' if request.late else 'above'}"
            " the watermark, "
            f"{len(plan.already_committed)} already "
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
