"""The column kind (``watermark.kind: column``): rows above a watermark column's value, run by
hand (no sensor), replayed in chunks by ``replay``."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watermark_assets.config import ColumnPipelineConfig, ProjectConfig
from watermark_assets.core.clock import Clock
from watermark_assets.kinds.contract import DemoOutcome, DemoStep, PipelineKind, StateLogEntry
from watermark_assets.kinds.headless import (
    QUIET_LOGS,
    FailedRun,
    Headless,
    failure_reason,
    startup_done,
)
from watermark_assets.kinds.report import PartitionedRow, table_facts, version_cell

if TYPE_CHECKING:
    from watermark_assets.core.partition_selection import PartitionSelection
    from watermark_assets.defs.pipeline_defs import PipelineDefs
    from watermark_assets.engine.plan import PlannedRun


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


def column_step(pipeline: ColumnPipelineConfig, number: int, result: Any) -> ColumnStep:
    from watermark_assets import vocabulary as vocab
    from watermark_assets.defs.keys import node_name

    (materialization,) = result.asset_materializations_for_node(node_name(pipeline))
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
        pipeline=pipeline.name,
        step=step,
        rows_read=int(meta.get(vocab.ROWS_READ, 0)),
        before=before,
        after=str(meta.get(vocab.WATERMARK_AFTER, "-")),
        pushed_down=str(meta.get(vocab.READ_PUSHED_DOWN, "-")),
        details=extra,
    )


def demo_data(headless: Headless, pipelines: Sequence[ColumnPipelineConfig]) -> DemoOutcome:
    """The Delta source tables of the demo's column pipelines (skipped when already there)."""
    from watermark_assets.demo.data import write_orders

    for column in pipelines:
        if column.source.type != "delta_table":
            continue
        root = Path(column.source.location)
        if (root / "_delta_log").is_dir():
            print(f"  {column.name}: source table already in {root}")
            continue
        print(f"  {column.name}: source Delta table with {write_orders(root)} rows in {root}")
    return DemoOutcome([], [])


def _prepare_column_sources(
    config: ProjectConfig, pipelines: Sequence[ColumnPipelineConfig]
) -> list[ColumnPipelineConfig]:
    """The column pipelines the demo can run; a JDBC one is skipped, in one line, without a
    reachable PostgreSQL or the driver jar."""
    from watermark_assets.demo.postgres import admin_conninfo, prepare_customers
    from watermark_assets.sources.jdbc import has_postgres_driver, with_postgres_driver

    runnable = []
    for pipeline in pipelines:
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


def run_twice(headless: Headless, pipelines: Sequence[ColumnPipelineConfig]) -> DemoOutcome:
    """The column pipelines, twice: step 1 reads what is above their watermarks (everything the
    first time), about 1% of the source rows change, step 2 reads only those."""
    runnable = _prepare_column_sources(headless.config, pipelines)
    if not runnable:
        return DemoOutcome([], [])
    headless.defs  # noqa: B018  (built before the first run; start-up ends there)
    instance = headless.instance
    steps: list[ColumnStep] = []
    failures: list[FailedRun] = []
    for number in (1, 2):
        if number == 2:
            _change_sources(runnable)
        for pipeline in list(runnable):
            started = time.monotonic()
            result = headless.job(pipeline.name).execute_in_process(
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
                runnable.remove(pipeline)
                continue
            steps.append(column_step(pipeline, number, result))
    return DemoOutcome(failures, [line for step in steps for line in step.lines()])


def _record(dataflow_id: str) -> Any:
    from watermark_assets.providers.base import WatermarkRecord

    return WatermarkRecord(
        dataflow_id=dataflow_id,
        watermark="",
        job_id="replay",
        dataflow_run_id="repair-state",
        updated_at=datetime.now(tz=timezone.utc),
    )


def state_logs(config: ProjectConfig, pipeline: ColumnPipelineConfig) -> list[StateLogEntry]:
    """The column watermark every commit carries, whatever the provider (``runs/column.py``),
    and a replay's own watermark when it saves one. ``repair-state``: the watermark becomes the
    greatest watermark-column value of the table's rows; the replay's, the chunks done."""
    from watermark_assets.providers.delta_metadata import column_state_log, table_watermark

    logs = [
        StateLogEntry(
            "column watermark",
            column_state_log(pipeline.table.uri, pipeline.dataflow_id, pipeline.name),
            lambda record: table_watermark(pipeline, record),
        )
    ]
    replay = pipeline.replay
    if replay is not None and replay.save_watermark:
        from watermark_assets.kinds.column.replay import committed_upper_bound, replay_dataflow_id
        from watermark_assets.runs.column_spec import ColumnSpec

        dataflow = replay_dataflow_id(pipeline.name, replay)
        target = ColumnSpec.replaying(pipeline, replay).table.uri

        def chunks_done(record: Any) -> Any:
            assert replay is not None
            bound = committed_upper_bound(pipeline, replay)
            if bound is None:
                return None
            return dataclasses.replace(
                record or _record(dataflow), watermark=bound.to_json(), delta_version=None
            )

        logs.append(
            StateLogEntry(
                f"replay watermark {dataflow}",
                column_state_log(target, dataflow, pipeline.name),
                chunks_done,
            )
        )
    return logs


def explain_notes(config: ProjectConfig, pipeline: ColumnPipelineConfig) -> list[str]:
    if pipeline.watermark.provider.type == "delta_metadata":
        return []
    return [
        f"  column watermark: also saved by the {pipeline.watermark.provider.type} "
        "provider after each commit (the table's copy wins over an older saved one)"
    ]


def replay(
    config: ProjectConfig, pipeline: ColumnPipelineConfig, start: str | None, end: str | None
) -> int:
    """``replay PIPELINE``: run the pipeline's ``replay`` section, the range overridden: one
    Delta commit per chunk, one line for the whole replay."""
    import uuid

    from pydantic import ValidationError

    from watermark_assets.config import ReplayConfig
    from watermark_assets.defs.run_worker import spark_settings
    from watermark_assets.exceptions import ConfigError
    from watermark_assets.kinds.column.replay import run_replay
    from watermark_assets.spark.session import spark_from_settings

    name = pipeline.name
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


def plan(
    config: ProjectConfig,
    pipeline: ColumnPipelineConfig,
    selection: PartitionSelection | None,
    now: datetime,
) -> list[PlannedRun]:
    """What a run would read and write now: the rows above the watermark (unpartitioned), or
    each partition's window as a replay chunk (``partitions``), nothing saved."""
    from watermark_assets.kinds.column.defs import column_partitions, partition_replay
    from watermark_assets.kinds.column.replay import plan_replay
    from watermark_assets.runs.column import ColumnRunRequest, plan_column_batch
    from watermark_assets.runs.column_spec import ColumnSpec

    partitions_def = column_partitions(pipeline)
    if partitions_def is None or selection is None:
        request = ColumnRunRequest(pipeline=ColumnSpec.of(pipeline), run_id="plan")
        planned = plan_column_batch(request, now=now, repair=False)
        notes = (
            (
                f"the {planned.provider} provider's copy is behind the Delta log: the run "
                "saves the log's watermark to it first",
            )
            if planned.repaired_from_log
            else ()
        )
        return [planned.planned(None, f"{planned.watermark_before} ({planned.provider})", *notes)]
    keys = sorted(
        selection.keys, key=lambda key: partitions_def.time_window_for_partition_key(key).start
    )
    return plan_replay(pipeline, partition_replay(pipeline, partitions_def, selection), keys)


def dagster_defs(
    pipeline: ColumnPipelineConfig, clock: Clock, config: ProjectConfig
) -> PipelineDefs:
    """The Dagster objects of a column pipeline."""
    from watermark_assets.kinds.column.defs import build_column_pipeline

    return build_column_pipeline(pipeline, clock)


def summarize(pipeline: ColumnPipelineConfig) -> PartitionedRow:
    """A column pipeline's row: the watermark its provider keeps (``delta_metadata``: the state
    store of its table)."""
    import watermark_assets.providers  # noqa: F401  (registers the providers' builders)

    provider = pipeline.watermark.provider
    record = provider.build(pipeline.table.uri, pipeline.name).get_record(pipeline.dataflow_id)
    table = table_facts(pipeline)
    return PartitionedRow(
        pipeline=pipeline.name,
        kind=f"column ({provider.type})",
        partitions="-",
        rows=table.rows,
        watermark="-" if record is None or not record.watermark else _column_text(record.watermark),
        cut_off="-",
        delta_version=version_cell(table.version),
        schema=table.schema,
    )


def _column_text(stored: str) -> str:
    """A column watermark as the provider stores it (JSON with the state's sentinels), said as a
    person reads it: ``updated_at=2024-01-31T00:59:49Z, id=8973``; text that is no column
    watermark as it is."""
    from watermark_assets.core.column.watermark import ColumnWatermark
    from watermark_assets.core.errors import WatermarkJSONError

    try:
        return str(ColumnWatermark.from_json(stored))
    except WatermarkJSONError:
        return stored


KIND = PipelineKind[ColumnPipelineConfig](
    "column",
    ColumnPipelineConfig,
    lambda config: config.column_pipelines,
    lambda config, pipeline: summarize(pipeline),
    dagster_defs=dagster_defs,
    plan=plan,
    state_logs=state_logs,
    explain_notes=explain_notes,
    replay=replay,
    source_types=lambda pipeline: (pipeline.source.type,),
    demo_data=DemoStep(order=1, run=demo_data),
    demo_runs=DemoStep(
        order=1,
        run=run_twice,
        heading="Column watermarks: step 1, a change of ~1% of the source rows, step 2",
        always=True,
    ),
)
