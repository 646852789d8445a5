"""The read predicate of a column watermark, as a value object that each source renders.

:func:`predicate` turns a watermark and an operator into a :class:`Predicate`: a disjunction of
conjunctions of column comparisons (disjunctive normal form). A tuple comparison
``(a, b) > (x, y)`` is expanded, because neither SQL engines' statistics nor Parquet/Delta file
skipping understand row-value comparisons, while every engine prunes on plain column comparisons::

    (a > x) OR (a = x AND b > y)          operator >
    (a > x) OR (a = x AND b >= y)         operator >=  (only the last column is inclusive)
    (a = x AND b = y)                     operator =   (a unit run: exactly one value)

:func:`below` adds an exclusive upper bound on the leading column to every clause (a replay
chunk reads ``lower <= row < upper``, closed at its start, open at its end)::

    (a >= x AND a < u)                    one column, operator >=, upper u
    (a > x AND a < u) OR (a = x AND b >= y AND a < u)

:func:`within` adds an equality on another column to every clause (a time x unit cell reads one
unit's rows of a window)::

    (t >= x AND t < u AND unit = 'a')

An empty watermark gives the predicate that admits everything (no clause at all: render nothing,
read everything). Renderers:

- :func:`to_sql`: SQL text for Spark SQL (``df.where``) or PostgreSQL/ANSI (a JDBC ``WHERE``),
  with identifiers and literals quoted for that dialect;
- :func:`to_dnf`: the ``[[(column, op, value), ...], ...]`` filters that
  ``deltalake.DeltaTable.to_pyarrow_table(filters=...)`` and ``pyarrow.parquet.read_table`` take;
- :func:`to_http_params`: query or body parameters for an HTTP API (seed's
  ``watermark_param_mapping`` / ``watermark_param_format``).

Standard library only; the sources turn these into engine calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time
from enum import Enum
from typing import Any

from watermark_assets.core.column.watermark import (
    ColumnValue,
    ColumnWatermark,
    WatermarkOperator,
)


@dataclass(frozen=True)
class Comparison:
    """``column op value`` with ``op`` one of ``=``, ``>``, ``>=`` (``<``: an upper bound)."""

    column: str
    op: str
    value: ColumnValue


@dataclass(frozen=True)
class Predicate:
    """``OR`` of ``AND``-clauses of comparisons; no clause admits every row.

    ``watermark`` and ``operator`` are kept for display (the materialization metadata shows the
    predicate as text and the operator).
    """

    clauses: tuple[tuple[Comparison, ...], ...]
    watermark: ColumnWatermark
    operator: WatermarkOperator
    #: the exclusive upper bound on the leading column (:func:`below`); None: no upper bound
    upper: Comparison | None = None

    @property
    def admits_everything(self) -> bool:
        """True for an empty watermark: the source reads everything, with no filter."""
        return not self.clauses

    def admits(self, row: Mapping[str, Any]) -> bool:
        """Evaluate the expanded form on one row (the CSV/JSON fallback filter, and the proof in
        the tests that the expansion equals the tuple comparison)."""
        if self.admits_everything:
            return True
        return any(all(_holds(row.get(c.column), c) for c in clause) for clause in self.clauses)


def predicate(watermark: ColumnWatermark, operator: WatermarkOperator) -> Predicate:
    """The expanded tuple comparison ``row (operator) watermark`` (module docstring)."""
    if watermark.is_empty:
        return Predicate((), watermark, operator)
    columns, values = watermark.columns, watermark.key()
    if operator is WatermarkOperator.EQUAL:
        clause = tuple(Comparison(c, "=", v) for c, v in zip(columns, values))
        return Predicate((clause,), watermark, operator)
    clauses = []
    for depth, (column, value) in enumerate(zip(columns, values)):
        equal = tuple(Comparison(c, "=", v) for c, v in zip(columns[:depth], values[:depth]))
        last = depth == len(columns) - 1
        op = operator.value if last else ">"
        clauses.append((*equal, Comparison(column, op, value)))
    return Predicate(tuple(clauses), watermark, operator)


def below(pred: Predicate, column: str, value: ColumnValue) -> Predicate:
    """``pred AND column < value``: an exclusive upper bound (a replay chunk's end).

    ``column`` must be the leading watermark column (a chunk is a range of it). The bound joins
    every clause, so the result stays in disjunctive normal form; an empty watermark gives the
    single clause ``column < value``. A second upper bound is refused (one chunk, one end).
    """
    if pred.upper is not None:
        raise ValueError(f"the predicate already has the upper bound {pred.upper}")
    if not pred.watermark.is_empty and column != pred.watermark.columns[0]:
        raise ValueError(
            f"upper bound on {column!r}: a chunk bounds the leading watermark column "
            f"{pred.watermark.columns[0]!r}"
        )
    upper = Comparison(column, "<", value)
    clauses = tuple((*clause, upper) for clause in pred.clauses) or ((upper,),)
    return Predicate(clauses, pred.watermark, pred.operator, upper)


def within(pred: Predicate, column: str, value: ColumnValue) -> Predicate:
    """``pred AND column = value``: every row read also has this value (a time x unit cell's
    unit: ``(t >= start AND t < end AND unit = 'a')``).

    The equality is appended to every clause, so the result stays in disjunctive normal form, the
    leading comparison (file skipping by statistics, :func:`leading_bound`) is unchanged, and
    every renderer (SQL, DNF, Spark) sends it to the source. ``column`` must not be a watermark
    column (the watermark's own comparisons bound those).
    """
    if column in pred.watermark.columns:
        raise ValueError(f"{column!r} is a watermark column; its bound is the watermark's")
    equal = Comparison(column, "=", value)
    clauses = tuple((*clause, equal) for clause in pred.clauses) or ((equal,),)
    return Predicate(clauses, pred.watermark, pred.operator, pred.upper)


def leading_bound(pred: Predicate) -> Comparison | None:
    """The bound on the first watermark column that every admitted row meets; None: no bound.

    Every clause of the expansion starts with the first column (``a > x`` or ``a = x AND ...``),
    so an admitted row has ``a >= x``, or ``a > x`` when the predicate is the single clause
    ``a > x``, or ``a = x`` for an equality (a unit). File skipping by statistics needs only
    this: a file whose maximum of ``a`` fails the bound holds no admitted row (for ``=`` also one
    whose minimum is above ``x``).
    """
    if pred.admits_everything or pred.watermark.is_empty:
        return None  # no lower bound (an upper bound alone skips nothing here)
    first = pred.clauses[0][0]
    if pred.operator is WatermarkOperator.EQUAL:
        return first  # one clause of equalities: the leading column is exactly this value
    strict = len(pred.clauses) == 1 and first.op == ">"
    return Comparison(first.column, ">" if strict else ">=", first.value)


class SqlDialect(str, Enum):
    """Quoting rules of the engines that receive SQL text."""

    SPARK = "spark"
    """Spark SQL: backtick identifiers; backslash escapes in string literals; TIMESTAMP (aware,
    session zone applied to the offset given) and TIMESTAMP_NTZ (naive) literals."""
    POSTGRES = "postgres"
    """PostgreSQL and ANSI SQL: double-quoted identifiers; ``''`` in string literals
    (standard_conforming_strings); TIMESTAMPTZ and TIMESTAMP literals."""


def to_sql(pred: Predicate, dialect: SqlDialect) -> str:
    """The predicate as a boolean SQL expression; ``TRUE`` when it admits everything."""
    if pred.admits_everything:
        return "TRUE"
    rendered = [
        " AND ".join(
            f"{quote_identifier(c.column, dialect)} {c.op} {sql_literal(c.value, dialect)}"
            for c in clause
        )
        for clause in pred.clauses
    ]
    if len(rendered) == 1:
        return rendered[0]
    return " OR ".join(f"({text})" for text in rendered)


def quote_identifier(name: str, dialect: SqlDialect) -> str:
    """``name`` as a quoted identifier (embedded quote characters doubled)."""
    if dialect is SqlDialect.SPARK:
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def sql_literal(value: ColumnValue, dialect: SqlDialect) -> str:
    """``value`` as a typed SQL literal of ``dialect``."""
    if isinstance(value, bool):  # never in a watermark; refuse rather than render 1/0
        raise TypeError(f"{value!r}: booleans are not watermark values")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _string(value, dialect)
    if isinstance(value, datetime):
        text = value.isoformat(sep=" ")
        aware = value.utcoffset() is not None
        if dialect is SqlDialect.SPARK:
            return f"TIMESTAMP{'' if aware else '_NTZ'} {_string(text, dialect)}"
        return f"TIMESTAMP{'TZ' if aware else ''} {_string(text, dialect)}"
    if isinstance(value, date):
        return f"DATE {_string(value.isoformat(), dialect)}"
    if isinstance(value, time):
        # PostgreSQL's TIME drops an offset silently; an aware time needs TIMETZ.
        zone = "TZ" if value.utcoffset() is not None and dialect is SqlDialect.POSTGRES else ""
        return f"TIME{zone} {_string(value.isoformat(), dialect)}"
    raise TypeError(f"{value!r} ({type(value).__name__}) has no SQL literal here")


def to_dnf(pred: Predicate) -> list[list[tuple[str, str, Any]]] | None:
    """Filters in the DNF that deltalake and ``pyarrow.parquet`` accept; None admits everything.

    ``=`` is spelled ``==`` as those APIs expect. Aware datetimes stay aware UTC datetimes (a
    Delta ``timestamp`` column is UTC-adjusted); naive ones match ``timestamp_ntz`` columns.
    """
    if pred.admits_everything:
        return None
    return [
        [(c.column, "==" if c.op == "=" else c.op, c.value) for c in clause]
        for clause in pred.clauses
    ]


def to_http_params(
    watermark: ColumnWatermark,
    mapping: Mapping[str, str],
    *,
    value_format: str | None = None,
) -> dict[str, str]:
    """Request parameters from the watermark: ``{mapping[column]: formatted value}``.

    ``mapping`` is the seed's ``watermark_param_mapping`` (watermark column -> API parameter);
    ``value_format`` its ``watermark_param_format`` (a strftime format for temporal values;
    ISO 8601 when None). An empty watermark sends no parameter. An API filters with its own
    semantics (often ``>=`` on one field), so the source still applies the exact
    :class:`Predicate` to the rows it receives.
    """
    if watermark.is_empty:
        return {}
    unknown = sorted(set(mapping) - set(watermark.columns))
    if unknown:
        raise ValueError(
            f"watermark_param_mapping names {unknown}, which are not watermark columns "
            f"{list(watermark.columns)}; map only watermark columns"
        )
    params = {}
    for column, value in zip(watermark.columns, watermark.values):
        if column in mapping:
            params[mapping[column]] = _format(value, value_format)
    return params


def _format(value: object, value_format: str | None) -> str:
    if isinstance(value, (datetime, date, time)):
        return value.strftime(value_format) if value_format else value.isoformat()
    return str(value)


def _string(text: str, dialect: SqlDialect) -> str:
    if dialect is SqlDialect.SPARK:
        text = text.replace("\\", "\\\\").replace("'", "\\'")
    else:
        text = text.replace("'", "''")
    return f"'{text}'"


def _holds(value: Any, comparison: Comparison) -> bool:
    if value is None:
        return False  # SQL: null compares as unknown
    if comparison.op == "=":
        return bool(value == comparison.value)
    if comparison.op == ">":
        return bool(value > comparison.value)
    if comparison.op == "<":
        return bool(value < comparison.value)
    return bool(value >= comparison.value)
