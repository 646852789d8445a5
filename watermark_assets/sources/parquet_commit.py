"""``source.type: parquet_commit``: Parquet files that another writer puts under the table folder
are committed where they are (the seed's Penguin): no Spark, no copy; each footer is read once."""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from watermark_assets import storage
from watermark_assets.delta.read import read_columns
from watermark_assets.delta.stats import DataFile, describe_with_schemas
from watermark_assets.exceptions import SchemaChangeError, UnreadableDataFileError
from watermark_assets.sources.files import (
    FileBatch,
    SparkOnDemand,
    StagedFiles,
    TableFiles,
    known_table_schema,
)
from watermark_assets.sources.schema_drift import changes, type_changes

if TYPE_CHECKING:
    from deltalake import DeltaTable

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

    def stage(self, batch: FileBatch, spark: SparkOnDemand | None, *, now: datetime) -> StagedFiles:
        """Read each footer once (the add actions); a file with no readable footer is set aside."""
        from watermark_assets.spark.batch import UnreadableFile

        pipeline = self.pipeline
        described: list[DataFile] = []
        footers: list[pa.Schema] = []
        unreadable: list[UnreadableFile] = []
        for path, relative in zip(batch.files, self._relative_to_table(batch.files)):
            try:
                [(data_file, footer)] = describe_with_schemas(
                    pipeline.table.uri, [relative], pipeline.table.partition_by
                )
                described.append(data_file)
                footers.append(footer)
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
        ignored: tuple[str, ...] | None = None
        if uris:
            schema, ignored = self._commit_schema(uris, footers)
        else:
            schema = known_table_schema(pipeline, unreadable)
        return StagedFiles(
            columns_ignored=ignored,
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

    def _commit_schema(
        self, uris: Sequence[str], footers: Sequence[pa.Schema]
    ) -> tuple[pa.Schema, tuple[str, ...] | None]:
        """The schema the batch's files are committed with, under ``schema.mode``, and the
        columns left out (``ignore``; None otherwise). The files (``footers``: their schemas,
        read with their statistics) are compared, footer by footer, with the table's columns
        (no table yet: the first file's):

        - ``fail``: a column the table lacks, or a type it cannot hold, raises
          :class:`~watermark_assets.exceptions.SchemaChangeError` naming the file, the column and
          both types, before anything is committed;
        - ``add_columns``: the new columns (their footer's type) are added, and a type Delta
          may widen is widened, by the commit of these files (``delta/schema_change.reconcile``);
          another type change fails as in ``fail``;
        - ``ignore``: the new columns are left out of the table's schema (the files still hold
          them; Delta readers do not see them), named in the metadata; a type the table cannot
          hold fails: a value of a file committed by reference cannot be made NULL;
        - ``rescue`` is refused by the configuration (a file committed by reference cannot be
          rewritten to move values into ``_rescued_data``)."""
        from watermark_assets.config.schema import SchemaMode
        from watermark_assets.sources.column_schema import table_columns, widenable

        pipeline = self.pipeline
        partition_by = pipeline.table.partition_by
        layouts = {uri: _spark_layout(footer) for uri, footer in zip(uris, footers)}
        first = layouts[uris[0]] or ()
        declared = table_columns(pipeline.table.uri, partition_by) or list(first)
        found = changes(declared, layouts, what="file")
        mode = pipeline.schema_policy.mode
        schema = _with_partitions(footers[0], partition_by)
        if not found:
            return schema, None
        retyped = type_changes(found)
        if mode is SchemaMode.IGNORE:
            if retyped:
                raise SchemaChangeError(pipeline.name, mode.value, retyped, fix=_RETYPED_FIX)
            known = {name.lower() for name, _ in declared}
            kept = [f for f in footers[0] if f.name.lower() in known]
            ignored = tuple(dict.fromkeys(c.column for c in found))
            return _with_partitions(pa.schema(kept), partition_by), ignored
        if mode is not SchemaMode.ADD_COLUMNS:
            fix = _RETYPED_FIX if len(retyped) == len(found) else _NEW_FIX
            raise SchemaChangeError(pipeline.name, mode.value, found, fix=fix)
        refused = [c for c in retyped if not widenable(str(c.declared), str(c.found))]
        if refused:
            raise SchemaChangeError(pipeline.name, mode.value, refused, fix=_RETYPED_FIX)
        merged: dict[str, tuple[pa.Field, str]] = {}  # every footer's column, widest type
        for footer, layout in zip(footers, layouts.values()):
            for column, (_, kind) in zip(footer, layout or ()):
                seen = merged.get(column.name.lower())
                if seen is None or (kind != seen[1] and widenable(seen[1], str(kind))):
                    merged[column.name.lower()] = (column, str(kind))
        fields = [column for column, _ in merged.values()]
        return _with_partitions(pa.schema(fields), partition_by), None

    def files_in_table(self, table: DeltaTable) -> set[str]:
        """The source files the table's add actions name (the landing file IS the data file)."""
        paths = pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist()
        return set(self._in_source(paths))

    def column_changes(
        self, paths: Sequence[str], signatures: Mapping[str, str] | None = None
    ) -> None:
        """None: the files are committed whole (their footers are compared with the table by
        the commit's plan, which stops or evolves under ``schema.mode``)."""
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
        column = read_columns(table, ["_source_file"]).column("_source_file")
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


#: The fixes a ``parquet_commit`` schema change can take (its files are never rewritten).
_NEW_FIX = (
    "set schema.mode: add_columns (the commit adds them to the table) or ignore (left out of "
    "the table's schema); rescue cannot apply to files committed by reference"
)
_RETYPED_FIX = (
    "write the files with a type the table holds (or one Delta widens it to, under "
    "add_columns), or use source.type: files, which rewrites the rows (rescue and ignore then "
    "keep or null the values that do not fit)"
)


def _spark_layout(footer: pa.Schema) -> tuple[tuple[str, str], ...] | None:
    """The footer's columns in Spark types; None when Spark names no type for one (the file is
    then committed as before, unchecked: no Spark reads it here)."""
    from watermark_assets.sources.file_columns import footer_layout

    try:
        return footer_layout(footer)
    except TypeError:
        return None


def _with_partitions(schema: pa.Schema, partition_by: Sequence[str]) -> pa.Schema:
    """``schema`` and the partition columns it lacks (strings: their folder names' values)."""
    for column in partition_by:
        if column not in schema.names:
            schema = schema.append(pa.field(column, pa.string()))
    return schema
