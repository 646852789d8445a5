"""``group``, ``owners`` and ``tags`` per pipeline: the asset's group, owners and tags in Dagster,
the same keys for every watermark kind; defaults as before (the kind's group, none, none)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import pipeline_yaml, project_config
from dagster import AssetKey

from watermark_assets.config import parse_config
from watermark_assets.defs import build_definitions
from watermark_assets.exceptions import ConfigError


def _column(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "name": "orders",
        "source": {"type": "delta_table", "uri": str(tmp_path / "sources" / "orders")},
        "watermark": {"columns": ["updated_at"]},
        "table": {"uri": str(tmp_path / "delta" / "orders")},
        **extra,
    }


def _time(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    watermark = {"kind": "time", "column": "updated_at", "from": "2024-01-01", "to": "P0D"}
    return {
        **_column(tmp_path, **extra),
        "name": "orders_daily",
        "watermark": watermark,
        "table": {"uri": str(tmp_path / "delta" / "orders_daily")},
    }


IDENTITY = {
    "group": "sales",
    "owners": ["team:data-eng", "ana@example.com"],
    "tags": {"domain": "sales"},
}


def test_every_kind_takes_its_group_owners_and_tags(tmp_path: Path) -> None:
    (tmp_path / "landing").mkdir()
    config = project_config(
        pipeline_yaml(tmp_path, **IDENTITY),
        _column(tmp_path, **IDENTITY),
        _time(tmp_path, **IDENTITY),
    )
    specs = {s.key: s for s in build_definitions(config).resolve_all_asset_specs()}
    for name in ("events", "orders", "orders_daily"):
        spec = specs[AssetKey(name)]
        assert spec.group_name == "sales", name
        assert list(spec.owners) == ["team:data-eng", "ana@example.com"], name
        assert spec.tags["domain"] == "sales", name


def test_the_defaults_are_the_kinds_groups_and_no_owner(tmp_path: Path) -> None:
    (tmp_path / "landing").mkdir()
    config = project_config(pipeline_yaml(tmp_path), _column(tmp_path), _time(tmp_path))
    specs = {s.key: s for s in build_definitions(config).resolve_all_asset_specs()}
    groups = {
        name: specs[AssetKey(name)].group_name for name in ("events", "orders", "orders_daily")
    }
    assert groups == {
        "events": "watermark_ingestion",
        "orders": "watermark_column_ingestion",
        "orders_daily": "watermark_time_ingestion",
    }
    assert not specs[AssetKey("orders")].owners


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"group": "sales team"}, "group 'sales team' is refused"),
        ({"owners": ["data-eng"]}, "owners ['data-eng'] are refused"),
        ({"tags": {"a key": "x"}}, "tags {'a key': 'x'} are refused"),
    ],
)
def test_a_bad_identity_is_refused_naming_the_value(
    tmp_path: Path, extra: dict[str, Any], said: str
) -> None:
    import yaml

    text = yaml.safe_dump({"pipelines": [_column(tmp_path, **extra)]})
    with pytest.raises(ConfigError, match=said.replace("[", r"\[").replace("{", r"\{")):
        parse_config(text, env={}, base=tmp_path, origin="pipelines.yaml")


def _event_time(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "name": "events_5min",
        "source": {"type": "pipeline", "pipeline": "events"},
        "watermark": {"kind": "event_time", "column": "event_time", "delay": "10 minutes"},
        "window": {"size": "5 minutes"},
        "aggregates": {"events": "count"},
        "table": {"uri": str(tmp_path / "delta" / "events_5min")},
        "partitions": {"granularity": "hourly", "start": "2026-04-03 09:00:00"},
        **extra,
    }


#: pipeline -> (its key_prefix as written, the asset key it gives)
PREFIXED = {
    "events": ("sales/raw", ["sales", "raw", "events"]),
    "orders": (["sales", "raw"], ["sales", "raw", "orders"]),
    "orders_daily": ("sales/daily", ["sales", "daily", "orders_daily"]),
    "events_5min": (["agg"], ["agg", "events_5min"]),
}


def _prefixed_project(tmp_path: Path) -> Any:
    (tmp_path / "landing").mkdir(exist_ok=True)
    orders = _column(tmp_path, key_prefix=PREFIXED["orders"][0])
    # the column pipeline reads the file pipeline's table: its upstream edge is that key
    orders["source"]["uri"] = str(tmp_path / "delta" / "events")
    return project_config(
        pipeline_yaml(tmp_path, key_prefix=PREFIXED["events"][0]),
        orders,
        _time(tmp_path, key_prefix=PREFIXED["orders_daily"][0]),
        _event_time(tmp_path, key_prefix=PREFIXED["events_5min"][0]),
    )


def test_key_prefix_puts_every_kinds_asset_checks_and_jobs_under_it(tmp_path: Path) -> None:
    from watermark_assets.defs.keys import node_name

    config = _prefixed_project(tmp_path)
    defs = build_definitions(config)
    graph = defs.resolve_asset_graph()
    expected = {name: AssetKey(path) for name, (_, path) in PREFIXED.items()}

    pipelines_keys = {k for k in graph.get_all_asset_keys() if k.path[0] != "source"}
    assert pipelines_keys == set(expected.values())
    checks = {key.asset_key for key in graph.asset_check_keys}
    assert checks == set(expected.values()), "every kind's checks are on its prefixed asset"
    for name, key in expected.items():
        job = defs.resolve_job_def(f"{name}_job")
        assert set(job.asset_layer.selected_asset_keys) == {key}, name
        assert defs.resolve_assets_def(key).node_def.name == node_name(config.pipeline(name))
    targets = {s.name: s.job_name for s in defs.sensors if s.has_jobs}
    for name in ("events", "events_5min", "orders_daily"):
        assert targets[f"{name}_sensor"] == f"{name}_job", targets
    deps = {name: set(graph.get(key).parent_keys) for name, key in expected.items()}
    assert deps["events_5min"] == {expected["events"]}, "the aggregate reads the prefixed events"
    assert deps["orders"] == {expected["events"]}, "a pipeline reading another's table"


def test_without_key_prefix_the_key_is_the_pipelines_name(tmp_path: Path) -> None:
    (tmp_path / "landing").mkdir()
    config = project_config(pipeline_yaml(tmp_path), _column(tmp_path), _event_time(tmp_path))
    graph = build_definitions(config).resolve_asset_graph()
    keys = {k for k in graph.get_all_asset_keys() if k.path[0] != "source"}
    assert keys == {AssetKey("events"), AssetKey("orders"), AssetKey("events_5min")}


@pytest.mark.parametrize(
    ("written", "parts"),
    [("sales/raw", ("sales", "raw")), (["sales", "raw"], ("sales", "raw")), ("sales", ("sales",))],
    ids=["a path string", "a list", "one part"],
)
def test_key_prefix_is_a_list_or_a_path(
    tmp_path: Path, written: Any, parts: tuple[str, ...]
) -> None:
    config = project_config(_column(tmp_path, key_prefix=written))
    assert config.pipeline("orders").key_prefix == parts
    assert config.pipeline("orders").asset_key_path == (*parts, "orders")


@pytest.mark.parametrize(
    "written", ["sales team/raw", "sales//raw", ["sales", "a-b"], "/sales"], ids=str
)
def test_a_bad_key_prefix_is_refused_naming_the_value(tmp_path: Path, written: Any) -> None:
    import yaml

    text = yaml.safe_dump({"pipelines": [_column(tmp_path, key_prefix=written)]})
    with pytest.raises(ConfigError, match=r"key_prefix .* is refused") as refused:
        parse_config(text, env={}, base=tmp_path, origin="pipelines.yaml")
    assert "letters, digits and _" in str(refused.value)


@pytest.mark.spark
def test_a_prefixed_file_pipeline_ingests_through_run_sensors(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sensor's run requests, the run, its materialization and checks, and the sensor's
    observations all go to the prefixed asset; nothing goes to the bare name."""
    import yaml
    from _landing import Landing, delta_ids, hour
    from conftest import TEST_SPARK_CONF
    from dagster import AssetRecordsFilter, DagsterInstance

    from watermark_assets.cli import main

    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    Landing(tmp_path / "landing").add(hour(28, 10))
    events = pipeline_yaml(tmp_path, key_prefix="sales/raw")
    path = tmp_path / "pipelines.yaml"
    spark_conf = {"master": "local[2]", "conf": TEST_SPARK_CONF}
    path.write_text(yaml.safe_dump({"spark": spark_conf, "pipelines": [events]}), "utf-8")

    assert main(["--config", str(path), "run-sensors"]) == 0

    assert len(delta_ids(events["table"]["uri"])) == 3
    key = AssetKey(["sales", "raw", "events"])
    check_keys = build_definitions(project_config(events)).resolve_asset_graph().asset_check_keys
    assert {c.asset_key for c in check_keys} == {key}
    with DagsterInstance.get() as instance:
        (run,) = instance.get_runs()
        day = AssetRecordsFilter(asset_key=key, asset_partitions=["2024-01-28"])
        runs_of_day = {r.run_id for r in instance.fetch_materializations(day, limit=5).records}
        observed = instance.fetch_observations(AssetRecordsFilter(asset_key=key), limit=5)
        checked = instance.event_log_storage.get_latest_asset_check_execution_by_key(check_keys)
        bare = instance.get_latest_materialization_event(AssetKey("events"))
    assert run.is_success, run
    assert run.run_id in runs_of_day, "the run materialized the prefixed asset's partition"
    assert observed.records, "the sensor's observations are on the prefixed asset"
    assert bare is None, "nothing is recorded under the pipeline's bare name"
    assert {c.status.value for c in checked.values()} == {"SUCCEEDED"}, checked


def test_a_run_of_a_prefixed_asset_is_tagged_with_its_pipeline() -> None:
    """The run coordinator names the pipeline of a UI run from its selected assets: the key's
    last part, whatever the prefix."""
    from watermark_assets.defs.run_tags import ingesting_pipelines

    selected = [AssetKey(["sales", "raw", "events"]), AssetKey("clicks")]
    assert ingesting_pipelines({}, "__ASSET_JOB", selected) == ["clicks", "events"]
