"""The sensor -> run -> commit loop, driven through Dagster's own APIs as the daemon would.

A tick is ``build_sensor_context`` + ``evaluate_tick`` with the cursor of the previous tick; a
run is ``execute_in_process`` of the pipeline's job with the RunRequest's partition, run config and
tags, plus the ``dagster/run_key`` tag the daemon records (its run-key deduplication looks at it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetRecordsFilter,
    DagsterInstance,
    Definitions,
    ExecuteInProcessResult,
    RunRequest,
    RunsFilter,
    build_sensor_context,
)
from dagster._core.definitions.sensor_definition import SensorExecutionData

from watermark_assets.kinds.file_path.assets import files_run_config
from watermark_assets.kinds.file_path.assets import requested_files as requested_files_of

RUN_KEY_TAG = "dagster/run_key"


def files_config(pipeline: str, files: Sequence[str] | None) -> dict[str, Any]:
    """The run config of an ingestion run (``files`` None: every file above the watermark)."""
    return files_run_config(pipeline, files)


@dataclass
class SensorLoop:
    """One pipeline's sensor, job and a Dagster instance; remembers the sensor cursor."""

    defs: Definitions
    instance: DagsterInstance
    pipeline: str = "events"
    cursor: str | None = None

    def tick(self) -> SensorExecutionData:
        context = build_sensor_context(
            instance=self.instance, cursor=self.cursor, definitions=self.defs
        )
        data = self.defs.resolve_sensor_def(f"{self.pipeline}_sensor").evaluate_tick(context)
        self.cursor = data.cursor
        for event in data.asset_events:  # recorded on the instance, as the daemon does
            self.instance.report_runless_asset_event(event)
        return data

    def run(self, request: RunRequest, *, raise_on_error: bool = True) -> ExecuteInProcessResult:
        """Execute a RunRequest the way the daemon launches it."""
        tags = {**request.tags, RUN_KEY_TAG: request.run_key or ""}
        return self.job.execute_in_process(
            instance=self.instance,
            partition_key=request.partition_key,
            run_config=request.run_config,
            tags=tags,
            raise_on_error=raise_on_error,
        )

    def run_all(self, requests: Sequence[RunRequest]) -> None:
        for request in requests:
            assert self.run(request).success

    def run_partition(
        self, partition_key: str, files: Sequence[str] | None = None
    ) -> ExecuteInProcessResult:
        """A manual run (or a backfill of one partition): no run key."""
        return self.job.execute_in_process(
            instance=self.instance,
            partition_key=partition_key,
            run_config=files_config(self.pipeline, files),
        )

    def run_range(self, first: str, last: str) -> ExecuteInProcessResult:
        """A single-run backfill of the partitions first..last (BackfillPolicy.single_run)."""
        return self.job.execute_in_process(
            instance=self.instance,
            run_config=files_config(self.pipeline, None),
            tags={
                "dagster/asset_partition_range_start": first,
                "dagster/asset_partition_range_end": last,
            },
        )

    @property
    def job(self) -> Any:
        return self.defs.resolve_job_def(f"{self.pipeline}_job")

    def runs_with_run_key(self, run_key: str) -> list[Any]:
        return list(self.instance.get_runs(filters=RunsFilter(tags={RUN_KEY_TAG: run_key})))

    def materialization(self, partition_key: str) -> AssetMaterialization:
        """The latest materialization of one partition of the pipeline's asset."""
        records = self.instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey(self.pipeline), asset_partitions=[partition_key]),
            limit=1,
        ).records
        assert records, f"partition {partition_key} was never materialized"
        materialization = records[0].asset_materialization
        assert materialization is not None
        return materialization

    def metadata(self, partition_key: str) -> dict[str, Any]:
        """The latest materialization metadata of a partition, as plain values."""
        return {k: v.value for k, v in self.materialization(partition_key).metadata.items()}


def requested_files(request: RunRequest, pipeline: str = "events") -> list[str]:
    return requested_files_of(request.run_config, pipeline) or []


def by_partition(requests: Sequence[RunRequest], pipeline: str = "events") -> dict[str, list[str]]:
    """{partition key: the files its RunRequest lists}; one request per partition is asserted."""
    keys = [r.partition_key for r in requests]
    assert len(keys) == len(set(keys)), f"a partition was requested twice: {keys}"
    return {r.partition_key: requested_files(r, pipeline) for r in requests}  # type: ignore[misc]
