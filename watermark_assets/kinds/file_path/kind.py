"""The file-path kind (``watermark.kind: file_path``): landing files ingested partition by
partition, found by their sensor."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from watermark_assets import names
from watermark_assets.config import FilePipelineConfig, ProjectConfig
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.kinds.contract import DemoOutcome, DemoStep, PipelineKind
from watermark_assets.kinds.headless import (
    QUIET_LOGS,
    FailedRun,
    Headless,
    as_sensor_run,
    failure_reason,
    innermost,
    run_keys,
)
from watermark_assets.kinds.report import SummaryRow, table_facts, version_cell

if TYPE_CHECKING:
    from watermark_assets.core.filepath.watermark import FileWatermark
    from watermark_assets.core.partition_selection import PartitionSelection
    from watermark_assets.defs.pipeline_defs import PipelineDefs
    from watermark_assets.engine.plan import PlannedRun

#: Ticks of one pipeline's sensor in a pass, at most.
MAX_TICKS = 50


def _progress(label: str) -> object:
    def progress(done: int, total: int) -> None:
        width = 30
        filled = int(width * done / max(total, 1))
        end = "\n" if done >= total else ""
        print(
            f"\r  {label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}",
            end=end,
            flush=True,
        )

    return progress


def demo_data(headless: Headless, pipelines: Sequence[FilePipelineConfig]) -> DemoOutcome:
    """The demo's landing files (another writer's Parquet files for ``parquet_commit``)."""
    from watermark_assets.demo.data import write_clicks, write_events

    for pipeline in pipelines:
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
    return DemoOutcome([], [])


def sensor_pass(headless: Headless, pipelines: Sequence[FilePipelineConfig]) -> list[FailedRun]:
    """Each pipeline's sensor evaluated and the runs it requests executed until it skips: the
    runs are launched on the instance, the sensor's asset events (observations) are recorded
    there, a failed run does not stop the others (its partition is not run again in this
    pass)."""
    from watermark_assets.defs.headless_ticks import record_tick
    from watermark_assets.defs.keys import node_name
    from watermark_assets.kinds.file_path.assets import requested_files

    failures: list[FailedRun] = []
    if not pipelines:
        return failures
    defs, instance = headless.defs, headless.instance
    for pipeline in pipelines:
        sensor_def = defs.resolve_sensor_def(names.sensor_name(pipeline.name))
        node = node_name(pipeline)
        job = headless.job(pipeline.name)
        cursor = None
        failed_partitions: set[str] = set()
        for tick in range(1, MAX_TICKS + 1):
            context = headless.sensor_context(cursor=cursor)
            tick_started = time.time()
            try:
                data = sensor_def.evaluate_tick(context)
            except Exception as error:  # the daemon records a failed tick and goes on
                print(f"  {pipeline.name} tick {tick}: FAILED: {innermost(error)}")
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
                    instance, sensor_def.name, started=tick_started, skip_reason=why, cursor=cursor
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
                files = len(requested_files(request.run_config, node) or ())
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
                started=tick_started,
                run_keys=run_keys(requests),
                cursor=cursor,
            )
    return failures


def explain_files(
    config: ProjectConfig,
    pipeline: FilePipelineConfig,
    path: str | None,
    as_json: bool,
    limit: int,
) -> str:
    """One verdict for PATH, else every file not ingested (``watermark_assets/explain.py``)."""
    from watermark_assets import explain
    from watermark_assets.defs.partitions import partition_mapper, partitions_definition
    from watermark_assets.delta.schema_summary import schema_summary

    now = system_clock()
    partition_of = partition_mapper(partitions_definition(pipeline), system_clock)
    evidence = explain.gather_evidence(pipeline, partition_of, now=now)
    if path is not None:
        answer = explain.explain_file(evidence, path)
        return json.dumps(explain.file_json(pipeline.name, answer)) if as_json else answer.line()
    listing = explain.explain_all(evidence)
    cap = None if limit <= 0 else limit
    if as_json:
        return json.dumps(explain.listing_json(listing, limit=cap))
    schema = schema_summary(pipeline.table.uri, pipeline.schema_policy.mode.value)
    return "\n".join([*explain.listing_lines(listing, limit=cap), schema.line()])


def repair(config: ProjectConfig, pipeline: FilePipelineConfig) -> int:
    """The checkpoint rebuilt from the pipeline's tables' rows and lineage
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


def plan(
    config: ProjectConfig,
    pipeline: FilePipelineConfig,
    selection: PartitionSelection | None,
    now: datetime,
) -> list[PlannedRun]:
    """Each named partition's files above the watermark, planned as a run plans them now (none
    named: every partition with a file above the watermark, from the one listing a sensor tick
    makes); a run appends its partitions' files in ONE commit."""
    from watermark_assets.defs.partitions import partition_mapper, partitions_definition
    from watermark_assets.engine.plan import PlannedRun
    from watermark_assets.kinds.file_path.plan import BatchRequest, plan_batch
    from watermark_assets.sources.file_discovery import discover_files, partition_key_of
    from watermark_assets.state.load import load_state

    partition_of = partition_mapper(partitions_definition(pipeline), lambda: now)
    if selection is None:  # the sensor's listing: one state read, one listing
        state = load_state(pipeline, now=now)
        groups = discover_files(
            pipeline, state.watermark, partition_of, now=now, own_files=state.own_files
        )
        watermark, unreadable = state.watermark, list(groups.unreadable)
        by_partition = {key: list(paths) for key, paths in groups.by_partition.items() if paths}
        keys = sorted(by_partition)
        if not keys:
            nothing = "nothing: no file above the watermark in any partition"
            return [PlannedRun(None, _watermark_text(watermark), nothing, "nothing")]
    else:
        request = BatchRequest(pipeline=pipeline, selection=selection, run_id="plan")
        batch = plan_batch(request, partition_of, now=now)
        watermark, keys, unreadable = (
            batch.state.watermark,
            list(selection.keys),
            list(batch.unreadable),
        )
        by_partition = {key: [] for key in keys}
        for path in batch.files:
            by_partition[batch.file_partitions[path]].append(path)
    held: dict[str, list[str]] = {}
    for path in sorted(unreadable):
        held.setdefault(partition_key_of(pipeline, path, partition_of) or "", []).append(path)
    return [
        _planned_files(key, _watermark_text(watermark), sorted(by_partition.get(key, ())), held)
        for key in keys
    ]


def _planned_files(
    key: str, watermark: str, files: Sequence[str], held: Mapping[str, Sequence[str]]
) -> PlannedRun:
    from watermark_assets.core.text import files_text
    from watermark_assets.engine.plan import PlannedRun
    from watermark_assets.engine.write import Append, mode_text

    waiting = held.get(key, ())
    notes = (
        (f"{len(waiting)} files Spark cannot read by their exact path wait: {files_text(waiting)}",)
        if waiting
        else ()
    )
    if not files:
        return PlannedRun(key, watermark, "nothing: no file above the watermark", "nothing", notes)
    return PlannedRun(key, watermark, files_text(files), mode_text(Append()), notes)


def _watermark_text(watermark: FileWatermark) -> str:
    return f"{watermark.value or 'none'} ({watermark.state.value})"


def dagster_defs(pipeline: FilePipelineConfig, clock: Clock, config: ProjectConfig) -> PipelineDefs:
    """The Dagster objects of a file-path pipeline."""
    from watermark_assets.kinds.file_path.defs import build_file_pipeline

    return build_file_pipeline(pipeline, clock)


def summarize(pipeline: FilePipelineConfig) -> SummaryRow:
    """One summary row, read from the state (checkpoint + the commits after it: its running
    totals survive Delta's log cleanup) and the tables' statistics (rows now); a pipeline whose
    landing folder does not exist is in state ``ERROR``, its ``problem`` says why and how to fix
    it."""
    from watermark_assets.delta.log import table_row_count
    from watermark_assets.sources.locations import missing_source
    from watermark_assets.state.load import load_state

    missing = missing_source(pipeline)
    state = load_state(pipeline, now=system_clock())
    quarantined = table_row_count(pipeline.table.quarantine) or 0
    table = table_facts(pipeline)
    return SummaryRow(
        pipeline=pipeline.name,
        partitions=state.totals.partitions,
        files=state.totals.files,
        rows=table.rows,
        quarantined=quarantined,
        watermark=state.watermark.value or "-",
        state="ERROR: no landing folder" if missing else state.watermark.state.value,
        delta_version=version_cell(state.delta_version),
        problem=None if missing is None else str(missing),
        schema=table.schema,
    )


KIND = PipelineKind[FilePipelineConfig](
    "file_path",
    FilePipelineConfig,
    lambda config: config.file_pipelines,
    lambda config, pipeline: summarize(pipeline),
    dagster_defs=dagster_defs,
    plan=plan,
    explain_files=explain_files,
    repair=repair,
    sensor_pass=sensor_pass,
    demo_data=DemoStep(order=3, run=demo_data),
)
