"""The push-down predicate: the expanded tuple comparison, rendered per source."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watermark_assets.core.column.predicate import (
    Comparison,
    SqlDialect,
    below,
    leading_bound,
    predicate,
    quote_identifier,
    sql_literal,
    to_dnf,
    to_http_params,
    to_sql,
)
from watermark_assets.core.column.watermark import (
    ColumnWatermark,
    Equal,
    GreaterOrEqual,
    GreaterThan,
)

UTC = timezone.utc
T0 = datetime(2026, 4, 3, 9, 15, tzinfo=UTC)
SEED = ColumnWatermark.from_json('{"updated_at": {"__datetime__": "2026-04-03T09:15:00+00:00"}}')
PAIR = ColumnWatermark.of({"updated_at": T0, "id": 7})


@pytest.mark.parametrize(
    ("watermark", "operator", "dialect", "sql"),
    [
        pytest.param(
            SEED,
            GreaterThan,
            SqlDialect.POSTGRES,
            "\"updated_at\" > TIMESTAMPTZ '2026-04-03 09:15:00+00:00'",
            id="the seed's watermark as a database WHERE (normal run)",
        ),
        pytest.param(
            SEED,
            GreaterOrEqual,
            SqlDialect.SPARK,
            "`updated_at` >= TIMESTAMP '2026-04-03 09:15:00+00:00'",
            id="the seed's watermark in Spark SQL (replay chunk)",
        ),
        pytest.param(
            PAIR,
            GreaterThan,
            SqlDialect.POSTGRES,
            "(\"updated_at\" > TIMESTAMPTZ '2026-04-03 09:15:00+00:00') OR "
            '("updated_at" = TIMESTAMPTZ \'2026-04-03 09:15:00+00:00\' AND "id" > 7)',
            id="two columns: (a > x) OR (a = x AND b > y)",
        ),
        pytest.param(
            PAIR,
            GreaterOrEqual,
            SqlDialect.SPARK,
            "(`updated_at` > TIMESTAMP '2026-04-03 09:15:00+00:00') OR "
            "(`updated_at` = TIMESTAMP '2026-04-03 09:15:00+00:00' AND `id` >= 7)",
            id="with >= only the last column is inclusive",
        ),
        pytest.param(
            ColumnWatermark.empty(["updated_at"]),
            GreaterThan,
            SqlDialect.POSTGRES,
            "TRUE",
            id="an empty watermark reads everything",
        ),
        pytest.param(
            ColumnWatermark.of({"survey_id": "it's"}),
            Equal,
            SqlDialect.POSTGRES,
            "\"survey_id\" = 'it''s'",
            id="a unit: one equality (PostgreSQL)",
        ),
        pytest.param(
            PAIR,
            Equal,
            SqlDialect.SPARK,
            "`updated_at` = TIMESTAMP '2026-04-03 09:15:00+00:00' AND `id` = 7",
            id="= on two columns: one clause of equalities",
        ),
    ],
)
def test_sql(watermark: ColumnWatermark, operator: Any, dialect: SqlDialect, sql: str) -> None:
    assert to_sql(predicate(watermark, operator), dialect) == sql


@pytest.mark.parametrize(
    ("value", "dialect", "literal"),
    [
        pytest.param("it's", SqlDialect.POSTGRES, "'it''s'", id="postgres doubles quotes"),
        pytest.param("a\\'b", SqlDialect.SPARK, "'a\\\\\\'b'", id="spark escapes backslashes"),
        pytest.param(
            datetime(2026, 4, 3, 9, 15, 0, 5),
            SqlDialect.SPARK,
            "TIMESTAMP_NTZ '2026-04-03 09:15:00.000005'",
            id="a naive datetime is a timestamp without zone",
        ),
        pytest.param(
            datetime(2026, 4, 3, 9, 15),
            SqlDialect.POSTGRES,
            "TIMESTAMP '2026-04-03 09:15:00'",
            id="postgres timestamp without time zone",
        ),
        pytest.param(date(2024, 2, 29), SqlDialect.SPARK, "DATE '2024-02-29'", id="a date"),
        pytest.param(time(7, 0), SqlDialect.POSTGRES, "TIME '07:00:00'", id="a time"),
        pytest.param(
            time(7, 0, tzinfo=timezone.utc),
            SqlDialect.POSTGRES,
            "TIMETZ '07:00:00+00:00'",
            id="an aware time keeps its offset in postgres",
        ),
        pytest.param(2.5, SqlDialect.SPARK, "2.5", id="a float"),
    ],
)
def test_literals(value: Any, dialect: SqlDialect, literal: str) -> None:
    assert sql_literal(value, dialect) == literal


@pytest.mark.parametrize(
    ("name", "dialect", "quoted"),
    [
        pytest.param('we"ird', SqlDialect.POSTGRES, '"we""ird"', id="postgres doubles quotes"),
        pytest.param("we`ird", SqlDialect.SPARK, "`we``ird`", id="spark doubles backticks"),
    ],
)
def test_identifiers(name: str, dialect: SqlDialect, quoted: str) -> None:
    assert quote_identifier(name, dialect) == quoted


def test_dnf_filters_for_deltalake_and_parquet() -> None:
    assert to_dnf(predicate(PAIR, GreaterThan)) == [
        [("updated_at", ">", T0)],
        [("updated_at", "==", T0), ("id", ">", 7)],
    ]
    assert to_dnf(predicate(ColumnWatermark.empty(), GreaterThan)) is None


def test_http_params_from_the_mapping_and_format() -> None:
    mapping = {"updated_at": "updated_since"}
    assert to_http_params(SEED, mapping) == {"updated_since": "2026-04-03T09:15:00+00:00"}
    assert to_http_params(SEED, mapping, value_format="%Y-%m-%d") == {"updated_since": "2026-04-03"}
    assert to_http_params(ColumnWatermark.empty(["updated_at"]), mapping) == {}
    with pytest.raises(ValueError, match="not watermark columns"):
        to_http_params(SEED, {"id": "after_id"})


instants = st.sampled_from([T0 + timedelta(seconds=s) for s in range(3)])
small = st.integers(0, 2)
rows = st.fixed_dictionaries({"a": instants, "b": small, "c": small})


@given(
    st.lists(rows, max_size=10),
    instants,
    small,
    small,
    st.sampled_from([GreaterThan, GreaterOrEqual, Equal]),
)
def test_the_expanded_form_equals_the_tuple_comparison(
    table: list[dict[str, Any]], a: datetime, b: int, c: int, operator: Any
) -> None:
    watermark = ColumnWatermark(("a", "b", "c"), (a, b, c))
    pred = predicate(watermark, operator)
    for row in table:
        assert pred.admits(row) is watermark.admits(row, operator)


END = T0 + timedelta(hours=2)


def test_an_upper_bound_joins_every_clause_as_a_strict_less_than() -> None:
    chunk = below(predicate(PAIR, GreaterOrEqual), "updated_at", END)
    assert to_sql(chunk, SqlDialect.SPARK) == (
        "(`updated_at` > TIMESTAMP '2026-04-03 09:15:00+00:00' AND "
        "`updated_at` < TIMESTAMP '2026-04-03 11:15:00+00:00') OR "
        "(`updated_at` = TIMESTAMP '2026-04-03 09:15:00+00:00' AND `id` >= 7 AND "
        "`updated_at` < TIMESTAMP '2026-04-03 11:15:00+00:00')"
    )
    assert to_dnf(chunk) == [
        [("updated_at", ">", T0), ("updated_at", "<", END)],
        [("updated_at", "==", T0), ("id", ">=", 7), ("updated_at", "<", END)],
    ]
    assert leading_bound(chunk) == leading_bound(predicate(PAIR, GreaterOrEqual))


def test_a_chunk_is_closed_at_its_start_and_open_at_its_end() -> None:
    chunk = below(predicate(SEED, GreaterOrEqual), "updated_at", END)
    assert chunk.admits({"updated_at": T0}), "a row on the lower bound is read"
    assert not chunk.admits({"updated_at": END}), "a row on the upper bound is the next chunk's"
    assert chunk.admits({"updated_at": END - timedelta(microseconds=1)})
    assert not chunk.admits({"updated_at": None})


def test_an_upper_bound_alone_reads_everything_below_it() -> None:
    chunk = below(predicate(ColumnWatermark.empty(["updated_at"]), GreaterThan), "updated_at", END)
    assert to_sql(chunk, SqlDialect.POSTGRES) == (
        "\"updated_at\" < TIMESTAMPTZ '2026-04-03 11:15:00+00:00'"
    )
    assert leading_bound(chunk) is None


def test_an_upper_bound_is_on_the_leading_column_and_only_one() -> None:
    with pytest.raises(ValueError, match="leading watermark column"):
        below(predicate(PAIR, GreaterOrEqual), "id", 9)
    with pytest.raises(ValueError, match="already has"):
        below(below(predicate(SEED, GreaterOrEqual), "updated_at", END), "updated_at", END)


def test_a_unit_predicate_renders_for_every_engine_and_bounds_files_on_both_sides() -> None:
    unit = predicate(ColumnWatermark.of({"survey_id": "id2"}), Equal)
    assert to_dnf(unit) == [[("survey_id", "==", "id2")]]
    assert to_http_params(unit.watermark, {"survey_id": "survey"}) == {"survey": "id2"}
    assert leading_bound(unit) == Comparison("survey_id", "=", "id2")
    assert [unit.admits({"survey_id": v}) for v in ("id1", "id2", "id3", None)] == [
        False,
        True,
        False,
        False,
    ]
