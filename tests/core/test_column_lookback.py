"""Seed 001, "Backward look-back": backward_days or backward {days, months, closing_day}; lag."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest

from watermark_assets.core.column.lookback import Backward, effective_lower_bound
from watermark_assets.core.column.watermark import ColumnWatermark, GreaterOrEqual, GreaterThan
from watermark_assets.core.errors import LookbackError

UTC = timezone.utc
T0 = datetime(2026, 4, 3, 9, 15, tzinfo=UTC)
NOW = datetime(2026, 4, 10, 12, 0, tzinfo=UTC)
WM = ColumnWatermark.of({"updated_at": T0, "id": 7})


@pytest.mark.parametrize(
    ("configure", "backward"),
    [
        pytest.param({"backward_days": 7}, Backward(days=7), id="the seed's backward_days: 7"),
        pytest.param(
            {"backward": {"days": 7, "months": 1, "closing_day": 25}},
            Backward(days=7, months=1, closing_day=25),
            id="the seed's nested form",
        ),
        pytest.param({}, Backward(), id="no look-back"),
    ],
)
def test_the_seeds_configuration_reads(configure: dict[str, Any], backward: Backward) -> None:
    assert Backward.from_configure(configure) == backward


@pytest.mark.parametrize(
    "configure",
    [
        pytest.param({"backward_days": 7, "backward": {"days": 7}}, id="both forms at once"),
        pytest.param({"backward_days": -1}, id="negative days"),
        pytest.param({"backward": {"weeks": 1}}, id="an unknown key"),
        pytest.param({"backward": {"months": 1, "closing_day": 31}}, id="closing day 31"),
    ],
)
def test_bad_look_backs_are_refused(configure: dict[str, Any]) -> None:
    with pytest.raises(LookbackError):
        Backward.from_configure(configure)


@pytest.mark.parametrize(
    ("backward", "lag", "now", "start"),
    [
        pytest.param(Backward(days=7), None, NOW, T0 - timedelta(days=7), id="7 days back"),
        pytest.param(
            Backward(months=1),
            None,
            NOW,
            datetime(2026, 3, 3, 9, 15, tzinfo=UTC),
            id="one calendar month back",
        ),
        pytest.param(
            Backward(months=1, closing_day=25),
            None,
            NOW,
            datetime(2026, 3, 1, tzinfo=UTC),
            id="March still open on April 10: re-read it from its first day",
        ),
        pytest.param(
            Backward(months=1, closing_day=25),
            None,
            datetime(2026, 4, 26, tzinfo=UTC),
            datetime(2026, 4, 1, tzinfo=UTC),
            id="March closed on April 25: start at April 1",
        ),
        pytest.param(
            Backward(months=1, closing_day=25),
            None,
            datetime(2026, 6, 1, tzinfo=UTC),
            T0,
            id="every month behind the watermark closed: start at the watermark",
        ),
        pytest.param(
            Backward(), timedelta(minutes=10), NOW, T0 - timedelta(minutes=10), id="safety lag"
        ),
        pytest.param(
            Backward(days=1),
            timedelta(days=3),
            NOW,
            T0 - timedelta(days=3),
            id="the earlier of look-back and lag",
        ),
    ],
)
def test_effective_lower_bound(
    backward: Backward, lag: timedelta | None, now: datetime, start: datetime
) -> None:
    bound = effective_lower_bound(WM, backward, now, lag=lag)
    assert bound.operator is GreaterOrEqual
    assert bound.watermark.as_dict() == {"updated_at": start}


def test_month_end_clamps() -> None:
    wm = ColumnWatermark.of({"d": date(2026, 3, 31)})
    bound = effective_lower_bound(wm, Backward(months=1), NOW)
    assert bound.watermark.as_dict() == {"d": date(2026, 2, 28)}


def test_without_look_back_the_watermark_and_operator_stay() -> None:
    bound = effective_lower_bound(WM, Backward(), NOW)
    assert (bound.watermark, bound.operator) == (WM, GreaterThan)
    empty = ColumnWatermark.empty(["updated_at"])
    assert effective_lower_bound(empty, Backward(days=7), NOW).watermark == empty


def test_look_back_needs_a_temporal_leading_column() -> None:
    with pytest.raises(LookbackError, match="date or datetime"):
        effective_lower_bound(ColumnWatermark.of({"id": 7}), Backward(days=1), NOW)


def test_now_must_be_aware() -> None:
    with pytest.raises(LookbackError, match="time zone"):
        effective_lower_bound(WM, Backward(days=1), datetime(2026, 4, 10))
