"""The IO manager that commits a StagedBatch to Delta: data and progress in ONE commit."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from dagster import (
    ConfigurableIOManager,
    InputContext,
    OutputContext,
    PartitionsDefinition,
    RetryRequested,
    TimeWindowPartitionsDefinition,
)
from dagster._check import CheckError
from deltalake import DeltaTable

from watermark_assets import storage
from watermark_assets.defs.metadata import batch_metadata, partition_metadata
from watermark_assets.defs.table_schema import with_table_schema
from watermark_assets.delta.log import table_row_count
from watermark_assets.delta.schema_change import SchemaEvolution
from watermark_assets.exceptions import BatchOverlapError, SchemaInferredMeanwhileError
from watermark_assets.runs.file_commit import BatchResult, commit_batch
from watermark_assets.runs.file_rewrite import commit_rewrite_batch
from watermark_assets.runs.file_stage import StagedBatch


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


class WatermarkDeltaIOManager(ConfigurableIOManager):
    """Commits the Parquet files an ingestion asset staged to its Delta table.

    One commit holds the add actions (with per-file statistics from the Parquet footers), one txn
    action per Dagster partition (version + 1, checked before committing so a version is never
    committed twice) and the new watermark state in the commit's custom metadata. The checkpoint
    file advances only after the commit. Loading returns the table as a ``deltalake.DeltaTable``.
    """

    def handle_output(self, context: OutputContext, obj: StagedBatch) -> None:
        try:
            commit = commit_rewrite_batch if obj.plan.request.rewrite else commit_batch
            # schema.mode: may the commit add the files' new columns / widen types (one commit)
            mode = obj.plan.request.pipeline.schema_policy.mode.value
            evolution = SchemaEvolution.for_mode(mode)
            result = commit(
                obj,
                now=obj.plan.request.clock(),
                add_columns=evolution.add_columns,
                widen=evolution.widen,
            )
        except (BatchOverlapError, SchemaInferredMeanwhileError) as overlap:
            # Plan again: the new plan drops the files another run committed meanwhile, and
            # reads with the schema another run's first commit stored.
            context.log.warning(str(overlap))
            raise RetryRequested(max_retries=OVERLAP_RETRIES) from overlap
        uri = obj.plan.request.pipeline.table.uri
        metadata = batch_metadata(
            result, table_rows=table_row_count(uri), lag_seconds=newest_file_lag(result)
        )
        context.add_output_metadata(with_table_schema(metadata, uri))
        if context.has_asset_partitions:
            key_of = _key_of(context.asset_partitions_def)
            for key, metadata in partition_metadata(result, key_of).items():
                context.step_context.add_asset_metadata(metadata, partition_key=key)
        context.log.info(
            f"{obj.plan.request.pipeline.name}: {len(obj.plan.files)} files, "
            f"{result.rows_committed} rows committed, {obj.rows_quarantined} quarantined, "
            f"Delta version {result.outcome.version} ({result.outcome.reason})"
        )

    def load_input(self, context: InputContext) -> Any:
        upstream = context.upstream_output
        metadata = upstream.definition_metadata if upstream is not None else {}
        uri = metadata.get("table_uri")
        if not uri:
            raise ValueError(f"asset {context.asset_key} has no 'table_uri' definition metadata")
        return DeltaTable(str(uri), storage_options=storage.delta_options(str(uri)))
