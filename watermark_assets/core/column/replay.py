"""Replay over chunks of a range: which chunks run, and which watermark each one saves (seed 001).

=================  ===================================================================
``save_watermark`` behaviour
=================  ===================================================================
False (default)    the production watermark is never touched: safe for a backfill into a
                   new table; every chunk runs
True               each chunk's upper bound is saved after its commit: a re-run skips the
                   chunks the stored watermark already covers (crash-resume)
=================  ===================================================================

Chunks are read with ``>=`` on their lower bound (:data:`~.watermark.GreaterOrEqual`).
Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from watermark_assets.core.column.watermark import ColumnWatermark, WatermarkOperator


@dataclass(frozen=True)
class ReplayChunk:
    """Rows ``lower <= row < upper`` in the watermark order (closed at the start, open at the
    end), read with ``>=`` on ``lower``."""

    lower: ColumnWatermark
    upper: ColumnWatermark

    operator = WatermarkOperator.GREATER_OR_EQUAL


def chunks_to_run(
    chunks: Iterable[ReplayChunk], stored: ColumnWatermark | None, *, save_watermark: bool
) -> list[ReplayChunk]:
    """The chunks a replay runs: all of them, unless ``save_watermark`` and the stored
    watermark already covers a chunk's upper bound (that chunk completed before)."""
    chunks = list(chunks)
    if not save_watermark or stored is None or stored.is_empty:
        return chunks
    return [chunk for chunk in chunks if not stored.covers(chunk.upper)]


def watermark_to_save(chunk: ReplayChunk, *, save_watermark: bool) -> ColumnWatermark | None:
    """What to save after ``chunk`` committed: its upper bound, or nothing (None) by default."""
    return chunk.upper if save_watermark else None
