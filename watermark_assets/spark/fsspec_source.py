"""A Spark Python data source that reads and writes files through fsspec on the executors.

Spark reads ``s3a://`` only with the hadoop-aws jars, which not every machine can fetch. This
source does the file I/O in Spark's Python workers with fsspec (s3fs, local, ``memory://``...),
so Spark still plans, distributes and parses; :mod:`watermark_assets.spark.io` picks it for every
URI Hadoop cannot read.

Reading (``spark.read.format(SOURCE_NAME)``), option ``files`` is a JSON list of file URIs:

- ``format`` ``parquet``: Arrow record batches in the schema given to the reader (columns
  matched by name, case-insensitively; a column the file lacks is null; with ``base_path``,
  Hive-style ``name=value`` folders below it fill the schema's partition columns).
- ``format`` ``lines``: one row per text line, ``(LINE_COLUMN, FILE_COLUMN)``, the file
  decompressed by its suffix (``.gz``, ``.bz2``, ``.xz``, ``.zst``) and split where Hadoop's line
  reader splits (``\\n``, ``\\r\\n``, ``\\r``). The caller parses the lines with ``from_json`` /
  ``from_csv`` (PERMISSIVE, corrupt-record column): the same parser as Spark's file readers.
  ``skip_blank`` drops blank lines (as Spark's JSON and CSV readers do), ``comment`` drops lines
  starting with it, ``header`` ``true`` drops each file's first remaining line, ``whole_file``
  ``true`` gives one row per file (multi-line JSON).

One input partition per ``files_per_partition`` files (default 1). A file whose content cannot be
decoded (not gzip, no Parquet footer) fails the task with :data:`UNREADABLE_MARKER` and its URI,
which :func:`watermark_assets.spark.batch.unreadable_file` recognises; a missing file or a storage
error fails it as it is.

Writing (``frame.write.format(SOURCE_NAME).mode("append")``), option ``target`` is a folder URI:
each task writes its rows as one Parquet file per value of ``partition_by`` (a JSON list of
columns, already cast to strings by the caller, in Hive-style folders escaped like Spark's own
writer), named ``part-{task:05d}-{job}-{unique}.c000.snappy.parquet``, under the hidden folder
``_temporary/{job}``. A task that fails removes its own files; the job's commit (on the driver,
once every task succeeded) moves the files the tasks reported into place and removes the pending
folder, so a failed, retried or speculative attempt's files, or a late task's after an abort,
never sit among the output; the job's abort removes the pending folder. A job of no row writes
one empty file (the schema), as Spark's Parquet writer does for an unpartitioned frame.

Storage settings (endpoint, region, credentials) travel in ONE option, :data:`SECRET_OPTION`,
whose key Spark's default ``spark.redaction.regex`` matches, so plans show it redacted; no repr
of this module's objects shows it.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from fsspec import AbstractFileSystem
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

#: The short name Spark knows this source by.
SOURCE_NAME = "watermark_assets_fsspec"
#: The option holding :func:`watermark_assets.storage.portable_settings` (its key matches Spark's
#: default ``spark.redaction.regex``, ``(?i)secret|password|token|access[.]key``).
SECRET_OPTION = "storage.secret"
#: Columns of the ``lines`` format.
LINE_COLUMN = "_watermark_assets_line"
FILE_COLUMN = "_watermark_assets_file"
#: Prefix of the error of a task that found a file it cannot decode: the file's URI (JSON) follows.
UNREADABLE_MARKER = "WATERMARK_ASSETS_UNREADABLE_FILE "
#: Where a write's tasks put their files until the job commits (hidden: a name starting with
#: ``_`` is no data file to Spark, nor to :func:`watermark_assets.staging.list_parquet`).
PENDING_DIR = "_temporary"
#: Spark's name for a null partition value.
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
#: Lines per Arrow batch of the ``lines`` format.
_LINES_PER_BATCH = 65536
#: Characters Spark's writer escapes in partition folder names (``ExternalCatalogUtils``).
_ESCAPED = frozenset([chr(c) for c in range(0x01, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))


def register(spark: SparkSession) -> None:
    """Register the source with ``spark`` once (later calls with the same session do nothing)."""
    if getattr(spark, "_watermark_assets_fsspec", False):
        return
    spark.dataSource.register(FsspecDataSource)
    # a session object that takes no attribute registers every time
    with contextlib.suppress(AttributeError):
        spark._watermark_assets_fsspec = True  # type: ignore[attr-defined]


def escape_partition_value(text: str | None) -> str:
    """A partition value as Spark's writer names its folder: NULL or empty as
    ``__HIVE_DEFAULT_PARTITION__``, special characters as ``%XX``."""
    if text is None or text == "":
        return HIVE_NULL
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def partition_folder(columns: Sequence[str], values: Sequence[str | None]) -> str:
    """``a=1/b=x`` for the partition columns and their values (both escaped)."""
    return "/".join(
        f"{escape_partition_value(c)}={escape_partition_value(v)}"
        for c, v in zip(columns, values, strict=True)
    )


def _filesystem(uri: str, settings: str | None) -> tuple[AbstractFileSystem, str]:
    """fsspec for ``uri`` with the driver's storage settings installed in this process."""
    from watermark_assets import storage

    if settings is not None:
        _install(settings)
    return storage.filesystem(uri)


_installed_settings: list[str] = []


def _install(settings: str) -> None:
    """Install the settings text once per Python worker (workers are reused)."""
    if _installed_settings and _installed_settings[0] == settings:
        return
    from watermark_assets import storage

    storage.configure_from_portable(settings)
    _installed_settings[:] = [settings]


class FsspecDataSource(DataSource):
    """``spark.read.format("watermark_assets_fsspec")`` / ``frame.write.format(...)``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def __repr__(self) -> str:
        return f"FsspecDataSource(options={sorted(k for k in self.options)})"

    def schema(self) -> str:
        if self.options.get("format", "lines") == "lines":
            return f"{LINE_COLUMN} STRING, {FILE_COLUMN} STRING"
        raise ValueError(
            f"the {SOURCE_NAME} source reads Parquet in the schema it is given: call "
            ".schema(...) on the reader (watermark_assets.spark.io.read_files does)"
        )

    def reader(self, schema: StructType) -> DataSourceReader:
        files = json.loads(self.options.get("files", "[]"))
        per_partition = int(self.options.get("files_per_partition", "1"))
        return FsspecReader(
            files=list(files),
            format=self.options.get("format", "lines"),
            schema_json=schema.json(),
            files_per_partition=max(per_partition, 1),
            base_path=self.options.get("base_path"),
            header=self.options.get("header", "false").lower() == "true",
            skip_blank=self.options.get("skip_blank", "false").lower() == "true",
            comment=self.options.get("comment") or None,
            whole_file=self.options.get("whole_file", "false").lower() == "true",
            encoding=self.options.get("encoding", "utf-8"),
            settings=self.options.get(SECRET_OPTION),
        )

    def writer(self, schema: StructType, overwrite: bool) -> FsspecWriter:
        target = self.options.get("target")
        if not target:
            raise ValueError(f"the {SOURCE_NAME} writer needs the option 'target' (a folder URI)")
        return FsspecWriter(
            target=target.rstrip("/"),
            partition_by=list(json.loads(self.options.get("partition_by", "[]"))),
            job=self.options.get("job") or uuid.uuid4().hex,
            schema_json=schema.json(),
            timezone=self.options.get("timezone", "UTC"),
            settings=self.options.get(SECRET_OPTION),
        )


class FilesPartition(InputPartition):
    """The files one task reads (never the storage settings: Spark may print partitions)."""

    def __init__(self, files: Sequence[str]) -> None:  # InputPartition's takes one value
        self.files = tuple(files)


@dataclass
class FsspecReader(DataSourceReader):
    files: list[str]
    format: str
    schema_json: str
    files_per_partition: int
    base_path: str | None
    header: bool
    skip_blank: bool
    comment: str | None
    whole_file: bool
    encoding: str
    settings: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"FsspecReader(format={self.format!r}, files={len(self.files)})"

    def partitions(self) -> Sequence[InputPartition]:
        step = self.files_per_partition
        return [FilesPartition(self.files[i : i + step]) for i in range(0, len(self.files), step)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # No files: partitions() is empty and Spark reads one default InputPartition instead
        files = partition.files if isinstance(partition, FilesPartition) else ()
        for uri in files:
            if self.format == "parquet":
                yield from self._parquet(uri)
            else:
                yield from self._lines(uri)

    # -- reading one file ---------------------------------------------------------------------

    def _bytes(self, uri: str) -> bytes:
        """The file's content, decompressed by its suffix (a decoding error names the file)."""
        from fsspec.compression import compr
        from fsspec.utils import infer_compression

        fs, path = _filesystem(uri, self.settings)
        data: bytes = fs.cat_file(path)
        compression = infer_compression(path) if self.format != "parquet" else None
        if compression is None:
            return data
        import io

        try:
            with compr[compression](io.BytesIO(data), mode="rb") as handle:
                decompressed: bytes = handle.read()
                return decompressed
        except Exception as error:
            raise _unreadable(uri, error) from error

    def _lines(self, uri: str) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        text = self._bytes(uri).decode(self.encoding, errors="replace")
        if self.whole_file:
            lines = [text] if text.strip() else []
        else:
            lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            if lines and lines[-1] == "":
                lines.pop()  # the final line break ends the last line
            if self.skip_blank:
                lines = [line for line in lines if line.strip(" \t")]
            if self.comment:
                lines = [line for line in lines if not line.startswith(self.comment)]
            if self.header and lines:
                lines = lines[1:]
        schema = pa.schema([(LINE_COLUMN, pa.string()), (FILE_COLUMN, pa.string())])
        for start in range(0, len(lines), _LINES_PER_BATCH):
            chunk = lines[start : start + _LINES_PER_BATCH]
            yield pa.record_batch(
                [pa.array(chunk, pa.string()), pa.array([uri] * len(chunk), pa.string())],
                schema=schema,
            )

    def _parquet(self, uri: str) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import StructType

        target = to_arrow_schema(StructType.fromJson(json.loads(self.schema_json)), timezone="UTC")
        partition_values = _partition_values(uri, self.base_path)
        data = self._bytes(uri)
        try:
            parquet = pq.ParquetFile(pa.BufferReader(data))
            in_file = {name.lower(): name for name in parquet.schema_arrow.names}
            wanted = [
                in_file[f.name.lower()]
                for f in target
                if f.name.lower() in in_file and f.name.lower() not in partition_values
            ]
            batches = parquet.iter_batches(batch_size=65536, columns=wanted)
            for batch in batches:
                yield _conform(batch, target, in_file, partition_values, uri)
        except _Unreadable:
            raise
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as error:
            raise _unreadable(uri, error) from error


class _Unreadable(Exception):
    pass


def _unreadable(uri: str, error: BaseException) -> _Unreadable:
    cause = f"{type(error).__name__}: {error}"
    return _Unreadable(f"{UNREADABLE_MARKER}{json.dumps(uri)}: {cause}")


def _partition_values(uri: str, base_path: str | None) -> dict[str, str | None]:
    """``{column (lower case): value}`` of the ``name=value`` folders between ``base_path`` and
    the file (unescaped; ``__HIVE_DEFAULT_PARTITION__`` is None)."""
    from urllib.parse import unquote

    if not base_path:
        return {}
    root = base_path.rstrip("/") + "/"
    if not uri.startswith(root):
        return {}
    values: dict[str, str | None] = {}
    for segment in posixpath.dirname(uri[len(root) :]).split("/"):
        name, equals, value = segment.partition("=")
        if equals and name:
            raw = unquote(value)
            values[unquote(name).lower()] = None if raw == HIVE_NULL else raw
    return values


def _conform(
    batch: pa.RecordBatch,
    target: pa.Schema,
    in_file: Mapping[str, str],
    partition_values: Mapping[str, str | None],
    uri: str,
) -> pa.RecordBatch:
    """The batch in the target schema: file columns cast, partition columns from the path,
    the file's URI in FILE_COLUMN, missing columns null."""
    import pyarrow as pa

    columns = []
    for target_field in target:
        key = target_field.name.lower()
        if target_field.name == FILE_COLUMN:
            columns.append(pa.array([uri] * batch.num_rows, pa.string()))
        elif key in partition_values:
            text = pa.array([partition_values[key]] * batch.num_rows, pa.string())
            columns.append(text.cast(target_field.type))
        elif key in in_file:
            column = batch.column(in_file[key])
            columns.append(
                column if column.type == target_field.type else column.cast(target_field.type)
            )
        else:
            columns.append(pa.nulls(batch.num_rows, target_field.type))
    return pa.RecordBatch.from_arrays(columns, schema=target)


@dataclass
class WrittenFiles(WriterCommitMessage):
    """The files one task wrote, relative to the target folder."""

    files: list[str]


@dataclass
class FsspecWriter(DataSourceArrowWriter):
    target: str
    partition_by: list[str]
    job: str
    schema_json: str
    timezone: str
    settings: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"FsspecWriter(target={self.target!r}, partition_by={self.partition_by!r})"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFiles:
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark import TaskContext
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import StructType

        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        name = f"part-{task:05d}-{self.job}-{uuid.uuid4().hex[:12]}.c000.snappy.parquet"
        fs, root = _filesystem(self.target, self.settings)
        pending = f"{root}/{PENDING_DIR}/{self.job}"
        open_files: dict[str, tuple[Any, Any]] = {}  # folder -> (handle, ParquetWriter)
        written: list[str] = []
        schema = to_arrow_schema(
            StructType.fromJson(json.loads(self.schema_json)), timezone=self.timezone
        )

        def writer_for(folder: str, data_schema: pa.Schema) -> Any:
            if folder not in open_files:
                relative = posixpath.join(folder, name) if folder else name
                path = f"{pending}/{relative}"
                fs.makedirs(posixpath.dirname(path), exist_ok=True)
                written.append(relative)
                handle = fs.open(path, "wb")
                parquet = pq.ParquetWriter(
                    handle, data_schema, compression="snappy", store_schema=False
                )
                open_files[folder] = (handle, parquet)
            return open_files[folder][1]

        try:
            data_columns = [n for n in schema.names if n not in self.partition_by]
            data_schema = pa.schema([schema.field(n) for n in data_columns])
            for batch in iterator:
                if batch.num_rows == 0:
                    continue
                if not self.partition_by:
                    writer_for("", data_schema).write_batch(_as(batch, data_schema))
                    continue
                for values, rows in _split(batch, self.partition_by):
                    folder = partition_folder(self.partition_by, values)
                    writer_for(folder, data_schema).write_batch(_as(rows, data_schema))
            if not open_files and task == 0 and not self.partition_by:
                writer_for("", data_schema)  # an empty frame: one file with the schema
            for handle, parquet in open_files.values():
                parquet.close()
                handle.close()
        except BaseException:
            for handle, parquet in open_files.values():
                try:
                    parquet.close()
                    handle.close()
                except Exception:
                    pass
            for relative in written:
                with contextlib.suppress(Exception):
                    fs.rm(f"{pending}/{relative}")
            raise
        return WrittenFiles(written)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Move the files of the successful tasks into place; drop the job's pending folder (a
        failed or speculative attempt's files, and any a late task still writes, stay hidden)."""
        fs, root = _filesystem(self.target, self.settings)
        pending = f"{root}/{PENDING_DIR}/{self.job}"
        for message in messages:
            if not isinstance(message, WrittenFiles):
                continue
            for relative in message.files:
                final = f"{root}/{relative}"
                fs.makedirs(posixpath.dirname(final), exist_ok=True)
                fs.mv(f"{pending}/{relative}", final)
        _remove_tree(fs, pending)
        _remove_tree(fs, f"{root}/{PENDING_DIR}", only_if_empty=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        fs, root = _filesystem(self.target, self.settings)
        _remove_tree(fs, f"{root}/{PENDING_DIR}/{self.job}")
        _remove_tree(fs, f"{root}/{PENDING_DIR}", only_if_empty=True)


def _remove_tree(fs: AbstractFileSystem, path: str, *, only_if_empty: bool = False) -> None:
    try:
        if not fs.exists(path):
            return
        if only_if_empty:
            if not fs.find(path):
                fs.rm(path, recursive=True)
            return
        fs.rm(path, recursive=True)
    except FileNotFoundError:
        pass


def _as(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The batch's columns of ``schema``, in its order and with its field attributes."""
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([batch.column(n) for n in schema.names], schema=schema)


def _split(
    batch: pa.RecordBatch, columns: Sequence[str]
) -> Iterator[tuple[tuple[str | None, ...], pa.RecordBatch]]:
    """The batch's rows per distinct tuple of the (string) partition columns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.Table.from_batches([batch])
    keys = table.select(list(columns)).group_by(list(columns)).aggregate([]).to_pylist()
    for key in keys:
        mask = None
        for column in columns:
            value = key[column]
            test = pc.is_null(table[column]) if value is None else pc.equal(table[column], value)
            test = pc.fill_null(test, False)
            mask = test if mask is None else pc.and_(mask, test)
        selected = table.filter(mask).combine_chunks()
        for part in selected.to_batches():
            yield tuple(key[c] for c in columns), part
