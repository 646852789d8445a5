"""The time kind (``watermark.kind: time``): one partition per window, re-run while the grace
period holds, due by the cut-off its tick computes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from watermark_assets import names
from watermark_assets.config import ProjectConfig, TimePipelineConfig
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.kinds.contract import DemoOutcome, DemoStep, PipelineKind, StateLogEntry
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

#: Ticks of each time pipeline in the demo: the second shows the grace period.
DEMO_TICKS = 2


def run_ticks(headless: Headless, pipelines: Sequence[TimePipelineConfig]) -> DemoOutcome:
    """``DEMO_TICKS`` ticks of :func:`~watermark_assets.kinds.time.defs.decide_tick` (what the
    schedule and the sensor request), each printing why, then a run per partition due; the
    second tick shows the grace period (the windows before the highest high watermark run
    again)."""
    from watermark_assets.defs.headless_ticks import record_tick
    from watermark_assets.kinds.time.defs import decide_tick, tick_requests

    failures: list[FailedRun] = []
    for pipeline in pipelines:
        headless.defs  # noqa: B018  (built before the first tick; start-up ends there)
        previous = None
        for tick in range(1, DEMO_TICKS + 1):
            started = time.time()
            decision = decide_tick(pipeline, system_clock())
            if (decision.keys, decision.due.cut_off.at) == previous:
                print(f"  {pipeline.name} tick {tick}: the cut-off did not move, nothing new")
                break
            previous = (decision.keys, decision.due.cut_off.at)
            print(f"  {pipeline.name} tick {tick}: {decision.due.explain()}")
            keys: Sequence[str | None] = decision.keys or ([None] if decision.runs else [])
            sensor_name = names.sensor_name(pipeline.name)
            if not keys:
                record_tick(
                    headless.instance,
                    sensor_name,
                    started=started,
                    skip_reason=decision.due.explain(),
                )
                break
            # what NAME_sensor requests at this tick, under its run keys (as_sensor_run)
            requests = tick_requests(pipeline, decision, set(), lambda base: "a0").runs
            tagged = [(r.partition_key, as_sensor_run(sensor_name, r)) for r in requests]
            ran = [headless.run_partition(pipeline.name, k, failures, tags=t) for k, t in tagged]
            record_tick(
                headless.instance, sensor_name, started=started, run_keys=run_keys(requests)
            )
            if not all(ran):
                break  # a failed run: the next tick would only ask for it again
    return DemoOutcome(failures, [])


def state_logs(config: ProjectConfig, pipeline: TimePipelineConfig) -> list[StateLogEntry]:
    """The windows' high watermarks; ``repair-state``: the state file and the commits left,
    folded (a window recorded only in a lost commit runs again on the next tick)."""
    from watermark_assets.kinds.time.run import TimeWatermarkLog

    return [StateLogEntry("time watermark", TimeWatermarkLog(pipeline))]


def plan(
    config: ProjectConfig,
    pipeline: TimePipelineConfig,
    selection: PartitionSelection | None,
    now: datetime,
) -> list[PlannedRun]:
    """Each window a run would replace now (of the named partitions, else the windows due: what
    the schedule and sensor request), its read and its high watermark; ``partition: none``: the
    effective range ``[cut-off, to)``."""
    from watermark_assets.core.text import NEVER_RUN, time_text
    from watermark_assets.engine.plan import PlannedRun
    from watermark_assets.kinds.time.defs import partition_key, time_partitions, windows_of_keys
    from watermark_assets.kinds.time.run import TimeWatermarkLog, column_spec, plan_window
    from watermark_assets.runs.column import ColumnRunRequest
    from watermark_assets.vocabulary import cut_off_text

    spec = pipeline.watermark.spec
    log = TimeWatermarkLog(pipeline)
    watermark = log.read()
    due = watermark.due_at(spec, now)
    request = ColumnRunRequest(pipeline=column_spec(pipeline), run_id="plan")
    cut_off = f"cut-off {cut_off_text(due.cut_off)}"
    if time_partitions(spec) is None:
        effective = due.effective_range
        if effective is None:
            return [PlannedRun(None, cut_off, "nothing", "nothing", (due.explain(),))]
        whole = plan_window(request, pipeline, effective, log, recorded_as=due.of[0])
        return [whole.planned(None, cut_off, due.explain())]
    if selection is None:
        chosen, skipped = list(due.windows), list[str]()
        if not chosen:
            return [PlannedRun(None, cut_off, "nothing", "nothing", (due.explain(),))]
    else:
        chosen, skipped = windows_of_keys(spec, selection, now)
    planned = [
        PlannedRun(
            key,
            cut_off,
            "nothing",
            "nothing",
            (f"no window of the watermark at {time_text(now)} (after to, or starting at it)",),
        )
        for key in skipped
    ]
    for window in chosen:
        high = watermark.high_watermark(window)
        said = NEVER_RUN if high is None else time_text(high)
        planned.append(
            plan_window(request, pipeline, window, log).planned(
                partition_key(spec, window), f"high watermark {said}; {cut_off}"
            )
        )
    return planned


def dagster_defs(pipeline: TimePipelineConfig, clock: Clock, config: ProjectConfig) -> PipelineDefs:
    """The Dagster objects of a time pipeline."""
    from watermark_assets.kinds.time.defs import build_time_pipeline

    return build_time_pipeline(pipeline, clock)


def summarize(pipeline: TimePipelineConfig) -> PartitionedRow:
    """Windows with a high watermark, the highest one and the cut-off it gives now."""
    from watermark_assets.core.text import time_text
    from watermark_assets.core.time import windows
    from watermark_assets.kinds.time.run import load_time_watermark

    now = system_clock()
    spec = pipeline.watermark.spec
    watermark, version = load_time_watermark(pipeline)
    table = table_facts(pipeline)
    highest = watermark.highest
    every = windows(spec, now)
    return PartitionedRow(
        pipeline=pipeline.name,
        kind=f"time ({spec.partitioning.value})",
        partitions=f"{watermark.count_with_history(every)}/{len(every)}",
        rows=table.rows,
        watermark="-" if highest is None else time_text(highest),
        cut_off=str(watermark.cut_off(spec, now)),
        delta_version=version_cell(version),
        schema=table.schema,
    )


KIND = PipelineKind[TimePipelineConfig](
    "time",
    TimePipelineConfig,
    lambda config: config.time_pipelines,
    lambda config, pipeline: summarize(pipeline),
    dagster_defs=dagster_defs,
    plan=plan,
    state_logs=state_logs,
    source_types=lambda pipeline: (pipeline.source.type,),
    demo_runs=DemoStep(order=2, run=run_ticks, heading=PARTITIONED_HEADING, always=True),
)
