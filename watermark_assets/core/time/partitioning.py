"""How a time watermark's range ``[from, to)`` is cut into windows (the seed's partitions).

**Windows are derived from ``from``** (seed 003), never from the cut-off, so they are the same on
every run: daily windows add 1 day to ``from``, weekly 7 days (a ``from`` on a Monday gives Monday
weeks, on a Thursday Thursday weeks), monthly 1 month, hourly 1 hour. A ``from`` with hours
(``2020-02-21 10:00:00``) makes every window start and end at that time of day. ``none`` is one
window, ``[from, to)``.

**Windows are closed at the start and open at the end**, ``[start, end)``
(:class:`~watermark_assets.core.partition_selection.TimeWindow`), and tile ``[from, to)`` with no
gap and no overlap. When ``to`` falls inside a window, the last window is *partial*,
``[start, to)``, and grows on later runs (the seed's ``[2020-02-01, 2020-02-21)``, then
``[2020-02-01, 2020-02-22)``); with partial windows switched off only complete windows are kept.

**Months.** Window ``k`` starts at ``from`` plus ``k`` calendar months, on ``from``'s day of the
month and time of day. A ``from`` on the 29th to 31st starts each window on that day, or on the
month's last day when the month is shorter: ``2020-01-31`` gives windows starting 01-31, 02-29,
03-31, 04-30. Each start is computed from ``from``, not from the previous window, so a short month
does not pull the later windows to an earlier day (repeatedly adding one month to the previous
start, as DIL's loop does, would give 01-31, 02-29, 03-29, 04-29 ...).

All instants are aware UTC, so a day is always 24 hours (no daylight-saving shifts). The windows are
a lazy sequence: its length, the window at an index and the window containing an instant are
computed, not listed, so 43,800 hourly windows cost nothing until they are iterated.

Standard library only.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import TYPE_CHECKING, overload

from watermark_assets.core.clock import ensure_utc
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.time.instant import from_millis, to_millis, truncate_to_ms

if TYPE_CHECKING:
    from watermark_assets.core.time.spec import TimeSpec


class Partitioning(str, Enum):
    """The seed's ``ms.work.unit.partition``: how ``[from, to)`` is cut into windows."""

    MONTHLY = "monthly"
    WEEKLY = "weekly"
    DAILY = "daily"
    HOURLY = "hourly"
    NONE = "none"

    @classmethod
    def _missing_(cls, value: object) -> Partitioning | None:
        # DIL reads the name case-insensitively ("Daily" works there, so it works here).
        if isinstance(value, str):
            for member in cls:
                if member.value == value.lower():
                    return member
        return None

    @property
    def is_multi_day(self) -> bool:
        """Weekly and monthly: their ``to`` is rounded (see :mod:`.spec`)."""
        return self in (Partitioning.WEEKLY, Partitioning.MONTHLY)

    @property
    def step(self) -> timedelta | None:
        """The fixed length of a window; None for monthly (calendar months) and none."""
        return _STEPS.get(self)


_STEPS = {
    Partitioning.HOURLY: timedelta(hours=1),
    Partitioning.DAILY: timedelta(days=1),
    Partitioning.WEEKLY: timedelta(days=7),
}


def add_months(moment: datetime, months: int) -> datetime:
    """``moment`` plus ``months`` calendar months, on the same day, or the month's last day when
    the month is shorter; the time of day is kept."""
    index = moment.year * 12 + moment.month - 1 + months
    year, month = index // 12, index % 12 + 1
    day = min(moment.day, calendar.monthrange(year, month)[1])
    return moment.replace(year=year, month=month, day=day)


@dataclass(frozen=True)
class TimeWindows(Sequence[TimeWindow]):
    """The windows tiling ``[start, end)`` (the resolved ``from`` and ``to``), in order; lazy.

    ``start`` and ``end`` are aware UTC, truncated to the millisecond.

    ``len()``, indexing, :meth:`index_containing`, :meth:`containing` and
    :meth:`first_ending_after` take constant time (monthly: a few date operations), whatever the
    number of windows. Build one with :func:`windows`.
    """

    start: datetime
    end: datetime
    partitioning: Partitioning
    partial: bool = True
    _complete: int = field(init=False, repr=False, compare=False)
    _has_partial: bool = field(init=False, repr=False, compare=False)
    _step: timedelta | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", truncate_to_ms(self.start))
        object.__setattr__(self, "end", truncate_to_ms(self.end))
        object.__setattr__(self, "partitioning", Partitioning(self.partitioning))
        object.__setattr__(self, "_step", self.partitioning.step)
        complete, has_partial = 0, False
        if self.start < self.end:
            if self.partitioning is Partitioning.NONE:
                complete = 1  # one window, [from, to): never partial
            else:
                complete = self._floor_index(self.end)
                has_partial = self.partial and self.boundary(complete) < self.end
        object.__setattr__(self, "_complete", complete)
        object.__setattr__(self, "_has_partial", has_partial)

    def boundary(self, index: int) -> datetime:
        """The start of window ``index`` (and the end of window ``index - 1``) when complete."""
        if self._step is not None:
            return self.start + self._step * index
        if self.partitioning is Partitioning.NONE:
            return self.start if index <= 0 else self.end
        return add_months(self.start, index)

    @property
    def covered_end(self) -> datetime:
        """The end of the last window: ``to``, or the last complete window's end when partial
        windows are off (``start`` when there is no window)."""
        if self._has_partial:
            return self.end
        return self.boundary(self._complete) if self._complete else self.start

    @property
    def covered(self) -> TimeWindow | None:
        """``[start, covered_end)``, the union of the windows; None when there is none."""
        return TimeWindow(self.start, self.covered_end) if len(self) else None

    def effective_range(self, cut_off: datetime) -> TimeWindow | None:
        """``[max(cut_off, start), covered_end)``: the seed's effective range, what an
        unpartitioned watermark reads on a run; None when it is empty (a cut-off at or after
        ``to``, as with a long abstinent period)."""
        lower = max(ensure_utc(cut_off), self.start)
        end = self.covered_end
        return TimeWindow(lower, end) if lower < end else None

    def is_partial(self, index: int) -> bool:
        """Whether window ``index`` is the partial last one (it ends at ``to``, early)."""
        return self._has_partial and _normalise_index(index, len(self)) == self._complete

    def index_containing(self, moment: datetime) -> int | None:
        """The index of the window with ``start <= moment < end``; None outside every window."""
        moment = ensure_utc(moment)
        if not self.start <= moment < self.covered_end:
            return None
        if self.partitioning is Partitioning.NONE:
            return 0
        return self._floor_index(moment)

    def containing(self, moment: datetime) -> TimeWindow | None:
        """The window containing ``moment``; None outside every window."""
        index = self.index_containing(moment)
        return None if index is None else self[index]

    def first_ending_after(self, moment: datetime) -> int:
        """The index of the first window whose end is after ``moment`` (``len(self)`` when none):
        windows from there on end after it, the ones before end at or before it."""
        moment = ensure_utc(moment)
        if moment < self.start:
            return 0
        index = self.index_containing(moment)
        return len(self) if index is None else index

    def first_starting_at_or_after(self, moment: datetime | int) -> int:
        """The index of the first window whose start is at or after ``moment`` (aware, or epoch
        milliseconds; ``len(self)`` when none): the windows starting in ``[a, b)`` are those from
        this index of ``a`` up to (not including) this index of ``b``. Integer arithmetic for
        fixed-length windows given milliseconds (a tick asks this once per gap)."""
        if isinstance(moment, int):
            if self._step is not None:
                width = self._step // timedelta(milliseconds=1)
                ahead = moment - to_millis(self.start)
                return min(len(self), max(0, -(-ahead // width)))  # ceil, clipped
            moment = from_millis(moment)
        index = self.index_containing(moment)
        if index is None:
            return 0 if ensure_utc(moment) <= self.start else len(self)
        return index if self.boundary(index) == moment else index + 1

    def starts_ms(self, stop: int | None = None) -> Sequence[int]:
        """The starts of windows ``0 .. stop - 1`` (all by default) in epoch milliseconds; a
        ``range`` for fixed-length windows, so nothing is built per window."""
        stop = len(self) if stop is None else max(0, min(stop, len(self)))
        step = self._step
        first = to_millis(self.start)
        if step is not None or stop <= 1:
            width = step // timedelta(milliseconds=1) if step is not None else 1
            return range(first, first + width * stop, width)
        return [to_millis(self.boundary(i)) for i in range(stop)]

    def __len__(self) -> int:
        return self._complete + self._has_partial

    def __contains__(self, window: object) -> bool:
        """Whether ``window`` is one of these windows (constant time, unlike a scan)."""
        return isinstance(window, TimeWindow) and self.containing(window.start) == window

    @overload
    def __getitem__(self, index: int) -> TimeWindow: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[TimeWindow]: ...

    def __getitem__(self, index: int | slice) -> TimeWindow | Sequence[TimeWindow]:
        if isinstance(index, slice):
            lo, hi, stride = index.indices(len(self))
            if stride == 1:
                return list(self._between(lo, hi))
            return [self[i] for i in range(lo, hi, stride)]
        i = _normalise_index(index, len(self))
        if not 0 <= i < len(self):
            raise IndexError(f"window {index} of {len(self)}")
        end = self.end if i == self._complete else self.boundary(i + 1)
        return TimeWindow(self.boundary(i), end)

    def __iter__(self) -> Iterator[TimeWindow]:
        return self._between(0, len(self))

    def _between(self, lo: int, hi: int) -> Iterator[TimeWindow]:
        """Windows ``lo .. hi - 1``, each end computed once (it is the next start)."""
        start = self.boundary(lo)
        step = self._step
        for i in range(lo + 1, hi + 1):
            if i > self._complete:
                end = self.end
            else:  # fixed-length windows: one addition, not a multiplication per window
                end = start + step if step is not None else self.boundary(i)
            yield TimeWindow(start, end)
            start = end

    def _floor_index(self, moment: datetime) -> int:
        """The largest ``k`` with ``boundary(k) <= moment``, for ``moment >= start``."""
        if self._step is not None:
            return (moment - self.start) // self._step
        months = (moment.year - self.start.year) * 12 + moment.month - self.start.month
        # boundary(months) falls in moment's month; when it is later in that month than moment,
        # the window containing moment started the month before.
        return months - 1 if add_months(self.start, months) > moment else months


def windows(spec: TimeSpec, now: datetime) -> TimeWindows:
    """The windows of ``spec`` at ``now``: ``[from, to)`` resolved at ``now`` and cut by the
    spec's partitioning, the partial last window kept unless ``spec.partial_partition`` is off.
    Empty when ``to`` is not after ``from``."""
    return TimeWindows(
        spec.resolve_from(now), spec.resolve_to(now), spec.partitioning, spec.partial_partition
    )


def _normalise_index(index: int, length: int) -> int:
    return index + length if index < 0 else index
