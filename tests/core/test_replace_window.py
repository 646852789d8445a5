"""The replace window (pure): closedness as declared, refusals at construction, properties."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watermark_assets.core.replace_window import Interval, ReplaceWindow
from watermark_assets.exceptions import ReplaceWindowError

UTC = timezone.utc


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2024, 1, 1, hour, minute, tzinfo=UTC)


INVALID_WINDOWS = {
    "lower above upper": lambda: ReplaceWindow("ts", at(12), at(11)),
    "lower equal to upper in (lower, upper]": lambda: ReplaceWindow("ts", at(11), at(11)),
    "a naive datetime bound": lambda: ReplaceWindow("ts", None, datetime(2024, 1, 1, 11)),
    "bounds of different kinds": lambda: ReplaceWindow("ts", 5, at(11)),
    "a boolean bound": lambda: ReplaceWindow("flag", False, True),
    "a NaN bound": lambda: ReplaceWindow("x", float("nan"), 1.0),
    "no upper bound (the watermark after is unknown)": lambda: ReplaceWindow("ts", at(10), None),  # type: ignore[arg-type]
    "an empty column name": lambda: ReplaceWindow("", None, at(11)),
    "a window over two columns": lambda: ReplaceWindow.from_mapping(
        {"ts": (at(10), at(11)), "id": (1, 2)}
    ),
}


@pytest.mark.parametrize("build", INVALID_WINDOWS.values(), ids=INVALID_WINDOWS.keys())
def test_an_invalid_window_is_refused_at_construction(build: Any) -> None:
    with pytest.raises(ReplaceWindowError, match="Nothing was committed"):
        build()


def test_the_seed_mapping_becomes_a_window_with_explicit_closedness() -> None:
    window = ReplaceWindow.from_mapping({"updated_at": (at(10), at(11))})

    assert window == ReplaceWindow("updated_at", at(10), at(11), Interval.OPEN_CLOSED)
    assert str(window) == "updated_at in (2024-01-01T10:00:00Z, 2024-01-01T11:00:00Z]"
    assert not window.contains(at(10)) and window.contains(at(11))
    assert ReplaceWindow("d", date(2024, 1, 1), date(2024, 1, 1), Interval.CLOSED_CLOSED).contains(
        date(2024, 1, 1)
    )


def test_the_window_bounds_are_closed_as_declared() -> None:
    cases = {
        Interval.OPEN_CLOSED: (False, True),
        Interval.CLOSED_CLOSED: (True, True),
        Interval.CLOSED_OPEN: (True, False),
        Interval.OPEN_OPEN: (False, False),
    }
    for interval, (has_lower, has_upper) in cases.items():
        window = ReplaceWindow("n", 1, 5, interval)
        assert (window.contains(1), window.contains(5), window.contains(3)) == (
            has_lower,
            has_upper,
            True,
        )
    assert ReplaceWindow("ts", at(1), at(2) + timedelta(hours=1)).upper.tzinfo is UTC  # type: ignore[union-attr]


@given(
    st.integers(-1000, 1000),
    st.integers(1, 1000),
    st.integers(-3000, 3000),
    st.sampled_from(list(Interval)),
)
def test_a_value_is_in_the_window_exactly_when_both_operators_hold(
    lower: int, width: int, value: int, interval: Interval
) -> None:
    window = ReplaceWindow("n", lower, lower + width, interval)
    above_lower = value >= lower if interval.lower_inclusive else value > lower
    below_upper = value <= lower + width if interval.upper_inclusive else value < lower + width

    assert window.contains(value) == (above_lower and below_upper)
    assert not (window.is_below(value) and window.is_above(value))
