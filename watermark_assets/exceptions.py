"""Every error this package raises on purpose.

One base class, one class per failure. Each exception carries the offending values as attributes,
and its message names the value, what was expected, and the fix.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from watermark_assets.config.problems import Problem

# The ONE base class lives in the pure core (core must not import this module's Java/Delta errors).
from watermark_assets.core.errors import (
    CheckpointError as CheckpointError,
)
from watermark_assets.core.errors import (
    CorruptCheckpointError as CorruptCheckpointError,
)
from watermark_assets.core.errors import (
    NaiveDatetimeError as NaiveDatetimeError,
)
from watermark_assets.core.errors import (
    PartitionTemplateError as PartitionTemplateError,
)
from watermark_assets.core.errors import (
    ReplaceWindowError as ReplaceWindowError,
)
from watermark_assets.core.errors import (
    UnitIdError as UnitIdError,
)
from watermark_assets.core.errors import (
    UnknownCheckpointSchemaError as UnknownCheckpointSchemaError,
)
from watermark_assets.core.errors import (
    UnsortableFileNameError as UnsortableFileNameError,
)
from watermark_assets.core.errors import (
    WatermarkAssetsError as WatermarkAssetsError,
)
from watermark_assets.core.errors import (
    WatermarkRegressionError as WatermarkRegressionError,
)


class ConfigError(WatermarkAssetsError):
    """The YAML configuration is invalid: names the pipeline, the key, the bad value and the fix."""

    def __init__(
        self,
        message: str,
        *,
        pipeline: str | None = None,
        key: str | None = None,
        value: object = None,
    ) -> None:
        super().__init__(message)
        self.pipeline = pipeline
        self.key = key
        self.value = value
        #: every refused key of a file pydantic refused (``config_problems.Problem``), in order
        self.problems: Sequence[Problem] = ()

    @classmethod
    def of_problems(cls, origin: str, problems: Sequence[Problem]) -> ConfigError:
        """The error of ``origin`` (a file, a ``defs.yaml``) refused for ``problems``: a line
        saying how many, then one block per problem; ``key`` and ``pipeline`` are the first's."""
        count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
        blocks = "\n\n".join(problem.block() for problem in problems)
        error = cls(f"{origin}: invalid configuration, {count}:\n\n{blocks}")
        if problems:
            first = problems[0]
            error.key = first.key
            error.pipeline = first.where.removeprefix("pipeline ").strip("'") or None
            error.value = first.shown or None
        error.problems = tuple(problems)
        return error


class DeltaCommitError(WatermarkAssetsError):
    """A Delta commit could not be made."""

    def __init__(self, message: str, *, table_uri: str) -> None:
        super().__init__(message)
        self.table_uri = table_uri


class LogHistoryLostError(DeltaCommitError):
    """Commits a reader needs were cleaned up from the Delta log (their commitInfo is gone)."""

    def __init__(self, table_uri: str, *, first_missing: int, oldest: int) -> None:
        super().__init__(
            f"commits {first_missing} to {oldest - 1} of table {table_uri!r} are no longer in "
            f"its log: they were cleaned up after a Delta checkpoint (delta.logRetentionDuration, "
            f"30 days by default); the oldest commit left is {oldest}. Their custom metadata "
            "(commitInfo) is gone for good",
            table_uri=table_uri,
        )
        self.first_missing = first_missing
        self.oldest = oldest


class StateHistoryLostError(DeltaCommitError):
    """A pipeline's commits after its stored state were cleaned up from the Delta log before
    anyone read them: the progress they carried is gone (``state/store.py``). The one error of
    every kind whose state cannot be read; the message names the one recovery command."""

    def __init__(
        self,
        table_uri: str,
        pipeline: str,
        key: str,
        *,
        snapshot_version: int | None,
        first_missing: int,
        oldest: int,
        location: str | None = None,
        recovery: str | None = None,
    ) -> None:
        where = "its state file" if location is None else f"its state file {location!r}"
        since = (
            f"{where} reflects no commit"
            if snapshot_version is None or snapshot_version < 0
            else f"{where} reflects version {snapshot_version}"
        )
        super().__init__(
            f"the state {key!r} of pipeline {pipeline!r} cannot be read: {since}, and commits "
            f"{first_missing} to {oldest - 1} of {table_uri!r}, some of them this pipeline's, "
            "were cleaned up from the log (delta.logRetentionDuration after a checkpoint) before "
            "any run or tick read them. Nothing was reset to 'read everything'. Recover with "
            f"`watermark-assets repair-state {pipeline}`: "
            + (
                recovery
                or "it rebuilds the state from what the table still holds (see its output for "
                "what runs again)"
            ),
            table_uri=table_uri,
        )
        self.pipeline = pipeline
        self.key = key
        self.snapshot_version = snapshot_version
        self.first_missing = first_missing
        self.oldest = oldest
        self.location = location


class UnreadableDataFileError(DeltaCommitError):
    """A file to add to a Delta table is not a readable Parquet file (no footer, truncated)."""

    def __init__(self, path: str, reason: str, *, table_uri: str) -> None:
        super().__init__(
            f"data file {path!r} under table {table_uri!r} is not a readable Parquet file "
            f"({reason}); only Parquet files can be added to a Delta table",
            table_uri=table_uri,
        )
        self.path = path
        self.reason = reason


class JavaNotFoundError(WatermarkAssetsError):
    """Spark needs Java 17 or newer and none was found."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            f"Spark needs Java 17 or newer: {detail}. Install it (Debian/Ubuntu: "
            "'apt-get install openjdk-17-jre-headless'; macOS: 'brew install openjdk@17') "
            "or point JAVA_HOME at an existing installation"
        )
        self.detail = detail


class SourceFileMissingError(WatermarkAssetsError):
    """A run was asked to ingest a file that is no longer in the landing location."""

    def __init__(self, path: str, source_uri: str) -> None:
        super().__init__(
            f"file {path!r} is not in {source_uri!r} any more; landing files must be immutable "
            "and never deleted before they are ingested. Restore the file, or launch the partition "
            "again without a file list to ingest what is there"
        )
        self.path = path
        self.source_uri = source_uri


def _missing_text(pipeline: str, uri: str, detail: str, what: str) -> str:
    marker = (
        f" (on S3 a folder is a prefix: it exists once an object is under it; put an empty "
        f"object named '{uri.rstrip('/').split('/', 3)[-1]}/' to mark an empty one)"
        if uri.startswith(("s3://", "s3a://"))
        else ""
    )
    return (
        f"pipeline {pipeline!r}: its {what} {uri!r} does not exist ({detail}), so nothing can be "
        f"read from it. Fix source.uri in the configuration (a typo, or the folder was renamed "
        f"or moved), or create the folder{marker}; an existing empty folder is no error"
    )


class LandingFolderMissingError(WatermarkAssetsError):
    """A pipeline's landing folder (an S3 prefix) does not exist: renamed, moved, or a typo in
    ``source.uri``. Never "Idle": an existing empty folder is."""

    def __init__(self, pipeline: str, uri: str, detail: str, what: str = "landing folder") -> None:
        super().__init__(_missing_text(pipeline, uri, detail, what))
        self.pipeline = pipeline
        self.uri = uri
        self.detail = detail


class SourceUnreachableError(WatermarkAssetsError):
    """A pipeline's database or HTTP server does not accept a connection (stopped, a wrong host
    or port in ``source.url``): found before the run reads anything, named with the pipeline."""

    def __init__(self, pipeline: str, url: str, address: str, detail: str, fix: str) -> None:
        super().__init__(
            f"pipeline {pipeline!r}: its source.url {url!r} cannot be reached: no connection to "
            f"{address} ({detail}), so nothing can be read from it. {fix}"
        )
        self.pipeline = pipeline
        self.url = url
        self.address = address


class LandingFolderMissingWarning(UserWarning):
    """The definitions loaded, but a pipeline's landing folder or source path does not exist
    (the other pipelines work; this one's sensor tick fails until it is fixed)."""

    def __init__(self, pipeline: str, uri: str, detail: str, what: str = "landing folder") -> None:
        super().__init__(_missing_text(pipeline, uri, detail, what))
        self.pipeline = pipeline
        self.uri = uri


class DeltaPartitionPathError(DeltaCommitError):
    """A data file's path has no Hive-style ``col=value`` segment for a partition column."""

    def __init__(self, table_uri: str, path: str, column: str) -> None:
        super().__init__(
            f"data file {path!r} of table {table_uri!r} has no '{column}=<value>' directory, but "
            f"the table is partitioned by {column!r}; write the file under its partition "
            f"directory (for example '{column}=<value>/part-0.parquet') or fix 'partition_by'",
            table_uri=table_uri,
        )
        self.path = path
        self.column = column


class DeltaSchemaMismatchError(DeltaCommitError):
    """The files to commit do not fit the Delta table's schema or partitioning."""

    def __init__(self, table_uri: str, differences: dict[str, str]) -> None:
        listed = "; ".join(f"{name!r}: {why}" for name, why in sorted(differences.items()))
        super().__init__(
            f"the files to commit do not match the schema of table {table_uri!r}: {listed}. "
            "Nothing was committed. Cast the columns to the table's types in the pipeline, or "
            "let the run evolve the table in the same commit as its data (`schema.mode: "
            "add_columns`: new nullable columns, types widened where Delta allows)",
            table_uri=table_uri,
        )
        self.differences = differences


class SchemaEvolutionError(DeltaSchemaMismatchError):
    """The staged files' schema differs from the table's in a way the run may not (or Delta
    cannot) evolve the table to. ``refused``: (column, the table's type or None for a column
    the table lacks, the files' type, why and the fix) per column; ``column``, ``table_type``
    and ``file_type`` are the first's."""

    def __init__(self, table_uri: str, refused: Sequence[tuple[str, str | None, str, str]]) -> None:
        super().__init__(table_uri, {column: why for column, _, _, why in refused})
        self.refused = tuple(refused)
        self.column, self.table_type, self.file_type, _ = self.refused[0]


class RequestedFileError(WatermarkAssetsError):
    """An entry of a run configuration's ``files`` list is one a listing would never return."""

    def __init__(self, path: str, problem: str, fix: str) -> None:
        super().__init__(f"requested file {path!r} is refused: {problem}; {fix}")
        self.path = path
        self.problem = problem


class LateFilesUnprovableError(WatermarkAssetsError):
    """Files below a watermark cannot be proven never committed (``reason`` says why)."""

    def __init__(self, pipeline: str, table_uri: str, reason: str) -> None:
        super().__init__(
            f"pipeline {pipeline!r}: {reason}, so the files below their partition's watermark "
            f"that {table_uri!r} does not hold cannot all be proven never committed and are not "
            "ingested as late files. Check the files the sensor names, then ingest them with a "
            "run of their own partition (run config files: [...], late: true)"
        )
        self.pipeline = pipeline
        self.table_uri = table_uri
        self.reason = reason


class BatchOverlapError(WatermarkAssetsError):
    """Runs that committed after this run planned hold some, not all, of its files."""

    def __init__(self, pipeline: str, taken: tuple[str, ...], by: str) -> None:
        shown = ", ".join(repr(p) for p in taken[:3]) + (" ..." if len(taken) > 3 else "")
        super().__init__(
            f"pipeline {pipeline!r}: {len(taken)} files of this batch ({shown}) were committed by "
            f"{by} after this run planned. Nothing was committed by this run; planning again "
            "drops the committed files (the step is retried automatically)"
        )
        self.pipeline = pipeline
        self.taken = taken
        self.by = by


class SchemaInferenceError(WatermarkAssetsError, ValueError):
    """``schema.infer`` found no column in the files it sampled."""

    def __init__(self, root: str, files: tuple[str, ...]) -> None:
        super().__init__(
            f"schema.infer found no column in the first {len(files)} file(s) under {root!r} "
            f"({', '.join(files[:3])}): they hold no readable record. Nothing was committed; "
            "give source.schema, or let files with records land first"
        )
        self.root = root
        self.files = files


class SchemaInferredMeanwhileError(WatermarkAssetsError):
    """A run read its batch with a schema it inferred, but another run created the table (with
    the schema it inferred) before this run committed: read again with the table's."""

    def __init__(self, pipeline: str, table_uri: str) -> None:
        super().__init__(
            f"pipeline {pipeline!r}: this run inferred its schema (schema.infer) but another run "
            f"created the table {table_uri!r} meanwhile. Nothing was committed by this run; "
            "planning again reads with the table's schema (the step is retried automatically)"
        )
        self.pipeline = pipeline
        self.table_uri = table_uri


class UnreadableFilesError(WatermarkAssetsError):
    """A batch's unreadable files cannot be quarantined as files (too many, or no schema known)."""

    def __init__(self, pipeline: str, files: tuple[str, ...], problem: str, fix: str) -> None:
        shown = ", ".join(repr(p) for p in files[:3]) + (" ..." if len(files) > 3 else "")
        super().__init__(
            f"pipeline {pipeline!r}: {len(files)} landing file(s) cannot be read ({shown}): "
            f"{problem}. Nothing was committed; {fix}"
        )
        self.pipeline = pipeline
        self.files = files


class SchemaChangeError(WatermarkAssetsError):
    """A batch's files no longer match the declared schema and ``schema.mode`` says to stop:
    names each file, column and both types (``changes``: :class:`~watermark_assets.sources.\
schema_drift.ColumnChange`), before anything was written or committed; ``fix``: the fix,
    when the source's is not the usual one (a ``parquet_commit`` source cannot rescue)."""

    def __init__(
        self,
        pipeline: str,
        mode: str,
        changes: Sequence[object],
        *,
        origin: str = "files",
        fix: str | None = None,
    ) -> None:
        shown = "; ".join(str(c) for c in changes[:5]) + (
            f"; and {len(changes) - 5} more" if len(changes) > 5 else ""
        )
        new_columns = any(getattr(c, "declared", "") is None for c in changes)
        fix = fix or (
            "set schema.mode: add_columns (new columns join the table) or rescue (kept in "
            "_rescued_data), or add them to source.schema"
            if new_columns
            else "declare the column's type in source.schema as the type its values hold, or "
            "set schema.mode: rescue (values that do not fit are kept in _rescued_data) or "
            "ignore (NULL, counted)"
        )
        super().__init__(
            f"pipeline {pipeline!r} (schema.mode {mode}): the source's {origin} no longer "
            f"match its schema: {shown}. Nothing was written or committed; {fix}"
        )
        self.pipeline = pipeline
        self.mode = mode
        self.changes = tuple(changes)


class ExplainPathError(WatermarkAssetsError):
    """``watermark-assets explain`` was given a path that cannot be a landing file's."""

    def __init__(self, path: str, source_uri: str) -> None:
        super().__init__(
            f"path {path!r} is not a file path inside the source folder {source_uri!r}; give it "
            "relative to that folder, as the sensor shows it (e.g. "
            "'date=2024-01-28/1706450400-a.ndjson.gz'), without '.' or '..' parts"
        )
        self.path = path
        self.source_uri = source_uri


class RowsOutsideWindowError(DeltaCommitError):
    """A file to add in a range replace holds rows outside the window being replaced."""

    def __init__(
        self, table_uri: str, window: str, path: str, outside: int, example: object
    ) -> None:
        super().__init__(
            f"replace of window {window} in table {table_uri!r} is refused: new file {path!r} "
            f"holds {outside} row(s) outside the window (e.g. {example!r}; a null is outside "
            "too). Nothing was committed. Filter the written rows to the window, or widen the "
            "window to the watermarks before and after the read",
            table_uri=table_uri,
        )
        self.window = window
        self.path = path
        self.outside = outside
        self.example = example


class MergeKeyError(DeltaCommitError):
    """A merge on keys refused before anything was committed (a missing or null key column, a
    key given twice, a table whose files cannot be rewritten row by row)."""

    def __init__(
        self,
        table_uri: str,
        keys: Sequence[str],
        problem: str,
        fix: str,
        *,
        column: str | None = None,
        value: object = None,
    ) -> None:
        super().__init__(
            f"merge on keys {list(keys)} into table {table_uri!r} is refused: {problem}. "
            f"Nothing was committed. Fix: {fix}",
            table_uri=table_uri,
        )
        self.keys = tuple(keys)
        self.problem = problem
        self.column = column
        self.value = value


class UnreadablePathError(WatermarkAssetsError):
    """A landing file's path cannot be handed to Spark literally (found before anything is read)."""

    def __init__(self, path: str, character: str, glob_character: str) -> None:
        super().__init__(
            f"file {path!r} cannot be read by Spark: its path holds {character!r} and the glob "
            f"character {glob_character!r}; Hadoop must glob a path holding {glob_character!r} "
            f"(escaped) and its glob cannot open a path component holding {character!r}. The "
            "file is held back, not ingested, and later files of its landing partition wait for "
            f"it: rename it without {character!r} (or without {glob_character!r}), keeping the "
            "name sorting at the same place (for example '-' for ':')"
        )
        self.path = path
        self.character = character
        self.glob_character = glob_character


class UntracedRowsError(WatermarkAssetsError):
    """Spark read rows whose lineage names no file of the batch (nothing is committed)."""

    def __init__(self, count: int, example: str | None, files: tuple[str, ...]) -> None:
        shown = ", ".join(repr(p) for p in files[:3]) + (" ..." if len(files) > 3 else "")
        super().__init__(
            f"{count} rows read by Spark trace to no requested file (first lineage value "
            f"{example!r}; requested {shown}); Spark reported a path the batch did not ask for or "
            "that did not map back to one. Nothing was committed and the watermark did not "
            "move. Report it with the file names: it is a bug in watermark_assets.spark.paths"
        )
        self.count = count
        self.example = example
        self.files = files


class StagedCountError(WatermarkAssetsError):
    """The rows a batch's staged files hold per Dagster partition do not add up to the rows its
    Spark job read (nothing is committed)."""

    def __init__(self, read: tuple[int, int], counted: tuple[int, int], folder: str) -> None:
        super().__init__(
            f"the batch read {read[0]} rows ({read[1]} malformed) but the files staged under "
            f"{folder!r} hold {counted[0]} ({counted[1]} malformed) by their Dagster partition. "
            "Nothing was committed and the watermark did not move: run it again; if it repeats, "
            "check that nothing else writes into that folder, and report it"
        )
        self.read = read
        self.counted = counted


class SparkSchemaError(WatermarkAssetsError, ValueError):
    """A source's ``schema`` is not a Spark DDL column list that Spark's reader would accept."""

    def __init__(self, ddl: str, position: int, token: str, expected: str) -> None:
        near = f"at {token!r}" if token else "at the end"
        line = ddl.count("\n", 0, position) + 1
        column = position - (ddl.rfind("\n", 0, position) + 1) + 1
        super().__init__(
            f"schema {ddl!r} is not valid Spark DDL: {near} (line {line}, column {column}) "
            f"expected {expected}. Write the schema as Spark column definitions "
            "'name TYPE, ...', e.g. 'id BIGINT, event_time TIMESTAMP, tags ARRAY<STRING>', and "
            "put names with other characters than letters, digits and '_' in backquotes (`my col`)"
        )
        self.ddl = ddl
        self.position = position
        self.token = token
        self.expected = expected


class UnsupportedDeltaTableError(WatermarkAssetsError):
    """A Delta table whose rows cannot be read from its Parquet files directly (no delta-spark)."""

    def __init__(self, table_uri: str, feature: str) -> None:
        super().__init__(
            f"Delta table {table_uri!r} uses {feature}: reading its Parquet files directly would "
            "bring back deleted rows or miss renamed columns, so it is not read. Read it with "
            "Spark and delta-spark where its jars are available, or rewrite the table without "
            f"{feature} (e.g. REORG TABLE ... APPLY (PURGE), then disable the feature)"
        )
        self.table_uri = table_uri
        self.feature = feature


class JdbcDriverMissingError(WatermarkAssetsError):
    """Spark has no JDBC driver for a database URL: the driver jar is not on its classpath."""

    def __init__(self, url: str, driver: str, jar_hint: str) -> None:
        super().__init__(
            f"Spark cannot load the JDBC driver {driver} for {url!r}. Put the driver jar on the "
            f"session's classpath: {jar_hint}"
        )
        self.url = url
        self.driver = driver


class HttpApiError(WatermarkAssetsError):
    """An HTTP API answered a page request with an error status, or with an unusable body."""

    def __init__(self, url: str, status: int | None, problem: str, fix: str) -> None:
        where = f"HTTP {status}" if status is not None else "no HTTP status"
        super().__init__(f"request to {url} failed ({where}): {problem}. {fix}")
        self.url = url
        self.status = status
        self.problem = problem


class SecondaryInputError(WatermarkAssetsError):
    """A secondary input cannot be read at all: missing, unreachable, unknown format, no such
    field. (A bad id in one row is not this error: that row is refused and the others kept.)"""

    def __init__(self, source: str, problem: str, fix: str) -> None:
        super().__init__(f"secondary input {source} cannot be read: {problem}. {fix}")
        self.source = source
        self.problem = problem
        self.fix = fix


class EventWindowConflictError(WatermarkAssetsError):
    """Two runs of one event-time aggregate committed the same batch at once: the later one
    stopped before committing anything more (its batch is the other run's)."""

    def __init__(self, pipeline: str, batch: int, table_uri: str, reason: str) -> None:
        super().__init__(
            f"pipeline {pipeline!r}: batch {batch} was committed to {table_uri!r} by another run "
            f"at the same time ({reason}); this run committed nothing more. Nothing is lost: run "
            "it again, it starts from the other run's batch"
        )
        self.pipeline = pipeline
        self.batch = batch
        self.table_uri = table_uri
        self.reason = reason


class UpstreamNotAppendOnlyError(WatermarkAssetsError):
    """An event-time aggregate's upstream table removed rows: what was aggregated and emitted
    cannot be taken back, so the batch stops before reading anything."""

    def __init__(self, table_uri: str, version: int, removed: Sequence[str]) -> None:
        shown = ", ".join(removed[:3]) + (
            f" (+{len(removed) - 3} more)" if len(removed) > 3 else ""
        )
        super().__init__(
            f"upstream table {table_uri!r} removed rows in version {version} ({shown}): an "
            "event-time aggregate reads an append-only table (file pipelines are; a column "
            "pipeline that replaces windows or merges keys is not). Point source.pipeline at an "
            "append-only pipeline, or rebuild the aggregate's tables after the change"
        )
        self.table_uri = table_uri
        self.version = version
        self.removed = tuple(removed)


class UpstreamHistoryLostError(WatermarkAssetsError):
    """An event-time batch can read an upstream neither by version nor by event time: the
    snapshot it needs (the version a recorded plan read up to) cannot be loaded, or its files
    are gone, or the table itself is."""

    def __init__(
        self,
        input_name: str,
        table_uri: str,
        version: int,
        why: str,
        *,
        pipeline: str,
        batch: int,
        missing: str,
        repairable: bool,
    ) -> None:
        if repairable:
            recovery = (
                f"Recover with `watermark-assets repair-state {pipeline}`: it moves batch "
                f"{batch}'s plan to the upstreams' current versions, and the next run finishes "
                "the batch from them by event time (the windows it already emitted stay; rows "
                "appended into them since go to the late table)"
            )
        else:
            recovery = (
                "Restore the upstream table, or rebuild the aggregate: remove its output, late "
                "and state tables and it reads the upstream again from its current snapshot"
            )
        super().__init__(
            f"pipeline {pipeline!r}, batch {batch}, input {input_name!r}: upstream table "
            f"{table_uri!r} cannot be read at version {version}: {missing}, and the batch needs "
            f"it ({why}). {recovery}"
        )
        self.input_name = input_name
        self.table_uri = table_uri
        self.version = version
        self.why = why
        self.pipeline = pipeline
        self.batch = batch
        self.missing = missing
        self.repairable = repairable


#: What ``watermark-assets repair-state`` does for an event-time aggregate (batch engine)
EVENT_TIME_RECOVERY = (
    "it removes the aggregate's output, late and state tables (the late records kept so far go "
    "with them), and the next run aggregates the upstream's current rows again"
)


class EventProgressLostError(DeltaCommitError):
    """An event-time aggregate's table holds a batch whose progress or plan neither its state
    file nor its log records (the file lost, and the log cleaned up since)."""

    def __init__(self, pipeline: str, state_uri: str, batch: int, progress_uri: str) -> None:
        super().__init__(
            f"pipeline {pipeline!r}: the table {state_uri!r} holds batch {batch}, but neither "
            f"{progress_uri!r} nor a commit of the table's log records its watermark, plan and "
            "upstream versions (the file was lost, and the log cleaned up since). Recover with "
            f"`watermark-assets repair-state {pipeline}`: {EVENT_TIME_RECOVERY}",
            table_uri=state_uri,
        )
        self.pipeline = pipeline
        self.batch = batch
        self.progress_uri = progress_uri


class ConcurrentWriteError(WatermarkAssetsError):
    """A conditional write lost its race: the file changed (or appeared) since it was read."""

    def __init__(self, uri: str, detail: str) -> None:
        super().__init__(
            f"{uri!r} was written by another writer at the same time ({detail}); nothing of this "
            "write was stored. Read the file again and decide again (replace_text_unless does so "
            "itself a few times), or run again"
        )
        self.uri = uri
        self.detail = detail


class LeftoverRetentionError(WatermarkAssetsError):
    """A table's ``watermark_assets.leftoverRetention`` property is no duration: the window after
    which a crashed run's leftovers are removed cannot be known, so nothing is removed."""

    def __init__(self, table_uri: str, key: str, value: str, problem: str) -> None:
        super().__init__(
            f"table {table_uri!r}: its property {key} = {value!r} is no duration ({problem}); "
            f"set it to e.g. '1 hour' or '2 days' (DeltaTable(uri).alter.set_table_properties("
            f"{{{key!r}: '6 hours'}}, raise_if_not_exists=False)), or unset it for the default"
        )
        self.table_uri = table_uri
        self.key = key
        self.value = value


class QuarantineIncompleteError(WatermarkAssetsError):
    """A file-path checkpoint about to be written for data commits whose quarantined records are
    not in the quarantine table yet: the checkpoint promises they are. The caller completes the
    quarantine first (``kinds/file_path/commit.complete_quarantine``); a bug if raised."""

    def __init__(self, pipeline: str, quarantine_uri: str, versions: Sequence[int]) -> None:
        super().__init__(
            f"pipeline {pipeline!r}: the quarantine of data version(s) {list(versions)} is not "
            f"in {quarantine_uri!r} yet, so no checkpoint was written (it would promise it is). "
            "Complete it first (kinds.file_path.commit.complete_quarantine); the Delta log "
            "still holds the state, so nothing is lost"
        )
        self.pipeline = pipeline
        self.quarantine_uri = quarantine_uri
        self.versions = tuple(versions)


class InstanceHomeError(WatermarkAssetsError):
    """A command that records runs on the Dagster instance (``run-sensors``, ``demo``) has no
    instance: ``DAGSTER_HOME`` is unset (in the shell and in the ``.env`` of the folder it was
    started in), relative, or not an existing folder. Raised before any work (the demo writes no
    data)."""

    def __init__(self, command: str, home: str | None) -> None:
        fix = (
            "mkdir -p .dagster_home && export DAGSTER_HOME=$PWD/.dagster_home, or put "
            "DAGSTER_HOME=${PWD}/.dagster_home in a .env file in this folder (dagster dev reads "
            "it too, so both show the same runs)"
        )
        if home is None:
            why = "DAGSTER_HOME is not set (neither in the shell nor in a .env file here)"
        elif not os.path.isabs(home):
            why = f"DAGSTER_HOME {home!r} is not an absolute path (Dagster needs one)"
            fix = f"export DAGSTER_HOME={shlex.quote(os.path.abspath(home))}"
        else:
            why = f"DAGSTER_HOME {home!r} is not an existing folder"
            fix = f"mkdir -p {shlex.quote(home)}, or point DAGSTER_HOME at your instance's folder"
        super().__init__(
            f"{command}: {why}: the runs and sensor ticks are recorded on the Dagster instance "
            f"there (the one dagster dev shows). Fix: {fix}"
        )
        self.command = command
        self.home = home
