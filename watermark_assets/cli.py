"""``watermark-assets``: generate demo data, run the sensors headless, print a summary.

``watermark-assets demo`` is what ``make demo`` runs. It writes the demo data (once), then:
each file pipeline's sensor is evaluated and the runs it requests are launched on the Dagster
instance in $DAGSTER_HOME (so ``make ui`` shows them) until it reports nothing above the
watermarks; the column pipelines run twice (step 1 reads what is above their watermarks, about 1%
of the source rows change, step 2 reads only those; a PostgreSQL-backed pipeline is skipped, in
one line, when no database is reachable); each time pipeline's tick (what its schedule and sensor
decide) says which partitions are due and why, and they run, then a second tick shows the grace
period re-running the last windows; explicit units that never ran run once, and a time x unit
pipeline's sensor adds its ids and requests its due cells. The demo starts its HTTP API on
127.0.0.1 for ``payments_api_daily`` (``serve-demo-api`` serves it alone, for ``dagster dev``).

``summary`` prints one row per pipeline of every kind (``kinds.KINDS``): a table of the file
pipelines, and one of the others (partitions done, high watermark or done-at, cut-off).
``explain PIPELINE [PATH]`` says whether a landing file was ingested (in which Delta version) or
why not. ``replay PIPELINE [--start V] [--end V]`` replays a
range of a column pipeline in chunks (its ``replay`` section; ``--start``/``--end`` override the
range), one Delta commit per chunk, and prints one line per chunk (skipped chunks included).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from watermark_assets.config import (
    ColumnPipelineConfig,
    EventTimePipelineConfig,
    Pipeline,
    ProjectConfig,
    load_config,
)
from watermark_assets.core.clock import system_clock
from watermark_assets.exceptions import WatermarkAssetsError
from watermark_assets.kinds import kind_of, summary_rows
from watermark_assets.kinds.report import PARTITIONED_HEADERS as PARTITIONED_HEADERS
from watermark_assets.kinds.report import SUMMARY_HEADERS as SUMMARY_HEADERS
from watermark_assets.kinds.report import PartitionedRow as PartitionedRow
from watermark_assets.kinds.report import SummaryRow as SummaryRow
from watermark_assets.kinds.report import summarize as summarize
from watermark_assets.kinds.report import summarize_column as summarize_column
from watermark_assets.kinds.report import summarize_event_time as summarize_event_time
from watermark_assets.kinds.report import summarize_grid as summarize_grid
from watermark_assets.kinds.report import summarize_time as summarize_time
from watermark_assets.kinds.report import summarize_unit as summarize_unit

#: The demo prints its own progress and one line per failed run; Dagster's per-event lines and
#: the failures' tracebacks would drown them (they stay in the run's logs in the UI).
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def _progress(label: str) -> object:
    def report(done: int, total: int) -> None:
        width = 30
        filled = int(width * done / max(total, 1))
        end = "\n" if done >= total else ""
        print(
            f"\r  {label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}",
            end=end,
            flush=True,
        )

    return report


def generate(config_path: str | None = None) -> None:
    """Write the demo landing files for the demo pipelines, and the Delta source tables of its
    column pipelines (skipped when already there)."""
    from watermark_assets.demo.data import write_clicks, write_events, write_orders

    config = load_config(config_path)
    for column in config.column_pipelines:
        if column.source.type != "delta_table":
            continue
        root = Path(column.source.location)
        if (root / "_delta_log").is_dir():
            print(f"  {column.name}: source table already in {root}")
            continue
        print(f"  {column.name}: source Delta table with {write_orders(root)} rows in {root}")
    _generate_survey_answers(config)
    for pipeline in config.file_pipelines:
        root = Path(pipeline.source.uri)
        if root.exists() and any(
            p
            for p in root.rglob("*")
            if p.is_file() and not any(part.startswith("_") for part in p.parts)
        ):
            print(f"  {pipeline.name}: landing data already in {root}")
            continue
        if pipeline.source.type == "parquet_commit":  # the other writer's Parquet files
            count = write_clicks(root)
        else:
            count = write_events(root, progress=_progress(f"{pipeline.name}: writing files"))  # type: ignore[arg-type]
        print(f"  {pipeline.name}: {count} landing files in {root}")


def _generate_survey_answers(config: ProjectConfig) -> None:
    """The source table and the ids file of the time x unit demo pipelines (a Delta source, ids
    from a file)."""
    from watermark_assets.config import FileSecondaryInputConfig
    from watermark_assets.demo.data import write_survey_answers

    for unit in config.unit_pipelines:
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


def print_table(rows: Sequence[SummaryRow]) -> None:
    headers = SUMMARY_HEADERS
    cells = [
        [
            r.pipeline,
            str(r.partitions),
            str(r.files),
            str(r.rows),
            str(r.quarantined),
            r.watermark,
            r.state,
            r.delta_version,
        ]
        for r in rows
    ]
    print_grid(headers, cells)


def print_grid(headers: Sequence[str], cells: Sequence[Sequence[str]]) -> None:
    """A plain-text table: the headers, a rule, one line per row."""
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


@dataclass(frozen=True)
class FailedRun:
    """A run that failed during ``run-sensors``, said in one line."""

    pipeline: str
    partition: str
    run_id: str
    reason: str

    def line(self) -> str:
        return f"{self.pipeline} {self.partition}: run {self.run_id[:8]} failed: {self.reason}"


def _innermost(error: BaseException) -> str:
    """The message of the innermost cause of ``error`` (Dagster wraps a sensor's errors)."""
    while error.__cause__ is not None:
        error = error.__cause__
    return str(error)


def failure_reason(result: Any) -> str:
    """The innermost error of a failed run's first step failure, in one line."""
    for event in result.all_events:
        data = event.step_failure_data if event.is_step_failure else None
        if data is None or data.error is None:
            continue
        error = data.error
        while error.cause is not None:
            error = error.cause
        first = (error.message or "").strip().splitlines()
        # py4j-captured errors repeat their own class path before the message
        text = (first[0] if first else "").split(f"{error.cls_name}: ", 1)[-1]
        return f"{error.cls_name}: {text}"[:400]
    return "the run failed (see its logs in the Dagster UI)"


def quiet_definitions(config: ProjectConfig) -> Any:
    """The code location's Definitions with Spark's own logging at FATAL: failed runs are
    summarized at the end, and Spark's error logs would repeat them mid-way."""
    from watermark_assets.defs import build_definitions

    quiet_spark = config.spark.model_copy(
        update={"conf": {"spark.log.level": "FATAL", **config.spark.conf}}
    )
    return build_definitions(config.model_copy(update={"spark": quiet_spark}))


def as_sensor_run(sensor_name: str, request: Any) -> dict[str, str]:
    """The tags the daemon gives a run it launches for ``request``: its run key and the sensor's
    name. A headless pass (``run-sensors``, ``demo``) tags its runs so: the sensor's page lists
    them, and switching the sensor on later does not launch a request the pass already ran (the
    daemon skips a run key its sensor launched before; a time sensor's keys carry the cut-off,
    so the grace windows a pass ran are not run again until the cut-off moves)."""
    from dagster._core.storage.tags import RUN_KEY_TAG, SENSOR_NAME_TAG

    tags = {**request.tags, SENSOR_NAME_TAG: sensor_name}
    if request.run_key:
        tags[RUN_KEY_TAG] = request.run_key
    return tags


def _run_keys(requests: Sequence[Any]) -> list[str]:
    """The run keys of a tick's requests (its recorded tick names their runs)."""
    return [str(request.run_key) for request in requests if request.run_key]


def run_sensors(
    config_path: str | None = None, *, max_ticks: int = 50
) -> tuple[list[SummaryRow], list[FailedRun]]:
    """Evaluate each pipeline's sensor and execute the runs it requests until it skips.

    What the daemon does, headless: the runs are launched on the instance in $DAGSTER_HOME, the
    sensor's asset events (observations) are recorded there, a failed run does not stop the
    others (its partition is not run again in this pass), and every failure is returned.
    """
    from dagster import DagsterInstance, build_sensor_context

    from watermark_assets.defs.assets import job_name, requested_files
    from watermark_assets.defs.headless_ticks import record_tick

    config = load_config(config_path)
    # No prestart here: most passes are idle, and an idle pass must not start a JVM (it would
    # burn seconds of CPU in the background for nothing); a run's session starts on first use.
    defs = quiet_definitions(config)
    instance = DagsterInstance.get()
    startup_done()
    rows: list[SummaryRow] = []
    failures: list[FailedRun] = []
    for pipeline in config.file_pipelines:  # column pipelines have no sensor (manual runs)
        sensor_def = defs.resolve_sensor_def(f"{pipeline.name}_sensor")
        job = defs.resolve_job_def(job_name(pipeline.name))
        cursor = None
        failed_partitions: set[str] = set()
        for tick in range(1, max_ticks + 1):
            context = build_sensor_context(instance=instance, cursor=cursor, definitions=defs)
            started = time.time()
            try:
                data = sensor_def.evaluate_tick(context)
            except Exception as error:  # the daemon records a failed tick and goes on
                print(f"  {pipeline.name} tick {tick}: FAILED: {_innermost(error)}")
                break
            cursor = data.cursor
            for event in data.asset_events:
                instance.report_runless_asset_event(event)
            requests = [
                r for r in data.run_requests or () if r.partition_key not in failed_partitions
            ]
            if not requests:
                why = data.skip_message or "only partitions that failed in this pass are left"
                record_tick(
                    instance, sensor_def.name, started=started, skip_reason=why, cursor=cursor
                )
                print(f"  {pipeline.name} tick {tick}: {why}")
                break
            print(f"  {pipeline.name} tick {tick}: {len(requests)} runs requested")
            for number, request in enumerate(requests, 1):
                started = time.monotonic()
                result = job.execute_in_process(
                    instance=instance,
                    partition_key=request.partition_key,
                    run_config={**request.run_config, **QUIET_LOGS},
                    tags=as_sensor_run(sensor_def.name, request),
                    raise_on_error=False,
                )
                files = len(requested_files(request.run_config, pipeline.name) or ())
                print(
                    f"    [{number}/{len(requests)}] partition {request.partition_key}: "
                    f"{files} files, run {result.run_id[:8]} "
                    f"{'succeeded' if result.success else 'FAILED'} "
                    f"in {time.monotonic() - started:.1f}s"
                )
                if not result.success:
                    key = str(request.partition_key)
                    failed_partitions.add(key)
                    failures.append(
                        FailedRun(pipeline.name, key, result.run_id, failure_reason(result))
                    )
            record_tick(
                instance,
                sensor_def.name,
                started=started,
                run_keys=_run_keys(requests),
                cursor=cursor,
            )
        rows.append(summarize(pipeline))
    return rows, failures


@dataclass(frozen=True)
class ColumnStep:
    """One run of a column pipeline in the demo, read from its materialization."""

    pipeline: str
    step: str
    rows_read: int
    before: str
    after: str
    pushed_down: str
    details: str

    def lines(self) -> list[str]:
        return [
            f"{self.pipeline}, {self.step}: {self.rows_read} rows read{self.details}",
            f"    watermark before: {self.before}",
            f"    watermark after:  {self.after}",
            f"    pushed predicate: {self.pushed_down}",
        ]


def _column_step(pipeline: str, number: int, result: Any) -> ColumnStep:
    from watermark_assets import vocabulary as vocab

    (materialization,) = result.asset_materializations_for_node(pipeline)
    meta = {key: value.value for key, value in materialization.metadata.items()}
    before = str(meta.get(vocab.WATERMARK_BEFORE, "-"))
    if number == 2:
        step = "step 2 (incremental: the changed rows)"
    elif before.startswith("(empty"):
        step = "step 1 (initial load)"
    else:
        step = "step 1 (what changed since the watermark)"
    details = meta.get(vocab.READ_DETAILS) or {}
    extra = ""
    if "files_skipped_by_statistics" in details:
        extra = (
            f" (files read {details.get('files_read')}, skipped by statistics "
            f"{details['files_skipped_by_statistics']})"
        )
    elif "num_partitions" in details:
        extra = f" (JDBC partitions: {details['num_partitions']})"
    return ColumnStep(
        pipeline=pipeline,
        step=step,
        rows_read=int(meta.get(vocab.ROWS_READ, 0)),
        before=before,
        after=str(meta.get(vocab.WATERMARK_AFTER, "-")),
        pushed_down=str(meta.get(vocab.READ_PUSHED_DOWN, "-")),
        details=extra,
    )


def _prepare_column_sources(config: ProjectConfig) -> list[ColumnPipelineConfig]:
    """The column pipelines the demo can run; a JDBC one is skipped, in one line, without a
    reachable PostgreSQL or the driver jar."""
    from watermark_assets.demo.postgres import admin_conninfo, prepare_customers
    from watermark_assets.sources.jdbc import has_postgres_driver, with_postgres_driver

    runnable = []
    for pipeline in config.column_pipelines:
        if pipeline.source.type == "jdbc":
            if not has_postgres_driver(with_postgres_driver(config.spark.conf)):
                print(
                    f"  {pipeline.name}: skipped: Spark has no PostgreSQL JDBC driver (Debian: "
                    "apt-get install libpostgresql-jdbc-java, or `make jdbc`; elsewhere "
                    "spark.jars.packages: org.postgresql:postgresql:42.7.4)"
                )
                continue
            conninfo = admin_conninfo(os.environ)
            try:
                print(f"  {pipeline.name}: {prepare_customers(conninfo)}")
            except Exception as error:  # psycopg.OperationalError: no server, no such role...
                reason = str(error).strip().splitlines()[0] if str(error).strip() else error
                print(
                    f"  {pipeline.name}: skipped: no PostgreSQL reachable at {conninfo} "
                    f"({reason}); set WATERMARK_ASSETS_DEMO_POSTGRES to a server's URI to run it"
                )
                continue
        runnable.append(pipeline)
    return runnable


def _change_sources(pipelines: Sequence[ColumnPipelineConfig]) -> None:
    """About 1% of each source's rows change between the two steps."""
    from watermark_assets.demo.data import update_orders
    from watermark_assets.demo.postgres import admin_conninfo, update_customers

    for pipeline in pipelines:
        if pipeline.source.type == "delta_table":
            count, stamp = update_orders(Path(pipeline.source.location))
            print(
                f"  {pipeline.name}: {count} orders shipped (updated_at {stamp.isoformat()}) in "
                "a new commit of the source table"
            )
        elif pipeline.source.type == "jdbc":
            count = update_customers(admin_conninfo(os.environ))
            print(f"  {pipeline.name}: {count} customers updated in PostgreSQL")


def run_column_pipelines(
    config_path: str | None = None,
) -> tuple[list[ColumnStep], list[FailedRun]]:
    """The column pipelines, twice: step 1 reads what is above their watermarks (everything the
    first time), about 1% of the source rows change, step 2 reads only those."""
    from dagster import DagsterInstance

    from watermark_assets.defs.assets import job_name

    config = load_config(config_path)
    pipelines = _prepare_column_sources(config)
    if not pipelines:
        return [], []
    defs = quiet_definitions(config)
    instance = DagsterInstance.get()
    startup_done()
    steps: list[ColumnStep] = []
    failures: list[FailedRun] = []
    for number in (1, 2):
        if number == 2:
            _change_sources(pipelines)
        for pipeline in list(pipelines):
            started = time.monotonic()
            result = defs.resolve_job_def(job_name(pipeline.name)).execute_in_process(
                instance=instance, run_config=QUIET_LOGS, raise_on_error=False
            )
            print(
                f"  {pipeline.name} step {number}: run {result.run_id[:8]} "
                f"{'succeeded' if result.success else 'FAILED'} "
                f"in {time.monotonic() - started:.1f}s"
            )
            if not result.success:
                failures.append(
                    FailedRun(pipeline.name, "-", result.run_id, failure_reason(result))
                )
                pipelines.remove(pipeline)
                continue
            steps.append(_column_step(pipeline.name, number, result))
    return steps, failures


def summarize_partitioned(config: ProjectConfig) -> list[PartitionedRow]:
    """The rows of every kind but file-path, kind by kind (``kinds.KINDS``: time, unit (time x
    unit: one row per grid), event time, column)."""
    return summary_rows(config)[1]


def _run_partition(
    job: Any,
    instance: Any,
    pipeline: str,
    key: str | None,
    failures: list[FailedRun],
    tags: Mapping[str, str] | None = None,
    label: str | None = None,
) -> bool:
    """One run of ``key`` (None: unpartitioned, or the range its ``tags`` name), said in one
    line; False when it failed."""
    started = time.monotonic()
    result = job.execute_in_process(
        instance=instance,
        partition_key=key,
        run_config=QUIET_LOGS,
        raise_on_error=False,
        tags=dict(tags or {}),
    )
    said = ""
    if result.success:
        from watermark_assets import vocabulary as vocab

        (materialization, *_) = result.asset_materializations_for_node(pipeline)
        meta = {k: v.value for k, v in materialization.metadata.items()}
        said = f"{meta.get('rows/read', 0)} rows read, {meta.get('rows/committed', 0)} committed"
        if vocab.REPLACE_HIGH_WATERMARK in meta:
            said += f", high watermark {meta[vocab.REPLACE_HIGH_WATERMARK]}"
        if vocab.UNIT_ID in meta or vocab.UNIT_IDS in meta:
            said += f", done at {meta[vocab.WATERMARK_AFTER]}"
        if "event_time/windows_emitted" in meta:
            said = (
                f"{meta['rows/read']} rows read, {meta['event_time/windows_emitted']} windows "
                f"emitted, {meta['event_time/windows_open']} open, "
                f"{meta['event_time/late_records']} late records kept, watermark "
                f"{meta['event_time/explain'].rsplit('watermark ', 1)[-1]}"
            )
        said += "; "
    print(
        f"    {label or key or '(unpartitioned)'}: {said}run {result.run_id[:8]} "
        f"{'succeeded' if result.success else 'FAILED'} in {time.monotonic() - started:.1f}s"
    )
    if not result.success:
        failures.append(FailedRun(pipeline, key or "-", result.run_id, failure_reason(result)))
    return bool(result.success)


def run_event_time_pipelines(config_path: str | None = None) -> list[FailedRun]:
    """One tick of each event-time pipeline's sensor (the partitions the watermark closes, and
    why), then the run it requests."""
    from dagster import DagsterInstance, build_sensor_context

    from watermark_assets.defs.assets import job_name
    from watermark_assets.defs.headless_ticks import record_tick

    config = load_config(config_path)
    defs = quiet_definitions(config)
    instance = DagsterInstance.get()
    startup_done()
    failures: list[FailedRun] = []
    for pipeline in config.event_time_pipelines:
        context = build_sensor_context(
            instance=instance, instance_ref=instance.get_ref(), definitions=defs
        )
        started = time.time()
        name = f"{pipeline.name}_sensor"
        data = defs.resolve_sensor_def(name).evaluate_tick(context)
        if not data.run_requests:
            record_tick(instance, name, started=started, skip_reason=data.skip_message)
            print(f"  {pipeline.name}: {data.skip_message}")
            continue
        for request in data.run_requests:
            first = request.tags["dagster/asset_partition_range_start"]
            last = request.tags["dagster/asset_partition_range_end"]
            print(f"  {pipeline.name}: the sensor requests {first} .. {last}")
            job = defs.resolve_job_def(job_name(pipeline.name))
            _run_partition(
                job,
                instance,
                pipeline.name,
                None,
                failures,
                tags=as_sensor_run(name, request),
                label=f"{first} .. {last}",
            )
        record_tick(instance, name, started=started, run_keys=_run_keys(data.run_requests))
    return failures


def run_event_time_demo(config_path: str | None = None) -> list[FailedRun]:
    """The event-time pipelines, then a late landing file (``demo/data.write_late_events``):
    ingested by the file sensor, it holds old events (kept as late records) and new ones (the
    watermark passes the last day)."""
    from watermark_assets.demo.data import write_late_events

    failures = run_event_time_pipelines(config_path)
    config = load_config(config_path)
    upstreams = {name for p in config.event_time_pipelines for name in p.source.names}
    landed = []
    for pipeline in config.file_pipelines:
        if pipeline.name in upstreams and pipeline.source.type == "files":
            path = write_late_events(Path(pipeline.source.uri))
            if path is not None:
                landed.append(path)
                print(f"  a late file lands in {pipeline.name}: {path.name}")
    if landed:
        _, file_failures = run_sensors(config_path)
        failures += file_failures
        failures += run_event_time_pipelines(config_path)
    return failures


def _tick_grid(defs: Any, instance: Any, name: str, job: Any, failures: list[FailedRun]) -> None:
    """One tick of a time x unit pipeline's sensor, applied as the daemon does (new ids become
    partitions), then its runs: one per unit and range of due windows."""
    from dagster import build_sensor_context

    from watermark_assets.defs.headless_ticks import record_tick
    from watermark_assets.defs.time_unit import RANGE_END, RANGE_START

    context = build_sensor_context(
        instance=instance, instance_ref=instance.get_ref(), definitions=defs
    )
    started = time.time()
    data = defs.resolve_sensor_def(f"{name}_sensor").evaluate_tick(context)
    for request in data.dynamic_partitions_requests or ():
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    requests = list(data.run_requests or ())
    print(f"  {name}: {data.skip_message or f'the sensor requests {len(requests)} run(s)'}")
    for request in requests:
        tags = as_sensor_run(f"{name}_sensor", request)
        key = request.partition_key
        label = key or f"cells {tags.get(RANGE_START)} .. {tags.get(RANGE_END)}"
        _run_partition(job, instance, name, key, failures, tags=tags, label=label)
    record_tick(
        instance,
        f"{name}_sensor",
        started=started,
        run_keys=_run_keys(requests),
        skip_reason=data.skip_message,
        cursor=data.cursor,
    )


def run_partitioned_pipelines(config_path: str | None = None, *, ticks: int = 2) -> list[FailedRun]:
    """The time and unit pipelines, headless, with the decisions their ticks make.

    Time: ``ticks`` ticks of :func:`~watermark_assets.defs.time.decide_tick` (what the schedule
    and the sensor request), each printing why, then a run per partition due; the second tick
    shows the grace period (the windows before the highest high watermark run again). Units:
    explicit ids that never ran; with a secondary input, one tick of the units sensor (the
    partitions it adds and the runs it requests).
    """
    from dagster import DagsterInstance, build_sensor_context

    from watermark_assets.defs.assets import job_name
    from watermark_assets.defs.headless_ticks import record_tick
    from watermark_assets.defs.time import decide_tick, tick_requests
    from watermark_assets.runs.unit import load_unit_watermark

    config = load_config(config_path)
    if not config.time_pipelines and not config.unit_pipelines:
        return []
    defs = quiet_definitions(config)
    instance = DagsterInstance.get()
    startup_done()
    failures: list[FailedRun] = []
    for pipeline in config.time_pipelines:
        job = defs.resolve_job_def(job_name(pipeline.name))
        previous = None
        for tick in range(1, ticks + 1):
            started = time.time()
            decision = decide_tick(pipeline, system_clock())
            if (decision.keys, decision.due.cut_off.at) == previous:
                print(f"  {pipeline.name} tick {tick}: the cut-off did not move, nothing new")
                break
            previous = (decision.keys, decision.due.cut_off.at)
            print(f"  {pipeline.name} tick {tick}: {decision.due.explain()}")
            keys: Sequence[str | None] = decision.keys or ([None] if decision.runs else [])
            sensor_name = f"{pipeline.name}_sensor"
            if not keys:
                record_tick(
                    instance, sensor_name, started=started, skip_reason=decision.due.explain()
                )
                break
            # what NAME_sensor requests at this tick, under its run keys (as_sensor_run)
            requests = tick_requests(pipeline, decision, set(), lambda base: "a0").runs
            tagged = [(r.partition_key, as_sensor_run(sensor_name, r)) for r in requests]
            ran = [
                _run_partition(job, instance, pipeline.name, k, failures, tags=t) for k, t in tagged
            ]
            record_tick(instance, sensor_name, started=started, run_keys=_run_keys(requests))
            if not all(ran):
                break  # a failed run: the next tick would only ask for it again
    for unit_pipeline in config.unit_pipelines:
        job = defs.resolve_job_def(job_name(unit_pipeline.name))
        explicit = unit_pipeline.watermark.explicit_units
        if unit_pipeline.is_time_by_unit:  # its sensor adds the ids and requests the due cells
            _tick_grid(defs, instance, unit_pipeline.name, job, failures)
            continue
        if explicit is None:
            sensor_def = defs.resolve_sensor_def(f"{unit_pipeline.name}_units_sensor")
            context = build_sensor_context(
                instance=instance, instance_ref=instance.get_ref(), definitions=defs
            )
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
            _run_partition(job, instance, unit_pipeline.name, unit, failures, tags=tags)
        if explicit is None:
            record_tick(
                instance,
                sensor_def.name,
                started=started,
                run_keys=_run_keys(data.run_requests or ()),
                skip_reason=data.skip_message,
                cursor=data.cursor,
            )
    return failures


def explain_command(
    config_path: str | None, name: str, path: str | None, as_json: bool, limit: int
) -> int:
    """``explain PIPELINE [PATH]``: one verdict for PATH, else every file not ingested; a
    pipeline of another kind: :func:`explain_state`."""
    import json

    from watermark_assets import explain
    from watermark_assets.defs.partitions import partition_mapper, partitions_definition

    config = load_config(config_path)
    if name not in {p.name for p in config.file_pipelines}:
        if path is not None:
            config.file_pipeline(name)  # a PATH is a landing file: ConfigError for this kind
        print("\n".join(explain_state(config, name)))
        return 0
    pipeline = config.file_pipeline(name)
    now = system_clock()
    partition_of = partition_mapper(partitions_definition(pipeline), system_clock)
    evidence = explain.gather_evidence(pipeline, partition_of, now=now)
    if path is not None:
        answer = explain.explain_file(evidence, path)
        print(json.dumps(explain.file_json(name, answer)) if as_json else answer.line())
        return 0
    listing = explain.explain_all(evidence)
    cap = None if limit <= 0 else limit
    if as_json:
        print(json.dumps(explain.listing_json(listing, limit=cap)))
    else:
        print("\n".join(explain.listing_lines(listing, limit=cap)))
    return 0


def explain_state(config: ProjectConfig, name: str) -> list[str]:
    """``explain PIPELINE`` of a pipeline that is not a file-path one: its summary row, then
    where each of its states was read from (``StateStore.describe``: the file, the version it
    reflects, the commits after it, a gap passed over)."""
    from watermark_assets.defs.event_time import window_engine

    kind, pipeline = kind_of(config, name)
    lines = [kind.explain(config, pipeline)]
    for what, log, _ in _state_logs(config, name):
        lines.append(f"  {what}: {log.provenance()}")
    for pipeline in (p for p in config.column_pipelines if p.name == name):
        if pipeline.watermark.provider.type != "delta_metadata":
            lines.append(
                f"  column watermark: also saved by the {pipeline.watermark.provider.type} "
                "provider after each commit (the table's copy wins over an older saved one)"
            )
    for event in (p for p in config.event_time_pipelines if p.name == name):
        engine = window_engine(event, config)
        if engine.name == "batch":
            store = engine.spec.progress()
            lines.append(f"  event-time progress: {store.describe(store.read())}")
        else:
            lines.append("  event-time progress: in the streaming query's own checkpoint")
    return lines


def _state_logs(config: ProjectConfig, name: str) -> list[tuple[str, Any, Any]]:
    """The pipeline's states kept as commitInfo entries (``state.snapshot.StateLog``): what each
    is, its log, and what ``repair-state`` puts in from the table itself (None: nothing)."""
    logs: list[tuple[str, Any, Any]] = []
    for time_pipeline in (p for p in config.time_pipelines if p.name == name):
        from watermark_assets.runs.time import TimeWatermarkLog

        logs.append(("time watermark", TimeWatermarkLog(time_pipeline), None))
    for unit_pipeline in (p for p in config.unit_pipelines if p.name == name):
        from watermark_assets.runs.time_unit import GridLog
        from watermark_assets.runs.unit import UnitDoneAtLog

        table = unit_pipeline.table.uri
        logs.append(
            ("time x unit watermark", GridLog(unit_pipeline), None)
            if unit_pipeline.is_time_by_unit
            else ("units' done-at", UnitDoneAtLog(table, name), None)
        )
    for pipeline in (p for p in config.column_pipelines if p.name == name):
        from watermark_assets.providers.delta_metadata import column_state_log, table_watermark

        logs.append(  # every commit carries it, whatever the provider (``runs/column.py``)
            (
                "column watermark",
                column_state_log(pipeline.table.uri, pipeline.dataflow_id, pipeline.name),
                lambda record, pipeline=pipeline: table_watermark(pipeline, record),
            )
        )
        replay = pipeline.replay
        if replay is not None and replay.save_watermark:
            from watermark_assets.runs.column_replay import (
                committed_upper_bound,
                replay_dataflow_id,
                target_pipeline,
            )

            dataflow = replay_dataflow_id(pipeline.name, replay)
            target = target_pipeline(pipeline, replay).table.uri

            def chunks_done(
                record: Any,
                pipeline: Any = pipeline,
                replay: Any = replay,
                dataflow: str = dataflow,
            ) -> Any:
                bound = committed_upper_bound(pipeline, replay)
                if bound is None:
                    return None
                return dataclasses.replace(
                    record or _record(dataflow), watermark=bound.to_json(), delta_version=None
                )

            logs.append(
                (
                    f"replay watermark {dataflow}",
                    column_state_log(target, dataflow, pipeline.name),
                    chunks_done,
                )
            )
    return logs


def repair_state_command(config_path: str | None, name: str) -> int:
    """``repair-state PIPELINE``: rebuild the pipeline's state files from what the table still
    holds, after StateHistoryLostError (commits of the pipeline cleaned from the Delta log
    before any run or tick read them). Time, time x unit and unit pipelines: the file and the
    commits left, folded; a window, cell or unit recorded only in a lost commit runs again on
    the next tick (a run replaces it: no duplicate). Column pipelines (``delta_metadata``): the
    watermark becomes the greatest watermark-column value of the table's rows. File-path
    pipelines: the checkpoint rebuilt from the table's rows and their lineage. Event-time
    aggregates (batch engine): after UpstreamHistoryLostError the batch in flight is moved to
    the upstreams' current versions (``runs/event_window.replan_batch``); when their own progress
    is gone, their tables are removed and the next run aggregates the upstream again."""
    config = load_config(config_path)
    config.pipeline(name)  # an unknown name: ConfigError listing the known ones
    for file_pipeline in (p for p in config.file_pipelines if p.name == name):
        return _repair_file_state(file_pipeline)
    for event in (p for p in config.event_time_pipelines if p.name == name):
        return _repair_event_time(config, event)
    logs = _state_logs(config, name)
    if not logs:
        print(
            f"repair-state {name}: this pipeline keeps no state in its table; nothing to repair",
            file=sys.stderr,
        )
        return 2
    for what, log, replace in logs:
        lost = log.repair(replace)
        print(f"{name}: {what} rebuilt at Delta version {log.version} ({lost})")
    return 0


def _repair_event_time(config: ProjectConfig, pipeline: EventTimePipelineConfig) -> int:
    """The engine's repair (a batch in flight whose upstream versions are gone is moved to the
    upstreams' current ones: ``runs/event_window.replan_batch``); when the aggregate's own
    progress is gone (its state file lost and its log cleaned), it cannot be pieced together
    from its tables (the upstream versions read, each input's watermark): the tables are
    removed and the next run aggregates the upstream again."""
    from watermark_assets.defs.event_time import window_engine
    from watermark_assets.exceptions import (
        EVENT_TIME_RECOVERY,
        EventProgressLostError,
        StateHistoryLostError,
    )
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


def _repair_file_state(pipeline: Pipeline) -> int:
    """A file-path pipeline's checkpoint rebuilt from its tables' rows and lineage
    (``state/rebuild.py``)."""
    from watermark_assets.defs.partitions import partition_mapper, partitions_definition
    from watermark_assets.sources.file_discovery import partition_key_of
    from watermark_assets.state.rebuild import rebuild_state

    partition_of = partition_mapper(partitions_definition(pipeline), system_clock)
    rebuilt = rebuild_state(
        pipeline, lambda path: partition_key_of(pipeline, path, partition_of), now=system_clock()
    )
    print(rebuilt.line(pipeline.name))
    return 0


def _record(dataflow_id: str) -> Any:
    from watermark_assets.providers.base import WatermarkRecord

    return WatermarkRecord(
        dataflow_id=dataflow_id,
        watermark="",
        job_id="replay",
        dataflow_run_id="repair-state",
        updated_at=datetime.now(tz=timezone.utc),
    )


def replay_command(config_path: str | None, name: str, start: str | None, end: str | None) -> int:
    """``replay PIPELINE``: run the pipeline's ``replay`` section, the range overridden."""
    import uuid

    from pydantic import ValidationError

    from watermark_assets.config import ReplayConfig
    from watermark_assets.exceptions import ConfigError
    from watermark_assets.runs.column_replay import run_replay
    from watermark_assets.spark.session import spark_from_settings

    config = load_config(config_path)
    pipeline = config.column_pipeline(name)  # ConfigError: only column pipelines are replayed
    if pipeline.replay is None:
        raise ConfigError(
            f"replay {name}: the pipeline has no replay section; add "
            "replay: {start: ..., end: ..., chunk: {days: 1}} to it"
        )
    overrides = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    try:
        replay = ReplayConfig.model_validate({**pipeline.replay.model_dump(), **overrides})
        pipeline.replay_problem(replay)
    except (ValidationError, ValueError) as error:
        raise ConfigError(f"replay {name}: {error}") from None
    from watermark_assets.defs.run_worker import spark_settings

    # the project's session settings, the JDBC driver jar included when a pipeline reads JDBC
    spark = spark_from_settings(spark_settings(config))
    startup_done()
    result = run_replay(pipeline, replay, spark, run_id=f"replay-{uuid.uuid4().hex[:12]}")
    print(
        f"{name}: {len(result.chunks) - len(result.skipped)} chunks run, skipped "
        f"{result.skipped or 'none'}; production watermark {result.production_before} -> "
        f"{result.production_after}"
    )
    return 0


def console() -> int:
    """The program (``watermark-assets``, ``python -m watermark_assets.cli``): :func:`main`
    with Python's cyclic garbage collector off during start-up.

    Start-up imports Dagster, pyspark and pyarrow and opens the instance: hundreds of thousands
    of long-lived objects, which the collector would traverse again and again for nothing
    (about 0.3 s of a one-file run). :func:`startup_done` turns it back on, with those objects
    frozen out of later collections; so does the end of any command that never calls it.
    """
    gc.disable()
    try:
        return main()
    finally:
        startup_done()


def startup_done() -> None:
    """Collect as usual from here on, leaving what start-up created out of future collections
    (``gc.freeze``). Does nothing when the collector is on already (``main`` called directly)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; exit status 0, 1 when runs failed or a pipeline cannot run (its
    landing folder does not exist: ``summary`` says so), 2 for a configuration error."""
    parser = argparse.ArgumentParser(prog="watermark-assets", description=__doc__)
    parser.add_argument(
        "--config", help="YAML file (default: $WATERMARK_ASSETS_CONFIG or the demo)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("generate-demo-data", help="write the demo landing files")
    commands.add_parser("run-sensors", help="evaluate the sensors and run what they request")
    commands.add_parser("summary", help="print one row per pipeline")
    commands.add_parser(
        "demo",
        help="generate-demo-data, run-sensors, the column steps, the time and unit pipelines' "
        "due partitions, summary",
    )
    serve = commands.add_parser(
        "serve-demo-api",
        help="serve the demo's HTTP API on 127.0.0.1 (for payments_api_daily under dagster dev)",
    )
    serve.add_argument("--port", type=int, default=None, help="default 8765")
    explain = commands.add_parser(
        "explain",
        help="why a landing file was or was not ingested; without PATH every file that was not "
        "(a pipeline of another kind: its summary row and where its state was read from)",
    )
    explain.add_argument("pipeline", metavar="PIPELINE")
    explain.add_argument(
        "path", metavar="PATH", nargs="?", help="a landing file, relative to the source folder"
    )
    explain.add_argument("--json", action="store_true", help="machine-readable output")
    explain.add_argument(
        "--limit",
        type=int,
        default=20,
        help="file names shown per verdict without PATH (default 20; 0: all)",
    )
    replay = commands.add_parser(
        "replay", help="replay a range of a column pipeline in chunks (its replay section)"
    )
    replay.add_argument("pipeline", metavar="PIPELINE")
    replay.add_argument("--start", help="first value replayed (included), e.g. 2026-04-01T00:00Z")
    replay.add_argument("--end", help="where the replay stops (excluded)")
    repair = commands.add_parser(
        "repair-state",
        help="rebuild a pipeline's state snapshot from what its table still holds (after a "
        "'cannot be read' error naming this command)",
    )
    repair.add_argument("pipeline", metavar="PIPELINE")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except WatermarkAssetsError as error:
        print(f"watermark-assets: {error}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.command not in ("run-sensors", "demo", "replay"):
        startup_done()  # nothing heavy to start: collect as usual from the beginning
    if args.command == "explain":
        return explain_command(args.config, args.pipeline, args.path, args.json, args.limit)
    if args.command == "replay":
        return replay_command(args.config, args.pipeline, args.start, args.end)
    if args.command == "repair-state":
        return repair_state_command(args.config, args.pipeline)
    if args.command == "serve-demo-api":
        from watermark_assets.demo.api import DEFAULT_PORT, serve_demo_api

        serve_demo_api(DEFAULT_PORT if args.port is None else args.port)
        return 0
    from watermark_assets.demo.api import start_demo_api
    from watermark_assets.demo.postgres import export_jdbc_url

    export_jdbc_url(os.environ)
    api = start_demo_api(os.environ) if args.command == "demo" else None
    try:
        return _run_demo_commands(args)
    finally:
        if api is not None:
            api.stop()


def _run_demo_commands(args: argparse.Namespace) -> int:
    failures: list[FailedRun] = []
    steps: list[ColumnStep] = []
    if args.command in ("generate-demo-data", "demo"):
        print("Generating demo landing data")
        generate(args.config)
    if args.command in ("run-sensors", "demo"):
        print("Evaluating sensors and launching the runs they request")
        rows, failures = run_sensors(args.config)
    if args.command == "demo":
        print("Column watermarks: step 1, a change of ~1% of the source rows, step 2")
        steps, column_failures = run_column_pipelines(args.config)
        failures += column_failures
        print("Time and unit watermarks: the partitions their ticks say are due")
        failures += run_partitioned_pipelines(args.config)
        if load_config(args.config).event_time_pipelines:
            print("Event time: windows emitted once the watermark passes them, a late file")
            failures += run_event_time_demo(args.config)
    if args.command != "run-sensors":  # the demo's later steps land and ingest a late file
        rows, partitioned = summary_rows(load_config(args.config))
    else:
        partitioned = summarize_partitioned(load_config(args.config))
    if args.command != "generate-demo-data":
        print()
        print_table(rows)
        if partitioned:
            print()
            print_grid(PARTITIONED_HEADERS, [r.cells() for r in partitioned])
    if steps:
        print()
        for step in steps:
            print("\n".join(step.lines()))
    problems = [row.problem for row in rows if row.problem]
    if problems:
        print(f"\n{len(problems)} pipelines cannot run:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
    if failures:
        print(f"\n{len(failures)} runs failed:", file=sys.stderr)
        for failure in failures:
            print(f"  {failure.line()}", file=sys.stderr)
    return 1 if failures or problems else 0


if __name__ == "__main__":
    sys.exit(console())
