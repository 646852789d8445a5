"""A file-path pipeline's materialization metadata, per run and per partition (the keys:
``vocabulary.py``; what every kind shares: ``defs/metadata.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from dagster import MetadataValue

from watermark_assets import vocabulary as v
from watermark_assets.config import Pipeline
from watermark_assets.config.schema import SchemaMode
from watermark_assets.core.filepath.path import name_time, prefix_components, split_path
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.defs.metadata import (
    schema_mode_entries,
    txns_table,
    version_value,
)
from watermark_assets.defs.partition_truth import PartitionTruth, landing_watermarks
from watermark_assets.kinds.file_path.commit import BatchResult
from watermark_assets.sources.files import StagedFiles
from watermark_assets.state.load import PipelineState


def _text(value: str | None) -> MetadataValue:
    return MetadataValue.text(value if value is not None else "(none: no file processed yet)")


def _time_entries(label: str, path: str | None) -> dict[str, Any]:
    """``label_time``: the time the watermark's file name encodes, when it encodes one."""
    when = name_time(split_path(path)[1]) if path else None
    return {} if when is None else {f"{label}_time": v.timestamp(when)}


def landing_watermarks_by_key(
    pipeline: Pipeline,
    watermark: FileWatermark,
    keys: Sequence[str],
    key_of: Callable[[datetime], str | None],
) -> dict[str, dict[str, str]]:
    """Each Dagster partition of ``keys`` -> the watermarks of ALL its landing partitions in
    ``watermark`` (landing prefix -> last file name), whatever a run planned."""
    template = pipeline.watermark.template
    out: dict[str, dict[str, str]] = {key: {} for key in keys}
    for prefix, name in sorted(
        watermark.partition_watermarks.items(), key=lambda item: prefix_components(item[0])
    ):
        when = template.try_parse(prefix)
        key = None if when is None else key_of(when)
        if key in out:
            out[key][prefix] = name
    return out


def file_partition_truths(
    pipeline: Pipeline,
    state: PipelineState,
    keys: Sequence[str],
    key_of: Callable[[datetime], str | None],
) -> dict[str, PartitionTruth]:
    """The whole state of each Dagster partition of a file-path pipeline, from its state store
    (checkpoint + commits): the watermarks of its landing partitions, files and rows committed."""
    landing = landing_watermarks_by_key(pipeline, state.watermark, keys, key_of)
    truths: dict[str, PartitionTruth] = {}
    for key in keys:
        marks = landing[key]
        rows = state.partition_rows.get(key)
        files = sum(state.partition_files.get(prefix, 0) for prefix in marks)
        if marks:
            prefixes = list(marks)
            first, prefix = prefixes[0], prefixes[-1]
            newest = f"{prefix}/{marks[prefix]}"
            truths[key] = PartitionTruth(
                state="ingested",
                reason=f"{files} file(s) committed from {len(marks)} landing partition(s) "
                f"({first} .. {prefix}); the next run reads only the files above each "
                f"landing partition's watermark (the newest: {newest})",
                watermark=newest,
                watermark_time=name_time(marks[prefix]) or template_time(pipeline, prefix),
                watermarks=marks,
                rows=rows,
                numbers={v.PARTITION_FILES_COMMITTED: files},
            )
        elif rows:
            truths[key] = PartitionTruth(
                state="ingested",
                reason=f"{rows} row(s) committed; its landing partitions' watermarks are no "
                "longer kept (older than the late-arrival window): a backfill restores them "
                "from the table's commits",
                watermarks={},
                rows=rows,
            )
        else:
            truths[key] = PartitionTruth(
                state="no file yet",
                reason="no file of this partition committed yet: none landed under "
                f"{pipeline.source.uri} in its landing partitions "
                f"({pipeline.watermark.partition_template!r})",
                watermarks={},
                rows=rows or 0,
                numbers={v.PARTITION_FILES_COMMITTED: 0},
            )
    return truths


def template_time(pipeline: Pipeline, prefix: str) -> datetime | None:
    """The time a landing prefix encodes (its partition template's)."""
    return pipeline.watermark.template.try_parse(prefix)


def batch_metadata(
    result: BatchResult, *, table_rows: int | None, lag_seconds: float | None
) -> dict[str, Any]:
    """Metadata shared by every partition the run materialized."""
    staged = result.staged
    before, after = staged.watermark_before, result.state_after.watermark
    outcome = result.outcome
    metadata: dict[str, Any] = {
        v.WATERMARK_STATE: MetadataValue.text(after.state.value),
        v.WATERMARK_BEFORE: _text(before.value),
        v.WATERMARK_AFTER: _text(after.value),
        **_time_entries(v.WATERMARK_BEFORE, before.value),
        **_time_entries(v.WATERMARK_AFTER, after.value),
        v.FILES: MetadataValue.int(len(staged.plan.files)),
        v.FILES_ALREADY_COMMITTED: MetadataValue.int(len(staged.plan.already_committed)),
        v.FILES_ADDED: MetadataValue.int(len(staged.plan.added)),
        v.ROWS_READ: MetadataValue.int(staged.rows_read),
        v.ROWS_QUARANTINED: MetadataValue.int(staged.rows_quarantined),
        v.FILES_QUARANTINED: MetadataValue.int(staged.files_quarantined),
        v.CLEANUP_ORPHANS_REMOVED: MetadataValue.int(len(staged.leftovers_removed)),
        v.ROWS_COMMITTED: MetadataValue.int(result.rows_committed),
        v.DELTA_VERSION: version_value(outcome.version, outcome.reason),
        v.DELTA_TABLE_VERSION: MetadataValue.int(result.state_after.delta_version or 0),
        v.DELTA_TXNS: txns_table({t.app_id: t.version for t in result.txns}),
        v.CHECKPOINT_WRITTEN: MetadataValue.bool(result.checkpoint_written),
        v.DAGSTER_URI: MetadataValue.path(staged.plan.request.pipeline.table.uri),
        v.QUARANTINE_TABLE: MetadataValue.path(staged.plan.request.pipeline.table.quarantine),
    }
    if staged.columns_ignored is not None:  # a source that names its files' columns
        metadata[v.SOURCE_COLUMNS_IGNORED] = MetadataValue.json(list(staged.columns_ignored))
    metadata |= _schema_policy_entries(staged, staged.plan.request.pipeline.schema_policy.mode)
    if staged.inferred is not None:
        metadata[v.SCHEMA_INFERRED] = MetadataValue.json(staged.inferred.to_json())
    if lag_seconds is not None:
        metadata |= v.duration_entries(v.LAG, lag_seconds)
    if table_rows is not None:
        metadata[v.DAGSTER_ROW_COUNT] = MetadataValue.int(table_rows)
    return metadata


def partition_metadata(
    result: BatchResult, key_of: Callable[[datetime], str | None]
) -> Mapping[str, dict[str, Any]]:
    """Metadata of each Dagster partition of the run: its whole state (all its landing
    partitions' watermarks, from the state store, :func:`file_partition_truths`), and this
    run's own files and rows. ``key_of``: a landing partition's time -> its Dagster key."""
    staged = result.staged
    plan = staged.plan
    pipeline = plan.request.pipeline
    keys = plan.request.partition_keys
    state_after = result.state_after
    before = landing_watermarks_by_key(pipeline, staged.watermark_before, keys, key_of)
    after = landing_watermarks_by_key(pipeline, state_after.watermark, keys, key_of)
    truths = file_partition_truths(pipeline, state_after, keys, key_of)
    out: dict[str, dict[str, Any]] = {}
    for key in keys:
        files = [p for p, k in plan.file_partitions.items() if k == key]
        counts = staged.per_partition.get(key, {})
        none = "(none: no file processed yet)" if not after[key] else "(none: no new file)"
        out[key] = {
            **truths[key].metadata(),
            v.PARTITION_FILES: MetadataValue.int(len(files)),
            v.PARTITION_ROWS_READ: MetadataValue.int(int(counts.get("rows_read", 0))),
            v.PARTITION_ROWS_QUARANTINED: MetadataValue.int(int(counts.get("rows_quarantined", 0))),
            v.PARTITION_FILES_QUARANTINED: MetadataValue.int(
                int(counts.get("files_quarantined", 0))
            ),
            v.PARTITION_FIRST_FILE: MetadataValue.text(files[0] if files else none),
            v.PARTITION_LAST_FILE: MetadataValue.text(files[-1] if files else none),
            v.WATERMARK_PARTITIONS_BEFORE: landing_watermarks(before[key]),
            v.WATERMARK_PARTITIONS_AFTER: landing_watermarks(after[key]),
            # every commit of the partition is in the log; their sum is the partition's rows
            v.DAGSTER_PARTITION_ROW_COUNT: MetadataValue.int(
                state_after.partition_rows.get(key, 0)
            ),
        }
    return out


def summary_line(result: BatchResult) -> str:
    staged = result.staged
    return json.dumps(
        {
            "files": len(staged.plan.files),
            "rows_read": staged.rows_read,
            "rows_quarantined": staged.rows_quarantined,
            "files_quarantined": staged.files_quarantined,
            "rows_committed": result.rows_committed,
            "delta_version": result.outcome.version,
        }
    )


def _schema_policy_entries(staged: StagedFiles, mode: SchemaMode) -> dict[str, Any]:
    """What ``schema.mode`` ignore or rescue did to a file batch (docs/metadata.md)."""
    values = staged.values_nulled if mode is SchemaMode.IGNORE else staged.values_rescued
    return schema_mode_entries(mode, staged.columns_ignored or (), values, staged.rows_rescued)
