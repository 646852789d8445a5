"""Dagster time partitions of a pipeline, and the mapping of landing times onto them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

from dagster import (
    DailyPartitionsDefinition,
    HourlyPartitionsDefinition,
    MonthlyPartitionsDefinition,
    TimeWindowPartitionsDefinition,
    WeeklyPartitionsDefinition,
    partition_loading_context,
)

from watermark_assets.config import CommitPipelineConfig, Granularity, IngestPipelineConfig
from watermark_assets.core.clock import Clock
from watermark_assets.exceptions import ConfigError

Pipeline = IngestPipelineConfig | CommitPipelineConfig


def _start(pipeline: Pipeline) -> datetime:
    try:
        start = datetime.fromisoformat(pipeline.partitions.start)
    except ValueError as error:
        raise ConfigError(
            f"pipeline {pipeline.name!r}: partitions.start {pipeline.partitions.start!r} is not an "
            "ISO date or datetime; write e.g. '2024-01-01'",
            pipeline=pipeline.name,
            key="partitions.start",
            value=pipeline.partitions.start,
        ) from error
    return start.replace(tzinfo=timezone.utc) if start.tzinfo is None else start


def partitions_definition(pipeline: Pipeline) -> TimeWindowPartitionsDefinition:
    """Partitions from ``partitions.start`` to the current (still filling) period included."""
    start = _start(pipeline)
    granularity = pipeline.partitions.granularity
    if granularity is Granularity.HOURLY:
        return HourlyPartitionsDefinition(start_date=start.strftime("%Y-%m-%d-%H:%M"), end_offset=1)
    day = start.strftime("%Y-%m-%d")
    if granularity is Granularity.DAILY:
        return DailyPartitionsDefinition(start_date=day, end_offset=1)
    if granularity is Granularity.WEEKLY:
        return WeeklyPartitionsDefinition(start_date=day, end_offset=1)
    return MonthlyPartitionsDefinition(start_date=day, end_offset=1)


def partition_mapper(
    partitions_def: TimeWindowPartitionsDefinition, clock: Clock
) -> Callable[[datetime], str | None]:
    """A function from a landing partition's time to its Dagster partition key.

    None for times before the first partition or after the current one: such files are reported
    by the sensor, never ingested into a partition they do not belong to.
    """
    start = partitions_def.start

    def partition_of(when: datetime) -> str | None:
        if when < start:
            return None
        with partition_loading_context(effective_dt=clock()):
            last = partitions_def.get_last_partition_window()
        if last is None or when >= last.end:
            return None
        return partitions_def.get_partition_key_for_timestamp(when.timestamp())

    return partition_of
