"""A run of a time pipeline (seed 003): its windows read, then replaced in ONE commit (no Dagster).

A window ``[start, end)`` of :func:`~watermark_assets.core.time.windows` is a replay chunk of the
column machinery (:mod:`watermark_assets.runs.column`): read with ``column >= start AND column <
end`` (pushed to the source: a filter for tables and files, a ``WHERE`` for JDBC, the lower bound
in ``watermark_param_mapping`` and the end in ``watermark_to_param`` for an HTTP API) and staged.
Once every window of the run is staged, :func:`~watermark_assets.runs.window_commit.
commit_windows` replaces them all (each ``[start, end)``, ``Interval.CLOSED_OPEN``) in ONE Delta
commit: a reader never sees a window emptied or a row in two windows between commits. That
commit also carries:

- the txn ``watermark_assets/{pipeline}/time/{window start}`` (:func:`window_app_id`) of every
  window: version 1, 2, ... per run of the window; a concurrent run of one of them makes the
  commit stale and the run plans and reads every window again;
- the entry ``watermark_assets.time/{pipeline}`` (:func:`time_metadata_key`): the
  :class:`~watermark_assets.core.time.TimeWatermark` read from the log up to ``read_version``
  with the run's windows' high watermarks recorded (each window's end, or ``to`` for the
  partial last window), plus the windows;
- with ``table.merge_keys``, the removal of the rows read's keys from the other windows
  (:class:`~watermark_assets.delta.replace.KeyMoves`: the newest row of a key wins).

So the windows' data and their high watermarks are ONE atomic commit.
:func:`load_time_watermark` reads the watermark back (:class:`TimeWatermarkLog`): the newest
entry, merged with the entries of the commits after its ``read_version`` (a union of covered
spans): two runs of different windows committing at once each carry what they saw, and the
merge keeps both.

A window that reads no row still commits (``records_completion``): its rows in the table are
removed (deleted at the source) and its high watermark is recorded; with no table yet that one
commit creates the table with the schema of the zero-row Parquet file Spark wrote for the read
(no data file), so an empty first window gets its history and is not run again on every tick.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from watermark_assets import names
from watermark_assets.config import TimePipelineConfig
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.column.lookback import ReadBound
from watermark_assets.core.column.watermark import ColumnValue, ColumnWatermark, GreaterOrEqual
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.replace_window import Interval, ReplaceWindow
from watermark_assets.core.time import TimeWatermark, format_instant
from watermark_assets.core.watermark import Watermark
from watermark_assets.delta.committer import DeltaCommitter, TxnVersion, committer_for
from watermark_assets.delta.replace import KeyMoves
from watermark_assets.engine.plan import PlannedOn, ReadSlice, RecordPlan
from watermark_assets.engine.write import Region, Replace
from watermark_assets.runs.column import (
    ColumnPlan,
    ColumnRunRequest,
    StagedColumnBatch,
    stage_column_batch,
)
from watermark_assets.runs.column_spec import ColumnSpec
from watermark_assets.runs.window_commit import (
    WindowRun,
    WindowsRunResult,
    commit_windows,
    finished_run,
)
from watermark_assets.state.snapshot import StateLog, WatermarkFold, pipeline_txn_prefix

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The commitInfo entry prefix of a time pipeline's watermark (+ the pipeline name).
TIME_METADATA_PREFIX = names.TIME_WATERMARK_PREFIX


#: The commitInfo key holding a pipeline's time watermark.
time_metadata_key = names.time_watermark_key
#: The txn app id of one window: one per window start (a partial window keeps its id as it grows).
window_app_id = names.window_app_id


W = TypeVar("W", bound=Watermark[Any])


class WatermarkEntryLog(StateLog[W]):
    """A watermark of any kind (``parse``: its ``from_json``) carried in commitInfo entries
    ``key`` and kept by :class:`~watermark_assets.state.snapshot.StateLog` (a snapshot and the
    commits after it), as :class:`TimeWatermarkLog` describes (time pipelines; time x unit reads
    its ``UnitWatermark[TimeWatermark]`` the same way)."""

    def __init__(
        self, table_uri: str, key: str, empty: W, parse: Callable[[str], W], *, pipeline: str
    ) -> None:
        super().__init__(
            table_uri,
            key,
            WatermarkFold(empty, parse),
            txn_prefix=pipeline_txn_prefix(pipeline),
            pipeline=pipeline,
            legacy=lambda committer: _newest_entry(committer, key, empty, parse),
        )

    @property
    def watermark(self) -> W:
        return self.state


def _newest_entry(
    committer: DeltaCommitter, key: str, empty: W, parse: Callable[[str], W]
) -> tuple[W, int]:
    """A table from before state snapshots: walk back to the newest commit with an entry; it
    holds every entry up to its ``read_version``, from where the commits are read on."""
    commit, latest = committer.log.newest_commit_with(key, dataflow=key)
    if commit is None:
        return empty, latest  # no table (-1), or no entry at all: no window has history
    entry = json.loads(commit.custom_metadata[key])
    read_version = entry.get("read_version")
    if isinstance(read_version, int) and -1 <= read_version < commit.version:
        return parse(entry["watermark"]), read_version
    return empty, -1  # an entry without read_version: read the whole log


class TimeWatermarkLog(WatermarkEntryLog[TimeWatermark]):
    """The pipeline's time watermark as the Delta log holds it.

    Each entry carries the watermark its run read from the log up to ``read_version``, advanced
    by its window. So the newest commit with an entry holds everything committed up to its
    ``read_version``, and the first :meth:`read` merges only that entry and the commits after
    ``read_version`` (the runs that committed concurrently): a tick reads a few commits, however
    long the history. Later reads merge the commits after the last one read (a run of many
    windows reads each commit once). Merging is a union of spans, so the order does not
    matter.
    """

    def __init__(self, pipeline: TimePipelineConfig) -> None:
        super().__init__(
            pipeline.table.uri,
            time_metadata_key(pipeline.name),
            TimeWatermark.empty(),
            TimeWatermark.from_json,
            pipeline=pipeline.name,
        )


def load_time_watermark(pipeline: TimePipelineConfig) -> tuple[TimeWatermark, int | None]:
    """The pipeline's time watermark (:class:`TimeWatermarkLog`) and the table version it was
    read at (-1: no table, an empty watermark)."""
    log = TimeWatermarkLog(pipeline)
    return log.read(), log.version


def column_spec(pipeline: TimePipelineConfig) -> ColumnSpec:
    """What the column engine reads and writes for the windows of a time pipeline: its time
    column, each window replaced (a window is a chunk). ``table.merge_keys`` are not the
    engine's: the windows' commit moves a key's rows itself (``runs/window_commit``). A
    ``file_download`` source downloads into ``source.staging_uri`` (the table's staging folder
    unless configured, filled in when the configuration is loaded)."""
    return ColumnSpec.replacing(pipeline, pipeline.watermark.columns)


def plan_window(
    request: ColumnRunRequest,
    pipeline: TimePipelineConfig,
    window: TimeWindow,
    log: TimeWatermarkLog | None = None,
    *,
    recorded_as: TimeWindow | None = None,
) -> ColumnPlan:
    """The plan of one window: its txn read first (the optimistic lock), then the watermark
    (``log``: the run's incremental reader; a new one reads the whole log).

    ``recorded_as``: the window whose high watermark the commit records and whose txn it
    carries, when it is not the window read: an unpartitioned watermark reads its effective
    range ``[cut-off, to)`` and records its one window ``[from, to)`` (one entry, not one per
    run)."""
    column = pipeline.watermark.column
    record = window if recorded_as is None else recorded_as
    committer = committer_for(pipeline.table)
    app_id = window_app_id(pipeline.name, record)
    txn = TxnVersion.next_of(app_id, committer.transaction_version(app_id))
    log = log or TimeWatermarkLog(pipeline)
    stored = log.read()
    after = stored.advance(record)
    entry = {
        "watermark": after.to_json(),
        "read_version": log.version,  # the entry holds every entry up to this version
        "window": [format_instant(window.start), format_instant(window.end)],
        "recorded_window": [format_instant(record.start), format_instant(record.end)],
        "high_watermark": format_instant(record.end),
        "run_id": request.run_id,
        "job_id": request.job_name,
    }
    return window_chunk_plan(
        request,
        column,
        window,
        txn,
        {time_metadata_key(pipeline.name): json.dumps(entry)},
        moves=key_moves(pipeline.table.merge_keys, column),
    )


def window_chunk_plan(
    request: ColumnRunRequest,
    column: str,
    window: TimeWindow,
    txn: TxnVersion,
    metadata: Mapping[str, str],
    *,
    region: Region | None = None,
    within: tuple[tuple[str, ColumnValue], ...] = (),
    moves: KeyMoves | None = None,
) -> ColumnPlan:
    """A window ``[start, end)`` of ``column`` as a chunk of the column machinery: read with
    ``>= start`` and ``< end``, no column watermark saved (the time watermark travels in
    ``metadata``), committed even when empty (``records_completion``), replacing the window
    (with ``moves``: a key's rows in other windows too). A time x unit cell also gives its
    ``region`` (window x unit) and ``within`` (the unit's equality)."""
    if region is None:
        region = ReplaceWindow(column, window.start, window.end, Interval.CLOSED_OPEN)
    return ColumnPlan(
        request=request,
        read=ReadSlice(
            ReadBound(ColumnWatermark((column,), (window.start,)), GreaterOrEqual),
            upper=ColumnWatermark((column,), (window.end,)),
            within=within,
        ),
        mode=Replace((region,), moves),
        # no column watermark: the time watermark is in the entries
        record=RecordPlan((txn,), metadata, records_completion=True),
        planned_on=PlannedOn(ColumnWatermark.empty((column,)), "delta_metadata"),
    )


class TimeRunResult(WindowsRunResult[TimeWatermark]):
    """A run's windows in order, and the watermark before and after it."""


def run_windows(
    pipeline: TimePipelineConfig,
    windows: Sequence[TimeWindow],
    spark: SparkSession,
    *,
    run_id: str,
    job_name: str | None = None,
    clock: Clock = system_clock,
    log: Callable[[str], None] = print,
    record_as: Callable[[TimeWindow], TimeWindow] | None = None,
) -> TimeRunResult:
    """Read each of ``windows`` (in start order) and replace them all in ONE commit
    (:mod:`watermark_assets.runs.window_commit`); ``record_as(window)``: the window recorded for
    it (:func:`plan_window`'s ``recorded_as``)."""
    request = ColumnRunRequest(
        pipeline=column_spec(pipeline), run_id=run_id, job_name=job_name, clock=clock
    )
    watermark_log = TimeWatermarkLog(pipeline)
    before = watermark_log.read()
    ordered = sorted(windows, key=lambda w: w.start)
    recorded = [w if record_as is None else record_as(w) for w in ordered]
    now: datetime = clock()

    def stage_all() -> list[StagedColumnBatch]:
        plans = [
            plan_window(request, pipeline, w, watermark_log, recorded_as=r)
            for w, r in zip(ordered, recorded, strict=True)
        ]
        return [stage_column_batch(plan, spark, now=now) for plan in plans]

    def state_entry(indexes: Sequence[int]) -> dict[str, str]:
        stored = watermark_log.read()
        after = stored
        for i in indexes:
            after = after.advance(recorded[i])
        entry = {
            "watermark": after.to_json(),
            "read_version": watermark_log.version,
            "windows": [_window_json(ordered[i]) for i in indexes],
            "recorded_windows": [_window_json(recorded[i]) for i in indexes],
            "high_watermark": format_instant(max(recorded[i].end for i in indexes)),
            "run_id": request.run_id,
            "job_id": request.job_name,
        }
        return {time_metadata_key(pipeline.name): json.dumps(entry)}

    committed = commit_windows(
        stage_all,
        state_entry=state_entry,
    )
    return finished_run(
        TimeRunResult,
        [WindowRun(w, r) for w, r in zip(ordered, committed.results, strict=True)],
        committed,
        pipeline=pipeline.name,
        watermark_before=before,
        watermark_after=watermark_log.read(),
        others="windows",
        log=log,
    )


def _window_json(window: TimeWindow) -> list[str]:
    return [format_instant(window.start), format_instant(window.end)]


def key_moves(keys: Sequence[str], time_column: str) -> KeyMoves | None:
    """``table.merge_keys`` of a time pipeline: a key's rows are moved to the window its newest
    row is in (None: no keys)."""
    return KeyMoves(tuple(keys), time_column) if keys else None
