"""Seed 001, "Replay watermark behaviour": the save_watermark table, verbatim."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from itertools import pairwise

import pytest

from watermark_assets.core.column.replay import (
    ReplayChunk,
    chunks_to_run,
    split_range,
    watermark_to_save,
)
from watermark_assets.core.column.watermark import ColumnWatermark, GreaterOrEqual


def wm(day: int) -> ColumnWatermark:
    return ColumnWatermark.from_json(f'{{"d": {{"__date__": "2026-01-{day:02d}"}}}}')


CHUNKS = [ReplayChunk(wm(1 + 5 * i), wm(6 + 5 * i)) for i in range(4)]


@pytest.mark.parametrize(
    ("save_watermark", "saved", "run_after_crash_in_chunk_3"),
    [
        pytest.param(
            False,
            [None] * 4,
            CHUNKS,
            id="False (default): production watermark is never touched",
        ),
        pytest.param(
            True,
            [c.upper for c in CHUNKS],
            CHUNKS[2:],
            id="True: chunk upper bound is saved after each successful chunk (crash-resume)",
        ),
    ],
)
def test_save_watermark_table(
    save_watermark: bool,
    saved: list[ColumnWatermark | None],
    run_after_crash_in_chunk_3: list[ReplayChunk],
) -> None:
    assert [watermark_to_save(c, save_watermark=save_watermark) for c in CHUNKS] == saved
    # chunks 1-2 committed (and, with save_watermark, saved), then a crash in chunk 3
    stored = CHUNKS[1].upper if save_watermark else None
    assert (
        chunks_to_run(CHUNKS, stored, save_watermark=save_watermark) == run_after_crash_in_chunk_3
    )


def test_a_replay_chunk_reads_its_lower_bound_inclusively() -> None:
    assert CHUNKS[0].operator is GreaterOrEqual


def test_a_range_is_cut_into_consecutive_closed_open_chunks() -> None:
    start = datetime(2026, 4, 3, tzinfo=timezone.utc)
    chunks = split_range("u", start, start + timedelta(hours=5), timedelta(hours=2))
    bounds = [(c.lower.values[0], c.upper.values[0]) for c in chunks]
    hours = [start + timedelta(hours=h) for h in (0, 2, 4, 5)]
    assert bounds == list(pairwise(hours)), "the last chunk ends at the range's end"
    assert chunks[0].key == "2026-04-03T00:00:00+00:00..2026-04-03T02:00:00+00:00"


def test_numbers_and_dates_are_chunked_too() -> None:
    assert [c.key for c in split_range("id", 0, 25, 10)] == ["0..10", "10..20", "20..25"]
    days = split_range("d", date(2026, 1, 1), date(2026, 1, 3), timedelta(days=1))
    assert [c.key for c in days] == ["2026-01-01..2026-01-02", "2026-01-02..2026-01-03"]


@pytest.mark.parametrize(
    ("start", "end", "step", "message"),
    [
        (5, 5, 1, "empty or reversed"),
        (9, 5, 1, "empty or reversed"),
        (0, 5, 0, "positive number"),
        (0, 5, timedelta(days=1), "positive number"),
        (date(2026, 1, 1), date(2026, 1, 3), timedelta(hours=12), "whole days"),
        (date(2026, 1, 1), date(2026, 1, 3), 1, "takes a duration"),
        (date(2026, 1, 1), 5, 1, "differ in type"),
        ("a", "b", 1, "datetimes, dates or numbers"),
    ],
)
def test_a_bad_range_is_refused(start: object, end: object, step: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        split_range("c", start, end, step)  # type: ignore[arg-type]
