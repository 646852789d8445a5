from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watermark_assets.core.filepath.timeparts import PartitionTemplate
from watermark_assets.exceptions import NaiveDatetimeError, PartitionTemplateError

UTC = timezone.utc


@pytest.mark.parametrize(
    ("template", "depth", "grain"),
    [
        pytest.param("date=%Y-%m-%d", 1, "day", id="the seed's day template"),
        pytest.param("date=%Y-%m-%d/hour=%H", 2, "hour", id="day and hour directories"),
        pytest.param("%Y/%m/%d/%H/%M", 5, "minute", id="one directory per field"),
        pytest.param("month=%Y-%m", 1, "month", id="monthly partitions"),
        pytest.param("year=%Y", 1, "year", id="yearly partitions"),
        pytest.param("events/date=%Y%m%d", 2, "day", id="a literal directory and compact date"),
    ],
)
def test_valid_templates(template: str, depth: int, grain: str) -> None:
    parsed = PartitionTemplate(template)
    assert (parsed.depth, parsed.grain) == (depth, grain)


@pytest.mark.parametrize(
    ("template", "message"),
    [
        pytest.param("date=%d-%m-%Y", "coarsest to the finest", id="day before year is refused"),
        pytest.param("hour=%H", "start", id="a template without a year is refused"),
        pytest.param("%Y/%d", "without a gap", id="a day without a month is refused"),
        pytest.param("%Y/%m/%m", "coarsest", id="a repeated field is refused"),
        pytest.param("date=%Y-%j", "'%j'", id="day of the year is refused"),
        pytest.param("date=%Y-%b", "'%b'", id="month names do not sort and are refused"),
        pytest.param("date=%Y%", "'%'", id="a trailing percent sign is refused"),
        pytest.param("/date=%Y", "relative path", id="an absolute template is refused"),
        pytest.param("date=%Y/", "relative path", id="a trailing slash is refused"),
        pytest.param("", "relative path", id="an empty template is refused"),
        pytest.param("static", "start", id="a template without fields is refused"),
    ],
)
def test_invalid_templates_name_the_template_and_the_fix(template: str, message: str) -> None:
    with pytest.raises(PartitionTemplateError, match=message) as caught:
        PartitionTemplate(template)
    assert caught.value.template == template
    assert "date=%Y-%m-%d" in str(caught.value)  # the fix: an example that works


@pytest.mark.parametrize(
    ("template", "moment", "prefix"),
    [
        pytest.param(
            "date=%Y-%m-%d",
            datetime(2024, 1, 28, 14, 30, tzinfo=UTC),
            "date=2024-01-28",
            id="a day prefix",
        ),
        pytest.param(
            "date=%Y-%m-%d/hour=%H",
            datetime(2024, 1, 28, 14, 30, tzinfo=UTC),
            "date=2024-01-28/hour=14",
            id="an hour prefix",
        ),
        pytest.param(
            "date=%Y-%m-%d/hour=%H",
            datetime(2024, 1, 28, 1, tzinfo=timezone(timedelta(hours=5))),
            "date=2024-01-27/hour=20",
            id="another zone is converted to UTC first",
        ),
        pytest.param(
            "date=%Y-%m-%d", datetime(2024, 2, 29, tzinfo=UTC), "date=2024-02-29", id="leap day"
        ),
        pytest.param(
            "y=%Y",
            datetime(999, 1, 1, tzinfo=UTC),
            "y=0999",
            id="years are zero-padded to four digits",
        ),
    ],
)
def test_format(template: str, moment: datetime, prefix: str) -> None:
    assert PartitionTemplate(template).format(moment) == prefix


@pytest.mark.parametrize(
    ("template", "prefix", "start"),
    [
        pytest.param(
            "date=%Y-%m-%d",
            "date=2024-01-28",
            datetime(2024, 1, 28, tzinfo=UTC),
            id="a day prefix starts at midnight UTC",
        ),
        pytest.param(
            "date=%Y-%m-%d/hour=%H",
            "date=2024-01-28/hour=14",
            datetime(2024, 1, 28, 14, tzinfo=UTC),
            id="an hour prefix",
        ),
        pytest.param(
            "month=%Y-%m",
            "month=2024-02",
            datetime(2024, 2, 1, tzinfo=UTC),
            id="a month prefix starts on the first",
        ),
    ],
)
def test_parse(template: str, prefix: str, start: datetime) -> None:
    parsed = PartitionTemplate(template).parse(prefix)
    assert parsed == start
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    "prefix",
    [
        pytest.param("date=2024-1-28", id="an unpadded month"),
        pytest.param("date=2024-13-01", id="month 13"),
        pytest.param("date=2023-02-29", id="29 February of a common year"),
        pytest.param("date=2024-01-28/hour=14", id="a deeper prefix"),
        pytest.param("dt=2024-01-28", id="another literal"),
    ],
)
def test_parse_refuses_a_prefix_that_does_not_match(prefix: str) -> None:
    template = PartitionTemplate("date=%Y-%m-%d")
    assert template.try_parse(prefix) is None
    with pytest.raises(PartitionTemplateError) as caught:
        template.parse(prefix)
    assert (caught.value.template, caught.value.value) == ("date=%Y-%m-%d", prefix)


def test_format_refuses_a_naive_datetime() -> None:
    with pytest.raises(NaiveDatetimeError):
        PartitionTemplate("date=%Y-%m-%d").format(datetime(2024, 1, 28))


def test_special_characters_in_literals_are_literal() -> None:
    template = PartitionTemplate("d.(x)+%Y")
    assert template.parse("d.(x)+2024") == datetime(2024, 1, 1, tzinfo=UTC)
    assert template.try_parse("dA(x)+2024") is None


TEMPLATES = ["date=%Y-%m-%d/hour=%H", "date=%Y-%m-%d", "%Y%m%d%H%M", "month=%Y-%m", "year=%Y"]
moments = st.datetimes(
    min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)
)


@given(st.sampled_from(TEMPLATES), moments, moments)
def test_prefix_order_is_time_order(template: str, a: datetime, b: datetime) -> None:
    parsed = PartitionTemplate(template)
    if a <= b:
        assert parsed.format(a) <= parsed.format(b)


@given(st.sampled_from(TEMPLATES), moments)
def test_format_parse_round_trip(template: str, moment: datetime) -> None:
    parsed = PartitionTemplate(template)
    prefix = parsed.format(moment)
    start = parsed.parse(prefix)
    assert start <= moment  # the partition is the closed-open interval [start, next start)
    assert parsed.format(start) == prefix
