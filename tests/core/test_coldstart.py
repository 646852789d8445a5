from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watermark_assets.core.filepath.coldstart import lookback_horizon, lookback_prefixes
from watermark_assets.core.filepath.timeparts import PartitionTemplate
from watermark_assets.exceptions import NaiveDatetimeError

UTC = timezone.utc

# The seed's "Filtered Scan" configuration, verbatim.
SEED_FILTERED_SCAN = """
sources:
  events:
    source_uri: "s3://bucket/events/"
    use_watermark: true
    partition_filter:
      prefix_template: "date=%Y-%m-%d"
      lookback: 7  # Only scan last 7 days
"""


def seed_filter() -> tuple[PartitionTemplate, int]:
    template = re.search(r'prefix_template: "([^"]+)"', SEED_FILTERED_SCAN)
    lookback = re.search(r"lookback: (\d+)", SEED_FILTERED_SCAN)
    assert template is not None and lookback is not None
    return PartitionTemplate(template.group(1)), int(lookback.group(1))


def test_seed_filtered_scan_lists_today_and_the_seven_days_before() -> None:
    template, lookback = seed_filter()
    now = datetime(2024, 1, 28, 14, 5, tzinfo=UTC)
    assert lookback_prefixes(template, lookback, now) == [
        "date=2024-01-21",
        "date=2024-01-22",
        "date=2024-01-23",
        "date=2024-01-24",
        "date=2024-01-25",
        "date=2024-01-26",
        "date=2024-01-27",
        "date=2024-01-28",
    ]
    assert lookback_horizon(template, lookback, now) == "date=2024-01-21"


@pytest.mark.parametrize(
    ("template", "lookback", "now", "expected"),
    [
        pytest.param(
            "date=%Y-%m-%d",
            0,
            datetime(2024, 1, 28, 0, 0, tzinfo=UTC),
            ["date=2024-01-28"],
            id="lookback 0 is today alone, even at midnight",
        ),
        pytest.param(
            "date=%Y-%m-%d",
            1,
            datetime(2024, 3, 1, 9, tzinfo=UTC),
            ["date=2024-02-29", "date=2024-03-01"],
            id="leap day is a partition",
        ),
        pytest.param(
            "date=%Y-%m-%d",
            1,
            datetime(2024, 1, 1, 0, 30, tzinfo=UTC),
            ["date=2023-12-31", "date=2024-01-01"],
            id="across a year boundary",
        ),
        pytest.param(
            "date=%Y-%m-%d/hour=%H",
            0,
            datetime(2024, 1, 28, 14, 59, tzinfo=UTC),
            ["date=2024-01-28/hour=14"],
            id="hour grain with lookback 0 is this hour",
        ),
        pytest.param(
            "month=%Y-%m",
            3,
            datetime(2024, 3, 2, 12, tzinfo=UTC),
            ["month=2024-02", "month=2024-03"],
            id="month grain steps by day and drops repeated prefixes",
        ),
        pytest.param(
            "year=%Y",
            7,
            datetime(2024, 1, 3, tzinfo=UTC),
            ["year=2023", "year=2024"],
            id="year grain across new year",
        ),
        pytest.param(
            "date=%Y-%m-%d",
            1,
            datetime(2024, 1, 28, 1, tzinfo=timezone(timedelta(hours=5))),
            ["date=2024-01-26", "date=2024-01-27"],
            id="now in another zone is converted to UTC first",
        ),
    ],
)
def test_lookback_prefixes(
    template: str, lookback: int, now: datetime, expected: list[str]
) -> None:
    assert lookback_prefixes(PartitionTemplate(template), lookback, now) == expected


def test_hour_grain_covers_the_current_hour_and_the_days_before() -> None:
    template = PartitionTemplate("date=%Y-%m-%d/hour=%H")
    prefixes = lookback_prefixes(template, 7, datetime(2024, 1, 28, 14, 5, tzinfo=UTC))
    assert len(prefixes) == 7 * 24 + 1
    assert (prefixes[0], prefixes[-1]) == ("date=2024-01-21/hour=14", "date=2024-01-28/hour=14")


def test_a_negative_lookback_is_refused() -> None:
    with pytest.raises(ValueError, match="lookback is -1 days"):
        lookback_prefixes(PartitionTemplate("date=%Y-%m-%d"), -1, datetime(2024, 1, 28, tzinfo=UTC))


def test_a_naive_now_is_refused() -> None:
    with pytest.raises(NaiveDatetimeError):
        lookback_horizon(PartitionTemplate("date=%Y-%m-%d"), 7, datetime(2024, 1, 28))


@given(
    st.sampled_from(["date=%Y-%m-%d", "date=%Y-%m-%d/hour=%H", "month=%Y-%m", "year=%Y"]),
    st.integers(min_value=0, max_value=40),
    st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
    ),
)
def test_lookback_prefixes_are_distinct_ascending_and_end_now(
    template: str, lookback: int, now: datetime
) -> None:
    parsed = PartitionTemplate(template)
    prefixes = lookback_prefixes(parsed, lookback, now)
    assert prefixes == sorted(set(prefixes))
    assert prefixes[-1] == parsed.format(now)
    assert prefixes[0] == parsed.format(now - timedelta(days=lookback))
