"""The one Spark job of an ingestion batch.

Spark reads the landing files on the executors, adds the lineage columns, splits malformed records
off and writes Parquet files into a staging directory under the Delta table. Nothing is collected
to the driver but observed counts per Dagster partition. The Delta commit is not Spark's job (see
:mod:`watermark_assets.delta`): delta-spark's jars are optional, ``deltalake`` commits the files.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa

from watermark_assets import storage
from watermark_assets.exceptions import StagedCountError, UntracedRowsError
from watermark_assets.names import RESCUED_DATA_COLUMN
from watermark_assets.spark import io
from watermark_assets.spark.ddl import columns_ddl
from watermark_assets.spark.fsspec_source import UNREADABLE_MARKER
from watermark_assets.spark.paths import decoded_uri, relative_to_root, root_marker, spark_path

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from watermark_assets.sources.schema_drift import Layout


#: Lineage columns added to every ingested row.
SOURCE_FILE_COLUMN = "_source_file"


INGESTED_AT_COLUMN = "_ingested_at"


PARTITION_KEY_COLUMN = "_dagster_partition"


CORRUPT_RECORD_COLUMN = "_corrupt_record"


@dataclass(frozen=True)
class ReadSpec:
    """How to read one batch of landing files."""

    source_uri: str
    files: Sequence[str]
    file_partitions: Mapping[str, str]
    format: str
    schema_ddl: str | None
    csv_options: Mapping[str, str]
    derived_columns: Mapping[str, str]
    partition_by: Sequence[str]
    ingested_at_iso: str
    #: per file (relative path) its layout (:func:`~watermark_assets.sources.file_columns.\
    #: file_layouts`); None: read as before, by position, in ``schema_ddl``
    layouts: Mapping[str, Layout | None] | None = None
    #: the declared columns (name, Spark type) when ``schema_ddl`` is None (Parquet: the table's)
    declared: tuple[tuple[str, str], ...] | None = None
    #: ``schema.mode`` (:mod:`watermark_assets.spark.layouts`)
    schema_mode: str = "fail"
    #: columns the files bring that are read too (``add_columns``): name -> Spark type
    added: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StagedOutput:
    """What the Spark job wrote. Paths are storage URIs of the staging directories."""

    rows_read: int
    rows_quarantined: int
    per_partition: Mapping[str, Mapping[str, int]]
    data_dir: str | None
    quarantine_dir: str | None
    data_schema: pa.Schema
    quarantine_schema: pa.Schema
    #: per declared column, the values that did not fit its type (``rescue``/``ignore``)
    misfits: Mapping[str, int] = field(default_factory=dict)
    #: rows with something in the rescued-data column (``rescue``)
    rows_rescued: int = 0


def _file_lineage(spec: ReadSpec, reported: Sequence[str] = ()) -> Column:
    """Per row, ``struct<source, partition, slot>`` of the requested file it came from (slot:
    :func:`_lineage_entries`), or NULL: ONE lookup per row, not one per lineage column (about
    0.5 s of a 240-file batch of 480,000 rows), and a hashed one (:func:`_hashed_lookup`).

    ``reported``: the files as the reader will report them (Spark's ``inputFiles()``). A row
    whose reported file is one of them takes its value by that string as it is, without
    decoding it or searching it for the source root (about 15% of the job's CPU at 240 files);
    any other row takes the exact path (:func:`_exact_file_lineage`), so a spelling that differs
    is only slower, never wrong."""
    from pyspark.sql import functions as F

    entries = _lineage_entries(spec)
    exact = _exact_file_lineage(entries, spec.source_uri)
    fast = _reported_entries(entries, spec.source_uri, reported)
    if not fast:
        return exact
    return F.coalesce(_hashed_lookup(fast, F.col(_RAW_SOURCE_COLUMN)), exact)


def _lineage_entries(spec: ReadSpec) -> dict[str, Mapping[str, Any]]:
    """Per requested file, its lineage: the path, its Dagster partition and that partition's
    slot (its place among :func:`_partition_keys`), which the observed counts compare (an
    integer per row and key, where comparing the keys' strings grew with long ranges)."""
    slots = {key: slot for slot, key in enumerate(_partition_keys(spec))}
    return {
        path: {"source": path, "partition": key, "slot": slots[key]}
        for path, key in spec.file_partitions.items()
    }


def _partition_keys(spec: ReadSpec) -> list[str]:
    """The batch's Dagster partitions, sorted: the observed counts' order."""
    return sorted(set(spec.file_partitions.values()))


def _exact_file_lineage(entries: Mapping[str, Mapping[str, Any]], source_uri: str) -> Column:
    """The lineage of a row from its decoded file path's part after the source root."""
    from pyspark.sql import functions as F

    return _hashed_lookup(entries, relative_to_root(F.col(_FILE_COLUMN), source_uri))


def _reported_entries(
    entries: Mapping[str, Mapping[str, Any]], source_uri: str, reported: Sequence[str]
) -> dict[str, Mapping[str, Any]]:
    """``entries`` keyed by the URI strings Spark reports in ``_metadata.file_path``.

    ``inputFiles()`` spells a local file ``file:///path`` where ``_metadata.file_path`` has
    ``file:/path`` (both percent-encoded alike): both spellings are keys. A reported file is
    keyed only when its decoding (:func:`~watermark_assets.spark.paths.decoded_uri`, the SQL
    decoding's twin) lies under the source root and is a requested file."""
    marker = root_marker(source_uri)
    keyed: dict[str, Mapping[str, Any]] = {}
    for uri in reported:
        try:
            decoded = decoded_uri(uri)
        except UnicodeDecodeError:  # not UTF-8 underneath: the exact path decides
            continue
        start = decoded.find(marker)
        value = entries.get(decoded[start + len(marker) :]) if start >= 0 else None
        if value is None:
            continue
        keyed[uri] = value
        if uri.startswith("file:///"):
            keyed["file:/" + uri.removeprefix("file:///")] = value
    return keyed


def _lineage(spec: ReadSpec) -> list[Column]:
    """``_source_file`` (the requested relative path of the row's file, from the file path the
    reader reports: Spark's ``_metadata.file_path``, or the URI the fsspec source read),
    ``_ingested_at`` and ``_dagster_partition``, from :func:`_file_lineage`'s column. A row
    whose file maps to no requested path gets NULL in both: :func:`write_batch` refuses such a
    batch."""
    from pyspark.sql import functions as F

    found = F.col(_LINEAGE_COLUMN)
    return [
        found.getField("source").alias(SOURCE_FILE_COLUMN),
        F.lit(spec.ingested_at_iso).cast("timestamp").alias(INGESTED_AT_COLUMN),
        found.getField("partition").alias(PARTITION_KEY_COLUMN),
        F.col(_RAW_SOURCE_COLUMN),
        found.getField("slot").alias(_SLOT_COLUMN),
    ]


def _hashed_lookup(mapping: Mapping[str, Mapping[str, Any]], key: Column) -> Column:
    """``mapping[key]`` per row (a ``struct<source, partition, slot>``), NULL for a key it lacks, in
    constant time per row.

    Spark looks a key up in a map by comparing it with every entry in turn: with a map of the
    batch's files that scan grew with files x rows and was the job's hottest frame at 960 files
    (Java Flight Recorder: ``ByteArrayMethods.arrayEquals`` under ``UTF8String.binaryEquals``,
    a quarter of the executor threads' samples). So the entries are spread over as many
    buckets as there are entries by the CRC-32 of the key's UTF-8 bytes (Python's
    ``zlib.crc32`` and Spark SQL's ``crc32`` are the same function): a row takes its bucket by
    index and scans that bucket's small map (about one entry). The literal is ONE call into
    the JVM: ``from_json`` of a literal is folded into a literal by the optimizer (no per-row
    parsing), where ``create_map`` of ``lit`` pairs costs calls per entry (about 0.3 s for a
    batch of 240 files)."""
    from pyspark.sql import functions as F

    size = max(1, len(mapping))
    buckets: list[dict[str, Mapping[str, Any]]] = [{} for _ in range(size)]
    for name, value in mapping.items():
        buckets[_crc32(name) % size][name] = value
    schema = "array<map<string,struct<source:string,partition:string,slot:int>>>"
    literal = F.from_json(F.lit(json.dumps(buckets)), schema)
    index = (F.crc32(key.cast("binary")) % F.lit(size)).cast("int")
    return F.element_at(F.get(literal, index), key)


def _crc32(text: str) -> int:
    """Spark SQL's ``crc32(cast(text AS binary))``: the CRC-32 of the UTF-8 bytes. A lone
    surrogate (a file name that is not UTF-8) is encoded as is, which Spark cannot hold: that
    key is then never found, as before (the batch is refused, :class:`UntracedRowsError`)."""
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


#: The file as the reader reports it (Spark's URI-encoded ``_metadata.file_path``, or the URI
#: the fsspec source read), kept until the write for the untraced-rows check.
_RAW_SOURCE_COLUMN = "_watermark_assets_raw_source"
#: The file's path, decoded (the lineage's source).
_FILE_COLUMN = "_watermark_assets_file_path"
#: The row's partition's slot (:func:`_lineage_entries`), kept until the write for the counts.
_SLOT_COLUMN = "_watermark_assets_partition_slot"
#: :func:`_file_lineage` of the row, computed once for both lineage columns.
_LINEAGE_COLUMN = "_watermark_assets_lineage"


def read_batch(spark: SparkSession, spec: ReadSpec) -> tuple[DataFrame, bool]:
    """The batch with lineage and derived columns; True if it can hold malformed records."""
    frame, has_corrupt, _ = _read_batch(spark, spec)
    return frame, has_corrupt


def _read_batch(spark: SparkSession, spec: ReadSpec) -> tuple[DataFrame, bool, Mapping[str, str]]:
    """:func:`read_batch`, and the misfit flag column of each declared column
    (:class:`~watermark_assets.spark.layouts.LayoutRead`)."""
    from pyspark.sql import functions as F

    # Each path literally (no glob expansion); see spark.io for which reader runs where.
    uris = [f"{spec.source_uri.rstrip('/')}/{path}" for path in spec.files]
    has_corrupt = spec.format in ("ndjson", "csv")
    misfits: Mapping[str, str] = {}
    declared = _declared(spark, spec)
    if spec.layouts is not None and uris and declared is not None:
        from watermark_assets.spark.layouts import read_by_layout

        read = read_by_layout(
            spark,
            uris,
            [spec.layouts.get(path) for path in spec.files],
            format=spec.format,
            declared=declared,
            mode=spec.schema_mode,
            added=spec.added,
            options=spec.csv_options if spec.format == "csv" else None,
            corrupt_column=CORRUPT_RECORD_COLUMN if has_corrupt else None,
            file_column=_FILE_COLUMN,
            reported_file_column=_RAW_SOURCE_COLUMN,
        )
        frame, misfits = read.frame, read.misfits
    else:
        frame = io.read_files(
            spark,
            uris,
            format=spec.format,
            schema=spec.schema_ddl,
            options=spec.csv_options if spec.format == "csv" else None,
            corrupt_column=CORRUPT_RECORD_COLUMN if has_corrupt else None,
            file_column=_FILE_COLUMN,
            reported_file_column=_RAW_SOURCE_COLUMN,
            base_path=None if uris else spec.source_uri,
        )
    # Lineage replaces same-named columns of the source (e.g. re-ingesting an exported table).
    lineage = (
        SOURCE_FILE_COLUMN,
        INGESTED_AT_COLUMN,
        PARTITION_KEY_COLUMN,
        _RAW_SOURCE_COLUMN,
        _FILE_COLUMN,
        _LINEAGE_COLUMN,
        _SLOT_COLUMN,
    )
    frame = frame.withColumn(_LINEAGE_COLUMN, _file_lineage(spec, frame.inputFiles()))
    frame = frame.select(*[c for c in frame.columns if c not in lineage], *_lineage(spec))
    for name, expression in spec.derived_columns.items():
        frame = frame.withColumn(name, F.expr(expression))
    return frame, has_corrupt, misfits


def _declared(spark: SparkSession, spec: ReadSpec) -> Any:
    """The declared columns as a StructType (``schema_ddl``, else ``declared``), or None."""
    if spec.schema_ddl is not None:
        return io.struct_of(spark, spec.schema_ddl)
    if spec.declared:
        return io.struct_of(spark, columns_ddl(spec.declared))
    return None


#: A batch of up to this many Dagster partitions counts each one's rows as it writes them (two
#: comparisons per row and partition); a wider one (a backfill of many days launched as one
#: run) counts them in the files it staged, reading back their partition column after the
#: write: the same exact counts, at a cost that does not grow with the partitions but reads
#: each staged file once more. Whole ``write_batch`` of 480,000 rows, local[2], medians of 3
#: alternated (2026-11-28): 2 partitions 2.52 s counted as written / 1.42 s read back
#: (noise); 40: 3.71 / 1.90 s; 365: 18.11 / 5.62 s. On S3 the read back costs 3 requests a
#: staged file (moto's local server: 16 files 0.32 s, 60 files 0.79 s, 240 files 2.4 s), so
#: a narrow batch keeps counting as it writes.
OBSERVED_PARTITIONS = 16


def write_batch(
    spark: SparkSession, spec: ReadSpec, *, data_dir: str, quarantine_dir: str
) -> StagedOutput:
    """Write the good rows as Parquet in ONE pass over the files, counting as it goes.

    The counts (rows read, rows malformed) are Spark observed metrics of the write itself: no
    cache, no separate counting job; per Dagster partition too, up to
    :data:`OBSERVED_PARTITIONS` of them, else read back from the staged files' partition column
    (:func:`_counted_in_staged`). Only when malformed records exist does a second pass write
    them to the quarantine staging folder.
    """
    from pyspark import StorageLevel
    from pyspark.sql import Observation
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    frame, has_corrupt, misfits = _read_batch(spark, spec)
    keys = _partition_keys(spec)
    corrupt = F.col(CORRUPT_RECORD_COLUMN).isNotNull() if has_corrupt else F.lit(False)
    metrics = [F.count(F.lit(1)).alias("rows"), F.count_if(corrupt).alias("bad")]
    observed_per_partition = len(keys) <= OBSERVED_PARTITIONS
    for number in range(len(keys) if observed_per_partition else 0):
        in_partition = F.col(_SLOT_COLUMN) == F.lit(number)
        metrics.append(F.count_if(in_partition).alias(f"rows_{number}"))
        metrics.append(F.count_if(in_partition & corrupt).alias(f"bad_{number}"))
    untraced = F.col(SOURCE_FILE_COLUMN).isNull()
    metrics.append(F.count_if(untraced).alias("untraced"))
    metrics.append(F.min(F.when(untraced, F.col(_RAW_SOURCE_COLUMN))).alias("eg"))
    flags = sorted(misfits.items())
    for number, (_, flag) in enumerate(flags):
        metrics.append(F.count_if(F.col(flag) & ~corrupt).alias(f"misfit_{number}"))
    rescuing = RESCUED_DATA_COLUMN in frame.columns and spec.schema_mode == "rescue"
    if rescuing:
        metrics.append(
            F.count_if(F.col(RESCUED_DATA_COLUMN).isNotNull() & ~corrupt).alias("rescued")
        )
    observation = Observation("watermark_assets_batch")
    observed = frame.observe(observation, *metrics)
    good_frame = observed.drop(_RAW_SOURCE_COLUMN, _SLOT_COLUMN, *[flag for _, flag in flags])
    if has_corrupt:
        good_frame = good_frame.where(~corrupt).drop(CORRUPT_RECORD_COLUMN)
    io.write_parquet(good_frame, data_dir, partition_by=spec.partition_by)
    values = observation.get
    if values.get("untraced"):  # never commit rows that cannot be traced to a requested file
        raise UntracedRowsError(int(values["untraced"]), values.get("eg"), tuple(spec.files))
    rows, bad = int(values["rows"]), int(values["bad"])
    if bad:
        # Spark refuses to scan raw JSON/CSV for the corrupt-record column alone; a cached
        # frame is allowed (its scan reads every column). Only batches with bad records pay this.
        cached = frame.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            io.write_parquet(_quarantine_frame(cached, spec), quarantine_dir)
        finally:
            cached.unpersist()
    if observed_per_partition:
        per_partition = {
            key: {
                "rows_read": int(values.get(f"rows_{number}", 0)),
                "rows_quarantined": int(values.get(f"bad_{number}", 0)),
            }
            for number, key in enumerate(keys)
        }
    else:
        per_partition = _counted_in_staged(spec, data_dir, quarantine_dir if bad else None)
    _check_counts(per_partition, rows, bad, data_dir)
    return StagedOutput(
        rows_read=rows,
        rows_quarantined=bad,
        per_partition={k: v for k, v in per_partition.items() if v["rows_read"]},
        data_dir=data_dir if rows - bad > 0 else None,
        quarantine_dir=quarantine_dir if bad else None,
        data_schema=_arrow_schema(to_arrow_schema, good_frame),
        quarantine_schema=QUARANTINE_SCHEMA,
        misfits={
            name: int(values.get(f"misfit_{number}", 0) or 0)
            for number, (name, _) in enumerate(flags)
        },
        rows_rescued=int(values.get("rescued", 0) or 0) if rescuing else 0,
    )


def _counted_in_staged(
    spec: ReadSpec, data_dir: str, quarantine_dir: str | None
) -> dict[str, dict[str, int]]:
    """Rows read and malformed per Dagster partition, from the partition column of the files
    the batch staged: the good rows' (in the files, or in ``_dagster_partition=`` folders when
    the table is partitioned by it) and the quarantined records'."""
    good = storage.count_values(
        data_dir, PARTITION_KEY_COLUMN, in_path=PARTITION_KEY_COLUMN in spec.partition_by
    )
    bad = storage.count_values(quarantine_dir, PARTITION_KEY_COLUMN) if quarantine_dir else {}
    return {
        key: {"rows_read": good.get(key, 0) + bad.get(key, 0), "rows_quarantined": bad.get(key, 0)}
        for key in _partition_keys(spec)
    }


def _check_counts(
    per_partition: Mapping[str, Mapping[str, int]], rows: int, bad: int, folder: str
) -> None:
    """The partitions' counts add up to the batch's (:class:`StagedCountError` if not): a
    staged file the count missed, or one it read that the job did not write, would otherwise
    show only in a check after the commit."""
    counted = (
        sum(v["rows_read"] for v in per_partition.values()),
        sum(v["rows_quarantined"] for v in per_partition.values()),
    )
    if counted != (rows, bad):
        raise StagedCountError((rows, bad), counted, folder)


def _arrow_schema(convert: Any, frame: DataFrame) -> pa.Schema:
    schema: pa.Schema = convert(frame.schema, timezone="UTC")
    return schema


#: Columns of the quarantine table: where a record came from, the raw text, and why it was refused.
QUARANTINE_SCHEMA = pa.schema(
    [
        pa.field(SOURCE_FILE_COLUMN, pa.string()),
        pa.field(INGESTED_AT_COLUMN, pa.timestamp("us", tz="UTC")),
        pa.field(PARTITION_KEY_COLUMN, pa.string()),
        pa.field("raw_record", pa.string()),
        pa.field("error", pa.string()),
        #: a file quarantined whole (unreadable): its size in bytes; NULL for a malformed record
        pa.field("file_size", pa.int64()),
    ]
)


def _quarantine_frame(frame: DataFrame, spec: ReadSpec) -> DataFrame:
    from pyspark.sql import functions as F

    reason = f"not valid {spec.format} or does not match the schema '{spec.schema_ddl}'"
    return frame.where(F.col(CORRUPT_RECORD_COLUMN).isNotNull()).select(
        F.col(SOURCE_FILE_COLUMN),
        F.col(INGESTED_AT_COLUMN),
        F.col(PARTITION_KEY_COLUMN),
        F.col(CORRUPT_RECORD_COLUMN).alias("raw_record"),
        F.lit(reason).alias("error"),
        F.lit(None).cast("bigint").alias("file_size"),
    )


@dataclass(frozen=True)
class UnreadableFile:
    """A landing file Spark could not read at all: not gzip, truncated, no Parquet footer."""

    path: str  # relative to the source root
    error: str  # Spark's error condition and the root cause, e.g. "... not a gzip file"


#: Spark's conditions for a file that exists but cannot be read. FAILED_READ_FILE.FILE_NOT_EXIST
#: (a file removed after the listing) is not one: that run fails and the next one plans again.
_UNREADABLE_CONDITION = "FAILED_READ_FILE"


_VANISHED_CONDITION = "FAILED_READ_FILE.FILE_NOT_EXIST"


def unreadable_file(error: BaseException, spec: ReadSpec) -> UnreadableFile | None:
    """The file of ``spec`` that a failed Spark job names as unreadable, or None.

    None when the failure is anything else (a vanished file, a full disk, a lost executor) or
    names no file of the batch (or, being ambiguous, more than one): the caller re-raises. Spark
    reports the path in its error's message parameters, URL-encoded or not depending on the
    reader, so both readings are matched against the batch's exact paths.
    """
    found = _fsspec_unreadable(error, spec)
    if found is not None:
        return found
    for condition, parameters, cause in _spark_errors(error):
        if not condition.startswith(_UNREADABLE_CONDITION) or condition == _VANISHED_CONDITION:
            continue
        reported = parameters.get("path")
        if not reported:
            continue
        readings = {_without_scheme(reported), _without_scheme(unquote(reported))}
        matches = [
            path
            for path in spec.files
            if _without_scheme(spark_path(f"{spec.source_uri.rstrip('/')}/{path}")) in readings
        ]
        if len(matches) == 1:
            return UnreadableFile(matches[0], f"{condition}: {cause}")
    return None


def _fsspec_unreadable(error: BaseException, spec: ReadSpec) -> UnreadableFile | None:
    """The batch's file that the fsspec source reported as undecodable (its marker and URI in
    the task's Python error, which reaches the driver inside Spark's error text)."""
    texts = [str(error)]
    java = getattr(error, "java_exception", None)
    while java is not None and len(texts) < 20:
        texts.append(str(java.toString()))
        java = java.getCause()
    uris = {f"{spec.source_uri.rstrip('/')}/{path}": path for path in spec.files}
    for text in texts:
        start = text.find(UNREADABLE_MARKER)
        if start < 0:
            continue
        try:
            uri, end = json.JSONDecoder().raw_decode(text, start + len(UNREADABLE_MARKER))
        except ValueError:
            continue
        if uri in uris:
            cause = text[end:].lstrip(": ").splitlines()[0] if text[end:].strip() else ""
            return UnreadableFile(uris[uri], f"{_UNREADABLE_CONDITION}: {cause}")
    return None


def _connect_root_cause(message: str) -> str:
    """The root cause in a Spark Connect error's text, as classic Spark reports it: the last
    ``Caused by: ...`` of the server's stack trace (``java.io.IOException: not a gzip file``),
    else the message's first line (never the whole trace, which would fill the quarantine
    record)."""
    causes = [
        line.removeprefix("Caused by: ").strip()
        for line in message.splitlines()
        if line.startswith("Caused by: ")
    ]
    if causes:
        return causes[-1]
    lines = message.strip().splitlines()
    return lines[0] if lines else message


def _spark_errors(error: BaseException) -> Iterator[tuple[str, Mapping[str, str], str]]:
    """(condition, message parameters, root cause) of each Spark error in ``error``'s chain.

    Classic PySpark raises a Py4JJavaError around the JVM's exception (walked through its causes);
    Spark Connect raises PySpark's own exceptions, which carry the same two accessors.
    """
    java = getattr(error, "java_exception", None)
    if java is None:
        get_condition = getattr(error, "getCondition", None)
        condition = get_condition() if callable(get_condition) else None
        if condition:
            parameters = dict(error.getMessageParameters() or {})  # type: ignore[attr-defined]
            yield condition, parameters, _connect_root_cause(str(error))
        return
    chain: list[Any] = []
    while java is not None and len(chain) < 20:
        chain.append(java)
        java = java.getCause()
    cause = str(chain[-1].toString())
    for throwable in chain:
        try:
            condition = throwable.getCondition()
        except Exception:  # not a SparkThrowable
            continue
        if condition:
            yield str(condition), dict(throwable.getMessageParameters()), cause


def _without_scheme(path: str) -> str:
    """``file:///a/b``, ``file:/a/b`` and ``/a/b`` as ``/a/b``; other schemes unchanged."""
    if path.startswith("file:"):
        return "/" + path.removeprefix("file:").lstrip("/")
    return path
