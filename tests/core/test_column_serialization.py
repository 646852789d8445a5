"""Seed 001, "Serialisation format": sentinels round-trip losslessly; everything else is JSON."""

from __future__ import annotations

import json
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watermark_assets.core.column.serialization import dumps, loads
from watermark_assets.core.errors import WatermarkJSONError

# The seed's serialisation format, verbatim.
SEED_JSON = '{"updated_at": {"__datetime__": "2026-04-03T09:15:00+00:00"}}'
SEED_VALUE = {"updated_at": datetime(2026, 4, 3, 9, 15, tzinfo=timezone.utc)}


def test_the_seeds_example_reads_as_an_aware_datetime() -> None:
    assert loads(SEED_JSON) == SEED_VALUE
    assert loads(SEED_JSON)["updated_at"].utcoffset() == timedelta(0)


def test_the_seeds_example_is_written_exactly() -> None:
    assert dumps(SEED_VALUE) == SEED_JSON


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param(
            '{"d": {"__datetime__": "2026-04-03T09:15:00.123456+05:30"}}',
            {"d": datetime(2026, 4, 3, 9, 15, 0, 123456, timezone(timedelta(hours=5, minutes=30)))},
            id="__datetime__ -> datetime.fromisoformat, microseconds and offset kept",
        ),
        pytest.param(
            '{"d": {"__date__": "2024-02-29"}}',
            {"d": date(2024, 2, 29)},
            id="__date__ -> date.fromisoformat (leap day)",
        ),
        pytest.param(
            '{"t": {"__time__": "23:59:59.999999"}}',
            {"t": time(23, 59, 59, 999999)},
            id="__time__ -> time.fromisoformat",
        ),
        pytest.param(
            '{"i": 1, "f": 1.5, "s": "x", "b": true, "n": null, "l": [1, {"k": []}]}',
            {"i": 1, "f": 1.5, "s": "x", "b": True, "n": None, "l": [1, {"k": []}]},
            id="everything else is plain JSON",
        ),
        pytest.param(
            '{"naive": {"__datetime__": "2026-04-03T09:15:00"}}',
            {"naive": datetime(2026, 4, 3, 9, 15)},
            id="a naive datetime is kept naive (what was written is read)",
        ),
    ],
)
def test_sentinels_read_and_write(text: str, value: dict[str, Any]) -> None:
    assert loads(text) == value
    assert loads(dumps(value)) == value
    assert json.loads(dumps(value)) == json.loads(text)


def test_key_order_is_kept() -> None:
    assert list(loads(dumps({"updated_at": 1, "id": 2}))) == ["updated_at", "id"]


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(float("nan"), id="NaN has no JSON form"),
        pytest.param({"x": float("inf")}, id="infinity has no JSON form"),
        pytest.param({1: "a"}, id="a non-string key would come back as a string"),
        pytest.param(Decimal("1.1"), id="Decimal has no exact JSON form"),
        pytest.param({"__date__": "2024-01-01"}, id="a sentinel-shaped object as data"),
    ],
)
def test_values_that_would_not_round_trip_are_refused(value: object) -> None:
    with pytest.raises(WatermarkJSONError):
        dumps(value)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("{", id="not JSON"),
        pytest.param('{"d": {"__date__": 20240101}}', id="a sentinel without a string"),
        pytest.param('{"d": {"__datetime__": "yesterday"}}', id="a sentinel that is not ISO"),
        pytest.param('{"x": NaN}', id="NaN in the text"),
    ],
)
def test_unreadable_text_is_refused(text: str) -> None:
    with pytest.raises(WatermarkJSONError):
        loads(text)


offsets = st.builds(
    lambda minutes: timezone(timedelta(minutes=minutes)), st.integers(-23 * 60, 23 * 60)
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
    st.dates(),
    st.datetimes(),  # naive
    st.datetimes(timezones=offsets),
    st.datetimes(timezones=st.just(timezone.utc)),
    st.times(),
    st.times(timezones=offsets),
)
nested = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=4).filter(
            lambda d: (
                not (len(d) == 1 and next(iter(d)) in ("__datetime__", "__date__", "__time__"))
            )
        ),
    ),
    max_leaves=12,
)


@given(nested)
def test_any_nested_value_round_trips(value: Any) -> None:
    assert loads(dumps(value)) == value


@given(st.datetimes(timezones=offsets))
def test_aware_datetimes_keep_their_offset(value: datetime) -> None:
    back = loads(dumps({"v": value}))["v"]
    assert back.utcoffset() == value.utcoffset()
    assert back.microsecond == value.microsecond
