"""A time watermark's definition (seed 003): ``from`` and ``to``, partitioning, grace and abstinent.

``from`` and ``to`` each take one of these forms (anything else raises
:class:`~watermark_assets.core.errors.TimeBoundError`, which quotes the value and lists them):

=============================== ================================ ===========================
form                            example                          meaning
=============================== ================================ ===========================
ISO date                        ``2020-01-01``                   midnight UTC
ISO datetime                    ``2020-02-21 10:00:00``          UTC when no zone is given
... with fraction and zone      ``2020-01-02T03:04:05.123456Z``  ``Z UTC GMT +02:00 +0200``
ISO-8601 duration, days         ``P0D``, ``P1D``                 n days before now
... days and hours (m 0..23)    ``P0DT7H``, ``P2DT5H``           n days m hours before now
hyphen                          ``-``                            now (``P0DT0H0M``)
=============================== ================================ ===========================

**Inside, every instant is aware UTC at millisecond precision**: DIL works in milliseconds, so a
fraction below the millisecond is truncated (``.123456`` is 123 ms), and so is ``now``. Zone-less
text is UTC. Datetime *objects* must be aware (a naive one is refused by
:func:`~watermark_assets.core.clock.ensure_utc`): text shows by its form that it has no zone, an
object does not.

**Durations resolve against ``now``**, which every function takes as an argument: the Dagster edge
reads its injected :data:`~watermark_assets.core.clock.Clock` once per tick, so the windows and the
cut-off of one tick see the same instant.

**Rounding** (seed 003): with a multi-day partitioning (weekly, monthly) a ``P<n>D`` bound is
rounded down to the day and a ``P<n>DT<m>H`` bound to the hour; daily, hourly and unpartitioned
watermarks keep hours and minutes. The seed calls ``-`` a shortcut for ``P0DT0H0M``, which is
neither form: we round it to the day, like DIL's own ``WatermarkDefinition.getDateTime`` does for
multi-day partitions, so the seed's examples ("it is 2020-02-21": the partial month is
``[2020-02-01, 2020-02-21)``) hold at any time of that day. The same rule applies to a duration in
``from`` (a rolling start), though ``from`` is usually a fixed date.

Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TypeAlias

from watermark_assets.core.errors import TimeBoundError, TimeRangeError, TimeSpecError
from watermark_assets.core.time.instant import format_instant, truncate_to_ms
from watermark_assets.core.time.partitioning import Partitioning, TimeWindows

# [0-9], not \d: \d also matches other scripts' digits, which datetime() would then refuse less
# clearly. A zone is only allowed after a time.
_DATETIME = re.compile(
    r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})"
    r"(?:[ T](?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})"
    r"(?:\.(?P<fraction>[0-9]{1,6}))?"
    r"(?P<zone>Z|UTC|GMT|[+-][0-9]{2}:?[0-9]{2})?)?"
)
_DURATION = re.compile(r"P(?P<days>[0-9]+)D(?:T(?P<hours>[0-9]+)H)?")


@dataclass(frozen=True)
class FixedTime:
    """An ISO date or datetime: the same instant whenever it is resolved."""

    at: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "at", truncate_to_ms(self.at))

    def resolve(self, now: datetime, partitioning: Partitioning) -> datetime:
        """The instant itself (``now`` and ``partitioning`` play no role)."""
        return self.at

    def __str__(self) -> str:
        return format_instant(self.at)


@dataclass(frozen=True)
class BeforeNow:
    """``P<n>D`` (``hours`` None) or ``P<n>DT<m>H``: that long before ``now``."""

    days: int
    hours: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.days, bool) or not isinstance(self.days, int) or self.days < 0:
            raise TimeBoundError(str(self), "the number of days must be a natural number")
        hours = self.hours
        if hours is not None and (
            isinstance(hours, bool) or not isinstance(hours, int) or not 0 <= hours <= 23
        ):
            raise TimeBoundError(str(self), f"the hour part must be 0..23, not {hours}")

    def resolve(self, now: datetime, partitioning: Partitioning) -> datetime:
        """``now`` minus the duration; rounded down to the day (``P<n>D``) or the hour
        (``P<n>DT<m>H``) for weekly and monthly partitioning (module docstring)."""
        try:
            moment = truncate_to_ms(now) - timedelta(days=self.days, hours=self.hours or 0)
        except OverflowError:
            raise TimeBoundError(str(self), "it reaches before the year 1") from None
        if partitioning.is_multi_day:
            return _floor_to_day(moment) if self.hours is None else _floor_to_hour(moment)
        return moment

    def __str__(self) -> str:
        return f"P{self.days}D" if self.hours is None else f"P{self.days}DT{self.hours}H"


@dataclass(frozen=True)
class Now:
    """``-``: the time of the run (``P0DT0H0M``)."""

    def resolve(self, now: datetime, partitioning: Partitioning) -> datetime:
        """``now``; rounded down to the day for weekly and monthly partitioning (module
        docstring: the seed's ``P0DT0H0M`` is neither of its rounding forms)."""
        moment = truncate_to_ms(now)
        return _floor_to_day(moment) if partitioning.is_multi_day else moment

    def __str__(self) -> str:
        return "-"


TimeBound: TypeAlias = FixedTime | BeforeNow | Now
"""A parsed ``from`` or ``to``: :func:`parse_bound`'s result."""


def parse_bound(text: str, *, bound: str = "from/to") -> TimeBound:
    """Parse one ``from``/``to`` value (module docstring table).

    ``bound`` names the setting in the error (``"from"`` or ``"to"``). Raises
    :class:`~watermark_assets.core.errors.TimeBoundError` quoting ``text`` and the accepted forms.
    """
    if not isinstance(text, str):
        raise TimeBoundError(text, "expected text", bound=bound)
    if text == "-":
        return Now()
    duration = _DURATION.fullmatch(text)
    if duration is not None:
        days, hours = duration["days"], duration["hours"]
        if len(days) > 9:  # and int() refuses thousands of digits with a ValueError of its own
            raise TimeBoundError(text, f"{len(days)} digits of days is too many", bound=bound)
        if hours is not None and (len(hours) > 2 or int(hours) > 23):
            raise TimeBoundError(text, f"the hour part must be 0..23, not {hours}", bound=bound)
        return BeforeNow(int(days), None if hours is None else int(hours))
    match = _DATETIME.fullmatch(text)
    if match is None:
        raise TimeBoundError(text, "not one of the accepted forms", bound=bound)
    fraction = (match["fraction"] or "").ljust(6, "0")
    try:
        moment = datetime(
            int(match["year"]),
            int(match["month"]),
            int(match["day"]),
            int(match["hour"] or 0),
            int(match["minute"] or 0),
            int(match["second"] or 0),
            int(fraction) // 1000 * 1000,
            tzinfo=_zone(match["zone"]),
        )
    except ValueError as error:
        raise TimeBoundError(text, f"not a valid date or time ({error})", bound=bound) from None
    return FixedTime(moment)


def _zone(text: str | None) -> timezone:
    if text is None or text in ("Z", "UTC", "GMT"):
        return timezone.utc
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:])
    if hours > 23 or minutes > 59:
        raise ValueError(f"zone offset {text} is out of range")
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def _back(bound: BeforeNow | Now) -> timedelta:
    """How far a moving bound is before now (before rounding)."""
    if isinstance(bound, Now):
        return timedelta(0)
    return timedelta(days=bound.days, hours=bound.hours or 0)


def _ceil(moment: datetime, unit: timedelta) -> datetime:
    """``moment`` rounded up to a whole ``unit`` (a day or an hour) since midnight UTC."""
    midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    whole = -(-(moment - midnight) // unit)
    return midnight + unit * whole


def _floor_to_day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _floor_to_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def _bound(value: str | datetime | TimeBound, name: str) -> TimeBound:
    if isinstance(value, (FixedTime, BeforeNow, Now)):
        return value
    if isinstance(value, datetime):
        return FixedTime(value)
    return parse_bound(value, bound=name)


@dataclass(frozen=True, init=False)
class TimeSpec:
    """A time watermark's definition; normalised at construction.

    ``from_`` and ``to`` take the text forms of the module docstring (or a :data:`TimeBound`, or an
    aware datetime). ``partitioning`` is a :class:`~.partitioning.Partitioning` or its name.
    ``partial_partition`` (on by default; the seed's ``ms.work.unit.partial.partition``) keeps the
    last, incomplete window up to ``to``. ``grace_days`` (``ms.grace.period.days``) moves the
    cut-off back, re-reading late arrivals; ``abstinent_days`` (``ms.abstinent.period.days``) moves
    it forward, avoiding repeated downloads. Both are whole days, at least 0.
    """

    from_: TimeBound
    to: TimeBound
    partitioning: Partitioning
    partial_partition: bool
    grace_days: int
    abstinent_days: int

    def __init__(
        self,
        from_: str | datetime | TimeBound,
        to: str | datetime | TimeBound,
        partitioning: Partitioning | str,
        *,
        partial_partition: bool = True,
        grace_days: int = 0,
        abstinent_days: int = 0,
    ) -> None:
        try:
            parsed_partitioning = Partitioning(partitioning)
        except ValueError:
            names = ", ".join(p.value for p in Partitioning)
            raise TimeSpecError("partitioning", partitioning, f"one of {names}") from None
        if not isinstance(partial_partition, bool):
            raise TimeSpecError("partial_partition", partial_partition, "true or false")
        for name, days in (("grace_days", grace_days), ("abstinent_days", abstinent_days)):
            if isinstance(days, bool) or not isinstance(days, int) or days < 0:
                raise TimeSpecError(name, days, "a whole number of days, 0 or more")
        object.__setattr__(self, "from_", _bound(from_, "from"))
        object.__setattr__(self, "to", _bound(to, "to"))
        object.__setattr__(self, "partitioning", parsed_partitioning)
        object.__setattr__(self, "partial_partition", partial_partition)
        object.__setattr__(self, "grace_days", grace_days)
        object.__setattr__(self, "abstinent_days", abstinent_days)
        self._check_range()

    def _check_range(self) -> None:
        """Refuse a range that holds no window at any time (:class:`TimeRangeError`)."""
        from_, to = self.from_, self.to
        if isinstance(from_, FixedTime) and isinstance(to, FixedTime):
            if to.at <= from_.at:
                verb = "is before" if to.at < from_.at else "is the same instant as"
                raise TimeRangeError(str(from_), str(to), f"to {verb} from")
            if not TimeWindows(from_.at, to.at, self.partitioning, self.partial_partition):
                raise TimeRangeError(
                    str(from_),
                    str(to),
                    f"no complete {self.partitioning.value} window fits between them and "
                    "partial_partition is false (set partial_partition: true to keep the "
                    "partial window)",
                )
        elif (  # both move with now, a fixed distance apart when neither is rounded
            not isinstance(from_, FixedTime)
            and not isinstance(to, FixedTime)
            and not self.partitioning.is_multi_day
            and _back(to) >= _back(from_)
        ):
            raise TimeRangeError(
                str(from_), str(to), "to counts back from now as far as from or further"
            )

    def first_window_at(self, now: datetime) -> datetime | None:
        """The earliest instant, ``now`` or later, at which ``[from, to)`` holds a window: ``now``
        when it already does, the instant ``to`` passes a future ``from`` (or the end of the
        first window with partial windows off) when ``to`` moves with now, and None when no
        window ever comes (a fixed ``to`` that a moving ``from`` has reached).

        Exact to the millisecond: ``to`` counted back from now, rounded down to the day or hour
        for weekly and monthly partitioning (module docstring), first reaches the instant needed
        at ``ceil(needed) + the duration``.
        """
        start, to = self.resolve_from(now), self.to
        if TimeWindows(start, self.resolve_to(now), self.partitioning, self.partial_partition):
            return truncate_to_ms(now)
        if isinstance(to, FixedTime) or not isinstance(self.from_, FixedTime):
            return None  # to stays put while from stays or moves forward
        if self.partial_partition or self.partitioning is Partitioning.NONE:
            needed = start + timedelta(milliseconds=1)  # any to after from makes a window
        else:
            needed = TimeWindows(start, start, self.partitioning).boundary(1)
        if self.partitioning.is_multi_day:  # to is rounded down: to the hour for P<n>DT<m>H
            hours = isinstance(to, BeforeNow) and to.hours is not None
            needed = _ceil(needed, timedelta(hours=1) if hours else timedelta(days=1))
        return needed + _back(to)

    def resolve_from(self, now: datetime) -> datetime:
        """``from`` at ``now`` (aware UTC, millisecond precision)."""
        return self.from_.resolve(now, self.partitioning)

    def resolve_to(self, now: datetime) -> datetime:
        """``to`` at ``now``, rounded as the module docstring says for weekly and monthly."""
        return self.to.resolve(now, self.partitioning)

    @property
    def is_static(self) -> bool:
        """Whether ``from`` is a fixed instant, so the windows never shift (Dagster partitions
        need a fixed start)."""
        return isinstance(self.from_, FixedTime)
