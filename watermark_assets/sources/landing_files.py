"""``source.type: files``: Spark reads the landing files and writes them into the table as Parquet
(the seed's Blizzard), lineage columns added, malformed records split off to the quarantine."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from watermark_assets.config.schema import SchemaMode
from watermark_assets.delta.read import read_columns
from watermark_assets.exceptions import SchemaChangeError, UnreadableFilesError
from watermark_assets.names import RESCUED_DATA_COLUMN
from watermark_assets.sources.column_schema import table_columns
from watermark_assets.sources.file_columns import (
    file_columns,
    left_out,
    names_columns,
    sampled_layouts,
)
from watermark_assets.sources.files import (
    FileBatch,
    SparkOnDemand,
    StagedFiles,
    known_table_schema,
)
from watermark_assets.sources.schema_drift import (
    ColumnChange,
    Layout,
    changes,
    new_columns,
    type_changes,
)
from watermark_assets.sources.schema_inference import InferredSchema, infer_schema
from watermark_assets.spark.batch import (
    INGESTED_AT_COLUMN,
    PARTITION_KEY_COLUMN,
    SOURCE_FILE_COLUMN,
)
from watermark_assets.spark.ddl import columns_ddl
from watermark_assets.staging import list_parquet, remove_tree, staging_dir

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from watermark_assets.config import FilePipelineConfig, LandingFilesSourceConfig
    from watermark_assets.delta.log import CommitRecord
    from watermark_assets.spark.batch import ReadSpec, UnreadableFile


def _counted(counts: Mapping[str, int]) -> dict[str, int]:
    """The columns with a count above 0."""
    return {name: count for name, count in counts.items() if count}


@dataclass(frozen=True)
class SchemaRead:
    """How a batch is read under ``schema:`` (:meth:`LandingFilesSource._policy`)."""

    mode: str
    layouts: Mapping[str, Layout | None]
    declared: tuple[tuple[str, str], ...]
    #: columns the files bring that are read too (``add_columns``): name -> Spark type
    added: Mapping[str, str]
    #: columns the files bring that are left out (``ignore``)
    ignored: tuple[str, ...]

    @property
    def columns_added(self) -> tuple[tuple[str, str], ...]:
        """The columns the staged files hold beyond the declared ones, which the table may lack:
        the new ones (``add_columns``), or the rescued-data column (``rescue``)."""
        if self.mode == "rescue":
            return ((RESCUED_DATA_COLUMN, "string"),)
        return tuple(self.added.items())


#: The columns a run adds to every row (they are not the source's).
LINEAGE_COLUMNS = (SOURCE_FILE_COLUMN, INGESTED_AT_COLUMN, PARTITION_KEY_COLUMN)

#: Unreadable files one batch may set aside (each costs one more Spark pass); more fail the run.
MAX_UNREADABLE_FILES = 10


class LandingFilesSource:
    """Landing files read by Spark in one pass per batch (see :mod:`watermark_assets.spark`)."""

    needs_spark = True
    compute_kinds = frozenset({"spark", "delta"})

    def __init__(self, pipeline: FilePipelineConfig, config: LandingFilesSourceConfig) -> None:
        self.pipeline = pipeline
        self.config = config

    def describe(self) -> str:
        pipeline = self.pipeline
        return (
            f"Spark reads the {self.config.format.value} files that land under "
            f"`{self.config.uri}`, adds lineage columns (`_source_file`, `_ingested_at`, "
            "`_dagster_partition`) and writes Parquet into the Delta table "
            f"`{pipeline.table.uri}`; records that do not match the schema go to "
            f"`{pipeline.table.quarantine}`.{self._inferred_text()}"
        )

    def _inferred_text(self) -> str:
        """The description's words for ``schema.infer`` (none without it)."""
        policy = self.pipeline.schema_policy
        if not policy.infer:
            return ""
        pinned = f" (pinned by schema.hints: {', '.join(policy.hints)})" if policy.hints else ""
        return (
            f" The schema is inferred (schema.infer) from the first run's first "
            f"{policy.sample_files} files{pinned} and stored as the table's: later runs read "
            "with the table's columns; each column's description says which files it was "
            "inferred from."
        )

    def stage(self, batch: FileBatch, spark: SparkOnDemand | None, *, now: datetime) -> StagedFiles:
        """Spark's pass over the batch; a file Spark cannot read is set aside and the pass
        redone without it (at most MAX_UNREADABLE_FILES times).

        The schema and the files' layouts (a read of each file's first records) come first,
        without Spark: a run worker's session is still starting then (seconds), so that read
        costs the run nothing, and a batch its schema policy refuses starts no Spark."""
        import watermark_assets.spark.batch as spark_adapter

        pipeline = self.pipeline
        if spark is None:
            raise ValueError(f"pipeline {pipeline.name!r} has files to ingest but no Spark session")
        ddl, inferred = self._schema(batch.files)
        policy = self._policy(batch.files, ddl)
        session = spark()
        unreadable: list[UnreadableFile] = []
        while True:
            # A file Spark cannot read at all fails the whole job: set it aside and read the
            # others again (each costs one more pass; a batch has few). Each pass writes a
            # folder of its own: a task of the failed job that Spark has not stopped yet (its
            # error reaches the client first, notably under Spark Connect) may still create
            # the previous pass's folder after it was removed.
            attempt = f"-{len(unreadable)}" if unreadable else ""
            data_dir = staging_dir(pipeline.table.uri, f"{batch.token}{attempt}")
            aside = {u.path for u in unreadable}
            files = [p for p in batch.files if p not in aside]
            spec = self._read_spec(batch, files, now, policy, ddl)
            try:
                if spec.files or spec.schema_ddl is not None:  # no files: the schema's empty batch
                    output = spark_adapter.write_batch(
                        session, spec, data_dir=data_dir, quarantine_dir=batch.quarantine_dir
                    )
                else:  # Parquet without a configured schema, and no file left to read
                    empty = pa.schema([])
                    schema = known_table_schema(pipeline, unreadable)
                    output = spark_adapter.StagedOutput(0, 0, {}, None, None, schema, empty)
                break
            except Exception as exc:
                found = spark_adapter.unreadable_file(exc, spec)
                if found is None:
                    raise
                unreadable.append(found)
                remove_tree(data_dir)
                remove_tree(batch.quarantine_dir)
                if len(unreadable) > MAX_UNREADABLE_FILES:
                    raise UnreadableFilesError(
                        pipeline.name,
                        tuple(u.path for u in unreadable),
                        f"more than {MAX_UNREADABLE_FILES} in one batch (each costs a pass over "
                        "the batch)",
                        "check the producer, then move the broken files out of the source folder "
                        "or request the rest in smaller batches",
                    ) from exc
        return StagedFiles(
            rows_read=output.rows_read,
            rows_quarantined=output.rows_quarantined,
            data_files=list_parquet(output.data_dir) if output.data_dir else (),
            data_root=output.data_dir,
            data_schema=output.data_schema,
            quarantine_files=list_parquet(batch.quarantine_dir) if output.quarantine_dir else (),
            quarantine_root=output.quarantine_dir,
            per_partition={
                k: {"files": batch.files_of(k), **v} for k, v in output.per_partition.items()
            },
            unreadable=tuple(unreadable),
            columns_ignored=(
                self._left_out(spec.files, output.data_schema.names)
                if policy is None
                else policy.ignored
            ),
            columns_added=policy.columns_added if policy else (),
            values_nulled=_counted(output.misfits) if policy and policy.mode == "ignore" else {},
            values_rescued=_counted(output.misfits) if policy and policy.mode == "rescue" else {},
            rows_rescued=output.rows_rescued,
            inferred=inferred,
        )

    def _schema(self, files: Sequence[str]) -> tuple[str | None, InferredSchema | None]:
        """The DDL the batch is read with: ``source.schema``; under ``schema.infer`` the table's
        data columns (stored by the first commit, :meth:`_table_columns`), else, before the
        table exists, the one inferred from the batch's first ``sample_files`` files (returned
        too: the commit must create the table with it or go stale,
        :func:`~watermark_assets.kinds.file_path.commit.commit_batch`)."""
        policy = self.pipeline.schema_policy
        if self.config.schema_ddl or not policy.infer:
            return self.config.schema_ddl, None
        stored = self._table_columns([])
        if stored:
            return columns_ddl(stored), None
        if not files:
            return None, None
        fmt, options = self.config.format.value, self.config.csv_options
        inferred = infer_schema(
            self.config.uri,
            files[: policy.sample_files],
            fmt,
            options if fmt == "csv" else None,
            policy.hint_of,
        )
        return inferred.ddl, inferred

    def _policy(self, files: Sequence[str], ddl: str | None) -> SchemaRead | None:
        """The batch's files' layouts (and, CSV and JSON, their first records' values) against
        the declared schema, under ``schema.mode``
        (:mod:`~watermark_assets.sources.schema_drift`): SchemaChangeError before anything is
        read when the mode says to stop. None: the files cannot name their columns (headerless
        CSV, whole-file JSON) or no schema is known yet: read as before."""
        fmt, options = self.config.format.value, self.config.csv_options
        csv_options = options if fmt == "csv" else None
        if not files or not names_columns(fmt, csv_options):
            return None
        uris = [f"{self.config.uri.rstrip('/')}/{path}" for path in files]
        sampled = dict(zip(files, sampled_layouts(uris, fmt, csv_options), strict=True))
        layouts = {path: layout for path, (layout, _) in sampled.items()}
        declared = self._declared_columns(layouts, ddl)
        if declared is None:
            return None
        policy = self.pipeline.schema_policy
        found = changes(declared, layouts, samples={p: s for p, (_, s) in sampled.items()})
        mode = policy.mode
        stopping = found if mode is SchemaMode.FAIL else type_changes(found)
        if stopping and mode in (SchemaMode.FAIL, SchemaMode.ADD_COLUMNS):
            raise SchemaChangeError(self.pipeline.name, mode.value, stopping)
        added = new_columns(found, policy.hint_of) if mode is SchemaMode.ADD_COLUMNS else {}
        new = tuple(dict.fromkeys(c.column for c in found if c.is_new))
        return SchemaRead(
            mode=mode.value,
            layouts=layouts,
            declared=tuple(declared),
            added=added,
            ignored=new if mode is SchemaMode.IGNORE else (),
        )

    def _declared_columns(
        self, layouts: Mapping[str, Layout | None], ddl: str | None
    ) -> list[tuple[str, str]] | None:
        """``ddl``'s columns (:meth:`_schema`), then the table's data columns it lacks (added by
        an earlier ``add_columns`` run); without a schema (Parquet), the table's, else the first
        file's footer (its types, or the ``schema.hints``); None when none is known."""
        from watermark_assets.spark.ddl import parse_read_schema

        declared: list[tuple[str, str]] = []
        if ddl:
            declared = [(c.name, c.type) for c in parse_read_schema(ddl)]
        declared += self._table_columns([name for name, _ in declared])
        if declared:
            return declared
        first = next((layout for layout in layouts.values() if layout), None)
        if first is None or any(kind is None for _, kind in first):
            return None
        hint = self.pipeline.schema_policy.hint_of  # a hint pins an inferred type
        return [(name, hint(name) or str(kind)) for name, kind in first]

    def _table_columns(self, known: Sequence[str]) -> list[tuple[str, str]]:
        """The table's data columns (name, Spark type) not among ``known`` (case-insensitive):
        not the lineage, rescued nor derived ones; none when there is no table yet."""
        own = (*LINEAGE_COLUMNS, RESCUED_DATA_COLUMN, *self.pipeline.table.derived_columns)
        return table_columns(self.pipeline.table.uri, [*own, *known])

    def column_changes(
        self, paths: Sequence[str], signatures: Mapping[str, str] | None = None
    ) -> list[ColumnChange] | None:
        """How the landing files ``paths`` differ from the declared columns (``source.schema``
        and the table's data columns; Parquet without a schema: the table's), from the read a
        run's :meth:`_policy` makes (:func:`~watermark_assets.sources.file_columns.\
sampled_layouts`: Parquet footers; CSV header lines and JSON keys with their first records'
        values, so a column whose values turned another type is told too). None: cannot tell
        (headerless CSV, whole-file JSON, Parquet without a schema and no table yet). A file
        whose content ``signatures`` (the listing's) is one read before is not read again."""
        fmt, options = self.config.format.value, self.config.csv_options
        csv_options = options if fmt == "csv" else None
        if not names_columns(fmt, csv_options):
            return None
        declared = self._declared_columns({}, self._schema(())[0])
        if declared is None:
            return None
        uris = [f"{self.config.uri.rstrip('/')}/{path}" for path in paths]
        known = [(signatures or {}).get(path) for path in paths]
        probed = sampled_layouts(uris, fmt, csv_options, signatures=known)
        sampled = dict(zip(paths, probed, strict=True))
        layouts = {path: layout for path, (layout, _) in sampled.items()}
        return changes(declared, layouts, samples={p: s for p, (_, s) in sampled.items()})

    def _left_out(self, paths: Sequence[str], read: Iterable[str]) -> tuple[str, ...] | None:
        """The columns of the landing files ``paths`` that are not among ``read``."""
        fmt, options = self.config.format.value, self.config.csv_options
        if not names_columns(fmt, options if fmt == "csv" else None):
            return None
        uris = [f"{self.config.uri.rstrip('/')}/{path}" for path in paths]
        return left_out(file_columns(uris, fmt, options if fmt == "csv" else None), read)

    def _read_spec(
        self,
        batch: FileBatch,
        files: Sequence[str],
        now: datetime,
        policy: SchemaRead | None,
        ddl: str | None,
    ) -> ReadSpec:
        from watermark_assets.spark.batch import ReadSpec

        return ReadSpec(
            layouts=None if policy is None else policy.layouts,
            declared=None if policy is None else policy.declared,
            schema_mode="fail" if policy is None else policy.mode,
            added={} if policy is None else policy.added,
            source_uri=self.config.uri,
            files=tuple(files),
            file_partitions={p: batch.file_partitions[p] for p in files},
            format=self.config.format.value,
            schema_ddl=ddl,
            csv_options=self.config.csv_options,
            derived_columns=self.pipeline.table.derived_columns,
            partition_by=self.pipeline.table.partition_by,
            ingested_at_iso=now.isoformat(),
        )

    def table_files(self, recorded: Collection[str] = ()) -> None:
        """None: the landing folder is not the table's (Spark writes the table's own files)."""
        return None

    def own_files(self, record: CommitRecord) -> frozenset[str]:
        """None of the table's files is under the landing folder."""
        return frozenset()

    def files_in_table(self, table: DeltaTable) -> set[str]:
        """The landing files named by the lineage column (the whole column is read)."""
        column = read_columns(table, [SOURCE_FILE_COLUMN]).column(SOURCE_FILE_COLUMN)
        return {str(value) for value in column.unique().to_pylist()}

    def rows_in_table(self, table: DeltaTable, wanted: Sequence[str]) -> dict[str, int]:
        """Rows per landing file, from the lineage column."""
        import pyarrow.compute as pc

        counts = dict.fromkeys(wanted, 0)
        # Filtered in Arrow, not in the scan: the scan prunes files by the add actions' min/max
        # statistics, which delta-rs truncates for long strings (a filter on a path finds nothing).
        column = read_columns(table, [SOURCE_FILE_COLUMN]).column(SOURCE_FILE_COLUMN)
        found = column.filter(pc.is_in(column, value_set=pa.array(list(wanted), column.type)))
        counts.update(Counter(str(value) for value in found.to_pylist()))
        return counts
