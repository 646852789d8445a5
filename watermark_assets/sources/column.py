"""The contract every column-watermark source implements, and the one Spark job they share.

A run reads the rows above (or, replaying, at or above) the watermark, writes them as Parquet into
a staging folder and observes the next watermark *during that write* (Spark observed metrics:
nothing collected to the driver, no second pass). The source decides how the predicate reaches
the data (a filter Spark pushes into a Parquet scan, a WHERE clause the database runs, request
parameters of an API); :func:`stage_rows` is the same for all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from watermark_assets.core.column.boundary import Boundary
from watermark_assets.core.column.predicate import (
    Predicate,
    SqlDialect,
    quote_identifier,
    sql_literal,
)
from watermark_assets.core.column.watermark import ColumnValue, ColumnWatermark
from watermark_assets.core.errors import ColumnMismatchError
from watermark_assets.sources.schema_drift import Layout
from watermark_assets.spark.dedupe import column_named, orderable

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation, SparkSession


@dataclass(frozen=True, kw_only=True)
class ColumnRead:
    """What a source hands the run: the rows as a lazy frame and how they were selected."""

    frame: DataFrame
    #: the predicate as the engine that applies it sees it (SQL text, a filter, request params)
    pushed_down: str
    #: the source's own notes for the metadata, e.g. files skipped by statistics, pages fetched
    details: dict[str, object]
    #: what the source could not get (a file-download source's missing files): a read with any
    #: is incomplete, and the run commits nothing for it
    missing: tuple[str, ...] = ()
    #: a folder the source wrote for this read (downloads): removed once the rows are staged
    scratch_uri: str | None = None
    #: records the source could not parse (CSV/JSON: malformed, or a value not of its declared
    #: type): kept out of ``frame``, counted while it is written, quarantined by the run
    malformed: MalformedRecords | None = None
    #: columns the source's files hold that the rows read leave out (``schema.mode: ignore``);
    #: None: the source cannot tell (headerless CSV, whole-file JSON, a table or an API)
    columns_ignored: tuple[str, ...] | None = None
    #: the columns (name, Spark type) the source declares itself, which ``schema.mode`` holds
    #: the rows to when neither ``source.schema`` nor the table declares any (a Parquet
    #: folder's first run: its oldest file's columns); None: the frame's own
    declared: tuple[tuple[str, str], ...] | None = None
    #: per file of a folder source, its layout (a Parquet footer, a CSV header, JSON keys): a
    #: change ``schema.mode`` finds is named with its file; None: the frame's schema, named
    #: with the source's location
    layouts: Mapping[str, Layout] | None = None
    #: declared columns handed as text (a CSV/JSON folder under ``schema.mode`` rescue or
    #: ignore): the policy parses them to their declared type, a value that does not parse is
    #: rescued or nulled and counted
    text_columns: tuple[str, ...] = ()


#: The column of a CSV/JSON record's text when it does not parse (Spark's PERMISSIVE mode).
CORRUPT_RECORD_COLUMN = "_corrupt_record"
#: The column of the file a CSV/JSON record came from (decoded path, as ``io.read_files`` gives).
RECORD_FILE_COLUMN = "_watermark_assets_record_file"


@dataclass(frozen=True, kw_only=True)
class MalformedRecords:
    """Where a source's unparsable records are, for the run's quarantine.

    ``frame``: every record read (lazy, unfiltered), with :data:`CORRUPT_RECORD_COLUMN` (NULL for
    a record that parsed) and :data:`RECORD_FILE_COLUMN`; ``counted``: an observation on the
    rows' frame whose ``records`` is how many did not parse (known once the rows are written:
    the quarantine pays a second pass only when there are some); ``root``: the source folder
    (``_source_file`` of a record is its path relative to it); ``reason``: the error recorded.
    """

    frame: DataFrame
    counted: Observation
    root: str
    reason: str


def check_predicate_columns(configured: Sequence[str], bound: Sequence[str]) -> None:
    """A predicate's columns are the source's watermark columns, or their leading ones (a
    look-back, a lag or a boundary read bounds the leading column only); anything else is
    another configuration's (ColumnMismatchError)."""
    if bound and tuple(bound) != tuple(configured[: len(bound)]):
        raise ColumnMismatchError(tuple(configured), tuple(bound))


class ColumnSource(Protocol):
    """A source of rows ordered by watermark columns."""

    @property
    def name(self) -> str: ...

    def read(self, spark: SparkSession, predicate: Predicate) -> ColumnRead:
        """The rows ``predicate`` admits, as a lazy frame (nothing read yet)."""
        ...


@dataclass(frozen=True)
class UnitRead:
    """The unit a unit (or time x unit) run reads, for a source that must be told (an API):
    ``id`` the unit's id; ``param`` the request parameter carrying it (None: none, e.g. the id is
    in the URL's ``{unit}``); ``in_predicate``: the read's predicate holds ``column = id`` (a
    unit run: the parameter is the unit column's), else it is the window's (a cell's run: the
    parameter is a static one)."""

    id: str
    param: str | None = None
    in_predicate: bool = True


@runtime_checkable
class ReadsUnits(Protocol):
    """A source told which unit a run reads (an HTTP API: the id in its URL or a parameter); the
    other sources read a unit's rows through the predicate alone."""

    def for_unit(self, unit: UnitRead) -> ColumnSource:
        """This source reading ``unit``'s rows (the configuration is not changed)."""
        ...


@runtime_checkable
class ReadsUnderSchema(Protocol):
    """A source whose read depends on the pipeline's schema policy (a CSV/JSON folder: which
    declared columns its files' text is parsed into, in which type, and whether a value that
    does not parse is a malformed record or the policy's to rescue or null)."""

    def under_schema(self, declared: Sequence[tuple[str, str]] | None, mode: str) -> ColumnSource:
        """This source reading for ``declared`` (name, Spark type: the source's schema, then
        the table's columns it lacks; None: none yet) under ``schema.mode`` ``mode``."""
        ...


@runtime_checkable
class ReadsNullRows(Protocol):
    """A source that can select its rows with a NULL watermark column where they are (a filter
    pushed into the scan or the database): ``count_nulls`` counts them, a run quarantines or
    includes them (``watermark.null_watermark``). A source without it (an API: its parameters
    select by value) hands the run only the NULL rows of a read of everything (the first)."""

    def null_rows(self, spark: SparkSession, columns: Sequence[str]) -> DataFrame:
        """Every row with a NULL in one of ``columns`` (lazy)."""
        ...


@runtime_checkable
class ShowsColumns(Protocol):
    """A source that can say its columns now without Spark and without reading a row: one schema
    read (a Delta table's snapshot schema, a database's ``LIMIT 0`` query, the footers or
    header lines of a folder's few newest files), for a sensor tick to tell that they changed
    before a run reads them. A source without it (an HTTP API) says nothing until its run
    reads."""

    def columns(self) -> tuple[tuple[str, str | None], ...]:
        """Its columns in order, each with its Spark type as a read would give it (None: the
        source does not say)."""
        ...


def count_nulls(source: object, spark: SparkSession, columns: Sequence[str]) -> int | None:
    """How many rows of ``source`` have a NULL watermark column; None: it cannot tell cheaply."""
    if not isinstance(source, ReadsNullRows):
        return None
    return int(source.null_rows(spark, columns).count())


def any_null(columns: Sequence[str]) -> Column:
    """Whether a row has a NULL in one of ``columns``."""
    from pyspark.sql import functions as F

    test = F.lit(False)
    for column in columns:
        test = test | column_named(column).isNull()
    return test


@dataclass(frozen=True, kw_only=True)
class StagedRows:
    """What :func:`stage_rows` wrote: the staging folder, the row count, the next watermark."""

    data_dir: str | None  # None when no row was read
    rows: int
    next_watermark: ColumnWatermark  # the greatest row's columns, advanced from the start
    #: rows read but not written: another row of the same merge key was kept (``merge_keys``)
    duplicates: int = 0
    #: rows at the boundary value that the table already held (their hash is the boundary's),
    #: read again: dropped (not in ``rows``) or, without ``drops_reread``, written again
    reread: int = 0
    drops_reread: bool = True

    @property
    def rows_written(self) -> int:
        return self.rows - self.duplicates

    @property
    def rows_new(self) -> int:
        """Rows written that the table did not hold as they are."""
        return self.rows_written - (0 if self.drops_reread else self.reread)


@dataclass(frozen=True, kw_only=True)
class BoundaryRead:
    """A read that includes the watermark's boundary value (:mod:`~watermark_assets.core.column.
    boundary`): the rows there whose hash ``boundary`` holds were committed already. ``drops``:
    they are left out (append; merge, after one row per key is chosen); False: they are written
    again and only counted (a replace re-writes its whole window)."""

    boundary: Boundary
    drops: bool
    #: columns this read widens (``schema.mode: add_columns``) -> the type the boundary's rows
    #: were hashed in: hashed in it again, so a known row stays known across the widening
    hashed_as: Mapping[str, str] = field(default_factory=dict)

    def known(self, frame: DataFrame) -> Column:
        """Whether a row of ``frame`` is one the boundary holds (never null)."""
        from pyspark.sql import functions as F

        hashes = self.boundary.hashes or frozenset()
        if not hashes:
            return F.lit(False)
        hashed = row_hash(frame, self.hashed_as).isin(*hashes)
        return F.coalesce(
            at_value(self.boundary.column, self.boundary.value) & hashed, F.lit(False)
        )


def at_value(column: str, value: ColumnValue) -> Column:
    """``column = value`` as Spark SQL (typed literals: a naive datetime is TIMESTAMP_NTZ)."""
    from pyspark.sql import functions as F

    text = f"{quote_identifier(column, SqlDialect.SPARK)} = {sql_literal(value, SqlDialect.SPARK)}"
    return F.expr(text)


def row_hash(frame: DataFrame, hashed_as: Mapping[str, str] | None = None) -> Column:
    """A whole row's 64-bit hash: each non-null column as ``(name, value)``, in name order (the
    order in the frame does not matter; ``(NULL, 1)`` and ``(1, NULL)`` differ). A null column
    adds nothing, so a column the source gains later (null in the rows committed before) leaves
    their hashes as they were. Maps are hashed as their JSON. ``hashed_as``: columns hashed as
    another type (a widened column as it was: ``try_cast``, a value it cannot hold is NULL)."""
    from pyspark.sql import functions as F

    parts: list[Column] = []
    retyped = hashed_as or {}
    for one in sorted(frame.schema.fields, key=lambda f: f.name):
        column = column_named(one.name)
        if one.name in retyped:
            quoted = "`" + one.name.replace("`", "``") + "`"
            column = F.expr(f"try_cast({quoted} AS {retyped[one.name]})")
        value = column if orderable(one.dataType) else F.to_json(column)
        parts.append(F.when(column.isNotNull(), F.struct(F.lit(one.name), value)))
    return F.xxhash64(*parts)


def boundary_hashes(
    spark: SparkSession,
    data_dir: str,
    frame: DataFrame,
    column: str,
    value: ColumnValue,
    *,
    limit: int,
) -> list[int]:
    """The hashes of the staged rows (Parquet under ``data_dir``, written from ``frame``) whose
    ``column`` holds ``value``: at most ``limit`` (one Spark job; the filter is pushed into the
    scan). Read back from what is committed, never from the source again (a row arriving there
    meanwhile is not committed)."""
    from watermark_assets.spark import io

    staged = io.read_folder(spark, data_dir, format="parquet", schema=frame.schema)
    staged = staged.select(*[f"`{c.replace('`', '``')}`" for c in frame.columns])
    rows = staged.where(at_value(column, value)).select(row_hash(staged).alias("h"))
    return [int(r["h"]) for r in rows.limit(limit).collect()]


def stage_rows(
    read: ColumnRead,
    *,
    columns: Sequence[str],
    start: ColumnWatermark,
    data_dir: str,
    partition_by: Sequence[str] = (),
    merge_keys: Sequence[str] = (),
    boundary: BoundaryRead | None = None,
) -> StagedRows:
    """Write ``read.frame`` as Parquet under ``data_dir`` in ONE pass, observing the row count
    and the greatest ``columns`` tuple (``max`` over a struct compares field by field, the
    watermark's tuple order). ``start.advance`` of that tuple is the next watermark.

    A row with a null in any watermark column never advances the watermark. ``TIMESTAMP``
    columns come back as UTC-aware datetimes: they are observed as microseconds since the epoch
    (the same order), because PySpark would turn them into naive datetimes in the Python
    process's local zone. ``TIMESTAMP_NTZ`` columns come back naive, as the column holds them.

    With ``merge_keys`` one row per key is written (:func:`~watermark_assets.spark.dedupe.
    latest_per_key`: the greatest watermark tuple, ties broken by the other columns), in the same
    pass: the count and the next watermark are observed over every row read, before that step,
    and the rows written are observed after it (``duplicates`` is the difference).

    With ``boundary`` the rows read that the boundary holds are counted (``reread``) and, when
    it drops them, left out after that step (one row per key is chosen among every row read, so
    a known row still decides which row of its key is kept): ``rows`` then counts the rows read
    less the known ones, ``duplicates`` the other rows that lost to a row of their key.
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    from watermark_assets.spark import io

    frame = read.frame
    instants = {c for c in columns if isinstance(frame.schema[c].dataType, TimestampType)}
    observation = Observation("watermark_assets_column_read")
    complete = F.lit(True)
    for column in columns:  # a row with a NULL watermark column never advances the watermark
        complete = complete & F.col(column).isNotNull()
    key = F.struct(
        *[(F.unix_micros(F.col(c)) if c in instants else F.col(c)).alias(c) for c in columns]
    )
    known_read = [] if boundary is None else [F.count_if(boundary.known(frame)).alias("known")]
    observed = frame.observe(
        observation,
        F.count(F.lit(1)).alias("rows"),
        F.max(F.when(complete, key)).alias("top"),
        *known_read,
    )
    written = observed
    kept = Observation("watermark_assets_column_kept")
    if merge_keys:
        from watermark_assets.spark.dedupe import latest_per_key

        written = latest_per_key(observed, merge_keys, columns).observe(
            kept, F.count(F.lit(1)).alias("rows")
        )
    again = Observation("watermark_assets_column_reread")
    if boundary is not None:
        known = boundary.known(written)
        written = written.observe(again, F.count_if(known).alias("rows"))
        if boundary.drops:
            written = written.where(~known)
    io.write_parquet(written, data_dir, partition_by=partition_by)
    values = observation.get
    read_all = int(values.get("rows", 0))
    # known rows read: each one either lost to another row of its key or was dropped
    reread = int(values.get("known", 0)) if boundary is not None else 0
    drops = boundary is not None and boundary.drops
    dropped = int(again.get.get("rows", 0)) if drops else 0
    rows = read_all - (reread if drops else 0)
    duplicates = 0
    if merge_keys:
        duplicates = read_all - int(kept.get.get("rows", 0)) - (reread - dropped if drops else 0)
    top = values.get("top")
    next_watermark = start
    if top is not None:
        next_watermark = start.advance(
            {c: _utc_from_micros(top[c]) if c in instants else top[c] for c in columns}
        )
    return StagedRows(
        data_dir=data_dir if rows else None,
        rows=rows,
        next_watermark=next_watermark,
        duplicates=duplicates,
        reread=reread,
        drops_reread=boundary is None or boundary.drops,
    )


def _utc_from_micros(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
