"""The column engine's checks, shared by every kind that commits through it (column, time,
unit, time x unit): each commit's ``column_run`` record read back from the Delta log and judged
alone (the watermark never moves backwards; the rows added reconcile with the rows read)."""

import json
from typing import Any

from dagster import AssetChecksDefinition, AssetKey

from watermark_assets.config import ColumnPipelineConfig, TimePipelineConfig, UnitPipelineConfig
from watermark_assets.core.column.watermark import ColumnWatermark
from watermark_assets.defs.checks import CommitFindings, watermark_checks
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.delta.log import CommitRecord
from watermark_assets.providers.delta_metadata import watermark_record
from watermark_assets.runs.column import RUN_METADATA_KEY


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


def judge_column_commit(dataflow_id: str, commit: CommitRecord) -> CommitFindings | None:
    """A column engine's commit (``watermark_assets.column_run``): the watermark after the run
    at or above the one it planned on (``watermark_before``), the watermark the commit stores
    for ``dataflow_id`` at or above it too, and the rows added reconciled with the record.

    The watermark the run planned on is the committed one (the provider's, repaired from the
    log when behind it): at or above what any earlier commit stored, so the commit is judged
    alone, without walking the log back to the previous commit carrying a watermark (other
    writers' commits in between, or that commit cleaned up by log retention, change nothing).
    A run keeping no watermark of the pipeline (a window, a unit, a replay chunk) planned on
    the empty one."""
    text = commit.custom_metadata.get(RUN_METADATA_KEY)
    if not text:
        return None
    version = commit.version
    record = json.loads(text)
    regressions: list[str] = []
    before = ColumnWatermark.from_json(record["watermark_before"])
    after = ColumnWatermark.from_json(record["watermark_after"])
    if not after.covers(before):
        regressions.append(f"v{version}: {before} -> {after}")
    carried = watermark_record(dataflow_id, commit)
    if carried is not None:
        stored = ColumnWatermark.from_json(carried.watermark)
        if not stored.covers(before):
            regressions.append(f"v{version} stores {stored}, below the {before} its run read")
    return CommitFindings(regressions, reconcile_mismatch(version, record, commit))


def build_column_checks(
    pipeline: ColumnPipelineConfig | TimePipelineConfig | UnitPipelineConfig, asset_key: AssetKey
) -> AssetChecksDefinition:
    """Both checks of a column pipeline's asset (a time, unit or time x unit pipeline's column
    view too: their name, table and dataflow id are all the checks read), read from this run's
    commits in the Delta log (not from the run's claims)."""

    def judge(commit: CommitRecord, committer: DeltaCommitter) -> CommitFindings | None:
        return judge_column_commit(pipeline.dataflow_id, commit)

    return watermark_checks(
        pipeline.name,
        asset_key,
        pipeline.table,
        judge,
        monotone="The watermark a commit stores is at or above the one it read and the one "
        "the previous commit stored.",
        reconcile="Rows added by the commit = rows read (- rows of a merge key read twice, one "
        "kept; + rows a replace or merge kept when it rewrote a file).",
        no_commit="this run made no commit (nothing above the watermark)",
    )
