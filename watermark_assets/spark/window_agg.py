"""Event-time window aggregates on Spark, as partial aggregates that merge across runs.

A run cannot aggregate a window in one go: its rows arrive over several runs until the watermark
closes it. So each run computes *partials* per group, unions them with the partials kept in the
state table for the windows still open, and merges them (``merge_partials``); a closed window's
partials are then *finalised* into the output row (``finalise``). The algebra:

=================  =====================  ===================  ==========================
aggregate          partial (one run)      merge                final
=================  =====================  ===================  ==========================
``count``          ``count(*)``           ``sum``              ``sum``
``sum(col)``       ``sum(col)``           ``sum``              ``sum``
``min(col)``       ``min(col)``           ``min``              ``min``
``max(col)``       ``max(col)``           ``max``              ``max``
``count_distinct   grouped by ``col``     (grouped by it)      ``count(col)`` over the
(col)``            too                                         groups of the window
=================  =====================  ===================  ==========================

Every state also keeps ``_partial__rows``, the rows of its group (summed when merged), so the
rows the open windows hold are known. At most one ``count_distinct`` per aggregate (its column
becomes part of the state's group key; two would need their cross product). Windows are
tumbling: ``window_start`` is the event time rounded down to ``origin + k * size`` (integer
milliseconds: ``pmod`` is right before the origin too), ``window_end = window_start + size``;
the interval is ``[start, end)``.

Everything here builds Spark plans; nothing is collected to the driver.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

WINDOW_START = "window_start"
WINDOW_END = "window_end"
#: The partial column of aggregate NAME in the state table.
PARTIAL_PREFIX = "_partial_"
#: The rows a group holds (every state has it: a batch read by event time proves with it that
#: every row appended since is accounted for, ``kinds/event_time/window.py``).
ROWS_PARTIAL = PARTIAL_PREFIX + "_rows"
#: The output's count of the upstream rows aggregated into a window (batch engine; null when a
#: partial from before the row counts fed it). Against it, a batch that re-reads the upstream by
#: event time finds the rows appended into windows already emitted
#: (``kinds/event_time/recover.py``).
ROWS_OUTPUT = "_rows"

_FUNCTIONS = ("count", "sum", "min", "max", "count_distinct")
_SPEC = re.compile(r"^\s*(count|sum|min|max|count_distinct)\s*(?:\(\s*([^()]*?)\s*\))?\s*$")


@dataclass(frozen=True)
class Aggregate:
    """One output column: ``name`` = ``function(column)`` (``count`` takes no column)."""

    name: str
    function: str
    column: str | None = None

    def __post_init__(self) -> None:
        if self.function not in _FUNCTIONS:
            raise ValueError(
                f"aggregate {self.name!r}: function {self.function!r} is not one of {_FUNCTIONS}"
            )
        if (self.function == "count") != (self.column is None):
            raise ValueError(
                f"aggregate {self.name!r}: 'count' takes no column and the others take one, "
                "e.g. count, sum(amount), count_distinct(user_id)"
            )

    @classmethod
    def parse(cls, name: str, text: str) -> Aggregate:
        """``count``, ``sum(amount)``, ``count_distinct(user_id)`` ..."""
        match = _SPEC.match(text)
        if match is None:
            raise ValueError(
                f"aggregate {name!r}: {text!r} is not count, sum(col), min(col), max(col) or "
                "count_distinct(col)"
            )
        function, column = match.group(1), match.group(2) or None
        return cls(name, function, column)

    @property
    def partial(self) -> str:
        return PARTIAL_PREFIX + self.name


def distinct_column(aggregates: Sequence[Aggregate]) -> str | None:
    """The column of the one ``count_distinct`` (part of the state's group key), or None."""
    columns = sorted({a.column for a in aggregates if a.function == "count_distinct" and a.column})
    if len(columns) > 1:
        raise ValueError(
            f"count_distinct over several columns {columns} is refused: the state would be "
            "their cross product; keep one count_distinct per aggregate"
        )
    return columns[0] if columns else None


def with_window(frame: DataFrame, event_column: str, size_ms: int, origin_ms: int) -> DataFrame:
    """``frame`` with ``window_start`` and ``window_end`` (timestamps) of each row's event time
    (null for a null event time)."""
    from pyspark.sql import functions as F

    millis = F.unix_millis(F.col(event_column))
    offset = millis - F.lit(origin_ms)
    start_ms = millis - F.pmod(offset, F.lit(size_ms))
    return frame.withColumn(WINDOW_START, F.timestamp_millis(start_ms)).withColumn(
        WINDOW_END, F.timestamp_millis(start_ms + F.lit(size_ms))
    )


def group_key(aggregates: Sequence[Aggregate]) -> list[str]:
    distinct = distinct_column(aggregates)
    return [WINDOW_START] if distinct is None else [WINDOW_START, distinct]


def partials(frame: DataFrame, aggregates: Sequence[Aggregate]) -> DataFrame:
    """One run's partial aggregates per group (``window_start`` [, the distinct column])."""
    from pyspark.sql import functions as F

    columns: list[Column] = []
    for a in aggregates:
        if a.function == "count":
            columns.append(F.count(F.lit(1)).alias(a.partial))
        elif a.function in ("sum", "min", "max"):
            columns.append(getattr(F, a.function)(F.col(str(a.column))).alias(a.partial))
    columns.append(F.count(F.lit(1)).alias(ROWS_PARTIAL))
    return frame.groupBy(*group_key(aggregates)).agg(*columns)


def merge_partials(frame: DataFrame, aggregates: Sequence[Aggregate]) -> DataFrame:
    """Partials of the same group (from the state and from this run) merged into one row."""
    from pyspark.sql import functions as F

    columns: list[Column] = []
    for a in aggregates:
        if a.function in ("count", "sum"):
            columns.append(F.sum(a.partial).alias(a.partial))
        elif a.function in ("min", "max"):
            columns.append(getattr(F, a.function)(a.partial).alias(a.partial))
    columns.append(F.sum(ROWS_PARTIAL).alias(ROWS_PARTIAL))
    return frame.groupBy(*group_key(aggregates)).agg(*columns)


def finalise(frame: DataFrame, aggregates: Sequence[Aggregate], size_ms: int) -> DataFrame:
    """One output row per window: ``window_start``, ``window_end``, the aggregates and
    ``_rows`` (the rows aggregated; null if a partial did not count them). The writer sorts them
    into one file: the output is append-only and ordered by window."""
    from pyspark.sql import functions as F

    columns: list[Column] = []
    for a in aggregates:
        if a.function in ("count", "sum"):
            columns.append(F.sum(a.partial).alias(a.name))
        elif a.function in ("min", "max"):
            columns.append(getattr(F, a.function)(a.partial).alias(a.name))
        else:
            columns.append(F.count(F.col(str(a.column))).alias(a.name))
    uncounted = F.count(F.when(F.col(ROWS_PARTIAL).isNull(), 1))
    columns.append(F.when(uncounted == 0, F.sum(ROWS_PARTIAL)).alias(ROWS_OUTPUT))
    end = F.timestamp_millis(F.unix_millis(F.col(WINDOW_START)) + F.lit(size_ms))
    return (
        frame.groupBy(WINDOW_START)
        .agg(*columns)
        .withColumn(WINDOW_END, end)
        .select(WINDOW_START, WINDOW_END, *[a.name for a in aggregates], ROWS_OUTPUT)
    )


#: The columns a late record carries besides its own (both engines' late tables).
LATE_REASON, LATE_WATERMARK, LATE_RUN, LATE_BATCH = (
    "_late_reason",
    "_late_watermark",
    "_late_run_id",
    "_late_batch",
)


def late_condition(event_column: str, closed_through_ms: int | None) -> Column:
    """A row is late: a null event time, or a window ending at or before ``closed_through_ms``
    (None: no watermark yet, so only the null ones). The frame has :func:`with_window`'s
    columns."""
    from pyspark.sql import functions as F

    null = F.col(event_column).isNull()
    if closed_through_ms is None:
        return null
    return null | (F.unix_millis(F.col(WINDOW_END)) <= F.lit(closed_through_ms))


def late_records(
    framed: DataFrame,
    late: Column,
    *,
    event_column: str,
    watermark_ms: int,
    run_id: str,
    batch: int,
) -> DataFrame:
    """The ``late`` rows of ``framed`` as late records: their own columns, the reason (a null
    event time, or the window the watermark ``watermark_ms`` had closed), that watermark, the run
    and the batch. A row that already carries a reason and a watermark (a row found by a batch
    read by event time, ``kinds/event_time/recover.py``) keeps them."""
    from pyspark.sql import functions as F

    reason = late_reason(F.col(event_column), F.col(WINDOW_END), watermark_ms)
    watermark = F.timestamp_millis(F.lit(watermark_ms))
    if LATE_REASON in framed.columns:
        reason = F.coalesce(F.col(LATE_REASON), reason)
        watermark = F.coalesce(F.col(LATE_WATERMARK), watermark)
    return (
        framed.where(late)
        .withColumn(LATE_REASON, reason)
        .withColumn(LATE_WATERMARK, watermark)
        .withColumn(LATE_RUN, F.lit(run_id))
        .withColumn(LATE_BATCH, F.lit(batch).cast("long"))
        .drop(WINDOW_START, WINDOW_END)
    )


def late_reason(event_time: Column, window_end: Column, watermark_ms: int) -> Column:
    """Why a row is late: ``null event time``, or ``window ending <end> was closed by the
    watermark <watermark>``."""
    from pyspark.sql import functions as F

    from watermark_assets.core.time.instant import format_millis

    return F.when(event_time.isNull(), F.lit("null event time")).otherwise(
        F.concat(
            F.lit("window ending "),
            F.date_format(window_end, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"),
            F.lit(f" was closed by the watermark {format_millis(watermark_ms)}"),
        )
    )
