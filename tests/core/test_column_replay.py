"""Seed 001, "Replay watermark behaviour": the save_watermark table, verbatim."""

from __future__ import annotations

import pytest

from watermark_assets.core.column.replay import ReplayChunk, chunks_to_run, watermark_to_save
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
