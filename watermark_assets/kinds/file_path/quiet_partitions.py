"""What a file-path pipeline's partition that was never materialized and has no file waiting says
on its own page: that no file landed for it, under which landing path, since when, and what
closes it (``close_empty_partitions`` materializes it empty once the listing moves past it).

Without this, Dagster's Partitions panel shows "No metadata entries" for such a partition, and
the reason is only in the sensor's skip message.

Cheap on purpose: a sensor ticking every 30 s for a year must not write an observation per
partition per tick, nor read the event log per partition per tick. The texts depend only on the
partition's window and the pipeline's settings and listing horizon, so they change rarely (a new
partition begins, the horizon moves, a partition gets files); the tick keeps a digest of them in
its cursor and, while it is unchanged, reads and writes nothing. When it changed, the partitions
are checked against the instance (materialized ones are left out) and only those whose latest
event says something else are observed: the sensor says them with
:func:`~watermark_assets.defs.partition_truth.observations_since` (``left_to_runs``), as every
sensor says its pages.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from dagster import (
    TimeWindowPartitionsDefinition,
    partition_loading_context,
)

from watermark_assets.config import Pipeline
from watermark_assets.defs.partition_truth import (
    MAX_OBSERVED,
    PartitionTruth,
)
from watermark_assets.state.horizons import listing_horizon
from watermark_assets.state.load import PipelineState
from watermark_assets.vocabulary import time_text, window_text

WAITING = "waiting"
NOT_LISTED = "not listed"


def quiet_truths(
    pipeline: Pipeline,
    partitions_def: TimeWindowPartitionsDefinition,
    state: PipelineState,
    now: datetime,
    *,
    leave_out: Collection[str],
) -> dict[str, PartitionTruth]:
    """The newest :data:`MAX_OBSERVED` partitions up to ``now`` that the listing still looks at
    (or, before the first commit, that a cold start's lookback leaves out), but for the
    ``leave_out`` ones (files wait in them, a run is in flight, the tick closes them), each
    with its state and reason. Whether a partition was materialized is not asked here (that
    costs a query): ``observations_since(..., left_to_runs=True)`` leaves those out."""
    template = pipeline.watermark.template
    uri = pipeline.source.uri
    horizon = listing_horizon(pipeline, state.watermark, now)
    floor = None if horizon is None else template.parse(horizon)
    initial = state.watermark.value is None
    late_days = pipeline.watermark.late_arrival_days
    with partition_loading_context(effective_dt=now):
        window = partitions_def.get_last_partition_window()
    truths: dict[str, PartitionTruth] = {}
    while window is not None and len(truths) < MAX_OBSERVED:
        start, end = window.start, window.end
        key = partitions_def.get_partition_key_for_timestamp(start.timestamp())
        window = partitions_def.get_prev_partition_window(start)
        if key in leave_out:
            continue
        where = (
            f"under {uri} in its landing partitions from {template.format(start)} "
            f"(before {template.format(end)})"
        )
        span = window_text(start, end)
        if floor is not None and end <= floor:
            if not initial:
                break  # the listing moved past it: close_empty_partitions closes it
            truths[key] = PartitionTruth(
                state=NOT_LISTED,
                reason=f"no file of {span} is listed: the pipeline has committed no file yet, "
                f"and its cold start lists only from {horizon} "
                f"(cold_start.lookback_days {pipeline.watermark.cold_start.lookback_days}); "
                f"materialize or backfill this partition to ingest the files {where}",
            )
            continue
        if initial:
            closes = "it waits for the pipeline's first file"
        elif late_days is None:
            closes = "the listing looks at every landing partition (late_arrival_days: none)"
        else:
            closes = (
                f"the sensor closes it empty (0 rows) once the newest landing partition "
                f"processed is at or after {time_text(end + timedelta(days=late_days))} "
                f"(its end + late_arrival_days {late_days})"
            )
        truths[key] = PartitionTruth(
            state=WAITING,
            reason=f"no file above the watermark {where} since {time_text(start)}: none landed "
            f"for {span} yet; the sensor lists it on every tick, and {closes}",
            watermarks={},
            rows=0,
        )
    return truths
