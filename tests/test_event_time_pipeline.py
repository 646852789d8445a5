"""Event-time aggregates as Dagster assets (issue 9 §2): configuration, the sensor that closes
partitions once the watermark passes their end, and runs with their metadata and checks.

The upstream is a column pipeline ``events`` whose Delta table the test appends to directly (as
its ingestion runs would); the aggregate ``events_5min`` reads what each commit appended.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from conftest import project_config
from dagster import AssetKey, AssetRecordsFilter, DagsterInstance, build_sensor_context
from deltalake import DeltaTable
from test_event_window import T0, append, event

from watermark_assets.config import EventTimePipelineConfig
from watermark_assets.defs import build_definitions
from watermark_assets.exceptions import ConfigError
from watermark_assets.vocabulary import table_rows


def pipelines(tmp_path: Path, **aggregate: Any) -> list[dict[str, Any]]:
    events = {
        "name": "events",
        "source": {"type": "delta_table", "uri": str(tmp_path / "source")},
        "watermark": {"columns": ["event_time", "id"]},
        "table": {"uri": str(tmp_path / "events")},
    }
    window = {
        "name": "events_5min",
        "source": {"type": "pipeline", "pipeline": "events"},
        "watermark": {"kind": "event_time", "column": "event_time", "delay": "10 minutes"},
        "window": {"size": "5 minutes"},
        "aggregates": {"events": "count", "users": "count_distinct(user_id)"},
        "table": {"uri": str(tmp_path / "agg" / "events_5min")},
        "partitions": {"granularity": "hourly", "start": "2024-01-30 12:00:00"},
    }
    return [events, {**window, **aggregate}]


def test_several_upstream_pipelines_are_inputs_with_one_policy(tmp_path: Path) -> None:
    events, window = pipelines(tmp_path)
    views = {**events, "name": "views", "table": {"uri": str(tmp_path / "views")}}
    window["source"] = {"type": "pipeline", "pipelines": ["events", "views"]}
    window["watermark"] = {**window["watermark"], "policy": "max", "idle_timeout": "30 minutes"}
    config = project_config(events, views, window)
    pipeline = config.pipeline("events_5min")
    assert isinstance(pipeline, EventTimePipelineConfig)
    assert config.upstream_tables(pipeline) == {
        "events": str(tmp_path / "events"),
        "views": str(tmp_path / "views"),
    }
    assert (pipeline.watermark.policy, pipeline.watermark.idle_timeout_ms) == ("max", 1_800_000)
    defs = build_definitions(config)
    deps = defs.resolve_assets_def("events_5min").asset_deps
    assert {k.to_user_string() for keys in deps.values() for k in keys} == {"events", "views"}


def test_an_event_time_pipeline_loads_with_its_defaults(tmp_path: Path) -> None:
    config = project_config(*pipelines(tmp_path))
    pipeline = config.pipeline("events_5min")
    assert isinstance(pipeline, EventTimePipelineConfig)
    assert pipeline.watermark.delay_ms == 600_000 and pipeline.watermark.lateness_ms == 0
    assert pipeline.table.late.endswith("events_5min_late")
    assert pipeline.table.state.endswith("events_5min_state")
    assert config.upstream_tables(pipeline) == {"events": str(tmp_path / "events")}


BAD = {
    "an upstream that is not a pipeline of the file": (
        {"source": {"type": "pipeline", "pipeline": "clicks"}},
        ["source.pipeline 'clicks' is not another pipeline", "'events'"],
    ),
    "a delay Spark would not read": (
        {"watermark": {"kind": "event_time", "column": "event_time", "delay": "ten minutes"}},
        ["watermark.delay", "'ten minutes'", "'10 minutes'"],
    ),
    "two count_distinct columns": (
        {"aggregates": {"a": "count_distinct(x)", "b": "count_distinct(y)"}},
        ["count_distinct over several columns"],
    ),
    "both pipeline and pipelines": (
        {"source": {"type": "pipeline", "pipeline": "events", "pipelines": ["events"]}},
        ["exactly one of pipeline (one upstream) and pipelines (a list)"],
    ),
    "an unknown policy": (
        {"watermark": {"kind": "event_time", "column": "event_time", "policy": "avg"}},
        ["watermark.policy", "'min'", "'max'"],
    ),
    "an unknown aggregate": (
        {"aggregates": {"a": "median(x)"}},
        ["'median(x)' is not count, sum(col)"],
    ),
}


@pytest.mark.parametrize("change, said", BAD.values(), ids=BAD.keys())
def test_a_bad_event_time_pipeline_is_refused_naming_the_value_and_the_fix(
    tmp_path: Path, change: dict[str, Any], said: list[str]
) -> None:
    with pytest.raises(ConfigError) as caught:
        project_config(*pipelines(tmp_path, **change))
    for text in said:
        assert text in str(caught.value)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.mark.spark
def test_the_sensor_materializes_a_partition_once_the_watermark_passes_its_end(
    spark: Any, tmp_path: Path
) -> None:
    clock = Clock(T0 + timedelta(hours=3))
    defs = build_definitions(project_config(*pipelines(tmp_path)), clock=clock)
    instance = DagsterInstance.ephemeral()
    sensor = defs.resolve_sensor_def("events_5min_sensor")

    def tick() -> Any:
        return sensor.evaluate_tick(build_sensor_context(instance=instance, definitions=defs))

    assert "no event time in" in str(tick().skip_message)

    upstream = tmp_path / "events"
    append(upstream, event(1, 0, 1), event(2, 3, 2), event(3, 21, 1))
    assert tick().skip_message == (
        "no partition closes yet: partition 2024-01-30-12:00 (2024-01-30T12:00:00Z to "
        "2024-01-30T13:00:00Z) waits for the event-time watermark to reach 2024-01-30T13:00:00Z, "
        "i.e. for events at or after 2024-01-30T13:10:00Z in events; the newest events so far: "
        "watermark 1970-01-01T00:00:00Z -> 2024-01-30T12:11:00Z (min of events "
        "2024-01-30T12:11:00Z)"
    )

    append(upstream, event(4, 40, 3), event(5, 62, 4), event(6, 75, 1))  # newest 13:15
    (request,) = tick().run_requests
    assert request.tags["dagster/asset_partition_range_start"] == "2024-01-30-12:00"
    assert request.tags["dagster/asset_partition_range_end"] == "2024-01-30-12:00"
    assert request.run_key == "events_5min|2024-01-30-12:00..2024-01-30-12:00|a0"

    job = defs.resolve_job_def("events_5min_job")
    result = job.execute_in_process(instance=instance, tags=request.tags)
    (materialization,) = result.asset_materializations_for_node("events_5min")
    metadata = {k: v.value for k, v in materialization.metadata.items()}
    assert (
        metadata["watermark/after_time"]
        == datetime(2024, 1, 30, 13, 5, tzinfo=timezone.utc).timestamp()
    )
    # windows with rows only, as Spark: 12:00, 12:20, 12:40 and 13:00 (its end 13:05 is reached)
    assert metadata["event_time/windows_emitted"] == 4
    assert metadata["event_time/late_records"] == 0 and metadata["rows/read"] == 6
    # the upstream is partitioned by day: a table, one row per input's partition
    assert table_rows(metadata["event_time/local_watermarks"]) == [
        {
            "input": "events",
            "partition": "event_date=2024-01-30",
            "watermark": "2024-01-30T13:05:00Z",
        }
    ]
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {
        "late_records": True,
        "watermark_never_moves_backwards": True,
        "column_schema_change": True,
    }

    assert tick().skip_message.startswith("no partition closes yet: partition 2024-01-30-13:00")
    # each partition of the run states its own state: 12:00 closed (whatever the run's range)
    assert metadata["partition/state"] == "closed"
    assert metadata["partition/reason"].startswith(
        "closed: the event-time watermark 2024-01-30T13:05:00Z passed its end 2024-01-30T13:00:00Z"
    )

    # a late record: its window (12:00) was closed by the committed watermark 13:05
    append(upstream, event(7, 2, 9), event(8, 130, 1))  # and the newest event 14:10
    (request,) = tick().run_requests
    assert request.tags["dagster/asset_partition_range_start"] == "2024-01-30-13:00"
    result = job.execute_in_process(instance=instance, tags=request.tags)
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks["late_records"] is False  # WARN: the late record is kept, not lost
    (materialization,) = result.asset_materializations_for_node("events_5min")
    assert materialization.metadata["event_time/late_records"].value == 1


@pytest.mark.spark
def test_several_inputs_state_each_input_s_watermark_in_a_table(spark: Any, tmp_path: Path) -> None:
    events, window = pipelines(tmp_path)
    views = {**events, "name": "views", "table": {"uri": str(tmp_path / "views")}}
    window["source"] = {"type": "pipeline", "pipelines": ["events", "views"]}
    window["watermark"] = {**window["watermark"], "policy": "max"}
    clock = Clock(T0 + timedelta(hours=3))
    defs = build_definitions(project_config(events, views, window), clock=clock)
    append(tmp_path / "events", event(1, 0, 1), event(2, 75, 1))  # newest 13:15
    append(tmp_path / "views", event(3, 30, 1))  # newest 12:30
    job = defs.resolve_job_def("events_5min_job")
    result = job.execute_in_process(
        instance=DagsterInstance.ephemeral(), partition_key="2024-01-30-12:00"
    )
    (materialization,) = result.asset_materializations_for_node("events_5min")
    # one row per input: its own watermark (its newest event - the 10 minutes' delay)
    assert table_rows(materialization.metadata["event_time/inputs"]) == [
        {
            "input": "events",
            "watermark": "2024-01-30T13:05:00Z",
            "max_event_time": "2024-01-30T13:15:00Z",
        },
        {
            "input": "views",
            "watermark": "2024-01-30T12:20:00Z",
            "max_event_time": "2024-01-30T12:30:00Z",
        },
    ]


def partition_events(instance: DagsterInstance, key: str) -> list[dict[str, Any]]:
    """The metadata of the observations of one partition of events_5min, oldest first."""
    records = instance.fetch_observations(
        AssetRecordsFilter(asset_key=AssetKey("events_5min"), asset_partitions=[key]), limit=50
    ).records
    return [
        {k: v.value for k, v in r.asset_observation.metadata.items()}
        for r in reversed(records)
        if r.asset_observation is not None
    ]


def test_a_partition_the_watermark_has_not_closed_says_on_its_page_what_it_waits_for(
    tmp_path: Path,
) -> None:
    clock = Clock(T0 + timedelta(hours=3))  # partitions 12:00, 13:00 and 14:00
    defs = build_definitions(project_config(*pipelines(tmp_path)), clock=clock)
    instance = DagsterInstance.ephemeral()
    sensor = defs.resolve_sensor_def("events_5min_sensor")

    def tick() -> Any:
        data = sensor.evaluate_tick(build_sensor_context(instance=instance, definitions=defs))
        for observation in data.asset_events:  # recorded on the instance, as the daemon does
            instance.report_runless_asset_event(observation)
        return data

    append(tmp_path / "events", event(1, 0, 1), event(2, 21, 1))  # no partition closes
    first = tick()
    assert sorted(e.partition for e in first.asset_events) == [
        "2024-01-30-12:00",
        "2024-01-30-13:00",
        "2024-01-30-14:00",
    ]
    (said,) = partition_events(instance, "2024-01-30-13:00")
    assert said["partition/state"] == "waiting"
    assert said["partition/reason"] == (
        "no batch has run yet: its windows of 5 min are emitted once the event-time watermark "
        "(the newest event time in `events` less 10 min) reaches 2024-01-30T14:00:00Z, i.e. "
        "once `events` holds events at or after 2024-01-30T14:10:00Z"
    )
    assert tick().asset_events == [], "nothing changed: no observation floods the event log"
    assert len(partition_events(instance, "2024-01-30-13:00")) == 1


def still_open(first: str, end: str, windows: int) -> dict[str, Any]:
    """What ``event_time/partitions_open`` says of one partition (delay 10 minutes, lateness 0):
    its windows from ``first`` to ``end`` stay open until the watermark reaches its end."""
    upstream_at = datetime.fromisoformat(end) + timedelta(minutes=10)
    return {
        "windows_open": windows,
        "open_from": f"2024-01-30T{first}:00Z",
        "open_until": f"{end}:00Z",
        "closes_when_watermark_reaches": f"{end}:00Z",
        "closes_with_upstream_events_at": f"{upstream_at:%Y-%m-%dT%H:%M}:00Z",
    }


# Issue 22, item 11: the batch commits what closed; the partitions still open are named, with the
# watermark that closes them, and the run succeeds.
OPEN_CASES = {
    "one partition the watermark has not closed (watermark 12:11)": (
        [event(1, 0, 1), event(2, 21, 1)],
        ("2024-01-30-12:00", "2024-01-30-12:00"),
        [],
        {"2024-01-30-12:00": still_open("12:10", "2024-01-30T13:00", 10)},
    ),
    "a range whose first partition closed and whose last did not (watermark 13:05)": (
        [event(1, 0, 1), event(2, 75, 1)],
        ("2024-01-30-12:00", "2024-01-30-13:00"),
        ["2024-01-30-12:00"],
        {"2024-01-30-13:00": still_open("13:05", "2024-01-30T14:00", 11)},
    ),
}


@pytest.mark.spark
@pytest.mark.parametrize(
    ("events", "requested", "closed", "opened"), OPEN_CASES.values(), ids=OPEN_CASES.keys()
)
def test_materializing_a_partition_still_open_commits_what_closed_and_says_until_when(
    spark: Any,
    tmp_path: Path,
    events: list[dict[str, Any]],
    requested: tuple[str, str],
    closed: list[str],
    opened: dict[str, Any],
) -> None:
    clock = Clock(T0 + timedelta(hours=3))  # the partitions' hours are over by the clock
    defs = build_definitions(project_config(*pipelines(tmp_path)), clock=clock)
    append(tmp_path / "events", *events)
    job = defs.resolve_job_def("events_5min_job")
    instance = DagsterInstance.ephemeral()
    tags = {
        "dagster/asset_partition_range_start": requested[0],
        "dagster/asset_partition_range_end": requested[1],
    }
    result = job.execute_in_process(instance=instance, tags=tags, raise_on_error=False)

    assert result.success
    (materialization, *_) = result.asset_materializations_for_node("events_5min")
    metadata = {k: v.value for k, v in materialization.metadata.items()}
    assert [(c.name, c.type) for c in metadata["event_time/partitions_open"].schema.columns] == [
        ("partition", "string"),
        ("windows_open", "int"),
        ("open_from", "string"),
        ("open_until", "string"),
        ("closes_when_watermark_reaches", "string"),
        ("closes_with_upstream_events_at", "string"),
    ]
    rows = table_rows(metadata["event_time/partitions_open"])
    assert {r.pop("partition"): r for r in rows} == opened
    assert metadata["event_time/partitions_closed"] == closed
    assert metadata["event_time/windows_emitted"] == 1  # 12:00, the one window with rows closed
    assert DeltaTable(str(tmp_path / "agg" / "events_5min")).to_pyarrow_table().num_rows == 1
    logs = [e.user_message for e in instance.all_logs(result.run_id)]
    (line,) = [m for m in logs if "stay open" in m]
    (key,) = opened
    assert f"events_5min: 1 requested partition(s) stay open: {key}" in line
    assert f"until the watermark reaches {opened[key]['closes_when_watermark_reaches']}" in line
    assert "the sensor requests these partitions again once the watermark passes their end" in line

    # ... and it does, once the upstream's events reach the instant the metadata named
    events_at = datetime.fromisoformat(opened[key]["closes_with_upstream_events_at"])
    append(tmp_path / "events", event(9, (events_at - T0) / timedelta(minutes=1), 1))
    sensor = defs.resolve_sensor_def("events_5min_sensor")
    with build_sensor_context(instance=instance, definitions=defs) as context:
        (request,) = sensor.evaluate_tick(context).run_requests or []
    assert request.tags["dagster/asset_partition_range_start"] == key


def streaming(tmp_path: Path, **aggregate: Any) -> list[dict[str, Any]]:
    """An upstream file pipeline `events` (its landing folder) and the aggregate on a stream."""
    events = {
        "name": "events",
        "source": {
            "type": "files",
            "uri": str(tmp_path / "landing"),
            "format": "ndjson",
            "schema": "id BIGINT, event_time TIMESTAMP, user_id BIGINT",
        },
        "watermark": {"partition_template": "date=%Y-%m-%d/hour=%H"},
        "table": {"uri": str(tmp_path / "events")},
    }
    _, window = pipelines(tmp_path)
    window = {**window, "engine": "streaming", "aggregates": {"events": "count"}}
    return [events, {**window, **aggregate}]


STREAMING_BAD = {
    "late_policy update": (
        {"watermark": {"kind": "event_time", "column": "event_time", "late_policy": "update"}},
        "late_policy update is for engine: batch",
    ),
    "count_distinct": (
        {"aggregates": {"users": "count_distinct(user_id)"}},
        "Structured Streaming does not support; use engine: batch",
    ),
    "an allowed lateness": (
        {
            "watermark": {
                "kind": "event_time",
                "column": "event_time",
                "allowed_lateness": "5 minutes",
            }
        },
        "on a stream add it to watermark.delay",
    ),
}


@pytest.mark.parametrize("change, said", STREAMING_BAD.values(), ids=STREAMING_BAD.keys())
def test_what_a_stream_cannot_do_is_refused_with_the_fix(
    tmp_path: Path, change: dict[str, Any], said: str
) -> None:
    with pytest.raises(ConfigError, match=said):
        project_config(*streaming(tmp_path, **change))


@pytest.mark.spark
def test_engine_streaming_runs_a_structured_streaming_query_in_the_dagster_run(
    spark: Any, tmp_path: Path
) -> None:
    import gzip
    import json

    folder = tmp_path / "landing" / "date=2024-01-30" / "hour=12"
    folder.mkdir(parents=True)
    rows = [event(1, 0, 1), event(2, 3, 2), event(3, 71, 3)]  # newest 13:11: watermark 13:01
    with gzip.open(folder / "1706616000-a.ndjson.gz", "wt", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps({**row, "event_time": row["event_time"].isoformat()}) + "\n")
    defs = build_definitions(
        project_config(*streaming(tmp_path)), clock=Clock(T0 + timedelta(hours=2))
    )
    job = defs.resolve_job_def("events_5min_job")
    result = job.execute_in_process(
        instance=DagsterInstance.ephemeral(), partition_key="2024-01-30-12:00"
    )
    (materialization,) = result.asset_materializations_for_node("events_5min")
    metadata = {k: v.value for k, v in materialization.metadata.items()}
    assert metadata["event_time/engine"] == "streaming"
    assert metadata["event_time/windows_emitted"] == 1  # 12:00 (events 12:00 and 12:03)
    assert metadata["event_time/late_records_kept"] is True  # read again from the batch's files
    assert (tmp_path / "agg" / "events_5min_checkpoint" / "offsets").is_dir()


@pytest.mark.spark
@pytest.mark.parametrize(
    "crash_at",
    ["event_window_staged_output", "event_window_after_output", "event_window_after_late"],
    ids=[
        "killed between the window output and its commit",
        "killed after the output commit",
        "killed after the late commit, before the state (the checkpoint)",
    ],
)
def test_a_dagster_run_killed_mid_batch_and_run_again_emits_every_window_and_late_record_once(
    spark: Any, tmp_path: Path, crash_at: str
) -> None:
    import os
    import subprocess
    import sys

    import yaml
    from conftest import TEST_SPARK_CONF
    from test_event_window import BATCH_1, late_ids, oracle, output_rows

    from watermark_assets.kinds.event_time.defs import window_engine
    from watermark_assets.runs.faults import CRASH_ENV_VAR

    raw = pipelines(tmp_path)
    config = project_config(*raw)
    spec = window_engine(config.pipeline("events_5min"), config).spec  # type: ignore[arg-type]
    defs = build_definitions(config, clock=Clock(T0 + timedelta(hours=3)))
    job = defs.resolve_job_def("events_5min_job")
    append(tmp_path / "events", *BATCH_1)
    append(tmp_path / "events", event(99, 70, 9))  # 13:10: the watermark reaches 13:00
    job.execute_in_process(instance=DagsterInstance.ephemeral(), partition_key="2024-01-30-12:00")
    second = [event(21, 3, 7), event(30, 80, 1), event(31, 105, 2), event(98, 130, 9)]
    append(tmp_path / "events", *second)  # 12:03 is late; the newest, 14:10, closes 13:00

    tests = Path(__file__).parent
    (tmp_path / "pipelines.yaml").write_text(
        yaml.safe_dump(
            {"spark": {"master": "local[1]", "conf": TEST_SPARK_CONF}, "pipelines": raw}
        ),
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "WATERMARK_ASSETS_CONFIG": str(tmp_path / "pipelines.yaml"),
        CRASH_ENV_VAR: crash_at,
        "PYTHONPATH": os.pathsep.join([str(tests.parent), str(tests)]),
    }
    victim = subprocess.run(
        [sys.executable, str(tests / "_crash_run.py"), "events_5min", "2024-01-30-13:00"],
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert victim.returncode == -9, victim.stderr.decode()[-2000:]

    again = job.execute_in_process(
        instance=DagsterInstance.ephemeral(), partition_key="2024-01-30-13:00"
    )
    assert again.success
    everything = [*BATCH_1, event(99, 70, 9), *second]
    assert output_rows(spec) == oracle(everything, {21}, T0 + timedelta(minutes=120))
    assert late_ids(spec) == [21]  # every late record exactly once


@pytest.mark.spark
def test_backlog_limits_check_the_lag_each_run_leaves_behind(spark: Any, tmp_path: Path) -> None:
    """``backlog_limits.event_time_lag``: the check ``backlog_within_limits`` on the run's
    materialization, passed while the watermark lags the clock by less than the limit."""
    clock = Clock(T0 + timedelta(hours=3))  # 15:00; the run leaves the watermark at 13:05
    limits = {"event_time_lag": "1 hour", "severity": "error"}
    defs = build_definitions(
        project_config(*pipelines(tmp_path, backlog_limits=limits)), clock=clock
    )
    append(tmp_path / "events", event(1, 0, 1), event(2, 75, 1))  # newest 13:15
    result = defs.resolve_job_def("events_5min_job").execute_in_process(
        instance=DagsterInstance.ephemeral(),
        tags={
            "dagster/asset_partition_range_start": "2024-01-30-12:00",
            "dagster/asset_partition_range_end": "2024-01-30-12:00",
        },
    )
    (lag,) = [
        e for e in result.get_asset_check_evaluations() if e.check_name == "backlog_within_limits"
    ]
    assert not lag.passed and lag.severity.value == "ERROR"
    assert lag.description == (
        "Backlog over its limits: event_time_lag 6,900 s > limit 3,600 s"  # 15:00 - 13:05
    )
