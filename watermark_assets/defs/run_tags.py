"""The run tag that keeps two runs from ingesting the same pipeline partition at once.

Every run that ingests carries ``watermark_assets/pipeline_partition: <pipeline>|<partition>``
(:func:`pipeline_partition_tags`, the one place its value is written). An instance whose run
queue limits that tag to 1 per unique value (``docs/dagster-postgres.yaml``) keeps a second run
of the same pipeline partition queued until the first one ended.

Who sets it:

- the project's sensors and schedules, on every RunRequest of every watermark kind;
- :class:`PipelinePartitionRunCoordinator`, for every other run when it is submitted: a run
  launched from the UI (an asset's *Materialize*, the launchpad), by a backfill, by
  ``dagster job launch`` or by a run retry of a run that lacked it. Dagster gives those runs
  only its own ``dagster/partition`` (or ``dagster/asset_partition_range_*``) tags: the
  coordinator derives the pipeline from the run's assets (or its job ``NAME_job``) and adds
  the same tag before the run is queued, so the queue sees it before it is dequeued.

Range runs (one run over many partitions: a single-run backfill, an event-time run, a time x
unit range) are tagged ``<pipeline>|<first>...<last>`` and also
``watermark_assets/pipeline_range: <pipeline>``, limited to 1 per pipeline: two range runs of
one pipeline never run at once. A range run and a single-partition run inside it carry
different values, so the queue does not keep them apart: the sensors do (they never request a
partition that a queued or running range covers, ``jobs.partitions_in_flight``), and where
both run anyway (a range launched from the UI while a run of one of its partitions runs) the
Delta txn id of each partition keeps the data exactly-once (the second commit decides again).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from dagster import AssetKey, DagsterRun, QueuedRunCoordinator
from dagster._core.run_coordinator import SubmitRunContext

from watermark_assets import names
from watermark_assets.defs.jobs import PARTITION_TAG, RANGE_END_TAG, RANGE_START_TAG
from watermark_assets.defs.keys import pipeline_name_of
from watermark_assets.names import PIPELINE_TAG

PIPELINE_PARTITION_TAG = names.PIPELINE_PARTITION_TAG
PIPELINE_RANGE_TAG = names.PIPELINE_RANGE_TAG
#: The partition part of the tag of a run of an unpartitioned pipeline.
UNPARTITIONED = "-"


def pipeline_partition_tags(
    pipelines: str | Collection[str],
    partition_key: str | None = None,
    *,
    partition_range: tuple[str, str] | None = None,
) -> dict[str, str]:
    """The concurrency tags of a run of ``pipelines`` over one partition, a range or (neither)
    the whole unpartitioned pipeline.

    The value names the pipeline and the partition: ``events|2024-01-28``,
    ``events|2024-01-28...2024-01-30`` (plus ``watermark_assets/pipeline_range: events``),
    ``orders|-``. A run of several pipelines' assets names them all, sorted, joined by ``+``.
    """
    names = sorted({pipelines} if isinstance(pipelines, str) else set(pipelines))
    if not names or not all(names):
        raise ValueError(
            f"pipeline_partition_tags needs at least one non-empty pipeline name, got {names!r}: "
            "pass the pipeline's name (config `name:`)"
        )
    if partition_key is not None and partition_range is not None:
        raise ValueError(
            f"pipeline_partition_tags got both partition_key {partition_key!r} and "
            f"partition_range {partition_range!r}: pass one (a range of one key is that key)"
        )
    who = "+".join(names)
    if partition_range is not None:
        first, last = partition_range
        if first != last:
            return {PIPELINE_PARTITION_TAG: f"{who}|{first}...{last}", PIPELINE_RANGE_TAG: who}
        partition_key = first
    where = UNPARTITIONED if partition_key is None else partition_key
    return {PIPELINE_PARTITION_TAG: f"{who}|{where}"}


def ingesting_pipelines(
    tags: Mapping[str, str], job_name: str, asset_keys: Collection[AssetKey] | None
) -> list[str]:
    """The pipelines a run ingests: its ``watermark_assets/pipeline`` tag (the sensors' runs),
    else its selected assets (each pipeline's asset key ends with its name:
    ``defs/keys.pipeline_name_of``), else its job
    ``NAME_job`` (the launchpad runs a whole job). Empty: the run ingests nothing (a run of
    asset checks only, or of another code location's job)."""
    if tags.get(PIPELINE_TAG):
        return [tags[PIPELINE_TAG]]
    if asset_keys:
        return sorted({pipeline_name_of(key) for key in asset_keys})
    if job_name.endswith(names.JOB_SUFFIX) and not job_name.startswith("__"):
        return [job_name.removesuffix(names.JOB_SUFFIX)]
    return []


def missing_concurrency_tags(run: DagsterRun) -> dict[str, str]:
    """The concurrency tags a run lacks (none when it carries them or ingests nothing), from
    its pipelines and Dagster's partition tags."""
    tags = run.tags
    if PIPELINE_PARTITION_TAG in tags:
        return {}
    pipelines = ingesting_pipelines(tags, run.job_name, run.asset_selection)
    if not pipelines:
        return {}
    start, end = tags.get(RANGE_START_TAG), tags.get(RANGE_END_TAG)
    if start and end:
        return pipeline_partition_tags(pipelines, partition_range=(start, end))
    return pipeline_partition_tags(pipelines, tags.get(PARTITION_TAG))


class PipelinePartitionRunCoordinator(QueuedRunCoordinator):
    """Dagster's QueuedRunCoordinator (same configuration) that first gives every submitted run
    the concurrency tags it lacks (:func:`missing_concurrency_tags`), so that UI, backfill and
    CLI runs are limited like the sensors' runs. Configure it in ``dagster.yaml`` as
    ``run_coordinator: {module: watermark_assets.defs.run_tags, class:
    PipelinePartitionRunCoordinator, config: ...}``."""

    def submit_run(self, context: SubmitRunContext) -> DagsterRun:
        run = context.dagster_run
        missing = missing_concurrency_tags(run)
        if missing:
            self._instance.add_run_tags(run.run_id, missing)
            run = run.with_tags({**run.tags, **missing})
        return super().submit_run(SubmitRunContext(run, context.workspace))
