"""A data commit's quarantine, made exactly once: a data commit names its quarantine files, and a
reader that finds the quarantine commit missing (a kill between the two) completes it.

This module only reads where the quarantine stands; the quarantine commit itself is a run's
(``kinds/file_path/commit.complete_quarantine``, through ``engine.write.write``: the engine sits
above the state, which never imports it). :func:`save_checkpoint
<watermark_assets.state.checkpoint.save_checkpoint>` refuses a state whose quarantine is not
complete (:func:`incomplete_quarantine`), so the checkpoint's promise holds whoever writes it.
"""

from __future__ import annotations

from watermark_assets.config import Pipeline
from watermark_assets.delta.committer import committer_for
from watermark_assets.state.commit_metadata import quarantine_app_id
from watermark_assets.state.load import PipelineState


def quarantine_completed_through(pipeline: Pipeline) -> int | None:
    """The last data version whose quarantine is in the quarantine table (the txn of
    :func:`quarantine_app_id` there); None: none is."""
    return committer_for(pipeline.table.quarantine).transaction_version(
        quarantine_app_id(pipeline.name)
    )


def incomplete_quarantine(pipeline: Pipeline, state: PipelineState) -> tuple[int, ...]:
    """The data versions of ``state.quarantine_pending`` whose quarantine files are not in the
    quarantine table yet (no read of it when nothing is pending)."""
    if not state.quarantine_pending:
        return ()
    done = quarantine_completed_through(pipeline)
    return tuple(v for v, _ in state.quarantine_pending if done is None or v > done)
