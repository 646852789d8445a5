"""The one clock of the package, and the UTC normalisation every datetime goes through.

Code below the Dagster glue never reads the time itself: it takes ``now`` (or a :data:`Clock`) as an
argument, so tests freeze time by passing a value.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

from watermark_assets.core.errors import NaiveDatetimeError

Clock = Callable[[], datetime]
"""A function returning the current time as an aware UTC datetime (see :func:`system_clock`)."""


def system_clock() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(timezone.utc)


def ensure_utc(dt: datetime) -> datetime:
    """``dt`` converted to UTC.

    A naive datetime is refused with :class:`~watermark_assets.exceptions.NaiveDatetimeError`:
    guessing its zone is how off-by-hours bugs start.
    """
    if dt.tzinfo is timezone.utc:  # already UTC (most calls): nothing to convert
        return dt
    if dt.tzinfo is None or dt.tzinfo.utcoffset(dt) is None:
        raise NaiveDatetimeError(dt)
    return dt.astimezone(timezone.utc)
