"""Materialization metadata: what a person reads on the asset page, per partition.

Keys are grouped by prefix so the UI lists them together: ``watermark/*`` for where the watermark
stands and why, ``rows/*`` and ``files`` for volumes, ``delta/*`` for the commit, plus Dagster's
standard ``dagster/uri`` and ``dagster/row_count``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from dagster import MetadataValue

from watermark_assets.config import Pipeline
from watermark_assets.core.column.watermark import ColumnWatermark
from watermark_assets.core.filepath.path import name_time, prefix_components, split_path
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.defs.partition_truth import PartitionTruth
from watermark_assets.runs.column import ColumnResult, StagedColumnBatch
from watermark_assets.runs.column_replay import ReplayResult
from watermark_assets.runs.file_commit import BatchResult
from watermark_assets.state.load import PipelineState


def _text(value: str | None) -> MetadataValue:
    return MetadataValue.text(value if value is not None else "(none: no file processed yet)")


def _time_entries(label: str, path: str | None) -> dict[str, Any]:
    """``label_time``: the time the watermark's file name encodes, when it encodes one."""
    when = name_time(split_path(path)[1]) if path else None
    return {} if when is None else {f"{label}_time": MetadataValue.timestamp(when)}


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
                numbers={"partition/files_committed": files},
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
                numbers={"partition/files_committed": 0},
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
        "watermark/state": MetadataValue.text(after.state.value),
        "watermark/before": _text(before.value),
        "watermark/after": _text(after.value),
        **_time_entries("watermark/before", before.value),
        **_time_entries("watermark/after", after.value),
        "files": MetadataValue.int(len(staged.plan.files)),
        "files/already_committed": MetadataValue.int(len(staged.plan.already_committed)),
        "files/added": MetadataValue.int(len(staged.plan.added)),
        "rows/read": MetadataValue.int(staged.rows_read),
        "rows/quarantined": MetadataValue.int(staged.rows_quarantined),
        "files/quarantined": MetadataValue.int(staged.files_quarantined),
        "cleanup/orphans_removed": MetadataValue.int(len(staged.leftovers_removed)),
        "rows/committed": MetadataValue.int(result.rows_committed),
        "delta/version": MetadataValue.int(outcome.version)
        if outcome.version is not None
        else MetadataValue.text(f"no new commit: {outcome.reason}"),
        "delta/table_version": MetadataValue.int(result.state_after.delta_version or 0),
        "delta/txns": MetadataValue.json({t.app_id: t.version for t in result.txns}),
        "checkpoint/written": MetadataValue.bool(result.checkpoint_written),
        "dagster/uri": MetadataValue.path(staged.plan.request.pipeline.table.uri),
        "quarantine/table": MetadataValue.path(staged.plan.request.pipeline.table.quarantine),
    }
    if staged.columns_ignored is not None:  # a source that names its files' columns
        metadata["source/columns_ignored"] = MetadataValue.json(list(staged.columns_ignored))
    if lag_seconds is not None:
        metadata["lag_seconds"] = MetadataValue.float(round(lag_seconds, 3))
    if table_rows is not None:
        metadata["dagster/row_count"] = MetadataValue.int(table_rows)
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
            "partition/files": MetadataValue.int(len(files)),
            "partition/rows_read": MetadataValue.int(int(counts.get("rows_read", 0))),
            "partition/rows_quarantined": MetadataValue.int(int(counts.get("rows_quarantined", 0))),
            "partition/files_quarantined": MetadataValue.int(
                int(counts.get("files_quarantined", 0))
            ),
            "partition/first_file": MetadataValue.text(files[0] if files else none),
            "partition/last_file": MetadataValue.text(files[-1] if files else none),
            "watermark/partitions_before": MetadataValue.json(before[key]),
            "watermark/partitions_after": MetadataValue.json(after[key]),
            # every commit of the partition is in the log; their sum is the partition's rows
            "dagster/partition_row_count": MetadataValue.int(
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


def _column_watermark_entries(label: str, watermark: ColumnWatermark) -> dict[str, Any]:
    """``label`` readable (``updated_at=2026-04-03T09:15:00+00:00, id=42``), ``label_json`` (the
    stored JSON with its sentinels) and ``label_time`` when the leading column is a datetime."""
    entries: dict[str, Any] = {
        label: MetadataValue.text(str(watermark)),
        f"{label}_json": MetadataValue.json(json.loads(watermark.to_json()) or {}),
    }
    leading = None if watermark.is_empty else watermark.values[0]
    if isinstance(leading, datetime) and leading.tzinfo is not None:
        entries[f"{label}_time"] = MetadataValue.timestamp(leading)
    return entries


def staged_reads_metadata(staged: Sequence[StagedColumnBatch]) -> dict[str, Any]:
    """What the reads of a column source (one, or a window's, unit's or chunk's each) could not
    take as rows: ``rows/quarantined`` (malformed CSV/JSON records put in ``quarantine/table``
    by these runs), ``source/columns_ignored`` (columns the source's files hold that the rows
    leave out: a Parquet footer, a CSV header, the keys of a JSON file's first records); and
    what they cleaned first: ``cleanup/orphans_removed`` (crash leftovers under the table and
    its quarantine, as the file pipelines count theirs)."""
    metadata: dict[str, Any] = {
        "rows/quarantined": MetadataValue.int(sum(s.rows_quarantined for s in staged)),
        "cleanup/orphans_removed": MetadataValue.int(sum(len(s.leftovers_removed) for s in staged)),
    }
    quarantines = [s for s in staged if s.quarantines]
    if quarantines:
        table = quarantines[0].plan.request.pipeline.table.quarantine
        metadata["quarantine/table"] = MetadataValue.path(table)
    listed = [s.columns_ignored for s in staged if s.columns_ignored is not None]
    if listed:  # a source that can list its files' columns
        ignored = list(dict.fromkeys(c for columns in listed for c in columns))
        metadata["source/columns_ignored"] = MetadataValue.json(ignored)
    return metadata


def column_metadata(result: ColumnResult, *, table_rows: int | None) -> dict[str, Any]:
    """What a column pipeline's run read and committed, and where its watermark stands."""
    staged = result.staged
    plan = staged.plan
    pipeline = plan.request.pipeline
    outcome = result.outcome
    window = result.window
    metadata: dict[str, Any] = {
        **_column_watermark_entries("watermark/before", plan.watermark_before),
        **_column_watermark_entries("watermark/after", result.watermark_after),
        "watermark/columns": MetadataValue.text(", ".join(pipeline.watermark.columns)),
        "watermark/operator": MetadataValue.text(plan.operator.value),
        "watermark/read_from": MetadataValue.text(str(plan.bound.watermark)),
        "watermark/provider": MetadataValue.text(plan.provider),
        "watermark/repaired_from_log": MetadataValue.bool(plan.repaired_from_log),
        "read/source": MetadataValue.text(f"{pipeline.source.type} {pipeline.source.location}"),
        "read/predicate": MetadataValue.text(plan.predicate_text),
        "read/pushed_down": MetadataValue.text(staged.pushed_down),
        "read/details": MetadataValue.json({k: str(v) for k, v in staged.details.items()}),
        "rows/read": MetadataValue.int(staged.rows_read),
        "rows/committed": MetadataValue.int(result.rows_committed),
        "rows/removed": MetadataValue.int(result.rows_removed),
        "rows/boundary_reread": MetadataValue.int(staged.rows.reread),
        "rows/null_watermark": (
            MetadataValue.int(staged.null_watermark_rows)
            if staged.null_watermark_rows is not None
            else MetadataValue.text("not counted")
        ),
        "watermark/null_watermark": MetadataValue.text(pipeline.watermark.null_watermark),
        "replace/window": MetadataValue.text(
            str(window) if window is not None else "(none: append)"
        ),
        "delta/version": MetadataValue.int(outcome.version)
        if outcome.version is not None
        else MetadataValue.text(f"no new commit: {outcome.reason}"),
        "delta/txn": MetadataValue.json({plan.txn.app_id: plan.txn.version}),
        "delta/commit_attempts": MetadataValue.int(result.attempts),
        "dagster/uri": MetadataValue.path(pipeline.table.uri),
    }
    metadata |= staged_reads_metadata([staged])
    if result.merge_keys:
        metadata |= {
            "merge/keys": MetadataValue.text(", ".join(result.merge_keys)),
            "rows/updated": MetadataValue.int(result.rows_updated),
            "rows/inserted": MetadataValue.int(result.rows_inserted),
            "rows/deduplicated": MetadataValue.int(staged.rows.duplicates),
        }
    if table_rows is not None:
        metadata["dagster/row_count"] = MetadataValue.int(table_rows)
    return metadata


def replay_metadata(result: ReplayResult, *, table_rows: int | None) -> dict[str, Any]:
    """What a replay (a run of column-pipeline partitions) did: one line per chunk, the rows,
    the commits (the checks read ``delta/versions``) and the production watermark around it."""
    results = result.results
    metadata: dict[str, Any] = {
        "replay/chunks": MetadataValue.md("\n".join(f"- {c.line()}" for c in result.chunks)),
        "replay/skipped": MetadataValue.json(result.skipped),
        **_column_watermark_entries("watermark/before", result.production_before),
        **_column_watermark_entries("watermark/after", result.production_after),
        "rows/read": MetadataValue.int(sum(r.staged.rows_read for r in results)),
        "rows/committed": MetadataValue.int(sum(r.rows_committed for r in results)),
        "rows/removed": MetadataValue.int(sum(r.rows_removed for r in results)),
        "delta/versions": MetadataValue.json(result.versions),
        "dagster/uri": MetadataValue.path(result.target_table),
    }
    metadata |= staged_reads_metadata([r.staged for r in results])
    if results:
        metadata["read/predicate"] = MetadataValue.text(results[0].staged.plan.predicate_text)
    if table_rows is not None:
        metadata["dagster/row_count"] = MetadataValue.int(table_rows)
    return metadata
