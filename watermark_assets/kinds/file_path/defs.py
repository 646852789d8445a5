"""The Dagster objects of one file-path pipeline (the file-path kind's ``dagster_defs``,
``kinds/file_path/kind.py``): its daily/hourly partitioned asset, checks, job and sensor."""

from __future__ import annotations

from dagster import TableColumn, TableSchema

from watermark_assets.config import FilePipelineConfig
from watermark_assets.core.clock import Clock
from watermark_assets.defs.backlog_check import build_file_backlog_check
from watermark_assets.defs.checks import build_checks
from watermark_assets.defs.columns import column_schema
from watermark_assets.defs.freshness import GRANULARITY_CADENCE, freshness_policy
from watermark_assets.defs.jobs import pipeline_job
from watermark_assets.defs.partitions import partition_mapper, partitions_definition
from watermark_assets.defs.pipeline_defs import PipelineDefs
from watermark_assets.kinds.file_path.assets import build_asset
from watermark_assets.kinds.file_path.sensors import build_sensor
from watermark_assets.spark.batch import (
    INGESTED_AT_COLUMN,
    PARTITION_KEY_COLUMN,
    SOURCE_FILE_COLUMN,
)

#: The columns a file-path pipeline adds to every row (``spark/batch.py``), after the DDL's.
FILE_LINEAGE = (
    TableColumn(SOURCE_FILE_COLUMN, "string", "The landing file of the row (lineage)."),
    TableColumn(INGESTED_AT_COLUMN, "timestamp", "When the row was ingested (lineage)."),
    TableColumn(PARTITION_KEY_COLUMN, "string", "The row's Dagster partition (lineage)."),
)


def build_file_pipeline(pipeline: FilePipelineConfig, clock: Clock) -> PipelineDefs:
    """Everything of one file-path pipeline: fresh within its partitions' cadence; its sensor
    evaluates the ``backlog_within_limits`` check when the pipeline sets ``backlog``."""
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
    cadence = GRANULARITY_CADENCE[pipeline.partitions.granularity.value]
    return PipelineDefs(
        asset,
        check,
        job,
        sensor,
        more_checks=() if backlog is None else (backlog,),
        freshness=freshness_policy(pipeline.freshness, cadence),
        column_schema=file_schema(pipeline),
    )


def file_schema(pipeline: FilePipelineConfig) -> TableSchema | None:
    """The table's columns: the source's DDL, then (landing files read by Spark) the lineage
    columns, then the ``table.derived_columns``."""
    derived = [
        TableColumn(name, "derived", f"Spark SQL: {expression}")
        for name, expression in pipeline.table.derived_columns.items()
    ]
    added = [*FILE_LINEAGE, *derived] if pipeline.source.type == "files" else derived
    return column_schema(getattr(pipeline.source, "schema_ddl", None), added)
