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
from watermark_assets.delta.committer import CommitOutcome, TxnVersion, committer_for
from watermark_assets.delta.replace import commit_replace, plan_replace
from watermark_assets.delta.schema_change import SchemaEvolution
from watermark_assets.runs.file_commit import (
    Attempt,
    BatchResult,
    CommitDecision,
    Placement,
    _commit_metadata,
    commit_attempts,
)
from watermark_assets.runs.file_stage import StagedBatch
from watermark_assets.spark.batch import SOURCE_FILE_COLUMN
from watermark_assets.state.commit_metadata import COMMIT_METADATA_KEY, rewrite_app_id
from watermark_assets.state.load import load_state


def commit_rewrite_batch(
    staged: StagedBatch, *, now: datetime, add_columns: bool = False, widen: bool = False
) -> BatchResult:
    """Replace the rows of the plan's one rewritten file (module docstring), then checkpoint.
    ``add_columns`` / ``widen``: as for :func:`~watermark_assets.runs.file_commit.commit_batch`
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
    evolution = SchemaEvolution(add_columns=add_columns, widen=widen, origin=path)

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
        replace_plan = plan_replace(pipeline.table.uri, window, placed.data)
        metadata = replace(
            _commit_metadata(staged, placed, CommitDecision((txn,), (), ())),
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
            evolution=evolution,
        )
        return Attempt(outcome, metadata, (txn,))

    return commit_attempts(
        staged, attempt, now=now, gave_up=f"other writers kept replacing the rows of {path!r}"
    )
