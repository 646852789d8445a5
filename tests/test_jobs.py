"""What every kind's job and sensor share (``defs/jobs.py``), no Spark."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from uuid import uuid4

import pytest
from _landing import FROZEN_NOW
from _sensor_loop import SensorLoop
from conftest import event_records, pipeline_yaml, project_config, write_ndjson
from dagster import (
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    DefaultSensorStatus,
    build_sensor_context,
)

from watermark_assets.defs import jobs
from watermark_assets.defs.build import build_definitions
from watermark_assets.defs.jobs import FailedAttempts, failed_attempts_of, sensor_status
from watermark_assets.kinds.file_path.assets import BATCH_TAG
from watermark_assets.names import job_name


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


#: Two landing partitions of the file sensor's test, the one's file named with a space and a `*`.
LANDED = {
    "2024-01-29": "date=2024-01-29/hour=10/1706522400-north side*.ndjson.gz",
    "2024-01-30": "date=2024-01-30/hour=10/1706608800-000002.ndjson.gz",
}


@pytest.mark.parametrize(
    ("failed", "attempts"),
    [
        pytest.param({}, {"2024-01-29": 0, "2024-01-30": 0}, id="no failed run: a0"),
        pytest.param(
            {"2024-01-29": 1}, {"2024-01-29": 1, "2024-01-30": 0}, id="one failed run: a1"
        ),
        pytest.param(
            {"2024-01-29": 2, "2024-01-30": 1},
            {"2024-01-29": 2, "2024-01-30": 1},
            id="each batch counts its own",
        ),
        pytest.param(
            {"2024-01-29": 60}, {"2024-01-29": 60, "2024-01-30": 0}, id="60 failed runs: a60"
        ),
        pytest.param(
            {"another batch": 3}, {"2024-01-29": 0, "2024-01-30": 0}, id="another batch's"
        ),
    ],
)
def test_the_file_sensor_requests_a_batch_again_under_its_failed_attempts(
    tmp_path: Path, failed: dict[str, int], attempts: dict[str, int]
) -> None:
    """A batch's run key ends with ``a{n}``: n runs with its batch tag failed (one query for every
    batch of the tick)."""
    for key, relative in LANDED.items():
        write_ndjson(
            tmp_path / "landing",
            relative,
            event_records(1, 2, datetime.fromisoformat(f"{key}T10:00:00+00:00")),
        )
    defs = build_definitions(project_config(pipeline_yaml(tmp_path)), clock=lambda: FROZEN_NOW)
    loop = SensorLoop(defs, DagsterInstance.ephemeral())
    bases = {r.partition_key: r.run_key.rsplit("|a", 1)[0] for r in loop.tick().run_requests}
    assert sorted(bases) == sorted(LANDED)
    for key, count in failed.items():
        for _ in range(count):
            loop.instance.add_run(
                DagsterRun(
                    job_name="events_job",
                    run_id=str(uuid4()),
                    tags={BATCH_TAG: bases.get(key, key)},
                    status=DagsterRunStatus.FAILURE,
                )
            )
    again = {r.partition_key: r.run_key for r in loop.tick().run_requests}
    assert again == {key: f"{base}|a{attempts[key]}" for key, base in bases.items()}


#: Runs on the instance for :func:`failed_attempts_of`: (the tag's value, the run's status, count).
RUNS = [
    ("2024-01-29|a b*", DagsterRunStatus.FAILURE, 7),
    ("2024-01-29|a b*", DagsterRunStatus.CANCELED, 2),
    ("2024-01-29|a b*", DagsterRunStatus.SUCCESS, 3),
    ("2024-01-30", DagsterRunStatus.FAILURE, 1),
    ("not asked", DagsterRunStatus.FAILURE, 4),
]


@pytest.mark.parametrize(
    ("read", "values", "expected"),
    [
        pytest.param(500, [], {}, id="nothing asked: no query"),
        pytest.param(
            500,
            ["2024-01-29|a b*", "2024-01-30", "never ran"],
            {"2024-01-29|a b*": 9, "2024-01-30": 1, "never ran": 0},
            id="failed and canceled runs count, per value, others not",
        ),
        pytest.param(
            4,
            ["2024-01-29|a b*", "2024-01-30", "never ran"],
            {"2024-01-29|a b*": 9, "2024-01-30": 1, "never ran": 0},
            id="more failed runs than one query reads: the database counts each, exact",
        ),
        pytest.param(10, ["2024-01-30"], {"2024-01-30": 1}, id="one value among many failed runs"),
    ],
)
def test_the_failed_attempts_of_a_ticks_run_keys_are_exact(
    monkeypatch: pytest.MonkeyPatch, read: int, values: list[str], expected: dict[str, int]
) -> None:
    """Every kind's sensor numbers a run key's attempt by its base's failed runs: exact at any
    history (a key Dagster launched already would never run again)."""
    monkeypatch.setattr(jobs, "FAILED_RUNS_READ", read)
    instance = DagsterInstance.ephemeral()
    for value, status, count in RUNS:
        for _ in range(count):
            tags = {"watermark_assets/tick": value}
            instance.add_run(
                DagsterRun(job_name="a b*_job", run_id=str(uuid4()), tags=tags, status=status)
            )
    context = build_sensor_context(instance=instance)
    assert failed_attempts_of(context, "watermark_assets/tick", values) == expected
    one_by_one = FailedAttempts(context, "watermark_assets/tick")
    one_by_one.prefetch(values[:1])
    assert {value: one_by_one(value) for value in values} == expected
