"""The time watermark's value (kind "time"): covered spans read back as per-window high watermarks,
advance, merge, JSON (and the earlier per-window JSON)."""

from __future__ import annotations

import copy
import json
import pickle
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watermark_assets.core.errors import WatermarkJSONError
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.time import Partitioning, Spans, TimeWatermark, TimeWindows
from watermark_assets.core.time.instant import format_instant, to_millis
from watermark_assets.core.time.tick import CutOff
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
    assert watermark.spans == Spans([(to_millis(utc(2020, 2, 20)), to_millis(utc(2020, 2, 21)))])
    assert watermark.highest == utc(2020, 2, 21)
    assert not watermark.is_empty


def test_a_partial_window_has_to_as_high_watermark_and_grows() -> None:
    # Seed 003: the partial partition [2020-02-01, 2020-02-21) becomes [2020-02-01, 2020-02-22).
    first = TimeWatermark.empty().advance(TimeWindow(utc(2020, 2, 1), utc(2020, 2, 21)))
    grown = first.advance(TimeWindow(utc(2020, 2, 1), utc(2020, 2, 22)))
    february = TimeWindow(utc(2020, 2, 1), utc(2020, 3, 1))  # the window, complete later
    assert first.high_watermark(february) == utc(2020, 2, 21)
    assert grown.high_watermark(february) == utc(2020, 2, 22)


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
    assert watermark.high_watermark(day(10)) is None
    high = to_millis(next(iter(entries.values())))
    text = f'{{"2020-02-10T00:00:00.000Z": {high}}}'
    assert TimeWatermark.from_json(text).is_empty


def test_advance_never_lowers_an_entry() -> None:
    grown = TimeWatermark.empty().advance(TimeWindow(utc(2020, 2, 1), utc(2020, 2, 22)))
    assert grown.advance(TimeWindow(utc(2020, 2, 1), utc(2020, 2, 21))) == grown
    assert grown.advance([]) is grown


def test_advance_records_several_windows_and_keeps_the_others() -> None:
    watermark = TimeWatermark.empty().advance([day(1), day(2)]).advance(day(3))
    assert watermark.high_watermarks([day(d) for d in range(1, 6)]) == {
        utc(2020, 2, 1): utc(2020, 2, 2),
        utc(2020, 2, 2): utc(2020, 2, 3),
        utc(2020, 2, 3): utc(2020, 2, 4),
    }
    # Contiguous windows are one span: the value grows with the gaps, not the windows.
    assert watermark.covered() == (TimeWindow(utc(2020, 2, 1), utc(2020, 2, 4)),)


def test_the_json_form_is_the_spans_in_order() -> None:
    watermark = TimeWatermark.empty().advance([day(20), day(3), day(4)])
    assert watermark.to_json() == (
        '{"spans":[["2020-02-03T00:00:00.000Z","2020-02-05T00:00:00.000Z"],'
        '["2020-02-20T00:00:00.000Z","2020-02-21T00:00:00.000Z"]]}'
    )
    assert TimeWatermark.from_json(watermark.to_json()) == watermark
    assert TimeWatermark.empty().to_json() == '{"spans":[]}'
    assert TimeWatermark.from_json('{"spans":[]}').is_empty


def test_the_earlier_per_window_json_is_still_read() -> None:
    # What the commits of a time pipeline held before the spans: window start -> high (ms); the
    # window of 02-02 as DIL stores a failed first run (high watermark = its start).
    earlier = (
        '{"2020-02-01T00:00:00.000Z":1580601600000,"2020-02-02T00:00:00.000Z":1580601600000,'
        '"2020-02-20T00:00:00.000Z":1582243200000}'
    )
    read = TimeWatermark.from_json(earlier)
    assert read == TimeWatermark.empty().advance([day(1), day(20)])
    assert read.high_watermarks([day(1), day(2), day(3), day(20)]) == {
        utc(2020, 2, 1): utc(2020, 2, 2),
        utc(2020, 2, 20): utc(2020, 2, 21),
    }
    assert TimeWatermark.from_json(read.to_json()) == read


def feb(start: int, end: int) -> TimeWindow:
    return TimeWindow(utc(2020, 2, start), utc(2020, 2, end))


MONTHLY_FEB = TimeWindow(utc(2020, 2, 1), utc(2020, 3, 1))
MONTHLY_MAR = TimeWindow(utc(2020, 3, 1), utc(2020, 4, 1))

# id: (windows committed in order, window asked, its high watermark, highest, spans)
EDGES: dict[str, tuple[list[TimeWindow], TimeWindow, datetime | None, datetime, int]] = {
    # Seed 003: [2020-02-01, 2020-02-21) grows to [2020-02-01, 2020-02-22): one span grows.
    "a partial window grows": (
        [feb(1, 21), feb(1, 22)],
        MONTHLY_FEB,
        utc(2020, 2, 22),
        utc(2020, 2, 22),
        1,
    ),
    # The partial February never ran again (it failed), March succeeded: the gap [02-21, 03-01)
    # keeps February's high watermark at 02-21, so it still re-runs by the cut-off rule.
    "a partial window followed by a later one": (
        [feb(1, 21), MONTHLY_MAR],
        MONTHLY_FEB,
        utc(2020, 2, 21),
        utc(2020, 4, 1),
        2,
    ),
    "the later one itself": (
        [feb(1, 21), MONTHLY_MAR],
        MONTHLY_MAR,
        utc(2020, 4, 1),
        utc(2020, 4, 1),
        2,
    ),
    # A re-run with a smaller `to` (a clock or a fixed `to` moved back) lowers nothing.
    "a re-run with a smaller to": (
        [feb(1, 22), feb(1, 20)],
        MONTHLY_FEB,
        utc(2020, 2, 22),
        utc(2020, 2, 22),
        1,
    ),
    # partition: none records its one window [from, to) at each run: its high is the last `to`.
    "unpartitioned, runs up to 02-15 then 02-16": (
        [feb(1, 15), feb(1, 16)],
        feb(1, 29),
        utc(2020, 2, 16),
        utc(2020, 2, 16),
        1,
    ),
    # Windows that touch are one span, each window still reads its own end.
    "adjacent days": ([day(3), day(4)], day(3), utc(2020, 2, 4), utc(2020, 2, 5), 1),
    "a day between two that succeeded": ([day(3), day(5)], day(4), None, utc(2020, 2, 6), 2),
}


@pytest.mark.parametrize(
    ("committed", "asked", "high", "highest", "spans"), EDGES.values(), ids=EDGES.keys()
)
def test_edge_cases_of_the_spans(
    committed: list[TimeWindow],
    asked: TimeWindow,
    high: datetime | None,
    highest: datetime,
    spans: int,
) -> None:
    watermark = TimeWatermark.empty()
    for window in committed:
        watermark = watermark.advance(window)
    assert watermark.high_watermark(asked) == high
    assert watermark.highest == highest
    assert len(watermark.covered()) == spans
    # The same commits in the other order, or merged as two concurrent runs, agree.
    assert TimeWatermark.empty().advance(committed[::-1]) == watermark
    first = TimeWatermark.empty().advance(committed[0])
    assert TimeWatermark.empty().advance(committed[1:]).merge(first) == watermark


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
        pytest.param('{"spans": {}}', id="spans not a list"),
        pytest.param('{"spans": [], "x": 1}', id="spans and another key"),
        pytest.param('{"spans": [["2020-02-03T00:00:00.000Z"]]}', id="a span of one instant"),
        pytest.param('{"spans": [[1, 2]]}', id="a span in milliseconds"),
        pytest.param(
            '{"spans": [["2020-02-04T00:00:00.000Z", "2020-02-03T00:00:00.000Z"]]}',
            id="a span ending before it starts",
        ),
        pytest.param('{"spans": ["2020-02-03T00:00:00.000Z"]}', id="a span not a list"),
    ],
)
def test_unreadable_json_is_refused(text: str) -> None:
    with pytest.raises(WatermarkJSONError) as caught:
        TimeWatermark.from_json(text)
    assert caught.value.value == text


def test_entries_must_be_milliseconds() -> None:
    with pytest.raises(TypeError):
        TimeWatermark({to_millis(utc(2020, 2, 3)): utc(2020, 2, 4)})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TimeWatermark({True: 5})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TimeWatermark([(1, 2)])  # type: ignore[arg-type]


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
    assert Spans([(3, 4), (1, 3)]) == Spans([(1, 4)])
    assert str(watermark) == "1 covered span, highest watermark 2020-02-03T00:00:00Z"
    assert str(watermark.advance(day(9))) == (
        "2 covered spans, highest watermark 2020-02-10T00:00:00Z"
    )
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


@given(watermarks, st.lists(windows_, max_size=5))
def test_advance_never_lowers_and_is_idempotent(a: TimeWatermark, batch: list[TimeWindow]) -> None:
    advanced = a.advance(batch)
    assert advanced.merge(a) == advanced
    assert advanced.advance(batch) == advanced
    for window in batch:
        assert advanced.high_watermark(window) == window.end
    if a.highest is not None:
        assert advanced.highest is not None and advanced.highest >= a.highest


@given(watermarks)
def test_json_round_trips(a: TimeWatermark) -> None:
    assert TimeWatermark.from_json(a.to_json()) == a


# --- properties: the spans answer exactly as the per-window map they replace ---------------------
# The model is the earlier value: window start -> the largest high watermark recorded for it. A
# recorded high watermark lies in (start, end] of its window (end for a complete run, an earlier
# `to` for a run while the window was the partial last one), in any order and any number of times.

MS = timedelta(milliseconds=1)


@st.composite
def tilings(draw: st.DrawFn) -> TimeWindows:
    partitioning = draw(st.sampled_from(["monthly", "weekly", "daily", "hourly", "none"]))
    start = utc(2020, 1, 1) + draw(st.integers(0, 48)) * timedelta(minutes=30)
    length = draw(st.integers(1, 24 * 80)) * timedelta(hours=1) - draw(st.integers(0, 59)) * MS
    return TimeWindows(start, start + length, Partitioning(partitioning), draw(st.booleans()))


@st.composite
def recorded(draw: st.DrawFn) -> tuple[TimeWindows, list[TimeWindow]]:
    """A tiling and the (window, high) runs recorded on it, each as the window ``[start, high)``
    a run committed (``high`` in ``(start, end]``)."""
    tiles = draw(tilings())
    runs: list[TimeWindow] = []
    if len(tiles):
        for index in draw(st.lists(st.integers(0, len(tiles) - 1), max_size=30)):
            window = tiles[index]
            span = (window.end - window.start) // MS
            high = draw(st.one_of(st.just(span), st.integers(1, span)))
            runs.append(TimeWindow(window.start, window.start + high * MS))
    return tiles, runs


def _model(runs: list[TimeWindow]) -> dict[datetime, datetime]:
    highs: dict[datetime, datetime] = {}
    for run in runs:
        highs[run.start] = max(run.end, highs.get(run.start, run.end))
    return highs


@settings(deadline=None, max_examples=200)
@given(recorded(), st.data())
def test_spans_answer_as_the_per_window_map(
    case: tuple[TimeWindows, list[TimeWindow]], data: st.DataObject
) -> None:
    tiles, runs = case
    model = _model(runs)
    watermark = TimeWatermark.empty()
    for run in runs:  # one commit per run, in the order they happened
        watermark = watermark.advance(run)
    assert watermark == TimeWatermark.of(model)  # the order and the repeats do not matter
    for window in tiles:
        assert watermark.high_watermark(window) == model.get(window.start)
    assert watermark.count_with_history(tiles) == sum(1 for w in tiles if w.start in model)
    assert watermark.highest == max(model.values(), default=None)
    # The earlier JSON of the same history reads as the same watermark.
    earlier = json.dumps({format_instant(s): to_millis(h) for s, h in model.items()})
    assert TimeWatermark.from_json(earlier) == watermark
    # Any split into two concurrent runs merges back to the whole.
    split = data.draw(st.sets(st.integers(0, max(0, len(runs) - 1))))
    left = TimeWatermark.empty().advance([r for i, r in enumerate(runs) if i in split])
    right = TimeWatermark.empty().advance([r for i, r in enumerate(runs) if i not in split])
    assert left.merge(right) == watermark
    # The tick decides as it did on the map: end after the cut-off, or no history.
    at = tiles.start + data.draw(st.integers(-2, 24 * 90)) * timedelta(hours=1)
    cut_off = CutOff(at, watermark.highest, 0, 0, tiles.start)
    decision = watermark.due(tiles, cut_off)
    assert list(decision.new) == [w for w in tiles if w.start not in model]
    assert list(decision.rerun) == [w for w in tiles if w.start in model and w.end > at]
