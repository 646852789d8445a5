"""Event-time aggregates across Delta maintenance (issue 21 §3): real Spark, real Delta tables.

A pipeline lives for years: its upstream's log is checkpointed and cleaned (delta-rs does it
every 100 commits, a maintenance job at any time), the upstream is compacted (OPTIMIZE, files
added with ``dataChange: false``) and vacuumed (the files OPTIMIZE replaced are deleted), and the
same happens to the aggregate's own output, late and state tables. Time is simulated with the
helpers of ``tests/maintenance.py`` (backdated log files), never by sleeping.

Each case runs the same events through two aggregates, one whose tables saw the maintenance and
one whose tables did not (the reference), and compares what they committed: the windows emitted,
the late records, the windows still open with their partial aggregates, and the watermark.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from test_event_window import T0, append, event


@pytest.mark.spark
def test_a_failed_range_run_gets_a_new_run_key_and_the_sensor_requests_it_again(
    spark: Any, tmp_path: Path
) -> None:
    """Dagster never forgets a run key: the sensor counts the failed runs of a range by its own
    tag and requests the range again under ``...|a1``; that run succeeds."""
    from conftest import project_config
    from dagster import DagsterInstance, build_sensor_context
    from test_event_time_pipeline import Clock, pipelines

    from watermark_assets.defs import build_definitions

    defs = build_definitions(
        project_config(*pipelines(tmp_path)), clock=Clock(T0 + timedelta(hours=3))
    )
    instance = DagsterInstance.ephemeral()
    sensor = defs.resolve_sensor_def("events_5min_sensor")
    job = defs.resolve_job_def("events_5min_job")

    def tick() -> Any:
        return sensor.evaluate_tick(build_sensor_context(instance=instance, definitions=defs))

    upstream = tmp_path / "events"
    append(upstream, event(1, 0, 1), event(2, 40, 3), event(3, 75, 1))  # newest 13:15
    (first,) = tick().run_requests
    assert first.run_key == "events_5min|2024-01-30-12:00..2024-01-30-12:00|a0"

    away = tmp_path / "events_unreachable"
    upstream.rename(away)  # the upstream cannot be read for a moment: the run fails
    failed = job.execute_in_process(instance=instance, tags=first.tags, raise_on_error=False)
    assert not failed.success
    away.rename(upstream)

    (again,) = tick().run_requests
    assert again.run_key == "events_5min|2024-01-30-12:00..2024-01-30-12:00|a1"
    assert job.execute_in_process(instance=instance, tags=again.tags).success
    assert tick().skip_message.startswith("no partition closes")
