"""Event-time aggregates in Dagster (issue 9): an asset downstream of an ingesting pipeline,
partitioned by event time, whose partitions close when the watermark passes their end.

- Asset ``NAME`` (deps: the upstream pipeline's asset; hourly or daily partitions from
  ``partitions.start``). A run executes the next batch (``kinds/event_time/window.py``: everything
  the upstream appended since the last batch, one commit per table with the batch's txn) and then
  says, for the partitions it was asked for, whether the watermark closed them. A partition
  still open after the batch does not fail the run (its batch committed: the windows it closed
  are emitted, nothing is lost or repeated): the run succeeds and says which partitions stay
  open, from which window, and the watermark (and upstream event time) that closes each, in its
  metadata (``event_time/partitions_open``) and a log line; the sensor requests them again once
  the watermark passes their end.
- Checks (in the asset): ``late_records`` (WARN when the batch found late records: their count
  and the table that keeps them) and ``watermark_never_moves_backwards``.
- Sensor ``NAME_sensor``: reads the upstream table's greatest event time from its Delta log's
  statistics (no Spark), so the watermark a batch would reach is ``max - delay``; the partitions
  whose end that passes (less the allowed lateness) and that the committed watermark had not
  closed are requested as ONE range run; the tick says which and why. A failed run's range gets a
  new run key (an attempt counter): Dagster never forgets a run key.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    AssetObservation,
    AssetsDefinition,
    AssetSelection,
    BackfillPolicy,
    MetadataValue,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    TimeWindowPartitionsDefinition,
    asset,
    define_asset_job,
    sensor,
)
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from watermark_assets import names, storage
from watermark_assets import vocabulary as v
from watermark_assets.config import EventTimePipelineConfig, ProjectConfig
from watermark_assets.core.clock import Clock
from watermark_assets.core.event_time import (
    EventTimeStats,
    EventTimeWatermark,
    TumblingWindows,
    WatermarkPolicy,
    WatermarkTracker,
)
from watermark_assets.core.time.instant import from_millis, to_millis
from watermark_assets.defs.asset_body import AssetOutcome, AssetRun, run_asset
from watermark_assets.defs.backlog_check import backlog_check_spec, backlog_verdict
from watermark_assets.defs.freshness import GRANULARITY_CADENCE, freshness_policy
from watermark_assets.defs.jobs import (
    RANGE_END_TAG,
    RANGE_START_TAG,
    failed_attempts_of,
    partitions_in_flight,
    sensor_status,
)
from watermark_assets.defs.keys import asset_key
from watermark_assets.defs.partition_truth import (
    MAX_OBSERVED,
    PartitionTruth,
    iso_utc,
    observations_since,
)
from watermark_assets.defs.pipeline_defs import PipelineDefs
from watermark_assets.defs.run_tags import pipeline_partition_tags
from watermark_assets.kinds.event_time.engines import (
    BatchEngine,
    StreamEngine,
    WindowEngine,
    WindowRun,
)
from watermark_assets.kinds.event_time.stream import StreamSpec
from watermark_assets.kinds.event_time.window import WindowAggregateSpec
from watermark_assets.names import PIPELINE_TAG, job_name
from watermark_assets.vocabulary import millis_text

GROUP_NAME = "watermark_event_time"
#: The tag of a sensor's run: the range it closes (a failed run's range is requested again).
TICK_TAG = names.EVENT_TIME_TICK_TAG


def window_spec(
    pipeline: EventTimePipelineConfig, upstreams: Mapping[str, str]
) -> WindowAggregateSpec:
    """The config turned once into the plain value the batch takes (``upstreams``: input name
    -> its table, :meth:`ProjectConfig.upstream_tables`)."""
    watermark = pipeline.watermark
    return WindowAggregateSpec(
        pipeline=pipeline.name,
        upstreams=dict(upstreams),
        event_column=watermark.column,
        tracker=WatermarkTracker(
            delays_ms={name: watermark.delay_ms for name in upstreams},
            policy=WatermarkPolicy(watermark.policy),
            idle_timeout_ms=watermark.idle_timeout_ms,
        ),
        windows=TumblingWindows(size_ms=pipeline.window.size_ms),
        aggregates=pipeline.parsed_aggregates,
        output_uri=pipeline.table.uri,
        late_uri=pipeline.table.late,
        state_uri=pipeline.table.state,
        lateness_ms=pipeline.watermark.lateness_ms,
        late_policy=pipeline.watermark.late_policy,
    )


def window_engine(pipeline: EventTimePipelineConfig, config: ProjectConfig) -> WindowEngine:
    """The engine ``pipeline.engine`` names, built once from the configuration."""
    spec = window_spec(pipeline, config.upstream_tables(pipeline))
    if pipeline.engine == "batch":
        return BatchEngine(spec)
    upstream = config.landing_of(pipeline)
    source: Any = upstream.source
    formats = {"ndjson": "json", "parquet": "parquet", "csv": "csv"}
    stream = StreamSpec(
        pipeline=pipeline.name,
        landing_uri=source.uri,
        file_format=formats[source.format.value],
        schema_ddl=source.schema_ddl or "",
        event_column=pipeline.watermark.column,
        delay_ms=pipeline.watermark.delay_ms,
        window_ms=pipeline.window.size_ms,
        aggregates=pipeline.parsed_aggregates,
        output_uri=pipeline.table.uri,
        late_table_uri=pipeline.table.late,
    )
    return StreamEngine(spec, stream)


def event_time_partitions(pipeline: EventTimePipelineConfig) -> TimeWindowPartitionsDefinition:
    start, end = pipeline.partitions.start_at, pipeline.partitions.end_at  # naive: UTC
    hourly = pipeline.partitions.granularity == "hourly"
    return TimeWindowPartitionsDefinition(
        start=start,
        end=end,
        fmt="%Y-%m-%d-%H:%M" if hourly else "%Y-%m-%d",
        cron_schedule=f"{start.minute} * * * *" if hourly else f"{start.minute} {start.hour} * * *",
        timezone="UTC",
    )


def closed_through(spec: WindowAggregateSpec, watermark_ms: int) -> int:
    """Windows (and partitions) ending at or before this instant are closed."""
    return watermark_ms - spec.lateness_ms


def result_metadata(spec: WindowAggregateSpec, run: WindowRun, now: datetime) -> dict[str, Any]:
    after = run.watermark_after
    metadata: dict[str, Any] = {
        v.EVENT_TIME_ENGINE: run.engine,
        v.WATERMARK_BEFORE: millis_text(run.watermark_before.watermark_ms),
        **v.time_entries(v.WATERMARK_AFTER, from_millis(after.watermark_ms)),
        **v.duration_entries(v.LAG, (to_millis(now) - after.watermark_ms) / 1000),
        v.EVENT_TIME_WINDOWS_EMITTED: run.windows_emitted,
        v.EVENT_TIME_LATE_RECORDS: run.late_records,
        v.EVENT_TIME_LATE_RECORDS_KEPT: run.late_kept,
        v.EVENT_TIME_EXPLAIN: run.reason,
        v.ROWS_READ: run.rows_read,
        v.DAGSTER_URI: spec.output_uri,
        **{key: _plain_entry(value) for key, value in run.details.items()},
    }
    if run.windows_open is not None:
        metadata[v.EVENT_TIME_WINDOWS_OPEN] = run.windows_open
    if run.late_kept:
        metadata[v.LATE_TABLE] = spec.late_uri
        metadata[v.STATE_TABLE] = spec.state_uri
    if len(spec.upstreams) > 1:
        metadata[v.EVENT_TIME_INPUTS] = v.table(
            INPUT_COLUMNS,
            (
                {
                    "input": name,
                    "watermark": None if m.watermark_ms is None else millis_text(m.watermark_ms),
                    "max_event_time": None
                    if m.max_event_ms is None
                    else millis_text(m.max_event_ms),
                }
                for name, m in ((n, after.mark(n)) for n in spec.upstreams)
            ),
        )
    local = [
        {"input": name, "partition": key, "watermark": millis_text(ms)}
        for name, mark in ((n, after.mark(n)) for n in spec.upstreams)
        if mark.local and mark.partitioning
        for key, ms in list(mark.local.items())[-LOCAL_SHOWN:]
    ]
    if local:  # each partitioned upstream's local watermark per partition (the newest ones)
        metadata[v.EVENT_TIME_LOCAL_WATERMARKS] = v.table(LOCAL_WATERMARK_COLUMNS, local)
    return metadata


def _plain_entry(value: Any) -> Any:
    """An engine's detail: a list or a mapping as plain JSON, anything else as it is."""
    if isinstance(value, (list, tuple, dict)):
        return MetadataValue.json(v.plain(value))
    return value


#: How many partitions' local watermarks per input the materialization shows (the last ones).
LOCAL_SHOWN = 24
#: The columns of ``event_time/inputs``: each input's watermark and newest event time.
INPUT_COLUMNS: dict[str, str] = {
    "input": "string",
    "watermark": "string",
    "max_event_time": "string",
}
#: The columns of ``event_time/local_watermarks``: a partitioned input's watermark per partition.
LOCAL_WATERMARK_COLUMNS: dict[str, str] = {
    "input": "string",
    "partition": "string",
    "watermark": "string",
}


@dataclass(frozen=True)
class OpenPartition:
    """A requested partition the watermark has not closed after the batch: its windows from
    ``open_from_ms`` to its end stay open until the watermark reaches ``closes_at_ms`` (the end
    plus the allowed lateness), i.e. until the upstream's event times reach ``events_at_ms``
    (that plus the delay)."""

    key: str
    open_from_ms: int
    end_ms: int
    windows: int
    closes_at_ms: int
    events_at_ms: int

    def row(self) -> dict[str, Any]:
        """Its row of ``event_time/partitions_open`` (:data:`OPEN_PARTITION_COLUMNS`)."""
        return {
            "partition": self.key,
            "windows_open": self.windows,
            "open_from": millis_text(self.open_from_ms),
            "open_until": millis_text(self.end_ms),
            "closes_when_watermark_reaches": millis_text(self.closes_at_ms),
            "closes_with_upstream_events_at": millis_text(self.events_at_ms),
        }


#: The columns of ``event_time/partitions_open``: a requested partition still open, its open
#: windows ``[open_from, open_until)`` and the watermark (and upstream event time) that closes it.
OPEN_PARTITION_COLUMNS: dict[str, str] = {
    "partition": "string",
    "windows_open": "int",
    "open_from": "string",
    "open_until": "string",
    "closes_when_watermark_reaches": "string",
    "closes_with_upstream_events_at": "string",
}


def open_partitions(
    spec: WindowAggregateSpec,
    partitions_def: TimeWindowPartitionsDefinition,
    keys: Sequence[str],
    watermark_ms: int,
    delay_ms: int,
) -> list[OpenPartition]:
    """The partitions of ``keys`` that the watermark ``watermark_ms`` (less the allowed
    lateness) has not closed, in order: those ending after :func:`closed_through`."""
    closed = closed_through(spec, watermark_ms)
    found: list[OpenPartition] = []
    for key in keys:
        window = partitions_def.time_window_for_partition_key(key)
        start, end = to_millis(window.start), to_millis(window.end)
        if end <= closed:
            continue
        # the window holding the closed-through instant is the first open one (ends after it)
        first = start if closed <= start else max(start, spec.windows.window_of(closed).start_ms)
        windows = -(-(end - first) // spec.windows.size_ms)
        closes_at = end + spec.lateness_ms
        found.append(OpenPartition(key, first, end, windows, closes_at, closes_at + delay_ms))
    return found


def open_message(pipeline: str, opened: Sequence[OpenPartition], watermark_ms: int) -> str:
    """The log line of a run that left requested partitions open."""
    first, last = opened[0], opened[-1]
    keys = first.key if len(opened) == 1 else f"{first.key} .. {last.key}"
    until = (
        f"the watermark reaches {millis_text(first.closes_at_ms)}"
        if len(opened) == 1
        else f"the watermark reaches {millis_text(first.closes_at_ms)} (the first) .. "
        f"{millis_text(last.closes_at_ms)} (the last)"
    )
    return (
        f"{pipeline}: {len(opened)} requested partition(s) stay open: {keys}, their windows from "
        f"{millis_text(first.open_from_ms)} to {millis_text(last.end_ms)} "
        f"({sum(o.windows for o in opened)} window(s)), open until {until}, i.e. until the "
        f"upstream's event times reach {millis_text(first.events_at_ms)} .. "
        f"{millis_text(last.events_at_ms)}; the watermark is {millis_text(watermark_ms)}. "
        "The windows this batch closed are committed; the sensor requests these partitions "
        "again once the watermark passes their end"
    )


def _iso(millis: int) -> str:
    return millis_text(millis)


def event_time_truths(
    spec: WindowAggregateSpec,
    partitions_def: TimeWindowPartitionsDefinition,
    keys: Sequence[str],
    committed: EventTimeWatermark,
    delay_ms: int,
) -> dict[str, PartitionTruth]:
    """Each partition of ``keys`` as the committed watermark leaves it: closed (its windows are
    emitted), or open, with the watermark and the upstream event time that close it."""
    upstream = " and ".join(f"`{name}`" for name in spec.upstreams)
    size = v.exact_duration_text(spec.windows.size_ms)
    delay = v.exact_duration_text(delay_ms)
    if committed.is_empty:
        truths = {}
        for key in keys:
            end = to_millis(partitions_def.time_window_for_partition_key(key).end)
            closes = end + spec.lateness_ms
            truths[key] = PartitionTruth(
                state="waiting",
                reason=f"no batch has run yet: its windows of {size} are emitted once the "
                f"event-time watermark (the newest event time in {upstream} less {delay}) "
                f"reaches {_iso(closes)}, i.e. once {upstream} holds events at or after "
                f"{_iso(closes + delay_ms)}",
            )
        return truths
    at = committed.watermark_ms
    opened = {o.key: o for o in open_partitions(spec, partitions_def, keys, at, delay_ms)}
    shown, shown_time = _iso(at), from_millis(at)
    truths = {}
    for key in keys:
        still = opened.get(key)
        if still is None:
            end = to_millis(partitions_def.time_window_for_partition_key(key).end)
            truths[key] = PartitionTruth(
                state="closed",
                reason=f"closed: the event-time watermark {_iso(at)} passed its end "
                f"{_iso(end)}; its windows of {size} are emitted (records arriving for them later "
                f"are kept in {spec.late_uri})",
                watermark=shown,
                watermark_time=shown_time,
            )
            continue
        truths[key] = PartitionTruth(
            state="open",
            reason=f"open: its {still.windows} window(s) of {size} from {_iso(still.open_from_ms)} "
            f"to {_iso(still.end_ms)} are emitted once the event-time watermark reaches "
            f"{_iso(still.closes_at_ms)}, i.e. once {upstream} holds events at or after "
            f"{_iso(still.events_at_ms)} (watermark delay {delay}); the watermark is {_iso(at)}",
            watermark=shown,
            watermark_time=shown_time,
            numbers={v.PARTITION_WINDOWS_OPEN: still.windows},
        )
    return truths


def build_event_time_asset(
    pipeline: EventTimePipelineConfig,
    engine: WindowEngine,
    partitions_def: TimeWindowPartitionsDefinition,
    clock: Clock,
    upstream_keys: Sequence[AssetKey],
) -> AssetsDefinition:
    spec = engine.spec
    key = asset_key(pipeline)
    delay = v.exact_duration_text(pipeline.watermark.delay_ms)
    upstream_names = ", ".join(spec.upstreams)

    decorator = asset(
        key=key,
        deps=list(upstream_keys),
        description=pipeline.description
        or (
            f"{v.exact_duration_text(spec.windows.size_ms)} windows of {upstream_names} by "
            f"`{spec.event_column}` ({', '.join(pipeline.aggregates)}), emitted once the "
            f"watermark (max event time - {delay}) passes their end; late records kept."
        ),
        group_name=GROUP_NAME,
        kinds={"spark", "delta"},
        op_tags={PIPELINE_TAG: pipeline.name},
        partitions_def=partitions_def,
        backfill_policy=BackfillPolicy.single_run(),
        check_specs=[
            AssetCheckSpec(
                "late_records",
                asset=key,
                description="No record of this run was "
                "late (late ones are kept in the late table).",
            ),
            AssetCheckSpec("watermark_never_moves_backwards", asset=key),
            *(
                []
                if pipeline.backlog_limits is None
                else [backlog_check_spec(key, pipeline.backlog_limits)]
            ),
        ],
        metadata={v.EVENT_TIME_DELAY: delay, v.LATE_TABLE: spec.late_uri},
    )

    def event_time_run(run: AssetRun) -> AssetOutcome:
        now = clock()
        result = engine.run(run.spark, now=now, run_id=run.run_id)
        run.info(f"{pipeline.name} ({engine.name}): {result.reason}")
        metadata = result_metadata(spec, result, now)
        after = result.watermark_after.watermark_ms
        keys = run.partitions.keys
        opened = open_partitions(spec, partitions_def, keys, after, pipeline.watermark.delay_ms)
        if opened:  # the batch committed: say what stays open and until when, and succeed
            run.warning(open_message(pipeline.name, opened, after))
            still = {o.key for o in opened}
            metadata[v.EVENT_TIME_PARTITIONS_OPEN] = v.table(
                OPEN_PARTITION_COLUMNS, (o.row() for o in opened)
            )
            metadata[v.EVENT_TIME_PARTITIONS_CLOSED] = MetadataValue.json(
                [k for k in keys if k not in still]
            )
        where = (
            f"are kept in {spec.late_uri} (column _late_reason says why)"
            if result.late_kept
            else "were dropped by Spark (engine: streaming; engine: batch keeps them)"
        )
        said = (
            []
            if result.late_records == 0
            else [f"{result.late_records} late record(s) of this run {where}"]
        )
        if result.unaccounted:  # rows of lost upstream versions no read could tell apart
            said.append(result.unaccounted)
        late = AssetCheckResult(
            check_name="late_records",
            passed=not said,
            severity=AssetCheckSeverity.WARN,
            metadata={"late_records": result.late_records},
            description="; ".join(said) or None,
        )
        monotone = AssetCheckResult(
            check_name="watermark_never_moves_backwards",
            passed=result.watermark_after.watermark_ms >= result.watermark_before.watermark_ms,
            metadata={
                "before": millis_text(result.watermark_before.watermark_ms),
                "after": millis_text(result.watermark_after.watermark_ms),
            },
        )
        truths = event_time_truths(
            spec, partitions_def, keys, result.watermark_after, pipeline.watermark.delay_ms
        )
        checks = [late, monotone]
        if pipeline.backlog_limits is not None:  # the lag the run leaves behind
            lag_seconds = max(0.0, (to_millis(now) - after) / 1000)
            verdict = backlog_verdict(pipeline.backlog_limits, {"event_time_lag": lag_seconds})
            checks.append(verdict.result(key))
        return AssetOutcome(
            metadata,
            spec.output_uri,
            per_partition=AssetOutcome.truths(truths),
            check_results=checks,
        )

    return run_asset(decorator, event_time_run)


def upstream_max_event_ms(upstream_uri: str, column: str) -> int | None:
    """The greatest event time in the upstream table, from its files' statistics (no data
    read); None without a table, a file, or statistics for the column."""
    try:
        table = DeltaTable(upstream_uri, storage_options=storage.delta_options(upstream_uri))
    except TableNotFoundError:
        return None
    actions = pa.table(table.get_add_actions(flatten=True))
    name = f"max.{column}"
    if name not in actions.column_names or actions.num_rows == 0:
        return None
    top = pa.compute.max(actions.column(name)).as_py()
    if top is None:
        return None
    return to_millis(top if top.tzinfo else top.replace(tzinfo=timezone.utc))


@dataclass(frozen=True)
class CloseDecision:
    """Which partitions a tick closes, and why (for the tick's text)."""

    keys: tuple[str, ...]
    reason: str


def decide_closing(
    engine: WindowEngine,
    partitions_def: TimeWindowPartitionsDefinition,
    now: datetime,
) -> CloseDecision:
    """The partitions the next batch would close: ending after the committed watermark's close
    and at or before the one the upstream's newest event time gives."""
    spec = engine.spec
    committed_value = engine.committed()
    committed = committed_value.watermark_ms
    now_ms = to_millis(now)
    newest: dict[str, EventTimeStats] = {}
    for name, uri in spec.upstreams.items():
        top = upstream_max_event_ms(uri, spec.event_column)
        seen = committed_value.mark(name).max_event_ms
        if top is not None and (seen is None or top > seen):  # rows a batch has not read
            newest[name] = EventTimeStats(count=1, min_ms=top, max_ms=top)
    if not newest and committed_value.is_empty:
        return CloseDecision(
            (),
            f"no event time in {', '.join(spec.upstreams.values())} yet (no table, files or "
            f"statistics for `{spec.event_column}`)",
        )
    # the watermark a batch would reach now: the tracker itself, on the newest event times
    would = spec.tracker.observe(committed_value, newest, now_ms)
    expected = would.watermark_ms
    formula = spec.tracker.explain(committed_value, would, now_ms)
    closed_before = closed_through(spec, committed) if committed else None
    closed_after = closed_through(spec, expected)
    keys = []
    waiting: str | None = None
    with_now = partitions_def.get_partition_keys(current_time=now)
    for key in with_now:
        window = partitions_def.time_window_for_partition_key(key)
        end = to_millis(window.end)
        if end > closed_after:
            closes = end + spec.lateness_ms
            delay = max(spec.tracker.delays_ms.values(), default=0)
            waiting = (
                f"partition {key} ({iso_utc(window.start)} to {iso_utc(window.end)}) waits for "
                f"the event-time watermark to reach {_iso(closes)}, i.e. for events at or after "
                f"{_iso(closes + delay)} in {', '.join(spec.upstreams)}"
            )
            break
        if closed_before is None or end > closed_before:
            keys.append(key)
    so_far = f"the newest events so far: {formula}"
    if not keys:
        return CloseDecision(
            (),
            f"no partition closes yet: {waiting}; {so_far}"
            if waiting
            else f"every partition is closed; {so_far}",
        )
    return CloseDecision(
        tuple(keys),
        f"{len(keys)} partition(s) close: {keys[0]} .. {keys[-1]} end at or before the watermark "
        f"{_iso(expected)}; {so_far}",
    )


def open_partition_observations(
    context: SensorEvaluationContext,
    engine: WindowEngine,
    asset_key: AssetKey,
    partitions_def: TimeWindowPartitionsDefinition,
    delay_ms: int,
    now: datetime,
) -> tuple[list[AssetObservation], str]:
    """An observation on each partition the committed watermark has not closed (the oldest
    :data:`MAX_OBSERVED`), saying what it waits for; only when that changed. Nothing is read
    per partition while the words and the asset's events are those of the tick that left the
    sensor's cursor (:func:`~watermark_assets.defs.partition_truth.observations_since`); the
    cursor for the next tick."""
    spec = engine.spec
    committed = engine.committed()
    closed = None if committed.is_empty else closed_through(spec, committed.watermark_ms)
    keys = []
    for key in partitions_def.get_partition_keys(current_time=now):
        end = to_millis(partitions_def.time_window_for_partition_key(key).end)
        if closed is None or end > closed:
            keys.append(key)
        if len(keys) == MAX_OBSERVED:
            break
    truths = event_time_truths(spec, partitions_def, keys, committed, delay_ms)
    return observations_since(context.instance, asset_key, truths, context.cursor)


def build_event_time_sensor(
    pipeline: EventTimePipelineConfig,
    engine: WindowEngine,
    job: UnresolvedAssetJobDefinition,
    asset_key: AssetKey,
    partitions_def: TimeWindowPartitionsDefinition,
    clock: Clock,
) -> SensorDefinition:
    @sensor(
        name=names.sensor_name(pipeline.name),
        job=job,
        minimum_interval_seconds=pipeline.sensor.minimum_interval_seconds,
        default_status=sensor_status(pipeline.sensor.running_by_default),
        description=f"Materializes the partitions of {pipeline.name} once the event-time "
        "watermark passes their end, and says which and why.",
    )
    def event_time_sensor(context: SensorEvaluationContext) -> SensorResult:
        now = clock()
        decision = decide_closing(engine, partitions_def, now)
        if not decision.keys:
            observed, said = open_partition_observations(
                context, engine, asset_key, partitions_def, pipeline.watermark.delay_ms, now
            )
            return SensorResult(skip_reason=decision.reason, asset_events=observed, cursor=said)
        busy = partitions_in_flight(context, asset_key, job.name, partitions_def)  # type: ignore[arg-type]
        if busy.intersection(decision.keys):
            return SensorResult(
                skip_reason=f"{decision.reason}; waiting for the run in flight over "
                f"{sorted(busy.intersection(decision.keys))[0]}"
            )
        first, last = decision.keys[0], decision.keys[-1]
        base = f"{pipeline.name}|{first}..{last}"
        attempt = failed_attempts_of(context, TICK_TAG, [base])[base]
        context.log.info(f"{pipeline.name}: {decision.reason}")
        tags = {
            PIPELINE_TAG: pipeline.name,
            TICK_TAG: base,
            RANGE_START_TAG: first,
            RANGE_END_TAG: last,
            **pipeline_partition_tags(pipeline.name, partition_range=(first, last)),
        }
        return SensorResult(run_requests=[RunRequest(run_key=f"{base}|a{attempt}", tags=tags)])

    return event_time_sensor


def build_event_time_pipeline(
    pipeline: EventTimePipelineConfig, config: ProjectConfig, clock: Clock
) -> PipelineDefs:
    """Everything of one event-time pipeline (the event-time kind's ``dagster_defs``): the asset
    carries its checks; fresh within a window's cadence plus the watermark's delay and the
    lateness it waits for. Its columns are the aggregate's, known when Spark plans it."""
    engine = window_engine(pipeline, config)
    spec = engine.spec
    partitions_def = event_time_partitions(pipeline)
    upstream_keys = [asset_key(config.pipeline(name)) for name in engine.spec.upstreams]
    asset_def = build_event_time_asset(pipeline, engine, partitions_def, clock, upstream_keys)
    job = define_asset_job(
        job_name(pipeline.name),
        selection=AssetSelection.assets(asset_def),
        partitions_def=partitions_def,
        description=f"Aggregates the rows appended to {', '.join(spec.upstreams)} into event-time "
        "windows and emits the closed ones.",
    )
    sensor_def = build_event_time_sensor(
        pipeline, engine, job, asset_def.key, partitions_def, clock
    )
    cadence = GRANULARITY_CADENCE[pipeline.partitions.granularity]
    late = timedelta(milliseconds=pipeline.watermark.delay_ms + pipeline.watermark.lateness_ms)
    return PipelineDefs(
        asset_def,
        None,
        job,
        sensor_def,
        freshness=freshness_policy(pipeline.freshness, cadence, late),
    )


__all__ = [
    "build_event_time_pipeline",
    "decide_closing",
    "event_time_partitions",
    "upstream_max_event_ms",
    "window_spec",
]
