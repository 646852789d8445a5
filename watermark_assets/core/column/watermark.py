"""The column watermark (kind ``"column"``): the greatest row read, by an ordered tuple of columns.

A column watermark holds the values of the configured watermark columns (``updated_at``, or
``(updated_at, id)``) of the greatest row committed so far. Its JSON form is the seed's object,
one key per column in comparison order (:mod:`.serialization`)::

    {"updated_at": {"__datetime__": "2026-04-03T09:15:00+00:00"}}

**Order.** Several columns compare as a tuple, in the configured order (lexicographically: the
first column decides, the next breaks ties). With ``(updated_at, id)`` a run that stops in the
middle of 10,000 rows sharing one ``updated_at`` resumes exactly after the last ``id`` it committed:
a single timestamp column with ``>`` would skip the rest of that timestamp, and with ``>=`` re-read
all of it. The tuple order is total once each column holds one type, which makes "greatest" and
"never backwards" well defined.

**Empty** (the seed's ``is_watermark_empty``): None, ``{}``, or every value None means "read
everything"; the first run of a new dataflow has an empty watermark. A watermark with *some* values
None is refused (:class:`~watermark_assets.core.errors.PartialWatermarkError`): it has no place in
the tuple order. Rows whose watermark columns hold a null never advance a watermark.

**Values.** int and float (one numeric type), str, date, time, datetime. Aware datetimes are
normalised to UTC at construction (the same instant, so the order is unchanged). Naive datetimes
are kept, not refused: a ``timestamp without time zone`` column (PostgreSQL, Spark's
``TIMESTAMP_NTZ``) yields naive values, and giving them a zone would be a guess. A column is
either naive or aware for good: mixing the two raises
:class:`~watermark_assets.core.errors.ColumnValueTypeError`, so an aware and a naive value are
never compared. Booleans, NaN and other types are refused.

**Moving.** :meth:`ColumnWatermark.advance` (the only way forward) and
:meth:`~ColumnWatermark.merge` take the greater tuple; neither ever lowers a watermark. Rows
re-read by a backward look-back are below the watermark and leave it unchanged.

Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timezone
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from watermark_assets.core.column import serialization
from watermark_assets.core.errors import (
    ColumnMismatchError,
    ColumnValueTypeError,
    PartialWatermarkError,
    WatermarkJSONError,
)
from watermark_assets.core.text import value_text
from watermark_assets.core.watermark import Watermark, register

ColumnValue: TypeAlias = int | float | str | datetime | date | time
"""A value a watermark column can hold."""

Observed: TypeAlias = "ColumnWatermark | Mapping[str, ColumnValue | None] | None"
"""What :meth:`ColumnWatermark.advance` takes: the greatest row committed (its column values)."""


class WatermarkOperator(str, Enum):
    """How the read compares rows with the watermark (seed 001, "Watermark operator").

    =========== ========= ==========================================
    mode        operator  semantics
    =========== ========= ==========================================
    Normal ETL  ``>``     exclusive: skip the exact last-saved row
    Replay chunk ``>=``   inclusive: include the chunk start value
    Unit run    ``=``     exactly the rows of one value (a unit id)
    =========== ========= ==========================================

    ``=`` is not the seed's: a unit-watermark run (seed 003) reads the rows of one unit, a chunk
    whose lower and upper bounds are the same value (``[u, u]``).

    The value is the seed's spelling (``watermark_operator=">="``): ``WatermarkOperator(">=")``.
    """

    GREATER_THAN = ">"
    GREATER_OR_EQUAL = ">="
    EQUAL = "="

    @classmethod
    def for_run(cls, *, replay: bool) -> WatermarkOperator:
        """``>`` for a normal run, ``>=`` for a replay chunk."""
        return cls.GREATER_OR_EQUAL if replay else cls.GREATER_THAN

    def admits(self, row: tuple[Any, ...], bound: tuple[Any, ...]) -> bool:
        """Whether a row's tuple passes this operator against the watermark's tuple."""
        if self is WatermarkOperator.EQUAL:
            return row == bound
        return row > bound if self is WatermarkOperator.GREATER_THAN else row >= bound


GreaterThan = WatermarkOperator.GREATER_THAN
"""Normal runs: only rows above the last saved watermark."""
GreaterOrEqual = WatermarkOperator.GREATER_OR_EQUAL
"""Replay chunks: the chunk's lower bound included."""
Equal = WatermarkOperator.EQUAL
"""Unit runs: exactly the rows holding the unit's id."""


@register
@dataclass(frozen=True)
class ColumnWatermark:
    """The greatest row read, as an ordered tuple of column values (module docstring).

    ``columns`` are the watermark columns in comparison order; ``values`` their values, all None
    for an empty watermark. Build one with :meth:`of` (from the seed's dict), :meth:`empty`, or
    :meth:`from_json`.
    """

    kind: ClassVar[str] = "column"

    columns: tuple[str, ...]
    values: tuple[ColumnValue | None, ...]

    def __post_init__(self) -> None:
        columns, values = tuple(self.columns), tuple(self.values)
        if len(columns) != len(values):
            raise ValueError(
                f"watermark columns {list(columns)} and values {list(values)} differ in length; "
                "give one value per column"
            )
        if len(set(columns)) != len(columns) or not all(isinstance(c, str) and c for c in columns):
            raise ValueError(
                f"watermark columns {list(columns)} must be distinct, non-empty strings"
            )
        present = [v is not None for v in values]
        if any(present) and not all(present):
            raise PartialWatermarkError(dict(zip(columns, values)))
        normalised = tuple(_normalise(c, v) for c, v in zip(columns, values))
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "values", normalised)

    @classmethod
    def of(cls, values: Mapping[str, ColumnValue | None] | None) -> ColumnWatermark:
        """From the seed's dict (None and ``{}`` give an empty watermark without columns)."""
        values = values or {}
        return cls(tuple(values), tuple(values.values()))

    @classmethod
    def empty(cls, columns: Sequence[str] = ()) -> ColumnWatermark:
        """Nothing read yet over ``columns``."""
        return cls(tuple(columns), (None,) * len(columns))

    @property
    def is_empty(self) -> bool:
        """The seed's ``is_watermark_empty``: no columns, or every value None."""
        return all(v is None for v in self.values)

    def as_dict(self) -> dict[str, ColumnValue | None]:
        """The seed's dict, columns in order (what ``WatermarkManager.get_watermark`` returns)."""
        return dict(zip(self.columns, self.values))

    def key(self) -> tuple[ColumnValue, ...]:
        """The tuple compared in order; ValueError on an empty watermark (it has no position)."""
        if self.is_empty:
            raise ValueError("an empty watermark has no key: it is below every row")
        return tuple(v for v in self.values if v is not None)

    def admits(self, row: Mapping[str, Any], operator: WatermarkOperator) -> bool:
        """Whether ``row`` is read under this watermark with ``operator`` (in-engine fallback
        filter, and the reference for every rendered predicate). An empty watermark admits every
        row; a row with a null watermark column is admitted only then (SQL: null is not > x)."""
        if self.is_empty:
            return True
        row_values = tuple(row[c] for c in self.columns)
        if any(v is None for v in row_values):
            return False
        return operator.admits(row_values, self.key())

    def covers(self, other: ColumnWatermark) -> bool:
        """Whether ``self`` is at or above ``other`` in the watermark order (empty is lowest)."""
        return self.merge(other) == self

    def advance(self, observed: Observed) -> ColumnWatermark:
        """The watermark after the rows up to ``observed`` were committed; the only way forward.

        ``observed`` is the greatest row committed (its watermark column values, a mapping or a
        ColumnWatermark). The result is the greater of the two tuples: never lower than ``self``
        (rows re-read by a look-back leave it unchanged). None or an empty observation: ``self``.
        Different columns raise ColumnMismatchError; a value of another type than the column's
        raises ColumnValueTypeError.
        """
        if observed is None:
            return self
        other = observed if isinstance(observed, ColumnWatermark) else ColumnWatermark.of(observed)
        return self.merge(other)

    def merge(self, other: ColumnWatermark) -> ColumnWatermark:
        """The greater of the two in the tuple order; commutative, associative, idempotent.

        An empty watermark is below every other; two empty ones merge to the one that names
        columns. Watermarks over different columns raise ColumnMismatchError.
        """
        if self.columns != other.columns and self.columns and other.columns:
            raise ColumnMismatchError(self.columns, other.columns)
        if other.is_empty:
            return self if self.columns or not other.columns else other
        if self.is_empty:
            return other
        for column, mine, theirs in zip(self.columns, self.values, other.values):
            if _family(column, mine) != _family(column, theirs):
                raise ColumnValueTypeError(
                    column, theirs, f"a value of the column's type, like {mine!r}"
                )
        return other if other.key() > self.key() else self

    def to_json(self) -> str:
        """The seed's JSON object (columns in order, sentinels for temporal values)."""
        return serialization.dumps(self.as_dict())

    @classmethod
    def from_json(cls, text: str) -> ColumnWatermark:
        """Read :meth:`to_json`'s text; ``null`` and ``{}`` are the empty watermark."""
        value = serialization.loads(text)
        if value is not None and not isinstance(value, dict):
            raise WatermarkJSONError(text, "a column watermark is a JSON object or null")
        return cls.of(value)

    def __str__(self) -> str:
        if self.is_empty:
            return "(empty: read everything)"
        return ", ".join(f"{c}={value_text(v)}" for c, v in zip(self.columns, self.values))


def greatest_row(columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> ColumnWatermark:
    """The watermark of the greatest row of ``rows`` over ``columns`` (empty when none qualifies).

    Rows with a null in a watermark column are skipped. The reference implementation of what a
    source computes during its read (Spark does it with an aggregate, without collecting rows).
    """
    columns = tuple(columns)
    best: tuple[Any, ...] | None = None
    for row in rows:
        values = tuple(row[c] for c in columns)
        if any(v is None for v in values):
            continue
        candidate = ColumnWatermark(columns, values).key()  # validates and normalises
        if best is None or candidate > best:
            best = candidate
    return ColumnWatermark.empty(columns) if best is None else ColumnWatermark(columns, best)


def is_watermark_empty(watermark: Mapping[str, Any] | ColumnWatermark | None) -> bool:
    """The seed's predicate: None, ``{}``, or every value None."""
    if watermark is None:
        return True
    if isinstance(watermark, ColumnWatermark):
        return watermark.is_empty
    return all(v is None for v in watermark.values())


def _normalise(column: str, value: ColumnValue | None) -> ColumnValue | None:
    if value is None:
        return None
    _family(column, value)
    if isinstance(value, datetime) and _aware(value):
        return value.astimezone(timezone.utc)
    return value


def _family(column: str, value: object) -> str:
    """The type family of a value: values of one column must share it to be compared."""
    if isinstance(value, bool):
        raise ColumnValueTypeError(column, value, "a number, string, date, time or datetime")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ColumnValueTypeError(column, value, "a finite number (NaN has no order)")
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, datetime):
        return "aware datetime" if _aware(value) else "naive datetime"
    if isinstance(value, date):
        return "date"
    if isinstance(value, time):
        return "aware time" if value.utcoffset() is not None else "naive time"
    raise ColumnValueTypeError(column, value, "a number, string, date, time or datetime")


def _aware(value: datetime) -> bool:
    return value.tzinfo is not None and value.utcoffset() is not None


if TYPE_CHECKING:
    # Static proof that the column kind satisfies the contract (mypy checks this assignment).
    def _conforms(w: ColumnWatermark) -> Watermark[Observed]:
        return w
