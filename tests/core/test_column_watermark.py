"""Seed 001: the column watermark's value, order, operators and empty semantics."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watermark_assets.core.column.watermark import (
    ColumnWatermark,
    GreaterOrEqual,
    GreaterThan,
    WatermarkOperator,
    greatest_row,
    is_watermark_empty,
)
from watermark_assets.core.errors import (
    ColumnMismatchError,
    ColumnValueTypeError,
    PartialWatermarkError,
    WatermarkJSONError,
)

UTC = timezone.utc
SEED_JSON = '{"updated_at": {"__datetime__": "2026-04-03T09:15:00+00:00"}}'
T0 = datetime(2026, 4, 3, 9, 15, tzinfo=UTC)


def test_the_seeds_watermark_reads_and_writes() -> None:
    watermark = ColumnWatermark.from_json(SEED_JSON)
    assert watermark.columns == ("updated_at",)
    assert watermark.as_dict() == {"updated_at": T0}
    assert watermark.to_json() == SEED_JSON
    assert not watermark.is_empty


# Seed 001, "Empty watermark semantics", verbatim: is_watermark_empty(wm) is True when ...
@pytest.mark.parametrize(
    "value",
    [
        pytest.param(None, id="wm is None"),
        pytest.param({}, id="wm == {}"),
        pytest.param({"updated_at": None, "id": None}, id="every value in wm is None"),
    ],
)
def test_empty_watermark_means_read_everything(value: dict[str, Any] | None) -> None:
    assert is_watermark_empty(value)
    watermark = ColumnWatermark.of(value)
    assert watermark.is_empty
    assert watermark.admits({"updated_at": T0, "id": 1}, GreaterThan)
    assert ColumnWatermark.from_json("null" if value is None else "{}").is_empty


def test_first_run_of_a_new_dataflow_has_an_empty_watermark() -> None:
    assert ColumnWatermark.empty(["updated_at"]).is_empty
    assert not is_watermark_empty({"updated_at": T0})


def test_a_partly_empty_watermark_is_refused() -> None:
    with pytest.raises(PartialWatermarkError) as caught:
        ColumnWatermark.of({"updated_at": T0, "id": None})
    assert caught.value.missing == ("id",)


# Seed 001, "Watermark operator", verbatim table: Mode / Operator / Semantics.
@pytest.mark.parametrize(
    ("replay", "operator", "row_at_watermark_read"),
    [
        pytest.param(
            False, ">", False, id="Normal ETL: > exclusive, skip the exact last-saved row"
        ),
        pytest.param(True, ">=", True, id="Replay chunk: >= inclusive, include the chunk start"),
    ],
)
def test_operator_table(replay: bool, operator: str, row_at_watermark_read: bool) -> None:
    chosen = WatermarkOperator.for_run(replay=replay)
    assert chosen is WatermarkOperator(operator)
    watermark = ColumnWatermark.of({"updated_at": T0})
    assert watermark.admits({"updated_at": T0}, chosen) is row_at_watermark_read
    assert watermark.admits({"updated_at": T0 + timedelta(microseconds=1)}, chosen)
    assert not watermark.admits({"updated_at": T0 - timedelta(microseconds=1)}, chosen)


def test_the_default_operator_is_strictly_greater() -> None:
    assert GreaterThan.value == ">" and GreaterOrEqual.value == ">="


@pytest.mark.parametrize(
    ("row", "admitted"),
    [
        pytest.param({"updated_at": T0, "id": 7}, False, id="the last saved row itself"),
        pytest.param(
            {"updated_at": T0, "id": 6}, False, id="same timestamp, lower id: already read"
        ),
        pytest.param(
            {"updated_at": T0, "id": 8}, True, id="same timestamp, higher id: resumes exactly"
        ),
        pytest.param(
            {"updated_at": T0 + timedelta(seconds=1), "id": 1}, True, id="later timestamp, any id"
        ),
        pytest.param(
            {"updated_at": T0 - timedelta(seconds=1), "id": 99}, False, id="earlier timestamp"
        ),
        pytest.param({"updated_at": None, "id": 99}, False, id="a null timestamp is never above"),
    ],
)
def test_several_columns_compare_as_a_tuple_in_order(row: dict[str, Any], admitted: bool) -> None:
    watermark = ColumnWatermark.of({"updated_at": T0, "id": 7})
    assert watermark.admits(row, GreaterThan) is admitted


def test_advance_takes_the_greatest_row_and_never_lowers() -> None:
    watermark = ColumnWatermark.of({"updated_at": T0, "id": 7})
    assert watermark.advance({"updated_at": T0, "id": 9}).as_dict() == {"updated_at": T0, "id": 9}
    assert watermark.advance({"updated_at": T0 - timedelta(days=1), "id": 99}) == watermark
    assert watermark.advance(None) == watermark
    assert watermark.advance({"updated_at": None, "id": None}) == watermark
    assert ColumnWatermark.empty(["updated_at", "id"]).advance(
        {"updated_at": T0, "id": 1}
    ) == ColumnWatermark.of({"updated_at": T0, "id": 1})


def test_aware_datetimes_are_normalised_to_utc() -> None:
    paris = timezone(timedelta(hours=2))
    watermark = ColumnWatermark.of({"updated_at": datetime(2026, 4, 3, 11, 15, tzinfo=paris)})
    assert watermark.values[0] == T0
    assert watermark.values[0].tzinfo is UTC  # type: ignore[union-attr]
    assert watermark.to_json() == SEED_JSON


def test_a_naive_column_stays_naive_and_never_mixes_with_aware() -> None:
    naive = ColumnWatermark.of({"updated_at": datetime(2026, 4, 3, 9, 15)})
    assert naive.to_json() == '{"updated_at": {"__datetime__": "2026-04-03T09:15:00"}}'
    with pytest.raises(ColumnValueTypeError):
        naive.advance({"updated_at": T0})


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(True, id="a boolean"),
        pytest.param(float("nan"), id="NaN"),
        pytest.param(b"x", id="bytes"),
        pytest.param([1], id="a list"),
    ],
)
def test_unorderable_values_are_refused(value: Any) -> None:
    with pytest.raises(ColumnValueTypeError):
        ColumnWatermark.of({"c": value})


def test_watermarks_over_other_columns_do_not_merge() -> None:
    with pytest.raises(ColumnMismatchError):
        ColumnWatermark.of({"updated_at": T0}).merge(ColumnWatermark.of({"id": 1}))
    with pytest.raises(ColumnMismatchError):
        ColumnWatermark.of({"updated_at": T0, "id": 1}).advance({"id": 1, "updated_at": T0})


def test_a_json_array_is_not_a_column_watermark() -> None:
    with pytest.raises(WatermarkJSONError):
        ColumnWatermark.from_json("[1, 2]")


def test_greatest_row_skips_nulls_and_takes_the_tuple_maximum() -> None:
    rows = [
        {"updated_at": T0, "id": 3},
        {"updated_at": T0, "id": 10},
        {"updated_at": None, "id": 99},
        {"updated_at": T0 - timedelta(hours=1), "id": 50},
    ]
    assert greatest_row(["updated_at", "id"], rows) == ColumnWatermark.of(
        {"updated_at": T0, "id": 10}
    )
    assert greatest_row(["updated_at"], []).is_empty


# Property tests: a small value space so that ties and equal timestamps happen.
instants = st.sampled_from([T0 + timedelta(seconds=s) for s in range(4)])
ids = st.integers(0, 3)
watermarks = st.one_of(
    st.just(ColumnWatermark.empty(["updated_at", "id"])),
    st.builds(lambda t, i: ColumnWatermark(("updated_at", "id"), (t, i)), instants, ids),
)


@given(watermarks, watermarks)
def test_merge_is_commutative(a: ColumnWatermark, b: ColumnWatermark) -> None:
    assert a.merge(b) == b.merge(a)


@given(watermarks, watermarks, watermarks)
def test_merge_is_associative(a: ColumnWatermark, b: ColumnWatermark, c: ColumnWatermark) -> None:
    assert a.merge(b).merge(c) == a.merge(b.merge(c))


@given(watermarks)
def test_merge_is_idempotent(a: ColumnWatermark) -> None:
    assert a.merge(a) == a


@given(watermarks, watermarks)
def test_advance_is_monotone(a: ColumnWatermark, b: ColumnWatermark) -> None:
    advanced = a.advance(b)
    assert advanced.covers(a) and advanced.covers(b)


@given(watermarks)
def test_json_round_trips(a: ColumnWatermark) -> None:
    assert ColumnWatermark.from_json(a.to_json()) == a


@given(st.lists(st.fixed_dictionaries({"updated_at": instants, "id": ids}), max_size=8), watermarks)
def test_admitted_rows_are_exactly_those_above(
    rows: list[dict[str, Any]], w: ColumnWatermark
) -> None:
    for row in rows:
        if w.is_empty:
            assert w.admits(row, GreaterThan)
        else:
            key = (row["updated_at"], row["id"])
            assert w.admits(row, GreaterThan) is (key > w.key())
            assert w.admits(row, GreaterOrEqual) is (key >= w.key())


def test_dates_and_strings_order_naturally() -> None:
    assert ColumnWatermark.of({"d": date(2024, 1, 2)}).covers(
        ColumnWatermark.of({"d": date(2024, 1, 1)})
    )
    assert ColumnWatermark.of({"s": "b"}).advance({"s": "a"}).as_dict() == {"s": "b"}
    assert ColumnWatermark.of({"n": 1}).advance({"n": 2.5}).as_dict() == {"n": 2.5}
