"""Kind "event_time" (seeds 002 and 004, issue 9): the pure core, as specifications.

Seed 004's rules are quoted where a case checks them; seed 002's scale-in example is verbatim.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watermark_assets.core import watermark_kind
from watermark_assets.core.errors import WatermarkJSONError
from watermark_assets.core.event_time import (
    EventTimeStats,
    EventTimeWatermark,
    EventWindow,
    InputMark,
    LocalWatermarks,
    SortBuffer,
    TumblingWindows,
    WatermarkMerger,
    WatermarkPolicy,
    WatermarkTracker,
    format_duration_ms,
    is_late_record,
    parse_duration_ms,
)
from watermark_assets.core.time.instant import parse_millis

MIN = 60_000  # one minute in ms
T0 = parse_millis("2024-01-30T12:00:00.000Z")
assert T0 is not None


def at(minutes: float) -> int:
    """T0 + ``minutes``, in ms."""
    return T0 + int(minutes * MIN)


def stats(*minutes: float) -> EventTimeStats:
    return EventTimeStats.of(at(m) for m in minutes)


# --- seed 004: max(event time) - delay, min/max policy, "populate 0", only forward ---


ONE_INPUT = WatermarkTracker(delays_ms={"events": 10 * MIN})

ONE_INPUT_RUNS = {
    # id: (event times of each run in minutes after T0, the global watermark after each run)
    "MAX(eventTime) - delayThreshold": ([[0, 3, 25]], [at(15)]),
    "an older batch does not move it back": ([[0, 25], [1, 2]], [at(15), at(15)]),
    "a later batch moves it forward": ([[25], [40]], [at(15), at(30)]),
    "a run without rows keeps it": ([[25], []], [at(15), at(15)]),
    "no data yet: 0, the epoch": ([[]], [0]),
}


@pytest.mark.parametrize("runs, expected", ONE_INPUT_RUNS.values(), ids=ONE_INPUT_RUNS.keys())
def test_one_input_watermark_is_max_event_time_minus_delay_and_only_moves_forward(
    runs: list[list[float]], expected: list[int]
) -> None:
    watermark = EventTimeWatermark.empty()
    seen = []
    for now, minutes in enumerate(runs):
        watermark = ONE_INPUT.observe(watermark, {"events": stats(*minutes)}, now_ms=at(60 + now))
        seen.append(watermark.watermark_ms)
    assert seen == expected


TWO_INPUTS = {"clicks": 10 * MIN, "views": 5 * MIN}

POLICY_CASES = {
    # id: (policy, clicks' event times, views' event times, global watermark)
    "min: the slower input decides": ("min", [30], [20], at(15)),
    "max: the faster input decides": ("max", [30], [20], at(20)),
    "min: an input without data counts 0": ("min", [30], [], 0),
    "max: an input without data counts 0 and loses": ("max", [30], [], at(20)),
}


@pytest.mark.parametrize(
    "policy, clicks, views, expected", POLICY_CASES.values(), ids=POLICY_CASES.keys()
)
def test_several_inputs_are_combined_by_the_policy(
    policy: str, clicks: list[float], views: list[float], expected: int
) -> None:
    tracker = WatermarkTracker(delays_ms=TWO_INPUTS, policy=WatermarkPolicy(policy))
    batch = {"clicks": stats(*clicks), "views": stats(*views)}
    after = tracker.observe(EventTimeWatermark.empty(), batch, now_ms=at(60))
    assert after.watermark_ms == expected
    assert after.mark("clicks").watermark_ms == at(clicks[0] - 10)


def test_the_global_watermark_moves_only_when_the_policys_choice_is_greater() -> None:
    """'if (chosenGlobalWatermark > globalWatermarkMs) ... else "didn't move"'."""
    tracker = WatermarkTracker(delays_ms=TWO_INPUTS, policy=WatermarkPolicy.MAX)
    first = tracker.observe(
        EventTimeWatermark.empty(), {"clicks": stats(30), "views": stats(50)}, at(60)
    )
    assert first.watermark_ms == at(45)
    # clicks moves ahead but stays below the max: the global watermark stays
    second = tracker.observe(first, {"clicks": stats(40)}, at(61))
    assert second.watermark_ms == at(45)
    assert second.mark("clicks").watermark_ms == at(30)
    assert "stays at 2024-01-30T12:45:00Z" in tracker.explain(first, second, at(61))


def test_the_tick_text_names_each_input_and_the_policy() -> None:
    tracker = WatermarkTracker(delays_ms=TWO_INPUTS)
    before = EventTimeWatermark.empty()
    after = tracker.observe(before, {"clicks": stats(30), "views": stats(20)}, at(60))
    assert tracker.explain(before, after, at(60)) == (
        "watermark 1970-01-01T00:00:00Z -> 2024-01-30T12:15:00Z (min of clicks "
        "2024-01-30T12:20:00Z, views 2024-01-30T12:15:00Z)"
    )


# --- idle inputs (Flink's withIdleness; Spark has none) ---


def test_an_idle_input_is_left_out_of_the_min_and_counts_again_with_data() -> None:
    tracker = WatermarkTracker(delays_ms=TWO_INPUTS, idle_timeout_ms=30 * MIN)
    w = tracker.observe(
        EventTimeWatermark.empty(), {"clicks": stats(30), "views": stats(20)}, at(60)
    )
    assert w.watermark_ms == at(15)  # min(20, 15)
    w = tracker.observe(w, {"clicks": stats(80)}, at(80))  # views quiet for 20 min: not idle
    assert w.watermark_ms == at(15)
    w = tracker.observe(w, {"clicks": stats(100)}, at(100))  # views quiet for 40 min: idle
    assert w.watermark_ms == at(90)
    assert "views 2024-01-30T12:15:00Z (idle, left out)" in tracker.explain(w, w, at(100))
    # views has rows again: it counts again, but the watermark never goes back
    w = tracker.observe(w, {"views": stats(70)}, at(101))
    assert w.watermark_ms == at(90)
    w = tracker.observe(w, {"views": stats(120), "clicks": stats(130)}, at(102))
    assert w.watermark_ms == at(115)  # min(120, 115) again


def test_an_input_that_never_had_rows_is_idle_once_the_timeout_passed_since_the_first_run() -> None:
    tracker = WatermarkTracker(delays_ms=TWO_INPUTS, idle_timeout_ms=30 * MIN)
    w = tracker.observe(EventTimeWatermark.empty(), {"clicks": stats(30)}, at(60))
    assert w.watermark_ms == 0  # views counts 0, as in Spark
    w = tracker.observe(w, {"clicks": stats(50)}, at(95))
    assert w.watermark_ms == at(40)  # 35 min since the first run: views is idle


def test_every_input_idle_keeps_the_watermark() -> None:
    tracker = WatermarkTracker(delays_ms=TWO_INPUTS, idle_timeout_ms=MIN)
    w = tracker.observe(
        EventTimeWatermark.empty(), {"clicks": stats(30), "views": stats(20)}, at(60)
    )
    assert tracker.observe(w, {}, at(600)).watermark_ms == w.watermark_ms


# --- the value: JSON, merge laws, never backwards ---


def test_json_is_readable_and_round_trips() -> None:
    w = ONE_INPUT.observe(EventTimeWatermark.empty(), {"events": stats(25)}, at(60))
    assert w.to_json() == (
        '{"watermark":"2024-01-30T12:15:00.000Z","inputs":{"events":{"watermark":'
        '"2024-01-30T12:15:00.000Z","max_event_time":"2024-01-30T12:25:00.000Z",'
        '"last_data_at":"2024-01-30T13:00:00.000Z"}},"started_at":"2024-01-30T13:00:00.000Z"}'
    )
    assert watermark_kind("event_time").from_json(w.to_json()) == w
    assert EventTimeWatermark.empty().is_empty and not w.is_empty


@pytest.mark.parametrize(
    "text",
    ["[]", '{"watermark": "yesterday", "inputs": {}, "started_at": null}', '{"watermark": 0}'],
    ids=["not an object", "not an instant", "missing keys"],
)
def test_bad_json_is_refused_with_the_expected_shape(text: str) -> None:
    with pytest.raises(WatermarkJSONError):
        EventTimeWatermark.from_json(text)


millis = st.integers(min_value=0, max_value=4_000_000_000_000)
marks = st.builds(
    lambda w, e, d, local: InputMark(
        watermark_ms=w,
        max_event_ms=e,
        last_data_ms=d,
        local=LocalWatermarks(local or {}),
        partitioning=None if local is None else ("d",),
    ),
    st.none() | millis,
    st.none() | millis,
    st.none() | millis,
    # local watermarks under one partitioning (merge is associative there; two: see below)
    st.none() | st.dictionaries(st.sampled_from(["d=1", "d=2", "d=3"]), millis),
)
watermarks = st.builds(
    EventTimeWatermark,
    watermark_ms=millis,
    inputs=st.dictionaries(st.sampled_from(["a", "b", "c"]), marks),
    started_ms=st.none() | millis,
)


@given(watermarks, watermarks, watermarks)
def test_merge_is_commutative_associative_and_idempotent(
    a: EventTimeWatermark, b: EventTimeWatermark, c: EventTimeWatermark
) -> None:
    assert a.merge(b) == b.merge(a)
    assert a.merge(b).merge(c) == a.merge(b.merge(c))
    assert a.merge(a) == a


@given(watermarks)
def test_json_round_trips(w: EventTimeWatermark) -> None:
    assert EventTimeWatermark.from_json(w.to_json()) == w


batches = st.dictionaries(
    st.sampled_from(["clicks", "views"]),
    st.lists(st.integers(0, 500), max_size=5).map(lambda ms: stats(*ms)),
)


@given(
    st.lists(batches, min_size=1, max_size=6),
    st.sampled_from(list(WatermarkPolicy)),
    st.none() | st.integers(1, 60).map(lambda m: m * MIN),
)
def test_observe_never_moves_anything_backwards(
    runs: list[dict[str, EventTimeStats]], policy: WatermarkPolicy, idle: int | None
) -> None:
    tracker = WatermarkTracker(delays_ms=TWO_INPUTS, policy=policy, idle_timeout_ms=idle)
    w = EventTimeWatermark.empty()
    for now, batch in enumerate(runs):
        after = tracker.observe(w, batch, at(1000 + 10 * now))
        assert after.watermark_ms >= w.watermark_ms
        for name in TWO_INPUTS:
            old, new = w.mark(name).watermark_ms, after.mark(name).watermark_ms
            assert old is None or (new is not None and new >= old)
        w = after


# --- local watermarks per partition of an input, rescaled when the partitioning changes ---


def local_stats(delay_free: dict[str, int], partitioning: tuple[str, ...]) -> EventTimeStats:
    """A run's stats with the greatest event time of each partition (count: one per partition)."""
    return EventTimeStats(
        count=len(delay_free),
        min_ms=min(delay_free.values()),
        max_ms=max(delay_free.values()),
        local_max_ms=delay_free,
        partitioning=partitioning,
    )


DAY = ("event_date",)
HOUR = ("event_date", "event_hour")
LOCAL_RUNS = {
    "one partitioning: each partition at its max - delay, never backwards": (
        [
            {"event_date=30": 50 * MIN, "event_date=31": 80 * MIN},
            {"event_date=30": 20 * MIN},  # an older max for the 30th: it stays
        ],
        [DAY, DAY],
        {"event_date=30": 40 * MIN, "event_date=31": 70 * MIN},
    ),
    "split (daily -> hourly): every new partition starts at the max of the old ones": (
        [
            {"event_date=30": 50 * MIN, "event_date=31": 80 * MIN},
            {"event_date=31/event_hour=01": 30 * MIN, "event_date=31/event_hour=02": 95 * MIN},
        ],
        [DAY, HOUR],
        {"event_date=31/event_hour=01": 70 * MIN, "event_date=31/event_hour=02": 85 * MIN},
    ),
    "merge (hourly -> daily): the new partition starts at the max of the old ones": (
        [
            {"event_date=31/event_hour=01": 30 * MIN, "event_date=31/event_hour=02": 95 * MIN},
            {"event_date=31": 40 * MIN},
        ],
        [HOUR, DAY],
        {"event_date=31": 85 * MIN},
    ),
}


@pytest.mark.parametrize(
    "runs, partitionings, expected", LOCAL_RUNS.values(), ids=LOCAL_RUNS.keys()
)
def test_local_watermarks_are_kept_per_partition_and_rescaled_to_the_max_of_the_old_ones(
    runs: list[dict[str, int]],
    partitionings: list[tuple[str, ...]],
    expected: dict[str, int],
) -> None:
    w = EventTimeWatermark.empty()
    for now, (run, partitioning) in enumerate(zip(runs, partitionings)):
        before = w.mark("events").watermark_ms
        w = ONE_INPUT.observe(w, {"events": local_stats(run, partitioning)}, at(1000 + now))
        mark = w.mark("events")
        assert mark.partitioning == partitioning
        assert before is None or min(mark.local.values()) >= min(before, *mark.local.values())
        assert mark.watermark_ms == max(mark.local.values()), "the input's is the max of its own"
    assert dict(w.mark("events").local) == expected
    assert EventTimeWatermark.from_json(w.to_json()) == w


def test_marks_under_two_partitionings_merge_to_the_latest_one_raised_to_the_others_max() -> None:
    old = InputMark(
        watermark_ms=80, last_data_ms=1, local=LocalWatermarks({"d=1": 80}), partitioning=("d",)
    )
    new = InputMark(
        watermark_ms=90,
        last_data_ms=2,
        local=LocalWatermarks({"d=1/h=1": 60, "d=1/h=2": 90}),
        partitioning=("d", "h"),
    )
    merged = old.merge(new)
    assert merged == new.merge(old)
    assert merged.partitioning == ("d", "h")
    assert dict(merged.local) == {"d=1/h=1": 80, "d=1/h=2": 90}


def test_a_watermark_written_before_local_watermarks_still_reads() -> None:
    text = (
        '{"watermark":"2024-01-30T12:00:00.000Z","inputs":{"events":{"watermark":'
        '"2024-01-30T12:00:00.000Z","max_event_time":"2024-01-30T12:10:00.000Z",'
        '"last_data_at":null}},"started_at":null}'
    )
    mark = EventTimeWatermark.from_json(text).mark("events")
    assert (mark.partitioning, dict(mark.local)) == (None, {})


# --- windows: closed when the watermark passes their end; late records ---


WINDOWS = TumblingWindows(size_ms=5 * MIN)

WINDOW_CASES = {
    # id: (event minute, watermark minute, lateness minutes, late?)
    "in an open window": (12, 10, 0, False),
    "in the window the watermark just closed (end == watermark)": (7, 10, 0, True),
    "in an older window": (1, 10, 0, True),
    "an allowed lateness keeps the window open": (7, 10, 5, False),
    "on a window's start, the window still open": (10, 10, 0, False),
}


@pytest.mark.parametrize(
    "event, watermark, lateness, late", WINDOW_CASES.values(), ids=WINDOW_CASES.keys()
)
def test_a_record_is_late_when_its_window_was_closed_by_the_watermark(
    event: float, watermark: float, lateness: float, late: bool
) -> None:
    assert WINDOWS.is_late(at(event), at(watermark), int(lateness * MIN)) is late


def test_windows_are_closed_open_and_aligned_on_the_epoch() -> None:
    window = WINDOWS.window_of(at(7.5))
    assert window == EventWindow(at(5), at(10))
    assert str(window) == "[2024-01-30T12:05:00Z, 2024-01-30T12:10:00Z)"
    assert window.contains(at(5)) and not window.contains(at(10))
    assert not window.is_closed(at(9.99)) and window.is_closed(at(10))
    assert TumblingWindows(size_ms=10).window_of(-1) == EventWindow(-10, 0)


def test_seed_002_watermark_filter_drops_records_older_than_watermark_minus_timeout() -> None:
    assert is_late_record(at(4), at(10), timeout_ms=5 * MIN)
    assert not is_late_record(at(5), at(10), timeout_ms=5 * MIN)


@pytest.mark.parametrize(
    "make",
    [
        lambda: TumblingWindows(size_ms=0),
        lambda: WINDOWS.is_late(0, 0, -1),
        lambda: WatermarkTracker(delays_ms={}),
        lambda: WatermarkTracker(delays_ms={"a": -1}),
        lambda: EventTimeStats(count=1),
    ],
    ids=["an empty window", "a negative lateness", "no input", "a negative delay", "bad stats"],
)
def test_bad_settings_are_refused(make: Any) -> None:
    with pytest.raises(ValueError):
        make()


# --- seed 002: rescaling, the merger, the sort ---


def test_seed_002_scale_in_takes_the_max_of_the_old_watermarks() -> None:
    """'the partition of one parallel unit (to be removed) with watermark 5 is split and merged
    into a parallel unit with watermark 3. Then we must treat the watermark of this new
    partition as max(3, 5) = 5'."""
    before = LocalWatermarks({"unit-1": 3, "unit-2": 5})
    assert before.rescale(["unit-1"]) == {"unit-1": 5}
    assert before.rescale(["p0", "p1", "p2"]) == {"p0": 5, "p1": 5, "p2": 5}  # scale-out
    assert LocalWatermarks().rescale(["p0"]) == {}
    assert before.advance("unit-1", 2) == before  # never backwards
    assert before.advance("unit-1", 4)["unit-1"] == 4


@given(st.dictionaries(st.text(min_size=1, max_size=3), st.integers(0, 100), min_size=1))
def test_after_rescaling_no_partition_is_below_a_watermark_already_emitted(
    old: dict[str, int],
) -> None:
    emitted = max(old.values())  # the global watermark downstream is at most the max
    for partitions in (["x"], ["x", "y", "z"], list(old)):
        assert all(v >= emitted for v in LocalWatermarks(old).rescale(partitions).values())


def test_seed_002_merger_emits_the_min_only_once_every_input_reported() -> None:
    merger = WatermarkMerger(["a", "b"])
    assert merger.receive("a", 5) == []  # b has not reported: nothing is known
    assert merger.receive("a", 7) == []
    assert merger.receive("b", 6) == [5, 6]  # min 5 (a's 5 cleaned up), then min 6
    assert merger.pending() == {"a": (7,), "b": ()}
    assert merger.receive("b", 9) == [7]
    merger.add_input("c")  # scaling: a new upstream holds the output until it reports
    assert merger.receive("a", 12) == []
    assert merger.receive("c", 10) == [9]


@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 20)), max_size=30))
def test_the_merger_output_never_goes_backwards_and_never_passes_an_input(
    messages: list[tuple[str, int]],
) -> None:
    merger = WatermarkMerger(["a", "b", "c"])
    latest: dict[str, int] = {}
    out: list[int] = []
    for name, value in messages:
        value = max(value, latest.get(name, value))  # an input's watermarks are monotone
        latest[name] = value
        out += merger.receive(name, value)
        if out:
            assert set(latest) == {"a", "b", "c"}
            assert out[-1] <= min(latest.values())
    assert out == sorted(set(out))


def test_seed_002_sort_drains_buffered_rows_in_order_up_to_the_watermark() -> None:
    buffer = SortBuffer()
    for event, key in [(7, "x"), (3, "b"), (3, "a"), (12, "y")]:
        buffer.add(event, key, f"{key}@{event}")
    assert buffer.drain(5) == ["a@3", "b@3"]
    assert buffer.drain(10) == ["x@7"]
    assert len(buffer) == 1
    with pytest.raises(ValueError, match="late"):
        buffer.add(9, "z", "z@9")
    buffer.add(11, "w", "w@11")
    assert buffer.drain(20) == ["w@11", "y@12"]


# --- durations as Spark writes them ---

DURATIONS = {
    "10 minutes": 600_000,
    "1 minute": 60_000,
    "30 seconds": 30_000,
    "1 hour": 3_600_000,
    "2 Days": 172_800_000,
    "500 milliseconds": 500,
    "0": 0,
}


@pytest.mark.parametrize("text, millis", DURATIONS.items(), ids=DURATIONS.keys())
def test_durations_are_read_as_spark_writes_them(text: str, millis: int) -> None:
    assert parse_duration_ms(text) == millis


@pytest.mark.parametrize("text", ["ten minutes", "10", "1.5 hours", "10 fortnights", "-1 day"])
def test_a_bad_duration_is_refused_with_the_accepted_form(text: str) -> None:
    with pytest.raises(ValueError, match="'10 minutes'"):
        parse_duration_ms(text)


def test_durations_are_written_in_their_largest_unit() -> None:
    assert [format_duration_ms(m) for m in (600_000, 3_600_000, 90_000, 0)] == [
        "10 minutes",
        "1 hour",
        "90 seconds",
        "0",
    ]
