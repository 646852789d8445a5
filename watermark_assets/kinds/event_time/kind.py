"""The event-time kind (``watermark.kind: event_time``): windows of its upstream pipelines'
rows, emitted once the watermark passes them; late records kept."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from watermark_assets import names
from watermark_assets.config import EventTimePipelineConfig, ProjectConfig
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.kinds.contract import DemoOutcome, DemoStep, PipelineKind
from watermark_assets.kinds.headless import FailedRun, Headless, as_sensor_run, run_keys
from watermark_assets.kinds.report import PartitionedRow, table_facts, version_cell

if TYPE_CHECKING:
    from watermark_assets.core.partition_selection import PartitionSelection
    from watermark_assets.defs.pipeline_defs import PipelineDefs
    from watermark_assets.engine.plan import PlannedRun


def run_sensors_once(
    headless: Headless, pipelines: Sequence[EventTimePipelineConfig]
) -> list[FailedRun]:
    """One tick of each pipeline's sensor (the partitions the watermark closes, and why), then
    the run it requests."""
    from watermark_assets.defs.headless_ticks import record_tick
    from watermark_assets.defs.jobs import RANGE_END_TAG, RANGE_START_TAG

    failures: list[FailedRun] = []
    for pipeline in pipelines:
        instance = headless.instance
        defs = headless.defs
        context = headless.sensor_context(instance_ref=instance.get_ref())
        started = time.time()
        name = names.sensor_name(pipeline.name)
        data = defs.resolve_sensor_def(name).evaluate_tick(context)
        if not data.run_requests:
            record_tick(instance, name, started=started, skip_reason=data.skip_message)
            print(f"  {pipeline.name}: {data.skip_message}")
            continue
        for request in data.run_requests:
            first, last = request.tags[RANGE_START_TAG], request.tags[RANGE_END_TAG]
            print(f"  {pipeline.name}: the sensor requests {first} .. {last}")
            headless.run_partition(
                pipeline.name,
                None,
                failures,
                tags=as_sensor_run(name, request),
                label=f"{first} .. {last}",
            )
        record_tick(instance, name, started=started, run_keys=run_keys(data.run_requests))
    return failures


def run_with_a_late_file(
    headless: Headless, pipelines: Sequence[EventTimePipelineConfig]
) -> DemoOutcome:
    """The event-time pipelines, then a late landing file (``demo/data.write_late_events``) in
    their upstream landing folders: ingested by the sensor pass, it holds old events (kept as
    late records) and new ones (the watermark passes the last day)."""
    from watermark_assets.demo.data import write_late_events

    failures = run_sensors_once(headless, pipelines)
    config = headless.config
    upstreams = {name for p in pipelines for name in p.source.names}
    landed = []
    for pipeline in config.pipelines:  # the upstreams reading landing files (source.type files)
        if pipeline.name in upstreams and pipeline.source.type == "files":
            path = write_late_events(Path(pipeline.source.uri))  # type: ignore[union-attr]
            if path is not None:
                landed.append(path)
                print(f"  a late file lands in {pipeline.name}: {path.name}")
    if landed:
        failures += headless.sensor_pass()
        failures += run_sensors_once(headless.renewed(), pipelines)
    return DemoOutcome(failures, [])


def explain_notes(config: ProjectConfig, pipeline: EventTimePipelineConfig) -> list[str]:
    """Where its progress lives: a state file (batch engine) or the streaming query's
    checkpoint."""
    from watermark_assets.kinds.event_time.defs import window_engine

    engine = window_engine(pipeline, config)
    if engine.name == "batch":
        store = engine.spec.progress()
        return [f"  event-time progress: {store.describe(store.read())}"]
    return ["  event-time progress: in the streaming query's own checkpoint"]


def repair(config: ProjectConfig, pipeline: EventTimePipelineConfig) -> int:
    """The engine's repair (a batch in flight whose upstream versions are gone is moved to the
    upstreams' current ones: ``kinds/event_time/window.replan_batch``); when the aggregate's own
    progress is gone (its state file lost and its log cleaned), it cannot be pieced together
    from its tables (the upstream versions read, each input's watermark): the tables are
    removed and the next run aggregates the upstream again."""
    from watermark_assets.exceptions import (
        EVENT_TIME_RECOVERY,
        EventProgressLostError,
        StateHistoryLostError,
    )
    from watermark_assets.kinds.event_time.defs import window_engine
    from watermark_assets.staging import remove_tree

    engine = window_engine(pipeline, config)
    try:
        print(engine.repair())
        return 0
    except (StateHistoryLostError, EventProgressLostError):
        if engine.name != "batch":
            raise
    spec = engine.spec
    for uri in (spec.output_uri, spec.late_uri, spec.state_uri):
        remove_tree(uri)
    print(f"{pipeline.name}: event-time aggregate rebuilt from its upstream: {EVENT_TIME_RECOVERY}")
    return 0


def plan(
    config: ProjectConfig,
    pipeline: EventTimePipelineConfig,
    selection: PartitionSelection | None,
    now: datetime,
) -> list[PlannedRun]:
    """The next batch of the pipeline's engine: a run reads what is new upstream whatever
    partitions it was launched for (its partitions are the windows it emits)."""
    from watermark_assets.kinds.event_time.defs import window_engine

    planned = window_engine(pipeline, config).plan()
    if selection is None:
        return [planned]
    said = (
        f"any partition's run reads the same batch (the partitions named, {list(selection.keys)}, "
        "are the windows it emits once the watermark passes them)"
    )
    return [dataclasses.replace(planned, notes=(*planned.notes, said))]


def dagster_defs(
    pipeline: EventTimePipelineConfig, clock: Clock, config: ProjectConfig
) -> PipelineDefs:
    """The Dagster objects of an event-time pipeline (``config``: its upstreams' tables)."""
    from watermark_assets.kinds.event_time.defs import build_event_time_pipeline

    return build_event_time_pipeline(pipeline, config, clock)


def summarize(config: ProjectConfig, pipeline: EventTimePipelineConfig) -> PartitionedRow:
    """An event-time pipeline's row: the partitions its watermark closed, the windows emitted,
    the watermark, and the late records kept."""
    from watermark_assets.core.text import millis_text
    from watermark_assets.core.time.instant import to_millis
    from watermark_assets.delta.log import table_row_count
    from watermark_assets.kinds.event_time.defs import (
        closed_through,
        event_time_partitions,
        window_engine,
    )

    engine = window_engine(pipeline, config)
    spec = engine.spec
    watermark = engine.committed()
    partitions = event_time_partitions(pipeline)
    keys = partitions.get_partition_keys(current_time=system_clock())
    closed_by = closed_through(spec, watermark.watermark_ms)
    closed = sum(
        1 for k in keys if to_millis(partitions.time_window_for_partition_key(k).end) <= closed_by
    )
    late = f"{table_row_count(spec.late_uri) or 0} late records kept in {Path(spec.late_uri).name}"
    table = table_facts(pipeline, spec.output_uri)
    return PartitionedRow(
        pipeline=pipeline.name,
        kind=f"event time ({pipeline.partitions.granularity}, {engine.name})",
        partitions=f"{closed}/{len(keys)} closed",
        rows=table.rows,
        watermark="-" if not watermark.watermark_ms else millis_text(watermark.watermark_ms),
        cut_off=late,
        delta_version=version_cell(table.version),
        schema=table.schema,
    )


KIND = PipelineKind[EventTimePipelineConfig](
    "event_time",
    EventTimePipelineConfig,
    lambda config: config.event_time_pipelines,
    summarize,
    dagster_defs=dagster_defs,
    plan=plan,
    explain_notes=explain_notes,
    repair=repair,
    demo_runs=DemoStep(
        order=4,
        run=run_with_a_late_file,
        heading="Event time: windows emitted once the watermark passes them, a late file",
    ),
)
