"""The Dagster objects of a time x unit pipeline (seed 003): a (window, unit) grid of partitions.

- **Partitions** (:func:`grid_partitions`): ``MultiPartitionsDefinition({"time": ..., "unit":
  ...})``, the time pipeline's windows (:func:`~watermark_assets.kinds.time.defs.time_partitions`)
  by the unit pipeline's ids (static, or dynamic ``{pipeline}_units``). Dagster sorts the
  dimensions by name, so a key is ``2024-01-01|a`` (time first) and ``MultiPartitionKey({"time":
  ..., "unit": ...})`` prints so.
- **Asset** (:func:`build_grid_asset`): a run of a set of cells (one key, or a range: Dagster's
  single-run backfill policy cuts a backfill into rectangles holding the dimension with fewer
  keys fixed, so one unit over 30 days is ONE run of 30 cells) reads each cell in order, unit by
  unit, and replaces them all in ONE commit (:mod:`watermark_assets.kinds.unit.grid_run`).
- **Sensor** (:func:`build_grid_sensor`, ``{pipeline}_sensor``): with a secondary input it adds the
  new ids first (:func:`~watermark_assets.kinds.unit.defs.read_units_tick`: vanished and refused ids
  reported, nothing removed); then it reads the grid's watermark once and requests exactly the
  due cells (:func:`~watermark_assets.core.unit.due_cells`: each unit its own cut-off), as one
  ranged run per unit and run of consecutive windows, at most ``sensor.max_runs_per_tick``; cells
  with a run in flight are left out. The tick says why (``DueCells.explain``).
"""

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dagster import (
    AssetKey,
    AssetsDefinition,
    DynamicPartitionsDefinition,
    MetadataValue,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    TimeWindowPartitionsDefinition,
    asset,
    sensor,
)
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)

from watermark_assets import names
from watermark_assets import vocabulary as v
from watermark_assets.config import TimeWatermarkConfig, UnitPipelineConfig
from watermark_assets.core.clock import Clock
from watermark_assets.core.partition_selection import PartitionSelection
from watermark_assets.core.time import TimeSpec, format_instant
from watermark_assets.core.unit import Cell, CellRange, DueCells, due_cells
from watermark_assets.core.unit.grid import unit_time_watermark
from watermark_assets.defs.asset_body import AssetOutcome, AssetRun, run_asset
from watermark_assets.defs.column_checks import build_column_checks
from watermark_assets.defs.columns import source_schema
from watermark_assets.defs.freshness import cron_cadence, freshness_policy
from watermark_assets.defs.jobs import (
    RANGE_END_TAG,
    RANGE_START_TAG,
    FailedAttempts,
    partitions_in_flight,
    pipeline_job,
    requested_or_skipped,
    sensor_status,
)
from watermark_assets.defs.keys import asset_key
from watermark_assets.defs.metadata import staged_reads_metadata, window_run_totals
from watermark_assets.defs.pipeline_defs import PipelineDefs
from watermark_assets.defs.run_tags import pipeline_partition_tags
from watermark_assets.defs.schema_notes import schema_observations, source_schema_note
from watermark_assets.delta.log import table_row_count
from watermark_assets.kinds.time.defs import (
    TICK_TAG,
    WINDOW_COLUMNS,
    cut_off_epoch,
    no_window_line,
    no_window_truth,
    partition_cron,
    partition_key,
    time_asset_metadata,
    time_partitions,
    window_row,
    window_truth,
    windows_of_keys,
)
from watermark_assets.kinds.unit.defs import (
    UNIT_WATERMARK_COLUMNS,
    UnitPartitions,
    backfill_policy,
    read_units_tick,
    unit_partitions,
)
from watermark_assets.kinds.unit.grid_run import CellsRunResult, load_grid_watermark, run_cells
from watermark_assets.names import PIPELINE_TAG
from watermark_assets.runs.column_spec import ColumnSpec
from watermark_assets.sources.locations import check_source

#: The dimension names (Dagster sorts them: keys read ``{time}|{unit}``).
TIME, UNIT = "time", "unit"


def _time(pipeline: UnitPipelineConfig) -> TimeWatermarkConfig:
    time = pipeline.watermark.time
    assert time is not None, "a time x unit pipeline has watermark.time"
    return time


def _spec(pipeline: UnitPipelineConfig) -> TimeSpec:
    return _time(pipeline).spec


def grid_partitions(pipeline: UnitPipelineConfig) -> MultiPartitionsDefinition:
    """The (window, unit) grid: the time pipeline's windows x the unit pipeline's ids."""
    windows_def = time_partitions(_spec(pipeline))
    assert windows_def is not None, "partition: none is refused for time x unit at load"
    return MultiPartitionsDefinition({TIME: windows_def, UNIT: unit_partitions(pipeline)})


def _dimensions(
    partitions_def: MultiPartitionsDefinition,
) -> tuple[TimeWindowPartitionsDefinition, UnitPartitions]:
    windows_def = partitions_def.get_partitions_def_for_dimension(TIME)
    units_def = partitions_def.get_partitions_def_for_dimension(UNIT)
    assert isinstance(windows_def, TimeWindowPartitionsDefinition)
    return windows_def, units_def  # type: ignore[return-value]


def cell_key(spec: TimeSpec, cell: Cell) -> str:
    """The multi-partition key of ``cell``: ``2024-01-01|a``."""
    return str(MultiPartitionKey({TIME: partition_key(spec, cell.window), UNIT: cell.unit}))


def cells_of_keys(
    spec: TimeSpec, selection: PartitionSelection, now: datetime
) -> tuple[list[Cell], list[str]]:
    """The cells of the run's partitions at ``now`` (a partial window ends at ``to``), in the
    keys' order, and the keys whose window is no window at ``now`` (after ``to``, or starting at
    it)."""
    split = selection.key_parts()
    time_keys = list(dict.fromkeys(parts[TIME] for parts in split))
    chosen, outside = windows_of_keys(spec, PartitionSelection.of_keys(time_keys), now)
    by_key = {partition_key(spec, w): w for w in chosen}
    cells: list[Cell] = []
    skipped: list[str] = []
    for key, parts in zip(selection.keys, split, strict=True):
        window = by_key.get(parts[TIME])
        if window is None or parts[TIME] in outside:
            skipped.append(key)
        else:
            cells.append(Cell(window, parts[UNIT]))
    return cells, skipped


def describe(pipeline: UnitPipelineConfig) -> str:
    """The asset's description."""
    lead = pipeline.description.strip() + "\n\n" if pipeline.description else ""
    w, time = pipeline.watermark, pipeline.watermark.time
    assert time is not None
    units = (
        f"the explicit ids `{w.units}`"
        if w.secondary_input is None
        else f"the ids of the {w.secondary_input.type} secondary input (dynamic partitions "
        f"`{names.units_partitions_name(pipeline.name)}`, added by "
        f"`{names.sensor_name(pipeline.name)}`)"
    )
    return (
        f"{lead}Time x unit: {time.partition} windows of `{time.column}` from {time.from_} to "
        f"{time.to} (grace {time.grace_days}d, abstinent {time.abstinent_days}d) by {units}. "
        f"Each cell (window, unit) reads `{w.column} = id AND {time.column} >= start AND "
        f"{time.column} < end` from the {pipeline.source.type} source "
        f"`{pipeline.source.location}` and replaces exactly that cell of `{pipeline.table.uri}` "
        "in ONE Delta commit with its high watermark. Backfill one unit over a range of windows: "
        "Materialize, pick the unit and a range of dates (one run). Metadata: "
        "`cut_off` and `watermark/after` (tables: per unit), `time_unit/cells` (a table: each "
        "cell), `rows/*`, `delta/versions` (every key: docs/metadata.md)."
    )


#: The columns of ``cut_off`` for a grid: each unit's cut-off and what it comes from.
CUT_OFF_COLUMNS: dict[str, str] = {"unit": "string", "cut_off": "string"}
#: The columns of ``time_unit/cells``: the unit, then a window's (``time/windows``).
CELL_COLUMNS: dict[str, str] = {"unit": "string", **WINDOW_COLUMNS}


def grid_metadata(
    result: CellsRunResult, due: DueCells, skipped: Sequence[str], *, table_rows: int | None
) -> dict[str, Any]:
    """A run's materialization metadata: each unit's cut-off and highest watermark, each cell
    with its high watermark and rows, the totals and the commits (the checks read them)."""
    after = result.watermark_after.units
    highest = (
        {
            "unit": unit,
            "watermark": v.time_text(h)
            if (inner := after.get(unit)) and (h := inner.highest)
            else None,
        }
        for unit in due.by_unit
    )
    cut_offs = (
        {"unit": unit, "cut_off": v.cut_off_text(d.cut_off)} for unit, d in due.by_unit.items()
    )
    cells = ({"unit": c.unit, **window_row(c)} for c in result.cells)
    metadata: dict[str, Any] = {
        v.CUT_OFF: v.table(CUT_OFF_COLUMNS, cut_offs),
        v.WATERMARK_AFTER: v.table(UNIT_WATERMARK_COLUMNS, highest),
        v.CELLS: v.table(CELL_COLUMNS, cells),
        v.RUNS: v.lines(c.line() for c in result.cells),
        v.PARTITIONS_SKIPPED: MetadataValue.json(list(skipped)),
        **window_run_totals(result),
    }
    metadata |= staged_reads_metadata([c.result.staged for c in result.cells])
    if table_rows is not None:
        metadata[v.DAGSTER_ROW_COUNT] = MetadataValue.int(table_rows)
    return metadata


def build_grid_asset(
    pipeline: UnitPipelineConfig, partitions_def: MultiPartitionsDefinition, clock: Clock
) -> AssetsDefinition:
    """The grid-partitioned asset: a run replaces each of its cells (module docstring)."""
    spec = _spec(pipeline)
    policy = backfill_policy(pipeline.cells_per_backfill_run)
    time = pipeline.watermark.time
    assert time is not None

    def grid_run(run: AssetRun) -> AssetOutcome:
        now = clock()
        cells, skipped = cells_of_keys(spec, run.partitions, now)
        if skipped:
            run.info(no_window_line(pipeline.name, skipped, now))
        due = due_cells(load_grid_watermark(pipeline), [c.unit for c in cells], spec, now)
        check_source(pipeline)  # before Spark: a clear error, not Spark's
        result = run_cells(
            pipeline,
            cells,
            run.spark,
            run_id=run.run_id,
            job_name=run.job_name,
            clock=clock,
            log=run.info,
        )
        rows = table_row_count(pipeline.table.uri)
        # each cell's own state, whatever the run read
        after = result.watermark_after
        due_after = due_cells(after, [c.unit for c in cells], spec, now).by_unit
        truths = {key: no_window_truth(spec, now) for key in skipped}
        for cell in cells:
            inner = unit_time_watermark(after, cell.unit)
            high = inner.high_watermark(cell.window)
            truths[cell_key(spec, cell)] = window_truth(cell.window, high, due_after[cell.unit])
        metadata = grid_metadata(result, due, skipped, table_rows=rows)
        return AssetOutcome(metadata, pipeline.table.uri, per_partition=AssetOutcome.truths(truths))

    decorator = asset(
        key=asset_key(pipeline),
        description=describe(pipeline),
        group_name="watermark_time_unit_ingestion",
        kinds={"spark", "delta"},
        metadata={
            **time_asset_metadata(pipeline, time),
            "unit_column": pipeline.watermark.column,
        },
        op_tags={PIPELINE_TAG: pipeline.name},
        partitions_def=partitions_def,
        backfill_policy=policy,
    )
    return run_asset(decorator, grid_run)


@dataclass(frozen=True)
class GridTick:
    """One tick's decision: the due cells, the requests, and why in words."""

    due: DueCells
    requests: tuple[RunRequest, ...]
    message: str


def decide_grid_tick(
    pipeline: UnitPipelineConfig,
    units: Sequence[str],
    now: datetime,
    *,
    busy: Collection[str] = (),
    attempts: Callable[[str], int] = lambda base: 0,
) -> GridTick:
    """The cells due at ``now`` for ``units`` (the grid's watermark read from the log once), as
    ranged run requests: one per unit and run of consecutive due windows without a run in flight
    (``busy``: multi-partition keys), at most ``sensor.max_runs_per_tick``.

    Run key: the unit, the range, the unit's cut-off rounded to its window (a grace re-run is
    requested once per cut-off window, as for time pipelines) and an attempt counter (a failed
    run's cells get a new key)."""
    spec = _spec(pipeline)
    due = due_cells(load_grid_watermark(pipeline), units, spec, now)
    waiting = {c for c in due.cells if cell_key(spec, c) in busy}
    ranges = due.ranges(exclude=waiting)
    cap = pipeline.sensor.max_runs_per_tick
    requests = tuple(_request(pipeline, spec, due, r, attempts) for r in ranges[:cap])
    message = due.explain()
    if waiting:
        message += f"; {len(waiting)} cell(s) wait for their runs in flight"
    if len(ranges) > cap:
        rest = sum(r.cells for r in ranges[cap:])
        message += (
            f"; {len(ranges) - cap} more run(s) ({rest} cells) left for the next ticks "
            f"(sensor.max_runs_per_tick {cap})"
        )
    return GridTick(due, requests, message)


def _request(
    pipeline: UnitPipelineConfig,
    spec: TimeSpec,
    due: DueCells,
    cells: CellRange,
    attempts: Callable[[str], int],
) -> RunRequest:
    first, last = (
        cell_key(spec, Cell(cells.first, cells.unit)),
        cell_key(spec, Cell(cells.last, cells.unit)),
    )
    epoch = format_instant(cut_off_epoch(due.by_unit[cells.unit]))
    base = f"{pipeline.name}|{first}..{last}|{epoch}"
    tags = {PIPELINE_TAG: pipeline.name, TICK_TAG: base}
    key = f"{base}|a{attempts(base)}"
    if cells.cells == 1:
        tags.update(pipeline_partition_tags(pipeline.name, first))
        return RunRequest(run_key=key, partition_key=first, tags=tags)
    tags.update(pipeline_partition_tags(pipeline.name, partition_range=(first, last)))
    return RunRequest(run_key=key, tags={**tags, RANGE_START_TAG: first, RANGE_END_TAG: last})


def build_grid_sensor(
    pipeline: UnitPipelineConfig,
    job: UnresolvedAssetJobDefinition,
    asset_key: AssetKey,
    partitions_def: MultiPartitionsDefinition,
    clock: Clock,
) -> SensorDefinition:
    """``{pipeline}_sensor`` (module docstring)."""
    settings = pipeline.sensor
    listing = pipeline.watermark.secondary_input
    source = None if listing is None else listing.build()
    _, units_def = _dimensions(partitions_def)

    @sensor(
        name=names.sensor_name(pipeline.name),
        job=job,
        minimum_interval_seconds=settings.minimum_interval_seconds,
        default_status=sensor_status(settings.running_by_default),
        description=f"Requests the (window, unit) cells of {pipeline.name} due by each unit's "
        "time watermark, one run per unit and range of windows"
        + ("" if source is None else ", after adding the new ids of its secondary input")
        + ", and says why.",
    )
    def grid_sensor(context: SensorEvaluationContext) -> SensorResult:
        explicit = pipeline.watermark.explicit_units
        adds: list[Any] = []
        events: list[Any] = []
        notes: list[str] = []
        cursor = context.cursor
        if explicit is not None:
            units: list[str] = list(explicit)
        else:
            assert source is not None and isinstance(units_def, DynamicPartitionsDefinition)
            listed = read_units_tick(context, pipeline, source, asset_key, noted=context.cursor)
            units = [*listed.known, *listed.new]
            notes.append(listed.unreadable or listed.report)
            events, cursor = listed.events, listed.digest or cursor
            if listed.new:
                adds.append(units_def.build_add_request(list(listed.new)))
        busy = partitions_in_flight(context, asset_key, job.name, partitions_def)
        tick = decide_grid_tick(
            pipeline,
            units,
            clock(),
            busy=busy,
            attempts=FailedAttempts(context, TICK_TAG),
        )
        message = " | ".join([tick.message, *notes])
        if tick.requests:  # one schema read of the source, when runs would start
            note = source_schema_note(ColumnSpec.replacing(pipeline, _time(pipeline).columns))
            message += note
            events = [*events, *schema_observations(context.instance, asset_key, note)]
        return requested_or_skipped(
            context,
            pipeline.name,
            message,
            list(tick.requests),
            dynamic_partitions_requests=adds,
            asset_events=events,
            cursor=cursor,
        )

    return grid_sensor


def build_grid_pipeline(pipeline: UnitPipelineConfig, clock: Clock) -> PipelineDefs:
    """Everything of one time x unit pipeline (the unit kind's ``dagster_defs`` picks this for a
    unit watermark with ``time``): fresh within a window's cadence and its grace (its sensor
    requests the cells due)."""
    partitions_def = grid_partitions(pipeline)
    asset_def = build_grid_asset(pipeline, partitions_def, clock)
    checks = build_column_checks(pipeline, asset_def.key)
    job = pipeline_job(
        pipeline.name,
        asset_def,
        checks,
        partitions_def,
        f"Reads and replaces (window, unit) cells of {pipeline.name} (one commit per cell).",
    )
    sensor_def = build_grid_sensor(pipeline, job, asset_def.key, partitions_def, clock)
    time = pipeline.watermark.time
    assert time is not None, "a time x unit pipeline has watermark.time"
    cadence = cron_cadence(partition_cron(time.spec))
    return PipelineDefs(
        asset_def,
        checks,
        job,
        sensor_def,
        freshness=freshness_policy(pipeline.freshness, cadence, timedelta(days=time.grace_days)),
        column_schema=source_schema(pipeline.source),
    )
