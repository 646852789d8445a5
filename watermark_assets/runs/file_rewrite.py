"""Commit a rewrite run (``on_rewrite: replace``): the rows of ONE landing file rewritten in place
are replaced by its new rows in ONE Delta commit, exactly once.

The rows carry their landing file (``_source_file``), so the old rows are those of the window
``[path, path]`` on that column, which :mod:`watermark_assets.delta.replace` removes (whole files
or rewritten remainders) in the same commit that adds the new rows. The commit carries the txn
``watermark_assets/{pipeline}/rewrite/{path}`` at its next version (a concurrent replace of the
same file makes it stale) and records the new content signature of the file. Before each attempt
the decision is taken again from the log: when the signature recorded last for the file is the
one this run read (a retry after a crash between the commit and the checkpoint, or another run),
the content is in the table already and nothing is committed.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pyarrow as pa

from watermark_assets.core.replace_window import Interval, ReplaceWindow
from watermark_assets.delta.committer import CommitOutcome, DeltaCommitter, TxnVersion
from watermark_assets.delta.replace import commit_replace, plan_replace
from watermark_assets.exceptions import DeltaCommitError
from watermark_assets.runs.faults import crash_point
from watermark_assets.runs.file_commit import (
    MAX_COMMIT_ATTEMPTS,
    BatchResult,
    CommitDecision,
    _commit_metadata,
    _place,
    _Placed,
    _remove_placed,
)
from watermark_assets.runs.file_stage import StagedBatch
from watermark_assets.spark.batch import SOURCE_FILE_COLUMN
from watermark_assets.staging import remove_tree
from watermark_assets.state.checkpoint import save_checkpoint
from watermark_assets.state.commit_metadata import COMMIT_METADATA_KEY, rewrite_app_id
from watermark_assets.state.load import load_state
from watermark_assets.state.quarantine import complete_quarantine


def commit_rewrite_batch(staged: StagedBatch, *, now: datetime) -> BatchResult:
    """Replace the rows of the plan's one rewritten file (module docstring), then checkpoint."""
    plan = staged.plan
    pipeline = plan.request.pipeline
    if not plan.files:
        state = load_state(pipeline, now=now)
        reason = "the file's content is the one last committed: nothing to replace"
        return BatchResult(staged, CommitOutcome(None, True, reason), (), 0, state, False)
    [path] = plan.files
    app_id = rewrite_app_id(pipeline.name, path)
    committer = DeltaCommitter(pipeline.table.uri)
    placed: _Placed | None = None
    window = ReplaceWindow(SOURCE_FILE_COLUMN, path, path, Interval.CLOSED_CLOSED)
    try:
        for _ in range(MAX_COMMIT_ATTEMPTS):
            # the txn version first: a replace committed after this read makes ours stale
            txn = TxnVersion.next_of(app_id, committer.transaction_versions([app_id])[app_id])
            state = load_state(pipeline, now=now)
            if state.file_signatures.get(path) == plan.signatures[path]:
                if placed is not None:
                    _remove_placed(pipeline, placed)
                reason = (
                    f"{path!r} was replaced by its content of signature "
                    f"{plan.signatures[path]!r} already: nothing to commit"
                )
                return BatchResult(staged, CommitOutcome(None, True, reason), (), 0, state, False)
            if placed is None:
                placed = _place(staged, pipeline)
            replace_plan = plan_replace(pipeline.table.uri, window, placed.data)
            decision = CommitDecision((txn,), (), ())
            metadata = replace(
                _commit_metadata(staged, placed, decision),
                rows_replaced=replace_plan.rows_removed,
                new_partitions=(),
            )
            outcome = commit_replace(
                committer,
                replace_plan,
                schema=staged.data_schema if staged.data_schema is not None else pa.schema([]),
                partition_by=pipeline.table.partition_by,
                txns=(txn,),
                custom_metadata={COMMIT_METADATA_KEY: metadata.to_json()},
                now=plan.request.clock,
            )
            if not outcome.stale:
                break
        else:
            raise DeltaCommitError(
                f"gave up replacing the rows of {path!r} in {pipeline.table.uri!r} after "
                f"{MAX_COMMIT_ATTEMPTS} attempts: other writers kept committing. Nothing was "
                "committed by this run; run it again",
                table_uri=pipeline.table.uri,
            )
    finally:
        for root in (staged.data_root, staged.quarantine_root):
            if root is not None:
                remove_tree(root)
    crash_point("after_commit")
    state = load_state(pipeline, now=now)
    completed = complete_quarantine(pipeline, state)
    written = save_checkpoint(pipeline, state, now=now, force=True)
    return BatchResult(
        staged,
        outcome,
        tuple(completed),
        metadata.rows_committed,
        state,
        written,
        (txn,),
    )
