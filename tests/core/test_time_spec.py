"""Seed 003: a time watermark's ``from`` and ``to`` (ISO datetimes, durations, ``-``), its spec."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watermark_assets.core.errors import (
    NaiveDatetimeError,
    TimeBoundError,
    TimeRangeError,
    TimeSpecError,
    WatermarkAssetsError,
)
from watermark_assets.core.time.instant import (
    format_instant,
    format_millis,
    from_millis,
    parse_millis,
    to_millis,
)
from watermark_assets.core.time.partitioning import Partitioning, windows
from watermark_assets.core.time.spec import BeforeNow, FixedTime, Now, TimeSpec, parse_bound

UTC = timezone.utc


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


# A run in the middle of a day, with microseconds: rounding and truncation show.
NOW = utc(2020, 2, 21, 13, 45, 30, 123456)


# Seed 003: "Both the from and to can take the following configuration format: ISO Datetime:
# yyyy-MM-dd HH:mm:ss.SSSSSSz or yyyy-MM-ddTHH:mm:ss.SSSSSSz". Zone-less text is UTC; DIL works
# in milliseconds, so the digits below the millisecond are truncated (never rounded up).
@pytest.mark.parametrize(
    ("text", "instant"),
    [
        pytest.param("2017-01-02", utc(2017, 1, 2), id="the seed's from: a date is midnight UTC"),
        pytest.param("2020-01-01", utc(2020, 1, 1), id="date only"),
        pytest.param("2020-02-21 10:00:00", utc(2020, 2, 21, 10), id="date and time, no zone"),
        pytest.param("2020-02-21T10:00:00", utc(2020, 2, 21, 10), id="the T form"),
        pytest.param(
            "2020-01-02 03:04:05.123456Z",
            utc(2020, 1, 2, 3, 4, 5, 123000),
            id="yyyy-MM-dd HH:mm:ss.SSSSSSz, truncated to the millisecond",
        ),
        pytest.param(
            "2020-01-02T03:04:05.123456Z",
            utc(2020, 1, 2, 3, 4, 5, 123000),
            id="yyyy-MM-ddTHH:mm:ss.SSSSSSz",
        ),
        pytest.param(
            "2020-01-02T03:04:05.999999Z",
            utc(2020, 1, 2, 3, 4, 5, 999000),
            id="sub-millisecond digits are truncated, not rounded up",
        ),
        pytest.param(
            "2020-01-02T03:04:05.123456+02:00",
            utc(2020, 1, 2, 1, 4, 5, 123000),
            id="an offset zone becomes UTC",
        ),
        pytest.param(
            "2020-01-02 03:04:05-0530", utc(2020, 1, 2, 8, 34, 5), id="an offset without colon"
        ),
        pytest.param("2020-01-02 03:04:05.1UTC", utc(2020, 1, 2, 3, 4, 5, 100000), id="UTC"),
        pytest.param("2020-01-02T03:04:05GMT", utc(2020, 1, 2, 3, 4, 5), id="GMT"),
        pytest.param("2020-02-29", utc(2020, 2, 29), id="leap day"),
    ],
)
def test_iso_datetimes_are_fixed_instants_in_utc_milliseconds(text: str, instant: datetime) -> None:
    bound = parse_bound(text)
    assert bound == FixedTime(instant)
    assert isinstance(bound, FixedTime)
    assert bound.at.tzinfo is UTC
    for partitioning in Partitioning:
        assert bound.resolve(NOW, partitioning) == instant


# Seed 003: "ISO 8601 duration: PnDTmH ... n days before current date time ... m can be any
# natural number between 0 and 23 ... The hour part is optional. Examples: P0D, P1D, P0DT7H.
# '-' (Hyphen) can be used in to as a shortcut for 'P0DT0H0M'." And the rounding rule: "If time
# watermark is partitioned using multi-day partition (i.e. monthly and weekly), the 'to date' will
# be rounded to day level if to is PnD, and ... to hour level if to is PnDTmH. If time watermark is
# not partitioned or is daily/hourly partitioned, the 'to date' will include hours and minutes".
NOW_MS = utc(2020, 2, 21, 13, 45, 30, 123000)


@pytest.mark.parametrize(
    ("text", "partitioning", "resolved"),
    [
        pytest.param("P0D", "none", NOW_MS, id="P0D unpartitioned: now, hours and minutes kept"),
        pytest.param("P0D", "daily", NOW_MS, id="P0D daily: hours and minutes kept"),
        pytest.param("P0D", "hourly", NOW_MS, id="P0D hourly: hours and minutes kept"),
        pytest.param("P0D", "weekly", utc(2020, 2, 21), id="P0D weekly: rounded to the day"),
        pytest.param("P0D", "monthly", utc(2020, 2, 21), id="P0D monthly: rounded to the day"),
        pytest.param("P1D", "daily", NOW_MS - timedelta(days=1), id="P1D: 1 day before now, daily"),
        pytest.param("P1D", "monthly", utc(2020, 2, 20), id="P1D monthly: the day before"),
        pytest.param(
            "P0DT7H", "daily", NOW_MS - timedelta(hours=7), id="P0DT7H daily: 7 hours before now"
        ),
        pytest.param(
            "P0DT7H", "weekly", utc(2020, 2, 21, 6), id="P0DT7H weekly: rounded to the hour"
        ),
        pytest.param(
            "P2DT5H", "monthly", utc(2020, 2, 19, 8), id="P2DT5H monthly: rounded to the hour"
        ),
        pytest.param(
            "P1DT23H", "hourly", NOW_MS - timedelta(days=1, hours=23), id="m = 23 is the largest"
        ),
        pytest.param("-", "none", NOW_MS, id="- unpartitioned: now"),
        pytest.param("-", "daily", NOW_MS, id="- daily: now"),
        # The seed's "-" = "P0DT0H0M" is neither PnD nor PnDTmH. Rounded to the day, like DIL's
        # WatermarkDefinition.getDateTime, so "it is 2020-02-21" gives the partial month
        # [2020-02-01, 2020-02-21) at any time of that day (test_time_partitioning).
        pytest.param("-", "monthly", utc(2020, 2, 21), id="- monthly: rounded to the day"),
        pytest.param("-", "weekly", utc(2020, 2, 21), id="- weekly: rounded to the day"),
    ],
)
def test_durations_count_back_from_now(text: str, partitioning: str, resolved: datetime) -> None:
    bound = parse_bound(text)
    assert isinstance(bound, (BeforeNow, Now))
    assert bound.resolve(NOW, Partitioning(partitioning)) == resolved
    assert str(bound) == text


def test_the_hyphen_is_now() -> None:
    assert parse_bound("-") == Now()
    assert parse_bound("P0DT7H") == BeforeNow(0, 7)
    assert parse_bound("P1D") == BeforeNow(1)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("now", id="a word"),
        pytest.param("2020-1-1", id="a date without zero padding"),
        pytest.param("2020-01-01T10:00", id="a time without seconds"),
        pytest.param("2020-01-01 10:00:00.1234567Z", id="seven fraction digits"),
        pytest.param("2020-02-30", id="no such day"),
        pytest.param("2020-13-01", id="no such month"),
        pytest.param("2020-01-01 24:00:00", id="hour 24"),
        pytest.param("2020-01-01Z", id="a zone without a time"),
        pytest.param("2020-01-01 10:00:00PST", id="a zone abbreviation other than UTC and GMT"),
        pytest.param("2020-01-01 10:00:00 Z", id="a space before the zone"),
        pytest.param("2020-01-01 10:00:00+24:00", id="an offset of 24 hours"),
        pytest.param(" 2020-01-01", id="a leading space"),
        pytest.param("٢٠٢٠-01-01", id="digits of another script"),
        pytest.param("P1W", id="weeks are not a duration form"),
        pytest.param("PT5H", id="the day part is mandatory"),
        pytest.param("P1DT5M", id="minutes are not a duration form"),
        pytest.param("P1DT24H", id="the hour part above 23"),
        pytest.param("P1DT007H", id="an hour part of three digits"),
        pytest.param("P" + "9" * 5000 + "D", id="thousands of digits of days"),
        pytest.param("p1d", id="lower case"),
        pytest.param("-P1D", id="a negative duration"),
        pytest.param("--", id="two hyphens"),
    ],
)
def test_anything_else_is_refused_quoting_the_value_and_the_accepted_forms(text: str) -> None:
    with pytest.raises(TimeBoundError) as caught:
        parse_bound(text, bound="to")
    error = caught.value
    assert isinstance(error, WatermarkAssetsError)
    assert isinstance(error, ValueError)
    assert error.value == text
    assert error.bound == "to"
    message = str(error)
    assert repr(text) in message
    for form in ("2020-01-01", "2020-02-21 10:00:00", "2020-02-21T10:00:00", "P<n>D"):
        assert form in message
    assert "P<n>DT<m>H with m 0..23" in message
    assert "'-' for now" in message


@given(st.text(max_size=30))
def test_any_text_parses_to_a_bound_that_reads_back_or_is_refused_quoting_it(text: str) -> None:
    try:
        bound = parse_bound(text)
    except TimeBoundError as error:
        assert repr(text) in str(error)
        assert error.value == text
    else:
        assert parse_bound(str(bound)) == bound


@given(
    st.datetimes(
        min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
    )
)
def test_fixed_instants_read_back_from_their_text(moment: datetime) -> None:
    bound = FixedTime(moment)
    assert parse_bound(str(bound)) == bound
    assert bound.at == moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    millis = to_millis(moment)
    assert from_millis(millis) == bound.at
    assert parse_millis(format_millis(millis)) == millis
    assert format_instant(moment) == format_millis(millis)


@pytest.mark.parametrize(
    "text",
    ["2020-01-01", "2020-01-01T00:00:00Z", "2020-01-01T00:00:00.000+00:00", "x" * 24],
)
def test_stored_window_starts_are_read_in_the_one_written_form_only(text: str) -> None:
    assert parse_millis(text) is None


def test_a_pre_1970_instant_truncates_towards_the_past_like_its_text() -> None:
    moment = utc(1969, 12, 31, 23, 59, 59, 999999)
    assert to_millis(moment) == -1
    assert format_instant(moment) == "1969-12-31T23:59:59.999Z"


def test_a_spec_reads_the_seed_settings() -> None:
    spec = TimeSpec("2019-01-01", "-", "monthly", grace_days=3)
    assert spec.from_ == FixedTime(utc(2019, 1, 1))
    assert spec.to == Now()
    assert spec.partitioning is Partitioning.MONTHLY
    assert spec.partial_partition is True
    assert (spec.grace_days, spec.abstinent_days) == (3, 0)
    assert spec.is_static
    assert spec.resolve_to(NOW) == utc(2020, 2, 21)
    assert spec == TimeSpec(utc(2019, 1, 1), Now(), Partitioning.MONTHLY, grace_days=3)
    assert hash(spec) == hash(TimeSpec("2019-01-01", "-", "Monthly", grace_days=3))
    assert not TimeSpec("P30D", "-", "daily").is_static


def test_a_spec_names_the_bound_that_is_wrong() -> None:
    with pytest.raises(TimeBoundError) as caught:
        TimeSpec("2019-01-01", "yesterday", "daily")
    assert caught.value.bound == "to"
    assert "'to' value 'yesterday'" in str(caught.value)


@pytest.mark.parametrize(
    ("settings", "setting"),
    [
        pytest.param({"partitioning": "yearly"}, "partitioning", id="an unknown partitioning"),
        pytest.param({"grace_days": -1}, "grace_days", id="negative grace days"),
        pytest.param({"abstinent_days": -1}, "abstinent_days", id="negative abstinent days"),
        pytest.param({"grace_days": 1.5}, "grace_days", id="fractional grace days"),
        pytest.param({"abstinent_days": True}, "abstinent_days", id="a boolean for days"),
        pytest.param({"partial_partition": "yes"}, "partial_partition", id="partial not a bool"),
    ],
)
def test_a_spec_refuses_bad_settings(settings: dict[str, object], setting: str) -> None:
    arguments: dict[str, object] = {"partitioning": "daily", **settings}
    with pytest.raises(TimeSpecError) as caught:
        TimeSpec("2020-01-01", "P0D", **arguments)  # type: ignore[arg-type]
    assert caught.value.setting == setting
    assert isinstance(caught.value, ValueError)


def test_datetime_objects_must_be_aware() -> None:
    with pytest.raises(NaiveDatetimeError):
        TimeSpec(datetime(2020, 1, 1), "-", "daily")
    with pytest.raises(NaiveDatetimeError):
        parse_bound("P0D").resolve(datetime(2020, 1, 1), Partitioning.DAILY)
    aware = datetime(2020, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))
    assert TimeSpec(aware, "-", "daily").from_ == FixedTime(utc(2020, 1, 1))


def test_a_duration_reaching_before_year_one_is_refused() -> None:
    with pytest.raises(TimeBoundError, match="before the year 1"):
        parse_bound("P999999D").resolve(NOW, Partitioning.DAILY)


# Issue 22, item 7: a range that holds no window at any time is refused when the spec is made,
# naming both values (every tick would otherwise report "0 partitions").
EMPTY_RANGES = [
    pytest.param("2020-02-01", "2020-01-01", "daily", True, "to is before from", id="to first"),
    pytest.param(
        "2020-02-01 10:00:00",
        "2020-02-01T12:00:00+02:00",
        "hourly",
        True,
        "to is the same instant as from",
        id="to the same instant in another zone",
    ),
    pytest.param(
        "2020-02-01",
        "2020-02-01 23:00:00",
        "daily",
        False,
        "no complete daily window fits",
        id="no complete window between two fixed bounds, partial windows off",
    ),
    pytest.param(
        "P1D", "P7D", "none", True, "to counts back from now as far as", id="to counted back more"
    ),
    pytest.param("-", "-", "none", True, "to counts back from now as far as", id="now to now"),
]


@pytest.mark.parametrize(("from_", "to", "partitioning", "partial", "reason"), EMPTY_RANGES)
def test_a_range_that_never_holds_a_window_is_refused_naming_both_bounds(
    from_: str, to: str, partitioning: str, partial: bool, reason: str
) -> None:
    with pytest.raises(TimeRangeError) as caught:
        TimeSpec(from_, to, partitioning, partial_partition=partial)
    error = caught.value
    assert isinstance(error, ValueError) and isinstance(error, WatermarkAssetsError)
    assert (error.from_, error.to) == (str(parse_bound(from_)), str(parse_bound(to)))
    assert f"from {error.from_!r} and to {error.to!r} are refused: {reason}" in str(error)
    assert "Give a to after from" in str(error)


NOW_MS = utc(2020, 2, 21, 13, 45, 30, 123000)  # NOW at millisecond precision

# When the windows are empty now (a from in the future), the instant the first one comes:
# exactly the first millisecond with a window (module docstring: to is rounded for weekly and
# monthly).
FIRST_WINDOW = [
    pytest.param(
        TimeSpec("2020-03-01", "P0D", "daily"),
        utc(2020, 3, 1, 0, 0, 0, 1000),
        id="daily, partial: as soon as now passes from",
    ),
    pytest.param(
        TimeSpec("2020-03-01", "P0D", "daily", partial_partition=False),
        utc(2020, 3, 2),
        id="daily, complete only: when the first day ends",
    ),
    pytest.param(
        TimeSpec("2020-03-01 10:00:00", "P2D", "hourly"),
        utc(2020, 3, 3, 10, 0, 0, 1000),
        id="hourly, to two days back: two days after from",
    ),
    pytest.param(
        TimeSpec("2020-03-02", "P2DT5H", "weekly"),
        utc(2020, 3, 4, 6),
        id="weekly, to rounded down to the hour",
    ),
    pytest.param(
        TimeSpec("2020-03-02", "-", "weekly", partial_partition=False),
        utc(2020, 3, 9),
        id="weekly, complete only",
    ),
    pytest.param(
        TimeSpec("2020-03-01", "P1D", "monthly"),
        utc(2020, 3, 3),
        id="monthly, to rounded down to the day",
    ),
    pytest.param(TimeSpec("2020-01-01", "P0D", "daily"), NOW_MS, id="a window already: now"),
    pytest.param(
        TimeSpec("2020-03-01", "2020-04-01", "daily"), NOW_MS, id="a fixed future range: now"
    ),
    pytest.param(TimeSpec("P1D", "2020-02-01", "none"), None, id="from moved past a fixed to"),
]


@pytest.mark.parametrize(("spec", "first"), FIRST_WINDOW)
def test_the_first_window_comes_at_the_first_instant_the_range_holds_one(
    spec: TimeSpec, first: datetime | None
) -> None:
    at = spec.first_window_at(NOW)
    assert at == first
    if at is not None and at > NOW:
        assert len(windows(spec, at)) == 1
        assert len(windows(spec, at - timedelta(milliseconds=1))) == 0
