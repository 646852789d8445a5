"""PartitionSelection: one value for time windows, unit keys and several dimensions."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from watermark_assets.core.errors import NaiveDatetimeError
from watermark_assets.core.partition_selection import (
    PartitionDimension,
    PartitionSelection,
    TimeWindow,
)

UTC = timezone.utc
DAY = datetime(2024, 1, 28, tzinfo=UTC)


@pytest.mark.parametrize(
    ("moment", "inside"),
    [
        pytest.param(DAY, True, id="the start is in the window (closed)"),
        pytest.param(DAY + timedelta(hours=23, minutes=59), True, id="the last minute is in it"),
        pytest.param(DAY + timedelta(days=1), False, id="the end is not (open)"),
        pytest.param(DAY - timedelta(microseconds=1), False, id="before the start is not"),
        pytest.param(
            datetime(2024, 1, 28, 1, tzinfo=timezone(timedelta(hours=2))),
            False,
            id="an aware time in another zone is compared in UTC (23:00 the day before)",
        ),
    ],
)
def test_a_time_window_is_closed_at_the_start_and_open_at_the_end(
    moment: datetime, inside: bool
) -> None:
    assert TimeWindow(DAY, DAY + timedelta(days=1)).contains(moment) is inside


@pytest.mark.parametrize(
    ("start", "end", "error"),
    [
        pytest.param(DAY, DAY, ValueError, id="an empty window"),
        pytest.param(
            DAY.replace(tzinfo=None), DAY + timedelta(days=1), NaiveDatetimeError, id="naive"
        ),
    ],
)
def test_bad_windows_are_refused(start: datetime, end: datetime, error: type[Exception]) -> None:
    with pytest.raises(error):
        TimeWindow(start, end)


def test_each_partitioning_gives_its_keys_and_its_time_window() -> None:
    window = TimeWindow(DAY, DAY + timedelta(days=2))
    by_time = PartitionSelection.of_time_window(["2024-01-28", "2024-01-29"], window)
    by_unit = PartitionSelection.of_keys(["eu", "us"])
    by_both = PartitionSelection.of_dimensions(
        ["2024-01-28|eu"],
        {
            "unit": PartitionDimension("unit", ("eu",)),
            "date": PartitionDimension("date", ("2024-01-28",), window),
        },
    )
    assert (by_time.keys, by_time.time_window) == (("2024-01-28", "2024-01-29"), window)
    assert (by_unit.keys, by_unit.time_window) == (("eu", "us"), None)
    assert by_both.time_window == window
    assert by_both.dimension("unit").keys == ("eu",)
    with pytest.raises(KeyError, match=r"'region'.*\['date', 'unit'\]"):
        by_both.dimension("region")


def test_a_selection_without_keys_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one partition key"):
        PartitionSelection.of_keys([])


def test_each_key_splits_into_its_key_in_each_dimension() -> None:
    """A time x unit run's keys as each dimension's key, in the keys' order (the grid plans its
    cells from them), whatever order the dimensions were given in."""
    window = TimeWindow(DAY, DAY + timedelta(days=2))
    by_both = PartitionSelection.of_dimensions(
        ["2024-01-28|us", "2024-01-29|eu"],
        {
            "unit": PartitionDimension("unit", ("eu", "us")),
            "date": PartitionDimension("date", ("2024-01-28", "2024-01-29"), window),
        },
        [{"unit": "us", "date": "2024-01-28"}, {"date": "2024-01-29", "unit": "eu"}],
    )
    assert by_both.key_parts() == [
        {"date": "2024-01-28", "unit": "us"},
        {"date": "2024-01-29", "unit": "eu"},
    ]
    by_time = PartitionSelection.of_time_window(["2024-01-28", "2024-01-29"], window)
    assert by_time.key_parts() == [{"": "2024-01-28"}, {"": "2024-01-29"}]
    assert PartitionSelection.of_keys(["eu"]).key_parts() == [{"": "eu"}]


def test_several_dimensions_without_their_parts_do_not_split() -> None:
    unsplit = PartitionSelection.of_dimensions(
        ["2024-01-28|eu"],
        {"unit": PartitionDimension("unit", ("eu",)), "date": PartitionDimension("date", ("x",))},
    )
    with pytest.raises(ValueError, match=r"of_dimensions\(keys, dimensions, parts\)"):
        unsplit.key_parts()
    with pytest.raises(ValueError, match="2 keys got 1 keys' parts"):
        PartitionSelection(("a|x", "b|y"), (), (("a", "x"),))
