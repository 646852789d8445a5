"""One sensor per pipeline: files above the committed watermarks -> one RunRequest per partition.

A tick never starts Spark. It loads the state (checkpoint + Delta log), lists only the files above
the watermarks (pruned listing), groups them by Dagster partition and requests a run per partition
with the exact file list in its run config. The work per tick is bounded (``max_files_per_run``,
``max_runs_per_tick``). The cursor is a small record, never a list of processed files.

Run keys: Dagster deduplicates a run key forever, even for failed runs. The key therefore holds the
partition's committed txn version, the last file of the batch and an attempt number, the count of
earlier failed or canceled runs of the same batch: a failed batch is requested again on the next
tick, without waiting for newer files. A partition with a run in flight is not requested twice.
"""

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from dagster import (
    AssetKey,
    AssetObservation,
    DagsterRunStatus,
    DefaultSensorStatus,
    JobDefinition,
    MetadataValue,
    PartitionKeyRange,
    RunRequest,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    TimeWindowPartitionsDefinition,
    sensor,
)
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,  # what define_asset_job returns; dagster does not export it
)

from watermark_assets.config import CommitPipelineConfig, IngestPipelineConfig
from watermark_assets.core.clock import Clock
from watermark_assets.core.file_watermark import WatermarkState
from watermark_assets.core.filepath import prefix_components, split_path
from watermark_assets.defs.assets import BATCH_TAG, PIPELINE_TAG
from watermark_assets.delta import DeltaCommitter
from watermark_assets.discovery import FileGroups, discover_files
from watermark_assets.state_store import PipelineState, load_state, mark_idle, txn_app_id

Pipeline = IngestPipelineConfig | CommitPipelineConfig

IN_FLIGHT = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]
FAILED = [DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED]


@dataclass(frozen=True)
class SensorCursor:
    """What the last tick saw: the table version, how many files were pending, and the oldest
    landing prefix holding one of them (``low``): the next tick lists from there, so a partition
    left behind by a failed, capped or in-flight run is not pruned when a newer one commits;
    ``below``: how many files sat below their partition's watermark, never ingested."""

    delta_version: int | None = None
    pending_files: int = 0
    state: str = WatermarkState.INITIAL.value
    low: str | None = None
    below: int = 0

    def to_string(self) -> str:
        return json.dumps(
            {
                "v": self.delta_version,
                "pending": self.pending_files,
                "state": self.state,
                "low": self.low,
                "below": self.below,
            }
        )

    @classmethod
    def from_string(cls, text: str | None) -> "SensorCursor":
        if not text:
            return cls()
        raw = json.loads(text)
        return cls(
            raw.get("v"),
            int(raw.get("pending", 0)),
            raw.get("state", "Initial"),
            raw.get("low"),
            int(raw.get("below", 0)),
        )


def batch_key(pipeline: str, partition_key: str, committed_version: int, last_file: str) -> str:
    return f"{pipeline}|{partition_key}|v{committed_version}|{last_file}"


def build_sensor(
    pipeline: Pipeline,
    job: JobDefinition | UnresolvedAssetJobDefinition,
    asset_key: AssetKey,
    partitions_def: TimeWindowPartitionsDefinition,
    partition_of: Callable[[datetime], str | None],
    clock: Clock,
) -> SensorDefinition:
    """The pipeline's sensor, named ``{pipeline}_sensor``."""
    limits = pipeline.sensor

    @sensor(
        name=f"{pipeline.name}_sensor",
        job=job,
        minimum_interval_seconds=limits.minimum_interval_seconds,
        default_status=DefaultSensorStatus.RUNNING
        if limits.running_by_default
        else DefaultSensorStatus.STOPPED,
        description=(
            f"Polls {pipeline.source.uri} for files above the committed watermarks of "
            f"{pipeline.name} and starts one run per Dagster partition (at most "
            f"{limits.max_files_per_run} files per run, {limits.max_runs_per_tick} runs per tick)."
        ),
    )
    def watermark_sensor(context: SensorEvaluationContext) -> SensorResult:
        now = clock()
        previous = SensorCursor.from_string(context.cursor)
        state = load_state(pipeline, now=now)
        budget = limits.max_files_per_run * limits.max_runs_per_tick
        groups = discover_files(
            pipeline,
            state.watermark,
            partition_of,
            now=now,
            limit=budget,
            since=previous.low,
            committed_files=state.partition_files,
        )
        notes = _notes(groups, pipeline)
        below = dict(groups.below_watermark)
        if not groups.by_partition:
            if state.watermark.state is WatermarkState.INITIAL:
                reason = f"Initial: no files at all under {pipeline.source.uri}"
                if groups.files_seen:
                    reason = (
                        f"Initial: {groups.files_seen} files seen, none in a partition of "
                        f"{pipeline.name}"
                    )
            else:
                state = mark_idle(pipeline, state, now=now)
                tracked = len(state.watermark.partition_watermarks)
                reason = f"Idle: {tracked} partitions, no files above their watermarks"
            cursor = SensorCursor(
                state.delta_version, 0, state.watermark.state.value, below=sum(below.values())
            )
            events = _observations(asset_key, previous, cursor, state, below)
            return SensorResult(
                skip_reason=reason + notes, cursor=cursor.to_string(), asset_events=events
            )

        versions = DeltaCommitter(pipeline.table.uri).transaction_versions(
            [txn_app_id(pipeline.name, key) for key in groups.by_partition]
        )
        requests: list[RunRequest] = []
        waiting: list[str] = []
        busy = partitions_in_flight(context, asset_key, job.name, partitions_def)
        for key, files in groups.by_partition.items():
            if len(requests) >= limits.max_runs_per_tick:
                break
            if key in busy:
                waiting.append(key)
                continue
            batch = files[: limits.max_files_per_run]
            committed = versions[txn_app_id(pipeline.name, key)] or 0
            base = batch_key(pipeline.name, key, committed, batch[-1])
            attempt = len(_runs(context, {BATCH_TAG: base}, FAILED))
            requests.append(
                RunRequest(
                    run_key=f"{base}|a{attempt}",
                    partition_key=key,
                    run_config={"ops": {pipeline.name: {"config": {"files": list(batch)}}}},
                    tags={PIPELINE_TAG: pipeline.name, BATCH_TAG: base},
                )
            )
        pending = sum(len(files) for files in groups.by_partition.values())
        low = min(
            (split_path(path)[0] for files in groups.by_partition.values() for path in files),
            key=prefix_components,
        )
        cursor = SensorCursor(
            state.delta_version, pending, WatermarkState.ACTIVE.value, low, sum(below.values())
        )
        events = _observations(asset_key, previous, cursor, state, below)
        if not requests:
            reason = (
                f"Active: {pending} files above the watermark wait for the runs in flight "
                f"of partitions {waiting}"
            )
            return SensorResult(
                skip_reason=reason + notes, cursor=cursor.to_string(), asset_events=events
            )
        context.log.info(
            f"{pipeline.name}: {pending} files above the watermark in "
            f"{len(groups.by_partition)} partitions; requesting {len(requests)} runs "
            f"(listed {groups.paths_listed} paths)"
        )
        return SensorResult(run_requests=requests, cursor=cursor.to_string(), asset_events=events)

    return watermark_sensor


def partitions_in_flight(
    context: SensorEvaluationContext,
    asset_key: AssetKey,
    job_name: str,
    partitions_def: TimeWindowPartitionsDefinition,
) -> set[str]:
    """Partitions of the asset that a queued or running run already covers.

    Sensor runs, manual runs and backfills alike: a run of this job, or any run whose asset
    selection holds the asset (a UI backfill runs Dagster's implicit asset job), counts with
    its ``dagster/partition`` tag or its whole ``dagster/asset_partition_range_*`` range.
    """
    busy: set[str] = set()
    runs = context.instance.get_runs(filters=RunsFilter(statuses=IN_FLIGHT), limit=500)
    for run in runs:
        selection = run.asset_selection
        if run.job_name != job_name and (selection is None or asset_key not in selection):
            continue
        tags = run.tags
        if "dagster/partition" in tags:
            busy.add(tags["dagster/partition"])
        start = tags.get("dagster/asset_partition_range_start")
        end = tags.get("dagster/asset_partition_range_end")
        if start and end:
            busy.update(partitions_def.get_partition_keys_in_range(PartitionKeyRange(start, end)))
    return busy


def _runs(
    context: SensorEvaluationContext, tags: dict[str, str], statuses: list[DagsterRunStatus]
) -> list[object]:
    return list(
        context.instance.get_runs(filters=RunsFilter(tags=tags, statuses=statuses), limit=50)
    )


def _notes(groups: FileGroups, pipeline: Pipeline) -> str:
    """What the tick saw and will not ingest, for the skip reason."""
    out_of_range, unmatched, below = groups.out_of_range, groups.unmatched, groups.below_watermark
    notes = []
    if below:
        where = ", ".join(f"{prefix}: {count}" for prefix, count in sorted(below.items()))
        notes.append(
            f"{sum(below.values())} files landed below their partition's watermark ({where}); "
            "they stay in the landing folder: land them again with a name above the watermark"
        )
    if out_of_range:
        notes.append(
            f"{len(out_of_range)} files outside the partitions (first {out_of_range[0]!r}; "
            f"partitions start {pipeline.partitions.start})"
        )
    if unmatched:
        notes.append(
            f"{len(unmatched)} files whose directory does not match "
            f"{pipeline.source.partition_template!r} (first {unmatched[0]!r})"
        )
    return "" if not notes else " | not ingested: " + "; ".join(notes)


def _observations(
    asset_key: AssetKey,
    previous: SensorCursor,
    cursor: SensorCursor,
    state: PipelineState,
    below: Mapping[str, int],
) -> list[AssetObservation]:
    """An observation on the asset when the watermark state or the files below it change."""
    if (previous.state, previous.below) == (cursor.state, cursor.below):
        return []
    watermark = state.watermark
    return [
        AssetObservation(
            asset_key=asset_key,
            metadata={
                "watermark/state": MetadataValue.text(cursor.state),
                "watermark/value": MetadataValue.text(watermark.value or "(none)"),
                "watermark/partitions": MetadataValue.int(len(watermark.partition_watermarks)),
                "files/pending": MetadataValue.int(cursor.pending_files),
                "files/below_watermark": MetadataValue.int(cursor.below),
                "files/below_watermark_by_partition": MetadataValue.json(dict(below)),
            },
        )
    ]
