"""The window of a range replace (seed 001's ``replace_by_watermark``): pure, standard library only.

A :class:`ReplaceWindow` is ``{column: (lower, upper)}`` with its closedness an explicit
:class:`Interval`. The default is ``(lower, upper]``: a normal read takes ``column > lower`` (the
watermark before) and the watermark after is the largest value read, so exactly the rows of
``(lower, upper]`` were read again. A replay chunk read with ``>=`` is ``[lower, upper]``; a Dagster
time window (one partition or a backfilled range) is ``[start, end)``. ``lower=None`` means "from
the beginning". A null is in no window. The Delta side is :mod:`watermark_assets.delta.replace`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from enum import Enum
from typing import Any, NoReturn, TypeAlias

from watermark_assets.core.clock import ensure_utc
from watermark_assets.core.errors import NaiveDatetimeError, ReplaceWindowError
from watermark_assets.core.text import value_text

__all__ = ["Interval", "ReplaceWindow", "WindowValue", "region_text", "value_kind"]

WindowValue: TypeAlias = int | float | date | datetime | str
"""A bound: a number, a date, an aware datetime (normalised to UTC) or a string."""


class Interval(str, Enum):
    """Which bounds of a window are in it: the comparison operators, spelled out."""

    OPEN_CLOSED = "(lower, upper]"
    """``> lower and <= upper``: a normal read (``>`` the watermark before, up to the one after)."""
    CLOSED_CLOSED = "[lower, upper]"
    """``>= lower and <= upper``: a replay chunk read with ``>=``."""
    CLOSED_OPEN = "[lower, upper)"
    """``>= lower and < upper``: a Dagster time window, one partition or a range."""
    OPEN_OPEN = "(lower, upper)"
    """``> lower and < upper``."""

    @property
    def lower_inclusive(self) -> bool:
        return self.value.startswith("[")

    @property
    def upper_inclusive(self) -> bool:
        return self.value.endswith("]")


@dataclass(frozen=True)
class ReplaceWindow:
    """The rows ``lower < column <= upper`` (closedness per ``interval``) of one column.

    Validated at construction: ``upper`` is set, ``lower`` is None or below ``upper`` (equal only
    for ``[lower, upper]``), both are of one kind (numbers, dates, aware datetimes, strings; no
    booleans, NaN or naive datetimes). Datetimes are normalised to UTC.
    """

    column: str
    lower: WindowValue | None
    upper: WindowValue
    interval: Interval = Interval.OPEN_CLOSED

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            self._refuse("the column name is empty", "name the watermark column")
        if self.upper is None:
            self._refuse(
                "the upper bound is missing",
                "compute the window only when the watermarks before and after are both known",
            )
        object.__setattr__(self, "upper", self._normalised(self.upper, "upper"))
        if self.lower is not None:
            object.__setattr__(self, "lower", self._normalised(self.lower, "lower"))
            if value_kind(self.lower) != value_kind(self.upper):
                self._refuse(
                    f"the bounds are of different kinds ({type(self.lower).__name__}, "
                    f"{type(self.upper).__name__})",
                    "give both bounds in the column's type",
                )
            reversed_ = (
                self.lower > self.upper  # type: ignore[operator]
                if self.interval is Interval.CLOSED_CLOSED
                else self.lower >= self.upper  # type: ignore[operator]
            )
            if reversed_:
                self._refuse(
                    f"the lower bound is not below the upper bound ({self.interval.value} "
                    "holds nothing)",
                    "pass the watermark before as lower and the watermark after as upper; a read "
                    "that found nothing new replaces nothing",
                )

    @classmethod
    def from_mapping(
        cls,
        window: Mapping[str, tuple[WindowValue | None, WindowValue]],
        *,
        interval: Interval = Interval.OPEN_CLOSED,
    ) -> ReplaceWindow:
        """The window of the seed's ``{column: (lower, upper)}`` mapping (one column)."""
        if len(window) != 1:
            raise ReplaceWindowError(
                repr(dict(window)),
                f"it names {len(window)} columns",
                "give exactly one column: rows past a multi-column watermark (compared as a tuple) "
                "are not a range of one column, so replace by the first column only when it alone "
                "orders the rows",
            )
        ((column, bounds),) = window.items()
        if not isinstance(bounds, tuple) or len(bounds) != 2:
            raise ReplaceWindowError(
                repr(dict(window)), "the bounds are not a (lower, upper) pair", "pass a 2-tuple"
            )
        return cls(column, bounds[0], bounds[1], interval)

    def __str__(self) -> str:
        """``status = shipped`` (one value), else ``updated_at in (2026-04-02T15:00:00Z,
        2026-04-03T16:00:00Z]`` (``-inf``: no lower bound); values as
        :func:`~watermark_assets.core.text.value_text`."""
        if self.interval is Interval.CLOSED_CLOSED and self.lower == self.upper:
            return f"{self.column} = {value_text(self.upper)}"
        low = "-inf" if self.lower is None else value_text(self.lower)
        shown = self.interval.value.replace("lower", low).replace("upper", value_text(self.upper))
        return f"{self.column} in {shown}"

    def contains(self, value: Any) -> bool:
        """Whether a (non-null, normalised) value lies in the window."""
        return not self.is_below(value) and not self.is_above(value)

    def is_below(self, value: Any) -> bool:
        """Whether ``value`` lies below the window (a file whose maximum is below: outside)."""
        if self.lower is None:
            return False
        return bool(value < self.lower if self.interval.lower_inclusive else value <= self.lower)

    def is_above(self, value: Any) -> bool:
        """Whether ``value`` lies above the window (a file whose minimum is above: outside)."""
        return bool(value > self.upper if self.interval.upper_inclusive else value >= self.upper)

    def to_json(self) -> dict[str, Any]:
        """The window as commit metadata: bounds as text, the interval spelled out."""
        return {
            "column": self.column,
            "lower": None if self.lower is None else _text(self.lower),
            "upper": _text(self.upper),
            "interval": self.interval.value,
        }

    def _normalised(self, value: Any, which: str) -> WindowValue:
        if isinstance(value, bool) or not isinstance(value, (int, float, date, str)):
            self._refuse(
                f"the {which} bound {value!r} is a {type(value).__name__}",
                "use a number, a date, an aware datetime or a string",
            )
        if isinstance(value, float) and value != value:
            self._refuse(f"the {which} bound is NaN", "use a finite number")
        if isinstance(value, datetime):
            try:
                return ensure_utc(value)
            except NaiveDatetimeError:
                self._refuse(
                    f"the {which} bound {value!r} has no time zone",
                    "pass aware datetimes (tzinfo=timezone.utc); a naive one would be guessed",
                )
        return value  # type: ignore[no-any-return]

    def _refuse(self, problem: str, fix: str) -> NoReturn:
        shown = f"{{{self.column!r}: ({self.lower!r}, {self.upper!r})}} as {self.interval.value}"
        raise ReplaceWindowError(shown, problem, fix)


def value_kind(value: Any) -> str:
    """The kind of a bound or value: "number", "date", "datetime" or "string"."""
    if isinstance(value, datetime):
        return "datetime"
    if isinstance(value, date):
        return "date"
    if isinstance(value, str):
        return "string"
    return "number"


def _text(value: WindowValue) -> str:
    """A bound as commit metadata stores it (:meth:`ReplaceWindow.to_json`: a name on disk, kept
    as written; what a person reads is :meth:`ReplaceWindow.__str__`)."""
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    return str(value) if not isinstance(value, str) else repr(value)


def region_text(
    region: ReplaceWindow | Sequence[ReplaceWindow] | None, *, none: str = "(none)"
) -> str:
    """The rows a run replaces, as a person reads them: each window as its ``str``
    (``status = shipped``, ``updated_at in [2026-04-02T15:00:00Z, 2026-04-03T16:00:00Z)``),
    several joined by `` and `` (a cell: the time window and the unit); ``none`` when there is
    no window. The engine's reasons and the runs' metadata both say regions so."""
    if region is None:
        return none
    windows = (region,) if isinstance(region, ReplaceWindow) else tuple(region)
    return " and ".join(str(w) for w in windows) or none
