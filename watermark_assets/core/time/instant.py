"""Instants of the time kind: aware UTC, millisecond precision (DIL works in milliseconds).

Standard library only.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from watermark_assets.core.clock import ensure_utc

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_NAIVE_EPOCH = datetime(1970, 1, 1)
_MS = timedelta(milliseconds=1)


def truncate_to_ms(moment: datetime) -> datetime:
    """``moment`` in aware UTC with the microseconds below the millisecond dropped."""
    moment = ensure_utc(moment)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def to_millis(moment: datetime) -> int:
    """Milliseconds since the Unix epoch (exact; ``moment`` is truncated to the millisecond)."""
    if moment.tzinfo is not timezone.utc:
        moment = ensure_utc(moment)
    # Floor division truncates: the epoch is on a millisecond and microseconds are never negative.
    return (moment - _EPOCH) // _MS


def from_millis(millis: int) -> datetime:
    """The aware UTC instant ``millis`` milliseconds after the Unix epoch."""
    return _EPOCH + timedelta(milliseconds=millis)


def format_instant(moment: datetime) -> str:
    """``2020-02-21T10:00:00.000Z``: fixed width, so the text sorts like the instants."""
    return format_millis(to_millis(moment))


def format_millis(millis: int) -> str:
    """:func:`format_instant` of an instant in epoch milliseconds."""
    # isoformat pads the year to 4 digits (strftime's %Y does not on every platform).
    return (_NAIVE_EPOCH + timedelta(milliseconds=millis)).isoformat(timespec="milliseconds") + "Z"


def parse_millis(text: str) -> int | None:
    """The epoch milliseconds :func:`format_millis` wrote; None for any other text."""
    if len(text) != 24 or text[10] != "T" or text[19] != "." or text[23] != "Z":
        return None
    try:
        naive = datetime.fromisoformat(text[:23])
    except ValueError:
        return None
    millis = (naive - _NAIVE_EPOCH) // _MS
    # Round trip: refuses what fromisoformat accepts beyond the one written form.
    return millis if format_millis(millis) == text else None
