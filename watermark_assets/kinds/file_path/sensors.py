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

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetKey,
    AssetMaterialization,
    AssetObservation,
    JobDefinition,
    MetadataValue,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    TimeWindowPartitionsDefinition,
    sensor,
)
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,  # what define_asset_job returns; dagster does not export it
)

from watermark_assets import names, storage
from watermark_assets import vocabulary as vocab
from watermark_assets.config import Pipeline
from watermark_assets.core.clock import Clock
from watermark_assets.core.filepath.listing import ListingPlan
from watermark_assets.core.filepath.path import prefix_components, split_path
from watermark_assets.core.filepath.watermark import FileWatermark, WatermarkState
from watermark_assets.defs.backlog import file_backlog
from watermark_assets.defs.backlog_check import BacklogVerdict, file_backlog_verdict
from watermark_assets.defs.jobs import failed_attempts_of, partitions_in_flight, sensor_status
from watermark_assets.defs.keys import node_name
from watermark_assets.defs.partition_truth import observations_since
from watermark_assets.defs.run_tags import pipeline_partition_tags
from watermark_assets.defs.schema_notes import columns_note
from watermark_assets.delta.committer import committer_for
from watermark_assets.exceptions import LateFilesUnprovableError
from watermark_assets.kinds.file_path.assets import BATCH_TAG, LATE_TAG, files_run_config
from watermark_assets.kinds.file_path.commit import complete_quarantine
from watermark_assets.kinds.file_path.partition_notes import partition_notes, partition_observations
from watermark_assets.kinds.file_path.quiet_partitions import quiet_truths
from watermark_assets.names import PIPELINE_TAG
from watermark_assets.sources.file_discovery import (
    FileGroups,
    PartitionOf,
    discover_files,
    partition_key_of,
    rewritten_files,
    sweep,
)
from watermark_assets.sources.files import TableFiles
from watermark_assets.sources.late_files import find_late_files, group_by_partition
from watermark_assets.sources.schema_drift import ColumnChange, new_column_names, type_changes
from watermark_assets.spark.paths import GLOB_CHARACTERS
from watermark_assets.state.checkpoint import catch_up, mark_idle, save_checkpoint
from watermark_assets.state.commit_metadata import txn_app_id
from watermark_assets.state.horizons import listing_horizon
from watermark_assets.state.load import PipelineState, load_state


@dataclass(frozen=True, kw_only=True)
class SensorCursor:
    """What the last tick saw: the table version, how many files were pending, and the oldest
    landing prefix holding one of them (``low``): the next tick lists from there, so a partition
    left behind by a failed, capped or in-flight run is not pruned when a newer one commits;
    ``below``: how many files sat below their partition's watermark, never ingested.

    The sweep's findings are kept between sweeps: ``swept_at`` (Unix seconds), ``late`` files
    that landed after their partition's late-arrival window closed and the first of them
    (``late_first``). ``closed_through``: the last Dagster partition checked for being closed.
    """

    delta_version: int | None = None
    pending_files: int = 0
    state: str = WatermarkState.INITIAL.value
    low: str | None = None
    below: int = 0
    swept_at: int | None = None
    late: int = 0
    late_first: tuple[str, ...] = ()
    closed_through: str | None = None
    #: files Spark cannot read literally, and the first of them (held back: rename them)
    unreadable: int = 0
    unreadable_first: tuple[str, ...] = ()
    #: files whose names do not sort by time, and the first of them (held back: rename them)
    unsortable: int = 0
    unsortable_first: tuple[str, ...] = ()
    #: the first files the last sweep named below their partition's watermark, never committed
    below_first: tuple[str, ...] = ()
    #: the last sweep's count per landing prefix of those files
    below_swept: Mapping[str, int] = field(default_factory=dict)
    #: committed files rewritten in place since their commit, and the first of them
    rewritten: int = 0
    rewritten_first: tuple[str, ...] = ()
    #: the first rewritten files the last sweep found (S3: the regular listing cannot), with
    #: their signatures then, named until the next sweep unless replaced meanwhile
    rewritten_swept: Mapping[str, str] = field(default_factory=dict)
    #: columns the newest files of the last batches requested hold that their runs leave out
    #: (the new columns of :meth:`~watermark_assets.sources.files.FileSource.column_changes`)
    columns_left_out: tuple[str, ...] = ()
    #: the last verdict of ``backlog_within_limits`` (None: no backlog_limits)
    backlog_passed: bool | None = None
    #: the digest of what the partitions with nothing waiting said on their pages
    #: (:mod:`~watermark_assets.kinds.file_path.quiet_partitions`): unchanged, the tick says nothing
    quiet: str | None = None

    def to_string(self) -> str:
        return json.dumps(
            {
                "v": self.delta_version,
                "pending": self.pending_files,
                "state": self.state,
                "low": self.low,
                "below": self.below,
                "swept_at": self.swept_at,
                "late": self.late,
                "late_first": list(self.late_first),
                "closed_through": self.closed_through,
                # only when there are any: the cursor stays small (shown on the sensor's page)
                **(
                    {"unreadable": self.unreadable, "unreadable_first": list(self.unreadable_first)}
                    if self.unreadable
                    else {}
                ),
                **(
                    {"unsortable": self.unsortable, "unsortable_first": list(self.unsortable_first)}
                    if self.unsortable
                    else {}
                ),
                **({"below_first": list(self.below_first)} if self.below_first else {}),
                **({"below_swept": dict(self.below_swept)} if self.below_swept else {}),
                **(
                    {"rewritten": self.rewritten, "rewritten_first": list(self.rewritten_first)}
                    if self.rewritten
                    else {}
                ),
                **({"rewritten_swept": dict(self.rewritten_swept)} if self.rewritten_swept else {}),
                **(
                    {"columns_left_out": list(self.columns_left_out)}
                    if self.columns_left_out
                    else {}
                ),
                **({} if self.backlog_passed is None else {"backlog_passed": self.backlog_passed}),
                **({} if self.quiet is None else {"quiet": self.quiet}),
            }
        )

    @classmethod
    def from_string(cls, text: str | None) -> "SensorCursor":
        if not text:
            return cls()
        raw = json.loads(text)
        return cls(
            delta_version=raw.get("v"),
            pending_files=int(raw.get("pending", 0)),
            state=raw.get("state", "Initial"),
            low=raw.get("low"),
            below=int(raw.get("below", 0)),
            swept_at=raw.get("swept_at"),
            late=int(raw.get("late", 0)),
            late_first=tuple(raw.get("late_first", ())),
            closed_through=raw.get("closed_through"),
            unreadable=int(raw.get("unreadable", 0)),
            unreadable_first=tuple(raw.get("unreadable_first", ())),
            unsortable=int(raw.get("unsortable", 0)),
            unsortable_first=tuple(raw.get("unsortable_first", ())),
            below_first=tuple(raw.get("below_first", ())),
            below_swept={str(k): int(v) for k, v in raw.get("below_swept", {}).items()},
            rewritten=int(raw.get("rewritten", 0)),
            rewritten_first=tuple(raw.get("rewritten_first", ())),
            rewritten_swept={str(k): str(v) for k, v in raw.get("rewritten_swept", {}).items()},
            columns_left_out=tuple(raw.get("columns_left_out", ())),
            backlog_passed=raw.get("backlog_passed"),
            quiet=raw.get("quiet"),
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
        name=names.sensor_name(pipeline.name),
        job=job,
        minimum_interval_seconds=limits.minimum_interval_seconds,
        default_status=sensor_status(limits.running_by_default),
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
        complete_quarantine(pipeline, state)  # a commit's quarantine a kill left out: completed
        catch_up(pipeline, state, now=now)  # commits after the checkpoint: recorded now
        budget = limits.max_files_per_run * limits.max_runs_per_tick
        groups = discover_files(
            pipeline,
            state.watermark,
            partition_of,
            now=now,
            limit=budget,
            since=previous.low,
            committed_files=state.partition_files,
            committed_signatures=state.file_signatures,
            own_files=state.own_files,
        )
        measured = file_backlog(pipeline, groups, limit=budget)
        backlog = measured.metadata(now)
        verdict = (
            None
            if pipeline.backlog_limits is None
            else file_backlog_verdict(pipeline.backlog_limits, measured, now)
        )
        swept = _sweep_if_due(pipeline, state, previous, now, groups.table_files)
        late = _name_late_files(pipeline, state, swept, groups, previous, partition_of)
        state = _record_first_sight(pipeline, state, late.first_sight, now)
        # rewritten files: the regular listing's (fresh), the sweep's where it cannot see them
        rewritten = dict(sorted({**late.rewritten_as, **groups.rewritten_as}.items()))
        # the regular listing's counts are fresh where it sees such files (not on S3, which
        # lists from the watermark on): the sweep's fill in the rest, as of the last sweep
        below = {**late.below, **swept.below, **groups.below_watermark}
        busy = partitions_in_flight(context, asset_key, job.name, partitions_def)
        late_requests = [
            *_late_run_requests(context, pipeline, late, busy),
            *_rewrite_run_requests(context, pipeline, rewritten, partition_of, busy),
        ]
        closed, closed_through = close_empty_partitions(
            context, pipeline, asset_key, partitions_def, state, previous.closed_through, busy, now
        )
        notes = _notes(
            groups, pipeline, swept, closed, late, rewritten, initial=state.watermark.value is None
        )
        # The next tick lists from the oldest pending prefix; held-back files count, so that
        # their landing partition stays listed (and reported) until they are renamed.
        pending_paths = [
            *(path for files in groups.by_partition.values() for path in files),
            *groups.unreadable,
            *groups.unsortable,
        ]
        low = min((split_path(p)[0] for p in pending_paths), key=prefix_components, default=None)
        seen = SensorCursor(
            delta_version=state.delta_version,
            below=sum(below.values()),
            swept_at=swept.swept_at,
            late=swept.late,
            late_first=swept.late_first,
            closed_through=closed_through,
            low=low,
            unreadable=len(groups.unreadable),
            unreadable_first=tuple(sorted(groups.unreadable)[:UNREADABLE_NAMES]),
            unsortable=len(groups.unsortable),
            unsortable_first=groups.unsortable[:UNREADABLE_NAMES],
            below_first=late.first,
            below_swept=dict(late.below),
            rewritten=len(rewritten),
            rewritten_first=tuple(rewritten)[:UNREADABLE_NAMES],
            rewritten_swept=dict(list(late.rewritten_as.items())[:UNREADABLE_NAMES]),
            columns_left_out=previous.columns_left_out,  # until a tick requests runs again
            backlog_passed=None if verdict is None else verdict.passed,
        )

        def quiet_pages(*left: Iterable[str]) -> tuple[list[AssetObservation], str]:
            """The pages of the partitions with nothing waiting, but for ``left``, the busy and
            the closed ones (:func:`_quiet_partitions`)."""
            leave_out = {*busy, *_keys(closed)}.union(*left)
            return _quiet_partitions(
                context, pipeline, asset_key, partitions_def, state, now, previous, leave_out
            )

        if not groups.by_partition:
            if state.watermark.state is WatermarkState.INITIAL:
                horizon = listing_horizon(pipeline, state.watermark, now)
                where = f"since {horizon}" if horizon else "at all"
                reason = f"Initial: no files {where} under {pipeline.source.uri}"
                if groups.files_seen:
                    reason = (
                        f"Initial: {groups.files_seen} files seen, none in a partition of "
                        f"{pipeline.name}"
                    )
            else:
                state = mark_idle(pipeline, state, now=now)
                tracked = len(state.watermark.partition_watermarks)
                reason = f"Idle: {tracked} partitions, no files above their watermarks"
            notes_of = partition_notes(
                pipeline,
                groups,
                partition_of,
                requested=(),
                busy=busy,
                below=below,
                rewritten=rewritten,
            )
            quiet, said = quiet_pages(notes_of, _keys(late_requests))
            cursor = replace(seen, state=state.watermark.state.value, quiet=said)
            events: list[AssetObservation | AssetMaterialization | AssetCheckEvaluation] = [
                *_observations(asset_key, previous, cursor, state, below, backlog),
                *_backlog_evaluations(asset_key, previous, cursor, verdict),
                *closed,
                *partition_observations(
                    context.instance, asset_key, pipeline, state, partition_of, notes_of
                ),
                *quiet,
            ]
            if late_requests:
                context.log.info(f"{pipeline.name}: {reason}{notes}")
                return SensorResult(
                    run_requests=late_requests, cursor=cursor.to_string(), asset_events=events
                )
            return SensorResult(
                skip_reason=reason + notes, cursor=cursor.to_string(), asset_events=events
            )

        versions = committer_for(pipeline.table).transaction_versions(
            [txn_app_id(pipeline.name, key) for key in groups.by_partition]
        )
        waiting: list[str] = []
        batches: list[_Batch] = []
        newest: list[str] = []  # the last file of each batch requested
        for key, files in groups.by_partition.items():
            if len(batches) >= limits.max_runs_per_tick:
                break
            if key in busy:
                waiting.append(key)
                continue
            batch = files[: limits.max_files_per_run]
            committed = versions[txn_app_id(pipeline.name, key)] or 0
            base = batch_key(pipeline.name, key, committed, batch[-1])
            batches.append(_Batch(base, key, files_run_config(node_name(pipeline), batch)))
            newest.append(batch[-1])
        requests = [*_batch_requests(context, pipeline, batches), *late_requests]
        pending = sum(len(files) for files in groups.by_partition.values())
        cursor = replace(seen, pending_files=pending, state=WatermarkState.ACTIVE.value)
        if newest:
            probed = newest[:COLUMN_PROBES]
            found = pipeline.file_source.column_changes(probed, groups.signatures)
            left = None if found is None else new_column_names(found)
            cursor = replace(cursor, columns_left_out=left or ())
            notes += _columns_note(found, len(probed), pipeline)
        notes_of = partition_notes(
            pipeline,
            groups,
            partition_of,
            requested={r.partition_key for r in requests if r.partition_key},
            busy=busy,
            below=below,
            rewritten=rewritten,
        )
        quiet, said = quiet_pages(notes_of, _keys(requests), groups.by_partition)
        cursor = replace(cursor, quiet=said)
        events = [
            *_observations(asset_key, previous, cursor, state, below, backlog),
            *_backlog_evaluations(asset_key, previous, cursor, verdict),
            *closed,
            *partition_observations(
                context.instance, asset_key, pipeline, state, partition_of, notes_of
            ),
            *quiet,
        ]
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
            f"(listed {groups.paths_listed} paths){notes}"
        )
        return SensorResult(run_requests=requests, cursor=cursor.to_string(), asset_events=events)

    return watermark_sensor


def _keys(events: Iterable[RunRequest | AssetMaterialization]) -> set[str]:
    return {
        str(event.partition_key if isinstance(event, RunRequest) else event.partition)
        for event in events
    }


def _quiet_partitions(
    context: SensorEvaluationContext,
    pipeline: Pipeline,
    asset_key: AssetKey,
    partitions_def: TimeWindowPartitionsDefinition,
    state: PipelineState,
    now: datetime,
    previous: SensorCursor,
    leave_out: set[str],
) -> tuple[list[AssetObservation], str]:
    """The observations of the partitions never materialized with nothing waiting, and the
    digest of what they say: none, and no read of the instance, while it is unchanged."""
    truths = quiet_truths(pipeline, partitions_def, state, now, leave_out=leave_out)
    return observations_since(
        context.instance, asset_key, truths, previous.quiet, left_to_runs=True
    )


@dataclass(frozen=True)
class _Swept:
    """The sweep's findings, fresh or carried over from the previous tick's cursor."""

    swept_at: int | None
    late: int
    late_first: tuple[str, ...]
    below: Mapping[str, int]
    window: str = ""
    complete: bool = True
    #: swept in this tick (the late files are named only then: off the hot path)
    fresh: bool = False


def _sweep_if_due(
    pipeline: Pipeline,
    state: PipelineState,
    previous: SensorCursor,
    now: datetime,
    table_files: TableFiles | None,
) -> _Swept:
    """Sweep the partitions below the listing horizon when ``sweep.interval_minutes`` passed."""
    interval = pipeline.watermark.sweep.interval_minutes * 60
    now_ts = int(now.timestamp())
    due = interval > 0 and (previous.swept_at is None or now_ts - previous.swept_at >= interval)
    if not due:
        return _Swept(previous.swept_at, previous.late, previous.late_first, {})
    found = sweep(
        pipeline, state.watermark, state.partition_files, now=now, table_files=table_files
    )
    if found is None:
        return _Swept(now_ts, 0, (), {}, fresh=True)
    low, high = found.window
    return _Swept(
        now_ts,
        found.late_count,
        found.late,
        found.below_watermark,
        f"{low or 'the first partition'} up to {high}",
        found.complete,
        fresh=True,
    )


@dataclass(frozen=True)
class _LateFiles:
    """Files the sweep named at or below their partition's watermark, never committed."""

    first: tuple[str, ...] = ()
    #: landing prefix -> how many (counted where the regular listing cannot: S3 lists from the
    #: watermark on)
    below: Mapping[str, int] = field(default_factory=dict)
    by_partition: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: why they could not be named (the Delta log was cleaned up), else None
    error: str | None = None
    #: committed files the sweep's full listing found rewritten in place -> their signature now
    rewritten_as: Mapping[str, str] = field(default_factory=dict)
    #: committed files the state had no signature of (committed before they were recorded, or
    #: after repair-state), proved committed by the lineage -> their signature as first seen
    first_sight: Mapping[str, str] = field(default_factory=dict)


def _name_late_files(
    pipeline: Pipeline,
    state: PipelineState,
    swept: _Swept,
    groups: FileGroups,
    previous: SensorCursor,
    partition_of: PartitionOf,
) -> _LateFiles:
    """When the sweep ran in this tick, name the files below the watermarks that no commit
    recorded: each landing partition counted holding some (by the regular listing or the
    sweep's), and each the listing could not count (S3 lists from the watermark on), is listed
    in full once; the Delta log is read only when a partition holds more such files than it has
    committed. Else the last sweep's names.

    The landing partitions where the state records fewer committed files than it counts
    (files committed before their signatures were recorded, or after ``repair-state``) are
    listed in full too: the committed ones among their files get a signature (first sight)."""
    if not swept.fresh:
        still = {  # unless a rewrite commit recorded that content since
            path: signature
            for path, signature in previous.rewritten_swept.items()
            if state.file_signatures.get(path) not in (None, signature)
        }
        return _LateFiles(previous.below_first, previous.below_swept, rewritten_as=still)
    recorded = Counter(split_path(path)[0] for path in state.file_signatures)
    unrecorded = {p for p, count in state.partition_files.items() if recorded[p] < count}
    prefixes = {*swept.below, *groups.below_watermark, *groups.uncounted, *unrecorded}
    listed: dict[str, str] = {}
    seen: dict[str, str] = {}
    try:
        found = find_late_files(
            pipeline,
            state.watermark,
            prefixes,
            state.partition_files,
            table_files=groups.table_files,
            signatures=listed,
            recorded=state.file_signatures,
            first_sight=seen,
        )
    except LateFilesUnprovableError as exc:
        return _LateFiles(
            error=str(exc), rewritten_as=_rewritten_as(listed, state), first_sight=seen
        )
    late_names = sorted(path for paths in found.values() for path in paths)
    grouped = group_by_partition(found, lambda path: partition_key_of(pipeline, path, partition_of))
    counts = {prefix: len(paths) for prefix, paths in found.items()}
    return _LateFiles(
        tuple(late_names[:UNREADABLE_NAMES]),
        counts,
        grouped,
        rewritten_as=_rewritten_as(listed, state),
        first_sight=seen,
    )


def _record_first_sight(
    pipeline: Pipeline, state: PipelineState, seen: Mapping[str, str], now: datetime
) -> PipelineState:
    """``state`` with the signatures of committed files first seen by this tick's sweep, written
    to the checkpoint (never over a newer one: a run's checkpoint that wins a race leaves them
    unrecorded, and the next sweep records them)."""
    if not seen:
        return state
    signed = replace(state, file_signatures={**state.file_signatures, **seen})
    save_checkpoint(pipeline, signed, now=now, force=True)
    return signed


def _rewritten_as(listed: Mapping[str, str], state: PipelineState) -> dict[str, str]:
    """The listed committed files whose signature differs from their commit's -> it now."""
    return {path: listed[path] for path in rewritten_files(listed, state.file_signatures)}


def _late_run_requests(
    context: SensorEvaluationContext, pipeline: Pipeline, late: _LateFiles, busy: set[str]
) -> list[RunRequest]:
    """With ``sweep.ingest``, one late run per Dagster partition of the named files (a partition
    with a run in flight waits for the next sweep)."""
    if not pipeline.watermark.sweep.ingest:
        return []
    batches = []
    for key, files in late.by_partition.items():
        if key in busy:
            continue
        named = hashlib.sha256("\n".join(files).encode("utf-8")).hexdigest()[:16]
        config = files_run_config(node_name(pipeline), files, late=True)
        batches.append(_Batch(f"late|{pipeline.name}|{key}|{named}", key, config, late=True))
    return _batch_requests(context, pipeline, batches)


def _rewrite_run_requests(
    context: SensorEvaluationContext,
    pipeline: Pipeline,
    rewritten: Mapping[str, str],
    partition_of: Callable[[datetime], str | None],
    busy: set[str],
) -> list[RunRequest]:
    """With ``on_rewrite: replace``, one rewrite run per committed file rewritten in place (its
    run key names the content signature listed: a file rewritten again is replaced again; a
    partition with a run in flight waits for the next tick), at most ``max_runs_per_tick``."""
    if pipeline.on_rewrite != "replace":
        return []
    batches: list[_Batch] = []
    for path, signature in rewritten.items():
        key = partition_key_of(pipeline, path, partition_of)
        if key is None or key in busy:
            continue
        if len(batches) >= pipeline.sensor.max_runs_per_tick:
            break
        named = hashlib.sha256(f"{path}\n{signature}".encode()).hexdigest()[:16]
        config = files_run_config(node_name(pipeline), [path], rewrite=True)
        batches.append(_Batch(f"rewrite|{pipeline.name}|{key}|{named}", key, config))
    return _batch_requests(context, pipeline, batches)


@dataclass(frozen=True)
class _Batch:
    """A run the file sensor requests: its run key's base (also its batch tag), its Dagster
    partition, its run config, whether it is a late run."""

    base: str
    partition: str
    run_config: dict[str, Any]
    late: bool = False


def _batch_requests(
    context: SensorEvaluationContext, pipeline: Pipeline, batches: Sequence[_Batch]
) -> list[RunRequest]:
    """The run requests of ``batches``, each key ending with its base's failed attempts (one
    query for all of them)."""
    attempts = failed_attempts_of(context, BATCH_TAG, [b.base for b in batches])
    return [
        RunRequest(
            run_key=f"{b.base}|a{attempts[b.base]}",
            partition_key=b.partition,
            run_config=b.run_config,
            tags={
                PIPELINE_TAG: pipeline.name,
                BATCH_TAG: b.base,
                **({LATE_TAG: "true"} if b.late else {}),
                **pipeline_partition_tags(pipeline.name, b.partition),
            },
        )
        for b in batches
    ]


#: How many names of files Spark cannot read the cursor and the observation keep (all are counted).
UNREADABLE_NAMES = 5

#: How many of the files a tick requests it reads the columns of (a footer or a first line
#: each, a few at once): the newest file of each batch, at most this many.
COLUMN_PROBES = 10


def _columns_note(found: Sequence[ColumnChange] | None, probed: int, pipeline: Pipeline) -> str:
    """The tick's words for how the requested runs' files differ from the schema (columns it
    lacks, CSV/JSON columns whose sampled values turned another type, Parquet columns of
    another type), and what their ``schema.mode`` does with them (none: nothing said); None
    under ``schema.infer``: no schema is stored yet, the first run infers it."""
    policy = pipeline.schema_policy
    if found is None and policy.infer:
        return (
            " | schema: none stored yet; the first run infers it from its first "
            f"{policy.sample_files} files (schema.infer) and creates the table with it"
        )
    retyped: dict[str, ColumnChange] = {}  # each column once, as its first file says it
    for change in type_changes(found or ()):
        retyped.setdefault(change.column.lower(), change)
    return columns_note(
        new_column_names(found or ()),
        f"the newest file of {probed} batch(es) requested",
        policy.mode.value,
        declared_by="source.schema",
        retyped=list(retyped.values()),
    )


#: How many Dagster partitions one tick checks for being closed (the next tick goes on).
MAX_CLOSED_PER_TICK = 200


def close_empty_partitions(
    context: SensorEvaluationContext,
    pipeline: Pipeline,
    asset_key: AssetKey,
    partitions_def: TimeWindowPartitionsDefinition,
    state: PipelineState,
    closed_through: str | None,
    busy: set[str],
    now: datetime,
) -> tuple[list[AssetMaterialization], str | None]:
    """Materialize, empty, the Dagster partitions into which no file ever landed once the
    listing stopped looking at them (their window ends at or before the listing horizon), so
    that partition health means something: "no files landed" is a result, not a gap.

    A partition is checked once (``closed_through`` moves on): skipped when it was materialized,
    has a run in flight, or holds a landing file (then it is not empty; the sweep reports files
    that were never committed). At most MAX_CLOSED_PER_TICK partitions per tick.
    """
    horizon = listing_horizon(pipeline, state.watermark, now)
    if horizon is None or state.watermark.value is None:
        return [], closed_through
    template = pipeline.watermark.template
    horizon_time = template.parse(horizon)
    window = (
        partitions_def.get_first_partition_window()
        if closed_through is None
        else partitions_def.get_next_partition_window(
            partitions_def.time_window_for_partition_key(closed_through).end
        )
    )
    candidates: list[tuple[str, datetime, datetime]] = []
    while window is not None and window.end <= horizon_time:
        if len(candidates) >= MAX_CLOSED_PER_TICK:
            break
        key = partitions_def.get_partition_key_for_timestamp(window.start.timestamp())
        candidates.append((key, window.start, window.end))
        window = partitions_def.get_next_partition_window(window.end)
    if not candidates:
        return [], closed_through
    materialized = context.instance.get_materialized_partitions(asset_key)
    events = []
    last = closed_through
    for key, start, end in candidates:
        if key in busy:
            break  # check it again on a later tick
        last = key
        if key in materialized or _has_landing_file(pipeline, start, end):
            continue
        text = (
            f"no files landed in {vocab.window_text(start, end)} before the listing "
            f"moved past it (horizon {horizon}: late_arrival_days="
            f"{pipeline.watermark.late_arrival_days} before the newest partition processed)"
        )
        events.append(
            AssetMaterialization(
                asset_key=asset_key,
                partition=key,
                description=text,
                metadata={
                    vocab.PARTITION_CLOSED: MetadataValue.text(text),
                    vocab.PARTITION_FILES: MetadataValue.int(0),
                    vocab.DAGSTER_PARTITION_ROW_COUNT: MetadataValue.int(0),
                },
            )
        )
    return events, last


def _has_landing_file(pipeline: Pipeline, start: datetime, end: datetime) -> bool:
    template = pipeline.watermark.template
    low, high = template.format(start), template.format(end)
    listing = storage.list_files_above(
        pipeline.source.uri,
        ListingPlan(FileWatermark.initial(), low, stop_below=low, stop_at=high),
        suffixes=pipeline.source.suffixes,
        ordering=None,
        limit=1,
    )
    return bool(listing.files)


def _notes(
    groups: FileGroups,
    pipeline: Pipeline,
    swept: _Swept,
    closed: list[AssetMaterialization],
    late: _LateFiles,
    rewritten: Mapping[str, str],
    *,
    initial: bool,
) -> str:
    """What the tick saw and will not ingest, for the skip reason (``initial``: no watermark
    yet, so the sweep's files lie before the cold start's lookback)."""
    out_of_range, unmatched = groups.out_of_range, groups.unmatched
    below = {**swept.below, **groups.below_watermark}
    notes = []
    if below:
        where = ", ".join(f"{prefix}: {count}" for prefix, count in sorted(below.items()))
        fix = (
            "the sweep's late runs ingest them (sweep.ingest)"
            if pipeline.watermark.sweep.ingest
            else "they stay in the landing folder: set sweep.ingest: true to ingest them with "
            "late runs, or land them again with a name above the watermark"
        )
        named = f"; first {list(late.first)}" if late.first else ""
        notes.append(
            f"{sum(below.values())} files landed below their partition's watermark ({where}"
            f"{named}); {fix}"
        )
    if late.error:
        notes.append(late.error)
    if swept.late:
        where = (
            "before the cold start's lookback (watermark.cold_start.lookback_days)"
            if initial
            else "after their partition's late-arrival window closed"
        )
        notes.append(
            f"{swept.late} files landed {where} (first {list(swept.late_first)}): backfill "
            "their partitions to ingest them"
        )
    if not swept.complete:
        notes.append(f"the sweep of {swept.window} stopped after sweep.max_paths paths")
    if groups.unreadable:
        first = sorted(groups.unreadable)[:UNREADABLE_NAMES]
        shown = ", ".join(f"{path!r} ({groups.unreadable[path]!r})" for path in first)
        notes.append(
            f"{len(groups.unreadable)} files Spark cannot read by their exact path (first "
            f"{shown}: ':' together with one of {GLOB_CHARACTERS!r}); they and the later files of "
            f"their landing partitions ({groups.held_back} in all) are held back: rename them "
            "without ':', keeping the names sorting at the same place"
        )
    if groups.unsortable:
        notes.append(
            f"{len(groups.unsortable)} files whose names do not sort by time (first "
            f"{list(groups.unsortable[:UNREADABLE_NAMES])}; file_name_ordering: "
            f"{pipeline.watermark.file_name_ordering.value}): they and the later files of their "
            "landing partitions are held back; land them again named with a Unix-timestamp, "
            "UUIDv7 or ISO 8601 prefix above the watermark"
        )
    if rewritten:
        fix = (
            "rewrite runs replace their rows (on_rewrite: replace)"
            if pipeline.on_rewrite == "replace"
            else "the table holds their old rows; set on_rewrite: replace to replace them, or "
            "land the new content under a new name above the watermark"
        )
        notes.append(
            f"{len(rewritten)} committed files were rewritten in place since their "
            f"commit (size or modification time/ETag changed; first "
            f"{list(rewritten)[:UNREADABLE_NAMES]}): {fix}"
        )
    if out_of_range:
        notes.append(
            f"{len(out_of_range)} files outside the partitions (first {out_of_range[0]!r}; "
            f"partitions start {pipeline.partitions.start}"
            + (f", end {pipeline.partitions.end}" if pipeline.partitions.end else "")
            + ")"
        )
    if unmatched:
        notes.append(
            f"{len(unmatched)} files whose directory does not match "
            f"{pipeline.watermark.partition_template!r} (first {unmatched[0]!r})"
        )
    text = "" if not notes else " | not ingested: " + "; ".join(notes)
    if closed:
        keys = [event.partition for event in closed]
        text += f" | {len(closed)} partitions closed with no files landed ({keys[0]}..{keys[-1]})"
    return text


def _noted(c: SensorCursor) -> tuple[object, ...]:
    """What an observation of the asset reports: a new one when any of it changed."""
    return (
        c.state,
        c.pending_files,
        c.below,
        c.late,
        c.late_first,
        c.unreadable_first,
        c.unsortable_first,
        c.below_first,
        c.rewritten_first,
        c.columns_left_out,
    )


def _backlog_evaluations(
    asset_key: AssetKey,
    previous: SensorCursor,
    cursor: SensorCursor,
    verdict: BacklogVerdict | None,
) -> list[AssetCheckEvaluation]:
    """``backlog_within_limits``'s evaluation when the backlog's observation is written (its
    numbers changed) or the verdict changed (the oldest file's age passed its limit)."""
    if verdict is None:
        return []
    if _noted(previous) == _noted(cursor) and previous.backlog_passed == verdict.passed:
        return []
    return [verdict.evaluation(asset_key)]


#: The columns of ``files/below_watermark_by_partition``: a landing partition, its files below.
BELOW_BY_PARTITION_COLUMNS: dict[str, str] = {"partition": "string", "files": "int"}


def _observations(
    asset_key: AssetKey,
    previous: SensorCursor,
    cursor: SensorCursor,
    state: PipelineState,
    below: Mapping[str, int],
    backlog: Mapping[str, MetadataValue],
) -> list[AssetObservation]:
    """An observation on the asset when the watermark state, the files pending or the files not
    ingested change; with the backlog as numbers (``backlog/*``, :mod:`.backlog`)."""

    if _noted(previous) == _noted(cursor):
        return []
    watermark = state.watermark
    return [
        AssetObservation(
            asset_key=asset_key,
            metadata={
                vocab.WATERMARK_STATE: MetadataValue.text(cursor.state),
                vocab.WATERMARK_VALUE: MetadataValue.text(watermark.value or "(none)"),
                vocab.WATERMARK_PARTITIONS: MetadataValue.int(len(watermark.partition_watermarks)),
                vocab.FILES_PENDING: MetadataValue.int(cursor.pending_files),
                vocab.FILES_BELOW_WATERMARK: MetadataValue.int(cursor.below),
                vocab.FILES_BELOW_WATERMARK_BY_PARTITION: vocab.pairs(
                    BELOW_BY_PARTITION_COLUMNS, below
                ),
                vocab.FILES_BELOW_WATERMARK_FIRST: MetadataValue.json(list(cursor.below_first)),
                vocab.FILES_LATE_AFTER_WINDOW: MetadataValue.int(cursor.late),
                vocab.FILES_LATE_AFTER_WINDOW_FIRST: MetadataValue.json(list(cursor.late_first)),
                vocab.FILES_UNREADABLE: MetadataValue.int(cursor.unreadable),
                vocab.FILES_UNREADABLE_FIRST: MetadataValue.json(list(cursor.unreadable_first)),
                vocab.FILES_UNSORTABLE: MetadataValue.int(cursor.unsortable),
                vocab.FILES_UNSORTABLE_FIRST: MetadataValue.json(list(cursor.unsortable_first)),
                vocab.FILES_REWRITTEN: MetadataValue.int(cursor.rewritten),
                vocab.FILES_REWRITTEN_FIRST: MetadataValue.json(list(cursor.rewritten_first)),
                vocab.FILES_COLUMNS_LEFT_OUT: MetadataValue.json(list(cursor.columns_left_out)),
                **backlog,
            },
        )
    ]
