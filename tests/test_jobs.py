"""What every kind's job and sensor share (``defs/jobs.py``), no Spark."""

from __future__ import annotations

import pytest
from dagster import DefaultSensorStatus

from watermark_assets.defs.jobs import job_name, sensor_status


@pytest.mark.parametrize(
    ("running_by_default", "status"),
    [(True, DefaultSensorStatus.RUNNING), (False, DefaultSensorStatus.STOPPED)],
)
def test_a_sensor_starts_as_its_configuration_says(
    running_by_default: bool, status: DefaultSensorStatus
) -> None:
    assert sensor_status(running_by_default) is status


@pytest.mark.parametrize(("pipeline", "job"), [("events", "events_job"), ("a b*", "a b*_job")])
def test_a_pipelines_job_is_named_after_it(pipeline: str, job: str) -> None:
    assert job_name(pipeline) == job
