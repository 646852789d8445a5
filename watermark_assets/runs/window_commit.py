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
  (``MAX_COMMIT_ATTEMPTS`` times at most);
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
from datetime import datetime

import pyarrow as pa

from watermark_assets import storage
from watermark_assets.core.column.watermark import WatermarkOperator
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.delta.replace import KeyMoves, commit_replace, plan_replace_regions
from watermark_assets.delta.stats import DataFile, describe_data_files
from watermark_assets.exceptions import DeltaCommitError
from watermark_assets.runs.column import (
    RUN_METADATA_KEY,
    ColumnResult,
    StagedColumnBatch,
    _nothing_committed,
    region_json,
)
from watermark_assets.runs.faults import crash_point
from watermark_assets.runs.file_commit import MAX_COMMIT_ATTEMPTS
from watermark_assets.staging import STAGING_DIR, move_into_table, remove_tree


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
    moves: KeyMoves | None,
    now: datetime,
) -> WindowsCommit:
    """Stage every window (``stage()``: each planned and staged, in the run's order) and replace
    them in ONE commit (module docstring); after a stale commit ``stage()`` runs again.

    ``state_entry(indexes)``: the commitInfo entry recording the windows at ``indexes`` (those
    that commit), read from the log when called."""
    staged = list(stage())
    if not staged:
        return WindowsCommit(())
    for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
        try:
            done = _commit_once(staged, state_entry, moves, attempt)
        finally:
            for each in staged:
                uri = each.plan.request.pipeline.table.uri
                remove_tree(storage.join(uri, f"{STAGING_DIR}/{each.token}"))
        if done is not None:
            return done
        # Another run committed since the plans: its rows may be in our windows too.
        earlier = staged
        staged = list(stage())
        staged = [_with_earlier(new, old) for new, old in zip(staged, earlier, strict=True)]
    pipeline = staged[0].plan.request.pipeline
    raise DeltaCommitError(
        f"gave up committing to {pipeline.table.uri!r} after {MAX_COMMIT_ATTEMPTS} attempts: "
        f"other runs of {pipeline.name!r} kept committing. Nothing was committed by this run; "
        "run it again",
        table_uri=pipeline.table.uri,
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
    moves: KeyMoves | None,
    attempt: int,
) -> WindowsCommit | None:
    """One attempt: the commit's results, or None when it was stale (plan again)."""
    committing = [i for i, s in enumerate(staged) if not s.missing]
    if not committing:
        return WindowsCommit(
            tuple(_nothing_committed(s, _missing_reason(s), attempt) for s in staged)
        )
    first = staged[committing[0]]
    request = first.plan.request
    pipeline = request.pipeline
    uri, partition_by = pipeline.table.uri, pipeline.table.partition_by
    committer = DeltaCommitter(uri, now=request.clock)
    exists = committer.current_version() is not None
    with_rows = [i for i in committing if staged[i].rows_read]
    empty_schema = next(
        (staged[i].data_schema for i in committing if staged[i].data_schema is not None), None
    )
    if not exists and not with_rows and empty_schema is None:
        reason = "no row read and no table yet: nothing to remove or record, nothing to commit"
        return WindowsCommit(tuple(_nothing_committed(s, reason, attempt) for s in staged))
    moved: dict[int, list[DataFile]] = {}
    try:
        for i in committing:
            each = staged[i]
            data_dir = storage.join(uri, f"{STAGING_DIR}/{each.token}")
            paths = move_into_table(each.data_files, data_dir, uri, each.token)
            moved[i] = describe_data_files(uri, paths, partition_by)
        schema = (
            staged[with_rows[0]].data_schema
            if with_rows
            else (pa.schema([]) if exists else empty_schema)
        )
        assert schema is not None
        custom = dict(state_entry(committing))
        txns = [t for i in committing for t in (staged[i].plan.txn, *staged[i].plan.extra_txns)]
        crash_point("before_windows_commit")
        if not exists and not with_rows:  # only empty windows: their commit creates the table
            custom[RUN_METADATA_KEY] = _run_record(staged, committing, 0, 0, 0)
            outcome = committer.commit(
                (),
                schema=schema,
                partition_by=partition_by,
                txns=txns,
                custom_metadata=custom,
                read_version=-1,
            )
            by_region: tuple[int, ...] = (0,) * len(committing)
            added = {i: 0 for i in committing}
            rows_moved = 0
        else:
            parts = []
            for i in committing:
                region = staged[i].window
                assert region is not None, "a window's chunk replaces its window"
                parts.append((region, moved[i]))
            plan = plan_replace_regions(uri, parts, moves=moves)
            custom[RUN_METADATA_KEY] = _run_record(
                staged,
                committing,
                plan.rows_removed,
                plan.rows_kept_by_rewrite,
                plan.rows_superseded,
                rows_moved=plan.rows_moved if moves else None,
            )
            outcome = commit_replace(
                committer,
                plan,
                schema=schema,
                partition_by=partition_by,
                txns=txns,
                custom_metadata=custom,
                now=request.clock,
            )
            by_region = plan.rows_removed_by_region
            remainders = {d.removed.path: d.remainder for d in plan.superseded_files}
            added = {i: sum(_rows_added(f, remainders) for f in moved[i]) for i in committing}
            rows_moved = plan.rows_moved
    except BaseException:
        _remove_moved(uri, moved)
        raise
    if outcome.stale:
        _remove_moved(uri, moved)
        return None
    crash_point("after_commit")
    removed = dict(zip(committing, by_region, strict=True))
    results = tuple(
        _nothing_committed(s, _missing_reason(s), attempt)
        if i not in moved
        else ColumnResult(
            staged=s,
            outcome=outcome,
            rows_committed=added[i],
            rows_removed=removed[i],
            window=s.window,
            watermark_after=s.plan.watermark_before,
            attempts=attempt,
        )
        for i, s in enumerate(staged)
    )
    return WindowsCommit(results, rows_moved)


def _rows_added(file: DataFile, remainders: Mapping[str, DataFile | None]) -> int:
    """The rows a new file adds: all, or its remainder's once superseded rows left it."""
    if file.path not in remainders:
        return file.num_records
    remainder = remainders[file.path]
    return 0 if remainder is None else remainder.num_records


def _remove_moved(uri: str, moved: Mapping[int, Sequence[DataFile]]) -> None:
    """Files moved into the table and never committed: no part of it."""
    fs, root = storage.filesystem(uri)
    for files in moved.values():
        for file in files:
            if fs.exists(f"{root}/{file.path}"):
                fs.rm(f"{root}/{file.path}")


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
