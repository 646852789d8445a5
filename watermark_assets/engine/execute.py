"""The one way a planned and staged run commits: attempts, stale outcomes, the commit's arguments.

A run of the column engine (a column run, a replay chunk, a unit, a run of time windows or
time x unit cells) has planned (:mod:`watermark_assets.engine.plan`) and staged its rows, one
:class:`StagedRead` per read (a window, a cell, a chunk: one folder under
``{table}/_staging/{token}`` each). Then:

- :func:`commit_reads` makes the ONE commit of the reads (:func:`~watermark_assets.engine.
  write.write`): their files, the plans' write mode with each read's region
  (:func:`write_mode_for`), the txns of every read's :class:`~watermark_assets.engine.plan.
  RecordPlan` in the reads' order, the commitInfo entries and lineage the run gives, the
  staged schema (the first read with rows, else the first one known). A stale outcome raises
  :class:`Stale`: inside a provider's ``commit_then_save`` nothing is saved then;
- :func:`execute` is the attempt loop around it: an attempt either returns the run's result
  (committed, or nothing to commit) or raises :class:`Stale` (another writer committed one of
  the txns, or the snapshot moved); the staging folders are removed after every attempt, and
  after a stale one the run plans and stages again (``stage_again``), at most
  :data:`MAX_COMMIT_ATTEMPTS` times, then :class:`~watermark_assets.exceptions.DeltaCommitError`
  (nothing committed by this run).

What stays with a kind: its planning, its staging, the entries it records (its watermark or state
entry, the ``column_run`` lineage) and the result it reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa

from watermark_assets.core.clock import Clock
from watermark_assets.delta.committer import CommitOutcome, DeltaCommitter
from watermark_assets.delta.rewrite import RewritePlan
from watermark_assets.delta.schema_change import SchemaEvolution
from watermark_assets.engine.plan import RunPlan
from watermark_assets.engine.write import (
    Append,
    Region,
    Replace,
    RunRecord,
    StagedFiles,
    WriteMode,
    Written,
    write,
)
from watermark_assets.exceptions import DeltaCommitError
from watermark_assets.staging import remove_tree, staging_dir

__all__ = [
    "MAX_COMMIT_ATTEMPTS",
    "StagedRead",
    "Stale",
    "commit_reads",
    "execute",
    "staging_dir",
    "write_mode_for",
]

#: How many times a run plans, stages and commits before giving up on a table other runs keep
#: committing to.
MAX_COMMIT_ATTEMPTS = 5

S = TypeVar("S")
R = TypeVar("R")


class Stale(Exception):
    """The commit was stale (another writer committed one of its txns, or the snapshot it was
    planned on moved): nothing was committed, nothing may be saved; plan and stage again."""

    def __init__(self, outcome: CommitOutcome) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome


@dataclass(frozen=True)
class StagedRead:
    """One read of a run, staged and not committed yet: its plan, its staging token and files,
    their schema (for a read of no row, the zero-row Parquet file's; None: unknown), whether it
    read rows, and the region a replace replaces for it (None: a read above its watermark that
    read no row, nothing to replace: the commit appends)."""

    plan: RunPlan
    token: str
    files: tuple[str, ...]
    schema: pa.Schema | None
    has_rows: bool
    region: Region | None


def write_mode_for(mode: WriteMode, regions: Sequence[Region | None]) -> WriteMode:
    """The commit's write mode: ``mode`` (the plans'), a replace of each read's region (the
    range read, :meth:`Replace.read_range`, is known now that the rows are staged; no region:
    the read found no row above its watermark, an append of nothing)."""
    if not isinstance(mode, Replace):
        return mode
    if any(region is None for region in regions):
        return Append()
    return mode.of([region for region in regions if region is not None])


def commit_reads(
    committer: DeltaCommitter,
    reads: Sequence[StagedRead],
    *,
    entries: Mapping[str, str],
    lineage: Callable[[RewritePlan | None], Mapping[str, str]],
    partition_by: Sequence[str],
    now: Clock,
    evolution: SchemaEvolution,
) -> Written:
    """The ONE commit of ``reads`` (module docstring), or nothing to commit
    (``written.outcome.version`` None); raises :class:`Stale` on a stale outcome. Every read
    has the same write mode (``reads[0].plan.mode``), its region aside."""
    uri = committer.table_uri
    with_rows = [read for read in reads if read.has_rows]
    schema = next((read.schema for read in (*with_rows, *reads) if read.schema is not None), None)
    written = write(
        committer,
        [StagedFiles(read.token, staging_dir(uri, read.token), read.files) for read in reads],
        write_mode_for(reads[0].plan.mode, [read.region for read in reads]),
        RunRecord(
            tuple(txn for read in reads for txn in read.plan.record.txns),
            entries,
            lineage,
            records_completion=all(read.plan.record.records_completion for read in reads),
        ),
        schema=schema,
        partition_by=partition_by,
        now=now,
        add_columns=evolution.add_columns,
        widen=evolution.widen,
        schema_origin=evolution.origin,
    )
    if written.outcome.stale:
        raise Stale(written.outcome)
    return written


def execute(
    staged: S,
    attempt: Callable[[S, int], R],
    *,
    stage_again: Callable[[S, Stale], S],
    staging: Callable[[S], Iterable[str]],
    table_uri: str,
    pipeline: str,
    contention: str | None = None,
) -> R:
    """Commit ``staged`` (module docstring): ``attempt(staged, number)`` returns the run's
    result or raises :class:`Stale`; ``staging(staged)``: the folders removed after each
    attempt; ``stage_again(staged, stale)``: the run planned and staged again (it may raise
    ``stale`` when it cannot read again; a run that decides again from the log alone returns
    ``staged`` as it is); ``contention``: why the run gives up, in the error (default: other
    runs of ``pipeline`` kept committing)."""
    for number in range(1, MAX_COMMIT_ATTEMPTS + 1):
        try:
            return attempt(staged, number)
        except Stale as stale:
            last = stale
        finally:
            for folder in staging(staged):
                remove_tree(folder)
        # Another run committed since the plan: its rows may be ours too.
        staged = stage_again(staged, last)
    why = contention or f"other runs of {pipeline!r} kept committing"
    raise DeltaCommitError(
        f"gave up committing to {table_uri!r} after {MAX_COMMIT_ATTEMPTS} attempts: "
        f"{why}. Nothing was committed by this run; run it again",
        table_uri=table_uri,
    )
