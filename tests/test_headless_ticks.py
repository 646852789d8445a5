"""A headless pass's sensor ticks are the sensor's ticks in the UI (``defs/headless_ticks.py``):
after ``watermark-assets run-sensors`` (and so ``demo``), the sensor's page lists the pass's ticks,
read the way the webserver reads them (GraphQL over a workspace that loaded the code location,
in process); switching the sensor on then starts the daemon's own ticks after them.

A real local instance (DAGSTER_HOME in a temp folder); no Spark: the landing folder is empty, so
the ticks request no run."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import TEST_SPARK_CONF, pipeline_yaml
from dagster import DagsterInstance
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._daemon.sensor import execute_sensor_iteration
from dagster_graphql.test.utils import execute_dagster_graphql

from watermark_assets.cli import main
from watermark_assets.names import CODE_LOCATION

TICKS = """
query Ticks($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    ... on Sensor {
      sensorState {
        status
        ticks(limit: 10) { status skipReason runIds timestamp }
      }
    }
  }
}
"""
SELECTOR = {
    "repositoryLocationName": CODE_LOCATION,
    "repositoryName": "__repository__",
    "sensorName": "events_sensor",
}


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An instance in DAGSTER_HOME, an empty landing folder, and a configuration file."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    (tmp_path / "landing").mkdir()
    config = tmp_path / "pipelines.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "spark": {"master": "local[2]", "conf": TEST_SPARK_CONF},
                "pipelines": [pipeline_yaml(tmp_path)],
            }
        ),
        encoding="utf-8",
    )
    (tmp_path / "location.py").write_text(
        "from watermark_assets.config import load_config\n"
        "from watermark_assets.defs import build_definitions\n"
        f"defs = build_definitions(load_config({str(config)!r}))\n",
        encoding="utf-8",
    )
    return tmp_path


def ticks(workspace: WorkspaceProcessContext) -> dict[str, Any]:
    result = execute_dagster_graphql(
        workspace.create_request_context(), TICKS, {"selector": SELECTOR}
    )
    assert not result.errors, result.errors
    return result.data["sensorOrError"]["sensorState"]


def test_the_sensors_page_lists_the_passs_ticks_and_the_daemon_goes_on_after_them(
    world: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert main(["--config", str(world / "pipelines.yaml"), "run-sensors"]) == 0
    assert "events tick 1: Initial: no files at all under" in capfd.readouterr().out

    with DagsterInstance.get() as instance:
        origin = InProcessCodeLocationOrigin(
            LoadableTargetOrigin(python_file=str(world / "location.py"), attribute="defs"),
            location_name=CODE_LOCATION,
        )
        with WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget(origin)) as workspace:
            state = ticks(workspace)
            assert state["status"] == "STOPPED", "the pass records ticks, it switches nothing on"
            [recorded] = state["ticks"]
            assert recorded["status"] == "SKIPPED"
            assert recorded["skipReason"].startswith("Initial: no files at all under ")
            assert recorded["runIds"] == []

            # Switched on, the daemon's first tick follows the recorded one (it does not take
            # the recorded tick for an interrupted one of its own)
            location = workspace.create_request_context().get_code_location(CODE_LOCATION)
            sensor = location.get_repository("__repository__").get_sensor("events_sensor")
            instance.start_sensor(sensor)
            list(execute_sensor_iteration(workspace, logging.getLogger("test"), None, None))
            state = ticks(workspace)
            assert state["status"] == "RUNNING"
            newest, older = state["ticks"]
            assert older == recorded
            assert newest["status"] == "SKIPPED"
            assert newest["timestamp"] > recorded["timestamp"]
            assert newest["skipReason"] == recorded["skipReason"]


#: case -> (the configured spark.conf, the Spark settings of the headless pass's runs)
QUIET_SPARK_CASES = {
    "Spark's logging at FATAL by default": ({}, "FATAL"),
    "the configuration's own log level wins": ({"spark.log.level": "WARN"}, "WARN"),
}


@pytest.mark.parametrize(
    ("conf", "level"), QUIET_SPARK_CASES.values(), ids=QUIET_SPARK_CASES.keys()
)
def test_a_headless_pass_quiets_spark_without_rewriting_the_configuration(
    tmp_path: Path, conf: dict[str, str], level: str
) -> None:
    from watermark_assets.config import parse_config
    from watermark_assets.defs.build import build_definitions
    from watermark_assets.defs.jobs import SPARK_RESOURCE_KEY
    from watermark_assets.kinds.headless import QUIET_SPARK, quiet_definitions

    (tmp_path / "source").mkdir()
    pipeline = {
        "name": "orders",
        "source": {"type": "delta_table", "uri": str(tmp_path / "source")},
        "watermark": {"kind": "column", "columns": ["id"]},
        "table": {"uri": str(tmp_path / "orders")},
    }
    text = yaml.safe_dump({"spark": {"conf": conf}, "pipelines": [pipeline]})
    config = parse_config(text, env={}, base=tmp_path, origin="pipelines.yaml")
    configured = config.model_dump()

    for defs in (quiet_definitions(config), build_definitions(config, spark_defaults=QUIET_SPARK)):
        settings = defs.resources[SPARK_RESOURCE_KEY].spark_config
        assert settings["spark.log.level"] == level
    assert config.model_dump() == configured, "nothing rewrote the configuration"
    plain = build_definitions(config).resources[SPARK_RESOURCE_KEY].spark_config
    assert plain.get("spark.log.level") == conf.get("spark.log.level"), "only a pass is quieted"
