"""One batch of an event-time window aggregate over an ingested Delta table (issue 9, batch path).

Structured Streaming's semantics, in one Dagster run (seed 004):

1. The rows appended to each upstream table (an *input*) since the last batch (its Delta
   versions ``(upstream_version, upstream_to]``, add actions with a data change) are read by
   Spark, tagged with their input's name (column ``_input``). When those versions cannot be read
   any more (their commits cleaned from the upstream's log, or their files compacted and
   vacuumed), the batch reads by event time instead: every row of a window still open, from the
   current snapshot, and its state is replaced rather than merged
   (``kinds/event_time/upstream.py``);
   the rows appended since into closed windows (or without an event time) are found by
   counting each closed window's rows against the output's ``_rows`` and the late table, and
   are late rows like any other (``kinds/event_time/recover.py``).
2. A row is late when its window was already closed by the watermark committed before this batch
   started less the allowed lateness (0 by default, as in Spark; a lateness holds windows open
   that much longer), or when its event time is null. Spark would drop it; here
   it goes to the late-records table with the reason, that watermark and the run.
3. The other rows' partial aggregates (``spark/window_agg.py``) are merged with the partials kept
   in the state table for the windows still open.
4. The tracker (``core/event_time``) computes the next watermark from this batch's event times,
   input by input (max - delay), combined by its policy (min by default; idle inputs left
   out). The windows it closes (``end <= watermark - lateness``) are finalised into the
   output table, one row per window, in window order (append only: a window is emitted once,
   never early). The windows still open are the new state; the emitted ones leave it.

Exactly once across three tables. Every batch has a number ``b`` (the state table's txn version
of ``watermark_assets/{pipeline}/event_window``, +1) and three commits, in this order, each with
the txn ``(app, b)``: the output (with the batch's *plan*: the upstream range and both
watermarks), the late records, then the state (its files replaced, with the new watermark and
upstream version). A table that already holds txn ``b`` is not committed again. A run that dies
between two commits is re-run with the plan the output commit recorded, so it recomputes exactly
the same rows (same upstream files, same state, same watermarks) and commits only what is missing.
Two runs at once: the second one's commit of ``b`` is stale (the txn moved) and it stops without
committing anything more.

The plan and the progress are also kept by the state store of the state table
(``kinds/event_time/progress.py``), written before the output commit and after the state commit: a
checkpoint keeps the txn versions but not the commits' ``commitInfo``, so the progress is read
from that file and the state commits after it, and the aggregate's own tables can be
compacted, vacuumed and have their logs cleaned between any two runs.

Spark plans and writes; the driver collects one row of statistics and one count.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from watermark_assets import names, storage
from watermark_assets.core.clock import ensure_utc, system_clock
from watermark_assets.core.event_time import (
    EventTimeStats,
    EventTimeWatermark,
    TumblingWindows,
    WatermarkTracker,
)
from watermark_assets.core.replace_window import Interval, ReplaceWindow
from watermark_assets.core.text import millis_text
from watermark_assets.core.time.instant import from_millis, to_millis
from watermark_assets.delta.committer import DeltaCommitter, TxnVersion, committer_for
from watermark_assets.delta.log import CommitRecord
from watermark_assets.engine.write import (
    Append,
    Replace,
    ReplaceTable,
    RunRecord,
    StagedFiles,
    WriteMode,
    write,
)
from watermark_assets.exceptions import (
    ConcurrentWriteError,
    DeltaCommitError,
    EventProgressLostError,
    EventWindowConflictError,
)
from watermark_assets.kinds.event_time.progress import (
    BatchPlan,
    Progress,
    ProgressEntry,
    ProgressFile,
    WindowProgress,
    progress_store,
    read_progress,
    write_committed,
    write_planned,
)
from watermark_assets.kinds.event_time.recover import (
    Recovery,
    account,
    appended_since,
    find_late_rows,
    missing_rows,
)
from watermark_assets.kinds.event_time.upstream import ReadBounds, UpstreamRead, plan_reads
from watermark_assets.runs.faults import crash_point, pause_point
from watermark_assets.spark import io, window_agg
from watermark_assets.spark.window_agg import ROWS_OUTPUT, ROWS_PARTIAL, WINDOW_START, Aggregate
from watermark_assets.staging import (
    list_parquet,
    remove_stale_staging,
    remove_tree,
    staging_dir,
)
from watermark_assets.state.store import StateStore

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# The late-record columns, shared with the streaming engine (``spark/window_agg.py``).
LATE_BATCH = window_agg.LATE_BATCH
LATE_REASON = window_agg.LATE_REASON
LATE_RUN = window_agg.LATE_RUN
LATE_WATERMARK = window_agg.LATE_WATERMARK


@dataclass(frozen=True, kw_only=True)
class WindowAggregateSpec:
    """Everything a batch needs, as plain values (the Dagster edge builds it from the config)."""

    pipeline: str
    #: input name -> its upstream Delta table (one for a single upstream pipeline)
    upstreams: Mapping[str, str]
    event_column: str
    tracker: WatermarkTracker
    windows: TumblingWindows
    aggregates: tuple[Aggregate, ...]
    output_uri: str
    late_uri: str
    state_uri: str
    lateness_ms: int = 0
    #: keep: late rows go to the late table (Spark drops them); update: a late row reopens its
    #: emitted window, whose output row is recomputed from every upstream row and replaced
    late_policy: str = "keep"

    def __post_init__(self) -> None:
        if self.late_policy not in ("keep", "update"):
            raise ValueError(f"late_policy {self.late_policy!r} is not keep or update")
        window_agg.distinct_column(self.aggregates)  # refuses two count_distinct columns
        if set(self.upstreams) != set(self.tracker.delays_ms):
            raise ValueError(
                f"inputs {sorted(self.upstreams)} and the tracker's "
                f"{sorted(self.tracker.delays_ms)} differ: every input has exactly one delay"
            )

    @property
    def app_id(self) -> str:
        return names.event_window_app_id(self.pipeline)

    @property
    def state_key(self) -> str:
        return names.event_time_key(self.pipeline)

    @property
    def plan_key(self) -> str:
        return names.event_window_plan_key(self.pipeline)

    def progress(self) -> StateStore[Progress]:
        """The progress in the state store of the state table (``kinds/event_time/progress.py``)."""
        return progress_store(
            pipeline=self.pipeline,
            state_uri=self.state_uri,
            app_id=self.app_id,
            state_key=self.state_key,
            inputs=self.upstreams,
        )

    @property
    def progress_uri(self) -> str:
        """Where the progress file lives."""
        return self.progress().location


@dataclass(frozen=True, kw_only=True)
class WindowBatchResult:
    """What one run did (the materialization metadata). ``batch`` is None when nothing new was
    there to read (nothing committed); ``resumed``: the batch's output was committed by a run
    that died, and this run committed the rest."""

    batch: int | None
    reason: str
    watermark_before: EventTimeWatermark
    watermark_after: EventTimeWatermark
    rows_read: int = 0
    late_rows: int = 0
    windows_emitted: int = 0
    windows_open: int = 0
    #: input -> the upstream versions this batch read (first, last)
    upstream_ranges: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    versions: Mapping[str, int | None] = field(default_factory=dict)
    resumed: bool = False
    #: "versions": the rows the upstream commits appended; "event_time": those versions were
    #: gone, every row of a window still open was read again (``kinds/event_time/upstream.py``)
    read_by: str = "versions"
    #: read by event time: rows appended since into windows already closed (or without an event
    #: time) that could not be found (``kinds/event_time/recover.py``: only windows emitted before
    #: the output counted its rows); None: not countable
    late_unidentified: int | None = 0
    #: read by event time: of ``late_rows``, those found by counting in closed windows (their
    #: versions gone), and of these the ones whose identity is inferred
    late_recovered: int = 0
    late_inferred: int = 0
    #: read by event time: why, and how the rows appended since are accounted for ("" else)
    read_note: str = ""
    #: what crashed runs left under the output, late and state tables, removed before the read
    #: (:func:`~watermark_assets.staging.remove_stale_staging`)
    leftovers_removed: tuple[str, ...] = ()


def load_progress(spec: WindowAggregateSpec) -> WindowProgress:
    """The progress of the batch the state table holds (empty before the first): the state
    store's file and the state commits after it (``kinds/event_time/progress.py``)."""
    return _load(spec)[0]


def _load(spec: WindowAggregateSpec) -> tuple[WindowProgress, ProgressFile]:
    file = read_progress(spec.progress())
    batch = file.committed
    if batch == 0:
        empty = WindowProgress(
            batch=0,
            watermark=EventTimeWatermark.empty(),
            upstream_versions={name: -1 for name in spec.upstreams},
            open_windows=0,
            upstream_rows={name: 0 for name in spec.upstreams},
            open_rows=0,
        )
        return empty, file
    entry = file.entries.get(batch)
    if entry is None:
        raise EventProgressLostError(spec.pipeline, spec.state_uri, batch, spec.progress_uri)
    return entry.progress, file


def _commit_of_batch(committer: DeltaCommitter, app_id: str, batch: int) -> CommitRecord | None:
    """The commit of ``committer``'s table holding txn ``(app_id, batch)``, searched from the
    newest (only this pipeline writes these tables, besides maintenance: it is the newest, or
    close to it); None when the log no longer has it (cleaned up after a checkpoint)."""
    version = committer.current_version()
    while version is not None and version >= 0:
        try:
            record = committer.read_commit(version)
        except DeltaCommitError:
            return None  # this commit and the older ones were cleaned up
        if record.txns.get(app_id) == batch:
            return record
        version -= 1
    return None


def recorded_plan(
    spec: WindowAggregateSpec, batch: int, file: ProgressFile | None = None
) -> BatchPlan | None:
    """The plan of ``batch`` if its output commit was made (a run died after it), else None:
    from that commit (atomic with the output), or, once its log was cleaned up, from the
    progress file (written before the commit); a plan ``repair-state`` replanned, from the
    file."""
    output = committer_for(spec.output_uri)
    if (output.transaction_version(spec.app_id) or 0) < batch:
        return None
    file = file or read_progress(spec.progress())
    entry = file.entries.get(batch)
    if entry is not None and entry.plan is not None and entry.plan.replanned_from is not None:
        return entry.plan  # ``repair-state`` moved it on (:func:`replan_batch`)
    record = _commit_of_batch(output, spec.app_id, batch)
    if record is not None:
        return BatchPlan.from_json(record.custom_metadata[spec.plan_key])
    if entry is None or entry.plan is None:
        raise EventProgressLostError(spec.pipeline, spec.output_uri, batch, spec.progress_uri)
    return entry.plan


def replan_batch(spec: WindowAggregateSpec) -> str:
    """``watermark-assets repair-state PIPELINE``: the batch in flight (its output committed by
    a run that died) whose recorded plan reads upstream versions that are gone
    (:class:`~watermark_assets.exceptions.UpstreamHistoryLostError`) is moved to the upstreams'
    current versions: its plan in the progress file keeps its watermarks and names the versions
    it replaced (``replanned_from``). The next run finishes it from them by event time: the open
    windows from every row they hold now, and the rows appended since into the windows already
    emitted (by it too) found by counting and kept as late (``kinds/event_time/recover.py``). What
    was
    done, as one line."""
    from dataclasses import replace

    from watermark_assets.exceptions import UpstreamHistoryLostError
    from watermark_assets.kinds.event_time.upstream import current_versions

    progress, file = _load(spec)
    batch = progress.batch + 1
    recorded = recorded_plan(spec, batch, file)
    if recorded is None:
        return (
            f"{spec.pipeline}: no batch in flight (batch {progress.batch} is committed in full): "
            "nothing to repair"
        )
    bounds = ReadBounds(
        event_column=spec.event_column,
        closed_ms=recorded.watermark_after.watermark_ms - spec.lateness_ms,
        window_ms=spec.windows.size_ms,
    )
    try:
        plan_reads(
            spec.upstreams,
            progress.upstream_versions,
            recorded.upstream_to,
            bounds,
            pipeline=spec.pipeline,
            batch=batch,
            replanned=recorded.replanned_from is not None,
        )
    except UpstreamHistoryLostError as exc:
        if not exc.repairable:
            raise
        lost = f"input {exc.input_name!r}: {exc.missing}"
    else:
        return (
            f"{spec.pipeline}: batch {batch} is in flight and the upstream versions its plan "
            f"reads ({dict(recorded.upstream_to)}) are all there: nothing to repair, the next run "
            "finishes it"
        )
    versions, rows = current_versions(spec.upstreams)
    plan = replace(
        recorded,
        upstream_to=versions,
        upstream_rows=rows,
        replanned_from=recorded.replanned_from or dict(recorded.upstream_to),
    )
    entry = file.entries.get(batch)
    # the entry's progress is rewritten by the run before its next commit
    write_planned(file, ProgressEntry(plan, entry.progress if entry else progress, None))
    return (
        f"{spec.pipeline}: batch {batch}'s plan moved from upstream versions "
        f"{dict(plan.replanned_from or {})} to {versions} ({lost}); the next run finishes the "
        "batch from them by event time"
    )


@dataclass(frozen=True)
class NextBatch:
    """The next batch as planned from the progress and the upstreams' logs, before any row is
    read: a crashed batch's recorded plan (finished as planned), else the versions each
    upstream added since the last batch (:func:`plan_window_batch`)."""

    progress: WindowProgress
    file: ProgressFile
    batch: int
    #: the plan of ``batch`` recorded by a run that died after its output commit, or None
    recorded: BatchPlan | None
    #: the committed watermark
    before: EventTimeWatermark
    #: the watermark the output is complete to: a replanned batch's output is already committed
    bound: EventTimeWatermark
    bounds: ReadBounds
    reads: Mapping[str, UpstreamRead]

    @property
    def replanned(self) -> bool:
        """The recorded plan was moved to newer upstream versions by ``repair-state``."""
        return self.recorded is not None and self.recorded.replanned_from is not None

    @property
    def by_event_time(self) -> bool:
        return any(r.by_event_time for r in self.reads.values())

    @property
    def nothing_new(self) -> bool:
        """No batch to finish and no row appended upstream: a run commits nothing."""
        return (
            self.recorded is None
            and not self.by_event_time
            and not any(read.files for read in self.reads.values())
        )

    @property
    def nothing_new_reason(self) -> str:
        versions = self.progress.upstream_versions
        return (
            "no rows appended upstream since versions "
            + ", ".join(f"{name} {version}" for name, version in versions.items())
            + " (-1: none yet): nothing to do, the watermark stays at "
            + millis_text(self.before.watermark_ms)
        )


def plan_window_batch(spec: WindowAggregateSpec) -> NextBatch:
    """The next batch's plan (:class:`NextBatch`): reads the progress and the upstreams' logs,
    writes nothing."""
    progress, file = _load(spec)
    batch = progress.batch + 1
    recorded = recorded_plan(spec, batch, file)
    before = progress.watermark
    replanned = recorded is not None and recorded.replanned_from is not None
    # the watermark the output is complete to: a replanned batch's output is already committed
    bound = recorded.watermark_after if recorded is not None and replanned else before
    bounds = ReadBounds(
        event_column=spec.event_column,
        closed_ms=None if bound.is_empty else bound.watermark_ms - spec.lateness_ms,
        window_ms=spec.windows.size_ms,
    )
    reads = plan_reads(
        spec.upstreams,
        progress.upstream_versions,
        recorded.upstream_to if recorded else None,
        bounds,
        pipeline=spec.pipeline,
        batch=batch,
        replanned=replanned,
    )
    return NextBatch(progress, file, batch, recorded, before, bound, bounds, reads)


def run_window_batch(
    spark: SparkSession, spec: WindowAggregateSpec, *, now: datetime, run_id: str
) -> WindowBatchResult:
    """Run the next batch (module docstring); nothing is committed when nothing new is there."""
    from pyspark.sql import functions as F

    planned = plan_window_batch(spec)
    progress, file, batch = planned.progress, planned.file, planned.batch
    recorded, before, bound = planned.recorded, planned.before, planned.bound
    bounds, reads = planned.bounds, planned.reads
    by_event_time = planned.by_event_time
    paths = {name: list(read.files) for name, read in reads.items()}
    if planned.nothing_new:
        return WindowBatchResult(
            batch=None,
            reason=planned.nothing_new_reason,
            watermark_before=before,
            watermark_after=before,
            windows_open=progress.open_windows,
        )
    leftovers = tuple(  # what crashed runs left
        name
        for uri in (spec.output_uri, spec.late_uri, spec.state_uri)
        for name in remove_stale_staging(uri, now)
    )
    framed = window_agg.with_window(
        _read_inputs(spark, spec, paths),
        spec.event_column,
        spec.windows.size_ms,
        spec.windows.origin_ms,
    )
    late = _late_condition(spec, before)
    if by_event_time:  # rows of closed windows read again are not new: left out
        again = [name for name, read in reads.items() if read.by_event_time]
        closed = window_agg.late_condition(spec.event_column, bounds.closed_ms)
        framed = framed.where(~(F.col(INPUT_COLUMN).isin(again) & closed))
    now_ms = to_millis(ensure_utc(now))
    partitionings = {
        name: _partitioning(spec.upstreams[name], files) for name, files in paths.items() if files
    }
    rows, stats, late_rows = _statistics(framed, spec.event_column, late, partitionings)
    recovery = Recovery()
    accounting = ""
    unidentified: int | None = 0
    try:
        if by_event_time:  # the late rows of the versions gone: counted, found, kept
            appended = appended_since(reads, progress)
            # replanned, the open windows are those the plan's watermark left open, not the
            # state's: the statistics prove nothing, every closed window is counted
            missing = None if planned.replanned else missing_rows(appended, progress, rows)
            if missing != 0:
                recovery = find_late_rows(
                    spark,
                    spec,
                    reads,
                    batch=batch,
                    bound_ms=None if bound.is_empty else bound.watermark_ms,
                )
            if recovery.frame is not None:
                framed = framed.unionByName(recovery.frame, allowMissingColumns=True)
                late = late | F.col(LATE_REASON).isNotNull()
                rows, stats, late_rows = _statistics(framed, spec.event_column, late, partitionings)
            stats, unidentified, accounting = account(reads, appended, missing, stats, recovery)
        after = (
            recorded.watermark_after if recorded else spec.tracker.observe(before, stats, now_ms)
        )
        plan = recorded or BatchPlan(
            batch=batch,
            upstream_from=dict(progress.upstream_versions),
            upstream_to={name: read.read_to for name, read in reads.items()},
            watermark_before=before,
            watermark_after=after,
            upstream_rows={name: read.rows for name, read in reads.items()},
        )
        token = f"{ensure_utc(now):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
        emitted, open_windows, versions = _commit_batch(
            spark,
            spec,
            plan,
            framed,
            late,
            token=token,
            run_id=run_id,
            now_ms=now_ms,
            file=file,
            replace_state=by_event_time,
            sealed=recorded is not None,
        )
    finally:
        recovery.release()
    return WindowBatchResult(
        batch=batch,
        reason=(
            f"batch {batch}: {rows} row(s) {'read' if by_event_time else 'appended upstream'}, "
            f"{late_rows} late, {emitted} window(s) emitted, "
            f"{open_windows} open; {spec.tracker.explain(before, after, now_ms)}{accounting}"
        ),
        watermark_before=before,
        watermark_after=plan.watermark_after,
        rows_read=rows,
        late_rows=late_rows,
        windows_emitted=emitted,
        windows_open=open_windows,
        upstream_ranges={
            name: (plan.upstream_from[name] + 1, plan.upstream_to[name])
            for name in plan.upstream_to
            if plan.upstream_to[name] > plan.upstream_from[name]
        },
        versions=versions,
        resumed=recorded is not None,
        read_by="event_time" if by_event_time else "versions",
        late_unidentified=unidentified,
        late_recovered=recovery.rows,
        late_inferred=recovery.inferred,
        read_note=accounting.removeprefix("; "),
        leftovers_removed=leftovers,
    )


INPUT_COLUMN = "_input"


def _read_inputs(
    spark: SparkSession, spec: WindowAggregateSpec, paths: Mapping[str, Sequence[str]]
) -> DataFrame:
    """The rows of every input's new files, tagged with the input's name (``_input``); the
    inputs' columns are unioned by name (a column one input lacks is null in its rows)."""
    from pyspark.sql import functions as F

    frames = []
    for name, files in paths.items():
        if not files:
            continue
        frame = io.read_files(spark, files, format="parquet", base_path=spec.upstreams[name])
        frames.append(frame.withColumn(INPUT_COLUMN, F.lit(name)))
    if not frames:
        raise DeltaCommitError(
            f"pipeline {spec.pipeline!r}: the batch's plan names upstream versions whose files "
            "are gone from the upstream logs (cleaned up by log retention?); restore them or "
            "rebuild the aggregate's tables",
            table_uri=next(iter(spec.upstreams.values())),
        )
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame, allowMissingColumns=True)
    return union


def _late_condition(spec: WindowAggregateSpec, before: EventTimeWatermark) -> Column:
    """Late: a null event time, or a window already closed by ``before`` less the allowed
    lateness (before any data, the empty watermark, only the null ones)."""
    closed = None if before.is_empty else before.watermark_ms - spec.lateness_ms
    return window_agg.late_condition(spec.event_column, closed)


def _partitioning(upstream_uri: str, files: Sequence[str]) -> tuple[str, ...]:
    """The partition columns of an upstream table, read off the Hive-style folders of its
    newest appended file (``event_date=2024-01-30/part-0.parquet`` -> ``("event_date",)``)."""
    relative = files[-1][len(upstream_uri.rstrip("/")) + 1 :]
    return tuple(part.split("=", 1)[0] for part in relative.split("/")[:-1] if "=" in part)


def _statistics(
    framed: DataFrame,
    event_column: str,
    late: Column,
    partitionings: Mapping[str, tuple[str, ...]],
) -> tuple[int, dict[str, EventTimeStats], int]:
    """Rows, each input's event-time statistics (seed 004's ``EventTimeStats``, with the max
    event time of each partition of the input: its local watermarks) and the late rows: ONE
    Spark job, one row per partition of an input to the driver."""
    from pyspark.sql import functions as F

    millis = F.unix_millis(F.col(event_column))
    local = F.coalesce(
        *[
            F.when(F.col(INPUT_COLUMN) == F.lit(name), _partition_key(columns))
            for name, columns in partitionings.items()
        ],
        F.lit(""),
    )
    grouped = framed.groupBy(F.col(INPUT_COLUMN), local.alias("_local")).agg(
        F.count(F.lit(1)).alias("rows"),
        F.count(millis).alias("events"),
        F.min(millis).alias("min_ms"),
        F.max(millis).alias("max_ms"),
        F.sum(F.when(late, 1).otherwise(0)).alias("late"),
    )
    parts: dict[str, list[Any]] = {}
    rows = late_rows = 0
    for row in grouped.collect():
        parts.setdefault(row[INPUT_COLUMN], []).append(row)
        rows += int(row["rows"])
        late_rows += int(row["late"] or 0)
    stats: dict[str, EventTimeStats] = {}
    for name, of_input in parts.items():
        events = sum(int(r["events"]) for r in of_input)
        mins = [r["min_ms"] for r in of_input if r["min_ms"] is not None]
        maxes = {r["_local"]: r["max_ms"] for r in of_input if r["max_ms"] is not None}
        stats[name] = EventTimeStats(
            count=events,
            min_ms=min(mins) if mins else None,
            max_ms=max(maxes.values()) if maxes else None,
            local_max_ms=maxes,
            partitioning=partitionings.get(name, ()),
        )
    return rows, stats, late_rows


def _partition_key(columns: Sequence[str]) -> Column:
    """``col=value/col2=value2`` of a row (``col=null`` for a null value); '' unpartitioned."""
    from pyspark.sql import functions as F

    if not columns:
        return F.lit("")
    return F.concat_ws(
        "/",
        *[
            F.concat(F.lit(f"{c}="), F.coalesce(F.col(f"`{c}`").cast("string"), F.lit("null")))
            for c in columns
        ],
    )


def _commit_batch(
    spark: SparkSession,
    spec: WindowAggregateSpec,
    plan: BatchPlan,
    framed: DataFrame,
    late: Column,
    *,
    token: str,
    run_id: str,
    now_ms: int,
    file: ProgressFile,
    replace_state: bool = False,
    sealed: bool = False,
) -> tuple[int, int, dict[str, int | None]]:
    """Stage and commit the output, the late records and the new state, in that order, each only
    if its table does not hold the batch yet; the progress file before and after (module
    docstring). ``replace_state``: ``framed`` holds every row of the windows still open (a
    batch read by event time), so the state's partials are replaced, not merged into.
    ``sealed``: the output of the batch is committed already (a recorded plan), so under
    ``late_policy: update`` the late rows a read by event time found cannot reopen a window in
    it any more: they are kept in the late table. The windows emitted and open, and the
    versions."""
    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError
    from pyspark.sql import functions as F

    aggregates = spec.aggregates
    txn = TxnVersion(spec.app_id, plan.batch)
    reopened: Reopened | None = None
    kept_late = late
    if spec.late_policy == "update":
        kept_late = F.col(spec.event_column).isNull()  # only these have no window to reopen
        if sealed and LATE_REASON in framed.columns:
            kept_late = kept_late | F.col(LATE_REASON).isNotNull()
        reopened = _reopened(spark, spec, plan, framed.where(late & ~kept_late))
    late_rows = window_agg.late_records(
        framed,
        kept_late,
        event_column=spec.event_column,
        watermark_ms=plan.watermark_before.watermark_ms,
        run_id=run_id,
        batch=plan.batch,
    )
    current = window_agg.partials(framed.where(~late), aggregates)
    state_committer = committer_for(spec.state_uri)
    # a state table from before the row counts gets their column (nullable: the rows of its
    # windows are not counted until they close)
    state_committer.add_missing_columns(pa.schema([(ROWS_PARTIAL, pa.int64())]))
    # and an output from before them gets ``_rows`` (null in the windows it emitted before)
    committer_for(spec.output_uri).add_missing_columns(pa.schema([(ROWS_OUTPUT, pa.int64())]))
    try:
        state_table: DeltaTable | None = DeltaTable(
            spec.state_uri, storage_options=storage.delta_options(spec.state_uri)
        )
    except TableNotFoundError:
        state_table = None
    state_version = -1 if state_table is None else state_table.version()
    state_files = [] if state_table is None else table_file_uris(spec.state_uri, state_table)
    merged = current
    if state_files and not replace_state:
        kept = io.read_files(spark, state_files, format="parquet")
        if ROWS_PARTIAL not in kept.columns:
            kept = kept.withColumn(ROWS_PARTIAL, F.lit(None).cast("long"))
        merged = window_agg.merge_partials(
            current.unionByName(kept.select(*current.columns)), aggregates
        )
    merged = merged.persist()
    try:
        # the allowed lateness holds windows open as long as it keeps their rows on time: a
        # window emitted while rows could still join it would be emitted twice
        closes = F.unix_millis(F.col(WINDOW_START)) + F.lit(spec.windows.size_ms) <= F.lit(
            plan.watermark_after.watermark_ms - spec.lateness_ms
        )
        output = (
            window_agg.finalise(merged.where(closes), aggregates, spec.windows.size_ms)
            .repartition(1)
            .sortWithinPartitions(WINDOW_START)
        )
        new_state = merged.where(~closes)
        counted = new_state.agg(
            F.count_distinct(F.col(WINDOW_START)).alias("windows"),
            F.sum(ROWS_PARTIAL).alias("rows"),
            F.count(F.when(F.col(ROWS_PARTIAL).isNull(), 1)).alias("uncounted"),
        ).first()
        assert counted is not None
        open_windows = int(counted["windows"])
        progress = WindowProgress(
            batch=plan.batch,
            watermark=plan.watermark_after,
            upstream_versions=dict(plan.upstream_to),
            open_windows=open_windows,
            upstream_rows=dict(plan.upstream_rows),
            open_rows=None if counted["uncounted"] else int(counted["rows"] or 0),
        )
        versions: dict[str, int | None] = {}
        emitted = 0
        output_meta = {spec.plan_key: plan.to_json()}
        state_meta = {spec.state_key: json.dumps(progress.to_dict())}
        output_committer = committer_for(spec.output_uri)
        unplanned = (output_committer.transaction_version(spec.app_id) or 0) < plan.batch
        if unplanned or plan.replanned_from is not None:
            # before the first commit: a crash after it finds the plan here too (a replanned
            # batch: its progress from the versions it now reads, before its next commit)
            try:
                write_planned(file, ProgressEntry(plan, progress, None))
            except ConcurrentWriteError as exc:
                raise EventWindowConflictError(
                    spec.pipeline, plan.batch, spec.progress_uri, exc.detail
                ) from exc
        stages = (
            ("output", spec.output_uri, output, output_meta, None),
            ("late", spec.late_uri, late_rows, {spec.plan_key: plan.to_json()}, None),
            ("state", spec.state_uri, new_state, state_meta, state_version),
        )
        for name, uri, frame, metadata, replaces in stages:
            committer = committer_for(uri)
            if (committer.transaction_version(spec.app_id) or 0) >= plan.batch:
                record = _commit_of_batch(committer, spec.app_id, plan.batch)
                versions[name] = None if record is None else record.version  # None: cleaned up
                if name == "output" and record is not None:
                    emitted = sum(a.num_records or 0 for a in record.added)
                continue
            version, rows = _stage_and_commit(
                spec,
                frame,
                committer,
                name=name,
                token=token,
                txn=txn,
                metadata=metadata,
                replaces=replaces,
                now_ms=now_ms,
                reopened=reopened if name == "output" else None,
            )
            versions[name] = version
            crash_point(f"event_window_after_{name}")  # the exactly-once tests kill here
            if name == "output":
                emitted = rows
        write_committed(file, ProgressEntry(plan, progress, versions["state"]))
        return emitted, open_windows, versions
    finally:
        merged.unpersist()


def _reopened(
    spark: SparkSession, spec: WindowAggregateSpec, plan: BatchPlan, reopening: DataFrame
) -> Reopened | None:
    """``late_policy: update``: the range of emitted windows the late rows ``reopening`` fall
    in, recomputed from every row of the upstream tables at the plan's versions (this batch's
    rows included); None when no row reopens a window. The windows between the first and the
    last reopened one are recomputed too: the replace covers that whole range."""
    from pyspark.sql import functions as F

    # as epoch milliseconds: PySpark would hand timestamps back naive, in the process's zone
    millis = F.unix_millis(F.col(WINDOW_START))
    bounds = reopening.agg(F.min(millis), F.max(millis)).first()
    if bounds is None or bounds[0] is None:
        return None
    first, last = from_millis(int(bounds[0])), from_millis(int(bounds[1]))
    paths = {
        name: table_file_uris(uri, _snapshot_at(uri, plan.upstream_to[name]))
        for name, uri in spec.upstreams.items()
    }
    everything = window_agg.with_window(
        _read_inputs(spark, spec, paths),
        spec.event_column,
        spec.windows.size_ms,
        spec.windows.origin_ms,
    )
    start = F.col(WINDOW_START)
    inside = everything.where(start.isNotNull() & (start >= first) & (start <= last))
    rows = window_agg.finalise(
        window_agg.partials(inside, spec.aggregates), spec.aggregates, spec.windows.size_ms
    )
    return Reopened(first, last, rows.repartition(1).sortWithinPartitions(WINDOW_START))


def _snapshot_at(uri: str, version: int) -> Any:
    """The upstream at ``version``, or its newest snapshot once that version's log is gone: a
    row appended since into a reopened window is late when read, and reopens the same window
    again, which is recomputed from every row again (a replace: the same result)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    options = storage.delta_options(uri)
    try:
        return DeltaTable(uri, version=version, storage_options=options)
    except DeltaError:
        return DeltaTable(uri, storage_options=options)


def stage_frame(
    pipeline: str, frame: DataFrame, uri: str, label: str, token: str
) -> tuple[StagedFiles, Any, int]:
    """Spark writes ``frame`` under the table's staging folder (``_staging/{token}-{label}``):
    the read for :func:`commit_staged` (no file for no row), the schema (from Spark's Parquet,
    even for no row) and the rows (observed while writing). Both engines stage this way."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    staged = staging_dir(uri, f"{token}-{label}")
    observation = Observation(f"watermark_assets_{label}_{token.replace('-', '_')}")
    io.write_parquet(frame.observe(observation, F.count(F.lit(1)).alias("rows")), staged)
    rows = int(observation.get.get("rows", 0))
    files = list_parquet(staged)
    if not files:
        raise DeltaCommitError(
            f"Spark wrote no Parquet file for the {label} of {pipeline!r} under {staged!r} "
            "(not even an empty one, which carries the schema); re-run",
            table_uri=uri,
        )
    schema = storage.parquet_schema(files[0])
    crash_point(f"event_window_staged_{label}")  # the exactly-once tests kill here too
    pause_point(f"event_window_staged_{label}")  # and the concurrency test holds a run here
    return StagedFiles(f"{token}-{label}", staged, files if rows else ()), schema, rows


def commit_staged(
    pipeline: str,
    committer: DeltaCommitter,
    reads: Sequence[StagedFiles],
    mode: WriteMode,
    record: RunRecord,
    schema: Any,
    *,
    batch: int,
    now_ms: int | None = None,
) -> int | None:
    """The ONE commit of ``reads`` (:func:`~watermark_assets.engine.write.write`, which moves
    their files into the table); their staging folders are removed after it. Both engines
    commit this way. The version; :class:`EventWindowConflictError` when stale (another run
    committed ``batch`` or the table moved: the moved files are removed again)."""
    try:
        written = write(
            committer,
            reads,
            mode,
            record,
            schema=schema,
            partition_by=(),
            now=system_clock if now_ms is None else (lambda: from_millis(now_ms)),
        )
    finally:
        for each in reads:
            remove_tree(each.data_dir)
    if written.outcome.stale:
        raise EventWindowConflictError(pipeline, batch, committer.table_uri, written.outcome.reason)
    return written.outcome.version


@dataclass(frozen=True)
class Reopened:
    """``late_policy: update``: the emitted windows ``[first, last]`` (by start) that late rows
    reopened, and their rows recomputed from every upstream row; they replace those windows'
    rows in the same commit as the newly closed windows."""

    first: datetime
    last: datetime
    rows: DataFrame


def _stage_and_commit(
    spec: WindowAggregateSpec,
    frame: DataFrame,
    committer: DeltaCommitter,
    *,
    name: str,
    token: str,
    txn: TxnVersion,
    metadata: Mapping[str, str],
    replaces: int | None,
    now_ms: int,
    reopened: Reopened | None = None,
) -> tuple[int | None, int]:
    """Stage ``frame`` (:func:`stage_frame`) and make ONE commit adding it with ``txn`` and
    ``metadata`` (:func:`commit_staged`): an :class:`Append`; with ``replaces`` (the table
    version the batch read, -1: none), a :class:`ReplaceTable` removing every file of that
    snapshot; with ``reopened``, a :class:`Replace` of the reopened windows' rows by their
    recomputed rows, the newly closed windows' rows appended after them (``delta/replace.py``,
    pinned to the snapshot it planned on). The version and the rows added."""
    uri = committer.table_uri
    staged, schema, rows = stage_frame(spec.pipeline, frame, uri, name, token)
    reads = [staged]
    mode: WriteMode = Append() if replaces is None else ReplaceTable(replaces)
    if reopened is not None:
        try:
            again, _, again_rows = stage_frame(
                spec.pipeline, reopened.rows, uri, f"{name}-reopened", token
            )
        except BaseException:
            remove_tree(staged.data_dir)
            raise
        window = ReplaceWindow(WINDOW_START, reopened.first, reopened.last, Interval.CLOSED_CLOSED)
        reads, mode = [again, staged], Replace((window,), appended=1)
        rows += again_rows
    record = RunRecord((txn,), metadata, records_completion=True)  # a batch commits, rows or not
    version = commit_staged(
        spec.pipeline, committer, reads, mode, record, schema, batch=txn.version, now_ms=now_ms
    )
    return version, rows


def table_file_uris(table_uri: str, table: Any) -> list[str]:
    """The live data files of a deltalake snapshot as plain paths under ``table_uri``: not
    ``file_uris()``, whose URIs are percent-encoded (a space is ``%20``), which Spark would read
    as literal characters."""
    return [storage.join(table_uri, row["path"]) for row in pa_rows(table)]


def pa_rows(table: Any) -> list[dict[str, Any]]:
    """The flattened add actions of a deltalake table snapshot, as dicts."""
    import pyarrow as pa

    rows: list[dict[str, Any]] = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    return rows
