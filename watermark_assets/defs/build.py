"""Definitions built from the configuration: per pipeline an asset, its job, sensor and checks."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from dagster import (
    AssetChecksDefinition,
    AssetsDefinition,
    BetaWarning,
    Definitions,
    DynamicPartitionsDefinition,
    FreshnessPolicy,
    ScheduleDefinition,
    SensorDefinition,
    TableColumn,
    TableSchema,
    build_column_schema_change_checks,
    in_process_executor,
)
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)

from watermark_assets import storage
from watermark_assets.config import (
    AnyPipeline,
    ColumnPipelineConfig,
    EventTimePipelineConfig,
    ProjectConfig,
    TimePipelineConfig,
    UnitPipelineConfig,
    load_config,
    source_folder,
)
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.defs.assets import (
    IO_MANAGER_KEY,
    SPARK_RESOURCE_KEY,
    build_asset,
    pipeline_job,
)
from watermark_assets.defs.automation import automation_condition
from watermark_assets.defs.backlog_check import build_file_backlog_check
from watermark_assets.defs.checks import build_checks
from watermark_assets.defs.column import (
    COLUMN_IO_MANAGER_KEY,
    ColumnWatermarkIOManager,
    build_column_asset,
    build_column_checks,
    column_partitions,
)
from watermark_assets.defs.columns import column_schema, with_asset_attributes, with_identity
from watermark_assets.defs.event_time import build_event_time_pipeline
from watermark_assets.defs.freshness import GRANULARITY_CADENCE, cron_cadence, freshness_policy
from watermark_assets.defs.io_manager import WatermarkDeltaIOManager
from watermark_assets.defs.partitions import partition_mapper, partitions_definition
from watermark_assets.defs.resources import WatermarkSparkResource
from watermark_assets.defs.run_worker import prestart_spark, spark_settings
from watermark_assets.defs.sensors import build_sensor
from watermark_assets.defs.time import build_time_pipeline, partition_cron
from watermark_assets.defs.time_unit import build_grid_pipeline
from watermark_assets.defs.unit import (
    build_unit_asset,
    build_unit_checks,
    build_units_sensor,
    unit_partitions,
)
from watermark_assets.defs.upstreams import source_specs, upstream_key, with_upstream
from watermark_assets.exceptions import LandingFolderMissingWarning
from watermark_assets.spark.batch import (
    INGESTED_AT_COLUMN,
    PARTITION_KEY_COLUMN,
    SOURCE_FILE_COLUMN,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PipelineDefs:
    """The Dagster objects of one pipeline."""

    asset: AssetsDefinition
    checks: AssetChecksDefinition | None  # None: the asset carries its checks (event time)
    job: UnresolvedAssetJobDefinition
    sensor: SensorDefinition | None
    schedule: ScheduleDefinition | None = None
    #: more checks: ``backlog_within_limits`` (the sensor evaluates it) and Dagster's
    #: ``column_schema_change`` (:func:`schema_change_checks`)
    more_checks: tuple[AssetChecksDefinition, ...] = ()


def build_pipeline(pipeline: AnyPipeline, clock: Clock, config: ProjectConfig) -> PipelineDefs:
    """The ONE place a pipeline's kind decides its Dagster objects (``config``: the whole file,
    for a pipeline that reads another one's table), with the asset's freshness policy, column
    schema (:func:`asset_attributes`) and automation condition (``defs/automation.py``)."""
    built = _kind_defs(pipeline, clock, config)
    freshness, schema = asset_attributes(pipeline)
    automation = automation_condition(pipeline.automation_condition)
    asset = with_asset_attributes(built.asset, freshness, schema, automation)
    asset = with_identity(asset, pipeline.group, pipeline.owners, pipeline.tags)
    return replace(
        built,
        asset=with_upstream(asset, upstream_key(pipeline, config.pipelines)),
        more_checks=(*built.more_checks, *schema_change_checks(asset)),
    )


def schema_change_checks(asset: AssetsDefinition) -> tuple[AssetChecksDefinition, ...]:
    """Dagster's ``column_schema_change`` check of the asset: it warns when the table's
    ``dagster/column_schema`` (every materialization's, ``defs/table_schema.py``) differs from
    the one before, naming the columns added and the types changed. It runs in the pipeline's
    job after the asset (an asset selection holds its checks). A warning, not a failure: an
    evolution the pipeline's ``schema.mode`` allowed is still worth seeing."""
    with warnings.catch_warnings():  # beta in Dagster 1.13; the API is what we need
        warnings.simplefilter("ignore", BetaWarning)
        return tuple(build_column_schema_change_checks(assets=[asset.key]))


def _kind_defs(pipeline: AnyPipeline, clock: Clock, config: ProjectConfig) -> PipelineDefs:
    if isinstance(pipeline, EventTimePipelineConfig):
        event_time = build_event_time_pipeline(pipeline, config, clock)
        return PipelineDefs(event_time.asset, None, event_time.job, event_time.sensor)
    if isinstance(pipeline, TimePipelineConfig):
        time = build_time_pipeline(pipeline, clock)
        return PipelineDefs(time.asset, time.checks, time.job, time.sensor, time.schedule)
    if isinstance(pipeline, ColumnPipelineConfig):
        asset = build_column_asset(pipeline, clock)
        check = build_column_checks(pipeline, asset.key)
        job = pipeline_job(
            pipeline.name,
            asset,
            check,
            column_partitions(pipeline),
            f"Reads the rows of {pipeline.name} above its column watermark"
            if pipeline.partitions is None
            else f"Replays the windows of {pipeline.name}'s partitions (one chunk each)",
        )
        return PipelineDefs(asset, check, job, None)
    if isinstance(pipeline, UnitPipelineConfig) and pipeline.is_time_by_unit:
        grid = build_grid_pipeline(pipeline, clock)
        return PipelineDefs(grid.asset, grid.checks, grid.job, grid.sensor)
    if isinstance(pipeline, UnitPipelineConfig):
        return _unit_pipeline(pipeline, clock)
    partitions_def = partitions_definition(pipeline)
    partition_of = partition_mapper(partitions_def, clock)
    asset = build_asset(pipeline, partitions_def, partition_of, clock)
    check = build_checks(pipeline, asset.key)
    job = pipeline_job(
        pipeline.name,
        asset,
        check,
        partitions_def,
        f"Ingests the files of {pipeline.name} above the watermark.",
    )
    sensor = build_sensor(pipeline, job, asset.key, partitions_def, partition_of, clock)
    backlog = build_file_backlog_check(pipeline, asset.key, clock)
    return PipelineDefs(
        asset, check, job, sensor, more_checks=() if backlog is None else (backlog,)
    )


#: The columns a file-path pipeline adds to every row (``spark/batch.py``), after the DDL's.
_FILE_LINEAGE = (
    TableColumn(SOURCE_FILE_COLUMN, "string", "The landing file of the row (lineage)."),
    TableColumn(INGESTED_AT_COLUMN, "timestamp", "When the row was ingested (lineage)."),
    TableColumn(PARTITION_KEY_COLUMN, "string", "The row's Dagster partition (lineage)."),
)


def asset_attributes(pipeline: AnyPipeline) -> tuple[FreshnessPolicy | None, TableSchema | None]:
    """The asset's freshness policy (``defs/freshness.py``: the pipeline's cadence and grace)
    and its column schema (``defs/columns.py``: the source's DDL, then the columns it adds)."""
    if isinstance(pipeline, EventTimePipelineConfig):
        cadence = GRANULARITY_CADENCE[pipeline.partitions.granularity]
        late = pipeline.watermark.delay_ms + pipeline.watermark.lateness_ms
        return freshness_policy(pipeline.freshness, cadence, timedelta(milliseconds=late)), None
    if isinstance(pipeline, TimePipelineConfig):
        cron = pipeline.schedule.cron or partition_cron(pipeline.watermark.spec)
        grace = timedelta(days=pipeline.watermark.grace_days)
        policy = freshness_policy(pipeline.freshness, cron_cadence(cron), grace)
        return policy, _source_schema(pipeline.source)
    if isinstance(pipeline, UnitPipelineConfig) and pipeline.watermark.time is not None:
        time = pipeline.watermark.time  # time x unit: its sensor requests the cells due
        cadence = cron_cadence(partition_cron(time.spec))
        policy = freshness_policy(pipeline.freshness, cadence, timedelta(days=time.grace_days))
        return policy, _source_schema(pipeline.source)
    if isinstance(pipeline, ColumnPipelineConfig | UnitPipelineConfig):
        return freshness_policy(pipeline.freshness, None), _source_schema(pipeline.source)
    cadence = GRANULARITY_CADENCE[pipeline.partitions.granularity.value]
    ddl = getattr(pipeline.source, "schema_ddl", None)
    derived = [
        TableColumn(name, "derived", f"Spark SQL: {expression}")
        for name, expression in pipeline.table.derived_columns.items()
    ]
    added = [*_FILE_LINEAGE, *derived] if pipeline.source.type == "files" else derived
    return freshness_policy(pipeline.freshness, cadence), column_schema(ddl, added)


def _source_schema(source: Any) -> TableSchema | None:
    """A column source's declared columns, with a file download's ``date_column``."""
    date_column = getattr(source, "date_column", None)
    added = (
        [] if date_column is None else [TableColumn(date_column, "timestamp", "The file's date.")]
    )
    return column_schema(getattr(source, "schema_ddl", None), added)


def _unit_pipeline(pipeline: UnitPipelineConfig, clock: Clock) -> PipelineDefs:
    """Static partitions of explicit ids; dynamic ones with their sensor (``defs/unit.py``)."""
    units = unit_partitions(pipeline)
    asset = build_unit_asset(pipeline, units, clock)
    check = build_unit_checks(pipeline, asset.key)
    job = pipeline_job(
        pipeline.name,
        asset,
        check,
        units,
        f"Replaces the rows of {pipeline.name}'s units (one commit per unit)",
    )
    sensor = None
    if isinstance(units, DynamicPartitionsDefinition):
        sensor = build_units_sensor(pipeline, job, asset.key, units)
    return PipelineDefs(asset, check, job, sensor)


def warn_missing_sources(config: ProjectConfig) -> None:
    """A :class:`LandingFolderMissingWarning` (and a log line) for each pipeline whose landing
    folder (file-path pipelines) or source folder (column, time and unit pipelines reading a
    Delta table, Parquet, CSV or JSON files) does not exist. Loading goes on: the other pipelines
    work, and this one's sensor tick, runs, ``explain`` and ``summary`` report the same error.
    One stat (S3: one listing of at most one key) per pipeline; a location that cannot be
    checked (storage unreachable) is not reported here."""
    for pipeline in config.pipelines:
        folder = source_folder(pipeline)
        if folder is None:
            continue
        uri, what = folder
        try:
            detail = storage.missing_folder(uri)
        except Exception:  # a check that fails must never stop the loading
            continue
        if detail is not None:
            warning = LandingFolderMissingWarning(pipeline.name, uri, detail, what)
            warnings.warn(warning, stacklevel=2)
            logger.warning(str(warning))


#: The resources of each Spark settings built in this process (see location_resources).
_RESOURCES: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}


def location_resources(spark_conf: dict[str, str]) -> dict[str, Any]:
    """The IO managers and the Spark resource of a code location: the same objects for the same
    settings, so that two configurations of one code location (two WatermarkPipelines
    components) merge into one Definitions (Dagster merges a resource key only when both sides
    hold the very same object)."""
    key = tuple(sorted(spark_conf.items()))
    shared = _RESOURCES.setdefault(
        key,
        {
            IO_MANAGER_KEY: WatermarkDeltaIOManager(),
            COLUMN_IO_MANAGER_KEY: ColumnWatermarkIOManager(),
            SPARK_RESOURCE_KEY: WatermarkSparkResource(spark_config=spark_conf),
        },
    )
    return dict(shared)


def build_definitions(
    config: ProjectConfig | None = None, *, clock: Clock = system_clock
) -> Definitions:
    """Everything the code location shows, named after each pipeline ``NAME``.

    asset ``NAME``; job ``NAME_job``; checks ``NAME_checks`` (``watermark_never_moves_backwards``
    and ``rows_reconcile``) and Dagster's ``column_schema_change``; file-path pipelines also a
    sensor ``NAME_sensor`` (column pipelines are materialized by hand or by a backfill for now);
    time pipelines a sensor ``NAME_sensor`` and a schedule ``NAME_schedule`` (``defs/time.py``);
    time x unit pipelines (a unit watermark with ``time``) a sensor ``NAME_sensor``
    (``defs/time_unit.py``). Runs execute in one
    process (the in-process executor); in a run worker Spark starts as the definitions are built
    (``defs/run_worker.py``).
    """
    config = config or load_config()
    built = [build_pipeline(pipeline, clock, config) for pipeline in config.pipelines]
    warn_missing_sources(config)
    spark_conf = spark_settings(config)
    prestart_spark(config.spark.prestart, spark_conf)  # only in a run worker
    return Definitions(
        assets=[*(b.asset for b in built), *source_specs(config.pipelines)],
        asset_checks=[
            *(b.checks for b in built if b.checks is not None),
            *(check for b in built for check in b.more_checks),
        ],
        jobs=[b.job for b in built],
        sensors=[b.sensor for b in built if b.sensor is not None],
        schedules=[b.schedule for b in built if b.schedule is not None],
        resources=location_resources(spark_conf),
        # One process per run: its steps (the asset, then its checks) share the run worker's
        # Spark session, started once, instead of a process, imports and a JVM per step.
        executor=in_process_executor,
    )
