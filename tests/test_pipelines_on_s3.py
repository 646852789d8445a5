"""A column pipeline and the event-time aggregate downstream of it, every table on S3.

Issue 10 §1 and §4: every location accepts ``s3://`` and the pipeline runs end to end on these
machines without s3a. The source Delta table, the column pipeline's table, the aggregate's
output, its open-window state and its late-records table all live in one bucket of moto's S3
server; Spark reads and writes them through the fsspec data source, delta-rs commits. The rows
are those of the same pipelines on local disk (tests/test_event_time_pipeline.py).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pyarrow as pa
from conftest import s3_project
from dagster import DagsterInstance, build_sensor_context
from deltalake import DeltaTable, write_deltalake
from test_event_time_pipeline import Clock
from test_event_window import EVENTS_SCHEMA, T0, event

from watermark_assets import storage
from watermark_assets.defs import build_definitions


def test_a_column_pipeline_and_its_event_time_aggregate_run_on_s3(
    spark: Any, s3_server: Any
) -> None:
    bucket = f"s3://{s3_server.new_bucket()}"
    source, events, aggregate = f"{bucket}/source", f"{bucket}/lake/events", f"{bucket}/agg/5min"
    pipelines = [
        {
            "name": "events",
            "source": {"type": "delta_table", "uri": source},
            "watermark": {"columns": ["id"]},  # the late event 7 gets in
            "table": {"uri": events},
        },
        {
            "name": "events_5min",
            "source": {"type": "pipeline", "pipeline": "events"},
            "watermark": {
                "kind": "event_time",
                "column": "event_time",
                "delay": "10 minutes",
            },
            "window": {"size": "5 minutes"},
            "aggregates": {"events": "count", "users": "count_distinct(user_id)"},
            "table": {"uri": aggregate},
            "partitions": {"granularity": "hourly", "start": "2024-01-30 12:00:00"},
        },
    ]
    with s3_project(s3_server, *pipelines) as config:
        clock = Clock(T0 + timedelta(hours=3))
        defs = build_definitions(config, clock=clock)
        instance = DagsterInstance.ephemeral()
        options = storage.delta_options(source)

        def land(*rows: dict[str, Any]) -> None:
            table = pa.Table.from_pylist(list(rows), schema=EVENTS_SCHEMA)
            write_deltalake(
                source, table, mode="append", partition_by=["event_date"], storage_options=options
            )

        def ingest() -> None:
            assert defs.resolve_job_def("events_job").execute_in_process(instance=instance).success

        def close() -> Any:
            sensor = defs.resolve_sensor_def("events_5min_sensor")
            context = build_sensor_context(instance=instance, definitions=defs)
            (request,) = sensor.evaluate_tick(context).run_requests
            job = defs.resolve_job_def("events_5min_job")
            result = job.execute_in_process(instance=instance, tags=request.tags)
            (materialization,) = result.asset_materializations_for_node("events_5min")
            return {k: v.value for k, v in materialization.metadata.items()}

        def rows(uri: str, *columns: str) -> list[tuple[Any, ...]]:
            table = DeltaTable(uri, storage_options=storage.delta_options(uri))
            data = table.to_pyarrow_table(columns=list(columns)).to_pylist()
            return sorted(tuple(row[c] for c in columns) for row in data)

        land(event(1, 0, 1), event(2, 3, 2), event(3, 21, 1))
        land(event(4, 40, 3), event(5, 62, 4), event(6, 75, 1))  # newest 13:15
        ingest()
        assert [r[0] for r in rows(events, "id")] == [1, 2, 3, 4, 5, 6]
        ingest()  # nothing new: nothing added
        assert [r[0] for r in rows(events, "id")] == [1, 2, 3, 4, 5, 6]

        first = close()
        assert first["event_time/windows_emitted"] == 4 and first["rows/read"] == 6
        land(event(7, 2, 9), event(8, 130, 1))  # 12:02 is late for the committed 13:05
        ingest()
        second = close()
        assert second["event_time/late_records"] == 1
        minutes = [(w - T0).seconds // 60 for w, *_ in rows(aggregate, "window_start")]
        assert minutes == [0, 20, 40, 60, 75]
        assert [r[0] for r in rows(f"{aggregate}_late", "id")] == [7]
        fs, root = storage.filesystem(bucket)
        assert fs.exists(f"{root}/agg/5min_state/_delta_log"), "the open windows' state on S3"
