"""What every kind's job and sensor share: the pipeline's job, its resource keys and tag, and
the runs of a job that are in flight or failed.

Kind-free: every kind's ``defs.py`` builds its job with :func:`pipeline_job` and asks
:func:`partitions_in_flight` / :func:`failed_attempts_of` (of the run keys a tick requests;
:class:`FailedAttempts` when it finds them one by one) before requesting a run; the time, unit
and time x unit sensors end a tick with :func:`requested_or_skipped`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from dagster import (
    AddDynamicPartitionsRequest,
    AssetChecksDefinition,
    AssetKey,
    AssetObservation,
    AssetsDefinition,
    AssetSelection,
    DagsterRunStatus,
    DefaultSensorStatus,
    PartitionKeyRange,
    PartitionsDefinition,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    define_asset_job,
    partition_loading_context,
)
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    PARTITION_NAME_TAG,
)

from watermark_assets import names

IO_MANAGER_KEY = "watermark_io_manager"
SPARK_RESOURCE_KEY = "spark"
#: Dagster's own run tags (dagster does not export them): a run's one partition, and the first
#: and last key of a run over a range of partitions (a backfill, a sensor's ranged run).
PARTITION_TAG = PARTITION_NAME_TAG
RANGE_START_TAG = ASSET_PARTITION_RANGE_START_TAG
RANGE_END_TAG = ASSET_PARTITION_RANGE_END_TAG

IN_FLIGHT = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]
FAILED = [DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED]


def sensor_status(running_by_default: bool) -> DefaultSensorStatus:
    """A pipeline sensor's status in a new instance (``sensor.running_by_default``)."""
    return DefaultSensorStatus.RUNNING if running_by_default else DefaultSensorStatus.STOPPED


def pipeline_job(
    pipeline_name: str,
    asset_def: AssetsDefinition,
    checks: AssetChecksDefinition,
    partitions_def: PartitionsDefinition[Any] | None,
    description: str,
) -> UnresolvedAssetJobDefinition:
    """``{pipeline}_job``: the pipeline's asset and its checks, over its partitions."""
    return define_asset_job(
        names.job_name(pipeline_name),
        selection=AssetSelection.assets(asset_def) | AssetSelection.checks(checks),
        partitions_def=partitions_def,
        description=description,
    )


def partitions_in_flight(
    context: SensorEvaluationContext,
    asset_key: AssetKey,
    job_name: str,
    partitions_def: PartitionsDefinition[str],
) -> set[str]:
    """Partitions of the asset that a queued or running run already covers.

    Sensor runs, manual runs and backfills alike: a run of this job, or any run whose asset
    selection holds the asset (a UI backfill runs Dagster's implicit asset job), counts with
    its ``dagster/partition`` tag or its whole ``dagster/asset_partition_range_*`` range (of a
    multi-partitions definition: the cells of the rectangle, a dynamic dimension's keys read
    from the instance).
    """
    busy: set[str] = set()
    runs = context.instance.get_runs(filters=RunsFilter(statuses=IN_FLIGHT), limit=500)
    for run in runs:
        selection = run.asset_selection
        if run.job_name != job_name and (selection is None or asset_key not in selection):
            continue
        tags = run.tags
        if PARTITION_TAG in tags:
            busy.add(tags[PARTITION_TAG])
        start, end = tags.get(RANGE_START_TAG), tags.get(RANGE_END_TAG)
        if start and end:
            with partition_loading_context(dynamic_partitions_store=context.instance):
                keys = partitions_def.get_partition_keys_in_range(PartitionKeyRange(start, end))
            busy.update(keys)
    return busy


#: The failed runs one query reads for a tick's run key bases; when a tick's bases have failed
#: more often than this (a pipeline failing for a long time), each base is counted by the
#: database instead (one count query per base), so the numbers stay exact at any history.
FAILED_RUNS_READ = 500


def failed_attempts_of(
    context: SensorEvaluationContext, tag: str, values: Iterable[str]
) -> dict[str, int]:
    """How many runs failed (or were canceled) per value of ``tag`` among ``values``: the bases
    of the run keys a tick requests, each key ending with ``a{n}`` for its ``n`` failed runs, so
    a failed run's work gets a key Dagster has not launched. Exact at any history: one query
    reads the failed runs of all of them (at most :data:`FAILED_RUNS_READ`), else the database
    counts each. Every kind's sensor asks this, only for the bases it requests."""
    counts = dict.fromkeys(values, 0)
    if not counts:
        return counts
    failed = context.instance.get_runs(
        filters=RunsFilter(tags={tag: list(counts)}, statuses=FAILED), limit=FAILED_RUNS_READ
    )
    if len(failed) >= FAILED_RUNS_READ:
        return {
            value: context.instance.get_runs_count(RunsFilter(tags={tag: value}, statuses=FAILED))
            for value in counts
        }
    for run in failed:
        value = run.tags.get(tag)
        if value in counts:
            counts[value] += 1
    return counts


class FailedAttempts:
    """:func:`failed_attempts_of` for a tick that finds its run key bases one by one: called
    with a base, its failed runs (asked once per base and tick); :meth:`prefetch` asks for many
    in one query first."""

    def __init__(self, context: SensorEvaluationContext, tag: str) -> None:
        self._context = context
        self._tag = tag
        self._known: dict[str, int] = {}

    def prefetch(self, values: Iterable[str]) -> None:
        missing = [value for value in values if value not in self._known]
        self._known.update(failed_attempts_of(self._context, self._tag, missing))

    def __call__(self, value: str) -> int:
        if value not in self._known:
            self.prefetch([value])
        return self._known[value]


def requested_or_skipped(
    context: SensorEvaluationContext,
    pipeline_name: str,
    message: str,
    run_requests: Sequence[RunRequest],
    *,
    asset_events: Sequence[AssetObservation] = (),
    dynamic_partitions_requests: Sequence[AddDynamicPartitionsRequest] = (),
    cursor: str | None = None,
) -> SensorResult:
    """A pipeline sensor's tick: skipped with ``message`` when it requests no run, else its
    ``run_requests`` with ``message`` logged; its events, partitions added and cursor either
    way."""
    if not run_requests:
        return SensorResult(
            skip_reason=message,
            dynamic_partitions_requests=dynamic_partitions_requests,
            asset_events=asset_events,
            cursor=cursor,
        )
    context.log.info(f"{pipeline_name}: {message}")
    return SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=dynamic_partitions_requests,
        asset_events=asset_events,
        cursor=cursor,
    )
