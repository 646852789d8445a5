"""What every kind's Dagster builder returns: :class:`PipelineDefs`, one pipeline's objects.

A kind builds them through its contract's ``dagster_defs`` hook (``kinds/<kind>.py``, which calls
the kind's builder in ``defs/``); ``defs/build.py`` then adds what every kind shares (the
asset's freshness policy and column schema as the builder gives them, the automation condition,
group, owners, tags, upstream and Dagster's ``column_schema_change`` check) without asking which
kind it holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from dagster import (
    AssetChecksDefinition,
    AssetsDefinition,
    FreshnessPolicy,
    ScheduleDefinition,
    SensorDefinition,
    TableSchema,
)
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)


@dataclass(frozen=True)
class PipelineDefs:
    """The Dagster objects of one pipeline, and the asset's attributes."""

    asset: AssetsDefinition
    checks: AssetChecksDefinition | None  # None: the asset carries its checks (event time)
    job: UnresolvedAssetJobDefinition
    sensor: SensorDefinition | None = None
    schedule: ScheduleDefinition | None = None
    #: more checks: ``backlog_within_limits`` (the sensor evaluates it) and Dagster's
    #: ``column_schema_change`` (``defs/build.schema_change_checks``)
    more_checks: tuple[AssetChecksDefinition, ...] = ()
    #: the asset's freshness policy (``defs/freshness.py``: the pipeline's cadence and grace)
    freshness: FreshnessPolicy | None = None
    #: the asset's ``dagster/column_schema`` (``defs/columns.py``: the declared columns, then
    #: the ones the pipeline adds); None when the source declares none
    column_schema: TableSchema | None = None
