"""Credentials never appear in anything a run writes (issue 10: "a test greps everything a run
wrote").

A distinctive secret access key is configured in the project's ``storage:`` block; a file-path
pipeline with its landing folder AND its lake on moto's S3 runs through Dagster (a sensor tick,
the run it requests, a run that fails on a missing file) on a real Dagster instance kept on disk
(SQLite event log, compute logs). Then every byte written is searched: every object of the
bucket (Delta logs, Parquet files, checkpoints, quarantine), every file of the Dagster instance
(its databases and captured logs), the process's stdout/stderr and log records, the sensor's
skip messages and cursor, and the runs' error texts. Real Spark (the fsspec data source carries
the settings to the executors), real Delta, real Dagster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _landing import FROZEN_NOW, Landing, hour
from _sensor_loop import SensorLoop
from conftest import pipeline_yaml, s3_project
from dagster import DagsterInstance, RunRequest

from watermark_assets import storage
from watermark_assets.defs import build_definitions
from watermark_assets.kinds.file_path.assets import files_run_config

SECRET = "wa-run-SeCrEt-7d41c0ffee-never-written"


def test_a_run_on_s3_writes_the_secret_nowhere(
    spark: Any,
    s3_server: Any,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("DEBUG")
    bucket = s3_server.new_bucket()
    raw = pipeline_yaml(
        tmp_path,
        source={"uri": f"s3://{bucket}/landing"},
        table={"uri": f"s3://{bucket}/lake/events"},
    )
    seen: list[str] = []
    with s3_project(s3_server, raw, secret_access_key=SECRET) as config:
        home = tmp_path / "dagster_home"
        home.mkdir()
        with DagsterInstance.local_temp(str(home)) as instance:
            loop = SensorLoop(build_definitions(config, clock=lambda: FROZEN_NOW), instance)
            landing = Landing(tmp_path / "written")
            fs, root = storage.filesystem(f"s3://{bucket}/landing")
            for minute in (0, 20):
                path = landing.add(hour(28, 10), minute=minute, malformed=["{not json"])
                fs.put_file(str(tmp_path / "written" / path), f"{root}/{path}")
            tick = loop.tick()
            [request] = tick.run_requests
            assert loop.run(request).success
            idle = loop.tick()
            seen += [idle.skip_message or "", loop.cursor or ""]
            missing = RunRequest(
                partition_key="2024-01-28",
                run_config=files_run_config(
                    "events", ["date=2024-01-28/hour=10/1706439000-gone.ndjson"]
                ),
            )
            failed = loop.run(missing, raise_on_error=False)
            assert not failed.success
            errors = [
                str(e.step_failure_data.error) for e in failed.all_events if e.is_step_failure
            ]
            assert errors and "is not in" in errors[0], errors
            seen += errors
            runs = instance.get_runs()
            assert len(runs) == 2
            for run in runs:  # the event log, run configs and tags as Dagster stored them
                seen.append(repr(run))
                seen.extend(repr(entry) for entry in instance.all_logs(run.run_id))
        written = [p for p in home.rglob("*") if p.is_file()]
        assert any(p.suffix == ".db" for p in written), "the instance kept its event log on disk"
        seen += [p.read_bytes().decode("utf-8", "replace") for p in written]
        client = s3_server.client()
        keys = [
            item["Key"]
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for item in page.get("Contents", [])
        ]
        assert any("/_delta_log/" in key for key in keys) and any(
            key.endswith(".parquet") for key in keys
        ), keys
        for key in keys:
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            seen.append(body.decode("utf-8", "replace"))
    captured = capfd.readouterr()
    seen += [captured.out, captured.err]
    seen += [record.getMessage() for record in caplog.records]
    assert sum(len(text) for text in seen) > 10_000, "the run wrote something to search"
    leaked = [text[max(0, text.find(SECRET) - 100) :][:200] for text in seen if SECRET in text]
    assert leaked == []
