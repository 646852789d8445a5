"""A batch of files read layout by layout, under a pipeline's schema policy (``schema.mode``).

Files are grouped by their layout (:mod:`watermark_assets.sources.schema_drift`: a CSV header, a
Parquet footer): each group is read in its own columns, then the declared columns are taken BY
NAME (a CSV header that gains a column in the middle moves no value), and the groups are unioned.
JSON is read by name by Spark itself: one read, the schema plus the keys the files bring.

Per ``mode``:

- ``fail`` and ``add_columns``: declared columns are read in their declared types (a CSV/JSON value
  that does not parse makes its record malformed: the quarantine, as before); ``add_columns``
  also reads the new columns (``added``: name -> type; NULL in files without them);
- ``rescue`` and ``ignore``: declared primitive columns of CSV/JSON are read as text and cast
  (``try_cast``), a Parquet column whose footer type changed is read in that type and cast: a
  non-null value whose cast is NULL does not fit. ``rescue`` keeps it, and every column the
  schema lacks, in :data:`~watermark_assets.names.RESCUED_DATA_COLUMN` (JSON, with the file);
  ``ignore`` leaves it NULL. Either way a flag column per declared column marks the rows whose
  value did not fit (:attr:`LayoutRead.misfits`), for the write to count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

from watermark_assets.names import RESCUED_DATA_COLUMN, RESCUED_SOURCE_KEY
from watermark_assets.spark import io

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructField, StructType

    from watermark_assets.sources.schema_drift import Layout

#: Prefix of the flag columns that mark a value that did not fit (dropped before the write).
MISFIT_PREFIX = "_watermark_assets_misfit_"
_LOOSE_MODES = ("rescue", "ignore")


@dataclass(frozen=True)
class LayoutRead:
    """The rows of a batch under its schema policy."""

    frame: DataFrame
    #: declared column -> the flag column (in ``frame``) marking a row whose value did not fit
    misfits: Mapping[str, str]


def read_by_layout(
    spark: SparkSession,
    uris: Sequence[str],
    layouts: Sequence[Layout | None],
    *,
    format: str,
    declared: StructType,
    mode: str,
    added: Mapping[str, str],
    options: Mapping[str, str] | None,
    corrupt_column: str | None,
    file_column: str,
    reported_file_column: str | None = None,
    base_path: str | None = None,
) -> LayoutRead:
    """The rows of ``uris`` (each with its layout, in the same order) as the module docstring
    says: the ``declared`` columns, then the ``added`` ones, then the partition columns of
    ``name=value`` folders below ``base_path``, then (``rescue``) the rescued data, then the
    corrupt-record, file and reported-file columns, then the misfit flags."""
    from pyspark.sql.types import StringType, StructField, StructType

    fmt = "json" if format == "ndjson" else format
    groups: dict[Layout | None, list[str]] = {}
    if fmt == "json":  # Spark reads JSON by name: one read with every key the files bring
        union: dict[str, tuple[str, str | None]] = {}
        for layout in layouts:
            for name, kind in layout or ():
                union.setdefault(name.lower(), (name, kind))
        groups[tuple(union.values())] = list(uris)
    else:
        for uri, layout in zip(uris, layouts, strict=True):
            groups.setdefault(layout, []).append(uri)
    added_types = {name: _type(spark, kind) for name, kind in added.items()}
    frames = []
    misfits: dict[str, str] = {}
    for layout, group in groups.items():
        read_fields: list[StructField] = []
        seen: set[str] = set()
        for name, kind in _columns(fmt, layout, declared):
            lowered = name.lower()
            seen.add(lowered)
            want = _declared_type(declared, lowered)
            if want is not None:
                read_type = _read_type(spark, fmt, mode, want, kind)
            elif name in added_types and fmt != "parquet":
                read_type = added_types[name]
            elif kind is not None:
                read_type = _type(spark, kind)
            else:
                read_type = StringType()
            read_fields.append(StructField(name, read_type))
        if fmt != "csv" or layout is None:  # declared columns a file lacks are NULL
            read_fields += [f for f in declared.fields if f.name.lower() not in seen]
        frame = io.read_files(
            spark,
            group,
            format=fmt,
            schema=StructType(read_fields),
            options=options,
            corrupt_column=corrupt_column,
            file_column=file_column,
            reported_file_column=reported_file_column,
            base_path=base_path,
        )
        projected, flags = _project(frame, read_fields, declared, added_types, mode, file_column)
        misfits |= flags
        frames.append(projected)
    tail = [c for c in (corrupt_column, file_column, reported_file_column) if c is not None]
    targets = {f.name for f in declared.fields} | set(added_types) | set(tail)
    folders = [c for c in frames[0].columns if c not in targets and c not in misfits.values()]
    ordered = [
        *[f.name for f in declared.fields],
        *added_types,
        *[c for c in folders if c != RESCUED_DATA_COLUMN],
        *([RESCUED_DATA_COLUMN] if mode == "rescue" else []),
        *tail,
        *sorted(set(misfits.values())),
    ]
    frames = [_with_all(f, ordered) for f in frames]
    union_frame = reduce(lambda a, b: a.unionByName(b), frames)
    return LayoutRead(frame=union_frame.select(*[io._col(c) for c in ordered]), misfits=misfits)


def misfit_flag(index: int) -> str:
    """The flag column of the ``index``-th declared column."""
    return f"{MISFIT_PREFIX}{index}"


def _columns(fmt: str, layout: Layout | None, declared: StructType) -> list[tuple[str, str | None]]:
    """The columns a group is read in: a CSV header's, in its order (Spark's CSV reader takes a
    schema by position); a footer's or JSON keys (then the declared ones they lack); without a
    layout, the declared ones."""
    if layout is None:
        return [(f.name, None) for f in declared.fields]
    return list(layout)


def _declared_type(declared: StructType, lowered: str) -> DataType | None:
    for field in declared.fields:
        if field.name.lower() == lowered:
            return field.dataType
    return None


def _read_type(
    spark: SparkSession, fmt: str, mode: str, want: DataType, kind: str | None
) -> DataType:
    """The type a declared column is read in: its own, or (``rescue``/``ignore``) text for a
    CSV/JSON primitive, the footer's type for a Parquet column whose type changed."""
    from pyspark.sql.types import AtomicType, StringType, TimestampNTZType, TimestampType

    if fmt == "parquet":
        if kind is None or kind == want.simpleString():
            return want
        found = _type(spark, kind)
        timestamps = (TimestampType, TimestampNTZType)
        if isinstance(found, timestamps) and isinstance(want, timestamps):
            return want  # Spark reads either into either, as before
        return found
    if mode in _LOOSE_MODES and isinstance(want, AtomicType) and not isinstance(want, StringType):
        return StringType()
    return want


def _project(
    frame: DataFrame,
    read_fields: Sequence[StructField],
    declared: StructType,
    added: Mapping[str, DataType],
    mode: str,
    file_column: str,
) -> tuple[DataFrame, dict[str, str]]:
    """The group's rows in the target columns (module docstring), with its misfit flags."""
    from pyspark.sql import functions as F

    read = {f.name.lower(): f for f in read_fields}
    present = {c.lower(): c for c in frame.columns}
    out: list[Column] = []
    rescued: list[Column] = []
    flags: dict[str, str] = {}
    for index, field in enumerate(declared.fields):
        lowered = field.name.lower()
        if lowered not in present or lowered not in read:
            out.append(F.lit(None).cast(field.dataType).alias(field.name))
            continue
        raw = io._col(present[lowered])
        if read[lowered].dataType == field.dataType:
            out.append(raw.alias(field.name))
            continue
        value = raw.try_cast(field.dataType)
        misfit = raw.isNotNull() & value.isNull()
        out.append(value.alias(field.name))
        if mode in _LOOSE_MODES:
            flags[field.name] = misfit_flag(index)
            out.append(misfit.alias(flags[field.name]))
            rescued += [F.lit(field.name), F.when(misfit, _text(raw, read[lowered].dataType))]
    declared_names = {f.name.lower() for f in declared.fields}
    added_lowered = {name.lower(): name for name in added}
    for name, kind in added.items():
        lowered = name.lower()
        if lowered in present:
            column = io._col(present[lowered])
            if read[lowered].dataType != kind:
                column = column.try_cast(kind)
            out.append(column.alias(name))
        else:
            out.append(F.lit(None).cast(kind).alias(name))
    for lowered, field in read.items():
        if lowered in declared_names or lowered in added_lowered or lowered not in present:
            continue
        rescued += [F.lit(field.name), _text(io._col(present[lowered]), field.dataType)]
    if mode == "rescue":
        out.append(_rescued(rescued, file_column).alias(RESCUED_DATA_COLUMN))
    kept = {f.name.lower() for f in declared.fields} | set(added_lowered)
    tail = [c for c in frame.columns if c.lower() not in kept and c.lower() not in read]
    return frame.select(*out, *[io._col(c) for c in tail]), flags


def _rescued(entries: Sequence[Column], file_column: str) -> Column:
    """``{"column": "raw value", ..., "_source": file}`` of a row's non-null entries, NULL when
    there is none."""
    from pyspark.sql import functions as F

    if not entries:
        return F.lit(None).cast("string")
    found = F.map_filter(F.create_map(*entries), lambda _key, value: value.isNotNull())
    with_file = F.map_concat(found, F.create_map(F.lit(RESCUED_SOURCE_KEY), io._col(file_column)))
    return F.when(F.size(found) > 0, F.to_json(with_file))


def _text(column: Column, kind: DataType) -> Column:
    """A value as text: an atomic value cast, a nested one as JSON."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import AtomicType

    return column.cast("string") if isinstance(kind, AtomicType) else F.to_json(column)


def _with_all(frame: DataFrame, names: Sequence[str]) -> DataFrame:
    """``frame`` with every column of ``names`` (a misfit flag another group has: False)."""
    from pyspark.sql import functions as F

    missing = [n for n in names if n not in frame.columns]
    for name in missing:
        frame = frame.withColumn(name, F.lit(False))
    return frame


def _type(spark: SparkSession, kind: str) -> DataType:
    """A Spark type from its canonical text (``decimal(10,2)``); Spark's own parser."""
    from pyspark.sql.types import _parse_datatype_string

    del spark  # the parser needs the active session, not this argument
    return _parse_datatype_string(kind)
