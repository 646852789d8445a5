"""The contract every column-watermark source implements, and the one Spark job they share.

A run reads the rows above (or, replaying, at or above) the watermark, writes them as Parquet into
a staging folder and observes the next watermark *during that write* (Spark observed metrics:
nothing collected to the driver, no second pass). The source decides how the predicate reaches
the data (a filter Spark pushes into a Parquet scan, a WHERE clause the database runs, request
parameters of an API); :func:`stage_rows` is the same for all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Protocol

from watermark_assets.core.column.predicate import Predicate
from watermark_assets.core.column.watermark import ColumnWatermark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Observation, SparkSession


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
    #: columns the source's files hold that the rows read leave out (no schema evolution yet);
    #: None: the source cannot tell (headerless CSV, whole-file JSON, a table or an API)
    columns_ignored: tuple[str, ...] | None = None


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


class ColumnSource(Protocol):
    """A source of rows ordered by watermark columns."""

    @property
    def name(self) -> str: ...

    def read(self, spark: SparkSession, predicate: Predicate) -> ColumnRead:
        """The rows ``predicate`` admits, as a lazy frame (nothing read yet)."""
        ...


@dataclass(frozen=True, kw_only=True)
class StagedRows:
    """What :func:`stage_rows` wrote: the staging folder, the row count, the next watermark."""

    data_dir: str | None  # None when no row was read
    rows: int
    next_watermark: ColumnWatermark  # the greatest row's columns, advanced from the start
    #: rows read but not written: another row of the same merge key was kept (``merge_keys``)
    duplicates: int = 0

    @property
    def rows_written(self) -> int:
        return self.rows - self.duplicates


def stage_rows(
    read: ColumnRead,
    *,
    columns: Sequence[str],
    start: ColumnWatermark,
    data_dir: str,
    partition_by: Sequence[str] = (),
    merge_keys: Sequence[str] = (),
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
    observed = frame.observe(
        observation,
        F.count(F.lit(1)).alias("rows"),
        F.max(F.when(complete, key)).alias("top"),
    )
    written = observed
    kept = Observation("watermark_assets_column_kept")
    if merge_keys:
        from watermark_assets.spark.dedupe import latest_per_key

        written = latest_per_key(observed, merge_keys, columns).observe(
            kept, F.count(F.lit(1)).alias("rows")
        )
    io.write_parquet(written, data_dir, partition_by=partition_by)
    values = observation.get
    rows = int(values.get("rows", 0))
    duplicates = rows - int(kept.get.get("rows", 0)) if merge_keys else 0
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
    )


def _utc_from_micros(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
