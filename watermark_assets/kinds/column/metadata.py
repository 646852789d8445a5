"""A column pipeline's materialization metadata: a run above the watermark, a replay (the keys:
``vocabulary.py``; what every kind shares: ``defs/metadata.py``)."""

from __future__ import annotations

from typing import Any

from dagster import MetadataValue

from watermark_assets import vocabulary as v
from watermark_assets.defs.metadata import (
    column_watermark_entries,
    null_watermark_rows,
    staged_reads_metadata,
    txns_table,
    version_value,
)
from watermark_assets.kinds.column.replay import ReplayResult
from watermark_assets.runs.column import ColumnResult


def column_metadata(result: ColumnResult, *, table_rows: int | None) -> dict[str, Any]:
    """What a column pipeline's run read and committed, and where its watermark stands."""
    staged = result.staged
    plan = staged.plan
    pipeline = plan.request.pipeline
    outcome = result.outcome
    window = result.window
    metadata: dict[str, Any] = {
        **column_watermark_entries(v.WATERMARK_BEFORE, plan.watermark_before),
        **column_watermark_entries(v.WATERMARK_AFTER, result.watermark_after),
        v.WATERMARK_COLUMNS: MetadataValue.text(", ".join(pipeline.columns)),
        v.WATERMARK_OPERATOR: MetadataValue.text(plan.operator.value),
        v.WATERMARK_READ_FROM: MetadataValue.text(v.column_watermark_text(plan.bound.watermark)),
        v.WATERMARK_PROVIDER: MetadataValue.text(plan.provider),
        v.WATERMARK_REPAIRED_FROM_LOG: MetadataValue.bool(plan.repaired_from_log),
        v.READ_SOURCE: MetadataValue.text(f"{pipeline.source.type} {pipeline.source.location}"),
        v.READ_PREDICATE: MetadataValue.text(plan.predicate_text),
        v.READ_PUSHED_DOWN: MetadataValue.text(staged.pushed_down),
        v.READ_DETAILS: MetadataValue.json(v.plain(dict(staged.details))),
        v.ROWS_READ: MetadataValue.int(staged.rows_read),
        v.ROWS_COMMITTED: MetadataValue.int(result.rows_committed),
        v.ROWS_REMOVED: MetadataValue.int(result.rows_removed),
        v.ROWS_BOUNDARY_REREAD: MetadataValue.int(staged.rows.reread),
        v.ROWS_NULL_WATERMARK: null_watermark_rows(staged.null_watermark_rows),
        v.WATERMARK_NULL_WATERMARK: MetadataValue.text(pipeline.null_watermark),
        v.REPLACE_WINDOW: MetadataValue.text(v.region_text(window, none="(none: append)")),
        v.DELTA_VERSION: version_value(outcome.version, outcome.reason),
        v.DELTA_TXNS: txns_table({plan.txn.app_id: plan.txn.version}),
        v.DELTA_COMMIT_ATTEMPTS: MetadataValue.int(result.attempts),
        v.DAGSTER_URI: MetadataValue.path(pipeline.table.uri),
    }
    metadata |= staged_reads_metadata([staged])
    if result.merge_keys:
        metadata |= {
            v.MERGE_KEYS: MetadataValue.text(", ".join(result.merge_keys)),
            v.ROWS_UPDATED: MetadataValue.int(result.rows_updated),
            v.ROWS_INSERTED: MetadataValue.int(result.rows_inserted),
            v.ROWS_DEDUPLICATED: MetadataValue.int(staged.rows.duplicates),
        }
    if table_rows is not None:
        metadata[v.DAGSTER_ROW_COUNT] = MetadataValue.int(table_rows)
    return metadata


def replay_metadata(result: ReplayResult, *, table_rows: int | None) -> dict[str, Any]:
    """What a replay (a run of column-pipeline partitions) did: one line per chunk, the rows,
    the commits (the checks read ``delta/versions``) and the production watermark around it."""
    results = result.results
    metadata: dict[str, Any] = {
        v.REPLAY_CHUNKS: v.lines(c.line() for c in result.chunks),
        v.REPLAY_SKIPPED: MetadataValue.json(v.plain(result.skipped)),
        **column_watermark_entries(v.WATERMARK_BEFORE, result.production_before),
        **column_watermark_entries(v.WATERMARK_AFTER, result.production_after),
        v.ROWS_READ: MetadataValue.int(sum(r.staged.rows_read for r in results)),
        v.ROWS_COMMITTED: MetadataValue.int(sum(r.rows_committed for r in results)),
        v.ROWS_REMOVED: MetadataValue.int(sum(r.rows_removed for r in results)),
        v.DELTA_VERSIONS: MetadataValue.json(result.versions),
        v.DAGSTER_URI: MetadataValue.path(result.target_table),
    }
    metadata |= staged_reads_metadata([r.staged for r in results])
    if results:
        metadata[v.READ_PREDICATE] = MetadataValue.text(results[0].staged.plan.predicate_text)
    if table_rows is not None:
        metadata[v.DAGSTER_ROW_COUNT] = MetadataValue.int(table_rows)
    return metadata
