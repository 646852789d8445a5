"""Materialization metadata: what a person reads on the asset page, per partition.

Keys are grouped by prefix so the UI lists them together: ``watermark/*`` for where the watermark
stands and why, ``rows/*`` and ``files`` for volumes, ``delta/*`` for the commit, plus Dagster's
standard ``dagster/uri`` and ``dagster/row_count``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from dagster import MetadataValue

from watermark_assets import vocabulary as v
from watermark_assets.config import Pipeline
from watermark_assets.config.schema import SchemaMode
from watermark_assets.core.column.watermark import ColumnWatermark
from watermark_assets.core.filepath.path import name_time, prefix_components, split_path
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.defs.partition_truth import PartitionTruth, landing_watermarks
from watermark_assets.runs.column import ColumnResult, StagedColumnBatch
from watermark_assets.runs.column_replay import ReplayResult
from watermark_assets.runs.file_commit import BatchResult
from watermark_assets.runs.time import WindowRunTotals
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
        v.DELTA_VERSION: _version(outcome.version, outcome.reason),
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


#: The columns of ``delta/txns``: each Delta transaction id (app id) the commit set, its version.
TXN_COLUMNS: dict[str, str] = {"app_id": "string", "version": "int"}


def txns_table(txns: Mapping[str, int]) -> MetadataValue:
    """``delta/txns``: app id -> version as a table, one row per transaction id."""
    return v.pairs(TXN_COLUMNS, txns)


def _version(version: int | None, reason: str) -> MetadataValue:
    """``delta/version``: the commit's version, or why there was none."""
    if version is not None:
        return MetadataValue.int(version)
    return MetadataValue.text(f"no new commit: {reason}")


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


def _column_watermark_entries(label: str, watermark: ColumnWatermark) -> dict[str, Any]:
    """``label`` readable (:func:`column_watermark_text`), ``label_values`` (column -> value,
    plain JSON) and ``label_time`` when the leading column is an aware datetime."""
    entries: dict[str, Any] = {
        label: MetadataValue.text(v.column_watermark_text(watermark)),
        f"{label}_values": MetadataValue.json(
            {} if watermark.is_empty else v.plain(watermark.as_dict())
        ),
    }
    leading = None if watermark.is_empty else watermark.values[0]
    if isinstance(leading, datetime) and leading.tzinfo is not None:
        entries[f"{label}_time"] = v.timestamp(leading)
    return entries


def _schema_policy_entries(staged: StagedFiles, mode: SchemaMode) -> dict[str, Any]:
    """What ``schema.mode`` ignore or rescue did to a file batch (docs/metadata.md)."""
    values = staged.values_nulled if mode is SchemaMode.IGNORE else staged.values_rescued
    return schema_mode_entries(mode, staged.columns_ignored or (), values, staged.rows_rescued)


#: The columns of ``schema/values_nulled`` and ``schema/values_rescued``: per declared column,
#: how many of its values did not fit its type.
VALUES_PER_COLUMN_COLUMNS: dict[str, str] = {"column": "string", "values": "int"}


def _values_per_column(values: Mapping[str, int]) -> MetadataValue:
    return v.pairs(VALUES_PER_COLUMN_COLUMNS, values)


def schema_mode_entries(
    mode: SchemaMode, ignored: Sequence[str], values: Mapping[str, int], rows_rescued: int
) -> dict[str, Any]:
    """What ``schema.mode`` ignore (``ignored`` columns, ``values`` nulled per column) or rescue
    (``values`` rescued per column, ``rows_rescued``) did to a read (docs/metadata.md)."""
    if mode is SchemaMode.IGNORE:
        return {
            v.SCHEMA_IGNORED_COLUMNS: MetadataValue.json(list(ignored)),
            v.SCHEMA_VALUES_NULLED: _values_per_column(values),
        }
    if mode is SchemaMode.RESCUE:
        return {
            v.SCHEMA_VALUES_RESCUED: _values_per_column(values),
            v.SCHEMA_ROWS_RESCUED: MetadataValue.int(rows_rescued),
        }
    return {}


def staged_reads_metadata(staged: Sequence[StagedColumnBatch]) -> dict[str, Any]:
    """What the reads of a column source (one, or a window's, unit's or chunk's each) could not
    take as rows: ``rows/quarantined`` (malformed CSV/JSON records put in ``quarantine/table``
    by these runs), ``source/columns_ignored`` (columns the source's files hold that the rows
    leave out: a Parquet footer, a CSV header, the keys of a JSON file's first records); and
    what they cleaned first: ``cleanup/orphans_removed`` (crash leftovers under the table and
    its quarantine, as the file pipelines count theirs)."""
    metadata: dict[str, Any] = {
        v.ROWS_QUARANTINED: MetadataValue.int(sum(s.rows_quarantined for s in staged)),
        v.CLEANUP_ORPHANS_REMOVED: MetadataValue.int(sum(len(s.leftovers_removed) for s in staged)),
    }
    quarantines = [s for s in staged if s.quarantines]
    if quarantines:
        table = quarantines[0].plan.request.pipeline.table.quarantine
        metadata[v.QUARANTINE_TABLE] = MetadataValue.path(table)
    listed = [s.columns_ignored for s in staged if s.columns_ignored is not None]
    if listed:  # a source that can list its files' columns
        ignored = list(dict.fromkeys(c for columns in listed for c in columns))
        metadata[v.SOURCE_COLUMNS_IGNORED] = MetadataValue.json(ignored)
    if staged:  # schema.mode ignore / rescue: what the reads left out, nulled or rescued
        values: Counter[str] = Counter()
        for read in staged:
            values.update(read.schema_values)
        left = [s.schema_read.ignored for s in staged if s.schema_read is not None]
        metadata |= schema_mode_entries(
            staged[0].plan.request.pipeline.schema_policy.mode,
            list(dict.fromkeys(c for columns in left for c in columns)),
            dict(values),
            sum(s.rows_rescued for s in staged),
        )
    return metadata


def column_metadata(result: ColumnResult, *, table_rows: int | None) -> dict[str, Any]:
    """What a column pipeline's run read and committed, and where its watermark stands."""
    staged = result.staged
    plan = staged.plan
    pipeline = plan.request.pipeline
    outcome = result.outcome
    window = result.window
    metadata: dict[str, Any] = {
        **_column_watermark_entries(v.WATERMARK_BEFORE, plan.watermark_before),
        **_column_watermark_entries(v.WATERMARK_AFTER, result.watermark_after),
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
        v.DELTA_VERSION: _version(outcome.version, outcome.reason),
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


def null_watermark_rows(count: int | None) -> MetadataValue:
    """``rows/null_watermark``: the rows whose watermark column is NULL, or ``not counted``."""
    return MetadataValue.int(count) if count is not None else MetadataValue.text("not counted")


def replay_metadata(result: ReplayResult, *, table_rows: int | None) -> dict[str, Any]:
    """What a replay (a run of column-pipeline partitions) did: one line per chunk, the rows,
    the commits (the checks read ``delta/versions``) and the production watermark around it."""
    results = result.results
    metadata: dict[str, Any] = {
        v.REPLAY_CHUNKS: v.lines(c.line() for c in result.chunks),
        v.REPLAY_SKIPPED: MetadataValue.json(v.plain(result.skipped)),
        **_column_watermark_entries(v.WATERMARK_BEFORE, result.production_before),
        **_column_watermark_entries(v.WATERMARK_AFTER, result.production_after),
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


def window_run_totals(result: WindowRunTotals) -> dict[str, Any]:
    """A time or time x unit run's totals over its windows or cells, and its commits."""
    return {
        v.ROWS_READ: MetadataValue.int(result.rows_read),
        v.ROWS_COMMITTED: MetadataValue.int(result.rows_committed),
        v.ROWS_REMOVED: MetadataValue.int(result.rows_removed),
        v.ROWS_MOVED: MetadataValue.int(result.rows_moved),
        v.DELTA_VERSIONS: MetadataValue.json(result.versions),
    }
