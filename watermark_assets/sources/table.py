"""Column sources over tables and files: Delta tables, folders of Parquet files, CSV and JSON.

How the watermark's predicate reaches the data (seed 001, "Read-side push-down"):

- :class:`DeltaTableSource`: the Delta log is read with ``deltalake`` on the driver (no delta-spark
  jars). A file whose statistics *prove* it holds no row the predicate admits is skipped: it is
  never handed to Spark. The remaining files are read by Spark as Parquet with the predicate as a
  filter, which Spark pushes into the scan (``PushedFilters``; row groups skipped by their
  statistics). Tables with deletion vectors or column mapping are refused
  (:class:`~watermark_assets.exceptions.UnsupportedDeltaTableError`): their Parquet files do not
  hold the table's rows as they are.
- :class:`ParquetFilesSource`: a folder of Parquet files; Spark's own push-down.
- :class:`CsvJsonSource`: full scan, then the filter in Spark (the seed's fallback).

Statistics are trusted only where they prove it (see :mod:`watermark_assets.delta.stats`): a
string maximum at the 32-character prefix may have been cut, a timestamp maximum on a whole
millisecond may have been cut there (999 microseconds are added), a float column may hold NaN,
which Spark orders above every number, so its files are never skipped; a file without statistics
is read.

The rows of every source go through :func:`watermark_assets.sources.column.stage_rows`, which
observes the next watermark during the write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

import pyarrow as pa

from watermark_assets import storage
from watermark_assets.core.column.predicate import (
    Comparison,
    Predicate,
    SqlDialect,
    leading_bound,
    to_sql,
)
from watermark_assets.core.column.predicate import predicate as read_predicate
from watermark_assets.core.column.watermark import ColumnWatermark, WatermarkOperator
from watermark_assets.core.replace_window import value_kind
from watermark_assets.delta.stats import (
    modification_time_ms,
    stats_kind,
    stats_value,
    unsupported_read_feature,
    widen_cut_maximum,
)
from watermark_assets.exceptions import UnsupportedDeltaTableError
from watermark_assets.names import RESCUED_DATA_COLUMN
from watermark_assets.sources.column import (
    CORRUPT_RECORD_COLUMN,
    RECORD_FILE_COLUMN,
    ColumnRead,
    ColumnSource,
    MalformedRecords,
    any_null,
)
from watermark_assets.sources.file_columns import file_layouts, left_out, names_columns
from watermark_assets.sources.schema_drift import Layout, merged_layout
from watermark_assets.spark import io

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["CsvJsonSource", "DeltaTableSource", "ParquetFilesSource", "file_may_hold_rows"]


@dataclass(frozen=True)
class DeltaTableSource:
    """A Delta table read through its log: file skipping by statistics, then a pushed filter.

    ``details`` of a read: ``table_version``, ``files_in_table``, ``files_skipped_by_statistics``,
    ``files_read``.
    """

    name: str
    uri: str
    storage_options: Mapping[str, str] | None = field(default=None, compare=False)

    def read(self, spark: SparkSession, predicate: Predicate) -> ColumnRead:
        """The table's rows that ``predicate`` admits (lazy: Spark reads nothing yet)."""
        table, files, arrow_schema, partition_columns = self._snapshot()
        bound = leading_bound(predicate)
        if bound is not None and bound.column in arrow_schema.names:
            column_type = arrow_schema.field(bound.column).type
            partitioned = bound.column in partition_columns
            kept = [f for f in files if file_may_hold_rows(f, bound, column_type, partitioned)]
        else:
            kept = files
        frame = self._frame(spark, table, kept, arrow_schema)
        return ColumnRead(
            frame=_filtered(frame, predicate),
            pushed_down=to_sql(predicate, SqlDialect.SPARK),
            details={
                "table_version": table.version(),
                "files_in_table": len(files),
                "files_skipped_by_statistics": len(files) - len(kept),
                "files_read": len(kept),
            },
        )

    def null_rows(self, spark: SparkSession, columns: Sequence[str]) -> DataFrame:
        """The rows with a NULL watermark column: only the files whose statistics (null counts,
        partition values) do not prove they hold none are read."""
        table, files, arrow_schema, partition_columns = self._snapshot()

        def may_hold_null(file: Mapping[str, Any]) -> bool:
            for column in columns:
                if column in partition_columns:
                    if file.get(f"partition.{column}") is None:
                        return True
                    continue
                nulls = file.get(f"null_count.{column}")
                if nulls is None or int(nulls) > 0:
                    return True
            return False

        kept = [f for f in files if f.get("num_records") != 0 and may_hold_null(f)]
        return self._frame(spark, table, kept, arrow_schema).where(any_null(columns))

    def columns(self) -> tuple[tuple[str, str | None], ...]:
        """The table's columns as a read's frame has them (:meth:`_frame`'s schema): one
        snapshot read, no Spark session, no data file opened."""
        from pyspark.sql.pandas.types import from_arrow_schema

        arrow_schema = pa.schema(self._table().schema().to_arrow())
        schema = from_arrow_schema(arrow_schema, prefer_timestamp_ntz=True)
        return tuple((f.name, f.dataType.simpleString()) for f in schema.fields)

    def _table(self) -> Any:
        from deltalake import DeltaTable

        options = (
            dict(self.storage_options) if self.storage_options else storage.delta_options(self.uri)
        )
        return DeltaTable(self.uri, storage_options=options)

    def _snapshot(self) -> tuple[Any, list[dict[str, Any]], pa.Schema, list[str]]:
        """The table at its current version, its files (flattened add actions), schema and
        partition columns; tables Spark cannot read by their Parquet files refused."""
        table = self._table()
        feature = unsupported_read_feature(table)
        if feature is not None:
            raise UnsupportedDeltaTableError(self.uri, feature)
        arrow_schema = pa.schema(table.schema().to_arrow())
        partition_columns = list(table.metadata().partition_columns)
        files = pa.table(table.get_add_actions(flatten=True)).to_pylist()
        return table, files, arrow_schema, partition_columns

    def _frame(
        self, spark: SparkSession, table: Any, files: list[dict[str, Any]], arrow_schema: pa.Schema
    ) -> DataFrame:
        from pyspark.sql.pandas.types import from_arrow_schema

        # The explicit schema gives partition columns their Delta types (not inferred from the
        # path) and fills columns that older files lack with nulls.
        schema = from_arrow_schema(arrow_schema, prefer_timestamp_ntz=True)
        root = table.table_uri.rstrip("/")
        uris = [f"{root}/{unquote(f['path'])}" for f in files]
        # No path (every file skipped) is an empty Parquet scan: the same plan, no rows.
        return io.read_files(spark, uris, format="parquet", schema=schema, base_path=root)


@dataclass(frozen=True)
class ParquetFilesSource:
    """A folder of Parquet files (Hive-style partition folders allowed); Spark's own push-down:
    the filter is in the scan's ``PushedFilters`` and row groups are skipped by statistics.

    Every file's footer is read (a few at once, :func:`~watermark_assets.sources.file_columns.\
file_layouts`). When they all hold the same columns, the folder is read in them, as Spark reads
    it. When they differ (a newer file adds a column, or states another type), each layout's
    files are read in their own columns (:func:`~watermark_assets.spark.layouts.read_by_layout`)
    and the rows hold every column, each in a type that holds every file's
    (:func:`~watermark_assets.sources.schema_drift.merged_layout`): ``schema.mode`` then decides
    what the table takes (:mod:`~watermark_assets.sources.column_schema`), held to the table's
    columns, or on the first run to the OLDEST file's (modification time, then path)."""

    name: str
    uri: str

    def read(self, spark: SparkSession, predicate: Predicate) -> ColumnRead:
        """The rows ``predicate`` admits (lazy)."""
        infos = io.data_file_infos(self.uri)
        files = sorted(infos, key=lambda uri: (modification_time_ms(infos[uri]), uri))
        if not files:
            frame = io.read_folder(spark, self.uri, format="parquet", schema=None)
            return ColumnRead(
                frame=_filtered(frame, predicate),
                pushed_down=to_sql(predicate, SqlDialect.SPARK),
                details={"format": "parquet"},
                columns_ignored=(),
            )
        oldest = io.parquet_read_schema(spark, files, self.uri)  # with the partition columns
        layouts = file_layouts(files, "parquet")
        if len({layout for layout in layouts if layout is not None}) <= 1:
            frame = io.read_folder(spark, self.uri, format="parquet", schema=oldest)
        else:
            from watermark_assets.spark.layouts import read_by_layout

            merged = io.struct_of(spark, _ddl(merged_layout(layouts)))
            frame = read_by_layout(
                spark,
                files,
                layouts,
                format="parquet",
                declared=merged,
                mode="fail",  # each file's values cast to the merged type, which holds them
                added={},
                options=None,
                corrupt_column=None,
                file_column=RECORD_FILE_COLUMN,
                base_path=self.uri,
            ).frame.drop(RECORD_FILE_COLUMN)
        return ColumnRead(
            frame=_filtered(frame, predicate),
            pushed_down=to_sql(predicate, SqlDialect.SPARK),
            details={"format": "parquet"},
            columns_ignored=(),
            declared=tuple(_columns_of(oldest)),
            layouts={f: layout for f, layout in zip(files, layouts) if layout is not None},
        )

    def null_rows(self, spark: SparkSession, columns: Sequence[str]) -> DataFrame:
        """The rows with a NULL watermark column (Spark pushes ``IS NULL`` into the scan)."""
        return self.read(spark, everything(columns)).frame.where(any_null(columns))

    def columns(self) -> tuple[tuple[str, str | None], ...]:
        """The columns of the folder's newest files (:func:`newest_layout`: at most
        :data:`SHOWN_FILES` footers), each in a type that holds every one's, as a read merges
        them; no Spark session, no row read."""
        return newest_layout(self.uri, "parquet", None)


@dataclass(frozen=True)
class CsvJsonSource:
    """CSV or JSON (one object a line) files under a folder: every file is read, then the filter
    applies in Spark (the seed's fallback; these formats have no statistics to skip by).

    ``schema_ddl`` is Spark DDL (``"id BIGINT, updated_at TIMESTAMP"``): inferring it would read
    every file once more, and could type a watermark column differently from run to run.
    ``options`` are Spark reader options (``header``, ``delimiter``, ``timestampFormat``...).
    ``declared`` and ``schema_mode`` (:meth:`under_schema`): the columns the run holds the rows
    to (the schema, then the table's columns it lacks) and ``schema.mode``.
    """

    name: str
    uri: str
    format: Literal["csv", "json"]
    schema_ddl: str
    options: Mapping[str, str] = field(default_factory=dict)
    declared: tuple[tuple[str, str], ...] | None = None
    schema_mode: str = "fail"

    def __post_init__(self) -> None:
        if self.format not in ("csv", "json"):
            raise ValueError(
                f"source {self.name!r}: format {self.format!r} is not read here; give 'csv' or "
                "'json' (Parquet folders: ParquetFilesSource, Delta tables: DeltaTableSource)"
            )

    def under_schema(self, declared: Sequence[tuple[str, str]] | None, mode: str) -> CsvJsonSource:
        """This source reading for ``declared`` under ``schema.mode`` ``mode``."""
        return replace(
            self, declared=None if declared is None else tuple(declared), schema_mode=mode
        )

    def read(self, spark: SparkSession, predicate: Predicate) -> ColumnRead:
        """The rows ``predicate`` admits, after a full scan (lazy), without the records that do
        not parse (:attr:`ColumnRead.malformed`: the run quarantines them).

        A record is malformed when it is not valid CSV/JSON or (``schema.mode`` fail or
        add_columns) a value does not parse to its column's declared type (``"seven"`` for a
        BIGINT): never a row with a silent NULL. Under rescue or ignore the declared columns are
        read as text and parsed by the policy (:attr:`ColumnRead.text_columns`: such a value is
        rescued, or nulled and counted). Files that name their columns (CSV with a header, JSON
        lines) are read by those NAMES (case-insensitive,
        :func:`~watermark_assets.spark.layouts.read_by_layout`): a column added in the middle
        moves no value; a declared column a file lacks is NULL in its rows; the columns the
        schema lacks are read as text (:mod:`~watermark_assets.sources.file_columns`: a JSON
        key as far as the first records of each file show it), for ``schema.mode`` to refuse,
        add, rescue or leave out (:mod:`~watermark_assets.sources.column_schema`).
        """
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        details: dict[str, object] = {"format": self.format, "full_scan": True}
        pushed = to_sql(predicate, SqlDialect.SPARK)
        files = io.list_data_files(self.uri)
        named = names_columns(self.format, self.options)
        if not files:  # nothing to parse: the folder's (empty) frame in the declared schema
            frame = io.read_folder(
                spark, self.uri, format=self.format, schema=self.schema_ddl, options=self.options
            )
            return ColumnRead(
                frame=_filtered(frame, predicate),
                pushed_down=pushed,
                details=details,
                columns_ignored=() if named else None,
            )
        layouts = file_layouts(files, self.format, self.options) if named else []
        text: tuple[str, ...] = ()
        if any(layout is not None for layout in layouts):
            records, text = self._by_layout(spark, files, layouts)
        else:  # headerless CSV (by position), whole-file JSON, or empty files: the schema only
            records = self._records(spark, files, self.schema_ddl)
        counted = Observation(f"watermark_assets_malformed_{self.name}")
        malformed = F.col(CORRUPT_RECORD_COLUMN).isNotNull()
        observed = records.observe(counted, F.count_if(malformed).alias("records"))
        rows = observed.where(~malformed).drop(CORRUPT_RECORD_COLUMN, RECORD_FILE_COLUMN)
        reason = (
            f"not valid {self.format}, or a value does not parse to its type in the source "
            f"schema '{self.schema_ddl}'"
        )
        return ColumnRead(
            frame=_filtered(rows, predicate),
            pushed_down=pushed,
            details=details,
            malformed=MalformedRecords(
                frame=records, counted=counted, root=self.uri, reason=reason
            ),
            columns_ignored=() if named else None,
            layouts={f: layout for f, layout in zip(files, layouts) if layout is not None},
            text_columns=text,
        )

    def null_rows(self, spark: SparkSession, columns: Sequence[str]) -> DataFrame:
        """The rows with a NULL watermark column (a full scan, like every read here; its
        malformed records are the run's read's to quarantine: observed under another name)."""
        own = replace(self, name=f"{self.name}_null_watermark")
        return own.read(spark, everything(columns)).frame.where(any_null(columns))

    def columns(self) -> tuple[tuple[str, str | None], ...]:
        """The columns the folder's newest files name (:func:`newest_layout`: at most
        :data:`SHOWN_FILES` header lines, or the keys of their first JSON records), no type
        (a read finds a value of another type: quarantined, rescued or nulled by
        ``schema.mode``); none for files that cannot name their columns (headerless CSV,
        whole-file JSON)."""
        if not names_columns(self.format, self.options):
            return ()
        return newest_layout(self.uri, self.format, self.options)

    def _records(self, spark: SparkSession, files: list[str], schema: Any) -> DataFrame:
        """Every record of ``files`` in ``schema``, PERMISSIVE: a malformed one has its text in
        CORRUPT_RECORD_COLUMN; each with its file in RECORD_FILE_COLUMN."""
        return io.read_files(
            spark,
            files,
            format=self.format,
            schema=schema,
            options=self.options,
            corrupt_column=CORRUPT_RECORD_COLUMN,
            file_column=RECORD_FILE_COLUMN,
            base_path=self.uri,
        )

    def _by_layout(
        self, spark: SparkSession, files: list[str], layouts: Sequence[Layout | None]
    ) -> tuple[DataFrame, tuple[str, ...]]:
        """The records of files that name their columns, read by name
        (:func:`~watermark_assets.spark.layouts.read_by_layout`): the schema's columns, the
        table's columns it lacks that a file names (in the table's type), then the columns
        neither declares, as text; and the declared columns read as text (rescue, ignore)."""
        from pyspark.sql.types import AtomicType, StringType, StructField, StructType

        from watermark_assets.spark.layouts import read_by_layout

        schema = io.struct_of(spark, self.schema_ddl)
        named = {name.lower() for layout in layouts for name, _ in layout or ()}
        taken = {f.name.lower() for f in schema.fields} | {RESCUED_DATA_COLUMN.lower()}
        extra = [
            (name, kind)
            for name, kind in self.declared or ()
            if name.lower() in named and name.lower() not in taken
        ]
        fields = list(schema.fields)
        if extra:
            fields += io.struct_of(spark, _ddl(extra)).fields
        loose = self.schema_mode in ("rescue", "ignore")
        text = tuple(
            f.name
            for f in fields
            if loose
            and isinstance(f.dataType, AtomicType)
            and not isinstance(f.dataType, StringType)
        )
        declared = StructType(
            [StructField(f.name, StringType()) if f.name in text else f for f in fields]
        )
        headers = [[name for name, _ in layout or ()] for layout in layouts]
        added = left_out(headers, [f.name for f in declared.fields])
        read = read_by_layout(
            spark,
            files,
            layouts,
            format=self.format,
            declared=declared,
            mode="fail",  # declared types as declared: a value that does not parse is malformed
            added=dict.fromkeys(added, "string"),
            options=self.options,
            corrupt_column=CORRUPT_RECORD_COLUMN,
            file_column=RECORD_FILE_COLUMN,
            base_path=self.uri,
        )
        return read.frame, text


def file_may_hold_rows(
    file: Mapping[str, Any], bound: Comparison, column_type: pa.DataType, partitioned: bool
) -> bool:
    """Whether a Delta file (a flattened ``get_add_actions`` row) may hold a row meeting ``bound``
    (:func:`~watermark_assets.core.column.predicate.leading_bound`). False only when its
    statistics, or its partition value, prove that no row does; an unknown is True."""
    rows = file.get("num_records")
    if rows == 0:
        return False
    column = bound.column
    if partitioned:
        raw = file.get(f"partition.{column}")
        if raw is None:
            return False  # a null partition: null is never above a watermark
        high = stats_value(raw, column_type)
    else:
        nulls = file.get(f"null_count.{column}")
        if rows is not None and nulls is not None and int(nulls) == int(rows):
            return False  # only nulls in the column
        high = stats_value(file.get(f"max.{column}"), column_type)
        high = widen_cut_maximum(high, column_type)  # on a millisecond: perhaps cut there
    kind = stats_kind(column_type)
    if high is None or pa.types.is_floating(column_type) or kind != value_kind(bound.value):
        return True
    value = bound.value
    if isinstance(value, datetime) and value.utcoffset() is None:
        value = value.replace(tzinfo=timezone.utc)  # as stats_value reads a wall clock
    if bound.op == "=":  # a unit: the file's [min, max] (or partition value) must hold it
        if partitioned:
            return bool(high == value)
        low = stats_value(file.get(f"min.{column}"), column_type)  # a cut minimum stays below
        return not (low is not None and low > value) and bool(high >= value)
    return bool(high > value) if bound.op == ">" else bool(high >= value)


#: How many of a folder's newest files (modification time, then path) a sensor reads the
#: columns of (:func:`newest_layout`): a footer, a header line or the first JSON records each,
#: after one listing of the folder. A column only older files hold is not seen there: the
#: run, which reads every file's, finds it.
SHOWN_FILES = 3


def newest_layout(
    uri: str, format: str, options: Mapping[str, str] | None
) -> tuple[tuple[str, str | None], ...]:
    """The columns of the :data:`SHOWN_FILES` newest data files of the folder ``uri``, each once
    (first seen first, oldest file first): Parquet in a type that holds every footer's
    (:func:`~watermark_assets.sources.schema_drift.merged_layout`), CSV and JSON without one
    (their files state none); none for an empty folder."""
    infos = io.data_file_infos(uri)
    files = sorted(infos, key=lambda path: (modification_time_ms(infos[path]), path))
    layouts = file_layouts(files[-SHOWN_FILES:], format, options)
    if format == "parquet":
        return tuple(merged_layout(layouts))
    headers = [[name for name, _ in layout or ()] for layout in layouts]
    return tuple((name, None) for name in left_out(headers, ()))


def everything(columns: Sequence[str]) -> Predicate:
    """The predicate that admits every row (an empty watermark over ``columns``)."""
    return read_predicate(ColumnWatermark.empty(columns), WatermarkOperator.GREATER_THAN)


def _ddl(columns: Sequence[tuple[str, str]]) -> str:
    """(name, Spark type) pairs as DDL, names quoted."""
    return ", ".join(f"`{name.replace('`', '``')}` {kind}" for name, kind in columns)


def _columns_of(struct: StructType) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in struct.fields]


def _filtered(frame: DataFrame, predicate: Predicate) -> DataFrame:
    """The frame filtered by the predicate as Spark SQL (Spark pushes it into a file scan)."""
    from pyspark.sql import functions as F

    if predicate.admits_everything:
        return frame
    return frame.where(F.expr(to_sql(predicate, SqlDialect.SPARK)))


if TYPE_CHECKING:
    # Static proof that every source here satisfies the contract (mypy checks these assignments).
    def _conforms(
        delta: DeltaTableSource, parquet: ParquetFilesSource, text: CsvJsonSource
    ) -> list[ColumnSource]:
        return [delta, parquet, text]
