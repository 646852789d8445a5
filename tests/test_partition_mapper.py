"""A landing time's Dagster partition (``defs/partitions.partition_mapper``): None before the
first partition and after the current one (the clock's), at every clock time, while the last
partition's window is computed once per period of the clock, not once per file. No Spark."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from _landing import UTC
from conftest import pipeline_yaml, project_config
from dagster import TimeWindowPartitionsDefinition

from watermark_assets.defs.partitions import partition_mapper, partitions_definition

START = datetime(2024, 1, 1, tzinfo=UTC)

#: The clock's times in turn: within a period, across its end, backwards, and far on.
CLOCK = [
    datetime(2024, 1, 30, 10, 15, tzinfo=UTC),
    datetime(2024, 1, 30, 10, 59, 59, tzinfo=UTC),
    datetime(2024, 1, 30, 11, tzinfo=UTC),
    datetime(2024, 1, 30, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(2024, 1, 31, tzinfo=UTC),
    datetime(2024, 1, 29, 12, tzinfo=UTC),
    datetime(2024, 2, 1, 0, 0, 1, tzinfo=UTC),
    datetime(2024, 3, 15, tzinfo=UTC),
    datetime(2024, 1, 10, 5, tzinfo=UTC),
    datetime(2023, 12, 31, tzinfo=UTC),
    datetime(2024, 1, 30, 10, 15, tzinfo=UTC),
]


def landing_times(now: datetime) -> list[datetime]:
    """Landing times about the clock's period and the partitions' bounds."""
    moments = [START - timedelta(microseconds=1), START, datetime(2024, 1, 15, tzinfo=UTC)]
    for hours in (-25, -1, 0, 1, 24, 24 * 31):
        moments.append(now + timedelta(hours=hours))
    moments.append(now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1))
    return moments


@pytest.mark.parametrize(
    "partitions",
    [
        pytest.param({"granularity": "daily", "start": "2024-01-01"}, id="daily"),
        pytest.param({"granularity": "hourly", "start": "2024-01-01"}, id="hourly"),
        pytest.param({"granularity": "monthly", "start": "2024-01-01"}, id="monthly"),
        pytest.param(
            {"granularity": "daily", "start": "2024-01-01", "end": "2024-01-31"},
            id="daily, ending on the clock's way",
        ),
        pytest.param(
            {"granularity": "daily", "start": "2024-01-01", "end": "2024-01-20"},
            id="daily, ended before the clock",
        ),
    ],
)
def test_a_landing_time_maps_as_at_the_clocks_time(
    tmp_path: Path, partitions: dict[str, str]
) -> None:
    pipeline = project_config(pipeline_yaml(tmp_path, partitions=partitions)).file_pipelines[0]
    partitions_def = partitions_definition(pipeline)
    clock = {"now": CLOCK[0]}
    kept = partition_mapper(partitions_def, lambda: clock["now"])
    for now in CLOCK:
        clock["now"] = now
        fresh = partition_mapper(partitions_definition(pipeline), lambda now=now: now)
        for when in landing_times(now):
            assert kept(when) == fresh(when), f"{when} at {now}"


@pytest.mark.parametrize(
    ("partitions", "times", "mapped"),
    [
        pytest.param(
            {"granularity": "daily", "start": "2024-01-01"},
            [
                datetime(2024, 1, 30, 10, tzinfo=UTC) + timedelta(minutes=m)
                for m in range(0, 600, 6)
            ],
            "2024-01-29",
            id="a hundred times of one day",
        ),
        pytest.param(
            {"granularity": "daily", "start": "2024-01-01", "end": "2024-01-31"},
            [datetime(2024, 2, 1, tzinfo=UTC) + timedelta(days=d) for d in range(100)],
            "2024-01-29",
            id="a hundred days after the partitions end",
        ),
    ],
)
def test_the_last_partition_is_computed_once_per_period_of_the_clock(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    partitions: dict[str, str],
    times: list[datetime],
    mapped: str,
) -> None:
    pipeline = project_config(pipeline_yaml(tmp_path, partitions=partitions)).file_pipelines[0]
    computed: list[object] = []
    last_window = TimeWindowPartitionsDefinition.get_last_partition_window

    def counted(self: TimeWindowPartitionsDefinition, *args: Any, **kwargs: Any) -> Any:
        computed.append(self)
        return last_window(self, *args, **kwargs)

    monkeypatch.setattr(TimeWindowPartitionsDefinition, "get_last_partition_window", counted)
    clock = {"now": times[0]}
    partition_of = partition_mapper(partitions_definition(pipeline), lambda: clock["now"])
    for now in times:  # a file mapped at each time
        clock["now"] = now
        assert partition_of(datetime(2024, 1, 29, tzinfo=UTC)) == mapped
    assert len(computed) == 1
    clock["now"] = times[0] - timedelta(hours=12)  # earlier: another period, computed again
    assert partition_of(datetime(2024, 1, 29, tzinfo=UTC)) == mapped
    assert len(computed) == 2
