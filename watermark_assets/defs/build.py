"""Definitions built from the configuration: per pipeline an asset, its job, sensor and checks."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dagster import (
    AssetChecksDefinition,
    AssetsDefinition,
    BetaWarning,
    Definitions,
    build_column_schema_change_checks,
    in_process_executor,
)

from watermark_assets import storage
from watermark_assets.config import AnyPipeline, ProjectConfig, load_config, source_folder
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.defs.automation import automation_condition
from watermark_assets.defs.columns import with_asset_attributes, with_identity
from watermark_assets.defs.io_manager import (
    COLUMN_IO_MANAGER_KEY,
    ColumnWatermarkIOManager,
    WatermarkDeltaIOManager,
)
from watermark_assets.defs.jobs import IO_MANAGER_KEY, SPARK_RESOURCE_KEY
from watermark_assets.defs.pipeline_defs import PipelineDefs
from watermark_assets.defs.resources import WatermarkSparkResource
from watermark_assets.defs.run_worker import prestart_spark, spark_settings
from watermark_assets.defs.upstreams import source_specs, upstream_key, with_upstream
from watermark_assets.exceptions import LandingFolderMissingWarning
from watermark_assets.kinds import KINDS

logger = logging.getLogger(__name__)


def build_pipeline(pipeline: AnyPipeline, clock: Clock, config: ProjectConfig) -> PipelineDefs:
    """A pipeline's Dagster objects: its kind builds them (``PipelineKind.dagster_defs``, the
    registry ``kinds/``; ``config``: the whole file, for a pipeline that reads another one's
    table); then what every kind shares: the asset's freshness policy and column schema (as its
    kind gives them), automation condition (``defs/automation.py``), group, owners, tags,
    upstream, and Dagster's ``column_schema_change`` check."""
    built = KINDS[pipeline.watermark.kind].dagster_defs(pipeline, clock, config)
    automation = automation_condition(pipeline.automation_condition)
    asset = with_asset_attributes(built.asset, built.freshness, built.column_schema, automation)
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
    config: ProjectConfig | None = None,
    *,
    clock: Clock = system_clock,
    spark_defaults: Mapping[str, str] | None = None,
) -> Definitions:
    """Everything the code location shows, named after each pipeline ``NAME``.

    asset ``NAME``; job ``NAME_job``; checks ``NAME_checks`` (``watermark_never_moves_backwards``
    and ``rows_reconcile``) and Dagster's ``column_schema_change``; file-path pipelines also a
    sensor ``NAME_sensor`` (column pipelines are materialized by hand or by a backfill for now);
    time pipelines a sensor ``NAME_sensor`` and a schedule ``NAME_schedule``
    (``kinds/time/defs.py``);
    time x unit pipelines (a unit watermark with ``time``) a sensor ``NAME_sensor``
    (``kinds/unit/grid_defs.py``). Runs execute in one
    process (the in-process executor); in a run worker Spark starts as the definitions are built
    (``defs/run_worker.py``).

    ``spark_defaults``: Spark settings under the configured ones (``spark.conf`` wins), e.g. the
    headless passes' quiet ``spark.log.level``; the configuration is left as it is.
    """
    config = config or load_config()
    built = [build_pipeline(pipeline, clock, config) for pipeline in config.pipelines]
    warn_missing_sources(config)
    spark_conf = {**(spark_defaults or {}), **spark_settings(config)}
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
