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
from datetime import date, datetime, timedelta
from typing import Any, Protocol

from watermark_assets.core.column.watermark import ColumnValue, ColumnWatermark, WatermarkOperator

#: The size of a chunk: a duration for datetime and date columns, a number for numeric ones.
ChunkStep = timedelta | int | float


class ReplayRange(Protocol):
    """What a replay replays: ``[start, end)`` of the leading watermark column, in the chunks
    :meth:`chunks` cuts, into ``target_table`` (None: the pipeline's own table), saving each
    chunk's upper bound or not (``save_watermark``, the table above). The configuration's
    ``replay:`` block is one (its ``chunk`` size cuts the range); a run of Dagster time
    partitions is another (:class:`PartitionsReplay`: one chunk per partition)."""

    @property
    def start(self) -> ColumnValue: ...

    @property
    def end(self) -> ColumnValue: ...

    @property
    def save_watermark(self) -> bool: ...

    @property
    def target_table(self) -> str | None: ...

    def chunks(self, column: str) -> list[ReplayChunk]:
        """The range's chunks over ``column``, in order."""
        ...


@dataclass(frozen=True)
class PartitionsReplay:
    """A replay of a run's time partitions into the pipeline's own table: ``windows``, one
    chunk per partition in order (each ``[start, end)`` as its partition defines it), from the
    first one's ``start`` to the last one's ``end``."""

    start: ColumnValue
    end: ColumnValue
    windows: tuple[ReplayChunk, ...]
    save_watermark: bool = False
    target_table: str | None = None

    def chunks(self, column: str) -> list[ReplayChunk]:
        return list(self.windows)


@dataclass(frozen=True)
class ReplayChunk:
    """Rows ``lower <= row < upper`` in the watermark order (closed at the start, open at the
    end), read with ``>=`` on ``lower``."""

    lower: ColumnWatermark
    upper: ColumnWatermark

    operator = WatermarkOperator.GREATER_OR_EQUAL

    @property
    def column(self) -> str:
        """The (leading) watermark column the chunk is a range of."""
        return self.lower.columns[0]

    @property
    def key(self) -> str:
        """The chunk as text, ``lower..upper`` (ISO 8601 for temporal values): names its txn."""
        return f"{_text(self.lower.values[0])}..{_text(self.upper.values[0])}"


def split_range(
    column: str, start: ColumnValue, end: ColumnValue, step: ChunkStep
) -> list[ReplayChunk]:
    """``[start, end)`` cut into consecutive closed-open chunks of ``step`` (the last one ends at
    ``end``, shorter when ``step`` does not divide the range). Every value of the range is in
    exactly one chunk: a row on a bound belongs to the chunk that starts there.

    ``step`` is a timedelta for datetime and date values (whole days for dates), a positive
    number for numeric ones. ValueError for an empty or reversed range, a step that is not
    positive, or one that does not fit the values' type.
    """
    _check_step(start, end, step)
    if not start < end:  # type: ignore[operator]
        raise ValueError(f"range [{start}, {end}) is empty or reversed; give start < end")
    chunks = []
    lower: Any = start
    while lower < end:
        upper: Any = min(lower + step, end)
        chunks.append(ReplayChunk(_bound(column, lower), _bound(column, upper)))
        lower = upper
    return chunks


def _text(value: ColumnValue | None) -> str:
    return value.isoformat() if isinstance(value, (datetime, date)) else str(value)


def _bound(column: str, value: ColumnValue) -> ColumnWatermark:
    return ColumnWatermark((column,), (value,))


def _check_step(start: ColumnValue, end: ColumnValue, step: ChunkStep) -> None:
    if type(start) is not type(end):
        raise ValueError(
            f"replay start {start!r} and end {end!r} differ in type; give both as "
            f"{type(start).__name__}"
        )
    if isinstance(start, (datetime, date)):
        if not isinstance(step, timedelta):
            raise ValueError(f"chunk {step!r}: a {type(start).__name__} range takes a duration")
        if not isinstance(start, datetime) and step % timedelta(days=1):
            raise ValueError(f"chunk {step}: a date range takes whole days")
        if step <= timedelta(0):
            raise ValueError(f"chunk {step}: give a positive duration")
        return
    if isinstance(start, (int, float)) and not isinstance(start, bool):
        if isinstance(step, (timedelta, bool)) or step <= 0:
            raise ValueError(f"chunk {step!r}: a numeric range takes a positive number (size)")
        return
    raise ValueError(
        f"replay start {start!r} ({type(start).__name__}): a range is of datetimes, dates or "
        "numbers"
    )


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
