"""A run of time x unit cells (seed 003): each (window, unit) cell read, all replaced in ONE commit.

A cell ``(window [start, end), unit u)`` is a window chunk of the column machinery, as a time
pipeline's window is (:func:`~watermark_assets.kinds.time.run.window_chunk_plan`), over the
:class:`~watermark_assets.runs.column_spec.ColumnSpec` of unit ``u`` (:func:`cell_spec`: the
time column; an http_api URL's ``{unit}`` or ``unit_param`` carries the id). Per cell:

- read: ``time >= start AND time < end AND unit = u`` (the plan's ``ReadSlice.within`` adds the unit
  to every clause), pushed to the source: a Spark filter and file skipping for tables and files, a
  ``WHERE`` for JDBC, ``since``/``until`` and the id for an HTTP API (then the exact filter in
  Spark);
- commit: the region ``[start, end)`` x ``[u, u]`` replaced, every cell of the run in ONE
  commit (:func:`~watermark_assets.runs.window_commit.commit_windows`, with
  ``delta/replace.plan_replace_regions``): the unit's rows in the window removed, the rows read
  added; other units' rows and other windows are never touched, except with
  ``table.merge_keys`` (the rows read's keys leave the other cells, the newest row wins). An
  empty cell still commits (rows deleted at the source leave, the high watermark is recorded);
  with no table yet, only when the empty read gave a schema to create it with;
- the txn ``watermark_assets/{pipeline}/{u}/time/{window start}`` (:func:`cell_app_id`; ids never
  hold ``/``) of each cell: a concurrent run of one of them makes the commit stale, and the run
  plans and reads every cell again;
- the entry ``watermark_assets.time_unit/{pipeline}`` (:func:`time_unit_metadata_key`): the grid's
  watermark (``UnitWatermark[TimeWatermark]``) read from the log up to ``read_version``, with
  the run's cells' high watermarks advanced (each end, or ``to`` for the partial last window),
  plus the cells. Read back like a time pipeline's
  (:class:`~watermark_assets.kinds.time.run.WatermarkEntryLog`: the newest entry merged with the
  commits after its ``read_version``; the merge is unit by unit, window by window, so
  concurrent runs of other cells never lose each other's high watermarks).

Known cost: each entry holds the whole grid, so commitInfo grows with units x windows (with one
entry per window: ~40 bytes per cell; the time kind's compact form keeps a unit's contiguous
windows small). docs/unit.md ("How big a grid") bounds the grid.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from watermark_assets import names
from watermark_assets.config import UnitPipelineConfig
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.replace_window import Interval, ReplaceWindow
from watermark_assets.core.time import TimeWatermark, format_instant
from watermark_assets.core.unit import Cell, UnitWatermark, empty_grid
from watermark_assets.core.unit.grid import unit_time_watermark
from watermark_assets.delta.committer import TxnVersion, committer_for
from watermark_assets.kinds.time.run import (
    WatermarkEntryLog,
    key_moves,
    window_chunk_plan,
)
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
from watermark_assets.sources.column import UnitRead

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The commitInfo entry prefix of a time x unit pipeline's watermark (+ the pipeline name).
TIME_UNIT_PREFIX = names.TIME_UNIT_WATERMARK_PREFIX


#: The commitInfo key holding a pipeline's grid watermark.
time_unit_metadata_key = names.time_unit_watermark_key
#: The txn app id of one cell (a partial window keeps its id as it grows).
cell_app_id = names.cell_app_id


class GridLog(WatermarkEntryLog[UnitWatermark[Any]]):
    """The grid's watermark as the Delta log holds it (module docstring)."""

    def __init__(self, pipeline: UnitPipelineConfig) -> None:
        super().__init__(
            pipeline.table.uri,
            time_unit_metadata_key(pipeline.name),
            empty_grid(),
            UnitWatermark.from_json,
            pipeline=pipeline.name,
        )


def load_grid_watermark(pipeline: UnitPipelineConfig) -> UnitWatermark[TimeWatermark]:
    """Every unit's time watermark (:class:`GridLog`); empty with no table."""
    return GridLog(pipeline).read()


def plan_cell(
    request: ColumnRunRequest, pipeline: UnitPipelineConfig, cell: Cell, log: GridLog | None = None
) -> ColumnPlan:
    """The plan of one cell: its txn read first (the optimistic lock), then the grid (``log``:
    the run's incremental reader)."""
    time = pipeline.watermark.time
    assert time is not None, "a time x unit pipeline has watermark.time"
    unit_column, window = pipeline.watermark.column, cell.window
    app_id = cell_app_id(pipeline.name, cell)
    committed = committer_for(pipeline.table).transaction_version(app_id)
    log = log or GridLog(pipeline)
    stored = log.read()
    before = unit_time_watermark(stored, cell.unit)
    previous = before.high_watermark(window)
    after = stored.advance({cell.unit: before.advance(window)})
    entry = {
        "watermark": after.to_json(),
        "read_version": log.version,
        "unit": cell.unit,
        "window": [format_instant(window.start), format_instant(window.end)],
        "high_watermark_before": None if previous is None else format_instant(previous),
        "high_watermark": format_instant(window.end),
        "run_id": request.run_id,
        "job_id": request.job_name,
    }
    region = (
        ReplaceWindow(time.column, window.start, window.end, Interval.CLOSED_OPEN),
        ReplaceWindow(unit_column, cell.unit, cell.unit, Interval.CLOSED_CLOSED),
    )
    return window_chunk_plan(
        request,
        time.column,
        window,
        TxnVersion.next_of(app_id, committed),
        {time_unit_metadata_key(pipeline.name): json.dumps(entry)},
        region=region,
        within=((unit_column, cell.unit),),
        moves=key_moves(pipeline.table.merge_keys, time.column),
    )


@dataclass(frozen=True)
class CellRun(WindowRun):
    """One cell of a run: its window (:class:`WindowRun`) and its unit."""

    unit: str

    def line(self) -> str:
        return f"unit {self.unit!r} {super().line()}"


class CellsRunResult(WindowsRunResult[UnitWatermark[TimeWatermark]]):
    """A run's cells in order, and the grid's watermark before and after it."""

    @property
    def cells(self) -> tuple[CellRun, ...]:
        """The cells, in the order they ran."""
        return tuple(c for c in self.windows if isinstance(c, CellRun))


def cell_spec(pipeline: UnitPipelineConfig, unit: str) -> ColumnSpec:
    """What the column engine reads and writes for the cells of one unit: the time column (a
    cell is a window chunk whose plan adds ``column = id``); an ``http_api`` source is told the
    unit (its URL's ``{unit}``; ``watermark.unit_param`` a static parameter holding the id).
    ``table.merge_keys`` are the cells' commit's own, as for a time pipeline."""
    time = pipeline.watermark.time
    assert time is not None, "a time x unit pipeline has watermark.time"
    return ColumnSpec.replacing(
        pipeline, time.columns, UnitRead(unit, pipeline.watermark.unit_param, in_predicate=False)
    )


def run_cells(
    pipeline: UnitPipelineConfig,
    cells: Sequence[Cell],
    spark: SparkSession,
    *,
    run_id: str,
    job_name: str | None = None,
    clock: Clock = system_clock,
    log: Callable[[str], None] = print,
) -> CellsRunResult:
    """Read each of ``cells`` (unit by unit in the given order of units, windows in start
    order) and replace them all in ONE commit (module docstring)."""
    time = pipeline.watermark.time
    assert time is not None, "a time x unit pipeline has watermark.time"
    grid = GridLog(pipeline)
    before = grid.read()
    order = {unit: i for i, unit in enumerate(dict.fromkeys(c.unit for c in cells))}
    ordered = sorted(cells, key=lambda c: (order[c.unit], c.window.start))
    requests = {
        unit: ColumnRunRequest(
            pipeline=cell_spec(pipeline, unit), run_id=run_id, job_name=job_name, clock=clock
        )
        for unit in order
    }
    now = clock()

    def stage_all() -> list[StagedColumnBatch]:
        plans = [plan_cell(requests[c.unit], pipeline, c, grid) for c in ordered]
        return [stage_column_batch(plan, spark, now=now) for plan in plans]

    def state_entry(indexes: Sequence[int]) -> dict[str, str]:
        stored = grid.read()
        after = stored
        for i in indexes:
            cell = ordered[i]
            inner = unit_time_watermark(after, cell.unit)
            after = after.advance({cell.unit: inner.advance(cell.window)})
        entry = {
            "watermark": after.to_json(),
            "read_version": grid.version,
            "cells": [
                [
                    ordered[i].unit,
                    format_instant(ordered[i].window.start),
                    format_instant(ordered[i].window.end),
                ]
                for i in indexes
            ],
            "run_id": run_id,
            "job_id": job_name,
        }
        return {time_unit_metadata_key(pipeline.name): json.dumps(entry)}

    committed = commit_windows(
        stage_all,
        state_entry=state_entry,
    )
    return finished_run(
        CellsRunResult,
        [CellRun(c.window, r, c.unit) for c, r in zip(ordered, committed.results, strict=True)],
        committed,
        pipeline=pipeline.name,
        watermark_before=before,
        watermark_after=grid.read(),
        others="cells",
        log=log,
    )
