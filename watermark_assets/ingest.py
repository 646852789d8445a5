"""One batch of a pipeline, from files above the watermark to one Delta commit (no Dagster).

``plan_batch`` decides which files a run ingests, ``stage_batch`` makes the data files (Spark
for ingest pipelines; the other writer's Parquet files for commit pipelines), ``commit_batch``
moves them into the table's partition directories and makes ONE Delta commit holding the add
actions, a txn action per Dagster partition and the watermark advance, then writes the
checkpoint when it is due.

Crash anywhere and run again: files at or below the committed watermark are dropped from the batch,
and a commit never holds a file that a commit after the plan already holds (exact: every commit
records its source files).
"""

from __future__ import annotations

import os
import posixpath
import signal
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from watermark_assets import storage
from watermark_assets.config import CommitPipelineConfig, IngestPipelineConfig, Pipeline
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.file_watermark import FileWatermark, components_below
from watermark_assets.core.filepath import (
    NameOrdering,
    check_sortable,
    prefix_components,
    split_path,
)
from watermark_assets.core.partition_selection import PartitionSelection
from watermark_assets.delta import (
    CommitOutcome,
    DataFile,
    DeltaCommitter,
    TxnVersion,
    describe_data_files,
)
from watermark_assets.discovery import PartitionOf, discover_files, partition_key_of
from watermark_assets.exceptions import (
    BatchOverlapError,
    DeltaCommitError,
    RequestedFileError,
    SourceFileMissingError,
    UnreadableDataFileError,
    UnreadableFilesError,
)
from watermark_assets.spark_paths import check_readable
from watermark_assets.state_store import (
    COMMIT_METADATA_KEY,
    CommitMetadata,
    PipelineState,
    complete_quarantine,
    listing_horizon,
    load_state,
    pipeline_commits,
    restore_partitions,
    save_checkpoint,
    txn_app_id,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from watermark_assets.spark import ReadSpec, UnreadableFile


CRASH_ENV_VAR = "WATERMARK_ASSETS_CRASH_AT"
STAGING_DIR = "_staging"
#: Staging folders older than this were left by a crashed run (never committed): removed.
STAGING_RETENTION = timedelta(hours=6)


def crash_point(name: str, env: Mapping[str, str] | None = None) -> None:
    """Fault injection for the exactly-once tests: SIGKILL this process at the named point.

    Set WATERMARK_ASSETS_CRASH_AT to ``after_data_written`` or ``after_commit``. Never set in
    production; reading one environment variable costs nothing.
    """
    env = os.environ if env is None else env
    if env.get(CRASH_ENV_VAR) == name:
        os.kill(os.getpid(), signal.SIGKILL)


PAUSE_ENV_VAR = "WATERMARK_ASSETS_PAUSE_AT"
PAUSE_DIR_ENV_VAR = "WATERMARK_ASSETS_PAUSE_DIR"


def pause_point(name: str, env: Mapping[str, str] | None = None, *, timeout: float = 300) -> None:
    """Fault injection for the concurrency tests: stop here until the test says go.

    With WATERMARK_ASSETS_PAUSE_AT=``name`` the process writes ``{name}.reached`` into
    WATERMARK_ASSETS_PAUSE_DIR and waits for ``{name}.go`` there (once it exists, later arrivals
    pass at once). Never set in production.
    """
    env = os.environ if env is None else env
    if env.get(PAUSE_ENV_VAR) != name:
        return
    folder = Path(env[PAUSE_DIR_ENV_VAR])
    (folder / f"{name}.reached").touch()
    deadline = time.monotonic() + timeout
    while not (folder / f"{name}.go").exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"pause point {name!r}: no {name}.go in {folder} after {timeout}s")
        time.sleep(0.05)


@dataclass(frozen=True)
class BatchRequest:
    """What one run was asked to do, taken from the Dagster context once, at the edge."""

    pipeline: Pipeline
    selection: PartitionSelection
    run_id: str
    files: tuple[str, ...] | None = None  # None: discover the files above the watermark
    clock: Clock = system_clock  # the definitions' clock, for the commit's "now"

    @property
    def partition_keys(self) -> tuple[str, ...]:
        return self.selection.keys

    @property
    def window_start(self) -> datetime | None:
        """Start of the partitions' time window (the oldest landing partition to list)."""
        window = self.selection.time_window
        return None if window is None else window.start


@dataclass(frozen=True)
class BatchPlan:
    """The files a run will ingest, and the state it starts from.

    ``already_committed``: requested files at or below the watermark (committed, or landed below
    it). ``added``: files above the watermark that a requested list skipped although they sort
    below a requested file of their landing partition; they are ingested too, since the
    watermark cannot move past a file that is not committed.
    """

    request: BatchRequest
    state: PipelineState
    files: tuple[str, ...]
    file_partitions: Mapping[str, str]
    already_committed: tuple[str, ...]
    added: tuple[str, ...] = ()
    #: files Spark cannot read literally (path -> character), held back by discovery with the
    #: later files of their landing partition (a requested list holding one is refused instead)
    unreadable: Mapping[str, str] = field(default_factory=dict)


def plan_batch(request: BatchRequest, partition_of: PartitionOf, *, now: datetime) -> BatchPlan:
    """Choose the files: the requested ones still above the watermark, or all above it."""
    pipeline = request.pipeline
    state = load_state(pipeline, now=now)
    wanted = set(request.partition_keys)
    since = (
        pipeline.source.template.format(request.window_start)
        if request.window_start is not None
        else None
    )
    horizon = listing_horizon(pipeline, state.watermark, now)
    restored = bool(
        since and horizon and components_below(prefix_components(since), prefix_components(horizon))
    )
    if restored:  # an old window: its per-partition watermarks may have been pruned
        watermark = restore_partitions(pipeline, state.watermark, request.partition_keys)
        state = replace(state, watermark=watermark)
    added: tuple[str, ...] = ()
    unreadable: dict[str, str] = {}
    if request.files is None:
        groups = discover_files(
            pipeline, state.watermark, partition_of, now=now, since=since, restored=restored
        )
        candidates = sorted(p for key in wanted for p in groups.by_partition.get(key, ()))
        already: list[str] = []
        unreadable = {
            path: character
            for path, character in groups.unreadable.items()
            if partition_key_of(pipeline, path, partition_of) in wanted
        }
    else:
        candidates, already, added = requested_files(pipeline, state.watermark, request.files)
    file_partitions: dict[str, str] = {}
    outside: list[tuple[str, str | None]] = []
    for path in candidates:
        key = partition_key_of(pipeline, path, partition_of)
        if key in wanted:
            file_partitions[path] = key
        else:
            outside.append((path, key))
    if outside and request.files is not None:
        raise RequestedFileError(
            outside[0][0],
            f"it belongs to partition {outside[0][1]!r}, not to this run's partitions "
            f"{sorted(wanted)}",
            "launch it in its own partition",
        )
    return BatchPlan(
        request,
        state,
        tuple(sorted(file_partitions)),
        file_partitions,
        tuple(already),
        added,
        unreadable,
    )


def requested_files(
    pipeline: Pipeline, watermark: FileWatermark, requested: Sequence[str]
) -> tuple[list[str], list[str], tuple[str, ...]]:
    """(files to ingest, requested files at or below the watermark, files added) of a list.

    A requested list passes the checks a listing applies: each entry is a relative path inside
    the source (no '.', '..', absolute or empty parts), not hidden, of the source's format and
    named sortably, else :class:`RequestedFileError` names it. Each landing partition of the list
    is listed once: a requested file that is not there raises
    :class:`SourceFileMissingError`; a file above the watermark that sorts below a requested one
    of its partition is added (the watermark must not move past it uncommitted).
    """
    source = pipeline.source
    above: dict[str, list[str]] = {}
    already: list[str] = []
    for path in sorted(set(requested)):
        check_requested_path(path, suffixes=source.suffixes, ordering=source.file_name_ordering)
        if watermark.is_above(path):
            prefix, name = split_path(path)
            above.setdefault(prefix, []).append(name)
        else:
            already.append(path)
    files: list[str] = []
    added: list[str] = []
    for prefix, names in above.items():
        present = storage.list_names(storage.join(source.uri, prefix) if prefix else source.uri)
        missing = sorted(set(names) - present)
        if missing:
            raise SourceFileMissingError(
                f"{prefix}/{missing[0]}" if prefix else missing[0], source.uri
            )
        last = max(names)
        for name in sorted(present):
            path = f"{prefix}/{name}" if prefix else name
            if name > last or not name.endswith(source.suffixes) or storage.is_hidden(name):
                continue
            if not watermark.is_above(path):
                continue
            if name not in names:
                check_sortable(path, source.file_name_ordering)
                added.append(path)
            files.append(path)
    for path in files:  # refused before anything is read (discovery holds such files back)
        check_readable(source.uri, path)
    return sorted(files), already, tuple(sorted(added))


def check_requested_path(path: str, *, suffixes: Sequence[str], ordering: NameOrdering) -> None:
    """Refuse a requested entry a listing would never return (see :func:`requested_files`)."""
    parts = path.split("/")
    problem = (
        "it is empty"
        if not path
        else "it is absolute; give paths relative to the source root"
        if path.startswith("/")
        else "it has '.', '..' or empty parts; give the path as the source listing shows it"
        if any(part in ("", ".", "..") for part in parts)
        else "a folder or file in it starts with '_' or '.' (hidden, never part of a source)"
        if any(storage.is_hidden(part) for part in parts)
        else f"it does not end with one of the source's suffixes {list(suffixes)}"
        if not path.endswith(tuple(suffixes))
        else None
    )
    if problem is not None:
        raise RequestedFileError(path, problem, "fix the run configuration's 'files' list")
    check_sortable(path, ordering)


@dataclass(frozen=True, kw_only=True)
class StagedBatch:
    """A planned batch whose data files exist but are not committed yet (the asset's output)."""

    plan: BatchPlan
    token: str
    rows_read: int = 0
    rows_quarantined: int = 0
    #: URIs of the files to commit (staged, or the other writer's in place)
    data_files: tuple[str, ...] = ()
    #: staging root of the data files; None when they are already in place
    data_root: str | None = None
    data_schema: pa.Schema | None = None
    quarantine_files: tuple[str, ...] = ()
    quarantine_root: str | None = None
    #: landing files that could not be read at all, recorded in the quarantine as files
    files_quarantined: int = 0
    per_partition: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: add actions already read from the footers (commit pipelines: the files do not move)
    described: tuple[DataFile, ...] = ()

    @property
    def watermark_before(self) -> FileWatermark:
        return self.plan.state.watermark

    @property
    def watermark_after(self) -> FileWatermark:
        return self.plan.state.watermark.advance(self.plan.files)


def _list_parquet(uri: str) -> tuple[str, ...]:
    """URIs of the Parquet files Spark wrote under ``uri`` (hidden .crc/_SUCCESS files skipped)."""
    fs, root = storage.filesystem(uri)
    if not fs.exists(root):
        return ()
    names = (p for p in fs.find(root) if p.endswith(".parquet"))
    return tuple(
        sorted(
            fs.unstrip_protocol(p) for p in names if not storage.is_hidden(posixpath.basename(p))
        )
    )


def stage_batch(plan: BatchPlan, spark: SparkSession | None, *, now: datetime) -> StagedBatch:
    """Make the batch's data files: Spark for an ingest pipeline, nothing to do for a commit one.

    A landing file that cannot be read at all (not gzip, truncated, no Parquet footer) is set
    aside and staged as one quarantine record (path, error, size): the rest of the batch commits,
    and the commit that passes the file with the watermark is the one that records it.
    """
    pipeline = plan.request.pipeline
    token = f"{now.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"
    if not plan.files:
        return StagedBatch(plan=plan, token=token)
    for table_uri in (pipeline.table.uri, pipeline.table.quarantine):
        remove_stale_staging(table_uri, now)
    quarantine_dir = storage.join(pipeline.table.quarantine, f"{STAGING_DIR}/{token}")
    if isinstance(pipeline, CommitPipelineConfig):
        staged, unreadable = _stage_in_place(plan, pipeline, token)
    else:
        if spark is None:
            raise ValueError(f"pipeline {pipeline.name!r} has files to ingest but no Spark session")
        staged, unreadable = _stage_with_spark(plan, pipeline, spark, token, quarantine_dir, now)
    if unreadable:
        staged = _quarantine_unreadable(staged, unreadable, quarantine_dir, now)
    if not isinstance(pipeline, CommitPipelineConfig):
        crash_point("after_data_written")
    return staged


def _stage_in_place(
    plan: BatchPlan, pipeline: CommitPipelineConfig, token: str
) -> tuple[StagedBatch, list[UnreadableFile]]:
    """The other writer's files are committed where they are: read each footer once, here."""
    from watermark_assets.spark import UnreadableFile

    described: list[DataFile] = []
    unreadable: list[UnreadableFile] = []
    for path, relative in zip(plan.files, _relative_to_table(pipeline, plan.files)):
        try:
            described.extend(
                describe_data_files(pipeline.table.uri, [relative], pipeline.table.partition_by)
            )
        except UnreadableDataFileError as exc:
            unreadable.append(UnreadableFile(path, f"not a readable Parquet file: {exc.reason}"))
    aside = {u.path for u in unreadable}
    readable = [p for p in plan.files if p not in aside]
    rows = Counter[str]()
    for path, data_file in zip(readable, described):
        rows[plan.file_partitions[path]] += data_file.num_records
    uris = tuple(storage.join(pipeline.source.uri, p) for p in readable)
    schema = (
        _parquet_schema(uris[0], pipeline.table.partition_by)
        if uris
        else _known_table_schema(pipeline, unreadable)
    )
    counts = {
        k: {"files": _count(plan, k), "rows_read": n, "rows_quarantined": 0}
        for k, n in rows.items()
    }
    staged = StagedBatch(
        plan=plan,
        token=token,
        rows_read=sum(rows.values()),
        data_files=uris,
        data_schema=schema,
        per_partition=counts,
        described=tuple(described),
    )
    return staged, unreadable


def _stage_with_spark(
    plan: BatchPlan,
    pipeline: IngestPipelineConfig,
    spark: SparkSession,
    token: str,
    quarantine_dir: str,
    now: datetime,
) -> tuple[StagedBatch, list[UnreadableFile]]:
    """Spark's pass over the batch; a file Spark cannot read is set aside and the pass redone."""
    from watermark_assets import spark as spark_adapter

    data_dir = storage.join(pipeline.table.uri, f"{STAGING_DIR}/{token}")
    unreadable: list[spark_adapter.UnreadableFile] = []
    while True:
        # A file Spark cannot read at all fails the whole job: set it aside and read the others
        # again (each costs one more pass; a batch has few).
        aside = {u.path for u in unreadable}
        spec = _read_spec(pipeline, [p for p in plan.files if p not in aside], plan, now)
        try:
            if spec.files or spec.schema_ddl is not None:  # no files: the schema's empty batch
                output = spark_adapter.write_batch(
                    spark, spec, data_dir=data_dir, quarantine_dir=quarantine_dir
                )
            else:  # Parquet without a configured schema, and no file left to read
                empty = pa.schema([])
                schema = _known_table_schema(pipeline, unreadable)
                output = spark_adapter.StagedOutput(0, 0, {}, None, None, schema, empty)
            break
        except Exception as exc:
            found = spark_adapter.unreadable_file(exc, spec)
            if found is None:
                raise
            unreadable.append(found)
            _remove_tree(data_dir)
            _remove_tree(quarantine_dir)
            if len(unreadable) > MAX_UNREADABLE_FILES:
                raise UnreadableFilesError(
                    pipeline.name,
                    tuple(u.path for u in unreadable),
                    f"more than {MAX_UNREADABLE_FILES} in one batch (each costs a pass over the "
                    "batch)",
                    "check the producer, then move the broken files out of the source folder or "
                    "request the rest in smaller batches",
                ) from exc
    staged = StagedBatch(
        plan=plan,
        token=token,
        rows_read=output.rows_read,
        rows_quarantined=output.rows_quarantined,
        data_files=_list_parquet(output.data_dir) if output.data_dir else (),
        data_root=output.data_dir,
        data_schema=output.data_schema,
        quarantine_files=_list_parquet(quarantine_dir) if output.quarantine_dir else (),
        quarantine_root=output.quarantine_dir,
        per_partition={k: {"files": _count(plan, k), **v} for k, v in output.per_partition.items()},
    )
    return staged, unreadable


#: Unreadable files one batch may set aside (each costs one more Spark pass); more fail the run.
MAX_UNREADABLE_FILES = 10


def _read_spec(
    pipeline: IngestPipelineConfig, files: Sequence[str], plan: BatchPlan, now: datetime
) -> ReadSpec:
    from watermark_assets.spark import ReadSpec

    return ReadSpec(
        source_uri=pipeline.source.uri,
        files=tuple(files),
        file_partitions={p: plan.file_partitions[p] for p in files},
        format=pipeline.source.format.value,
        schema_ddl=pipeline.source.schema_ddl,
        csv_options=pipeline.source.csv_options,
        derived_columns=pipeline.table.derived_columns,
        partition_by=pipeline.table.partition_by,
        ingested_at_iso=now.isoformat(),
    )


def _known_table_schema(pipeline: Pipeline, unreadable: Sequence[UnreadableFile]) -> pa.Schema:
    """An empty schema ("the table's") for a batch with no readable file; none to take from a
    table that does not exist yet."""
    if DeltaCommitter(pipeline.table.uri).current_version() is None:
        raise UnreadableFilesError(
            pipeline.name,
            tuple(u.path for u in unreadable),
            "every file of the pipeline's first batch is unreadable, so the table's schema is "
            "unknown",
            "fix or remove them, or let a readable file land first",
        )
    return pa.schema([])


def _quarantine_unreadable(
    staged: StagedBatch, unreadable: Sequence[UnreadableFile], quarantine_dir: str, now: datetime
) -> StagedBatch:
    """``staged`` with one quarantine record per unreadable file (path, error, size) staged
    beside Spark's, counted per Dagster partition."""
    plan = staged.plan
    _write_unreadable_records(unreadable, plan, quarantine_dir, now)
    per_partition = {k: dict(v) for k, v in staged.per_partition.items()}
    for item in unreadable:
        key = plan.file_partitions[item.path]
        tally = per_partition.setdefault(key, {"files": _count(plan, key), "rows_read": 0})
        tally["files_quarantined"] = tally.get("files_quarantined", 0) + 1
    return replace(
        staged,
        quarantine_files=_list_parquet(quarantine_dir),
        quarantine_root=quarantine_dir,
        files_quarantined=len(unreadable),
        per_partition=per_partition,
    )


def _write_unreadable_records(
    unreadable: Sequence[UnreadableFile], plan: BatchPlan, quarantine_dir: str, now: datetime
) -> None:
    """One quarantine record per unreadable file (path, error, size), staged beside Spark's."""
    from watermark_assets import spark as spark_adapter

    fs, root = storage.filesystem(plan.request.pipeline.source.uri)
    records = pa.Table.from_pylist(
        [
            {
                spark_adapter.SOURCE_FILE_COLUMN: item.path,
                spark_adapter.INGESTED_AT_COLUMN: now,
                spark_adapter.PARTITION_KEY_COLUMN: plan.file_partitions[item.path],
                "raw_record": None,
                "error": item.error,
                "file_size": fs.size(f"{root.rstrip('/')}/{item.path}"),
            }
            for item in unreadable
        ],
        schema=spark_adapter.QUARANTINE_SCHEMA,
    )
    storage.write_parquet(storage.join(quarantine_dir, "unreadable-files.parquet"), records)


def remove_stale_staging(table_uri: str, now: datetime) -> list[str]:
    """Delete ``_staging/{token}`` folders older than STAGING_RETENTION; their names.

    A run that crashed after Spark wrote its files leaves its staging folder behind; nothing in
    the Delta log references it. The token starts with the staging time, so no stat is needed.
    """
    fs, root = storage.filesystem(storage.join(table_uri, STAGING_DIR))
    if not fs.exists(root):
        return []
    removed = []
    for path in fs.ls(root, detail=False):
        token = posixpath.basename(path.rstrip("/"))
        try:
            staged_at = datetime.strptime(token[:15], "%Y%m%dT%H%M%S").replace(tzinfo=timezone.utc)
        except ValueError:
            continue  # not ours
        if now - staged_at > STAGING_RETENTION:
            fs.rm(path, recursive=True)
            removed.append(token)
    return removed


def _count(plan: BatchPlan, key: str) -> int:
    return sum(1 for k in plan.file_partitions.values() if k == key)


def _parquet_schema(uri: str, partition_by: Sequence[str]) -> pa.Schema:
    schema = storage.parquet_schema(uri)
    for column in partition_by:
        if column not in schema.names:
            schema = schema.append(pa.field(column, pa.string()))
    return schema


def _move_into_table(
    staged_files: Sequence[str], staging_root: str, table_uri: str, token: str
) -> list[str]:
    """Move staged files into the table's partition directories; their paths relative to it."""
    fs, table_root = storage.filesystem(table_uri)
    _, staging = storage.filesystem(staging_root)
    moved = []
    for number, uri in enumerate(staged_files):
        _, inner = storage.filesystem(uri)
        directory = posixpath.dirname(posixpath.relpath(inner, staging))
        name = f"part-{number:05d}-{token}.parquet"
        relative = posixpath.normpath(posixpath.join(directory, name))
        fs.makedirs(posixpath.join(table_root, posixpath.dirname(relative)), exist_ok=True)
        fs.mv(inner, posixpath.join(table_root, relative))
        moved.append(relative)
    return moved


@dataclass(frozen=True)
class BatchResult:
    """What a run did, for the materialization metadata and the summary."""

    staged: StagedBatch
    outcome: CommitOutcome
    quarantine_versions: tuple[int, ...]
    rows_committed: int
    state_after: PipelineState
    checkpoint_written: bool
    txns: tuple[TxnVersion, ...] = ()


#: How often a commit decides again after another run committed the same partitions meanwhile.
MAX_COMMIT_ATTEMPTS = 5


@dataclass(frozen=True)
class CommitDecision:
    """What a commit may do, decided from the log just before committing.

    ``txns``: the next txn version of each Dagster partition of the run, built on the versions
    read (the optimistic lock: another commit of these partitions makes the commit stale).
    ``taken``: files of this batch that commits made after the plan already hold (exact, by the
    ``source_files`` each commit records), and ``taken_by`` those commits (version, run id).
    """

    txns: tuple[TxnVersion, ...]
    taken: tuple[str, ...]
    taken_by: tuple[tuple[int, str], ...]


def decide_commit(plan: BatchPlan, committer: DeltaCommitter) -> CommitDecision:
    """Read the txn versions, then every commit since the plan's state (see CommitDecision)."""
    pipeline = plan.request.pipeline
    app_ids = [txn_app_id(pipeline.name, key) for key in sorted(plan.request.partition_keys)]
    # Versions first: a commit landing after this read moves a txn and makes ours stale.
    committed = committer.transaction_versions(app_ids)
    ours = set(plan.files)
    taken: set[str] = set()
    taken_by: list[tuple[int, str]] = []
    for version, metadata in pipeline_commits(committer, pipeline, plan.state.delta_version):
        hit = ours.intersection(metadata.source_files)
        if hit:
            taken |= hit
            taken_by.append((version, metadata.run_id))
    return CommitDecision(
        tuple(TxnVersion.next_of(app_id, committed[app_id]) for app_id in app_ids),
        tuple(sorted(taken)),
        tuple(taken_by),
    )


@dataclass(frozen=True)
class _Placed:
    """Files moved from staging into their tables (relative to each table's root)."""

    data: tuple[DataFile, ...]
    moved_data: tuple[str, ...]
    quarantine: tuple[str, ...]


def commit_batch(staged: StagedBatch, *, now: datetime) -> BatchResult:
    """Commit the staged files and the watermark advance in ONE Delta commit, then checkpoint.

    The decision is exact per file (:func:`decide_commit`): if runs that committed after this
    one planned hold ALL its files, nothing is committed; some of them:
    :class:`BatchOverlapError` (plan again: the new plan drops the committed files); none: the
    commit. A stale outcome (a concurrent commit of the same partitions) decides again. The batch's
    quarantined records are moved into the quarantine table's folder and named by the data
    commit, then added to the quarantine table (:func:`complete_quarantine`).
    """
    plan = staged.plan
    pipeline = plan.request.pipeline
    if not plan.files:
        state = load_state(pipeline, now=now)
        # A crash between commit and checkpoint (or a deleted checkpoint) leaves the state only in
        # the Delta log: write the checkpoint it replayed to, when due, even with nothing to commit.
        written = save_checkpoint(pipeline, state, now=now)
        nothing = CommitOutcome(None, True, "no files above the watermark: nothing to commit")
        return BatchResult(staged, nothing, (), 0, state, written)
    committer = DeltaCommitter(pipeline.table.uri)
    placed: _Placed | None = None
    pause_point("before_commit")
    try:
        for _ in range(MAX_COMMIT_ATTEMPTS):
            decision = decide_commit(plan, committer)
            if decision.taken:
                if placed is not None:
                    _remove_placed(pipeline, placed)
                    placed = None
                by = ", ".join(f"v{v} (run {run})" for v, run in decision.taken_by)
                if len(decision.taken) < len(plan.files):
                    raise BatchOverlapError(pipeline.name, decision.taken, by)
                reason = (
                    f"all {len(plan.files)} files were committed by {by} after this run "
                    "planned: nothing to commit"
                )
                state = load_state(pipeline, now=now)
                skipped = CommitOutcome(None, True, reason)
                return BatchResult(staged, skipped, (), 0, state, False, decision.txns)
            if placed is None:
                placed = _place(staged, pipeline)
            metadata = _commit_metadata(staged, placed)
            outcome = committer.commit(
                placed.data,
                schema=staged.data_schema if staged.data_schema is not None else pa.schema([]),
                partition_by=pipeline.table.partition_by,
                txns=decision.txns,
                custom_metadata={COMMIT_METADATA_KEY: metadata.to_json()},
            )
            if not outcome.stale:
                break
        else:
            raise DeltaCommitError(
                f"gave up committing to {pipeline.table.uri!r} after {MAX_COMMIT_ATTEMPTS} "
                "attempts: other runs kept committing the same partitions. Nothing was committed "
                "by this run; run it again",
                table_uri=pipeline.table.uri,
            )
    finally:
        for root in (staged.data_root, staged.quarantine_root):
            if root is not None:
                _remove_tree(root)
    crash_point("after_commit")
    state = load_state(pipeline, now=now)
    completed = complete_quarantine(pipeline, state)
    written = save_checkpoint(pipeline, state, now=now)
    rows_committed = sum(f.num_records for f in placed.data)
    return BatchResult(
        staged, outcome, tuple(completed), rows_committed, state, written, decision.txns
    )


def _place(staged: StagedBatch, pipeline: Pipeline) -> _Placed:
    """Move the staged data and quarantine files into their tables (not committed yet)."""
    data: list[DataFile] = list(staged.described)
    moved: list[str] = []
    if staged.data_root is not None and staged.data_files:  # Spark's files, staged: move them in
        moved = _move_into_table(
            staged.data_files, staged.data_root, pipeline.table.uri, staged.token
        )
        data = describe_data_files(pipeline.table.uri, moved, pipeline.table.partition_by)
    quarantine: list[str] = []
    if staged.quarantine_root is not None and staged.quarantine_files:
        quarantine = _move_into_table(
            staged.quarantine_files,
            staged.quarantine_root,
            pipeline.table.quarantine,
            staged.token,
        )
    return _Placed(tuple(data), tuple(moved), tuple(quarantine))


def _remove_placed(pipeline: Pipeline, placed: _Placed) -> None:
    """Delete files this run moved into the tables that will not be committed (another run
    committed the batch). A commit pipeline's data files are the other writer's: never moved."""
    for table_uri, paths in (
        (pipeline.table.uri, placed.moved_data),
        (pipeline.table.quarantine, placed.quarantine),
    ):
        fs, root = storage.filesystem(table_uri)
        for path in paths:
            fs.rm(f"{root}/{path}")


def _commit_metadata(staged: StagedBatch, placed: _Placed) -> CommitMetadata:
    plan = staged.plan
    pipeline = plan.request.pipeline
    return CommitMetadata(
        pipeline=pipeline.name,
        source=pipeline.source.name,
        run_id=plan.request.run_id,
        partition_keys=plan.request.partition_keys,
        watermark_before=staged.watermark_before,
        watermark_after=staged.watermark_after,
        files=len(plan.files),
        rows_read=staged.rows_read,
        rows_quarantined=staged.rows_quarantined,
        rows_committed=sum(f.num_records for f in placed.data),
        per_partition=staged.per_partition,
        partition_files=dict(Counter(split_path(path)[0] for path in plan.files)),
        source_files=plan.files,
        quarantine_files=placed.quarantine,
        files_quarantined=staged.files_quarantined,
    )


def _remove_tree(uri: str) -> None:
    fs, root = storage.filesystem(uri)
    if fs.exists(root):
        fs.rm(root, recursive=True)


def _relative_to_table(pipeline: Pipeline, paths: Sequence[str]) -> list[str]:
    """Source-relative paths as table-relative ones (a commit pipeline's source is in the table)."""
    prefix = posixpath.relpath(
        storage.filesystem(pipeline.source.uri)[1], storage.filesystem(pipeline.table.uri)[1]
    )
    return [posixpath.normpath(posixpath.join(prefix, path)) for path in paths]
