"""Replay a range of a column pipeline in chunks (seed 001, "Replay watermark behaviour").

``[start, end)`` of the leading watermark column is cut into closed-open chunks
(:func:`~watermark_assets.core.column.replay.split_range`); each chunk is one run of the column
pipeline's pieces (:mod:`watermark_assets.runs.column`): read with
:data:`~watermark_assets.core.column.watermark.GreaterOrEqual` on its lower bound and ``<`` its
upper bound, staged, and committed in ONE Delta commit (appended, or with
``destination.replace_by_watermark`` replacing the window ``[lower, upper)``). A row sitting
exactly on a bound belongs to the chunk that starts there: read once, never twice, never lost.

``save_watermark`` (seed's table):

=================  ===================================================================
False (default)    the production watermark is never touched: the commits carry no
                   watermark of the pipeline and its provider saves nothing; a re-run
                   replays every chunk
True               each chunk's upper bound is saved in its own commit (the entry of the
                   replay's dataflow id :func:`replay_dataflow_id`, next to the chunk's txn
                   :func:`replay_app_id`): exactly once with the data. A re-run skips the
                   chunks the saved bound covers (``chunks_to_run``) and any chunk whose txn
                   is in the log (crash-resume)
=================  ===================================================================

The production watermark with ``save_watermark: true``: a replay into the pipeline's own table
also advances it (to the greatest row read, never backwards) when it already stands at or above
the replay's start, so every row between it and the new value was read by this replay; otherwise
(empty, below the start, or another target table) it is left alone: advancing it would skip the
rows before the range.

Where the work is recorded: the target table's log. Each chunk commit carries the txn
``watermark_assets/{pipeline}/replay/{lower}..{upper}`` (version 1, 2, ... per replay of that
chunk: a concurrent replay of the same chunk makes the commit stale and it plans again) and the
``watermark_assets.replay`` entry (the range, the chunk, ``save_watermark``, rows).

A chunk that reads no row (:func:`~watermark_assets.runs.column.commit_column_batch`): with
``replace_by_watermark`` it still replaces its window when the table holds rows there (they were
deleted or corrected away at the source: ONE commit of remove actions and rewritten remainders
of straddling files, no new file, with the chunk's txns and metadata); with ``save_watermark:
true`` it records its completion (its txn and upper bound, in that same commit or in one of its
own) and a re-run skips it. Otherwise it commits nothing (no empty commits in the log) and a
re-run reads it again. With no table yet, a chunk that records its completion creates the table
in that commit (the schema of the zero-row Parquet file Spark wrote, no data file); any other
empty chunk commits nothing.

Crash point: ``after_chunk_commit:N`` (``runs.faults.crash_point``) once chunk N (1-based)
committed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING

from watermark_assets import names
from watermark_assets.config import ColumnPipelineConfig
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.column.lookback import ReadBound
from watermark_assets.core.column.replay import (
    ReplayChunk,
    ReplayRange,
    chunks_to_run,
    watermark_to_save,
)
from watermark_assets.core.column.watermark import ColumnWatermark, GreaterOrEqual
from watermark_assets.core.replace_window import Interval, ReplaceWindow
from watermark_assets.core.text import value_text
from watermark_assets.delta.committer import TxnVersion, committer_for
from watermark_assets.engine.plan import (
    PipelineWatermark,
    PlannedOn,
    PlannedRun,
    ReadSlice,
    RecordPlan,
)
from watermark_assets.engine.write import Replace, WriteMode
from watermark_assets.providers.delta_metadata import DeltaMetadataProvider, commit_metadata_entry
from watermark_assets.runs.column import (
    ColumnPlan,
    ColumnResult,
    ColumnRunRequest,
    commit_column_batch,
    load_watermark,
    stage_column_batch,
    txn_app_id,
    watermark_manager,
    write_mode_of,
)
from watermark_assets.runs.column_spec import ColumnSpec
from watermark_assets.runs.faults import crash_point

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The commitInfo entry of every replay chunk commit (JSON text).
REPLAY_METADATA_KEY = names.REPLAY_KEY


#: The txn app id of one chunk: its commit is in the log exactly when this txn is.
replay_app_id = names.replay_app_id


def replay_dataflow_id(pipeline_name: str, replay: ReplayRange) -> str:
    """The dataflow id under which ``save_watermark: true`` saves the chunks' upper bounds (one
    per range, so replaying another range never skips chunks because of this one)."""
    return names.replay_dataflow_id(pipeline_name, replay.start, replay.end)


def _text(value: object) -> str:
    return value.isoformat() if isinstance(value, (datetime, date)) else str(value)


def replay_chunks(pipeline: ColumnPipelineConfig, replay: ReplayRange) -> list[ReplayChunk]:
    """The chunks of ``replay``'s range over the pipeline's leading watermark column."""
    return replay.chunks(pipeline.watermark.columns[0])


def stored_replay_watermark(
    table_uri: str, dataflow_id: str, pipeline: str
) -> ColumnWatermark | None:
    """The greatest chunk upper bound a ``save_watermark: true`` replay saved, or None."""
    text = DeltaMetadataProvider(table_uri, pipeline=pipeline).get_watermark(dataflow_id)
    return None if text is None else ColumnWatermark.from_json(text)


def committed_upper_bound(
    pipeline: ColumnPipelineConfig, replay: ReplayRange
) -> ColumnWatermark | None:
    """The greatest upper bound of the replay's chunks whose txn is in the table (a Delta
    checkpoint keeps them): what ``repair-state`` recovers when the saved bound's commits are
    gone from the log."""
    chunks = replay_chunks(pipeline, replay)
    table = ColumnSpec.replaying(pipeline, replay).table.uri
    versions = committer_for(table).transaction_versions(
        [replay_app_id(pipeline.name, c) for c in chunks]
    )
    done = [c.upper for c in chunks if versions[replay_app_id(pipeline.name, c)]]
    return done[-1] if done else None  # chunks are in order


@dataclass(frozen=True)
class ChunkRun:
    """One chunk of a replay: skipped (completed before) or run (its result)."""

    number: int
    chunk: ReplayChunk
    result: ColumnResult | None
    skipped_because: str | None = None

    def line(self) -> str:
        """One log line."""
        head = f"chunk {self.number} {self.chunk.key}"
        if self.result is None:
            return f"{head}: skipped ({self.skipped_because})"
        result = self.result
        outcome = result.outcome
        version = "" if outcome.version is None else f" as Delta version {outcome.version}"
        counts = [f"{result.staged.rows_read} rows read"]
        if result.staged.rows_read:
            counts.append(f"{result.rows_committed} committed")
        if result.rows_removed:
            counts.append(f"{result.rows_removed} rows removed from the window")
        return f"{head}: {', '.join(counts)}{version} ({outcome.reason})"


@dataclass(frozen=True)
class ReplayResult:
    """A whole replay: its chunks in order, and the production watermark around it."""

    pipeline: str
    target_table: str
    chunks: tuple[ChunkRun, ...]
    production_before: ColumnWatermark
    production_after: ColumnWatermark

    @property
    def skipped(self) -> list[int]:
        return [c.number for c in self.chunks if c.result is None]

    @property
    def results(self) -> list[ColumnResult]:
        """The chunks that ran, in order."""
        return [c.result for c in self.chunks if c.result is not None]

    @property
    def versions(self) -> list[int]:
        """The Delta versions the chunks committed."""
        return [r.outcome.version for r in self.results if r.outcome.version is not None]


def run_replay(
    pipeline: ColumnPipelineConfig,
    replay: ReplayRange,
    spark: SparkSession,
    *,
    run_id: str,
    clock: Clock = system_clock,
    log: Callable[[str], None] = print,
) -> ReplayResult:
    """Replay ``replay``'s range chunk by chunk (module docstring); returns what each chunk did.
    The chunks are ``replay``'s (:meth:`~watermark_assets.core.column.replay.ReplayRange.
    chunks`): the configuration's chunk size, or a run's time partitions."""
    pipeline.replay_problem(replay)
    target = ColumnSpec.replaying(pipeline, replay)
    own = pipeline.replays_own_table(replay)
    table = target.table.uri
    chunks = replay_chunks(pipeline, replay)
    dataflow = replay_dataflow_id(pipeline.name, replay)
    spec = ColumnSpec.of(pipeline)
    manager = watermark_manager(spec)
    production_before, _ = load_watermark(spec, manager)
    skipped = skipped_chunks(pipeline, replay, chunks)
    request = ColumnRunRequest(pipeline=target, run_id=run_id, job_name="replay", clock=clock)
    runs: list[ChunkRun] = []
    log(
        f"{pipeline.name}: replaying [{_text(replay.start)}, {_text(replay.end)}) in "
        f"{len(chunks)} chunks into {table} (save_watermark: {replay.save_watermark})"
    )
    for number, chunk in enumerate(chunks, 1):
        if chunk in skipped:
            runs.append(ChunkRun(number, chunk, None, skipped[chunk]))
            log(f"  {runs[-1].line()}")
            continue
        now = clock()

        def plan(chunk: ReplayChunk = chunk) -> ColumnPlan:
            return plan_chunk(request, replay, chunk, own=own)

        staged = stage_column_batch(plan(), spark, now=now)
        result = commit_column_batch(staged, now=now, replan=plan)
        runs.append(ChunkRun(number, chunk, result))
        log(f"  {runs[-1].line()}")
        crash_point(f"after_chunk_commit:{number}")
    if replay.save_watermark:  # its state snapshot holds the chunks committed now
        stored_replay_watermark(table, dataflow, pipeline.name)
    production_after, _ = load_watermark(spec, manager)
    return ReplayResult(pipeline.name, table, tuple(runs), production_before, production_after)


def skipped_chunks(
    pipeline: ColumnPipelineConfig, replay: ReplayRange, chunks: Sequence[ReplayChunk]
) -> dict[ReplayChunk, str]:
    """The chunks a ``save_watermark: true`` replay leaves out, each with why: the saved replay
    watermark covers it, or its txn is in the log (a replay that saves nothing runs them all)."""
    if not replay.save_watermark:
        return {}
    table = ColumnSpec.replaying(pipeline, replay).table.uri
    dataflow = replay_dataflow_id(pipeline.name, replay)
    stored = stored_replay_watermark(table, dataflow, pipeline.name)
    to_run = set(chunks_to_run(chunks, stored, save_watermark=True))
    app_ids = {c: replay_app_id(pipeline.name, c) for c in chunks}
    versions = committer_for(table).transaction_versions(list(app_ids.values()))
    skipped: dict[ReplayChunk, str] = {}
    for chunk in chunks:
        if chunk not in to_run:
            skipped[chunk] = "the saved replay watermark covers its upper bound"
        elif versions[app_ids[chunk]]:
            skipped[chunk] = f"its txn {app_ids[chunk]} is in the log"
    return skipped


def plan_replay(
    pipeline: ColumnPipelineConfig, replay: ReplayRange, keys: Sequence[str]
) -> list[PlannedRun]:
    """What a replay would do chunk by chunk (``watermark-assets plan``; ``keys``: each chunk's
    partition key, in the chunks' order), nothing saved (a provider behind the log neither)."""
    pipeline.replay_problem(replay)
    chunks = replay_chunks(pipeline, replay)
    skipped = skipped_chunks(pipeline, replay, chunks)
    request = ColumnRunRequest(
        pipeline=ColumnSpec.replaying(pipeline, replay), run_id="plan", job_name="replay"
    )
    own = pipeline.replays_own_table(replay)
    planned: list[PlannedRun] = []
    for key, chunk in zip(keys, chunks, strict=True):
        lower, upper = (value_text(bound.values[0]) for bound in (chunk.lower, chunk.upper))
        where = f"chunk {chunk.lower.columns[0]} in [{lower}, {upper})"
        if chunk in skipped:
            planned.append(PlannedRun(key, where, "nothing", "nothing", (skipped[chunk],)))
            continue
        plan = plan_chunk(request, replay, chunk, own=own, repair=False)
        saves = "saves" if plan.record.saves_watermark else "leaves"
        planned.append(
            plan.planned(key, where, f"the commit {saves} the pipeline's column watermark")
        )
    return planned


def plan_chunk(
    request: ColumnRunRequest,
    replay: ReplayRange,
    chunk: ReplayChunk,
    *,
    own: bool,
    repair: bool = True,
) -> ColumnPlan:
    """The plan of one chunk: txns read first (the optimistic lock), then the watermarks.

    The chunk's txn always; with ``own``, the pipeline's txn too (a normal run committing
    meanwhile makes this commit stale, and the other way round). The plan saves the pipeline's
    watermark only when :func:`advances_production` says so.
    """
    pipeline = request.pipeline
    committer = committer_for(pipeline.table)
    chunk_app = replay_app_id(pipeline.name, chunk)
    app_ids = [chunk_app, txn_app_id(pipeline.name)] if own else [chunk_app]
    versions = committer.transaction_versions(app_ids)
    txns = [TxnVersion.next_of(app_id, versions[app_id]) for app_id in app_ids]
    manager = watermark_manager(pipeline)
    production, _ = load_watermark(pipeline, manager, repair=repair)
    saves = own and advances_production(production, replay)
    metadata = {
        REPLAY_METADATA_KEY: json.dumps(
            {
                "range": [_text(replay.start), _text(replay.end)],
                "chunk": [chunk.lower.to_json(), chunk.upper.to_json()],
                "save_watermark": replay.save_watermark,
                "advances_production_watermark": saves,
            }
        )
    }
    saved = watermark_to_save(chunk, save_watermark=replay.save_watermark)
    if saved is not None:
        dataflow = replay_dataflow_id(pipeline.name, replay)
        stored = stored_replay_watermark(pipeline.table.uri, dataflow, pipeline.name)
        value = saved if stored is None else stored.merge(saved)
        metadata |= commit_metadata_entry(
            dataflow, value.to_json(), job_id="replay", dataflow_run_id=request.run_id
        )
    return ColumnPlan(
        request=request,
        read=ReadSlice(ReadBound(chunk.lower, GreaterOrEqual), upper=chunk.upper),
        mode=chunk_write_mode(pipeline, chunk),
        record=RecordPlan(
            tuple(txns),
            metadata,
            PipelineWatermark.ADVANCED if saves else PipelineWatermark.UNTOUCHED,
            records_completion=replay.save_watermark,
        ),
        planned_on=PlannedOn(ColumnWatermark.empty(pipeline.columns), manager.provider.name),
    )


def chunk_write_mode(pipeline: ColumnSpec, chunk: ReplayChunk) -> WriteMode:
    """The pipeline's write mode (:func:`~watermark_assets.runs.column.write_mode_of`); a
    replace replaces the chunk's whole closed-open range ``[lower, upper)``, also when it reads
    no row (its rows in the table were deleted or corrected away at the source)."""
    mode = write_mode_of(pipeline)
    if not isinstance(mode, Replace):
        return mode
    column = pipeline.columns[0]
    lower, upper = chunk.lower.values[0], chunk.upper.values[0]
    return mode.of((ReplaceWindow(column, lower, upper, Interval.CLOSED_OPEN),))  # type: ignore[arg-type]


def advances_production(production: ColumnWatermark, replay: ReplayRange) -> bool:
    """Whether a ``save_watermark: true`` chunk may advance the production watermark: only when
    it stands at or above the replay's start (every row between it and the greatest row the
    replay read was read by the replay). Empty or below the start: advancing would skip rows."""
    if not replay.save_watermark or production.is_empty:
        return False
    leading = ColumnWatermark(production.columns[:1], production.values[:1])
    start = ColumnWatermark(production.columns[:1], (replay.start,))
    return leading.covers(start)
