"""Seed 003, unit watermarks: which strings may be unit ids, and how a list of them is read."""

from __future__ import annotations

import uuid
from datetime import date
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watermark_assets.core.errors import UnitIdError, WatermarkAssetsError
from watermark_assets.core.unit import (
    FIELD_SEPARATOR,
    MAX_UNIT_ID_BYTES,
    RefusedUnit,
    ScreenedUnits,
    UnreadableRow,
    check_unit_id,
    parse_units,
    screen_units,
    unit_id_problems,
)


# Seed 003 verbatim: ms.watermark=[{"name": "surveyId", "type": "unit", "units": "id1,id2,id3"}]
def test_the_seeds_explicit_units() -> None:
    assert parse_units("id1,id2,id3") == ("id1", "id2", "id3")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("id1", ("id1",), id="one id"),
        pytest.param("id2,id1,id2", ("id2", "id1"), id="a repeated id is kept once, first seen"),
        pytest.param("survey 1,survey 2", ("survey 1", "survey 2"), id="inner spaces are kept"),
        pytest.param("Café,日本", ("Café", "日本"), id="non-ASCII ids"),
        pytest.param("a.b,a-b,a_b,a:b", ("a.b", "a-b", "a_b", "a:b"), id="dots, dashes, colons"),
    ],
)
def test_explicit_units(text: str, expected: tuple[str, ...]) -> None:
    assert parse_units(text) == expected


# Issue 8: "ids that would break any of them (|, ',', [, ], .., /, leading or trailing spaces,
# empty) are refused with an error naming the id and the input row it came from"; plus Dagster's
# own INVALID_PARTITION_SUBSTRINGS (dagster/_core/definitions/partitions/utils/base.py).
BAD_IDS = [
    pytest.param("a|b", "'|'", id="pipe: Dagster's multi-partition key separator"),
    pytest.param("a,b", "','", id="comma: Dagster's selection syntax, the separator of 'units'"),
    pytest.param("a[b", "'['", id="open bracket: Dagster's selection syntax"),
    pytest.param("a]b", "']'", id="close bracket: Dagster's selection syntax"),
    pytest.param("a..b", "'..'", id="two dots: a parent directory"),
    pytest.param("a...b", "'..'", id="three dots: Dagster's partition range syntax"),
    pytest.param("..", "'..'", id="the parent directory itself"),
    pytest.param(".", "current directory", id="the current directory"),
    pytest.param("a/b", "'/'", id="slash: a path separator and a txn app id separator"),
    pytest.param("a\\b", "'\\\\'", id="backslash: Windows separator, Spark's glob escape"),
    pytest.param(" a", "whitespace", id="a leading space"),
    pytest.param("a ", "whitespace", id="a trailing space"),
    pytest.param("\u00a0a", "whitespace", id="a leading no-break space"),
    pytest.param("a\a", "'\\x07'", id="bell: Dagster refuses \\a"),
    pytest.param("a\bb", "'\\x08'", id="backspace: Dagster refuses \\b"),
    pytest.param("a\fb", "'\\x0c'", id="form feed: Dagster refuses \\f"),
    pytest.param("a\nb", "'\\n'", id="new line: Dagster refuses \\n"),
    pytest.param("a\rb", "'\\r'", id="carriage return: Dagster refuses \\r"),
    pytest.param("a\tb", "'\\t'", id="tab: Dagster refuses \\t"),
    pytest.param("a\vb", "'\\x0b'", id="vertical tab: Dagster refuses \\v"),
    pytest.param("a\0b", "'\\x00'", id="NUL: Dagster refuses \\0"),
    pytest.param("a\x1bb", "'\\x1b'", id="escape: other control characters alike"),
    pytest.param("a\x7fb", "'\\x7f'", id="DEL: other control characters alike"),
    pytest.param("a:*", "':'", id="a colon with a glob character: Spark cannot read the path"),
    pytest.param("a\udcff", "not valid Unicode", id="a byte that is not UTF-8 (surrogate escape)"),
    pytest.param("x" * (MAX_UNIT_ID_BYTES + 1), "bytes long", id="too long for a path segment"),
    pytest.param("é" * (MAX_UNIT_ID_BYTES // 2 + 1), "bytes long", id="too long in UTF-8 bytes"),
]


@pytest.mark.parametrize(("bad", "named"), BAD_IDS)
def test_a_bad_id_in_a_list_is_refused_with_its_row(bad: str, named: str) -> None:
    screened = screen_units([(1, ("good",)), (2, (bad,)), (3, ("also-good",))], source="ids.csv")
    assert screened.units == ("good", "also-good")
    (refused,) = screened.refused
    assert (refused.row, refused.value) == (2, bad)
    assert named in refused.reason
    error = refused.error("ids.csv")
    assert isinstance(error, UnitIdError) and isinstance(error, ValueError)
    assert isinstance(error, WatermarkAssetsError)
    assert (error.unit_id, error.row, error.source) == (bad, 2, "ids.csv")
    assert repr(bad) in str(error) and "row 2 of ids.csv" in str(error)
    assert "Fix the id in ids.csv" in str(error)


# In 'units' a comma separates ids; every other character, a space too, belongs to an id.
IN_UNITS = [p for p in BAD_IDS if "," not in str(p.values[0])]


@pytest.mark.parametrize(("bad", "named"), IN_UNITS)
def test_a_bad_id_in_explicit_units_raises_naming_it_and_its_position(bad: str, named: str) -> None:
    with pytest.raises(UnitIdError) as caught:
        parse_units(f"id1,{bad},id3")
    assert (caught.value.unit_id, caught.value.row, caught.value.source) == (bad, 2, "'units'")
    assert named in caught.value.reason


@pytest.mark.parametrize(
    ("text", "row"),
    [
        pytest.param("id1,,id3", 2, id="two commas: an empty id"),
        pytest.param("id1,id2,", 3, id="a trailing comma: an empty id"),
        pytest.param("", 1, id="no ids at all"),
    ],
)
def test_an_empty_id_in_explicit_units_is_refused(text: str, row: int) -> None:
    with pytest.raises(UnitIdError, match="it is empty") as caught:
        parse_units(text)
    assert caught.value.row == row


# Issue 22, item 9: the same rule as a secondary input's values; the spaces are not trimmed.
@pytest.mark.parametrize(
    ("text", "refused", "row"),
    [
        pytest.param(" a1", " a1", 1, id="a leading space"),
        pytest.param("a1 ", "a1 ", 1, id="a trailing space"),
        pytest.param("id1, id2", " id2", 2, id="a space after a comma"),
        pytest.param("id1 ,id2", "id1 ", 1, id="a space before a comma"),
        pytest.param("id1, ,id2", " ", 2, id="a blank id between commas"),
    ],
)
def test_spaces_around_an_explicit_id_are_refused_with_the_fix_not_trimmed(
    text: str, refused: str, row: int
) -> None:
    with pytest.raises(UnitIdError) as caught:
        parse_units(text)
    assert (caught.value.unit_id, caught.value.row) == (refused, row)
    assert "leading or trailing whitespace (refused, not trimmed" in str(caught.value)
    fixed = ",".join(part.strip() for part in text.split(",") if part.strip())
    assert f"write the ids without spaces around the commas, e.g. {fixed!r}" in str(caught.value)
    assert parse_units(fixed) == tuple(fixed.split(","))


def test_explicit_units_name_every_refused_id() -> None:
    with pytest.raises(UnitIdError) as caught:
        parse_units("a/b,ok,c|d")
    assert caught.value.unit_id == "a/b"
    assert "also refused: 'c|d' (row 3)" in str(caught.value)


def test_every_rule_broken_is_named() -> None:
    problems = unit_id_problems(" a/b|c")
    assert len(problems) == 3
    assert not unit_id_problems("survey-42")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("id1", "id1", id="a string"),
        pytest.param(42, "42", id="an integer becomes its decimal text"),
        pytest.param(
            uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001", id="a UUID, canonical"
        ),
    ],
)
def test_typed_values_that_are_ids(value: object, expected: str) -> None:
    assert check_unit_id(value) == expected


@pytest.mark.parametrize(
    ("value", "named"),
    [
        pytest.param(None, "null", id="null"),
        pytest.param(1.0, "float", id="a float has no exact text"),
        pytest.param(True, "bool", id="a boolean"),
        pytest.param(date(2020, 1, 1), "date", id="a date"),
        pytest.param(b"id1", "bytes", id="bytes"),
    ],
)
def test_typed_values_that_are_not_ids(value: object, named: str) -> None:
    with pytest.raises(UnitIdError, match=named) as caught:
        check_unit_id(value, row=7, source="the table")
    assert caught.value.unit_id == value and caught.value.row == 7


@pytest.mark.parametrize(
    ("values", "expected", "refused"),
    [
        pytest.param(("eu", "42"), "eu~42", None, id="two fields join with ~"),
        pytest.param(("eu", 42), "eu~42", None, id="an integer field"),
        pytest.param(("e~u", "42"), None, "separator", id="a part holding ~ is refused"),
        pytest.param(("", "42"), None, "'region' is empty", id="an empty part is refused"),
        pytest.param(("eu", None), None, "'id' it is null", id="a null part is refused"),
        pytest.param(("eu", "4/2"), None, "'/'", id="the joined id is checked too"),
    ],
)
def test_several_fields_join_into_one_id(
    values: tuple[Any, ...], expected: str | None, refused: str | None
) -> None:
    screened = screen_units([(1, values)], source="t", fields=("region", "id"))
    if expected is not None:
        assert FIELD_SEPARATOR == "~"
        assert screened.units == (expected,) and not screened.refused
    else:
        assert screened.units == ()
        assert refused is not None and refused in screened.refused[0].reason
        assert screened.refused[0].value == values


def test_screening_keeps_every_row_accounted_for() -> None:
    rows: list[tuple[int, tuple[object, ...] | UnreadableRow]] = [
        (1, ("id1",)),
        (2, ("id2",)),
        (3, ("id1",)),
        (4, UnreadableRow('{"id": ', "not JSON")),
        (5, ("a|b",)),
        (6, (None,)),
    ]
    screened = screen_units(rows, source="surveys.jsonl", fields=("id",))
    assert screened == ScreenedUnits(
        source="surveys.jsonl",
        units=("id1", "id2"),
        refused=(
            RefusedUnit(4, '{"id": ', "not JSON"),
            RefusedUnit(5, "a|b", screened.refused[1].reason),
            RefusedUnit(6, None, "it is null"),
        ),
        rows=6,
        duplicates=1,
    )
    assert screened.rows == len(screened.units) + screened.duplicates + len(screened.refused)
    assert [e.row for e in screened.errors()] == [4, 5, 6]
    assert screened.describe().startswith("2 unit id(s) from surveys.jsonl (6 row(s), 1 dup")


# A small alphabet holding every special character, so that collisions happen.
id_texts = st.text(alphabet="ab1 .|,[]/\\:*~\t\n\x00\u00a0é", max_size=8)


@given(st.lists(st.one_of(id_texts, st.none(), st.integers()), max_size=12))
def test_screening_never_loses_a_row(values: list[object]) -> None:
    screened = screen_units(enumerate(((v,) for v in values), start=1), source="s")
    assert screened.rows == len(values)
    assert screened.rows == len(screened.units) + screened.duplicates + len(screened.refused)
    assert len(set(screened.units)) == len(screened.units)
    for unit in screened.units:
        assert check_unit_id(unit) == unit
    assert [r.row for r in screened.refused] == sorted(r.row for r in screened.refused)


@settings(deadline=None)  # the first example imports dagster
@given(id_texts)
def test_every_accepted_id_is_a_valid_dagster_partition_key(unit: str) -> None:
    """Cross-check with Dagster itself: an id we accept is accepted by a static partitions
    definition and as a dimension of a multi-partitions definition (time x unit)."""
    from dagster import MultiPartitionsDefinition, StaticPartitionsDefinition

    if unit_id_problems(unit):
        return
    StaticPartitionsDefinition([unit])
    multi = MultiPartitionsDefinition(
        {"unit": StaticPartitionsDefinition([unit]), "x": StaticPartitionsDefinition(["x"])}
    )
    assert unit in {key.keys_by_dimension["unit"] for key in multi.get_partition_keys()}


def test_dagsters_own_refusals_are_ours() -> None:
    """Every substring and character the installed Dagster refuses in a partition key is refused
    here (found in dagster/_core/definitions/partitions/utils/base.py and multi.py)."""
    from dagster._core.definitions.partitions.utils.base import INVALID_PARTITION_SUBSTRINGS
    from dagster._core.definitions.partitions.utils.multi import (
        INVALID_STATIC_PARTITIONS_KEY_CHARACTERS,
        MULTIPARTITION_KEY_DELIMITER,
    )

    refused = [*INVALID_PARTITION_SUBSTRINGS, *INVALID_STATIC_PARTITIONS_KEY_CHARACTERS]
    assert MULTIPARTITION_KEY_DELIMITER in refused
    for substring in refused:
        assert unit_id_problems(f"a{substring}b"), substring
