"""Writing a file-path pipeline's checkpoint: whenever it is behind the table, never older than the
one on storage.

The checkpoint is the state that survives Delta's log maintenance (a Delta checkpoint keeps no
``commitInfo``), so it records every commit's progress: it is written after every data commit and
by every load that finds commits after it (:func:`catch_up`). The seed's intervals
(``checkpoint.interval_files``, ``interval_secs``) only govern how often an unchanged state is
REWRITTEN (its ``last_update_ts``, an idle tick's): a checkpoint written at intervals would leave
up to ``interval_files`` commits whose progress lives only in their ``commitInfo``, which
delta-rs's post-commit cleanup deletes (every ``delta.checkpointInterval`` commits, once older
than ``delta.logRetentionDuration``). One small atomic write per commit is the price.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from watermark_assets.config import Pipeline
from watermark_assets.core.checkpoint import CheckpointPolicy
from watermark_assets.exceptions import QuarantineIncompleteError
from watermark_assets.state.load import PipelineState, checkpoint_store
from watermark_assets.state.quarantine import incomplete_quarantine
from watermark_assets.state.store import Stored


def save_checkpoint(
    pipeline: Pipeline, state: PipelineState, *, now: datetime, force: bool = False
) -> bool:
    """Write the checkpoint when it is behind the table (commits after its version), when its
    interval is due for a rewrite, or with ``force``; True if written.

    A checkpoint already on storage for a newer table version (or the same version and a greater
    txn sum) is never overwritten by an older one (``StateStore.write``: checked and written as
    one step, a lock on a local disk, a conditional put on S3 whose loser reads the winner's
    checkpoint and decides again; after repeated lost races it raises ConcurrentWriteError, and
    the Delta log still holds the state, so nothing is lost). The quarantine of every commit up
    to the state's version must be in the quarantine table already (the caller completes it:
    ``kinds/file_path/commit.complete_quarantine``), else :class:`QuarantineIncompleteError` and
    nothing is written.
    """
    policy = CheckpointPolicy(pipeline.checkpoint.interval_files, pipeline.checkpoint.interval_secs)
    now_ts = int(now.timestamp())
    last = state.checkpoint.last_update_ts if state.checkpoint else None
    due = state.checkpoint_behind or policy.is_due(state.files_since_checkpoint, last, now_ts)
    if not force and not due:
        return False
    # the checkpoint promises that every quarantine up to its version is in the table
    missing = incomplete_quarantine(pipeline, state)
    if missing:
        raise QuarantineIncompleteError(pipeline.name, pipeline.table.quarantine, missing)
    version = -1 if state.delta_version is None else state.delta_version
    stored = Stored(state.to_checkpoint(now_ts), version, state.txn_sum)
    return checkpoint_store(pipeline).write(stored)


def mark_idle(pipeline: Pipeline, state: PipelineState, *, now: datetime) -> PipelineState:
    """Record that a poll found files, none above the watermark (Active -> Idle), if it changes."""
    idle = state.watermark.mark_idle()
    if idle == state.watermark:
        return state
    new_state = replace(state, watermark=idle)
    save_checkpoint(pipeline, new_state, now=now, force=True)
    return new_state


def catch_up(pipeline: Pipeline, state: PipelineState, *, now: datetime) -> bool:
    """Write the checkpoint if commits after it were read (a crash between a commit and its
    checkpoint write, another writer's commits): a sensor tick's guard, so the commits a later
    load needs are never older than one tick. True if written."""
    if not state.checkpoint_behind:
        return False
    return save_checkpoint(pipeline, state, now=now, force=True)
