"""The Dagster objects of a time pipeline (seed 003): partitions, asset, job, schedule, sensor.

- **Partitions** (:func:`time_partitions`): a ``TimeWindowPartitionsDefinition`` whose keys are
  the windows of :func:`~watermark_assets.core.time.windows`: ``start`` = ``from``, a cron on the
  window boundaries (daily at ``from``'s hour:minute, weekly on ``from``'s weekday, monthly on
  ``from``'s day, hourly at ``from``'s minute), ``end_offset=1`` with a partial last window (the
  current window is a partition), the hour in the key when ``from`` has one. ``partition: none``
  is an unpartitioned asset whose run reads the effective range ``[cut-off, to)``.
- **Asset** (:func:`build_time_asset`): a run of partitions (or a single-run backfill of a range)
  reads and replaces each window ``[start, min(end, to))`` in ONE commit with its high watermark
  (:mod:`watermark_assets.kinds.time.run`). A key whose window is not a window of the spec at the
  run's time (Dagster's current partition when ``to`` sits exactly on a boundary, or a window
  after ``to``) is skipped and said so.
- **Schedule and sensor** (:func:`build_time_schedule`, :func:`build_time_sensor`): each tick reads
  the time watermark from the Delta log once and requests exactly the windows due
  (``TimeWatermark.due_at``), skipping partitions with a run in flight; the tick says why in
  words (``DueWindows.explain()``).
"""

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from dagster import (
    AssetKey,
    AssetsDefinition,
    BackfillPolicy,
    DefaultScheduleStatus,
    MetadataValue,
    RunRequest,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    TimeWindowPartitionsDefinition,
    asset,
    sensor,
)
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)

from watermark_assets import names
from watermark_assets import vocabulary as v
from watermark_assets.config import TimePipelineConfig, TimeWatermarkConfig, UnitPipelineConfig
from watermark_assets.core.clock import Clock, ensure_utc
from watermark_assets.core.partition_selection import PartitionSelection, TimeWindow
from watermark_assets.core.text import time_text
from watermark_assets.core.time import (
    BeforeNow,
    FixedTime,
    Partitioning,
    TimeSpec,
    format_instant,
    windows,
)
from watermark_assets.core.time.tick import DueWindows
from watermark_assets.defs.asset_body import AssetOutcome, AssetRun, run_asset
from watermark_assets.defs.column_checks import build_column_checks
from watermark_assets.defs.columns import source_schema
from watermark_assets.defs.freshness import cron_cadence, freshness_policy
from watermark_assets.defs.jobs import (
    IN_FLIGHT,
    FailedAttempts,
    partitions_in_flight,
    pipeline_job,
    requested_or_skipped,
    sensor_status,
)
from watermark_assets.defs.keys import asset_key
from watermark_assets.defs.metadata import (
    null_watermark_rows,
    staged_reads_metadata,
    window_run_totals,
)
from watermark_assets.defs.partition_truth import (
    PartitionTruth,
    changed_observations,
    iso_utc,
)
from watermark_assets.defs.pipeline_defs import PipelineDefs
from watermark_assets.defs.run_tags import pipeline_partition_tags
from watermark_assets.defs.schema_notes import schema_observations, source_schema_note
from watermark_assets.delta.log import table_row_count
from watermark_assets.kinds.time.run import (
    TimeRunResult,
    column_spec,
    load_time_watermark,
    run_windows,
)
from watermark_assets.names import PIPELINE_TAG
from watermark_assets.runs.column import count_null_watermark
from watermark_assets.runs.window_commit import WindowRun
from watermark_assets.sources.locations import check_source

#: The tag of a time pipeline's requested runs: the window key and the cut-off it was due after.
TICK_TAG = names.TIME_TICK_TAG


def _from(spec: TimeSpec) -> datetime:
    if not isinstance(spec.from_, FixedTime):  # refused at load (TimeWatermarkConfig)
        raise ValueError(f"a time partition needs a fixed from, not {spec.from_}")
    return spec.from_.at


def partition_fmt(spec: TimeSpec) -> str:
    """The key format: the date, and the hour when windows are hourly or ``from`` has one."""
    start = _from(spec)
    if spec.partitioning is Partitioning.HOURLY or start.hour or start.minute:
        return "%Y-%m-%d-%H:%M"
    return "%Y-%m-%d"


def partition_cron(spec: TimeSpec) -> str:
    """A cron whose ticks are exactly the window boundaries (UTC); hourly for ``none``."""
    if spec.partitioning is Partitioning.NONE:
        # no boundaries to follow, and `from` may be a duration (it moves with now)
        minute = spec.from_.at.minute if isinstance(spec.from_, FixedTime) else 0
        return f"{minute} * * * *"
    start = _from(spec)
    minute, hour = start.minute, start.hour
    if spec.partitioning is Partitioning.HOURLY:
        return f"{minute} * * * *"
    if spec.partitioning is Partitioning.DAILY:
        return f"{minute} {hour} * * *"
    if spec.partitioning is Partitioning.WEEKLY:
        return f"{minute} {hour} * * {start.isoweekday() % 7}"  # cron: 0 is Sunday
    if spec.partitioning is Partitioning.MONTHLY:
        return f"{minute} {hour} {start.day} * *"  # from's day is 1..28 (refused at load)
    raise AssertionError(spec.partitioning)  # every partitioning is handled above


def _end_offset(spec: TimeSpec) -> int:
    """Dagster's ``end_offset``: the current window is a partition when the last window is
    partial; a ``P<n>D``/``P<n>DT<m>H`` moves the end back by the whole windows it spans (for
    monthly windows by none: the run and the ticks clip keys to the spec's windows)."""
    offset = 1 if spec.partial_partition else 0
    to = spec.to
    if isinstance(to, BeforeNow):
        back = timedelta(days=to.days, hours=to.hours or 0)
        step = spec.partitioning.step
        if step is not None:
            offset -= back // step
    return offset


def time_partitions(spec: TimeSpec) -> TimeWindowPartitionsDefinition | None:
    """The Dagster partitions whose keys are ``windows(spec, now)`` (module docstring); None for
    ``partition: none``.

    A fixed ``to`` gives a fixed ``end`` (the end of the window holding ``to`` with a partial last
    window, else ``to``'s last complete window's end). Exactly one difference remains with a
    rolling ``to``: when ``to`` sits on a window boundary, Dagster's current partition starts at
    ``to``, an empty window for the core: its run reads nothing and says so.
    """
    if spec.partitioning is Partitioning.NONE:
        return None
    start = _from(spec)
    bounds: dict[str, Any] = {}
    if isinstance(spec.to, FixedTime):
        tiles = windows(spec, spec.to.at)
        last = len(tiles)
        bounds["end"] = tiles.boundary(last) if last else start
    else:
        bounds["end_offset"] = _end_offset(spec)
    return TimeWindowPartitionsDefinition(
        start=start,
        fmt=partition_fmt(spec),
        cron_schedule=partition_cron(spec),
        timezone="UTC",
        **bounds,
    )


def partition_key(spec: TimeSpec, window: TimeWindow) -> str:
    """The Dagster partition key of one window (its start in :func:`partition_fmt`)."""
    return _key_maker(partition_fmt(spec))(window.start)


def _key_maker(fmt: str) -> Callable[[datetime], str]:
    """``moment.strftime(fmt)`` for the two key formats, cut from ``isoformat`` (about 3x faster:
    a first tick may format tens of thousands of keys)."""
    if fmt == "%Y-%m-%d":
        return lambda moment: moment.isoformat()[:10]
    if fmt == "%Y-%m-%d-%H:%M":

        def hour_key(moment: datetime) -> str:
            iso = moment.isoformat()  # 2020-01-01T10:00:00+00:00
            return f"{iso[:10]}-{iso[11:16]}"

        return hour_key
    return lambda moment: moment.strftime(fmt)


def key_start(fmt: str, key: str) -> datetime:
    """The start of the window whose partition key is ``key`` in the format ``fmt``
    (:func:`partition_fmt`): :func:`partition_key`'s inverse, the start Dagster gives the key
    (the format holds every part of a window's start that is not always zero)."""
    return datetime.strptime(key, fmt).replace(tzinfo=timezone.utc)


def windows_of_keys(
    spec: TimeSpec, selection: PartitionSelection, now: datetime
) -> tuple[list[TimeWindow], list[str]]:
    """The core windows of the run's partitions at ``now`` (a partial one ends at ``to``), and
    the keys that are no window at ``now`` (after ``to``, or starting exactly at it)."""
    tiles = windows(spec, now)
    fmt = partition_fmt(spec)
    chosen: list[TimeWindow] = []
    outside: list[str] = []
    for key in selection.keys:
        start = key_start(fmt, key)
        window = tiles.containing(start)
        if window is None or window.start != start:
            outside.append(key)
        else:
            chosen.append(window)
    return chosen, outside


def describe(pipeline: TimePipelineConfig) -> str:
    """The asset's description."""
    lead = pipeline.description.strip() + "\n\n" if pipeline.description else ""
    w = pipeline.watermark
    return (
        f"{lead}Time watermark on `{w.column}` from {w.from_} to {w.to}, {w.partition} windows "
        f"(partial last window: {w.partial_partition}), grace {w.grace_days}d, abstinent "
        f"{w.abstinent_days}d. Each window `[start, end)` is read from the "
        f"{pipeline.source.type} source `{pipeline.source.location}` with `{w.column} >= start "
        f"AND {w.column} < end` pushed down, and replaces that window of `{pipeline.table.uri}` "
        "in ONE Delta commit that records its high watermark. Metadata: `cut_off`, "
        "`time/windows` (a table: each window, its high watermark, rows), `rows/*`, "
        "`delta/versions` (every key: docs/metadata.md)."
    )


def time_metadata(
    result: TimeRunResult, due: DueWindows, skipped: Sequence[str], *, table_rows: int | None
) -> dict[str, Any]:
    """A run's materialization metadata: the cut-off, each window with its high watermark and
    rows, the totals and the commits (the checks read ``delta/versions``)."""
    metadata: dict[str, Any] = {
        v.CUT_OFF: MetadataValue.text(v.cut_off_text(due.cut_off)),
        v.WINDOWS: v.table(WINDOW_COLUMNS, (window_row(w) for w in result.windows)),
        v.RUNS: v.lines(w.line() for w in result.windows),
        v.PARTITIONS_SKIPPED: MetadataValue.json(list(skipped)),
        **v.time_entries(v.WATERMARK_AFTER, result.watermark_after.highest, none="none"),
        **window_run_totals(result),
    }
    metadata |= staged_reads_metadata([w.result.staged for w in result.windows])
    missing = [m for w in result.windows for m in w.result.staged.missing]
    if missing:  # a file-download source's files the server did not have: nothing committed
        metadata[v.SOURCE_MISSING] = MetadataValue.json(missing)
    if len(result.windows) == 1:
        (only,) = result.windows
        high = v.time_text(only.window.end) if only.committed else "none"
        metadata[v.REPLACE_WINDOW] = MetadataValue.text(
            v.window_text(only.window.start, only.window.end)
        )
        metadata[v.REPLACE_HIGH_WATERMARK] = MetadataValue.text(high)
    if table_rows is not None:
        metadata[v.DAGSTER_ROW_COUNT] = MetadataValue.int(table_rows)
    return metadata


#: The columns of ``time/windows``, one row per window of the run (``time_unit/cells`` puts
#: ``unit`` first): its ``[start, end)``, its high watermark (empty: not committed), rows, the
#: commit, what the read pushed down, the files a download did not find (empty: none).
WINDOW_COLUMNS: dict[str, str] = {
    "start": "string",
    "end": "string",
    "high_watermark": "string",
    "rows_read": "int",
    "rows_committed": "int",
    "rows_removed": "int",
    "delta_version": "int",
    "pushed_down": "string",
    "missing": "string",
}


def window_row(run: WindowRun) -> dict[str, object]:
    """One window (or cell) of a run, a row of :data:`WINDOW_COLUMNS`."""
    result = run.result
    return {
        "start": run.window.start,
        "end": run.window.end,
        "high_watermark": run.window.end if run.committed else None,
        "rows_read": result.staged.rows_read,
        "rows_committed": result.rows_committed,
        "rows_removed": result.rows_removed,
        "delta_version": result.outcome.version,
        "pushed_down": result.staged.pushed_down,
        # what the source could not get (nothing was committed for it)
        "missing": list(result.staged.missing) or None,
    }


def window_truth(window: TimeWindow, high: datetime | None, due: DueWindows) -> PartitionTruth:
    """One window as the time watermark holds it after a run (``due``: what the next tick
    would read): read up to its high watermark, and whether ticks read it again (its end is
    after the cut-off) or it is final."""
    cut = due.cut_off
    span = f"[{iso_utc(window.start)}, {iso_utc(window.end)})"
    rule = (
        f"the cut-off {iso_utc(cut.at)} (the highest high watermark less grace_days "
        f"{cut.grace_days})"
    )
    if high is None:
        return PartitionTruth(
            state="not read yet",
            reason=f"{span} has no high watermark yet: the next tick reads it ({rule})",
        )
    read = f"{span} read up to its high watermark {iso_utc(high)}"
    if window in due.windows:
        return PartitionTruth(
            state="read, due again",
            reason=f"{read}; the next tick reads it again: it ends after {rule}",
            watermark=iso_utc(high),
            watermark_time=high,
        )
    return PartitionTruth(
        state="final",
        reason=f"{read}; final: it ends at or before {rule}, so ticks no longer read it "
        "(a backfill does)",
        watermark=iso_utc(high),
        watermark_time=high,
    )


def no_window_line(pipeline: str, skipped: Sequence[str], now: datetime) -> str:
    """A run's log line of its partitions ``skipped``: no window at ``now`` (after ``to``, or
    starting at it)."""
    return (
        f"{pipeline}: partitions {skipped} are no window at {time_text(now)} "
        "(after to, or starting at it): nothing to read"
    )


def no_window_truth(spec: TimeSpec, now: datetime) -> PartitionTruth:
    """A key that is no window of the spec at ``now`` (after ``to``, or starting at it)."""
    return PartitionTruth(
        state="no window",
        reason=f"no window of the time watermark at {iso_utc(now)}: it starts at or after "
        f"`to` ({spec.to}); nothing to read",
    )


def time_asset_metadata(
    pipeline: TimePipelineConfig | UnitPipelineConfig, time: TimeWatermarkConfig
) -> dict[str, Any]:
    """The definition metadata of an asset with a time watermark (time, or time x unit)."""
    return {
        "table_uri": pipeline.table.uri,
        "source": pipeline.source.location,
        "source_type": pipeline.source.type,
        "time_column": time.column,
        "time_from": time.from_,
        "time_to": time.to,
        "time_partition": time.partition,
        "grace_days": time.grace_days,
        "abstinent_days": time.abstinent_days,
    }


def build_time_asset(
    pipeline: TimePipelineConfig,
    partitions_def: TimeWindowPartitionsDefinition | None,
    clock: Clock,
) -> AssetsDefinition:
    """The pipeline's asset: partitioned (a run replaces its partitions' windows) or, for
    ``partition: none``, one run reads the effective range ``[cut-off, to)``."""
    spec = pipeline.watermark.spec

    def time_run(run: AssetRun) -> AssetOutcome:
        now = clock()
        watermark, _ = load_time_watermark(pipeline)
        due = watermark.due_at(spec, now)
        skipped: list[str] = []
        record_as: Callable[[TimeWindow], TimeWindow] | None = None
        if partitions_def is None:
            effective = due.effective_range
            chosen = [] if effective is None else [effective]
            record_as = _the_one_window(due)
            if effective is None:
                run.info(f"{pipeline.name}: nothing to read: {due.explain()}")
        else:
            chosen, skipped = windows_of_keys(spec, run.partitions, now)
            if skipped:
                run.info(no_window_line(pipeline.name, skipped, now))
        run.info(f"{pipeline.name}: cut-off {due.cut_off}")
        check_source(pipeline)  # before Spark: a clear error, not Spark's
        result = run_windows(
            pipeline,
            chosen,
            run.spark,
            run_id=run.run_id,
            job_name=run.job_name,
            clock=clock,
            log=run.info,
            record_as=record_as,
        )
        rows = table_row_count(pipeline.table.uri)
        truths: dict[str, PartitionTruth] = {}
        if partitions_def is not None:  # each partition's own state, whatever the run read
            after = result.watermark_after
            due_after = after.due_at(spec, now)
            truths = {key: no_window_truth(spec, now) for key in skipped}
            truths |= {
                partition_key(spec, w): window_truth(w, after.high_watermark(w), due_after)
                for w in chosen
            }
        metadata = time_metadata(result, due, skipped, table_rows=rows)
        # rows whose time column is NULL fall in no window: counted, left in the source
        nulls = count_null_watermark(column_spec(pipeline), run.spark)
        metadata[v.ROWS_NULL_WATERMARK] = null_watermark_rows(nulls)
        return AssetOutcome(metadata, pipeline.table.uri, per_partition=AssetOutcome.truths(truths))

    decorator = asset(
        key=asset_key(pipeline),
        description=describe(pipeline),
        group_name="watermark_time_ingestion",
        kinds={"spark", "delta"},
        metadata=time_asset_metadata(pipeline, pipeline.watermark),
        op_tags={PIPELINE_TAG: pipeline.name},
        partitions_def=partitions_def,
        backfill_policy=None if partitions_def is None else BackfillPolicy.single_run(),
    )
    return run_asset(decorator, time_run)


def _the_one_window(due: DueWindows) -> Callable[[TimeWindow], TimeWindow]:
    """An unpartitioned run reads ``[cut-off, to)`` and records the one window ``[from, to)``
    (one entry, whose high watermark is the last run's ``to``)."""
    return lambda _read: due.of[0]


@dataclass(frozen=True)
class TimeTick:
    """One tick's decision: the windows due and their partition keys (empty for ``none``)."""

    due: DueWindows
    keys: tuple[str, ...]
    #: ``partition: none``: whether the effective range is not empty (one run is due)
    unpartitioned_due: bool
    #: the cut-off rounded down to a window boundary (to the day for ``none``): the sensor's run
    #: keys carry it, so a window is requested again only once the cut-off crosses a boundary
    #: (a partial window's ``to`` moves the cut-off on every run; a fast sensor must not
    #: re-run the windows of the grace period on every tick)
    epoch: datetime

    @property
    def runs(self) -> bool:
        return bool(self.keys) or self.unpartitioned_due


def decide_tick(pipeline: TimePipelineConfig, now: datetime) -> TimeTick:
    """The windows due at ``now``: the time watermark is read from the Delta log once."""
    spec = pipeline.watermark.spec
    watermark, _ = load_time_watermark(pipeline)
    due = watermark.due_at(spec, now)
    at = due.cut_off.at
    if spec.partitioning is Partitioning.NONE:
        epoch = at.replace(hour=0, minute=0, second=0, microsecond=0)
        return TimeTick(due, (), due.effective_range is not None, epoch)
    key = _key_maker(partition_fmt(spec))  # once: a first tick may request thousands of keys
    return TimeTick(due, tuple(key(w.start) for w in due.windows), False, cut_off_epoch(due))


def cut_off_epoch(due: DueWindows) -> datetime:
    """The cut-off rounded down to the start of its window (:attr:`TimeTick.epoch`)."""
    at = due.cut_off.at
    index = due.of.index_containing(at)
    return at if index is None else due.of.boundary(index)


@dataclass(frozen=True)
class TickRequests:
    """What one tick requests: the runs, the keys left out because a run of theirs is in
    flight, and how many due keys wait for later ticks (``schedule.max_runs_per_tick``)."""

    runs: list[RunRequest]
    in_flight: list[str]
    #: the due keys left for later ticks, oldest first
    deferred_keys: tuple[str, ...] = ()

    @property
    def deferred(self) -> int:
        return len(self.deferred_keys)


def tick_requests(
    pipeline: TimePipelineConfig, tick: TimeTick, busy: set[str], suffix: Callable[[str], str]
) -> TickRequests:
    """Run requests for the tick's keys, oldest first, at most ``schedule.max_runs_per_tick``;
    the keys with a run in flight are left out (and returned).

    Run key: the window, the cut-off's :attr:`TimeTick.epoch`, and ``suffix(base)`` (a sensor:
    an attempt counter, so a failed run's window gets a new key; a schedule: the tick's time).
    """
    cut = format_instant(tick.epoch)
    if not tick.keys and tick.unpartitioned_due:
        if "" in busy:
            return TickRequests([], ["(unpartitioned)"])
        base = f"{pipeline.name}|{cut}"
        tags = {
            PIPELINE_TAG: pipeline.name,
            TICK_TAG: base,
            **pipeline_partition_tags(pipeline.name),
        }
        return TickRequests([RunRequest(run_key=f"{base}|{suffix(base)}", tags=tags)], [])
    cap = pipeline.schedule.max_runs_per_tick
    requests: list[RunRequest] = []
    waiting: list[str] = []
    for index, key in enumerate(tick.keys):
        if key in busy:
            waiting.append(key)
            continue
        if len(requests) == cap:
            later = tick.keys[index:]
            return TickRequests(requests, waiting, tuple(k for k in later if k not in busy))
        base = f"{key}|{cut}"
        requests.append(
            RunRequest(
                run_key=f"{base}|{suffix(base)}",
                partition_key=key,
                tags={
                    PIPELINE_TAG: pipeline.name,
                    TICK_TAG: base,
                    **pipeline_partition_tags(pipeline.name, key),
                },
            )
        )
    return TickRequests(requests, waiting)


def tick_message(tick: TimeTick, requested: TickRequests, cap: int) -> str:
    text = tick.due.explain()
    waiting = requested.in_flight
    if waiting:
        shown = ", ".join(waiting[:10]) + (
            f", ... ({len(waiting) - 10} more)" if len(waiting) > 10 else ""
        )
        text += f"; waiting for the runs in flight of {shown}"
    if requested.deferred:
        text += (
            f"; {len(requested.runs)} run(s) requested, {requested.deferred} due window(s) wait "
            f"for later ticks (schedule.max_runs_per_tick {cap})"
        )
    return text


def waiting_truths(tick: TimeTick, requested: TickRequests, cap: int) -> dict[str, PartitionTruth]:
    """The due windows this tick does not request, each saying on its own page what it waits
    for: the run in flight over it, or a later tick (``schedule.max_runs_per_tick``)."""
    cut = tick.due.cut_off
    spans = {key: window for key, window in zip(tick.keys, tick.due.windows, strict=False)}

    def due(key: str) -> str:
        window = spans[key]
        why = (
            "it has no history yet (never read, or its first run failed)"
            if window in tick.due.new
            else f"it ends after the cut-off {iso_utc(cut.at)} (grace_days {cut.grace_days})"
        )
        return f"[{iso_utc(window.start)}, {iso_utc(window.end)}) is due: {why}"

    truths = {
        key: PartitionTruth(
            state="waiting",
            reason=f"{due(key)}; it waits for the run in flight over this partition, and the "
            "first tick after that run ends requests it",
        )
        for key in requested.in_flight
        if key in spans
    }
    truths |= {
        key: PartitionTruth(
            state="waiting",
            reason=f"{due(key)}; it waits for a later tick: a tick requests at most "
            f"schedule.max_runs_per_tick {cap} runs, oldest windows first",
        )
        for key in requested.deferred_keys
        if key in spans
    }
    return truths


def _busy(
    context: SensorEvaluationContext | ScheduleEvaluationContext,
    asset_key: AssetKey,
    job_name: str,
    partitions_def: TimeWindowPartitionsDefinition | None,
) -> set[str]:
    if partitions_def is not None:
        return partitions_in_flight(context, asset_key, job_name, partitions_def)  # type: ignore[arg-type]
    from dagster import RunsFilter

    runs = context.instance.get_runs(
        filters=RunsFilter(job_name=job_name, statuses=IN_FLIGHT), limit=1
    )
    return {""} if runs else set()


def build_time_sensor(
    pipeline: TimePipelineConfig,
    job: UnresolvedAssetJobDefinition,
    asset_key: AssetKey,
    partitions_def: TimeWindowPartitionsDefinition | None,
    clock: Clock,
) -> SensorDefinition:
    """The event-driven tick, ``{pipeline}_sensor``: requests exactly the windows due (run key:
    the window and the cut-off it is due after, plus an attempt counter after a failed run)."""
    settings = pipeline.schedule

    @sensor(
        name=names.sensor_name(pipeline.name),
        job=job,
        minimum_interval_seconds=settings.minimum_interval_seconds,
        default_status=sensor_status(settings.running_by_default),
        description=f"Requests the windows of {pipeline.name} due by its time watermark "
        "(end after the cut-off, or no history), and says why.",
    )
    def time_sensor(context: SensorEvaluationContext) -> SensorResult:
        tick = decide_tick(pipeline, clock())
        if not tick.runs:
            return SensorResult(skip_reason=tick.due.explain())
        busy = _busy(context, asset_key, job.name, partitions_def)
        attempts = FailedAttempts(context, TICK_TAG)
        requested = tick_requests(pipeline, tick, busy, lambda base: f"a{attempts(base)}")
        note = source_schema_note(column_spec(pipeline))  # one schema read of the source
        message = tick_message(tick, requested, settings.max_runs_per_tick) + note
        said = changed_observations(
            context.instance,
            asset_key,
            waiting_truths(tick, requested, settings.max_runs_per_tick),
        ) + schema_observations(context.instance, asset_key, note)
        return requested_or_skipped(
            context, pipeline.name, message, requested.runs, asset_events=said
        )

    return time_sensor


def tick_time(context: ScheduleEvaluationContext, clock: Clock) -> datetime:
    """The time a schedule tick decides at: its scheduled execution time (UTC), or ``clock()``
    for a tick without one (a schedule evaluated by hand, e.g. ``build_schedule_context()``)."""
    if context._scheduled_execution_time is None:  # the public property raises then
        return clock()
    return ensure_utc(context.scheduled_execution_time)


def build_time_schedule(
    pipeline: TimePipelineConfig,
    job: UnresolvedAssetJobDefinition,
    asset_key: AssetKey,
    partitions_def: TimeWindowPartitionsDefinition | None,
    clock: Clock,
) -> ScheduleDefinition:
    """``{pipeline}_schedule``: on the partitioning's cron (or ``schedule.cron``), requests
    exactly the windows due at the tick, and says why.

    A tick decides at its own time, ``context.scheduled_execution_time`` (:func:`tick_time`),
    not when the daemon gets to it: a tick evaluated late requests what was due at its time,
    under the same run keys (a repeated tick launches nothing twice)."""
    settings = pipeline.schedule
    cron = settings.cron or partition_cron(pipeline.watermark.spec)

    def evaluate(context: ScheduleEvaluationContext) -> Iterator[RunRequest | SkipReason]:
        now = tick_time(context, clock)
        tick = decide_tick(pipeline, now)
        if not tick.runs:
            yield SkipReason(tick.due.explain())
            return
        busy = _busy(context, asset_key, job.name, partitions_def)
        at = format_instant(now)
        requested = tick_requests(pipeline, tick, busy, lambda base: f"tick {at}")
        message = tick_message(tick, requested, settings.max_runs_per_tick)
        if not requested.runs:
            yield SkipReason(message)
            return
        context.log.info(f"{pipeline.name}: {message}")
        yield from requested.runs

    return ScheduleDefinition(
        name=names.schedule_name(pipeline.name),
        cron_schedule=cron,
        execution_timezone="UTC",
        job=job,
        execution_fn=evaluate,
        default_status=DefaultScheduleStatus.RUNNING
        if settings.running_by_default
        else DefaultScheduleStatus.STOPPED,
        description=f"Requests the windows of {pipeline.name} due at each tick ({cron}, UTC).",
    )


def build_time_pipeline(pipeline: TimePipelineConfig, clock: Clock) -> PipelineDefs:
    """Everything of one time pipeline (the time kind's ``dagster_defs``, ``kinds/time/kind.py``):
    fresh within a window's cadence (``schedule.cron``, else the partitions') and its grace."""
    partitions_def = time_partitions(pipeline.watermark.spec)
    asset_def = build_time_asset(pipeline, partitions_def, clock)
    checks = build_column_checks(pipeline, asset_def.key)
    job = pipeline_job(
        pipeline.name,
        asset_def,
        checks,
        partitions_def,
        f"Reads and replaces windows of {pipeline.name}'s time watermark (one commit per run).",
    )
    schedule = build_time_schedule(pipeline, job, asset_def.key, partitions_def, clock)
    sensor_def = build_time_sensor(pipeline, job, asset_def.key, partitions_def, clock)
    cron = pipeline.schedule.cron or partition_cron(pipeline.watermark.spec)
    grace = timedelta(days=pipeline.watermark.grace_days)
    return PipelineDefs(
        asset_def,
        checks,
        job,
        sensor_def,
        schedule,
        freshness=freshness_policy(pipeline.freshness, cron_cadence(cron), grace),
        column_schema=source_schema(pipeline.source),
    )
