"""``schema.mode`` for column sources (Delta tables, JDBC, HTTP APIs, Parquet/CSV/JSON folders):
what a column, time or unit run does when the rows a source hands it stop matching the table.

A column source's rows are a lazy Spark frame whose schema is known before a row is read: a
Delta source's from its log (the current snapshot), a JDBC source's from the result set's
columns (Spark resolves it at ``load``), an API's from its declared DDL and its records' keys.
That schema is the source's *layout* (:mod:`~watermark_assets.sources.schema_drift`, one
"file": the source's location); a folder's files each state theirs
(:attr:`~watermark_assets.sources.column.ColumnRead.layouts`: a change is named with its file).
It is compared with the *declared* columns (:func:`declared_columns`: the source's DDL, then
the target table's data columns it lacks; none yet: the source's own,
:attr:`~watermark_assets.sources.column.ColumnRead.declared`) before anything is written.
Declared columns a source hands as text (a CSV/JSON folder under rescue or ignore,
:attr:`~watermark_assets.sources.column.ColumnRead.text_columns`) are parsed here: a value that
does not parse is rescued, or nulled and counted, as a value of a changed type is:

- ``fail``: any change raises :class:`~watermark_assets.exceptions.SchemaChangeError` naming the
  source, the column, both types and the fix; nothing is staged or committed;
- ``add_columns``: the new columns are read (typed by ``schema.hints``, else the source's type)
  and the commit adds them; a type Delta may widen (int -> bigint, float -> double...) is
  widened by the commit; any other type change fails as in ``fail``;
- ``rescue``: new columns, and values of a changed type that the table's type cannot hold, go to
  ``_rescued_data`` as ``{"column": "raw value", ..., "_source": "<location>"}``; the table's
  columns keep their types;
- ``ignore``: new columns are left out, values the table's type cannot hold are NULL; both are
  named and counted (``schema/ignored_columns``, ``schema/values_nulled``).

A type the declared one holds without loss (:func:`~watermark_assets.sources.schema_drift.holds`,
e.g. an int source column into a bigint table column) is cast to the declared type, whatever
the mode. The commit's permissions are :meth:`~watermark_assets.delta.schema_change.
SchemaEvolution.for_mode` of the same mode (``runs/column.py``, ``runs/window_commit.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pyarrow as pa

from watermark_assets.config.schema import SchemaMode, SchemaPolicy
from watermark_assets.delta.orphans import open_delta_table
from watermark_assets.delta.schema_change import WIDENINGS
from watermark_assets.exceptions import SchemaChangeError
from watermark_assets.names import RESCUED_DATA_COLUMN, RESCUED_SOURCE_KEY
from watermark_assets.sources.column import ColumnRead
from watermark_assets.sources.schema_drift import (
    ColumnChange,
    Layout,
    changes,
    holds,
    type_changes,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation

__all__ = [
    "ColumnSchemaRead",
    "apply_schema_policy",
    "declared_columns",
    "source_changes",
    "table_columns",
]

#: Spark's type names -> Delta's, for the widenings the commit may make (``WIDENINGS``).
_DELTA_NAMES = {
    "tinyint": "byte",
    "smallint": "short",
    "int": "integer",
    "bigint": "long",
    "float": "float",
    "double": "double",
}
_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double")


def declared_columns(
    schema_ddl: str | None, table_uri: str, own: Sequence[str] = ()
) -> list[tuple[str, str]] | None:
    """``schema_ddl``'s columns (Spark DDL), then the target table's columns it lacks (added by
    an earlier ``add_columns`` run), less the table's ``own`` columns (lineage, rescued,
    derived), as (name, Spark type); None when neither is known (no DDL, no table yet)."""
    from watermark_assets.spark.ddl import parse_read_schema

    declared: list[tuple[str, str]] = []
    if schema_ddl:
        declared = [(c.name, c.type) for c in parse_read_schema(schema_ddl)]
    declared += table_columns(table_uri, [*own, *(name for name, _ in declared)])
    return declared or None


def table_columns(table_uri: str, skip: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The Delta table's columns as (name, Spark type), but those in ``skip``
    (case-insensitive); none when there is no table yet. One snapshot read."""
    table = open_delta_table(table_uri)
    if table is None:
        return []
    from pyspark.sql.pandas.types import from_arrow_type

    skipped = {name.lower() for name in skip}
    return [
        (f.name, from_arrow_type(f.type, prefer_timestamp_ntz=True).simpleString())
        for f in pa.schema(table.schema().to_arrow())
        if f.name.lower() not in skipped
    ]


def source_changes(
    declared: Sequence[tuple[str, str]], layout: Layout, origin: str
) -> list[ColumnChange]:
    """How a column source's columns (``layout``: name, Spark type or None when the source does
    not say) differ from the ``declared`` ones: what :func:`apply_schema_policy` compares a read
    with, also for a sensor that read only the source's schema (no Spark)."""
    return changes(declared, {origin: layout}, what="source")


def widenable(declared: str, found: str) -> bool:
    """Whether the commit may widen a column of Spark type ``declared`` to ``found``."""
    wider = WIDENINGS.get(_DELTA_NAMES.get(declared, ""), frozenset())
    return _DELTA_NAMES.get(found, "") in wider


@dataclass(frozen=True)
class ColumnSchemaRead:
    """What :func:`apply_schema_policy` did to a read: the ``mode``, the ``origin`` (the
    source's location), the columns the commit adds (``added``) or widens (``widened``), the
    columns left out (``ignored``) and, once the rows are written, how many values it nulled
    (``ignore``) or rescued (``rescue``) per column, and rows rescued."""

    mode: str
    origin: str
    changes: tuple[ColumnChange, ...] = ()
    added: tuple[str, ...] = ()
    widened: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()
    counted: Observation | None = field(default=None, compare=False, repr=False)

    @property
    def hashed_as(self) -> dict[str, str]:
        """The widened columns' declared (older) types: a boundary row is hashed in them."""
        return {c.column: str(c.declared) for c in self.changes if c.column in self.widened}

    def counts(self) -> tuple[dict[str, int], int]:
        """(values per column, rows) nulled or rescued; call only once the rows were written
        (the observation is filled by that write)."""
        if self.counted is None:
            return {}, 0
        values = {k: int(v) for k, v in self.counted.get.items()}
        rows = values.pop(_ROWS, 0)
        return {k: n for k, n in values.items() if n}, rows


_ROWS = "_rows"


def apply_schema_policy(
    read: ColumnRead,
    *,
    pipeline: str,
    policy: SchemaPolicy,
    declared: Sequence[tuple[str, str]] | None,
    origin: str,
) -> tuple[ColumnRead, ColumnSchemaRead | None]:
    """``read`` under ``policy`` against the ``declared`` columns (module docstring); the frame
    stays lazy (only its schema is looked at). None: nothing declared yet (the first run creates
    the table from the source's columns)."""
    if declared is None:
        return read, None
    frame = read.frame
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    spelled = {name.lower(): name for name in types}  # the frame's spelling of a file's column
    if read.layouts:  # a folder: each change named with its file
        found = changes(declared, read.layouts, what="file")
    else:
        found = source_changes(declared, tuple(types.items()), origin)
    found = [c for c in found if c.column.lower() in spelled]
    want = {name.lower(): kind for name, kind in declared}
    mode = policy.mode
    frame = _cast_held(frame, types, want)
    outcome = ColumnSchemaRead(mode=mode.value, origin=origin, changes=tuple(found))
    # declared columns handed as text (a CSV/JSON folder under rescue or ignore): parsed
    parsed = {
        spelled[name.lower()]: _unparsed(spelled[name.lower()], want[name.lower()])
        for name in read.text_columns
        if name.lower() in spelled
        and want.get(name.lower(), "string") != "string"
        and mode in (SchemaMode.RESCUE, SchemaMode.IGNORE)
    }
    if not found and not parsed:
        return replace(read, frame=frame), outcome
    if mode is SchemaMode.FAIL:
        raise SchemaChangeError(pipeline, mode.value, found, origin="columns")
    retyped = type_changes(found)
    new = list(dict.fromkeys(spelled[c.column.lower()] for c in found if c.is_new))
    if mode is SchemaMode.ADD_COLUMNS:
        refused = [c for c in retyped if not widenable(str(c.declared), str(c.found))]
        if refused:
            raise SchemaChangeError(pipeline, mode.value, refused, origin="columns")
        for name in new:  # typed by the hint, else as read (a footer's type, a header's text)
            hinted = policy.hint_of(name) or types[name]
            if hinted != types[name]:
                frame = frame.withColumn(name, _try_cast(name, hinted))
        read = replace(read, frame=frame)
        widened = tuple(dict.fromkeys(spelled[c.column.lower()] for c in retyped))
        return read, replace(outcome, added=tuple(new), widened=widened)
    fits = {
        spelled[c.column.lower()]: _misfit(
            spelled[c.column.lower()], str(c.declared), types[spelled[c.column.lower()]]
        )
        for c in retyped
    }
    fits |= parsed
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    counted = Observation(f"schema_mode_{mode.value}_{pipeline}")
    if mode is SchemaMode.IGNORE:
        kept = frame.observe(
            counted,
            *[F.count_if(bad).alias(name) for name, (bad, _) in fits.items()],
            F.lit(0).alias(_ROWS),
        )
        for name, (_, cast) in fits.items():
            kept = kept.withColumn(name, cast)
        named = tuple(dict.fromkeys((*(read.columns_ignored or ()), *new)))
        read = replace(read, frame=kept.drop(*new), columns_ignored=named)
        return read, replace(outcome, ignored=tuple(new), counted=counted)
    # rescue: a new column's non-null value, or a value its table type cannot hold
    rescued = {name: F.col(_quoted(name)).isNotNull() for name in new}
    rescued |= {name: bad for name, (bad, _) in fits.items()}
    anything = F.lit(False)
    for test in rescued.values():
        anything = anything | test
    parts = [F.when(test, _text(frame, name)).alias(name) for name, test in rescued.items()]
    document = F.to_json(F.struct(*parts, F.lit(origin).alias(RESCUED_SOURCE_KEY)))
    kept = frame.withColumn(RESCUED_DATA_COLUMN, F.when(anything, document))
    kept = kept.observe(
        counted,
        *[F.count_if(test).alias(name) for name, test in rescued.items()],
        F.count_if(anything).alias(_ROWS),
    )
    for name, (_, cast) in fits.items():
        kept = kept.withColumn(name, cast)
    read = replace(read, frame=kept.drop(*new))
    return read, replace(outcome, added=(RESCUED_DATA_COLUMN,), counted=counted)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _try_cast(name: str, kind: str) -> Column:
    from pyspark.sql import functions as F

    return F.expr(f"try_cast({_quoted(name)} AS {kind})")


def _misfit(name: str, declared: str, found: str) -> tuple[Column, Column]:
    """(whether a value does not fit ``declared``: not NULL, and its cast is NULL or loses
    something, the cast value)."""
    from pyspark.sql import functions as F

    raw = F.col(_quoted(name))
    cast = _try_cast(name, declared)
    bad = raw.isNotNull() & (cast.isNull() | (cast.cast(found) != raw))
    return bad, F.when(~bad, cast)


def _unparsed(name: str, declared: str) -> tuple[Column, Column]:
    """(whether a text value does not parse to ``declared``: not NULL, its cast NULL, the cast
    value): :func:`_misfit` for a column whose files state no type (a CSV or JSON text)."""
    from pyspark.sql import functions as F

    cast = _try_cast(name, declared)
    bad = F.col(_quoted(name)).isNotNull() & cast.isNull()
    return bad, cast


def _text(frame: DataFrame, name: str) -> Column:
    """A value as the text ``_rescued_data`` keeps: JSON for a nested value, else its string."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    column = F.col(_quoted(name))
    nested = isinstance(frame.schema[name].dataType, (T.StructType, T.ArrayType, T.MapType))
    return F.to_json(column) if nested else column.cast("string")


def _cast_held(frame: DataFrame, types: dict[str, str], want: dict[str, str]) -> DataFrame:
    """Numeric columns whose declared type holds the source's without loss, cast to it (the
    commit then finds the table's type)."""
    for name, found in types.items():
        declared = want.get(name.lower())
        numeric = declared in _NUMERIC and found in _NUMERIC
        if declared is not None and declared != found and numeric and holds(declared, found):
            frame = frame.withColumn(name, _try_cast(name, declared))
    return frame
