"""The unit kind (``watermark.kind: unit``): one partition per unit (explicit ids, or ids a
secondary input lists); with ``watermark.time``, a time x unit grid of cells."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watermark_assets import names
from watermark_assets.config import ProjectConfig, UnitPipelineConfig
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.kinds.contract import (
    DemoOutcome,
    DemoStep,
    PipelineKind,
    Row,
    StateLogEntry,
    named_partitions,
)
from watermark_assets.kinds.headless import (
    PARTITIONED_HEADING,
    FailedRun,
    Headless,
    as_sensor_run,
    run_keys,
)
from watermark_assets.kinds.report import PartitionedRow, table_facts, version_cell

if TYPE_CHECKING:
    from watermark_assets.core.partition_selection import PartitionSelection
    from watermark_assets.defs.pipeline_defs import PipelineDefs
    from watermark_assets.engine.plan import PlannedRun


def summarize(config: ProjectConfig, pipeline: UnitPipelineConfig) -> Row:
    """A unit pipeline's row; a time x unit one (a unit kind with a time) shows its grid."""
    if pipeline.is_time_by_unit:
        return summarize_grid(pipeline)
    return summarize_unit(pipeline)


def summarize_unit(pipeline: UnitPipelineConfig) -> PartitionedRow:
    """Units with a committed run (of the explicit ones) and the latest done-at."""
    from watermark_assets.core.text import time_text
    from watermark_assets.kinds.unit.run import load_unit_watermark

    table = table_facts(pipeline)
    done: dict[str, Any] = {}
    if table.version is not None:
        units = load_unit_watermark(pipeline.table.uri, pipeline.name).units
        done = {u: d for u, d in units.items() if d is not None}
    explicit = pipeline.watermark.explicit_units
    latest = max((d.when for d in done.values()), default=None)
    return PartitionedRow(
        pipeline=pipeline.name,
        kind="unit (explicit)" if explicit is not None else "unit (secondary input)",
        partitions=f"{len(done)}/{len(explicit)}" if explicit is not None else str(len(done)),
        rows=table.rows,
        watermark="-" if latest is None else time_text(latest),
        cut_off="-",
        delta_version=version_cell(table.version),
        schema=table.schema,
    )


def summarize_grid(pipeline: UnitPipelineConfig) -> PartitionedRow:
    """Time x unit: cells with a high watermark out of the known units' cells, the highest high
    watermark, and each unit's cut-off when they agree (else how many differ)."""
    from watermark_assets.core.text import time_text
    from watermark_assets.core.time import windows
    from watermark_assets.kinds.unit.grid_run import load_grid_watermark

    assert pipeline.watermark.time is not None, "a time x unit pipeline"
    now = system_clock()
    spec = pipeline.watermark.time.spec
    table = table_facts(pipeline)
    grid = load_grid_watermark(pipeline)
    known = pipeline.watermark.explicit_units or tuple(grid.units)
    cut = windows(spec, now)
    inner = {u: grid.units.get(u) for u in known}
    done = sum(w.count_with_history(cut) for w in inner.values() if w is not None)
    highest = max((h for w in inner.values() if w and (h := w.highest)), default=None)
    cut_offs = {str(w.cut_off(spec, now)) for w in inner.values() if w is not None}
    return PartitionedRow(
        pipeline=pipeline.name,
        kind=f"time ({spec.partitioning.value}) x unit",
        partitions=f"{done}/{len(cut) * len(known)} cells",
        rows=table.rows,
        watermark="-" if highest is None else time_text(highest),
        cut_off=cut_offs.pop() if len(cut_offs) == 1 else f"{len(cut_offs)} per unit",
        delta_version=version_cell(table.version),
        schema=table.schema,
    )


def demo_data(headless: Headless, pipelines: Sequence[UnitPipelineConfig]) -> DemoOutcome:
    """The source table and the ids file of the time x unit demo pipelines (a Delta source, ids
    from a file)."""
    from watermark_assets.config import FileSecondaryInputConfig
    from watermark_assets.demo.data import write_survey_answers

    for unit in pipelines:
        listing = unit.watermark.secondary_input
        if not (
            unit.is_time_by_unit
            and unit.source.type == "delta_table"
            and isinstance(listing, FileSecondaryInputConfig)
        ):
            continue
        root = Path(unit.source.location)
        if (root / "_delta_log").is_dir():
            print(f"  {unit.name}: source table already in {root}")
            continue
        rows = write_survey_answers(root, Path(listing.path))
        print(f"  {unit.name}: {rows} answers in {root}, survey ids in {listing.path}")
    return DemoOutcome([], [])


def _tick_grid(headless: Headless, name: str, failures: list[FailedRun]) -> None:
    """One tick of a time x unit pipeline's sensor, applied as the daemon does (new ids become
    partitions), then its runs: one per unit and range of due windows."""
    from watermark_assets.defs.headless_ticks import record_tick
    from watermark_assets.defs.jobs import RANGE_END_TAG, RANGE_START_TAG

    instance = headless.instance
    context = headless.sensor_context(instance_ref=instance.get_ref())
    started = time.time()
    data = headless.defs.resolve_sensor_def(names.sensor_name(name)).evaluate_tick(context)
    for request in data.dynamic_partitions_requests or ():
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    requests = list(data.run_requests or ())
    print(f"  {name}: {data.skip_message or f'the sensor requests {len(requests)} run(s)'}")
    for request in requests:
        tags = as_sensor_run(names.sensor_name(name), request)
        key = request.partition_key
        label = key or f"cells {tags.get(RANGE_START_TAG)} .. {tags.get(RANGE_END_TAG)}"
        headless.run_partition(name, key, failures, tags=tags, label=label)
    record_tick(
        instance,
        names.sensor_name(name),
        started=started,
        run_keys=run_keys(requests),
        skip_reason=data.skip_message,
        cursor=data.cursor,
    )


def run_due_units(headless: Headless, pipelines: Sequence[UnitPipelineConfig]) -> DemoOutcome:
    """Explicit ids that never ran; with a secondary input, one tick of the units sensor (the
    partitions it adds and the runs it requests); time x unit: one tick of its sensor."""
    from watermark_assets.defs.headless_ticks import record_tick
    from watermark_assets.kinds.unit.run import load_unit_watermark

    failures: list[FailedRun] = []
    for unit_pipeline in pipelines:
        defs, instance = headless.defs, headless.instance
        explicit = unit_pipeline.watermark.explicit_units
        if unit_pipeline.is_time_by_unit:  # its sensor adds the ids and requests the due cells
            _tick_grid(headless, unit_pipeline.name, failures)
            continue
        if explicit is None:
            sensor_def = defs.resolve_sensor_def(names.units_sensor_name(unit_pipeline.name))
            context = headless.sensor_context(instance_ref=instance.get_ref())
            started = time.time()
            data = sensor_def.evaluate_tick(context)
            for request in data.dynamic_partitions_requests or ():  # as the daemon does
                instance.add_dynamic_partitions(
                    request.partitions_def_name,
                    list(request.partition_keys),
                )
            requested = {
                str(r.partition_key): as_sensor_run(sensor_def.name, r)
                for r in data.run_requests or ()
            }
            units = list(requested)
            why = data.skip_message or f"the units sensor requests {len(units)} run(s)"
        else:
            done = load_unit_watermark(unit_pipeline.table.uri, unit_pipeline.name).units
            units = [u for u in explicit if done.get(u) is None]
            why = (
                f"{len(units)} of {len(explicit)} explicit unit(s) never ran: {', '.join(units)}"
                if units
                else f"all {len(explicit)} explicit units ran (materialize or backfill them "
                "from the UI to run them again)"
            )
        print(f"  {unit_pipeline.name}: {why}")
        for unit in units:
            tags = requested.get(unit) if explicit is None else None
            headless.run_partition(unit_pipeline.name, unit, failures, tags=tags)
        if explicit is None:
            record_tick(
                instance,
                sensor_def.name,
                started=started,
                run_keys=run_keys(data.run_requests or ()),
                skip_reason=data.skip_message,
                cursor=data.cursor,
            )
    return DemoOutcome(failures, [])


def state_logs(config: ProjectConfig, pipeline: UnitPipelineConfig) -> list[StateLogEntry]:
    """The units' done-at, or a time x unit grid's high watermarks; ``repair-state``: the state
    file and the commits left, folded (a unit or cell recorded only in a lost commit runs again
    on the next tick)."""
    from watermark_assets.kinds.unit.grid_run import GridLog
    from watermark_assets.kinds.unit.run import UnitDoneAtLog

    if pipeline.is_time_by_unit:
        return [StateLogEntry("time x unit watermark", GridLog(pipeline))]
    return [StateLogEntry("units' done-at", UnitDoneAtLog(pipeline.table.uri, pipeline.name))]


def plan(
    config: ProjectConfig,
    pipeline: UnitPipelineConfig,
    selection: PartitionSelection | None,
    now: datetime,
) -> list[PlannedRun]:
    """Each named unit's run (its rows read again, replaced), or each named cell's of a time x
    unit grid, planned now."""
    import json

    from watermark_assets.core.text import NEVER_RUN, millis_text
    from watermark_assets.core.unit.units import check_unit_id
    from watermark_assets.kinds.unit.run import UNIT_RUN_KEY, plan_unit, unit_spec
    from watermark_assets.runs.column import ColumnRunRequest

    selection = named_partitions(pipeline.name, selection)
    if pipeline.is_time_by_unit:
        return _plan_cells(pipeline, selection, now)
    planned: list[PlannedRun] = []
    for unit in selection.keys:
        check_unit_id(unit)
        request = ColumnRunRequest(pipeline=unit_spec(pipeline, unit), run_id="plan")
        unit_plan = plan_unit(request, unit, now=now)
        before = json.loads(unit_plan.record.entries[UNIT_RUN_KEY])["done_at_before"]
        done = NEVER_RUN if before is None else millis_text(before)
        planned.append(unit_plan.planned(unit, f"done-at {done}"))
    return planned


def _plan_cells(
    pipeline: UnitPipelineConfig, selection: PartitionSelection, now: datetime
) -> list[PlannedRun]:
    from watermark_assets.core.text import NEVER_RUN, time_text
    from watermark_assets.core.unit.grid import unit_time_watermark
    from watermark_assets.engine.plan import PlannedRun
    from watermark_assets.kinds.unit.grid_defs import cell_key, cells_of_keys
    from watermark_assets.kinds.unit.grid_run import GridLog, cell_spec, plan_cell
    from watermark_assets.runs.column import ColumnRunRequest

    time = pipeline.watermark.time
    assert time is not None, "a time x unit pipeline has watermark.time"
    cells, skipped = cells_of_keys(time.spec, selection, now)
    log = GridLog(pipeline)
    stored = log.read()
    outside = f"no window of the watermark at {time_text(now)} (after to, or starting at it)"
    planned = [PlannedRun(key, "-", "nothing", "nothing", (outside,)) for key in skipped]
    for cell in cells:
        request = ColumnRunRequest(pipeline=cell_spec(pipeline, cell.unit), run_id="plan")
        high = unit_time_watermark(stored, cell.unit).high_watermark(cell.window)
        said = NEVER_RUN if high is None else time_text(high)
        planned.append(
            plan_cell(request, pipeline, cell, log).planned(
                cell_key(time.spec, cell), f"high watermark {said}"
            )
        )
    return planned


def dagster_defs(pipeline: UnitPipelineConfig, clock: Clock, config: ProjectConfig) -> PipelineDefs:
    """The Dagster objects of a unit pipeline: a time x unit grid when it has a ``time``."""
    from watermark_assets.kinds.unit.defs import build_unit_pipeline
    from watermark_assets.kinds.unit.grid_defs import build_grid_pipeline

    if pipeline.is_time_by_unit:
        return build_grid_pipeline(pipeline, clock)
    return build_unit_pipeline(pipeline, clock)


KIND = PipelineKind[UnitPipelineConfig](
    "unit",
    UnitPipelineConfig,
    lambda config: config.unit_pipelines,
    summarize,
    dagster_defs=dagster_defs,
    plan=plan,
    state_logs=state_logs,
    source_types=lambda pipeline: (pipeline.source.type,),
    demo_data=DemoStep(order=2, run=demo_data),
    demo_runs=DemoStep(order=3, run=run_due_units, heading=PARTITIONED_HEADING, always=True),
)
