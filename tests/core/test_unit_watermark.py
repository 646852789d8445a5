"""Seed 003, unit watermarks: one inner watermark per unit; merge laws, JSON, new ids, history."""

from __future__ import annotations

import ast
import pickle
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import watermark_assets.core as core
from tests.core.strategies import watermarks as file_watermarks
from watermark_assets.core.column import ColumnWatermark
from watermark_assets.core.errors import (
    NaiveDatetimeError,
    UnitIdError,
    UnitInnerKindError,
    UnknownWatermarkKindError,
    WatermarkJSONError,
)
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.core.unit import DoneAt, UnitListing, UnitWatermark, parse_units
from watermark_assets.core.watermark import Watermark, registered_kinds, watermark_kind

UTC = timezone.utc
T0 = datetime(2020, 1, 15, tzinfo=UTC)
T0_MS = 1579046400000


def done(unit_ms: dict[str, int | None]) -> UnitWatermark[DoneAt]:
    return UnitWatermark(
        "done_at", {u: None if ms is None else DoneAt(ms) for u, ms in unit_ms.items()}
    )


def test_the_kinds_register_on_import_of_the_core() -> None:
    assert {"unit", "done_at"} <= set(registered_kinds())
    assert watermark_kind("unit") is UnitWatermark and core.UnitWatermark is UnitWatermark
    assert watermark_kind("done_at") is DoneAt and core.DoneAt is DoneAt


def test_a_unit_watermark_implements_the_contract() -> None:
    watermark: Watermark[Any] = done({"id1": T0_MS, "id2": None})
    assert isinstance(watermark, Watermark)
    assert type(watermark).kind == "unit"
    assert not watermark.is_empty
    assert type(watermark).from_json(watermark.to_json()) == watermark
    assert watermark.merge(watermark) == watermark
    stored = {"kind": "unit", "value": watermark.to_json()}
    assert watermark_kind(stored["kind"]).from_json(stored["value"]) == watermark


def test_the_json_form() -> None:
    watermark = done({"id2": None, "id1": T0_MS})
    assert watermark.to_json() == (
        '{"inner_kind": "done_at", "units": {"id1": {"ms": 1579046400000}, "id2": null}}'
    )


# Seed 003: units "id1,id2,id3" -> one unit each, none read yet.
def test_explicit_units_start_known_and_unread() -> None:
    watermark = UnitWatermark.of_units("done_at", parse_units("id1,id2,id3"))
    assert list(watermark.units) == ["id1", "id2", "id3"]
    assert watermark.is_empty
    assert UnitWatermark("done_at").is_empty


@pytest.mark.parametrize(
    ("before", "observed", "after"),
    [
        pytest.param({}, {"id1": 5}, {"id1": 5}, id="a first run of a unit"),
        pytest.param({"id1": None}, {"id1": 5}, {"id1": 5}, id="a known unit's first run"),
        pytest.param({"id1": 5}, {"id1": 9}, {"id1": 9}, id="a later run moves it forward"),
        pytest.param({"id1": 9}, {"id1": 5}, {"id1": 9}, id="an older run never moves it back"),
        pytest.param(
            {"id1": 5, "id2": 7}, {"id2": 8}, {"id1": 5, "id2": 8}, id="other units are untouched"
        ),
    ],
)
def test_advance_per_unit(
    before: dict[str, int | None], observed: dict[str, int], after: dict[str, int | None]
) -> None:
    advanced = done(before).advance({u: DoneAt(ms) for u, ms in observed.items()})
    assert advanced == done(after)


def test_time_x_unit_holds_another_kind_per_unit() -> None:
    """The inner kind is any registered kind: here the column kind stands in for the time kind."""
    a = ColumnWatermark.of({"updated_at": T0, "id": 3})
    b = ColumnWatermark.of({"updated_at": T0 + timedelta(days=1), "id": 1})
    watermark = UnitWatermark("column", {"eu": a}).advance({"eu": b, "us": a})
    assert dict(watermark.units) == {"eu": b, "us": a}
    # The column kind's key order (its comparison order) survives the JSON round trip.
    assert '"eu": {"updated_at": ' in watermark.to_json()
    assert UnitWatermark.from_json(watermark.to_json()) == watermark


def test_one_inner_kind_per_watermark() -> None:
    with pytest.raises(UnitInnerKindError) as caught:
        UnitWatermark("done_at", {"id1": ColumnWatermark.of({"id": 1})})  # type: ignore[dict-item]
    assert (caught.value.expected, caught.value.got, caught.value.unit) == (
        "done_at",
        "column",
        "id1",
    )
    with pytest.raises(UnitInnerKindError):
        done({"id1": 1}).merge(UnitWatermark("column"))  # type: ignore[arg-type]


def test_an_unregistered_inner_kind_is_refused() -> None:
    with pytest.raises(UnknownWatermarkKindError):
        UnitWatermark("dne_at")
    with pytest.raises(ValueError, match="one level"):
        UnitWatermark("unit")


def test_stored_ids_are_checked() -> None:
    with pytest.raises(UnitIdError) as caught:
        done({"a/b": 1})
    assert caught.value.source == "the unit watermark" and caught.value.unit_id == "a/b"
    with pytest.raises(UnitIdError, match="strings"):
        UnitWatermark("done_at", {42: DoneAt(1)})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param("[]", "unit watermark is", id="not an object"),
        pytest.param('{"units": {}}', "unit watermark is", id="no inner kind"),
        pytest.param("{", "not JSON", id="not JSON"),
    ],
)
def test_unreadable_json_is_refused(text: str, problem: str) -> None:
    with pytest.raises(WatermarkJSONError, match=problem):
        UnitWatermark.from_json(text)


# --- new ids: added, never removed ---


@pytest.mark.parametrize(
    ("known", "listed", "listing"),
    [
        pytest.param([], ["id1", "id2"], UnitListing(("id1", "id2"), ()), id="first listing"),
        pytest.param(["id1"], ["id1", "id2"], UnitListing(("id2",), ()), id="a new id appended"),
        pytest.param(["id1", "id2"], ["id1", "id2"], UnitListing((), ()), id="nothing new"),
        pytest.param(
            ["id1", "id2"], ["id2"], UnitListing((), ("id1",)), id="a vanished id is reported"
        ),
        pytest.param(
            ["b"], ["d", "a", "d", "b"], UnitListing(("d", "a"), ()), id="listed order, once"
        ),
    ],
)
def test_new_units(known: list[str], listed: list[str], listing: UnitListing) -> None:
    watermark = done(dict.fromkeys(known, 5))
    assert watermark.new_units(listed) == listing
    grown = watermark.add_units(listing.new)
    assert set(grown.units) == set(known) | set(listed)  # nothing dropped
    assert all(grown.units[u] == DoneAt(5) for u in known)  # history kept
    assert grown.add_units(listed) is grown


def test_a_listing_says_what_changed_in_words() -> None:
    listing = done({"id1": 5, "id2": 5}).new_units(["id2", "id3"])
    assert listing.describe() == (
        "1 new unit id(s): id3; 1 known unit id(s) no longer listed (kept, with their history): id1"
    )
    assert UnitListing((), ()).describe() == "no new unit ids"


def test_a_listing_is_checked_like_stored_ids() -> None:
    with pytest.raises(UnitIdError):
        done({}).new_units(["ok", "a|b"])


# --- DoneAt, the inner watermark of a unit-only pipeline ---


def test_done_at_keeps_milliseconds_in_utc() -> None:
    paris = timezone(timedelta(hours=1))
    assert DoneAt.at(datetime(2020, 1, 15, 1, tzinfo=paris)) == DoneAt(T0_MS)
    assert DoneAt.at(T0 + timedelta(microseconds=999)) == DoneAt(T0_MS)
    assert DoneAt(T0_MS).when == T0
    assert DoneAt.from_json(DoneAt(T0_MS).to_json()) == DoneAt(T0_MS)
    with pytest.raises(NaiveDatetimeError):
        DoneAt.at(datetime(2020, 1, 15))
    with pytest.raises(TypeError):
        DoneAt(True)
    with pytest.raises(WatermarkJSONError):
        DoneAt.from_json('{"ms": 1.5}')


def test_done_at_never_moves_back() -> None:
    assert DoneAt(5).advance(3) == DoneAt(5)
    assert DoneAt(5).advance(DoneAt(8)) == DoneAt(8)
    assert not DoneAt(0).is_empty


# --- properties: merge laws, monotone, JSON round trip, for two inner kinds ---

unit_ids = st.sampled_from(["id1", "id2", "id3", "survey 4", "é5"])
done_watermarks = st.builds(
    lambda entries: UnitWatermark("done_at", entries),
    st.dictionaries(unit_ids, st.none() | st.builds(DoneAt, st.integers(-(2**53), 2**53))),
)
file_path_watermarks = st.builds(
    lambda entries: UnitWatermark("file_path", entries),
    st.dictionaries(unit_ids, st.none() | file_watermarks()),
)
any_kind = st.sampled_from([done_watermarks, file_path_watermarks])


@st.composite
def triples(draw: st.DrawFn) -> tuple[UnitWatermark[Any], ...]:
    kind = draw(any_kind)
    return draw(kind), draw(kind), draw(kind)


@given(triples())
def test_merge_is_commutative_associative_idempotent(ws: tuple[UnitWatermark[Any], ...]) -> None:
    a, b, c = ws
    assert a.merge(b) == b.merge(a)
    assert a.merge(b).merge(c) == a.merge(b.merge(c))
    assert a.merge(a) == a


@given(triples())
def test_merge_keeps_every_unit_and_never_lowers_one(ws: tuple[UnitWatermark[Any], ...]) -> None:
    a, b, _ = ws
    merged = a.merge(b)
    assert set(merged.units) == set(a.units) | set(b.units)
    assert merged.merge(a) == merged and merged.merge(b) == merged  # at or above both
    assert a.advance({u: w for u, w in b.units.items() if w is not None}).units.keys() >= (
        a.units.keys()
    )


@given(st.one_of(done_watermarks, file_path_watermarks))
def test_json_round_trips(watermark: UnitWatermark[Any]) -> None:
    text = watermark.to_json()
    assert UnitWatermark.from_json(text) == watermark
    assert UnitWatermark.from_json(text).to_json() == text
    assert pickle.loads(pickle.dumps(watermark)) == watermark
    assert hash(UnitWatermark.from_json(text)) == hash(watermark)


@given(done_watermarks, st.dictionaries(unit_ids, st.builds(DoneAt, st.integers(0, 10**13))))
def test_advance_is_monotone(watermark: UnitWatermark[DoneAt], observed: dict[str, DoneAt]) -> None:
    advanced = watermark.advance(observed)
    assert set(advanced.units) == set(watermark.units) | set(observed)
    for unit, after in advanced.units.items():
        before = watermark.units.get(unit)
        assert after is not None or unit not in observed
        assert before is None or (after is not None and after.ms >= before.ms)


def test_the_unit_modules_import_only_the_standard_library_and_the_core() -> None:
    root = Path(core.__file__).parent / "unit"
    for module in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                allowed = top in sys.stdlib_module_names or top == "__future__"
                allowed = allowed or name.startswith("watermark_assets.core.")
                assert allowed, f"{module.name} imports {name}"


def test_file_path_inner_kind_round_trips_a_real_value() -> None:
    inner = FileWatermark.initial().advance(["date=2024-01-28/1706450400-a.json"])
    watermark = UnitWatermark("file_path", {"id1": inner})
    assert UnitWatermark.from_json(watermark.to_json()).units["id1"] == inner
