"""Writing a file-path pipeline's checkpoint: when due, never older than the one on storage."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from watermark_assets import storage
from watermark_assets.config import Pipeline
from watermark_assets.core.checkpoint import Checkpoint, CheckpointPolicy
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.state.load import PipelineState
from watermark_assets.state.quarantine import complete_quarantine


def save_checkpoint(
    pipeline: Pipeline, state: PipelineState, *, now: datetime, force: bool = False
) -> bool:
    """Write the checkpoint when its interval is due (or ``force``); True if written.

    A checkpoint already on storage for a newer table version is never overwritten by an older one
    (checked and written as one step, see :func:`storage.replace_text_unless`: a lock on a local
    disk, a conditional put on S3 whose loser reads the winner's checkpoint and decides again; after
    repeated lost races it raises ConcurrentWriteError, and the Delta log still holds the state,
    so nothing is lost). The quarantine of
    every commit up to the state's version is completed first.
    """
    policy = CheckpointPolicy(pipeline.checkpoint.interval_files, pipeline.checkpoint.interval_secs)
    now_ts = int(now.timestamp())
    last = state.checkpoint.last_update_ts if state.checkpoint else None
    if not force and not policy.is_due(state.files_since_checkpoint, last, now_ts):
        return False
    if state.quarantine_pending:
        # the checkpoint promises that every quarantine up to its version is in the table
        complete_quarantine(pipeline, state)
    location = pipeline.checkpoint_uri
    checkpoint = Checkpoint(
        state.watermark, now_ts, state.delta_version, state.partition_rows, state.partition_files
    )

    def newer_on_storage(text: str) -> bool:
        current = Checkpoint.loads(text, location=location, kind=FileWatermark)
        return (current.delta_version or -1) > (state.delta_version or -1)

    return storage.replace_text_unless(location, checkpoint.dumps(), keep=newer_on_storage)


def mark_idle(pipeline: Pipeline, state: PipelineState, *, now: datetime) -> PipelineState:
    """Record that a poll found files, none above the watermark (Active -> Idle), if it changes."""
    idle = state.watermark.mark_idle()
    if idle == state.watermark:
        return state
    new_state = replace(state, watermark=idle)
    save_checkpoint(pipeline, new_state, now=now, force=True)
    return new_state
