"""Seed 003: windows (the seed's partitions) derived from ``from``, tiling ``[from, to)``."""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta, timezone
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.time.partitioning import Partitioning, TimeWindows, add_months, windows
from watermark_assets.core.time.spec import TimeSpec

UTC = timezone.utc
MS = timedelta(milliseconds=1)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


def window(start: datetime, end: datetime) -> TimeWindow:
    return TimeWindow(start, end)


def month_starts(first: datetime, count: int) -> list[datetime]:
    return [add_months(first, k) for k in range(count)]


# Seed 003: "If from date is 2019-01-01, and the to date is "-", and it is 2020-02-21, and it is
# monthly partitioned, then the first flow execution will have 13 full monthly partitions and 1
# partition monthly partition from [2020-02-01, 2020-02-21). In the next flow execution, the first
# 13 monthly partitions will stay the same, the last partial partition becomes
# [2020-02-01, 2020-02-22)."
MONTHLY = TimeSpec("2019-01-01", "-", "monthly")


@pytest.mark.parametrize(
    "now",
    [
        pytest.param(utc(2020, 2, 21), id="it is 2020-02-21, at midnight"),
        pytest.param(utc(2020, 2, 21, 13, 45, 30), id="it is 2020-02-21, in the afternoon"),
    ],
)
def test_seed_monthly_13_full_partitions_and_a_partial_one(now: datetime) -> None:
    first = windows(MONTHLY, now)
    starts = month_starts(utc(2019, 1, 1), 14)
    assert len(first) == 14
    assert list(first[:13]) == [window(s, add_months(s, 1)) for s in starts[:13]]
    assert first[13] == window(utc(2020, 2, 1), utc(2020, 2, 21))
    assert first.is_partial(13) and first.is_partial(-1)
    assert not any(first.is_partial(i) for i in range(13))

    following = windows(MONTHLY, now + timedelta(days=1))
    assert list(following[:13]) == list(first[:13])
    assert following[-1] == window(utc(2020, 2, 1), utc(2020, 2, 22))


# Seed 003: "Partitions maintain their own states (high watermark). So, in above example, after
# the first successful flow execution the partition [2019-01-01, 2019-01-31) has high watermark as
# 2019-01-31." The seed's interval names the window by its first and last *day* (January 1 to 31,
# "-01-31)" read as the last day it covers), while our windows are closed-open instants, so the
# window is [2019-01-01T00:00, 2019-02-01T00:00): "monthly adds 1 month to from". Its last
# millisecond is on 2019-01-31, and its high watermark is its end (test_time_watermark).
def test_seed_monthly_first_partition_covers_january_2019_closed_open() -> None:
    january = windows(MONTHLY, utc(2020, 2, 21))[0]
    assert january == window(utc(2019, 1, 1), utc(2019, 2, 1))
    assert (january.end - MS).date().isoformat() == "2019-01-31"
    assert january.contains(utc(2019, 1, 31, 23, 59, 59, 999000))
    assert not january.contains(utc(2019, 2, 1))


# Seed 003: "If from date is 2020-01-06 (Monday), and the to date is "-", and it is 2020-02-21
# (Friday), and it is weekly partitioned, then the last partition will be 2020-02-17 to
# 2020-02-21." And "Weekly partitions are derived by adding 7 days to from date".
def test_seed_weekly_from_a_monday_ends_with_a_partial_week() -> None:
    spec = TimeSpec("2020-01-06", "-", "weekly")
    weeks = windows(spec, utc(2020, 2, 21, 9, 30))
    assert utc(2020, 1, 6).strftime("%A") == "Monday"
    assert utc(2020, 2, 21).strftime("%A") == "Friday"
    assert weeks[-1] == window(utc(2020, 2, 17), utc(2020, 2, 21))
    assert len(weeks) == 7
    assert {w.start.strftime("%A") for w in weeks} == {"Monday"}


def test_weekly_from_a_thursday_gives_thursday_weeks() -> None:
    weeks = windows(TimeSpec("2020-01-02", "2020-03-01", "weekly"), utc(2020, 3, 5))
    assert {w.start.strftime("%A") for w in weeks} == {"Thursday"}
    assert weeks[-1] == window(utc(2020, 2, 27), utc(2020, 3, 1))


# Seed 003: "watermark from date is allowed to have hours, for example 2020-02-21 10:00:00, in such
# case the partitions will also end by that hour, not by 12:00:00 AM."
@pytest.mark.parametrize(
    ("partitioning", "to", "expected"),
    [
        pytest.param(
            "daily",
            "2020-02-24 10:00:00",
            [
                (utc(2020, 2, 21, 10), utc(2020, 2, 22, 10)),
                (utc(2020, 2, 22, 10), utc(2020, 2, 23, 10)),
                (utc(2020, 2, 23, 10), utc(2020, 2, 24, 10)),
            ],
            id="daily windows from 10:00 end at 10:00",
        ),
        pytest.param(
            "daily",
            "2020-02-23 15:30:00",
            [
                (utc(2020, 2, 21, 10), utc(2020, 2, 22, 10)),
                (utc(2020, 2, 22, 10), utc(2020, 2, 23, 10)),
                (utc(2020, 2, 23, 10), utc(2020, 2, 23, 15, 30)),
            ],
            id="daily from 10:00, a partial last window up to to",
        ),
        pytest.param(
            "weekly",
            "2020-03-07",
            [
                (utc(2020, 2, 21, 10), utc(2020, 2, 28, 10)),
                (utc(2020, 2, 28, 10), utc(2020, 3, 6, 10)),
                (utc(2020, 3, 6, 10), utc(2020, 3, 7)),
            ],
            id="weekly windows from 10:00 end at 10:00",
        ),
        pytest.param(
            "monthly",
            "2020-04-30",
            [
                (utc(2020, 2, 21, 10), utc(2020, 3, 21, 10)),
                (utc(2020, 3, 21, 10), utc(2020, 4, 21, 10)),
                (utc(2020, 4, 21, 10), utc(2020, 4, 30)),
            ],
            id="monthly windows from the 21st 10:00 end on the 21st at 10:00",
        ),
    ],
)
def test_seed_a_from_with_hours_makes_windows_end_at_that_hour(
    partitioning: str, to: str, expected: list[tuple[datetime, datetime]]
) -> None:
    spec = TimeSpec("2020-02-21 10:00:00", to, partitioning)
    assert list(windows(spec, utc(2021, 1, 1))) == [window(s, e) for s, e in expected]


@pytest.mark.parametrize(
    ("spec", "now", "last"),
    [
        pytest.param(
            TimeSpec("2020-02-01", "P0D", "daily"),
            utc(2020, 2, 21, 13, 45),
            window(utc(2020, 2, 21), utc(2020, 2, 21, 13, 45)),
            id="daily keeps the hours and minutes of to",
        ),
        pytest.param(
            TimeSpec("2020-02-21", "-", "hourly"),
            utc(2020, 2, 21, 10, 20),
            window(utc(2020, 2, 21, 10), utc(2020, 2, 21, 10, 20)),
            id="hourly keeps the minutes of to",
        ),
        pytest.param(
            TimeSpec("2020-01-06", "P0DT7H", "weekly"),
            utc(2020, 2, 21, 13, 45),
            window(utc(2020, 2, 17), utc(2020, 2, 21, 6)),
            id="weekly with P0DT7H: to rounded to the hour",
        ),
        pytest.param(
            TimeSpec("2020-01-06", "P1D", "weekly"),
            utc(2020, 2, 21, 13, 45),
            window(utc(2020, 2, 17), utc(2020, 2, 20)),
            id="weekly with P1D: to rounded to the day",
        ),
        pytest.param(
            TimeSpec("2020-01-01", "P0D", "none"),
            utc(2020, 1, 15, 8, 5),
            window(utc(2020, 1, 1), utc(2020, 1, 15, 8, 5)),
            id="unpartitioned: one window [from, to), hours and minutes kept",
        ),
    ],
)
def test_the_last_window_ends_at_to_rounded_as_the_seed_says(
    spec: TimeSpec, now: datetime, last: TimeWindow
) -> None:
    assert windows(spec, now)[-1] == last


def test_partial_partitions_switched_off_keep_only_complete_windows() -> None:
    spec = TimeSpec("2019-01-01", "-", "monthly", partial_partition=False)
    complete = windows(spec, utc(2020, 2, 21))
    assert len(complete) == 13
    assert complete[-1] == window(utc(2020, 1, 1), utc(2020, 2, 1))
    assert complete.covered_end == utc(2020, 2, 1)
    assert not complete.is_partial(-1)
    assert complete.containing(utc(2020, 2, 10)) is None


def test_an_unpartitioned_window_is_never_partial() -> None:
    spec = TimeSpec("2020-01-01", "P0D", "none", partial_partition=False)
    only = windows(spec, utc(2020, 1, 15, 8))
    assert list(only) == [window(utc(2020, 1, 1), utc(2020, 1, 15, 8))]
    assert not only.is_partial(0)


@pytest.mark.parametrize(
    ("first", "starts"),
    [
        pytest.param(
            utc(2020, 1, 31),
            [utc(2020, 1, 31), utc(2020, 2, 29), utc(2020, 3, 31), utc(2020, 4, 30)],
            id="from on the 31st: the month's last day when shorter, back to the 31st after",
        ),
        pytest.param(
            utc(2019, 1, 29),
            [utc(2019, 1, 29), utc(2019, 2, 28), utc(2019, 3, 29), utc(2019, 4, 29)],
            id="from on the 29th: February 28 in a common year",
        ),
        pytest.param(
            utc(2020, 2, 29, 6),
            [utc(2020, 2, 29, 6), utc(2020, 3, 29, 6), utc(2021, 2, 28, 6), utc(2024, 2, 29, 6)],
            id="from on a leap day: the 29th, and February 28 in common years",
        ),
        pytest.param(
            utc(2020, 11, 30),
            [utc(2020, 11, 30), utc(2020, 12, 30), utc(2021, 1, 30), utc(2021, 2, 28)],
            id="across a year end",
        ),
    ],
)
def test_monthly_windows_from_the_end_of_a_month(first: datetime, starts: list[datetime]) -> None:
    months = windows(TimeSpec(first, "2024-12-31", "monthly"), utc(2025, 1, 1))
    chosen = {w.start for w in months}
    assert set(starts) <= chosen
    for earlier, later in pairwise(months):
        assert earlier.end == later.start


@pytest.mark.parametrize(
    ("spec", "now"),
    [
        pytest.param(TimeSpec("2020-01-15", "P0D", "daily"), utc(2020, 1, 15), id="to equals from"),
        pytest.param(
            TimeSpec("2020-01-15", "P14D", "daily"), utc(2020, 1, 15), id="to first (counted back)"
        ),
        pytest.param(
            TimeSpec("2020-02-01", "-", "monthly", partial_partition=False),
            utc(2020, 2, 21),
            id="no complete window yet, partial ones off",
        ),
    ],
)
def test_no_windows_when_the_range_holds_none(spec: TimeSpec, now: datetime) -> None:
    empty = windows(spec, now)
    assert len(empty) == 0
    assert list(empty) == []
    assert empty.covered is None
    assert empty.containing(utc(2020, 1, 15)) is None
    assert empty.first_ending_after(utc(2020, 1, 1)) == 0


def test_the_window_containing_an_instant_is_closed_open() -> None:
    days = windows(TimeSpec("2020-02-01", "P0D", "daily"), utc(2020, 2, 21, 12))
    assert days.containing(utc(2020, 2, 20, 5)) == window(utc(2020, 2, 20), utc(2020, 2, 21))
    assert days.containing(utc(2020, 2, 1)) == days[0]
    assert days.containing(utc(2020, 2, 21, 11, 59)) == window(
        utc(2020, 2, 21), utc(2020, 2, 21, 12)
    )
    assert days.containing(utc(2020, 2, 21, 12)) is None
    assert days.containing(utc(2020, 1, 31, 23, 59)) is None
    assert days.index_containing(utc(2020, 2, 3, 1)) == 2
    assert days.first_ending_after(utc(2020, 2, 3)) == 2
    assert days.first_ending_after(utc(2020, 2, 2, 23, 59)) == 1
    assert days.first_ending_after(utc(2020, 1, 1)) == 0
    assert days.first_ending_after(utc(2020, 3, 1)) == len(days)


def test_counting_windows_does_not_list_them() -> None:
    # About 87.6 million hourly windows: listing them would take minutes; counting is arithmetic.
    every_hour = windows(TimeSpec("0001-01-01", "9999-12-31", "hourly"), utc(2020, 1, 1))
    assert len(every_hour) == (utc(9999, 12, 31) - utc(1, 1, 1)) // timedelta(hours=1)
    assert every_hour.containing(utc(2020, 2, 21, 10, 30)) == window(
        utc(2020, 2, 21, 10), utc(2020, 2, 21, 11)
    )
    assert every_hour[-1] == window(utc(9999, 12, 30, 23), utc(9999, 12, 31))
    every_month = windows(TimeSpec("0001-01-31", "9999-12-31", "monthly"), utc(2020, 1, 1))
    # 9999-12-31 is a window boundary: the last window starts 9999-11-30, none is partial.
    assert len(every_month) == 9999 * 12 - 1
    assert every_month[-1] == window(utc(9999, 11, 30), utc(9999, 12, 31))
    assert every_month.containing(utc(2020, 3, 1)) == window(utc(2020, 2, 29), utc(2020, 3, 31))


def test_five_years_of_hourly_windows_as_the_issue_measures() -> None:
    hours = windows(TimeSpec("2020-01-01", "2025-01-01", "hourly"), utc(2025, 1, 1))
    assert len(hours) == 1827 * 24  # 43,848: 2020 and 2024 are leap years
    assert list(hours.starts_ms(3)) == [to_ms(utc(2020, 1, 1, h)) for h in range(3)]


def to_ms(moment: datetime) -> int:
    return (moment - utc(1970, 1, 1)) // MS


# --- properties -------------------------------------------------------------------------------

instants = st.datetimes(
    min_value=datetime(1999, 1, 1), max_value=datetime(2001, 12, 31), timezones=st.just(UTC)
).map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))
LONGEST = {
    Partitioning.HOURLY: timedelta(days=20),
    Partitioning.DAILY: timedelta(days=400),
    Partitioning.WEEKLY: timedelta(days=2000),
    Partitioning.MONTHLY: timedelta(days=4000),
    Partitioning.NONE: timedelta(days=4000),
}


@st.composite
def ranges(draw: st.DrawFn) -> TimeWindows:
    partitioning = draw(st.sampled_from(Partitioning))
    start = draw(instants)
    length = draw(st.integers(-1000, LONGEST[partitioning] // MS))
    return TimeWindows(start, start + length * MS, partitioning, draw(st.booleans()))


@given(ranges())
def test_windows_tile_from_to_without_gaps_or_overlaps(tiles: TimeWindows) -> None:
    listed = list(tiles)
    assert len(listed) == len(tiles)
    assert listed == [tiles[i] for i in range(len(tiles))]
    if tiles.end <= tiles.start:
        assert listed == []
        return
    if not listed:  # the only window was partial, and partial windows are off
        assert not tiles.partial and tiles.boundary(1) > tiles.end
        return
    assert listed[0].start == tiles.start
    for earlier, later in pairwise(listed):
        assert earlier.end == later.start  # no gap, no overlap
    assert listed[-1].end == tiles.covered_end
    if tiles.partial or tiles.partitioning is Partitioning.NONE:
        assert tiles.covered_end == tiles.end  # [from, to) exactly
    else:  # only complete windows: the next one would end after to
        assert tiles.covered_end == tiles.boundary(len(tiles)) <= tiles.end
        assert tiles.boundary(len(tiles) + 1) > tiles.end


@given(ranges(), st.data())
def test_the_window_containing_an_instant_agrees_with_the_list(
    tiles: TimeWindows, data: st.DataObject
) -> None:
    listed = list(tiles)
    for i, each in enumerate(listed):
        assert tiles.index_containing(each.start) == i
        assert tiles.index_containing(each.end - MS) == i
        assert tiles.containing(each.start) == each
        assert tiles.first_ending_after(each.start) == i
        assert tiles.first_ending_after(each.end - MS) == i
        assert tiles.first_ending_after(each.end) == i + 1
        assert tiles.first_starting_at_or_after(each.start) == i
        assert tiles.first_starting_at_or_after(each.start + MS) == i + 1
    moment = data.draw(instants)
    holding = [i for i, w in enumerate(listed) if w.contains(moment)]
    assert tiles.index_containing(moment) == (holding[0] if holding else None)
    assert tiles.first_ending_after(moment) == sum(1 for w in listed if w.end <= moment)
    starting_before = sum(1 for w in listed if w.start < moment)
    assert tiles.first_starting_at_or_after(moment) == starting_before
    assert tiles.first_starting_at_or_after(to_ms(moment)) == starting_before
    assert tiles.first_starting_at_or_after(to_ms(tiles.start) - 1) == 0
    assert list(tiles.starts_ms()) == [to_ms(w.start) for w in listed]
    assert all(w in tiles for w in listed)
    shifted = [TimeWindow(w.start, w.end + MS) for w in listed]
    assert not any(w in tiles for w in shifted)


@given(instants, st.integers(-30, 130))
def test_months_are_counted_from_from_on_its_day(first: datetime, months: int) -> None:
    moved = add_months(first, months)
    index = first.year * 12 + first.month - 1 + months
    assert (moved.year, moved.month) == (index // 12, index % 12 + 1)
    last_day = calendar.monthrange(moved.year, moved.month)[1]
    assert moved.day == min(first.day, last_day)
    assert moved.time() == first.time()
