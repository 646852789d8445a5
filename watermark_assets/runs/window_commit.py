"""The ONE commit of a run of time windows (or time x unit cells): every window replaced at once.

A run of several windows (a backfill of a range, a tick re-running the grace windows) stages
each window's rows as before (:func:`~watermark_assets.runs.column.stage_column_batch`, one
staging folder per window), then :func:`commit_windows` replaces all of them in ONE Delta
commit (:func:`~watermark_assets.delta.replace.plan_replace_regions`): a reader sees the table
before the run or after it, never a row twice (its old copy in one window, its new one in
another) or a window emptied before its rows came back. That commit carries:

- the txn of every window (or cell) it replaces, each the version its plan read: a concurrent
  run of any of them makes the commit stale (pinned to the planned snapshot: any commit landing
  since does), and the run plans, reads and stages every window again
  (``engine.execute.MAX_COMMIT_ATTEMPTS`` times at most);
- the state entry (``state_entry``: the time or grid watermark read from the log, advanced by
  every window committed), so data and high watermarks stay one atomic commit;
- ``watermark_assets.column_run`` (what the run read and wrote; the asset checks reconcile it).

With ``table.merge_keys`` (:class:`~watermark_assets.delta.replace.KeyMoves`) the commit also
removes the new rows' keys from the table's other windows (``rows_moved``), keeping the newest
row of each key (``rows_superseded``: new rows left out because a newer one exists).

A SIGKILL anywhere before the commit leaves no commit: the re-run reads every window again (the
staging folders are swept by the next read; a file moved into the table and never committed is
no part of it). A window whose source files were missing (a file download) commits nothing and
keeps its rows and high watermark; the others commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar

from watermark_assets.core.column.watermark import WatermarkOperator
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.time.tick import short_instant
from watermark_assets.delta.committer import committer_for
from watermark_assets.delta.replace import ReplacePlan
from watermark_assets.delta.rewrite import RewritePlan
from watermark_assets.engine.execute import Stale, commit_reads, execute
from watermark_assets.engine.write import Replace, region_json
from watermark_assets.runs.column import (
    RUN_METADATA_KEY,
    ColumnResult,
    StagedColumnBatch,
    nothing_committed,
)
from watermark_assets.staging import staging_dir


@dataclass(frozen=True)
class WindowsCommit:
    """What :func:`commit_windows` did: each window's result (in the order given) and the rows
    of other windows the keys moved out."""

    results: tuple[ColumnResult, ...]
    rows_moved: int = 0


def commit_windows(
    stage: Callable[[], Sequence[StagedColumnBatch]],
    *,
    state_entry: Callable[[Sequence[int]], Mapping[str, str]],
) -> WindowsCommit:
    """Stage every window (``stage()``: each planned and staged, in the run's order) and replace
    them in ONE commit (module docstring); after a stale commit ``stage()`` runs again. Each
    plan's write mode is the replace of its window (with the run's key moves).

    ``state_entry(indexes)``: the commitInfo entry recording the windows at ``indexes`` (those
    that commit), read from the log when called."""
    staged = list(stage())
    if not staged:
        return WindowsCommit(())
    pipeline = staged[0].plan.request.pipeline

    def attempt(staged: list[StagedColumnBatch], attempt: int) -> WindowsCommit:
        return _commit_once(staged, state_entry, attempt)

    def stage_again(earlier: list[StagedColumnBatch], stale: Stale) -> list[StagedColumnBatch]:
        return [_with_earlier(new, old) for new, old in zip(stage(), earlier, strict=True)]

    return execute(
        staged,
        attempt,
        stage_again=stage_again,
        staging=lambda staged: [
            staging_dir(each.plan.request.pipeline.table.uri, each.token) for each in staged
        ],
        table_uri=pipeline.table.uri,
        pipeline=pipeline.name,
    )


def _with_earlier(new: StagedColumnBatch, old: StagedColumnBatch) -> StagedColumnBatch:
    """The records quarantined and the leftovers removed by the earlier attempt stay counted."""
    return replace(
        new,
        rows_quarantined=new.rows_quarantined + old.rows_quarantined,
        leftovers_removed=(*old.leftovers_removed, *new.leftovers_removed),
    )


def _commit_once(
    staged: Sequence[StagedColumnBatch],
    state_entry: Callable[[Sequence[int]], Mapping[str, str]],
    attempt: int,
) -> WindowsCommit:
    """One attempt: the commit's results (:class:`~watermark_assets.engine.execute.Stale`
    raised when it was stale: plan again)."""
    committing = [i for i, s in enumerate(staged) if not s.missing]
    if not committing:
        return WindowsCommit(
            tuple(nothing_committed(s, _missing_reason(s), attempt) for s in staged)
        )
    first = staged[committing[0]]
    request = first.plan.request
    pipeline = request.pipeline
    for i in committing:
        assert staged[i].window is not None, "a window's chunk replaces its window"
    assert isinstance(first.plan.mode, Replace), "a window's chunk replaces its window"
    moves = first.plan.mode.moves

    def lineage(plan: RewritePlan | None) -> dict[str, str]:
        if not isinstance(plan, ReplacePlan):  # only empty windows: their commit creates the table
            return {RUN_METADATA_KEY: _run_record(staged, committing, 0, 0, 0)}
        record = _run_record(
            staged,
            committing,
            plan.rows_removed,
            plan.rows_kept_by_rewrite,
            plan.rows_superseded,
            rows_moved=plan.rows_moved if moves else None,
        )
        return {RUN_METADATA_KEY: record}

    written = commit_reads(
        committer_for(pipeline.table, now=request.clock),
        [staged[i].staged_read for i in committing],
        entries=state_entry(committing),
        lineage=lineage,
        partition_by=pipeline.table.partition_by,
        now=request.clock,
        evolution=first.evolution,  # the pipeline's schema.mode: the same for every window
    )
    outcome = written.outcome
    if outcome.version is None:  # no row read and no table yet
        return WindowsCommit(tuple(nothing_committed(s, outcome.reason, attempt) for s in staged))
    index = {i: n for n, i in enumerate(committing)}
    removed = written.rows_removed_by_region
    results = tuple(
        nothing_committed(s, _missing_reason(s), attempt)
        if i not in index
        else ColumnResult(
            staged=s,
            outcome=outcome,
            rows_committed=written.rows_added(index[i]),
            rows_removed=removed[index[i]],
            window=s.window,
            watermark_after=s.plan.watermark_before,
            attempts=attempt,
        )
        for i, s in enumerate(staged)
    )
    return WindowsCommit(results, written.rows_moved)


def _missing_reason(staged: StagedColumnBatch) -> str:
    missing = staged.missing
    return (
        f"{len(missing)} source file(s) missing ({missing[0] if missing else ''}"
        f"{', ...' if len(missing) > 1 else ''}): nothing committed; the window keeps its rows "
        "and high watermark"
    )


def _run_record(
    staged: Sequence[StagedColumnBatch],
    committing: Sequence[int],
    removed: int,
    kept: int,
    superseded: int,
    *,
    rows_moved: int | None = None,
) -> str:
    """The ``watermark_assets.column_run`` entry of the windows' commit: the commit adds
    ``rows_read - rows_deduplicated + rows_kept_by_rewrite`` rows (the asset checks reconcile
    it); ``rows_deduplicated``: new rows a newer row of their key superseded."""
    windows = [staged[i] for i in committing]
    last = windows[-1]
    return json.dumps(
        {
            "pipeline": last.plan.request.pipeline.name,
            "run_id": last.plan.request.run_id,
            "watermark_before": windows[0].plan.watermark_before.to_json(),
            "watermark_after": last.watermark_after.to_json(),
            "operator": WatermarkOperator.GREATER_OR_EQUAL.value,
            "predicate": " OR ".join(f"({s.plan.predicate_text})" for s in windows),
            "rows_read": sum(s.rows_read for s in windows),
            "window": [None if s.window is None else region_json(s.window) for s in windows],
            "rows_removed": removed,
            "rows_kept_by_rewrite": kept,
            "rows_deduplicated": superseded,
            "rows_quarantined": sum(s.rows_quarantined for s in windows),
            **({} if rows_moved is None else {"rows_moved": rows_moved}),
        }
    )


@dataclass(frozen=True)
class WindowRun:
    """One window of a run: what it read and committed."""

    window: TimeWindow
    result: ColumnResult

    @property
    def committed(self) -> bool:
        return self.result.outcome.version is not None

    def line(self) -> str:
        """One log line."""
        result, outcome = self.result, self.result.outcome
        version = "" if outcome.version is None else f" as Delta version {outcome.version}"
        counts = [f"{result.staged.rows_read} rows read", f"{result.rows_committed} committed"]
        if result.rows_removed:
            counts.append(f"{result.rows_removed} rows removed from the window")
        return (
            f"window [{short_instant(self.window.start)}, {short_instant(self.window.end)}): "
            f"{', '.join(counts)}{version} ({outcome.reason})"
        )


@dataclass(frozen=True)
class WindowRunTotals:
    """The windows (or cells) of a run, in order, and what they add up to."""

    windows: tuple[WindowRun, ...]

    #: rows of other windows removed because a row of their key was read (``merge_keys``)
    rows_moved: int = 0

    @property
    def versions(self) -> list[int]:
        """The commits of the run (one: every window is replaced at once)."""
        return sorted(
            {w.result.outcome.version for w in self.windows if w.result.outcome.version is not None}
        )

    @property
    def rows_read(self) -> int:
        return sum(w.result.staged.rows_read for w in self.windows)

    @property
    def rows_committed(self) -> int:
        return sum(w.result.rows_committed for w in self.windows)

    @property
    def rows_removed(self) -> int:
        return sum(w.result.rows_removed for w in self.windows)


W = TypeVar("W")


@dataclass(frozen=True, kw_only=True)
class WindowsRunResult(WindowRunTotals, Generic[W]):
    """A run's windows (or cells) in order, and its pipeline's watermark ``W`` (a time
    pipeline's, a time x unit grid's) before and after it."""

    pipeline: str
    watermark_before: W
    watermark_after: W


R = TypeVar("R", bound=WindowsRunResult[Any], covariant=True)
M = TypeVar("M", contravariant=True)


class RunResultType(Protocol[M, R]):
    """A :class:`WindowsRunResult` class whose watermark is ``M`` (its constructor)."""

    def __call__(
        self,
        windows: tuple[WindowRun, ...],
        /,
        *,
        rows_moved: int,
        pipeline: str,
        watermark_before: M,
        watermark_after: M,
    ) -> R: ...


def finished_run(
    result: RunResultType[W, R],
    runs: Sequence[WindowRun],
    committed: WindowsCommit,
    *,
    pipeline: str,
    watermark_before: W,
    watermark_after: W,
    others: str,
    log: Callable[[str], None],
) -> R:
    """The end of a run of windows (``others``: what they are, ``windows`` or ``cells``): each
    one's line and the rows of other ``others`` its keys moved logged, the watermark before and
    after (read back after the commit), the ``result`` with its totals."""
    for run in runs:
        log(f"{pipeline}: {run.line()}")
    if committed.rows_moved:
        log(f"{pipeline}: {committed.rows_moved} row(s) of other {others} moved (merge keys)")
    return result(
        tuple(runs),
        rows_moved=committed.rows_moved,
        pipeline=pipeline,
        watermark_before=watermark_before,
        watermark_after=watermark_after,
    )
