"""A run of unit partitions (seed 003, "Unit" watermark): each unit replaced in ONE commit.

A unit is a replay chunk with an equality predicate: the pieces of a column run are reused
(:mod:`watermark_assets.runs.column`: :class:`~watermark_assets.runs.column.ColumnPlan`,
:func:`~watermark_assets.runs.column.stage_column_batch`,
:func:`~watermark_assets.runs.column.commit_column_batch` with its ``replan``), over the unit's
:class:`~watermark_assets.runs.column_spec.ColumnSpec` (:func:`unit_spec`: the unit column,
``replace_by_watermark``, the unit told to the source). Per unit ``u``:

- read: ``column = u`` (:data:`~watermark_assets.core.column.watermark.Equal`), pushed to the
  source like every column predicate (a Spark filter pushed into the Parquet scan, a JDBC
  ``WHERE``, the ``unit_param`` request parameter or the ``{unit}`` of the URL for HTTP APIs,
  then the exact filter in Spark);
- commit: the window ``[u, u]`` (:class:`~watermark_assets.core.replace_window.Interval`
  ``CLOSED_CLOSED``) replaced in ONE Delta commit: the unit's rows in the table removed (files
  holding other units rewritten without them), the rows read added. Other units' rows are never
  touched. A unit whose source rows disappeared gets its rows removed; a unit with no row at the
  source and none in the table still records its completion (a small commit of its txn and
  watermark), unless the table does not exist yet;
- the txn ``watermark_assets/{pipeline}/{u}`` (optimistic lock: a concurrent run of the same unit
  makes the commit stale and the unit is planned and read again);
- the unit's watermark in the same commit: the entry :data:`UNIT_WATERMARK_KEY` ``/{pipeline}``
  holds a :class:`~watermark_assets.core.unit.UnitWatermark` of inner kind ``done_at`` with this
  unit only, ``DoneAt.at(now)`` merged with its previous value (never backwards). Reading back
  (:func:`load_unit_watermark`) merges the entries of every commit, unit by unit: concurrent runs
  of different units never lose each other's progress, because no commit rewrites another unit's
  value. The pipeline's column watermark is never saved (``PipelineWatermark.UNTOUCHED``): a unit
  pipeline has no "above the watermark" read.

:data:`UNIT_RUN_KEY` records the unit, its previous done-at and the new one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from watermark_assets import names
from watermark_assets.config import UnitPipelineConfig
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.column.lookback import ReadBound
from watermark_assets.core.column.watermark import ColumnWatermark, Equal
from watermark_assets.core.replace_window import Interval, ReplaceWindow
from watermark_assets.core.unit import DoneAt, UnitWatermark, check_unit_id
from watermark_assets.delta.committer import TxnVersion, committer_for
from watermark_assets.delta.log import CommitRecord
from watermark_assets.engine.plan import PlannedOn, ReadSlice, RecordPlan
from watermark_assets.engine.write import Replace
from watermark_assets.runs.column import (
    ColumnPlan,
    ColumnResult,
    ColumnRunRequest,
    commit_column_batch,
    stage_column_batch,
)
from watermark_assets.runs.column_spec import ColumnSpec
from watermark_assets.sources.column import UnitRead
from watermark_assets.state.snapshot import StateLog, WatermarkFold, pipeline_txn_prefix

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The commitInfo entry (prefix; + ``/{pipeline}``) carrying the unit watermark of the units a
#: commit wrote: ``{"watermark": <UnitWatermark JSON>, "job_id", "dataflow_run_id"}``.
UNIT_WATERMARK_KEY = names.UNIT_WATERMARK_KEY
#: The commitInfo entry of a unit's commit: the unit, its done-at before and after.
UNIT_RUN_KEY = names.UNIT_RUN_KEY
#: The inner kind of a unit-only pipeline's watermark.
INNER_KIND = DoneAt.kind


#: The txn app id of one unit (ids never hold ``/``: checked).
unit_app_id = names.unit_app_id
#: The commitInfo key of the pipeline's unit watermark.
unit_watermark_key = names.unit_watermark_key


def commit_unit_watermark(pipeline_name: str, commit: CommitRecord) -> UnitWatermark[Any] | None:
    """The unit watermark ``commit`` carries for ``pipeline_name``, or None."""
    entry = commit.custom_metadata.get(unit_watermark_key(pipeline_name))
    if entry is None:
        return None
    return UnitWatermark.from_json(json.loads(entry)["watermark"])


class UnitDoneAtLog(StateLog[UnitWatermark[DoneAt]]):
    """Every unit's done-at (:class:`~watermark_assets.state.snapshot.StateLog`: the snapshot
    and the commits after it): the commits' entries merged unit by unit."""

    def __init__(self, table_uri: str, pipeline_name: str) -> None:
        super().__init__(
            table_uri,
            unit_watermark_key(pipeline_name),
            WatermarkFold(
                UnitWatermark(INNER_KIND),
                UnitWatermark.from_json,
            ),
            txn_prefix=pipeline_txn_prefix(pipeline_name),
            pipeline=pipeline_name,
        )


def load_unit_watermark(table_uri: str, pipeline_name: str) -> UnitWatermark[DoneAt]:
    """Every unit's done-at (:class:`UnitDoneAtLog`); empty with no table."""
    return UnitDoneAtLog(table_uri, pipeline_name).read()


def unit_spec(pipeline: UnitPipelineConfig, unit: str) -> ColumnSpec:
    """What the column engine reads and writes for one unit: the unit column read with ``=``
    the id (:func:`plan_unit`), the unit's rows replaced; an ``http_api`` source is told the
    unit (its URL's ``{unit}``, ``watermark.unit_param`` mapped from the unit column)."""
    return ColumnSpec.replacing(
        pipeline,
        [pipeline.watermark.column],
        UnitRead(unit, pipeline.watermark.unit_param, in_predicate=True),
    )


def plan_unit(request: ColumnRunRequest, unit: str, *, now: datetime) -> ColumnPlan:
    """The plan of one unit's run (module docstring): the unit's txn read first (the
    optimistic lock), then its done-at."""
    pipeline = request.pipeline
    column = pipeline.columns[0]
    app_id = unit_app_id(pipeline.name, unit)
    committed = committer_for(pipeline.table).transaction_version(app_id)
    before = load_unit_watermark(pipeline.table.uri, pipeline.name).units.get(unit)
    done = DoneAt.at(now) if before is None else before.advance(DoneAt.at(now))
    watermark = UnitWatermark(INNER_KIND, {unit: done})
    envelope = {
        "watermark": watermark.to_json(),
        "job_id": request.job_name,
        "dataflow_run_id": request.run_id,
    }
    record = {
        "unit": unit,
        "done_at_before": None if before is None else before.ms,
        "done_at_after": done.ms,
    }
    return ColumnPlan(
        request=request,
        read=ReadSlice(ReadBound(ColumnWatermark((column,), (unit,)), Equal)),
        mode=Replace((ReplaceWindow(column, unit, unit, Interval.CLOSED_CLOSED),)),
        record=RecordPlan(
            (TxnVersion.next_of(app_id, committed),),
            {
                unit_watermark_key(pipeline.name): json.dumps(envelope),
                UNIT_RUN_KEY: json.dumps(record),
            },
            records_completion=True,
        ),
        planned_on=PlannedOn(ColumnWatermark.empty([column]), "delta_metadata"),
    )


@dataclass(frozen=True)
class UnitRun:
    """One unit of a run: what its commit did, and its done-at before and after."""

    unit: str
    result: ColumnResult
    done_before: DoneAt | None
    done_after: DoneAt | None

    def line(self) -> str:
        """One log line."""
        result = self.result
        outcome = result.outcome
        version = "" if outcome.version is None else f" as Delta version {outcome.version}"
        counts = [f"{result.staged.rows_read} rows read"]
        if result.staged.rows_read:
            counts.append(f"{result.rows_committed} committed")
        if result.rows_removed:
            counts.append(f"{result.rows_removed} rows of the unit removed")
        previous = "first run" if self.done_before is None else f"previous {self.done_before}"
        return f"unit {self.unit!r}: {', '.join(counts)}{version} ({previous}; {outcome.reason})"


def run_units(
    pipeline: UnitPipelineConfig,
    units: Sequence[str],
    spark: SparkSession,
    *,
    run_id: str,
    job_name: str | None = None,
    clock: Clock = system_clock,
    log: Callable[[str], None] = print,
) -> list[UnitRun]:
    """Run ``units`` one after the other, each ONE commit (module docstring)."""
    runs: list[UnitRun] = []
    for unit in units:
        check_unit_id(unit)
        request = ColumnRunRequest(
            pipeline=unit_spec(pipeline, unit), run_id=run_id, job_name=job_name, clock=clock
        )
        now = clock()

        def plan(
            unit: str = unit, request: ColumnRunRequest = request, now: datetime = now
        ) -> ColumnPlan:
            return plan_unit(request, unit, now=now)

        staged = stage_column_batch(plan(), spark, now=now)
        result = commit_column_batch(staged, now=now, replan=plan)
        # The plan the commit was made on (a stale commit planned again) says what it read.
        record = json.loads(result.staged.plan.record.entries[UNIT_RUN_KEY])
        before = None if record["done_at_before"] is None else DoneAt(record["done_at_before"])
        after = DoneAt(record["done_at_after"]) if result.outcome.version is not None else before
        runs.append(UnitRun(unit, result, before, after))
        log(runs[-1].line())
    UnitDoneAtLog(pipeline.table.uri, pipeline.name).read()  # the snapshot holds the run's commits
    return runs
