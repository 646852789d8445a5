"""Commit a staged file batch: decide exactly per file, ONE Delta commit, then the checkpoint.

Crash anywhere and run again: files at or below the committed watermark are dropped from the batch
when it is planned, and a commit never holds a file that a commit after the plan already holds
(exact: every commit records its source files).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import pyarrow as pa

from watermark_assets import storage
from watermark_assets.config import Pipeline
from watermark_assets.core.filepath.path import (
    split_path,
)
from watermark_assets.delta.committer import (
    CommitOutcome,
    DeltaCommitter,
    TxnVersion,
    committer_for,
)
from watermark_assets.delta.orphans import open_delta_table
from watermark_assets.delta.rewrite import RewritePlan
from watermark_assets.delta.stats import DataFile, describe_data_files
from watermark_assets.engine.execute import Stale, execute
from watermark_assets.engine.write import Append, RunRecord, write
from watermark_assets.exceptions import (
    BatchOverlapError,
    LogHistoryLostError,
    SchemaInferredMeanwhileError,
)
from watermark_assets.kinds.file_path.plan import BatchPlan
from watermark_assets.kinds.file_path.stage import StagedBatch
from watermark_assets.runs.faults import crash_point, pause_point
from watermark_assets.sources.late_files import late_txn_app_id
from watermark_assets.staging import move_into_table
from watermark_assets.state.checkpoint import save_checkpoint
from watermark_assets.state.commit_metadata import (
    COMMIT_METADATA_KEY,
    QUARANTINE_METADATA_KEY,
    CommitMetadata,
    pipeline_commits,
    quarantine_app_id,
    txn_app_id,
)
from watermark_assets.state.load import (
    PipelineState,
    load_state,
    read_checkpoint,
    table_lineage,
)


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
    app_id_of = late_txn_app_id if plan.request.late else txn_app_id
    app_ids = [app_id_of(pipeline.name, key) for key in sorted(plan.request.partition_keys)]
    # Versions first: a commit landing after this read moves a txn and makes ours stale.
    committed = committer.transaction_versions(app_ids)
    ours = set(plan.files)
    taken: set[str] = set()
    taken_by: list[tuple[int, str]] = []
    try:
        since_plan = pipeline_commits(committer, pipeline, plan.state.delta_version)
    except LogHistoryLostError as lost:
        # commits since the plan were cleaned up already (delta-rs cleaning on every commit):
        # the checkpoint written after each of them records its files, the table's lineage
        # names every file of them that still has rows
        checkpoint = read_checkpoint(pipeline)
        recorded = ours.intersection(checkpoint.file_signatures if checkpoint else ())
        held = recorded | table_lineage(pipeline, lambda path: path in ours).files
        since_plan = []
        if held:
            taken |= held
            taken_by.append((lost.oldest - 1, "cleaned from the log; found in the table"))
    for version, metadata in since_plan:
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


def commit_batch(
    staged: StagedBatch, *, now: datetime, add_columns: bool = False, widen: bool = False
) -> BatchResult:
    """Commit the staged files and the watermark advance in ONE Delta commit, then checkpoint.

    ``add_columns`` / ``widen`` (the pipeline's ``schema.mode: add_columns`` sets both; False:
    the staged files must fit the table's schema): the commit may add the staged files' new
    columns (nullable) and widen column types, in that same commit
    (:func:`~watermark_assets.delta.schema_change.reconcile`); the schema history names the
    batch's source files. A concurrent commit makes an evolving commit stale: decided again.

    The decision is exact per file (:func:`decide_commit`): if runs that committed after this
    one planned hold ALL its files, nothing is committed; some of them:
    :class:`BatchOverlapError` (plan again: the new plan drops the committed files); none: the
    commit. A stale outcome (a concurrent commit of the same partitions) decides again. A batch
    read with an inferred schema (``schema.infer``) only creates the table: once another run
    created it, :class:`SchemaInferredMeanwhileError` (plan again, with the table's). The batch's
    quarantined records are moved into the quarantine table's folder and named by the data
    commit, then added to the quarantine table (:func:`complete_quarantine`).
    """
    plan = staged.plan
    pipeline = plan.request.pipeline
    if not plan.files:
        state = load_state(pipeline, now=now)
        # A crash between commit and checkpoint (or a deleted checkpoint) leaves the state only in
        # the Delta log: write the checkpoint it replayed to, when due, even with nothing to commit
        # (the quarantine of a commit killed before it, completed first: the checkpoint says so).
        complete_quarantine(pipeline, state)
        written = save_checkpoint(pipeline, state, now=now)
        nothing = CommitOutcome(None, True, "no files above the watermark: nothing to commit")
        return BatchResult(staged, nothing, (), 0, state, written)
    committer = committer_for(pipeline.table)
    origin = files_origin(plan.files)
    pause_point("before_commit")

    def attempt(placement: Placement) -> Attempt | BatchResult:
        if staged.inferred is not None and open_delta_table(pipeline.table.uri) is not None:
            # the schema is stored by the commit that creates the table: another run's first
            # commit won, and its schema is the one every run reads with (this one re-plans)
            placement.remove()
            raise SchemaInferredMeanwhileError(pipeline.name, pipeline.table.uri)
        decision = decide_commit(plan, committer)
        if decision.taken:
            placement.remove()
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
        placed = placement.placed()
        metadata = _commit_metadata(staged, placed, decision)
        schema = staged.data_schema if staged.data_schema is not None else pa.schema([])
        if staged.inferred is not None:  # the table is created with it: stored for every run
            schema = staged.inferred.stamped(schema)
        written = write(
            committer,
            (),
            Append(),
            file_record(decision.txns, lambda _plan: metadata),
            schema=schema,
            partition_by=pipeline.table.partition_by,
            add_columns=add_columns,
            widen=widen,
            schema_origin=origin,
            placed=(placed.data,),
        )
        return Attempt(written.outcome, metadata, decision.txns)

    return commit_attempts(
        staged,
        attempt,
        now=now,
        gave_up="other runs kept committing the same partitions",
        state_after=lambda state, metadata: _with_run_partitions(state, plan, metadata),
    )


@dataclass(frozen=True)
class Attempt:
    """One attempt at a run's commit: its outcome (stale: another commit moved a txn this one
    built on) and what it recorded."""

    outcome: CommitOutcome
    metadata: CommitMetadata
    txns: tuple[TxnVersion, ...]


class Placement:
    """A run's staged files, moved into their tables at most once however many attempts need
    them (:func:`_place`), and removed again when a decision leaves them uncommitted."""

    def __init__(self, staged: StagedBatch) -> None:
        self._staged = staged
        self._placed: _Placed | None = None

    def placed(self) -> _Placed:
        if self._placed is None:
            self._placed = _place(self._staged, self._staged.plan.request.pipeline)
        return self._placed

    def remove(self) -> None:
        if self._placed is not None:
            _remove_placed(self._staged.plan.request.pipeline, self._placed)
            self._placed = None


def commit_attempts(
    staged: StagedBatch,
    attempt: Callable[[Placement], Attempt | BatchResult],
    *,
    now: datetime,
    gave_up: str,
    state_after: Callable[[PipelineState, CommitMetadata], PipelineState] | None = None,
) -> BatchResult:
    """Commit a staged batch by ``attempt``, then record it: the one tail of every file-path
    commit (a batch's, a rewrite's).

    The attempts are the engine's (:func:`~watermark_assets.engine.execute.execute`):
    ``attempt`` decides from the log and commits, or returns the :class:`BatchResult` of a
    decision to commit nothing (its placed files are removed); a stale attempt decides again
    from the log with the files placed once (:class:`Placement`), up to
    ``MAX_COMMIT_ATTEMPTS`` (then :class:`~watermark_assets.exceptions.DeltaCommitError`,
    nothing committed by this run: ``gave_up`` says why). The staging folders are removed
    after every attempt, whatever happens. After the commit: the state is read back, the
    commit's quarantine completed and the checkpoint written at once (every commit's progress
    is recorded, whatever the intervals); ``state_after`` shapes the state the run's metadata
    shows.
    """
    pipeline = staged.plan.request.pipeline

    def once(placement: Placement, _number: int) -> Attempt | BatchResult:
        tried = attempt(placement)
        if isinstance(tried, BatchResult):
            placement.remove()
        elif tried.outcome.stale:
            raise Stale(tried.outcome)
        return tried

    tried = execute(
        Placement(staged),
        once,
        stage_again=lambda placement, _stale: placement,  # decided again from the log
        staging=lambda _placement: [
            root for root in (staged.data_root, staged.quarantine_root) if root is not None
        ],
        table_uri=pipeline.table.uri,
        pipeline=pipeline.name,
        contention=gave_up,
    )
    if isinstance(tried, BatchResult):
        return tried
    crash_point("after_commit")
    state = load_state(pipeline, now=now)
    completed = complete_quarantine(pipeline, state)
    written = save_checkpoint(pipeline, state, now=now, force=True)
    return BatchResult(
        staged,
        tried.outcome,
        tuple(completed),
        tried.metadata.rows_committed,
        state if state_after is None else state_after(state, tried.metadata),
        written,
        tried.txns,
    )


def file_record(
    txns: Sequence[TxnVersion], metadata_of: Callable[[RewritePlan | None], CommitMetadata]
) -> RunRecord:
    """A file-path commit's record for :func:`~watermark_assets.engine.write.write`: the txns of
    its decision and ONE commitInfo entry, the :class:`CommitMetadata` (the watermark advance,
    the source and quarantine files), built from the replace plan when the commit removes rows
    (a rewrite counts them; an append's plan is None). Recorded even when the commit adds no file
    (a batch whose every record was quarantined still advances)."""
    return RunRecord(
        tuple(txns),
        {},
        lineage=lambda plan: {COMMIT_METADATA_KEY: metadata_of(plan).to_json()},
        records_completion=True,
    )


def complete_quarantine(pipeline: Pipeline, state: PipelineState) -> list[int]:
    """Add the quarantine files of ``state.quarantine_pending`` to the quarantine table, exactly
    once and in data-version order; the data versions completed by this call.

    The data commit decided them (and moved the files into the quarantine table's folder); this
    only makes them visible, each data version's files in ONE :func:`write` of them as placed
    (an :class:`Append` under the txn :func:`quarantine_app_id` = that data version, and one
    ``QUARANTINE_METADATA_KEY`` entry). That txn holds the last data version completed: pending
    commits at or below it are done (by this process before a crash, or by another one), and a
    concurrent completion is a stale outcome, re-checked. Call it before any checkpoint is
    written for the state (``state.checkpoint.save_checkpoint`` refuses one whose quarantine is
    not complete); nothing pending: no read at all.
    """
    if not state.quarantine_pending:
        return []
    uri = pipeline.table.quarantine
    committer = committer_for(uri)
    app_id = quarantine_app_id(pipeline.name)
    done: list[int] = []
    for version, relative in state.quarantine_pending:
        while True:
            current = committer.transaction_version(app_id)
            if current is not None and current >= version:
                break
            files = describe_data_files(uri, relative, [])
            schema = pa.unify_schemas(
                [storage.parquet_schema(storage.join(uri, path)) for path in relative]
            )
            # metadata only, before the data (engine/write.py: not a write mode)
            committer.add_missing_columns(schema)  # e.g. file_size, added after 0.1
            entry = json.dumps({"pipeline": pipeline.name, "data_version": version})
            written = write(
                committer,
                (),
                Append(),
                RunRecord(
                    (TxnVersion(app_id, version, current),), {QUARANTINE_METADATA_KEY: entry}
                ),
                schema=schema,
                partition_by=[],
                placed=(files,),
            )
            if not written.outcome.stale:
                done.append(version)
                break
    return done


def files_origin(files: Sequence[str]) -> str | None:
    """The schema history's origin of a batch: its file, or its first and last and how many
    (a batch may hold thousands; the first file holding a new column is the read side's)."""
    if not files:
        return None
    if len(files) == 1:
        return files[0]
    return f"{len(files)} files: {files[0]} .. {files[-1]}"


def _with_run_partitions(
    state: PipelineState, plan: BatchPlan, metadata: CommitMetadata
) -> PipelineState:
    """The state after the commit as the run's metadata shows it: the run's own Dagster and
    landing partitions kept even where the state prunes them (a backfill of an old partition,
    whose counts and watermarks were restored from the table when it planned)."""
    rows = dict(state.partition_rows)
    for key, count in metadata.rows_committed_by_partition().items():
        if key not in rows:
            rows[key] = plan.state.partition_rows.get(key, 0) + count
    return replace(
        state,
        watermark=state.watermark.merge(metadata.watermark_after),
        partition_rows=rows,
    )


def _place(staged: StagedBatch, pipeline: Pipeline) -> _Placed:
    """Move the staged data and quarantine files into their tables (not committed yet)."""
    data: list[DataFile] = list(staged.described)
    moved: list[str] = []
    if staged.data_root is not None and staged.data_files:  # Spark's files, staged: move them in
        moved = move_into_table(
            staged.data_files, staged.data_root, pipeline.table.uri, staged.token
        )
        data = describe_data_files(pipeline.table.uri, moved, pipeline.table.partition_by)
    quarantine: list[str] = []
    if staged.quarantine_root is not None and staged.quarantine_files:
        quarantine = move_into_table(
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


def _commit_metadata(
    staged: StagedBatch, placed: _Placed, decision: CommitDecision
) -> CommitMetadata:
    plan = staged.plan
    pipeline = plan.request.pipeline
    prefixes: dict[str, str] = {}
    for path, key in plan.file_partitions.items():
        prefix = split_path(path)[0]
        prefixes[key] = max(prefixes.get(key, prefix), prefix)
    # the Dagster partition's first commit of files: its txn had no version yet, or the state
    # the run planned on (which a backfill of an old partition restores from the table) has no
    # count for it (a range run commits a txn for partitions without files too)
    first = (
        ()
        if plan.request.late
        else tuple(
            key
            for key, txn in zip(sorted(plan.request.partition_keys), decision.txns)
            if key in prefixes and (txn.previous is None or key not in plan.state.partition_rows)
        )
    )
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
        late=plan.request.late,
        partition_prefixes=prefixes,
        new_partitions=first,
        source_signatures=dict(plan.signatures),
    )
