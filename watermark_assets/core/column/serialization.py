"""Watermark JSON with the seed's sentinels: datetimes, dates and times round-trip losslessly.

A column watermark is a JSON object. JSON has no temporal types, so a temporal value is written as
a one-key object naming its type (seed 001, "Serialisation format")::

    {"updated_at": {"__datetime__": "2026-04-03T09:15:00+00:00"}}

- ``{"__datetime__": s}`` <-> ``datetime.fromisoformat(s)``
- ``{"__date__": s}``     <-> ``date.fromisoformat(s)``
- ``{"__time__": s}``     <-> ``time.fromisoformat(s)``

Everything else is plain JSON: ints, floats, strings, booleans, null, nested objects and lists.

What "lossless" means here, and the choices made:

- Writing uses ``isoformat()``, which keeps microseconds and the UTC offset, and reading uses the
  seed's ``fromisoformat``: ``loads(dumps(v)) == v`` for every supported value. A datetime in a
  named zone (``ZoneInfo("Europe/Paris")``) is written with its offset at that instant, so it reads
  back as the same instant with a fixed offset (the zone's name is not kept; the instant is).
- Naive datetimes are written and read back naive: this layer keeps what was written (the seed's
  sentinel is a plain ``fromisoformat``). Whether a naive value is acceptable is decided where a
  watermark is built (:mod:`watermark_assets.core.column.watermark`), not here.
- Values JSON cannot hold exactly are refused, never approximated: NaN and infinities, non-string
  object keys (JSON would turn ``1`` into ``"1"``), and types without a JSON form (Decimal, bytes,
  sets). Tuples are written as lists (JSON has one sequence type).
- An object whose only key is a sentinel name is how a temporal value is spelled, so such an
  object as *data* (``{"__date__": "not a date"}``) is refused on writing instead of being read
  back as something else.

Standard library only.
"""

from __future__ import annotations

import json
from datetime import date, datetime, time
from typing import Any

from watermark_assets.core.errors import WatermarkJSONError

DATETIME = "__datetime__"
DATE = "__date__"
TIME = "__time__"
SENTINELS = (DATETIME, DATE, TIME)

_READERS = {DATETIME: datetime.fromisoformat, DATE: date.fromisoformat, TIME: time.fromisoformat}


def encode(value: Any) -> Any:
    """``value`` with every datetime, date and time replaced by its sentinel object.

    The result holds only JSON types. Raises WatermarkJSONError for a value JSON cannot hold
    exactly (module docstring).
    """
    # datetime is a subclass of date: test it first.
    if isinstance(value, datetime):
        return {DATETIME: value.isoformat()}
    if isinstance(value, date):
        return {DATE: value.isoformat()}
    if isinstance(value, time):
        return {TIME: value.isoformat()}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise WatermarkJSONError(value, "NaN and infinities have no JSON form; use null")
        return value
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)) in SENTINELS:
            raise WatermarkJSONError(
                value,
                f"an object whose only key is {next(iter(value))!r} is the spelling of a temporal "
                "value and would read back as one; rename the key",
            )
        encoded = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise WatermarkJSONError(
                    value, f"object key {key!r} is not a string; JSON keys are strings"
                )
            encoded[key] = encode(item)
        return encoded
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    raise WatermarkJSONError(
        value,
        f"{type(value).__name__} has no JSON form; use a number, string, bool, null, datetime, "
        "date, time, or objects and lists of them",
    )


def decode(value: Any) -> Any:
    """The inverse of :func:`encode` on parsed JSON: sentinel objects become temporal values."""
    if isinstance(value, dict):
        if len(value) == 1:
            ((key, item),) = value.items()
            if key in _READERS:
                return _read_sentinel(key, item)
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode(item) for item in value]
    return value


def dumps(value: Any) -> str:
    """JSON text of ``value`` with sentinels; ``loads(dumps(value)) == value``.

    Key order is kept (it is the comparison order of a column watermark's columns).
    """
    return json.dumps(encode(value), allow_nan=False, ensure_ascii=False)


def loads(text: str) -> Any:
    """The value :func:`dumps` wrote; WatermarkJSONError for text that is not watermark JSON."""
    try:
        parsed = json.loads(text, parse_constant=_refuse_constant)
    except (json.JSONDecodeError, TypeError) as exc:
        raise WatermarkJSONError(text, f"not valid JSON ({exc})") from exc
    return decode(parsed)


def _read_sentinel(key: str, item: object) -> Any:
    if not isinstance(item, str):
        raise WatermarkJSONError({key: item}, f"{key} needs an ISO 8601 string, got {item!r}")
    try:
        return _READERS[key](item)
    except ValueError as exc:
        raise WatermarkJSONError({key: item}, f"{item!r} is not an ISO 8601 value ({exc})") from exc


def _refuse_constant(name: str) -> Any:
    raise WatermarkJSONError(
        name, "NaN and infinities are not JSON; the value was not written here"
    )
