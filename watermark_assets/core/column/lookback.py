"""Backward look-back and safety lag: how far behind the watermark a read starts (pure math).

Seed 001 ("Backward look-back") reads offsets from the source's configuration::

    backward_days: 7
    # or nested:
    backward:
      days: 7
      months: 1
      closing_day: 25

for sources that correct historical rows: a window behind the watermark is read again. The seed
names the keys only; their meaning here:

- ``days``, ``months``: the read starts ``months`` calendar months and ``days`` days before the
  watermark's leading column (months first; the 31st minus one month is the last day of the shorter
  month);
- ``closing_day: D`` (with ``months``): accounting months. A month stays open for corrections until
  day ``D`` of the following month; an open month is re-read from its first day, a closed month is
  never re-read. So the start is the first day of the month the offsets reach, but not earlier than
  the first day of the oldest month still open at ``now``. Example: watermark 2026-04-03,
  ``months: 1, closing_day: 25``: on 2026-04-10 March is still open, the read starts 2026-03-01;
  on 2026-04-26 March has closed, the read starts 2026-04-01.
- ``lag`` (optional safety lag, a ``timedelta``): rows that a database commits late carry an older
  timestamp than rows already read (a long transaction); re-reading the last ``lag`` finds them.

The look-back never starts *after* the watermark. With a look-back the bound is only the leading
column, inclusive (``updated_at >= start``): the tie-break columns of the watermark say nothing
about rows of an earlier timestamp. Rows read again this way must be merged on keys or replaced as a
window by the destination (issue 7 section 4); they never advance the watermark by themselves
(:meth:`~.watermark.ColumnWatermark.advance` takes the maximum).

``now`` is passed in (one clock, frozen in tests). Standard library only.
"""

from __future__ import annotations

import calendar
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any

from watermark_assets.core.column.watermark import ColumnWatermark, WatermarkOperator
from watermark_assets.core.errors import LookbackError


@dataclass(frozen=True, kw_only=True)
class Backward:
    """A look-back window: ``days``, ``months`` and the accounting ``closing_day`` (module doc)."""

    days: int = 0
    months: int = 0
    closing_day: int | None = None

    def __post_init__(self) -> None:
        for name in ("days", "months"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise LookbackError(
                    f"backward.{name} is {value!r}; expected a whole number >= 0", value=value
                )
        day = self.closing_day
        if day is not None and (
            isinstance(day, bool) or not isinstance(day, int) or not 1 <= day <= 28
        ):
            raise LookbackError(
                f"backward.closing_day is {day!r}; expected a day of the month from 1 to 28 (every "
                "month has it)",
                value=day,
            )

    @property
    def is_zero(self) -> bool:
        return self.days == 0 and self.months == 0 and self.closing_day is None

    @classmethod
    def from_configure(cls, configure: Mapping[str, Any]) -> Backward:
        """Read the seed's ``backward_days: N`` or nested ``backward: {days, months,
        closing_day}`` (both at once is refused: which one wins would be a guess)."""
        flat = configure.get("backward_days")
        nested = configure.get("backward")
        if flat is not None and nested is not None:
            raise LookbackError(
                "both backward_days and backward are set; keep one (backward: {days: N} is the "
                "same as backward_days: N)",
                value={"backward_days": flat, "backward": nested},
            )
        if nested is not None:
            if not isinstance(nested, Mapping) or set(nested) - {"days", "months", "closing_day"}:
                raise LookbackError(
                    f"backward is {nested!r}; expected an object with days, months, closing_day",
                    value=nested,
                )
            return cls(**dict(nested))
        return cls(days=0 if flat is None else flat)


@dataclass(frozen=True)
class ReadBound:
    """Where a read starts: rows ``operator`` ``watermark`` (render with ``predicate``)."""

    watermark: ColumnWatermark
    operator: WatermarkOperator


def effective_lower_bound(
    watermark: ColumnWatermark,
    backward: Backward,
    now: datetime,
    *,
    operator: WatermarkOperator = WatermarkOperator.GREATER_THAN,
    lag: timedelta | None = None,
) -> ReadBound:
    """The bound a read uses: the watermark itself, or a start behind it (module docstring).

    No look-back and no lag (or an empty watermark): ``(watermark, operator)`` unchanged. Otherwise
    ``(leading column >= start)`` where ``start`` is the earliest of the backward start and
    ``watermark - lag``, and never after the watermark. The leading column must be a date or a
    datetime (LookbackError otherwise). ``now`` must be aware (its UTC calendar day decides which
    months are closed).
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise LookbackError(f"now {now!r} has no time zone; pass an aware datetime", value=now)
    lag = lag or timedelta(0)
    if lag < timedelta(0):
        raise LookbackError(f"lag {lag!r} is negative; expected a duration >= 0", value=lag)
    if watermark.is_empty or (backward.is_zero and not lag):
        return ReadBound(watermark, operator)
    column, current = watermark.columns[0], watermark.values[0]
    if not isinstance(current, date):
        raise LookbackError(
            f"a look-back needs a date or datetime leading watermark column; {column!r} holds "
            f"{current!r}. Put the timestamp column first in watermark_columns, or drop "
            "backward and lag",
            value=current,
        )
    today = now.astimezone(timezone.utc).date()
    start = _backward_start(current, backward, today)
    if lag:
        lagged = current - lag  # a date column moves by whole days (date - timedelta)
        start = min(start, lagged)
    start = min(start, current)
    return ReadBound(ColumnWatermark((column,), (start,)), WatermarkOperator.GREATER_OR_EQUAL)


def _backward_start(current: date, backward: Backward, today: date) -> date:
    start = _minus_months(current, backward.months) - timedelta(days=backward.days)
    if backward.closing_day is None:
        return start
    first = _first_of_month(start)
    # The oldest month still open today: last month until its closing day, else this month.
    open_from = _first_of_month(
        _minus_months(today, 1) if today.day < backward.closing_day else today
    )
    bound = max(first.toordinal(), open_from.toordinal())
    result = date.fromordinal(bound)
    if isinstance(current, datetime):
        return datetime.combine(result, datetime.min.time(), tzinfo=current.tzinfo)
    return result


def _minus_months(value: date, months: int) -> date:
    index = value.year * 12 + value.month - 1 - months
    year, month = divmod(index, 12)
    day = min(value.day, calendar.monthrange(year, month + 1)[1])
    return value.replace(year=year, month=month + 1, day=day)


def _first_of_month(value: date) -> date:
    return date(value.year, value.month, 1)
