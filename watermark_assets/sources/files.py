"""The contract of a file-path pipeline's source: how its files become data files of the table.

A :class:`FileSource` is chosen by ``source.type`` (``ConfigModel.build``): ``files``
(:mod:`.landing_files`, Spark reads the landing files and writes Parquet) or ``parquet_commit``
(:mod:`.parquet_commit`, another writer's Parquet files are committed in place). Runs
(:mod:`watermark_assets.kinds.file_path.stage`) plan the files and commit them the same way for
both; only staging, the asset's description and how ``explain`` finds a file in the table differ.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa

from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.delta.committer import committer_for
from watermark_assets.delta.stats import DataFile
from watermark_assets.exceptions import UnreadableFilesError

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import SparkSession

    from watermark_assets.config import FilePipelineConfig
    from watermark_assets.delta.log import CommitRecord
    from watermark_assets.sources.schema_drift import ColumnChange
    from watermark_assets.sources.schema_inference import InferredSchema
    from watermark_assets.spark.batch import UnreadableFile


@dataclass(frozen=True)
class FileBatch:
    """The planned files a source stages: paths relative to the source, each with its Dagster
    partition key, and where the batch's staged files go (``token`` names them)."""

    files: tuple[str, ...]
    file_partitions: Mapping[str, str]
    token: str
    quarantine_dir: str

    def files_of(self, partition_key: str) -> int:
        """How many of the batch's files belong to the Dagster partition ``partition_key``."""
        return sum(1 for key in self.file_partitions.values() if key == partition_key)


@dataclass(frozen=True, kw_only=True)
class StagedFiles:
    """What a source made of a batch (nothing committed yet)."""

    rows_read: int = 0
    rows_quarantined: int = 0
    #: URIs of the files to commit (staged, or the other writer's in place)
    data_files: tuple[str, ...] = ()
    #: staging root of the data files; None when they are already in place
    data_root: str | None = None
    data_schema: pa.Schema | None = None
    quarantine_files: tuple[str, ...] = ()
    quarantine_root: str | None = None
    per_partition: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: add actions already read from the footers (files committed in place do not move)
    described: tuple[DataFile, ...] = ()
    #: files that could not be read at all (recorded in the quarantine as files by the run)
    unreadable: tuple[UnreadableFile, ...] = ()
    #: columns the batch's files hold that its rows leave out (no schema evolution yet); None:
    #: the source cannot tell (:meth:`FileSource.column_changes`)
    columns_ignored: tuple[str, ...] | None = None
    #: columns the staged data files hold beyond the declared ones, (name, Spark type), for the
    #: commit to add to the table as nullable columns where it lacks them: the columns the files
    #: brought (``schema.mode: add_columns``), or ``_rescued_data`` (``rescue``)
    columns_added: tuple[tuple[str, str], ...] = ()
    #: per declared column, values that did not fit its type and were left NULL (``ignore``)
    values_nulled: Mapping[str, int] = field(default_factory=dict)
    #: per declared column, values that did not fit and went to ``_rescued_data`` (``rescue``)
    values_rescued: Mapping[str, int] = field(default_factory=dict)
    #: rows with something in ``_rescued_data`` (``rescue``)
    rows_rescued: int = 0
    #: the schema this batch inferred (``schema.infer``, no table yet): its commit creates the
    #: table with it; None: read with ``source.schema`` or the table's columns
    inferred: InferredSchema | None = None


@dataclass(frozen=True)
class TableFiles:
    """The table's own files under a landing folder that IS the table folder (``parquet_commit``).

    ``held``: every path (relative to the source) that the table's current add actions reference,
    every one of ``removed``, the files a commit removed that the table still remembers (its
    tombstones, kept ``delta.deletedFileRetentionDuration``), and the table's own files the
    pipeline's state recorded as it read the log (``FileSource.own_files``: they stay known after
    the table forgot their removal): the committed landing files, the files OPTIMIZE and Z-order
    write there (``dataChange: false``) and the ones a later OPTIMIZE replaced. None of them is
    ever a landing file: a listing leaves them out (not ingested, not unsortable, not late).
    ``quarantined`` reads, when called, the landing files a run set aside as unreadable:
    committed (the watermark passed them) but never in the table.
    """

    held: frozenset[str]
    removed: frozenset[str]
    quarantined: Callable[[], frozenset[str]]

    def not_ingested(
        self,
        unknown: Mapping[str, int],
        held_below: Iterable[str],
        committed_files: Mapping[str, int],
        watermark: FileWatermark,
    ) -> dict[str, int]:
        """Per landing prefix, how many files at or below its watermark were never committed.

        ``unknown``: per prefix, the files a listing counted at or below the watermark that the
        table does not hold; ``held_below``: the held files it saw there. Of the ``c`` files the
        pipeline committed in a prefix (``committed_files``), ``q`` were quarantined, and the
        table still knows ``k`` of the others: held and on disk, or removed and gone (vacuumed
        while their removal is remembered). The other ``c - q - k`` are committed files the
        table forgot (removed by OPTIMIZE, the removal expired, never vacuumed): on disk, unknown,
        and not late. So the count is ``unknown - q - (c - q - k)``, ``k`` at most ``c - q``.
        Exact while the table remembers its removals; a file vacuumed after its removal expired
        hides one late file of its prefix (the count cannot tell them apart). The quarantine is
        read only when a prefix may hold one.
        """
        held = Counter(path.rpartition("/")[0] for path in held_below)
        seen = frozenset(held_below)
        gone = Counter(
            prefix
            for path in self.removed
            if (prefix := path.rpartition("/")[0]) in unknown
            and path not in seen
            and not watermark.is_above(path)
        )
        counted: dict[str, int] = {}
        aside: Counter[str] | None = None
        for prefix, count in unknown.items():
            committed = committed_files.get(prefix, 0)
            known = held[prefix] + gone[prefix]
            if count - committed + min(known, committed) <= 0:
                continue  # none, whatever was quarantined
            if aside is None:
                aside = Counter(path.rpartition("/")[0] for path in self.quarantined())
            never = count - committed + min(known, max(0, committed - aside[prefix]))
            if never > 0:
                counted[prefix] = never
        return counted


#: The run's Spark session on demand: calling it starts the session or waits for the one
#: starting in the background (:func:`~watermark_assets.spark.session.prestart`). A source asks
#: for it only once it has read what needs no Spark, so that reading overlaps the JVM's start.
SparkOnDemand = Callable[[], "SparkSession"]


class FileSource(Protocol):
    """A file-path pipeline's source strategy."""

    #: whether a batch with files needs the Spark session (and writes new data files)
    needs_spark: bool
    #: the asset's compute kinds shown in the UI
    compute_kinds: frozenset[str]

    def describe(self) -> str:
        """How the files reach the table, in a sentence or two for the asset's description."""
        ...

    def stage(self, batch: FileBatch, spark: SparkOnDemand | None, *, now: datetime) -> StagedFiles:
        """Make the batch's data files (a file that cannot be read is set aside, not raised).
        ``spark``: the session on demand (None: the run has none), asked for only when needed."""
        ...

    def files_in_table(self, table: DeltaTable) -> set[str]:
        """The source files (relative to the source) that have rows in ``table`` now."""
        ...

    def rows_in_table(self, table: DeltaTable, wanted: Sequence[str]) -> dict[str, int]:
        """Rows each of the ``wanted`` source files has in ``table`` now (0 when none)."""
        ...

    def table_files(self, recorded: Collection[str] = ()) -> TableFiles | None:
        """The table's own files under the landing folder (read once per call: a tick or a
        run's plan calls it once), with the ones the pipeline's state ``recorded``
        (:meth:`own_files`: the table may have forgotten them); None when the landing folder is
        not the table's."""
        ...

    def own_files(self, record: CommitRecord) -> frozenset[str]:
        """The files (relative to the source) a commit that is not the pipeline's added under
        the landing folder: the table's own (OPTIMIZE, Z-order, a DML's rewrite), never landing
        files; empty where the landing folder is not the table's."""
        ...

    def column_changes(
        self, paths: Sequence[str], signatures: Mapping[str, str] | None = None
    ) -> Sequence[ColumnChange] | None:
        """How the landing files ``paths`` (relative to the source) differ from the declared
        columns: the columns the schema lacks and the columns whose type changed, read without
        Spark (a footer, a header line and the first records: a tick may ask), as a run
        compares them; None when it cannot be told cheaply. ``signatures``: the files' content
        signatures as the listing gave them (a file read before with the same one is not read
        again)."""
        ...


def known_table_schema(
    pipeline: FilePipelineConfig, unreadable: Sequence[UnreadableFile]
) -> pa.Schema:
    """An empty schema ("the table's") for a batch with no readable file; none to take from a
    table that does not exist yet."""
    if committer_for(pipeline.table).current_version() is None:
        raise UnreadableFilesError(
            pipeline.name,
            tuple(u.path for u in unreadable),
            "every file of the pipeline's first batch is unreadable, so the table's schema is "
            "unknown",
            "fix or remove them, or let a readable file land first",
        )
    return pa.schema([])
