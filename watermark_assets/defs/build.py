"""Definitions built from the configuration: per pipeline an asset, its job, sensor and checks."""

from __future__ import annotations

from dagster import AssetSelection, Definitions, define_asset_job

from watermark_assets.config import ProjectConfig, load_config
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.defs.assets import IO_MANAGER_KEY, SPARK_RESOURCE_KEY, build_asset
from watermark_assets.defs.checks import build_checks
from watermark_assets.defs.io_manager import WatermarkDeltaIOManager
from watermark_assets.defs.partitions import partition_mapper, partitions_definition
from watermark_assets.defs.resources import WatermarkSparkResource
from watermark_assets.defs.sensors import build_sensor


def job_name(pipeline_name: str) -> str:
    return f"{pipeline_name}_job"


def build_definitions(
    config: ProjectConfig | None = None, *, clock: Clock = system_clock
) -> Definitions:
    """Everything the code location shows, named after each pipeline ``NAME``.

    asset ``NAME``; job ``NAME_job``; sensor ``NAME_sensor``; checks ``NAME_checks``
    (``watermark_never_moves_backwards`` and ``rows_reconcile``).
    """
    config = config or load_config()
    assets, jobs, sensors, checks = [], [], [], []
    for pipeline in config.file_pipelines:
        partitions_def = partitions_definition(pipeline)
        partition_of = partition_mapper(partitions_def, clock)
        asset = build_asset(pipeline, partitions_def, partition_of, clock)
        check = build_checks(pipeline, asset.key)
        job = define_asset_job(
            job_name(pipeline.name),
            selection=AssetSelection.assets(asset) | AssetSelection.checks(check),
            partitions_def=partitions_def,
            description=f"Ingests the files of {pipeline.name} above the watermark.",
        )
        assets.append(asset)
        checks.append(check)
        jobs.append(job)
        sensors.append(build_sensor(pipeline, job, asset.key, partitions_def, partition_of, clock))
    spark_conf = {"spark.master": config.spark.master, **config.spark.conf}
    return Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=jobs,
        sensors=sensors,
        resources={
            IO_MANAGER_KEY: WatermarkDeltaIOManager(),
            SPARK_RESOURCE_KEY: WatermarkSparkResource(spark_config=spark_conf),
        },
    )
