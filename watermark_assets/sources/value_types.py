"""What type a sampled CSV or JSON value is, and whether Spark's reader parses it into a declared
type (pure: the standard library only).

Two questions asked of the same values:

- :func:`value_type` / :func:`merge`: the Spark type a value (a column's values) is, for
  ``schema.infer`` (:mod:`~watermark_assets.sources.schema_inference`) and for naming what a
  file holds now (:func:`observed_type`);
- :func:`fits`: whether Spark's CSV or JSON reader parses a value into a declared type, for
  telling a column whose type changed (:func:`type_change`) from a few malformed records.

:func:`fits` follows Spark 4's readers where it judges (checked against Spark 4.2 here): CSV
integers are digits with an optional sign, in the type's range; JSON integers are JSON integers
(a quoted ``"4"``, ``4.0`` or ``1e3`` is no BIGINT to Spark); doubles and floats are numbers (CSV:
Java's spelling, ``NaN``, ``Inf``, ``Infinity``; JSON: a number, or ``"NaN"``/``"Infinity"``);
booleans are ``true``/``false`` (any case in CSV, a JSON boolean). Where Spark's rules depend on
options (date and timestamp patterns, a decimal's locale), it errs towards "parses": a date or
timestamp fits unless it holds no digit at all, a decimal fits when it holds a digit (CSV) or is
a number or a numeric string (JSON); CSV text is judged without its surrounding blanks. Erring
that way can only leave a changed column to the quarantine, as before, never stop a run on
values Spark reads. Nested and other types are not judged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import date, datetime
from decimal import Decimal, InvalidOperation

#: Sampled values a column needs before its values can say its type changed: fewer are a few
#: malformed records (quarantined, as before), not a file of another type.
MIN_SAMPLED_VALUES = 3

_BIGINT = (-(2**63), 2**63 - 1)
_RANGES = {
    "tinyint": (-(2**7), 2**7 - 1),
    "smallint": (-(2**15), 2**15 - 1),
    "int": (-(2**31), 2**31 - 1),
    "bigint": _BIGINT,
}
_INTEGER = re.compile(r"^[+-]?\d+$")
_NUMBER = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIMESTAMP = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})?$"
)
_WIDER = {frozenset(("bigint", "double")): "double", frozenset(("date", "timestamp")): "timestamp"}
_DIGIT = re.compile(r"\d")
#: CSV texts Spark reads as a float or double beyond Java's own spelling (its ``nanValue``,
#: ``positiveInf`` and ``negativeInf`` defaults).
CSV_FLOAT_WORDS = frozenset({"NaN", "Inf", "+Inf", "-Inf"})


def value_type(value: object) -> str | None:
    """The Spark type of one sampled value (CSV values are text, JSON values keep their JSON
    type): ``true``/``false`` BOOLEAN; an integer BIGINT (beyond BIGINT: STRING); a decimal or
    exponent number DOUBLE; ``YYYY-MM-DD`` DATE; ``YYYY-MM-DD[T ]hh:mm:ss[.ffffff][Z|+hh:mm]``
    TIMESTAMP; anything else, a JSON object or array too, STRING. None: empty or null (no
    evidence)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint" if _BIGINT[0] <= value <= _BIGINT[1] else "string"
    if isinstance(value, float):
        return "double"
    if not isinstance(value, str):
        return "string"  # a JSON object or array: its text
    return _text_type(value.strip())


def json_value_type(value: object) -> str | None:
    """The Spark type a JSON value is read in (:func:`value_type`), except that a JSON string is
    STRING unless it spells a date or a timestamp: Spark's JSON reader parses dates and
    timestamps from strings, but no number nor boolean (a quoted ``"4"`` is no BIGINT to it)."""
    if isinstance(value, str):
        kind = _text_type(value.strip())
        return kind if kind in (None, "date", "timestamp") else "string"
    return value_type(value)


def _text_type(text: str) -> str | None:
    if not text:
        return None
    if text.lower() in ("true", "false"):
        return "boolean"
    if _INTEGER.match(text):
        return "bigint" if _BIGINT[0] <= int(text) <= _BIGINT[1] else "string"
    if _NUMBER.match(text):
        return "double"
    if _DATE.match(text):
        return "date" if _valid(date.fromisoformat, text) else "string"
    found = _TIMESTAMP.match(text)
    if found:
        day, clock = found.group(1), found.group(2)
        return "timestamp" if _valid(datetime.fromisoformat, f"{day}T{clock}") else "string"
    return "string"


def _valid(parse: Callable[[str], object], text: str) -> bool:
    try:
        parse(text)
    except ValueError:
        return False
    return True


def merge(first: str | None, second: str | None) -> str | None:
    """The type that holds values of both: the same type stays, BIGINT and DOUBLE give DOUBLE,
    DATE and TIMESTAMP give TIMESTAMP, anything else STRING; None: no evidence yet."""
    if first is None or first == second:
        return second if first is None else first
    if second is None:
        return first
    return _WIDER.get(frozenset((first, second)), "string")


def observed_type(values: Iterable[object], *, text: bool) -> str:
    """The type a column's sampled ``values`` are, as a file holds them: CSV ``text`` by
    :func:`value_type`; JSON by its own types (a string is STRING whatever it spells, an object
    STRUCT, an array ARRAY), merged (:func:`merge`); STRING when nothing says more."""
    found: str | None = None
    for value in values:
        found = merge(found, value_type(value) if text else _json_type(value))
    return found or "string"


def _json_type(value: object) -> str | None:
    if isinstance(value, str):
        return "string" if value else None
    if isinstance(value, dict):
        return "struct"
    if isinstance(value, list):
        return "array"
    return value_type(value)


def fits(declared: str, value: object, *, text: bool, float_words: Iterable[str] = ()) -> bool:
    """Whether Spark's CSV (``text``) or JSON reader parses ``value`` into the ``declared``
    Spark type (module docstring); a type it does not judge fits. ``float_words``: more CSV
    texts read as a float or double (the reader's ``nanValue``/``positiveInf``/``negativeInf``)."""
    if declared == "string" or value is None or value == "":
        return True
    if text:
        stripped = str(value).strip()
        words = frozenset(float_words) | CSV_FLOAT_WORDS
        return not stripped or _text_fits(declared, stripped, words)
    return _json_fits(declared, value)


def _text_fits(declared: str, value: str, float_words: frozenset[str]) -> bool:
    if declared in _RANGES:
        low, high = _RANGES[declared]
        return bool(_INTEGER.match(value)) and low <= int(value) <= high
    if declared in ("float", "double"):
        return value in float_words or _java_double(value)
    if declared == "boolean":
        return value.lower() in ("true", "false")
    if declared.startswith("decimal") or declared in ("date", "timestamp", "timestamp_ntz"):
        return bool(_DIGIT.search(value))  # patterns and locales are options: lenient
    return True


def _java_double(value: str) -> bool:
    """Whether Java's ``Double.parseDouble`` (Spark's CSV reader) takes ``value``, or Python's
    ``float`` does (wider: ``inf``, ``1_0``, which only makes :func:`fits` more lenient)."""
    if value[-1:] in ("d", "D", "f", "F") and not value.lower().endswith("inf"):
        value = value[:-1]
    try:
        float(value)
    except ValueError:
        try:
            float.fromhex(value)
        except ValueError:
            return False
    return True


def _json_fits(declared: str, value: object) -> bool:
    if isinstance(value, bool):
        return declared == "boolean"
    if declared in _RANGES:
        low, high = _RANGES[declared]
        return isinstance(value, int) and low <= value <= high
    if declared in ("float", "double"):
        return isinstance(value, int | float) or (isinstance(value, str) and _java_double(value))
    if declared == "boolean":
        return False
    if declared.startswith("decimal"):
        return isinstance(value, int | float) or (isinstance(value, str) and _decimal(value))
    if declared in ("date", "timestamp", "timestamp_ntz"):
        if isinstance(value, int | float):
            return declared != "date"  # a number is seconds since the epoch (not a date)
        return isinstance(value, str) and bool(_DIGIT.search(value))
    return True


def _decimal(value: str) -> bool:
    try:
        Decimal(value.replace(",", ""))
    except InvalidOperation:
        return False
    return True


def type_change(
    declared: str, values: Iterable[object], *, text: bool, float_words: Iterable[str] = ()
) -> str | None:
    """The type a column's sampled ``values`` are when it is not the ``declared`` one: at least
    :data:`MIN_SAMPLED_VALUES` values and none of them :func:`fits`. None: the values fit, or
    some do (the others are malformed records, for the quarantine), or too few to tell."""
    sampled = [v for v in values if v is not None and v != ""]
    if len(sampled) < MIN_SAMPLED_VALUES:
        return None
    words = frozenset(float_words)
    if any(fits(declared, v, text=text, float_words=words) for v in sampled):
        return None
    return observed_type(sampled, text=text)
