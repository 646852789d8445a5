"""Describe Parquet data files for Delta add actions: size, mtime, partition values, footer stats.

Contract: :func:`describe_data_files` reads only each file's footer
(``pyarrow.parquet.read_metadata`` through fsspec) and its ``info`` (size, modification time); it
never reads the data. Statistics follow the Delta protocol's per-file statistics: ``numRecords``
plus ``minValues``, ``maxValues`` and ``nullCount`` for top-level primitive columns. A value is
left out rather than guessed: a reader treats a missing bound as "unknown" and reads the file,
while a wrong bound would make it skip rows silently. So are left out:

- columns without Parquet statistics in some row group (Spark's default INT96 timestamps have
  none: set ``spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS`` to get timestamp stats);
- binary, nested (struct, list, map), time and nanosecond-timestamp columns;
- decimals of more than 15 digits (JSON numbers pass through a float) and non-finite floats;
- the maximum of strings longer than 32 characters (their minimum is cut to a 32-character prefix,
  still a lower bound), as Delta itself does to keep the log small.

Timestamps are written as ISO 8601 UTC strings with ``Z`` at microsecond precision
(``2024-01-01T00:00:00.123456Z``), timestamps without time zone without the ``Z``, dates as
``YYYY-MM-DD``. Partition columns are not in the files (Hive-style layout) and have no statistics;
their values come from the ``col=value`` segments of the path.
"""

from __future__ import annotations

import json
import math
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from watermark_assets import storage
from watermark_assets.exceptions import (
    DeltaCommitError,
    DeltaPartitionPathError,
    UnreadableDataFileError,
)

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
"""The directory value Hive, Spark and delta-rs write for a null partition value."""

STRING_STATS_PREFIX = 32
"""Longest string kept in the statistics (Delta's default ``dataSkippingStringPrefixLength``)."""

MAX_FLOAT_EXACT_DECIMAL_DIGITS = 15
"""Decimals up to this many digits survive the trip through a JSON float exactly."""


@dataclass(frozen=True)
class DataFile:
    """One Parquet file to add to a Delta table, as its add action will describe it.

    ``path`` is the file's real name relative to the table root, '/'-separated and not escaped:
    it is what deltalake's ``AddAction`` takes (delta-rs percent-encodes it in the log itself).
    ``modification_time`` is in milliseconds since the epoch; ``stats`` is the Delta stats JSON.
    """

    path: str
    size: int
    modification_time: int
    partition_values: Mapping[str, str | None]
    num_records: int
    stats: str


def describe_data_files(
    table_uri: str,
    relative_paths: Sequence[str],
    partition_by: Sequence[str],
    *,
    filesystem: fsspec.AbstractFileSystem | None = None,
) -> list[DataFile]:
    """Describe the Parquet files at ``relative_paths`` under ``table_uri``, in the given order.

    ``table_uri`` is a local path, a ``file://`` or an ``s3://`` URI; ``filesystem`` overrides the
    fsspec filesystem inferred from it. Raises :class:`DeltaPartitionPathError` when a path lacks a
    ``col=value`` segment for one of ``partition_by``, :class:`DeltaCommitError` when a file is
    missing or is not Parquet.
    """
    return [
        described
        for described, _ in describe_with_schemas(
            table_uri, relative_paths, partition_by, filesystem=filesystem
        )
    ]


def describe_with_schemas(
    table_uri: str,
    relative_paths: Sequence[str],
    partition_by: Sequence[str],
    *,
    filesystem: fsspec.AbstractFileSystem | None = None,
) -> list[tuple[DataFile, pa.Schema]]:
    """:func:`describe_data_files`, each file with the Arrow schema of its footer (read once:
    the statistics and the schema, e.g. to check files committed by reference)."""
    if filesystem is None:
        fs, root = storage.filesystem(table_uri)
    else:
        fs, root = filesystem, filesystem._strip_protocol(table_uri)
    root = str(root).rstrip("/")
    described = []
    for relative in relative_paths:
        path = _normalised_relative_path(table_uri, relative)
        full = f"{root}/{path}"
        try:
            info = fs.info(full)
            metadata = pq.read_metadata(full, filesystem=fs)
            schema = metadata.schema.to_arrow_schema()
        except FileNotFoundError as exc:
            raise DeltaCommitError(
                f"data file {path!r} is not under table {table_uri!r}; a file must be in place "
                "before it is committed. Write it again (re-run the batch) or leave it out",
                table_uri=table_uri,
            ) from exc
        except (OSError, pa.ArrowInvalid) as exc:
            raise UnreadableDataFileError(path, str(exc), table_uri=table_uri) from exc
        partition_values = partition_values_of(table_uri, path, partition_by)
        data_file = DataFile(
            path=path,
            size=int(info["size"]),
            modification_time=modification_time_ms(info),
            partition_values=partition_values,
            num_records=metadata.num_rows,
            stats=json.dumps(file_statistics(metadata, set(partition_by)), sort_keys=True),
        )
        described.append((data_file, schema))
    return described


def partition_values_of(
    table_uri: str, path: str, partition_by: Sequence[str]
) -> dict[str, str | None]:
    """The values of ``partition_by`` in the Hive-style ``col=value`` directories of ``path``.

    Names and values are URL-unquoted (Spark and delta-rs escape ``/``, ``=``, ``%``, ``:`` and
    more); ``__HIVE_DEFAULT_PARTITION__`` is the null value.
    """
    found: dict[str, str | None] = {}
    for segment in path.split("/")[:-1]:
        name, sep, value = segment.partition("=")
        if sep:
            raw = unquote(value)
            found[unquote(name)] = None if raw == HIVE_NULL else raw
    for column in partition_by:
        if column not in found:
            raise DeltaPartitionPathError(table_uri, path, column)
    return {column: found[column] for column in partition_by}


def file_statistics(metadata: pq.FileMetaData, partition_columns: set[str]) -> dict[str, Any]:
    """The Delta statistics of one Parquet file, from its footer (see the module docstring)."""
    schema = metadata.schema.to_arrow_schema()
    leaf_index = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for field in schema:
        index = leaf_index.get(field.name)
        if field.name in partition_columns or index is None or not _has_stats_type(field.type):
            continue
        column = _column_statistics(metadata, index, field.type)
        if column is None:
            continue
        low, high, null_count = column
        if null_count is not None:
            nulls[field.name] = null_count
        if low is not None:
            mins[field.name] = low
        if high is not None:
            maxs[field.name] = high
    return {
        "numRecords": metadata.num_rows,
        "minValues": mins,
        "maxValues": maxs,
        "nullCount": nulls,
    }


def _column_statistics(
    metadata: pq.FileMetaData, index: int, arrow_type: pa.DataType
) -> tuple[Any, Any, int | None] | None:
    """(min, max, null count) of one column over all row groups; None parts are unknown."""
    low: Any = None
    high: Any = None
    null_count: int | None = 0
    bounds_known = True
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        stats = row_group.column(index).statistics
        if stats is None:
            return None
        if stats.has_null_count and null_count is not None:
            null_count += stats.null_count
        else:
            null_count = None
        if stats.has_min_max:
            low = stats.min if low is None else min(low, stats.min)
            high = stats.max if high is None else max(high, stats.max)
        elif not (stats.has_null_count and stats.null_count == row_group.num_rows):
            # Only an all-null row group may lack bounds without making the file's unknown.
            bounds_known = False
    if not bounds_known or low is None:
        return None, None, null_count
    return (
        _json_value(low, arrow_type, is_max=False),
        _json_value(high, arrow_type, is_max=True),
        null_count,
    )


def _has_stats_type(arrow_type: pa.DataType) -> bool:
    if pa.types.is_timestamp(arrow_type):
        return bool(arrow_type.unit != "ns")
    if pa.types.is_decimal(arrow_type):
        return bool(arrow_type.precision <= MAX_FLOAT_EXACT_DECIMAL_DIGITS)
    return bool(
        pa.types.is_integer(arrow_type)
        or pa.types.is_floating(arrow_type)
        or pa.types.is_boolean(arrow_type)
        or pa.types.is_string(arrow_type)
        or pa.types.is_large_string(arrow_type)
        or pa.types.is_date32(arrow_type)
    )


def _json_value(value: Any, arrow_type: pa.DataType, *, is_max: bool) -> Any:
    """``value`` as Delta writes it in the statistics JSON, or None to leave the bound out."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.strftime("%Y-%m-%dT%H:%M:%S.%f")
        return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str) and len(value) > STRING_STATS_PREFIX:
        # A prefix is still a lower bound; a cut maximum would be too low, so leave it out.
        return None if is_max else value[:STRING_STATS_PREFIX]
    if isinstance(value, (bool, int, str)):
        return value
    return None


def _normalised_relative_path(table_uri: str, relative: str) -> str:
    path = relative.removeprefix("./")
    segments = path.split("/")
    if not path or path.startswith("/") or "\\" in path or ".." in segments or "" in segments:
        raise DeltaCommitError(
            f"data file path {relative!r} is not a '/'-separated path relative to table "
            f"{table_uri!r}; pass paths like 'date=2024-01-28/part-0.parquet' under the table root",
            table_uri=table_uri,
        )
    return posixpath.normpath(path)


def modification_time_ms(info: Mapping[str, Any]) -> int:
    """Milliseconds since the epoch from an fsspec ``info`` (local: mtime, s3fs: LastModified)."""
    for key in ("mtime", "LastModified", "last_modified", "created"):
        value = info.get(key)
        if isinstance(value, datetime):
            stamp = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
            return int(stamp.timestamp() * 1000)
        if isinstance(value, (int, float)):
            return int(value * 1000)
    # Readers ignore modificationTime and VACUUM only looks at it for unreferenced files, so a
    # filesystem that reports none gets the epoch rather than a failed commit.
    return 0


# Reading statistics back (file skipping, range replace): a bound is trusted only when it proves it.

STATS_TIMESTAMP_SLACK = timedelta(milliseconds=1) - timedelta(microseconds=1)
"""Delta writers (delta-rs, Spark) cut timestamp statistics to milliseconds: a file's maximum may be
up to 999 microseconds above a recorded maximum that falls on a millisecond, so that much is added
before trusting it (a maximum with microseconds was not cut)."""


def stats_kind(arrow_type: pa.DataType) -> str | None:
    """The family of values a column's statistics hold ("number", "datetime", "date", "string");
    None for a type whose statistics are not read back."""
    if pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type):
        return "number"
    if pa.types.is_timestamp(arrow_type):
        return "datetime"
    if pa.types.is_date(arrow_type):
        return "date"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "string"
    return None


_PARSERS: dict[str, Callable[[str], Any]] = {
    "datetime": lambda text: datetime.fromisoformat(text.replace(" ", "T")),
    "date": date.fromisoformat,
    "number": lambda text: float(text) if any(c in text for c in ".eE") else int(text),
}


def stats_value(raw: Any, column_type: pa.DataType) -> Any:
    """A statistics or partition value (``get_add_actions`` or stats JSON) as a comparable value;
    None: unknown. Datetimes come back aware UTC (a timestamp without time zone: its wall clock
    read as UTC); a string at the prefix length may have been cut, so it is unknown."""
    if raw is None:
        return None
    kind = stats_kind(column_type)
    if kind == "string":
        # A cut maximum would be too low: a string at the prefix length may have been cut.
        return raw if isinstance(raw, str) and len(raw) < STRING_STATS_PREFIX else None
    if isinstance(raw, str) and kind in _PARSERS:
        try:
            raw = _PARSERS[kind](raw)
        except ValueError:
            return None
    if isinstance(raw, datetime):
        if raw.tzinfo is None:
            return raw.replace(tzinfo=timezone.utc)
        return raw.astimezone(timezone.utc)
    return raw


def widen_cut_maximum(high: Any, column_type: pa.DataType) -> Any:
    """A timestamp maximum read from statistics, widened by :data:`STATS_TIMESTAMP_SLACK` when it
    falls on a whole millisecond (a writer may have cut it there); other values as they are."""
    timestamp = pa.types.is_timestamp(column_type) and isinstance(high, datetime)
    if timestamp and high.microsecond % 1000 == 0:
        return high + STATS_TIMESTAMP_SLACK
    return high


def unsupported_read_feature(table: DeltaTable) -> str | None:
    """Why a table's Parquet files do not hold its rows as they are; None when they do.

    With deletion vectors a file still holds deleted rows; with column mapping its columns carry
    physical names. Either way reading (or rewriting) the files directly would be wrong.
    """
    protocol = table.protocol()
    features = {*(protocol.reader_features or ()), *(protocol.writer_features or ())}
    if "deletionVectors" in features:
        return "deletion vectors"
    mode = table.metadata().configuration.get("delta.columnMapping.mode", "none")
    if mode not in ("none", None) or "columnMapping" in (protocol.reader_features or ()):
        return "column mapping"
    return None
