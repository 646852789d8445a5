from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from watermark_assets.core.clock import ensure_utc, system_clock
from watermark_assets.exceptions import NaiveDatetimeError

UTC = timezone.utc


def test_the_system_clock_is_aware_and_in_utc() -> None:
    now = system_clock()
    assert now.tzinfo is UTC


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param(
            datetime(2024, 1, 28, 14, tzinfo=UTC),
            datetime(2024, 1, 28, 14, tzinfo=UTC),
            id="a UTC datetime is kept",
        ),
        pytest.param(
            datetime(2024, 1, 28, 1, tzinfo=timezone(timedelta(hours=5))),
            datetime(2024, 1, 27, 20, tzinfo=UTC),
            id="an aware datetime in another zone is converted to UTC",
        ),
    ],
)
def test_ensure_utc(given: datetime, expected: datetime) -> None:
    result = ensure_utc(given)
    assert result == expected
    assert result.utcoffset() == timedelta(0)


def test_a_naive_datetime_is_refused_and_named() -> None:
    naive = datetime(2024, 1, 28, 14)  # naive on purpose
    with pytest.raises(NaiveDatetimeError) as caught:
        ensure_utc(naive)
    assert caught.value.value == naive
