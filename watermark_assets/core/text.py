"""How an instant is said in text: the ONE time format of every message, reason and metadata value.

:func:`time_text` is ``2024-01-30T18:49:55Z``: ISO-8601 in UTC, whole seconds; milliseconds
(``2024-01-30T18:49:55.578Z``) only when the instant has a non-zero millisecond (finer fractions
are cut, never rounded). The core's reasons (a tick's cut-off, its windows) and the vocabulary
(:mod:`watermark_assets.vocabulary` re-exports it) both use it. Names written to disk keep their own
fixed-width form (:func:`watermark_assets.core.time.instant.format_instant`). :func:`value_text`
says any watermark value the same way (a replace window's bounds, a column watermark).

Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime, time, timedelta, timezone
from typing import TypeVar

T = TypeVar("T")

__all__ = ["NEVER_RUN", "files_text", "millis_text", "shortened", "time_text", "value_text"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def time_text(moment: datetime) -> str:
    """``2024-01-30T18:49:55Z``: ISO-8601 in UTC, whole seconds; ``.578Z`` milliseconds only when
    the millisecond is not zero (microseconds below it are cut). A naive datetime is refused."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"a naive datetime {moment!r} has no time zone; pass an aware one (UTC)")
    utc = moment.astimezone(timezone.utc)
    millis = utc.microsecond // 1000
    text = utc.replace(microsecond=millis * 1000, tzinfo=None).isoformat(
        timespec="milliseconds" if millis else "seconds"
    )
    return text + "Z"


def millis_text(millis: int) -> str:
    """:func:`time_text` of an instant in epoch milliseconds."""
    return time_text(_EPOCH + timedelta(milliseconds=millis))


def value_text(value: object) -> str:
    """One value (of a watermark column, a window's bound), as a person reads it: an aware
    datetime as :func:`time_text`; a naive one (a wall-clock time, TIMESTAMP_NTZ) in ISO-8601
    WITHOUT ``Z``; dates and times in ISO-8601; ``null`` for None; everything else as ``str``
    (never a Python repr: a string is shown without quotes)."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            return value.isoformat()
        return time_text(value)
    if isinstance(value, (date, time)):
        return value.isoformat()
    if value is None:
        return "null"
    return str(value)


def shortened(items: Sequence[T], say: Callable[[T], str] = str, ends: int = 3) -> str:
    """``items`` in one readable line: all of them up to ``2 * ends``, else the first and last
    ``ends`` around ``... (N more)`` (only what is shown is said: a first tick may hold 40,000
    windows)."""
    if len(items) <= 2 * ends:
        return ", ".join(say(item) for item in items)
    head = [say(item) for item in items[:ends]]
    tail = [say(item) for item in items[-ends:]]
    return ", ".join([*head, f"... ({len(items) - 2 * ends} more)", *tail])


def files_text(paths: Sequence[str]) -> str:
    """``8 files: a, b, c, ... (2 more), f, g, h``: the count, then :func:`shortened`."""
    return f"{len(paths)} file{'' if len(paths) == 1 else 's'}: {shortened(paths)}"


#: A watermark that no run has moved yet, said the same by every kind that keeps one per
#: window, unit, cell or batch (``watermark-assets plan``; a column watermark says
#: ``(empty: read everything)``, a file-path one its state ``Initial``).
NEVER_RUN = "none (never run)"
