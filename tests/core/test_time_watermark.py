"""The time watermark's value (kind "time"): per-window high watermarks, advance, merge, JSON."""

from __future__ import annotations

import copy
import pickle
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watermark_assets.core.errors import WatermarkJSONError
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.time import HighWatermarks, TimeWatermark
from watermark_assets.core.time.instant import to_millis
from watermark_assets.core.watermark import Watermark, registered_kinds, watermark_kind

UTC = timezone.utc


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


def day(d: int) -> TimeWindow:
    return TimeWindow(utc(2020, 2, d), utc(2020, 2, d + 1))


SEED_DAILY_LAST = day(20)  # seed 003: "the last partition 2020-02-20"


def test_a_window_that_succeeded_has_its_end_as_high_watermark() -> None:
    # Seed 003: "each date partition will have a high watermark of the midnight of next date (in
    # milliseconds). So the last partition 2020-02-20 will have high watermark as 2020-02-21
    # 12:00:00 AM."
    watermark = TimeWatermark.empty().advance(SEED_DAILY_LAST)
    assert watermark.high_watermark(SEED_DAILY_LAST) == utc(2020, 2, 21)
    assert watermark.high_watermark(utc(2020, 2, 20)) == utc(2020, 2, 21)
    assert watermark.high_watermarks == {to_millis(utc(2020, 2, 20)): to_millis(utc(2020, 2, 21))}
    assert watermark.highest == utc(2020, 2, 21)
    assert not watermark.is_empty


def test_a_partial_window_has_to_as_high_watermark_and_grows() -> None:
    # Seed 003: the partial partition [2020-02-01, 2020-02-21) becomes [2020-02-01, 2020-02-22).
    first = TimeWatermark.empty().advance(TimeWindow(utc(2020, 2, 1), utc(2020, 2, 21)))
    grown = first.advance(TimeWindow(utc(2020, 2, 1), utc(2020, 2, 22)))
    assert first.high_watermark(utc(2020, 2, 1)) == utc(2020, 2, 21)
    assert grown.high_watermark(utc(2020, 2, 1)) == utc(2020, 2, 22)


def test_no_history_is_an_absent_key() -> None:
    watermark = TimeWatermark.empty()
    assert watermark.is_empty
    assert watermark.highest is None
    assert watermark.high_watermark(SEED_DAILY_LAST) is None
    assert watermark == TimeWatermark.of({}) == TimeWatermark.from_json("{}")
    assert TimeWatermark.from_json("null").is_empty


# Seed 003: "if a partition fails in first execution, its last high watermark will be the same as
# partition start (in milliseconds), and DIL will ignore that in next execution. The failed
# partition will be treated like a new partition." Such an entry is dropped: no history.
@pytest.mark.parametrize(
    "entries",
    [
        pytest.param({utc(2020, 2, 10): utc(2020, 2, 10)}, id="high watermark equal to the start"),
        pytest.param({utc(2020, 2, 10): utc(2020, 2, 9)}, id="high watermark before the start"),
    ],
)
def test_a_failed_first_run_as_dil_stores_it_is_no_history(
    entries: dict[datetime, datetime],
) -> None:
    watermark = TimeWatermark.of(entries)
    assert watermark.is_empty
    assert watermark.high_watermark(utc(2020, 2, 10)) is None
    high = to_millis(next(iter(entries.values())))
    text = f'{{"2020-02-10T00:00:00.000Z": {high}}}'
    assert TimeWatermark.from_json(text).is_empty


def test_advance_never_lowers_an_entry() -> None:
    grown = TimeWatermark.empty().advance(TimeWindow(utc(2020, 2, 1), utc(2020, 2, 22)))
    assert grown.advance(TimeWindow(utc(2020, 2, 1), utc(2020, 2, 21))) == grown
    assert grown.advance([]) is grown


def test_advance_records_several_windows_and_keeps_the_others() -> None:
    watermark = TimeWatermark.empty().advance([day(1), day(2)]).advance(day(3))
    assert watermark.as_dict() == {
        utc(2020, 2, 1): utc(2020, 2, 2),
        utc(2020, 2, 2): utc(2020, 2, 3),
        utc(2020, 2, 3): utc(2020, 2, 4),
    }


def test_the_json_form_sorts_like_the_windows() -> None:
    watermark = TimeWatermark.empty().advance([day(20), day(3)])
    assert watermark.to_json() == (
        '{"2020-02-03T00:00:00.000Z":1580774400000,"2020-02-20T00:00:00.000Z":1582243200000}'
    )
    assert TimeWatermark.from_json(watermark.to_json()) == watermark


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("[1, 2]", id="not an object"),
        pytest.param('"2020-02-03"', id="a string"),
        pytest.param("{", id="not JSON"),
        pytest.param('{"2020-02-03": 1580774400000}', id="a key in another form"),
        pytest.param('{"1580774400000": 1580774400000}', id="a key in milliseconds"),
        pytest.param('{"2020-02-03T00:00:00.000Z": "1580774400000"}', id="a string value"),
        pytest.param('{"2020-02-03T00:00:00.000Z": 1.5e12}', id="a float value"),
        pytest.param('{"2020-02-03T00:00:00.000Z": true}', id="a boolean value"),
    ],
)
def test_unreadable_json_is_refused(text: str) -> None:
    with pytest.raises(WatermarkJSONError) as caught:
        TimeWatermark.from_json(text)
    assert caught.value.value == text


def test_entries_must_be_milliseconds() -> None:
    with pytest.raises(TypeError):
        TimeWatermark({to_millis(utc(2020, 2, 3)): utc(2020, 2, 4)})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        TimeWatermark({True: 5})


def test_a_time_watermark_implements_the_contract_and_is_registered() -> None:
    watermark: Watermark[Any] = TimeWatermark.empty().advance(day(20))
    assert isinstance(watermark, Watermark)
    assert "time" in registered_kinds()
    assert watermark_kind("time") is TimeWatermark
    stored = {"kind": "time", "value": watermark.to_json()}
    assert watermark_kind(stored["kind"]).from_json(stored["value"]) == watermark


def test_a_watermark_is_hashable_picklable_and_copyable() -> None:
    watermark = TimeWatermark.empty().advance([day(1), day(2)])
    assert hash(watermark) == hash(TimeWatermark.from_json(watermark.to_json()))
    assert pickle.loads(pickle.dumps(watermark)) == watermark
    assert copy.deepcopy(watermark) == watermark
    assert HighWatermarks({1: 2}) == {1: 2}
    assert str(watermark) == "2 windows, highest watermark 2020-02-03"
    assert str(TimeWatermark.empty()) == "(empty: every window runs)"


def test_the_new_time_modules_import_only_the_standard_library_and_the_core() -> None:
    import ast
    import sys
    from pathlib import Path

    import watermark_assets.core.time as kind

    for module in sorted(Path(kind.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                top = name.split(".")[0]
                allowed = top in sys.stdlib_module_names or top == "__future__"
                allowed = allowed or name.startswith("watermark_assets.core.")
                assert allowed, f"{module.name} imports {name}"
                assert name != "watermark_assets.exceptions", f"{module.name} imports exceptions"


# --- properties: merge is a join (commutative, associative, idempotent); advance is monotone ---

STARTS = [utc(2020, 2, d) for d in (1, 2, 3, 8)]
LENGTHS = [timedelta(hours=h) for h in (1, 6, 24, 48)]
windows_ = st.builds(
    lambda start, length: TimeWindow(start, start + length),
    st.sampled_from(STARTS),
    st.sampled_from(LENGTHS),
)
watermarks = st.lists(st.lists(windows_, max_size=4), max_size=4).map(
    lambda batches: _advanced(TimeWatermark.empty(), batches)
)


def _advanced(watermark: TimeWatermark, batches: list[list[TimeWindow]]) -> TimeWatermark:
    for batch in batches:
        watermark = watermark.advance(batch)
    return watermark


@given(watermarks, watermarks)
def test_merge_is_commutative(a: TimeWatermark, b: TimeWatermark) -> None:
    assert a.merge(b) == b.merge(a)


@given(watermarks, watermarks, watermarks)
def test_merge_is_associative(a: TimeWatermark, b: TimeWatermark, c: TimeWatermark) -> None:
    assert a.merge(b).merge(c) == a.merge(b.merge(c))


@given(watermarks)
def test_merge_is_idempotent_and_empty_is_its_identity(a: TimeWatermark) -> None:
    assert a.merge(a) == a
    assert a.merge(TimeWatermark.empty()) == a == TimeWatermark.empty().merge(a)


@given(watermarks, watermarks)
def test_merge_is_the_per_window_maximum(a: TimeWatermark, b: TimeWatermark) -> None:
    merged = a.merge(b).high_watermarks
    for start in set(a.high_watermarks) | set(b.high_watermarks):
        assert merged[start] == max(
            a.high_watermarks.get(start, 0), b.high_watermarks.get(start, 0)
        )


@given(watermarks, st.lists(windows_, max_size=5))
def test_advance_never_lowers_and_is_idempotent(a: TimeWatermark, batch: list[TimeWindow]) -> None:
    advanced = a.advance(batch)
    assert advanced.merge(a) == advanced
    assert advanced.advance(batch) == advanced
    for window in batch:
        high = advanced.high_watermark(window)
        assert high is not None and high >= window.end
    if a.highest is not None:
        assert advanced.highest is not None and advanced.highest >= a.highest


@given(watermarks)
def test_json_round_trips(a: TimeWatermark) -> None:
    assert TimeWatermark.from_json(a.to_json()) == a
