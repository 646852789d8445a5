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

from watermark_assets.core.replace_window import Interval, ReplaceWindow
from watermark_assets.delta.committer import CommitOutcome, TxnVersion, committer_for
from watermark_assets.delta.rewrite import RewritePlan
from watermark_assets.engine.write import Replace, write
from watermark_assets.kinds.file_path.commit import (
    Attempt,
    BatchResult,
    CommitDecision,
    Placement,
    _commit_metadata,
    commit_attempts,
    file_record,
)
from watermark_assets.kinds.file_path.stage import StagedBatch
from watermark_assets.spark.batch import SOURCE_FILE_COLUMN
from watermark_assets.state.commit_metadata import CommitMetadata, rewrite_app_id
from watermark_assets.state.load import load_state


def commit_rewrite_batch(
    staged: StagedBatch, *, now: datetime, add_columns: bool = False, widen: bool = False
) -> BatchResult:
    """Replace the rows of the plan's one rewritten file (module docstring), then checkpoint.
    ``add_columns`` / ``widen``: as for
    :func:`~watermark_assets.kinds.file_path.commit.commit_batch`
    (a replace that evolves: the schema commit, then the data commit)."""
    plan = staged.plan
    pipeline = plan.request.pipeline
    if not plan.files:
        state = load_state(pipeline, now=now)
        reason = "the file's content is the one last committed: nothing to replace"
        return BatchResult(staged, CommitOutcome(None, True, reason), (), 0, state, False)
    [path] = plan.files
    app_id = rewrite_app_id(pipeline.name, path)
    committer = committer_for(pipeline.table)
    window = ReplaceWindow(SOURCE_FILE_COLUMN, path, path, Interval.CLOSED_CLOSED)

    def attempt(placement: Placement) -> Attempt | BatchResult:
        # the txn version first: a replace committed after this read makes ours stale
        txn = TxnVersion.next_of(app_id, committer.transaction_versions([app_id])[app_id])
        state = load_state(pipeline, now=now)
        if state.file_signatures.get(path) == plan.signatures[path]:
            reason = (
                f"{path!r} was replaced by its content of signature "
                f"{plan.signatures[path]!r} already: nothing to commit"
            )
            return BatchResult(staged, CommitOutcome(None, True, reason), (), 0, state, False)
        placed = placement.placed()
        recorded = _commit_metadata(staged, placed, CommitDecision((txn,), (), ()))

        def metadata_of(replaced: RewritePlan | None) -> CommitMetadata:
            removed = 0 if replaced is None else replaced.rows_removed
            return replace(recorded, rows_replaced=removed, new_partitions=())

        written = write(
            committer,
            (),
            Replace((window,)),
            file_record((txn,), metadata_of),
            schema=staged.data_schema,
            partition_by=pipeline.table.partition_by,
            now=plan.request.clock,
            add_columns=add_columns,
            widen=widen,
            schema_origin=path,
            placed=(placed.data,),
        )
        return Attempt(written.outcome, metadata_of(written.plan), (txn,))

    return commit_attempts(
        staged, attempt, now=now, gave_up=f"other writers kept replacing the rows of {path!r}"
    )
