"""One partitioned ingestion asset per pipeline, and the job its sensor targets.

The asset's body plans, stages and commits its batch (data and progress in ONE Delta commit,
``kinds.file_path.commit.commit_batch``, or ``kinds.file_path.rewrite.commit_rewrite_batch`` for a
file rewritten in place), as every kind commits in its asset body; it returns the run's metadata
(:class:`~dagster.MaterializeResult`) and puts each Dagster partition's own on that partition.
Its IO manager (``defs/io_manager.py``) only loads the table for downstream assets.
"""

import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from dagster import (
    AssetsDefinition,
    BackfillPolicy,
    Config,
    PartitionsDefinition,
    RetryRequested,
    TimeWindowPartitionsDefinition,
    asset,
)
from dagster._check import CheckError
from dagster._utils.warnings import BetaWarning
from pydantic import Field

from watermark_assets import names, storage
from watermark_assets.config import Pipeline
from watermark_assets.core.clock import Clock
from watermark_assets.defs.asset_body import AssetOutcome, AssetRun, run_asset
from watermark_assets.defs.jobs import IO_MANAGER_KEY
from watermark_assets.defs.keys import asset_key
from watermark_assets.delta.log import table_row_count
from watermark_assets.delta.schema_change import SchemaEvolution
from watermark_assets.exceptions import BatchOverlapError, SchemaInferredMeanwhileError
from watermark_assets.kinds.file_path.commit import BatchResult, commit_batch
from watermark_assets.kinds.file_path.metadata import batch_metadata, partition_metadata
from watermark_assets.kinds.file_path.plan import BatchRequest, plan_batch
from watermark_assets.kinds.file_path.rewrite import commit_rewrite_batch
from watermark_assets.kinds.file_path.stage import StagedBatch, stage_batch
from watermark_assets.names import PIPELINE_TAG

# BackfillPolicy is "beta" in dagster 1.13; the warning would repeat on every code-location load.
warnings.filterwarnings("ignore", message=".*backfill_policy.*", category=BetaWarning)

BATCH_TAG = names.BATCH_TAG
#: on the runs of the late mode (files below their partition's watermark, sweep.ingest)
LATE_TAG = names.LATE_TAG
GROUP_NAME = "watermark_ingestion"


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
    """The pipeline's ingestion asset: it plans, stages and commits (module docstring)."""
    per_run = pipeline.backfill.max_partitions_per_run
    policy = BackfillPolicy.single_run() if per_run is None else BackfillPolicy.multi_run(per_run)
    source = pipeline.file_source
    key_of = _key_of(partitions_def)

    decorator = asset(
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

    def file_run(run: AssetRun) -> AssetOutcome:
        config: IngestRunConfig = run.config
        request = BatchRequest(
            pipeline=pipeline,
            selection=run.partitions,
            run_id=run.run_id,
            files=tuple(config.files) if config.files else None,
            clock=clock,
            late=config.late,
            rewrite=config.rewrite,
        )
        now = clock()
        plan = plan_batch(request, partition_of, now=now)
        run.info(
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
            run.warning(
                f"{len(plan.unreadable)} files Spark cannot read by their exact path are held "
                f"back with the later files of their landing partitions (first {first}): rename "
                "them without ':' (see the sensor's skip reason)"
            )
        needs_spark = plan.files and source.needs_spark
        # the session on demand: the source reads what needs no Spark while it starts
        staged = stage_batch(plan, (lambda: run.spark) if needs_spark else None, now=now)
        return commit_staged(run, staged, key_of)

    return run_asset(decorator, file_run, config_type=IngestRunConfig)


def newest_file_lag(result: BatchResult) -> float | None:
    """Seconds between the newest ingested file's modification time and now."""
    plan = result.staged.plan
    if not plan.files:
        return None
    fs, path = storage.filesystem(storage.join(plan.request.pipeline.source.uri, plan.files[-1]))
    try:
        modified: datetime = fs.modified(path)
    except (FileNotFoundError, NotImplementedError):
        return None
    now = plan.request.clock()  # the definitions' clock, as for the commit
    return max(0.0, now.timestamp() - modified.timestamp())


def _key_of(partitions_def: PartitionsDefinition[Any]) -> Callable[[datetime], str | None]:
    """A landing partition's time -> the Dagster partition key holding it."""
    if not isinstance(partitions_def, TimeWindowPartitionsDefinition):
        return lambda _when: None

    def key_of(when: datetime) -> str | None:
        try:
            return partitions_def.get_partition_key_for_timestamp(when.timestamp())
        except (ValueError, CheckError):
            return None

    return key_of


#: Re-plans of a run whose files other runs partly committed in the meantime (each one drops them).
OVERLAP_RETRIES = 3


def commit_staged(
    run: AssetRun,
    staged: StagedBatch,
    key_of: Callable[[datetime], str | None],
) -> AssetOutcome:
    """Commit the staged batch to Delta (data, one txn per Dagster partition and the watermark
    advance in ONE commit; the checkpoint after it), then its metadata: the run's, returned,
    and each Dagster partition's own on that partition (``key_of``: a landing partition's time
    -> its Dagster partition). A batch whose files other runs partly committed meanwhile, or
    read with an inferred schema another run's first commit stored meanwhile, is retried (the
    run plans again)."""
    try:
        commit = commit_rewrite_batch if staged.plan.request.rewrite else commit_batch
        # schema.mode: may the commit add the files' new columns / widen types (one commit)
        mode = staged.plan.request.pipeline.schema_policy.mode.value
        evolution = SchemaEvolution.for_mode(mode)
        result = commit(
            staged,
            now=staged.plan.request.clock(),
            add_columns=evolution.add_columns,
            widen=evolution.widen,
        )
    except (BatchOverlapError, SchemaInferredMeanwhileError) as overlap:
        # Plan again: the new plan drops the files another run committed meanwhile, and
        # reads with the schema another run's first commit stored.
        run.warning(str(overlap))
        raise RetryRequested(max_retries=OVERLAP_RETRIES) from overlap
    uri = staged.plan.request.pipeline.table.uri
    metadata = batch_metadata(
        result, table_rows=table_row_count(uri), lag_seconds=newest_file_lag(result)
    )
    run.info(
        f"{staged.plan.request.pipeline.name}: {len(staged.plan.files)} files, "
        f"{result.rows_committed} rows committed, {staged.rows_quarantined} quarantined, "
        f"Delta version {result.outcome.version} ({result.outcome.reason})"
    )
    return AssetOutcome(metadata, uri, per_partition=partition_metadata(result, key_of))
