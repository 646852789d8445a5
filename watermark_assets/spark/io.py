"""The only place that reads or writes files with Spark: :func:`read_files`, :func:`read_folder`
and :func:`write_parquet`.

Which path runs (:func:`is_native`):

- **native**: Spark's own file sources, for the URIs Hadoop reads here: local paths and
  ``file://`` always; ``s3://`` / ``s3a://`` only when the Spark conf :data:`NATIVE_S3_CONF` is
  ``true`` (a cluster with hadoop-aws on its classpath and ``fs.s3a.*`` settings). Paths are given
  literally (:mod:`watermark_assets.spark.paths`: no glob, RawLocalFileSystem), the lineage is
  Spark's ``_metadata.file_path`` decoded.
- **fsspec**: every other URI (``s3://`` without hadoop-aws, ``memory://``...): the Python data
  source :mod:`watermark_assets.spark.fsspec_source` reads the files on the executors (Parquet as
  Arrow batches; JSON and CSV as lines that ``from_json`` / ``from_csv`` parse in the same
  PERMISSIVE mode with the same corrupt-record column as Spark's readers) and writes Parquet files
  the same way; the lineage is the file's URI as it was requested. The storage settings travel
  in one option whose key Spark redacts.

Both paths give the same rows, the same lineage (a path whose part after the source root is the
requested relative path), the same Parquet layout (Hive-style partition folders, escaped alike)
and one empty file for an empty unpartitioned frame (its schema).
"""

from __future__ import annotations

import json
import logging
import math
import posixpath
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from watermark_assets import storage
from watermark_assets.spark import fsspec_source
from watermark_assets.spark.paths import (
    NATIVE_S3_CONF,
    decoded_file_path,
    literal_path,
    native_s3,
    reader_options,
    spark_path,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: Formats :func:`read_files` reads: ``ndjson`` (one JSON object a line) is ``json``.
FORMATS = ("json", "ndjson", "csv", "parquet")

#: Reader options that are about files, not records: the fsspec path handles them itself.
_FILE_OPTIONS = frozenset(
    {
        "multiline",
        "header",
        "encoding",
        "charset",
        "linesep",
        "comment",
        "pathglobfilter",
        "recursivefilelookup",
        "modifiedbefore",
        "modifiedafter",
        "basepath",
        "mergeschema",
        "samplingratio",
        "inferschema",
        "enforceschema",
    }
)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def is_native(spark: SparkSession, uri: str) -> bool:
    """Whether Spark's own file sources read and write ``uri`` (see the module docstring)."""
    scheme = _SCHEME.match(uri)
    if scheme is None or scheme.group(1).lower() == "file":
        return True
    if scheme.group(1).lower() in ("s3", "s3a"):
        return native_s3(spark.conf.get(NATIVE_S3_CONF, "false"))
    return False


def read_files(
    spark: SparkSession,
    uris: Sequence[str],
    *,
    format: str,
    schema: str | StructType | None = None,
    options: Mapping[str, str] | None = None,
    corrupt_column: str | None = None,
    file_column: str | None = None,
    base_path: str | None = None,
    files_per_partition: int | None = None,
    via: str | None = None,
    reported_file_column: str | None = None,
) -> DataFrame:
    """The rows of exactly the files ``uris`` (each read literally, never as a glob).

    ``schema``: DDL or a StructType (JSON and CSV need one; Parquet without one takes the first
    file's). ``corrupt_column``: PERMISSIVE mode, a malformed JSON/CSV record's text in that
    column (added to the schema). ``file_column``: a column with the row's file path (its part
    after a source root is the path relative to that root). ``base_path``: Hive-style
    ``name=value`` folders between it and the files are partition columns. ``via``: "native"
    or "fsspec" forces a path (tests, benchmarks); None picks it by :func:`is_native`.
    ``reported_file_column``: the file as the reader reports it, for error messages (Spark's
    URI-encoded ``_metadata.file_path``; the requested URI on the fsspec path).
    """
    fmt = _format(format)
    opts = {k: str(v) for k, v in (options or {}).items()}
    if corrupt_column is not None and fmt == "parquet":
        raise ValueError("corrupt_column is for JSON and CSV records, not Parquet")
    if fmt != "parquet" and schema is None:
        raise ValueError(f"reading {fmt} files needs a schema (DDL), e.g. 'id BIGINT, name STRING'")
    full_schema = _with_corrupt(schema, corrupt_column)
    first = base_path or (uris[0] if uris else None)
    native = first is None or is_native(spark, first) if via is None else via == "native"
    if native:
        return _read_native(
            spark,
            uris,
            fmt,
            full_schema,
            opts,
            corrupt_column,
            file_column,
            base_path,
            reported_file_column,
        )
    frame = _read_fsspec(
        spark,
        list(uris),
        fmt,
        full_schema,
        opts,
        corrupt_column,
        file_column,
        base_path,
        files_per_partition,
    )
    if reported_file_column is not None and file_column is not None:
        frame = frame.withColumn(reported_file_column, _col(file_column))
    return frame


def read_folder(
    spark: SparkSession,
    uri: str,
    *,
    format: str,
    schema: str | StructType | None = None,
    options: Mapping[str, str] | None = None,
) -> DataFrame:
    """Every data file under the folder ``uri`` (recursively; names starting with ``_`` or
    ``.`` skipped, as Spark skips them), Hive-style folders as partition columns."""
    fmt = _format(format)
    if is_native(spark, uri):
        reader = spark.read.options(**reader_options(uri))
        if schema is not None:
            reader = reader.schema(schema)
        reader = reader.options(**{k: str(v) for k, v in (options or {}).items()})
        return reader.format("json" if fmt == "ndjson" else fmt).load(literal_path(uri))
    files = _data_files(uri)
    if schema is None and fmt == "parquet" and files:
        schema = _parquet_schema(spark, files, uri)
    return read_files(spark, files, format=fmt, schema=schema, options=options, base_path=uri)


def write_parquet(
    frame: DataFrame,
    uri: str,
    *,
    partition_by: Sequence[str] = (),
    mode: str = "error",
    via: str | None = None,
) -> None:
    """Write ``frame`` as Parquet files under the folder ``uri`` (Hive-style partition folders
    for ``partition_by``). ``mode``: error (the folder must not exist; Spark Connect does not take
    the spelling errorifexists), overwrite, append or ignore, as Spark's writer. An empty
    unpartitioned frame writes one empty file. ``via`` as for :func:`read_files`."""
    spark = frame.sparkSession
    if is_native(spark, uri) if via is None else via == "native":
        frame.write.mode(mode).partitionBy(*partition_by).parquet(spark_path(uri))
        return
    fs, root = storage.filesystem(uri)
    normalized = mode.lower().replace("_", "")
    if normalized not in ("errorifexists", "error", "default", "overwrite", "append", "ignore"):
        raise ValueError(f"write mode {mode!r}: give errorifexists, overwrite, append or ignore")
    if fs.exists(root):
        if normalized in ("errorifexists", "error", "default"):
            raise FileExistsError(
                f"the Parquet output folder {uri!r} already exists; remove it or write with "
                "mode 'overwrite' or 'append'"
            )
        if normalized == "ignore":
            return
        if normalized == "overwrite":
            fs.rm(root, recursive=True)
    missing = [c for c in partition_by if c not in frame.columns]
    if missing:
        raise ValueError(f"partition_by {missing} are not columns of the frame {frame.columns}")
    # Spark names a partition folder by the value cast to a string (session time zone).
    columns = [
        _col(c).cast("string").alias(c) if c in partition_by else _col(c) for c in frame.columns
    ]
    data = frame.select(*columns) if partition_by else frame
    fsspec_source.register(spark)
    (
        data.write.format(fsspec_source.SOURCE_NAME)
        .mode("append")
        .option("target", uri)
        .option("partition_by", json.dumps(list(partition_by)))
        .option("job", uuid.uuid4().hex[:16])
        .option("timezone", str(spark.conf.get("spark.sql.session.timeZone", "UTC")))
        .option(fsspec_source.SECRET_OPTION, _portable_settings())
        .save()
    )


def list_data_files(uri: str) -> list[str]:
    """The data files under the folder ``uri`` as :func:`read_folder` reads them (recursively,
    names starting with ``_`` or ``.`` skipped), sorted; none for a missing folder."""
    return list(data_file_infos(uri))


def data_file_infos(uri: str) -> dict[str, Mapping[str, Any]]:
    """:func:`list_data_files` with each file's fsspec ``info`` (size, modification time), from
    ONE listing."""
    fs, root = storage.filesystem(uri)
    try:
        found = fs.find(root, detail=True)
    except FileNotFoundError:
        return {}
    files: dict[str, Mapping[str, Any]] = {}
    for path in sorted(found):
        relative = path[len(root) :].lstrip("/")
        if not any(storage.hidden_in_output(p) for p in relative.split("/")):
            files[storage.join(uri, relative)] = found[path]
    return files


def parquet_read_schema(
    spark: SparkSession, uris: Sequence[str], base_path: str | None
) -> StructType:
    """The schema of the first file of ``uris`` (its footer), then the partition columns of the
    ``name=value`` folders of all of them below ``base_path`` (types inferred as Spark does)."""
    schema: StructType = _parquet_schema(spark, uris, base_path)
    return schema


def struct_of(spark: SparkSession, schema: str | StructType) -> StructType:
    """``schema`` (DDL or a StructType) as a StructType."""
    return _struct(spark, schema)


# -- native ------------------------------------------------------------------------------------


def _read_native(
    spark: SparkSession,
    uris: Sequence[str],
    fmt: str,
    schema: str | StructType | None,
    options: Mapping[str, str],
    corrupt_column: str | None,
    file_column: str | None,
    base_path: str | None,
    reported_file_column: str | None,
) -> DataFrame:
    reader = spark.read.options(**reader_options(base_path or (uris[0] if uris else "")))
    if schema is not None:
        reader = reader.schema(schema)
    if corrupt_column is not None:
        reader = reader.option("mode", "PERMISSIVE").option(
            "columnNameOfCorruptRecord", corrupt_column
        )
    reader = reader.options(**options)
    if base_path is not None:
        reader = reader.option("basePath", spark_path(base_path))
    spark_format = "json" if fmt == "ndjson" else fmt
    frame = reader.format(spark_format).load([literal_path(u) for u in uris])
    from pyspark.sql import functions as F

    added = []
    if file_column is not None:
        added.append(decoded_file_path(F.col("_metadata.file_path")).alias(file_column))
    if reported_file_column is not None:
        added.append(F.col("_metadata.file_path").alias(reported_file_column))
    if added:
        names = {file_column, reported_file_column}
        frame = frame.select(*[_col(c) for c in frame.columns if c not in names], *added)
    return frame


# -- fsspec ------------------------------------------------------------------------------------


def _read_fsspec(
    spark: SparkSession,
    uris: list[str],
    fmt: str,
    schema: str | StructType | None,
    options: dict[str, str],
    corrupt_column: str | None,
    file_column: str | None,
    base_path: str | None,
    files_per_partition: int | None,
) -> DataFrame:
    from pyspark.sql import functions as F

    fsspec_source.register(spark)
    lowered = {k.lower(): v for k, v in options.items()}
    if lowered.get("multiline", "false").lower() == "true" and fmt == "csv":
        raise ValueError(
            f"CSV with multiLine=true is read by Spark's own reader only; the URIs {uris[:1]} are "
            "read through fsspec: remove multiLine, or set spark.watermark_assets.s3.native=true "
            "on a cluster with hadoop-aws"
        )
    per_partition = files_per_partition or _files_per_partition(spark, len(uris))
    reader = (
        spark.read.format(fsspec_source.SOURCE_NAME)
        .option("files", json.dumps(uris))
        .option("files_per_partition", str(per_partition))
        .option(fsspec_source.SECRET_OPTION, _portable_settings())
    )
    if base_path is not None:
        reader = reader.option("base_path", base_path)
    file_name = fsspec_source.FILE_COLUMN
    if fmt == "parquet":
        if schema is None:
            schema = _parquet_schema(spark, uris, base_path)
        struct = _struct(spark, schema)
        from pyspark.sql.types import StringType, StructField, StructType

        with_file = StructType([*struct.fields, StructField(file_name, StringType())])
        frame = reader.option("format", "parquet").schema(with_file).load()
        names = [f.name for f in struct.fields]
        out = [_col(n) for n in names if n != file_column]
        if file_column is not None:
            out.append(F.col(file_name).alias(file_column))
        return frame.select(*out)
    assert schema is not None
    whole_file = fmt != "csv" and lowered.get("multiline", "false").lower() == "true"
    reader = (
        reader.option("format", "lines")
        .option("skip_blank", "true")
        .option("header", lowered.get("header", "false"))
        .option("whole_file", str(whole_file).lower())
        .option("encoding", lowered.get("encoding", lowered.get("charset", "utf-8")))
    )
    if fmt == "csv" and lowered.get("comment"):
        reader = reader.option("comment", lowered["comment"])
    lines = reader.load()
    parse_options = {k: v for k, v in options.items() if k.lower() not in _FILE_OPTIONS}
    if corrupt_column is not None:
        parse_options |= {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": corrupt_column}
    line = F.col(fsspec_source.LINE_COLUMN)
    struct = _struct(spark, schema)
    parsed: Column
    if fmt == "csv":
        parsed = F.from_csv(line, _ddl(struct), parse_options)
    elif whole_file:
        parsed = _whole_file_json(line, struct, parse_options, corrupt_column)
        frame = lines.select(F.explode_outer(parsed).alias("_wa_row"), F.col(file_name))
        return _flatten(frame, struct, file_column)
    else:
        parsed = F.from_json(line, struct, parse_options)
    frame = lines.select(parsed.alias("_wa_row"), F.col(file_name))
    return _flatten(frame, struct, file_column)


def _flatten(frame: DataFrame, struct: StructType, file_column: str | None) -> DataFrame:
    from pyspark.sql import functions as F

    out = [F.col("_wa_row").getField(f.name).alias(f.name) for f in struct.fields]
    out = [c for c, f in zip(out, struct.fields, strict=True) if f.name != file_column]
    if file_column is not None:
        out.append(F.col(fsspec_source.FILE_COLUMN).alias(file_column))
    return frame.select(*out)


def _whole_file_json(
    line: Column, struct: StructType, options: Mapping[str, str], corrupt_column: str | None
) -> Column:
    """A whole-file JSON document (multiLine) as an array of records: a top-level array gives
    one record per element, an object one record; an unparsable file one record (all NULL,
    its text in the corrupt-record column)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType

    elements = [f for f in struct.fields if f.name != corrupt_column]
    from pyspark.sql.types import StructType

    element_type = StructType(elements)
    array_options = {k: v for k, v in options.items() if k not in ("columnNameOfCorruptRecord",)}
    array_options["mode"] = "PERMISSIVE"
    as_array = F.from_json(line, ArrayType(element_type), array_options)
    as_object = F.from_json(line, struct, dict(options))
    is_array = F.ltrim(line).startswith("[")

    def record(source: Column) -> Column:
        return F.struct(
            *[
                (F.lit(None) if f.name == corrupt_column else source.getField(f.name))
                .cast(f.dataType)
                .alias(f.name)
                for f in struct.fields
            ]
        )

    broken = F.struct(
        *[
            (line if f.name == corrupt_column else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in struct.fields
        ]
    )
    from_array = F.when(as_array.isNull(), F.array(broken)).otherwise(F.transform(as_array, record))
    return F.when(is_array, from_array).otherwise(F.array(as_object))


def _files_per_partition(spark: SparkSession, files: int) -> int:
    """Files per task: about two tasks per core (Spark's own parallelism setting), at least 1."""
    try:
        parallelism = int(spark.conf.get("spark.default.parallelism", "0") or 0)
    except ValueError:
        parallelism = 0
    if parallelism <= 0:
        parallelism = 4
    return max(1, math.ceil(files / (2 * parallelism)))


def _portable_settings() -> str:
    """The storage settings for the executors (secrets included), in the option Spark redacts.

    py4j logs every command it sends to the JVM at DEBUG, an option's value included: its logger
    is held at INFO or above here, so the value never reaches a log, whatever the root level.
    """
    py4j = logging.getLogger("py4j")
    if py4j.getEffectiveLevel() < logging.INFO:
        py4j.setLevel(logging.INFO)
    return storage.portable_settings()


def _format(format: str) -> str:
    fmt = format.lower()
    if fmt not in FORMATS:
        raise ValueError(f"file format {format!r} is not read here; give one of {list(FORMATS)}")
    return "json" if fmt == "ndjson" else fmt


def _with_corrupt(
    schema: str | StructType | None, corrupt_column: str | None
) -> str | StructType | None:
    if schema is None or corrupt_column is None:
        return schema
    if isinstance(schema, str):
        return f"{schema}\n, `{corrupt_column.replace('`', '``')}` STRING"  # after a -- comment
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType([*schema.fields, StructField(corrupt_column, StringType())])


def _struct(spark: SparkSession, schema: str | StructType) -> StructType:
    from pyspark.sql.types import StructField, StructType

    if isinstance(schema, StructType):
        return schema
    # The session's own DDL parser (classic and Connect), without a DataFrame: the first
    # ``createDataFrame([], ddl)`` of a session sets up the Python RDD machinery in the JVM,
    # a second or more on a run's critical path (benchmarks/bench_run_latency.py, B)
    parsed = spark._parse_ddl(schema)
    if isinstance(parsed, StructType):
        return parsed
    return StructType([StructField("value", parsed)])  # a bare type, as createDataFrame reads it


def _ddl(struct: StructType) -> str:
    """DDL of a schema (``from_csv`` takes DDL text)."""
    return ", ".join(
        f"`{f.name.replace('`', '``')}` {f.dataType.simpleString()}"
        + ("" if f.nullable else " NOT NULL")
        for f in struct.fields
    )


def _col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(f"`{name.replace('`', '``')}`")


def _data_files(uri: str) -> list[str]:
    """The data files under the folder ``uri``, as Spark lists a folder: hidden names skipped."""
    return list_data_files(uri)


def _parquet_schema(spark: SparkSession, uris: Sequence[str], base_path: str | None) -> Any:
    """The schema Spark infers for Parquet files: the first file's footer, then the partition
    columns of the ``name=value`` folders below ``base_path`` (int, bigint, double, date,
    timestamp or string by their values)."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructField, StructType

    if not uris:
        raise ValueError(
            "reading no Parquet file needs a schema (there is no footer to take it from)"
        )
    footer = from_arrow_schema(storage.parquet_schema(uris[0]), prefer_timestamp_ntz=True)
    values: dict[str, list[str | None]] = {}
    names: dict[str, str] = {}
    for uri in uris:
        for key, value in _path_partitions(uri, base_path):
            names.setdefault(key.lower(), key)
            values.setdefault(key.lower(), []).append(value)
    in_file = {f.name.lower() for f in footer.fields}
    fields = [f for f in footer.fields]
    for key, seen in values.items():
        if key not in in_file:
            fields.append(StructField(names[key], _infer_type(seen)))
    return StructType(fields)


def _path_partitions(uri: str, base_path: str | None) -> list[tuple[str, str | None]]:
    from urllib.parse import unquote

    if not base_path or not uri.startswith(base_path.rstrip("/") + "/"):
        return []
    relative = uri[len(base_path.rstrip("/")) + 1 :]
    found = []
    for segment in posixpath.dirname(relative).split("/"):
        name, equals, value = segment.partition("=")
        if equals and name:
            raw = unquote(value)
            found.append((unquote(name), None if raw == fsspec_source.HIVE_NULL else raw))
    return found


_INT = re.compile(r"^-?\d+$")
_FLOAT = re.compile(r"^-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$")


def _infer_type(values: Sequence[str | None]) -> Any:
    from pyspark.sql.types import (
        DateType,
        DoubleType,
        IntegerType,
        LongType,
        StringType,
        TimestampType,
    )

    present = [v for v in values if v is not None]
    if not present:
        return StringType()
    if all(_INT.match(v) for v in present):
        if all(-(2**31) <= int(v) < 2**31 for v in present):
            return IntegerType()
        if all(-(2**63) <= int(v) < 2**63 for v in present):
            return LongType()
    if all(_FLOAT.match(v) for v in present):
        return DoubleType()
    if all(_DATE.match(v) for v in present):
        return DateType()
    if all(_TIMESTAMP.match(v) for v in present):
        return TimestampType()
    return StringType()
