"""``source.type: parquet_commit``: Parquet files that another writer puts under the table folder
are committed where they are (the seed's Penguin): no Spark, no copy; each footer is read once."""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from watermark_assets import storage
from watermark_assets.delta.stats import DataFile, describe_data_files
from watermark_assets.exceptions import UnreadableDataFileError
from watermark_assets.sources.files import (
    FileBatch,
    StagedFiles,
    TableFiles,
    known_table_schema,
)

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import SparkSession

    from watermark_assets.config import FilePipelineConfig
    from watermark_assets.delta.log import CommitRecord
    from watermark_assets.spark.batch import UnreadableFile


class ParquetCommitSource:
    """Another writer's Parquet files, committed in place (their footers give the statistics)."""

    needs_spark = False
    compute_kinds = frozenset({"delta"})

    def __init__(self, pipeline: FilePipelineConfig) -> None:
        self.pipeline = pipeline

    def describe(self) -> str:
        return (
            f"Commits the Parquet files that another writer puts under "
            f"`{self.pipeline.source.uri}` to the Delta table `{self.pipeline.table.uri}` (no "
            "Spark: files are added as they are)."
        )

    def stage(self, batch: FileBatch, spark: SparkSession | None, *, now: datetime) -> StagedFiles:
        """Read each footer once (the add actions); a file with no readable footer is set aside."""
        from watermark_assets.spark.batch import UnreadableFile

        pipeline = self.pipeline
        described: list[DataFile] = []
        unreadable: list[UnreadableFile] = []
        for path, relative in zip(batch.files, self._relative_to_table(batch.files)):
            try:
                described.extend(
                    describe_data_files(pipeline.table.uri, [relative], pipeline.table.partition_by)
                )
            except UnreadableDataFileError as exc:
                unreadable.append(
                    UnreadableFile(path, f"not a readable Parquet file: {exc.reason}")
                )
        aside = {u.path for u in unreadable}
        readable = [p for p in batch.files if p not in aside]
        rows = Counter[str]()
        for path, data_file in zip(readable, described):
            rows[batch.file_partitions[path]] += data_file.num_records
        uris = tuple(storage.join(pipeline.source.uri, p) for p in readable)
        schema = (
            _parquet_schema(uris[0], pipeline.table.partition_by)
            if uris
            else known_table_schema(pipeline, unreadable)
        )
        return StagedFiles(
            rows_read=sum(rows.values()),
            data_files=uris,
            data_schema=schema,
            per_partition={
                k: {"files": batch.files_of(k), "rows_read": n, "rows_quarantined": 0}
                for k, n in rows.items()
            },
            described=tuple(described),
            unreadable=tuple(unreadable),
        )

    def files_in_table(self, table: DeltaTable) -> set[str]:
        """The source files the table's add actions name (the landing file IS the data file)."""
        paths = pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist()
        return set(self._in_source(paths))

    def columns_left_out(self, paths: Sequence[str]) -> None:
        """None: the files are committed whole (a column the table lacks fails the commit)."""
        return None

    def table_files(self, recorded: Collection[str] = ()) -> TableFiles:
        """The files under the source folder that the table holds: its add actions' paths, the
        paths of the files it removed and still remembers (OPTIMIZE's inputs, a compacted file
        compacted again), as VACUUM lists them (Lite mode: the tombstones only, nothing is
        listed or deleted), and the table's own files the state ``recorded`` (a compacted file
        compacted again whose removal expired before any VACUUM: on disk, forgotten by the
        table). One snapshot read; only ``recorded`` before the table exists."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        uri = self.pipeline.table.uri
        try:
            table = DeltaTable(uri, storage_options=storage.delta_options(uri))
        except TableNotFoundError:
            return TableFiles(frozenset(recorded), frozenset(), frozenset)
        removed = self._in_source(
            table.vacuum(retention_hours=0, dry_run=True, enforce_retention_duration=False)
        )
        paths = pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist()
        held = self._in_source(paths) | removed | frozenset(recorded)
        return TableFiles(held, removed, self._quarantined)

    def own_files(self, record: CommitRecord) -> frozenset[str]:
        """The files the commit added under the source folder (the caller passes commits that
        are not the pipeline's: OPTIMIZE's, Z-order's, a DML's output)."""
        return self._in_source(added.path for added in record.added)

    def _quarantined(self) -> frozenset[str]:
        """The source files of the quarantine table (files set aside as unreadable)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        uri = self.pipeline.table.quarantine
        try:
            table = DeltaTable(uri, storage_options=storage.delta_options(uri))
        except TableNotFoundError:
            return frozenset()
        if "_source_file" not in table.schema().to_arrow().names:
            return frozenset()
        column = table.to_pyarrow_table(columns=["_source_file"]).column("_source_file")
        return frozenset(str(value) for value in column.unique().to_pylist())

    def rows_in_table(self, table: DeltaTable, wanted: Sequence[str]) -> dict[str, int]:
        """Rows per source file: its add action's record count."""
        counts = dict.fromkeys(wanted, 0)
        inside = self._source_in_table()
        of_table = {posixpath.normpath(posixpath.join(inside, p)): p for p in wanted}
        for action in pa.table(table.get_add_actions(flatten=True)).to_pylist():
            source = of_table.get(str(action["path"]))
            if source is not None:
                counts[source] += int(action.get("num_records") or 0)
        return counts

    def _in_source(self, paths: Iterable[object]) -> frozenset[str]:
        """Table-relative paths under the source folder, made relative to it."""
        inside = self._source_in_table()
        return frozenset(
            posixpath.relpath(path, inside) if inside != "." else path
            for path in map(str, paths)
            if inside == "." or path.startswith(inside + "/")
        )

    def _source_in_table(self) -> str:
        """The source folder relative to the table root (the source is inside the table)."""
        return posixpath.relpath(
            storage.filesystem(self.pipeline.source.uri)[1],
            storage.filesystem(self.pipeline.table.uri)[1],
        )

    def _relative_to_table(self, paths: Sequence[str]) -> list[str]:
        """Source-relative paths as table-relative ones."""
        inside = self._source_in_table()
        return [posixpath.normpath(posixpath.join(inside, path)) for path in paths]


def _parquet_schema(uri: str, partition_by: Sequence[str]) -> pa.Schema:
    schema = storage.parquet_schema(uri)
    for column in partition_by:
        if column not in schema.names:
            schema = schema.append(pa.field(column, pa.string()))
    return schema
