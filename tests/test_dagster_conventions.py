"""Dagster's conventions on every pipeline's asset (issue 24, item 5).

- ``FreshnessPolicy``: derived from the pipeline's cadence and the time it gives late data
  (warn at one cadence + grace, fail at two), or as ``freshness:`` writes it, or none.
- ``dagster/column_schema``: the source's declared DDL and the columns the pipeline adds; on a
  real ingestion, exactly the Delta table's columns.
- Schedules decide at their tick's ``scheduled_execution_time``, not the wall clock: a tick
  evaluated late requests what was due at its time, under the same run keys.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from _landing import hour
from conftest import pipeline_yaml, project_config
from dagster import (
    AssetKey,
    AssetMaterialization,
    AutomationCondition,
    DagsterInstance,
    FreshnessPolicy,
    build_schedule_context,
    evaluate_automation_conditions,
)
from deltalake import DeltaTable
from test_pipeline_dagster import make_world

from watermark_assets.config import TimePipelineConfig
from watermark_assets.defs import build_definitions
from watermark_assets.defs.columns import COLUMN_SCHEMA_KEY
from watermark_assets.exceptions import ConfigError
from watermark_assets.kinds.time.defs import decide_tick

UTC = timezone.utc
H, D = timedelta(hours=1), timedelta(days=1)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # sources not created


def time_pipeline(tmp_path: Path, **watermark: Any) -> dict[str, Any]:
    return {
        "name": "orders",
        "source": {
            "type": "csv",
            "uri": str(tmp_path / "orders"),
            "schema": "id BIGINT NOT NULL COMMENT 'the order', updated_at TIMESTAMP",
        },
        "watermark": {"kind": "time", "column": "updated_at", "from": "2020-01-01", **watermark},
        "table": {"uri": str(tmp_path / "delta" / "orders")},
    }


def event_time_pipeline(tmp_path: Path, **watermark: Any) -> dict[str, Any]:
    return {
        "name": "events_5min",
        "source": {"type": "pipeline", "pipeline": "events"},
        "watermark": {"kind": "event_time", "column": "event_time", **watermark},
        "table": {"uri": str(tmp_path / "delta" / "events_5min")},
        "partitions": {"granularity": "hourly", "start": "2024-01-01"},
    }


def unit_pipeline(tmp_path: Path, **time: Any) -> dict[str, Any]:
    watermark: dict[str, Any] = {"kind": "unit", "column": "survey_id", "units": "a,b"}
    if time:
        watermark["time"] = {"column": "answered_at", "from": "2024-01-01", **time}
    return {
        "name": "answers",
        "source": {"type": "delta_table", "uri": str(tmp_path / "answers")},
        "watermark": watermark,
        "table": {"uri": str(tmp_path / "delta" / "answers")},
    }


def column_pipeline(tmp_path: Path) -> dict[str, Any]:
    return {
        "name": "customers",
        "source": {"type": "delta_table", "uri": str(tmp_path / "customers")},
        "watermark": {"columns": ["updated_at"]},
        "table": {"uri": str(tmp_path / "delta" / "customers")},
    }


def asset_spec(*pipelines: dict[str, Any], name: str) -> Any:
    defs = build_definitions(project_config(*pipelines))
    (spec,) = [s for s in defs.resolve_all_asset_specs() if s.key == AssetKey(name)]
    return spec


def window(warn: timedelta | None, fail: timedelta) -> FreshnessPolicy:
    return FreshnessPolicy.time_window(fail_window=fail, warn_window=warn)


# (pipelines of the configuration, the asset, its expected policy)
FRESHNESS = {
    "a daily file pipeline: one day, then two": (
        lambda t: [pipeline_yaml(t)],
        "events",
        window(D, 2 * D),
    ),
    "an hourly file pipeline": (
        lambda t: [pipeline_yaml(t, partitions={"granularity": "hourly"})],
        "events",
        window(H, 2 * H),
    ),
    "a daily time pipeline with 2 grace days": (
        lambda t: [time_pipeline(t, grace_days=2)],
        "orders",
        window(3 * D, 4 * D),
    ),
    "a monthly time pipeline: a month counts its longest, 31 days": (
        lambda t: [time_pipeline(t, partition="monthly")],
        "orders",
        window(31 * D, 62 * D),
    ),
    "an unpartitioned time pipeline on a 6-hour cron": (
        lambda t: [{**time_pipeline(t, partition="none"), "schedule": {"cron": "0 */6 * * *"}}],
        "orders",
        window(6 * H, 12 * H),
    ),
    "a time pipeline on weekdays: its cadence spans the weekend": (
        lambda t: [{**time_pipeline(t), "schedule": {"cron": "0 9 * * 1-5"}}],
        "orders",
        window(3 * D, 6 * D),
    ),
    "an hourly event-time pipeline: delay and allowed lateness are its grace": (
        lambda t: [
            pipeline_yaml(t),
            event_time_pipeline(t, delay="10 minutes", allowed_lateness="5 minutes"),
        ],
        "events_5min",
        window(H + timedelta(minutes=15), 2 * H + timedelta(minutes=15)),
    ),
    "a time x unit pipeline: its windows and grace": (
        lambda t: [unit_pipeline(t, partition="daily", grace_days=1)],
        "answers",
        window(2 * D, 3 * D),
    ),
    "a column pipeline, run by hand: none": (lambda t: [column_pipeline(t)], "customers", None),
    "a unit pipeline, run by hand: none": (lambda t: [unit_pipeline(t)], "answers", None),
    "written out": (
        lambda t: [
            pipeline_yaml(t, freshness={"fail_after": "36 hours", "warn_after": "25 hours"})
        ],
        "events",
        window(25 * H, 36 * H),
    ),
    "written out without a warning": (
        lambda t: [column_pipeline(t) | {"freshness": {"fail_after": "1 week"}}],
        "customers",
        window(None, 7 * D),
    ),
    "switched off": (lambda t: [pipeline_yaml(t, freshness=False)], "events", None),
}


@pytest.mark.parametrize(
    ("pipelines", "asset", "policy"), list(FRESHNESS.values()), ids=list(FRESHNESS)
)
def test_each_pipelines_freshness_policy(
    tmp_path: Path, pipelines: Any, asset: str, policy: FreshnessPolicy | None
) -> None:
    assert asset_spec(*pipelines(tmp_path), name=asset).freshness_policy == policy


@pytest.mark.parametrize(
    ("freshness", "said"),
    [
        ({"fail_after": "30 seconds"}, "freshness.fail_after '30 seconds' is refused"),
        ({"fail_after": "1 day", "warn_after": "1 day"}, "shorter than fail_after '1 day'"),
        ({"fail_after": "soon"}, "duration 'soon' is refused"),
        ({"warn_after": "1 hour"}, "freshness.warn_after '1 hour' needs fail_after"),
        ({"enabled": False, "fail_after": "1 day"}, "enabled false gives the asset no policy"),
    ],
)
def test_a_freshness_that_dagster_would_refuse_fails_at_load(
    tmp_path: Path, freshness: dict[str, Any], said: str
) -> None:
    with pytest.raises(ConfigError, match="pipeline 'events'") as raised:
        project_config(pipeline_yaml(tmp_path, freshness=freshness))
    assert said in str(raised.value)


# ----------------------------------------------------------------------- automation_condition
# (the key as written, Dagster's condition on the asset)
AUTOMATION = {
    "absent: none": (None, None),
    "none": ("none", None),
    "eager": ("eager", AutomationCondition.eager()),
    "on_missing": ("on_missing", AutomationCondition.on_missing()),
    "on_cron": ({"on_cron": "0 6 * * *"}, AutomationCondition.on_cron("0 6 * * *")),
    "on_cron in a timezone": (
        {"on_cron": "0 6 * * 1", "cron_timezone": "Europe/Paris"},
        AutomationCondition.on_cron("0 6 * * 1", "Europe/Paris"),
    ),
}
#: every kind's pipeline (the asset's name), the key set on it
KINDS = {
    "file path": (lambda t: pipeline_yaml(t), "events"),
    "time": (time_pipeline, "orders"),
    "unit": (unit_pipeline, "answers"),
    "time x unit": (lambda t: unit_pipeline(t, grace_days=1), "answers"),
    "column": (column_pipeline, "customers"),
    "event time": (event_time_pipeline, "events_5min"),
}


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(("written", "condition"), list(AUTOMATION.values()), ids=list(AUTOMATION))
def test_each_kinds_automation_condition_is_dagsters(
    tmp_path: Path, kind: str, written: Any, condition: AutomationCondition | None
) -> None:
    make, name = KINDS[kind]
    pipeline = make(tmp_path) | ({} if written is None else {"automation_condition": written})
    others = [] if name != "events_5min" else [pipeline_yaml(tmp_path)]  # its upstream
    assert asset_spec(*others, pipeline, name=name).automation_condition == condition


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ({"on_cron": "61 * * * *"}, "automation_condition.on_cron '61 * * * *' is not a cron"),
        ("eagerly", "automation_condition"),
        ({"on_cron": "0 6 * * *", "timezone": "UTC"}, "timezone"),
    ],
)
def test_an_automation_condition_dagster_cannot_evaluate_fails_at_load(
    tmp_path: Path, written: Any, said: str
) -> None:
    with pytest.raises(ConfigError, match="pipeline 'events'") as raised:
        project_config(pipeline_yaml(tmp_path) | {"automation_condition": written})
    assert said in str(raised.value)


def test_an_eager_event_time_asset_is_requested_when_its_upstreams_newest_day_is_updated(
    tmp_path: Path,
) -> None:
    """Dagster's own evaluation (the automation sensor's): an update of the upstream's newest
    partition requests the aggregate's; an update of an older day requests nothing (eager keeps
    to the latest time window; a backfill re-runs older days)."""
    days = {"granularity": "daily", "start": "2024-01-28"}
    aggregate = event_time_pipeline(tmp_path) | {"automation_condition": "eager"}
    defs = build_definitions(
        project_config(pipeline_yaml(tmp_path, partitions=days), aggregate | {"partitions": days})
    )
    instance = DagsterInstance.ephemeral()
    at = datetime(2024, 1, 31, 1, tzinfo=UTC)  # the newest daily partition: 2024-01-30
    key = AssetKey("events_5min")

    def evaluate(cursor: Any = None) -> Any:
        return evaluate_automation_conditions(
            defs=defs, instance=instance, cursor=cursor, evaluation_time=at
        )

    steps = [  # (the upstream partition updated before the evaluation, what is requested)
        (None, set()),
        ("2024-01-30", {"2024-01-30"}),
        ("2024-01-29", set()),
        ("2024-01-30", {"2024-01-30"}),
    ]
    cursor = None
    for updated, requested in steps:
        if updated is not None:
            instance.report_runless_asset_event(
                AssetMaterialization(asset_key="events", partition=updated)
            )
        result = evaluate(cursor)
        assert result.get_requested_partitions(key) == requested, updated
        cursor = result.cursor


def column_names(spec: Any) -> list[tuple[str, str]]:
    schema = spec.metadata[COLUMN_SCHEMA_KEY]
    return [(column.name, column.type) for column in schema.columns]


def test_the_column_schema_comes_from_the_declared_ddl(tmp_path: Path) -> None:
    orders = asset_spec(time_pipeline(tmp_path), name="orders")
    assert column_names(orders) == [("id", "bigint"), ("updated_at", "timestamp")]
    (order_id, _) = orders.metadata[COLUMN_SCHEMA_KEY].columns
    assert (order_id.description, order_id.constraints.nullable) == ("the order", False)
    # a file download adds its date column; a Delta source declares nothing
    download = time_pipeline(tmp_path, column="day")
    download["source"] = {
        "type": "file_download",
        "url": "https://example.test/orders-{date:%Y-%m-%d}.csv",
        "format": "csv",
        "schema": "id BIGINT, amount DOUBLE",
        "date_column": "day",
    }
    assert column_names(asset_spec(download, name="orders"))[-1] == ("day", "timestamp")
    assert COLUMN_SCHEMA_KEY not in asset_spec(column_pipeline(tmp_path), name="customers").metadata
    assert (
        COLUMN_SCHEMA_KEY
        not in asset_spec(
            pipeline_yaml(tmp_path), event_time_pipeline(tmp_path), name="events_5min"
        ).metadata
    )


_DELTA_TYPES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}


@pytest.mark.spark
def test_a_file_pipelines_column_schema_is_its_delta_tables(spark: Any, tmp_path: Path) -> None:
    """The DDL's columns, the lineage columns and the derived ones: the table's, after a run."""
    world = make_world(tmp_path)
    world.landing.add(hour(28, 10))
    world.loop.run_all(world.loop.tick().run_requests)
    (spec,) = [s for s in world.loop.defs.resolve_all_asset_specs() if s.key.path == ["events"]]
    declared = dict(column_names(spec))
    table = {
        field.name: _DELTA_TYPES.get(str(field.type.type), str(field.type.type))
        for field in DeltaTable(world.table).schema().fields
    }
    assert sorted(declared) == sorted(table)
    assert declared["event_date"] == "derived"  # an expression's type is Spark's to decide
    assert {n: t for n, t in declared.items() if t != "derived"} == {
        n: table[n] for n in declared if declared[n] != "derived"
    }


def test_a_schedule_tick_evaluated_late_decides_at_its_scheduled_time(tmp_path: Path) -> None:
    """The daemon reaches the 2020-01-16 00:00 tick on 2020-01-20: it requests the windows due
    at 01-16 (through 01-15) under that tick's run keys, not those of the wall clock."""
    scheduled, wall = (
        datetime(2020, 1, 16, tzinfo=UTC),
        datetime(2020, 1, 20, 7, 30, tzinfo=UTC),
    )
    config = project_config(time_pipeline(tmp_path, partial_partition=False))
    pipeline = config.pipeline("orders")
    assert isinstance(pipeline, TimePipelineConfig)
    defs = build_definitions(config, clock=lambda: wall)
    schedule = defs.resolve_schedule_def("orders_schedule")
    (tmp_path / "dagster").mkdir()

    def evaluate(at: datetime | None) -> list[Any]:
        with (
            DagsterInstance.local_temp(str(tmp_path / "dagster")) as instance,
            build_schedule_context(
                instance=instance,
                repository_def=defs.get_repository_def(),
                scheduled_execution_time=at,
            ) as context,
        ):
            return list(schedule.evaluate_tick(context).run_requests or [])

    late = evaluate(scheduled)
    assert [r.partition_key for r in late] == list(decide_tick(pipeline, scheduled).keys)
    assert late[-1].partition_key == "2020-01-15"
    assert late[-1].run_key.endswith("|tick 2020-01-16T00:00:00.000Z")
    assert [r.run_key for r in evaluate(scheduled)] == [r.run_key for r in late]
    # Without a scheduled time (evaluated by hand) the tick decides at the clock's time.
    by_hand = evaluate(None)
    assert by_hand[-1].partition_key == "2020-01-19"
    assert by_hand[-1].run_key.endswith("|tick 2020-01-20T07:30:00.000Z")
