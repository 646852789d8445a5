"""Dagster time partitions of a pipeline, the mapping of landing times onto them, and the run's
partitions turned into a :class:`~watermark_assets.core.partition_selection.PartitionSelection`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from dagster import (
    AssetExecutionContext,
    DailyPartitionsDefinition,
    HourlyPartitionsDefinition,
    MonthlyPartitionsDefinition,
    MultiPartitionsDefinition,
    PartitionsDefinition,
    StaticPartitionsDefinition,
    TimeWindowPartitionsDefinition,
    WeeklyPartitionsDefinition,
    partition_loading_context,
)
from dagster import TimeWindow as DagsterTimeWindow

from watermark_assets.config import (
    ColumnPipelineConfig,
    Granularity,
    Pipeline,
    utc_instant,
)
from watermark_assets.core.clock import Clock
from watermark_assets.core.partition_selection import (
    PartitionDimension,
    PartitionSelection,
    TimeWindow,
)
from watermark_assets.exceptions import ConfigError


def _moment(pipeline: Pipeline | ColumnPipelineConfig, key: str, value: str) -> datetime:
    try:
        return utc_instant(value)  # a naive instant is UTC
    except ValueError as error:
        raise ConfigError(
            f"pipeline {pipeline.name!r}: partitions.{key} {value!r} is not an ISO date or "
            "datetime; write e.g. '2024-01-01'",
            pipeline=pipeline.name,
            key=f"partitions.{key}",
            value=value,
        ) from error


def partitions_definition(
    pipeline: Pipeline | ColumnPipelineConfig,
) -> TimeWindowPartitionsDefinition:
    """Partitions from ``partitions.start`` up to the current (still filling) period included,
    and never past ``partitions.end`` (exclusive) when it is set (a column pipeline: only when it
    has a ``partitions`` block).

    ``end_offset=1`` stays with an ``end``: Dagster's last partition is then the earlier of the
    last one before ``end`` and the current one, so an ``end`` in the future does not hide the
    current period's files until the period is over."""
    partitions = pipeline.partitions
    if partitions is None:
        raise ConfigError(f"pipeline {pipeline.name!r} has no partitions", pipeline=pipeline.name)
    start = _moment(pipeline, "start", partitions.start)
    end = partitions.end
    granularity = partitions.granularity
    hourly = granularity is Granularity.HOURLY
    shape = "%Y-%m-%d-%H:%M" if hourly else "%Y-%m-%d"
    bounds: dict[str, Any] = {"start_date": start.strftime(shape), "end_offset": 1}
    if end is not None:
        bounds["end_date"] = _moment(pipeline, "end", end).strftime(shape)
    if hourly:
        return HourlyPartitionsDefinition(**bounds)
    if granularity is Granularity.DAILY:
        return DailyPartitionsDefinition(**bounds)
    if granularity is Granularity.WEEKLY:
        return WeeklyPartitionsDefinition(**bounds)
    return MonthlyPartitionsDefinition(**bounds)


def partition_mapper(
    partitions_def: TimeWindowPartitionsDefinition, clock: Clock
) -> Callable[[datetime], str | None]:
    """A function from a landing partition's time to its Dagster partition key.

    None for times before the first partition or after the current one: such files are reported
    by the sensor, never ingested into a partition they do not belong to.

    The last partition's window is computed once per period of the clock, not once per file (a
    listing maps thousands): a window that holds the time it was computed at is the last one
    for every time it holds (the clock's period, and so the last partition, changes only at its
    end); a window that ended before that time is the definition's end, the last one at every
    later time (the end cuts it before the clock's period). Any other time computes it again.
    """
    start = partitions_def.start
    ends = partitions_def.end is not None and partitions_def.end_offset >= 1
    #: the last window, and the times it is the last one for (from, until; None: ever after)
    kept: list[tuple[DagsterTimeWindow, datetime, datetime | None]] = []

    def last_window(now: datetime) -> DagsterTimeWindow | None:
        for window, since, until in kept[-1:]:  # one read: sensors may tick in threads
            if since <= now and (until is None or now < until):
                return window
        with partition_loading_context(effective_dt=now):
            last = partitions_def.get_last_partition_window()
        if last is not None and last.start <= now < last.end:
            kept[:] = [(last, last.start, last.end)]
        elif last is not None and ends and last.end <= now:
            kept[:] = [(last, now, None)]
        else:
            kept[:] = []
        return last

    @functools.lru_cache(maxsize=4096)
    def key_of(when: datetime) -> str:
        """The key of the partition holding ``when`` (whatever the clock)."""
        return partitions_def.get_partition_key_for_timestamp(when.timestamp())

    def partition_of(when: datetime) -> str | None:
        if when < start:
            return None
        last = last_window(clock())
        if last is None or when >= last.end:
            return None
        return key_of(when)

    return partition_of


def partition_selection(context: AssetExecutionContext) -> PartitionSelection:
    """The run's partitions as a plain value (the one place Dagster's partitioning is read).

    Time partitions carry their window; static or dynamic ones their keys; multi-partitions each
    dimension (a time dimension with the window its keys cover).
    """
    definition = context.assets_def.partitions_def
    keys = list(context.partition_keys)
    if isinstance(definition, TimeWindowPartitionsDefinition):
        window = context.partition_time_window
        return PartitionSelection.of_time_window(keys, TimeWindow(window.start, window.end))
    return selection_of_keys(definition, keys)


def selection_of_keys(
    definition: PartitionsDefinition | None, keys: Sequence[str]
) -> PartitionSelection:
    """``keys`` of ``definition`` as the :class:`PartitionSelection` a run of them gets (see
    :func:`partition_selection`; a time window spans the keys' windows)."""
    keys = list(keys)
    if isinstance(definition, TimeWindowPartitionsDefinition):
        windows = [definition.time_window_for_partition_key(key) for key in keys]
        return PartitionSelection.of_time_window(
            keys, TimeWindow(min(w.start for w in windows), max(w.end for w in windows))
        )
    if isinstance(definition, MultiPartitionsDefinition):
        dimensions: dict[str, PartitionDimension] = {}
        split = [definition.get_partition_key_from_str(k).keys_by_dimension for k in keys]
        for dimension in definition.partitions_defs:
            values = sorted({by_dimension[dimension.name] for by_dimension in split})
            window = None
            if isinstance(dimension.partitions_def, TimeWindowPartitionsDefinition):
                first = dimension.partitions_def.time_window_for_partition_key(values[0])
                last = dimension.partitions_def.time_window_for_partition_key(values[-1])
                window = TimeWindow(first.start, last.end)
            dimensions[dimension.name] = PartitionDimension(dimension.name, tuple(values), window)
        return PartitionSelection.of_dimensions(keys, dimensions, split)
    return PartitionSelection.of_keys(keys)


def check_partition_keys(
    pipeline: str, definition: PartitionsDefinition | None, keys: Sequence[str]
) -> None:
    """ConfigError naming the first of ``keys`` that is no partition key of ``definition`` (a
    time key that does not parse, a static key not listed; a dynamic key is anyone's to add),
    or naming every key when the asset has no partitions."""
    if definition is None:
        if keys:
            raise ConfigError(
                f"pipeline {pipeline!r} has no partitions: {list(keys)} name none; "
                "leave out --partition",
                pipeline=pipeline,
            )
        return
    for key in keys:
        problem = _key_problem(definition, key)
        if problem is not None:
            raise ConfigError(
                f"pipeline {pipeline!r}: partition {key!r} {problem}",
                pipeline=pipeline,
                value=key,
            )


def _key_problem(definition: PartitionsDefinition, key: str) -> str | None:
    if isinstance(definition, TimeWindowPartitionsDefinition):
        if definition.has_partition_key(key):
            return None
        first, last = definition.get_first_partition_key(), definition.get_last_partition_key()
        span = "none yet" if first is None else f"{first!r} to {last!r}"
        return f"is not one of its partitions ({span}, written as {definition.fmt!r})"
    if isinstance(definition, MultiPartitionsDefinition):
        names = [d.name for d in definition.partitions_defs]
        if len(key.split("|")) != len(names):
            return (
                "is not one of its partitions; write one value per dimension "
                f"{names}, joined by '|'"
            )
        values = definition.get_partition_key_from_str(key).keys_by_dimension
        for dimension in definition.partitions_defs:
            value = values[dimension.name]
            problem = _key_problem(dimension.partitions_def, value)
            if problem is not None:
                return f"({dimension.name} {value!r}) {problem}"
        return None
    if isinstance(definition, StaticPartitionsDefinition):
        known = definition.get_partition_keys()
        if key not in known:
            return f"is not one of its partitions {known}"
    return None  # a dynamic partition: anyone may add it
