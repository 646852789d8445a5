"""Durations written as Spark writes them in ``withWatermark`` and ``window``: ``10 minutes``.

Standard library only.
"""

from __future__ import annotations

import re

_UNITS_MS = {
    "millisecond": 1,
    "second": 1_000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
    "week": 604_800_000,
}
_DURATION = re.compile(r"^\s*(\d+)\s*([a-z]+?)s?\s*$")


def parse_duration_ms(text: str) -> int:
    """``"10 minutes"`` -> 600000. One whole number and a unit (millisecond, second, minute,
    hour, day, week; singular or plural); ``"0"`` is no time. Anything else: ValueError quoting
    the text and the accepted form."""
    if isinstance(text, str) and text.strip() == "0":
        return 0
    match = _DURATION.match(text.lower()) if isinstance(text, str) else None
    unit = match.group(2) if match else None
    if match is None or unit not in _UNITS_MS:
        raise ValueError(
            f"duration {text!r} is refused; write a whole number and a unit, as Spark does: "
            "'500 milliseconds', '30 seconds', '10 minutes', '1 hour', '2 days', '1 week' (or '0')"
        )
    return int(match.group(1)) * _UNITS_MS[unit]


def format_duration_ms(millis: int) -> str:
    """The largest unit that divides ``millis``: 600000 -> ``10 minutes``."""
    if millis == 0:
        return "0"
    for unit, size in sorted(_UNITS_MS.items(), key=lambda item: -item[1]):
        if millis % size == 0:
            count = millis // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    raise AssertionError(millis)  # a millisecond divides every integer
