"""A newcomer's first Dagster commands, typed in the repository root with DAGSTER_HOME unset.

``dagster definitions validate`` and ``dagster dev`` then read the repository's ``dagster.yaml``
(which needs no environment variable) and keep their storage in a temporary
``.tmp_dagster_home_*`` folder that they remove when they exit. Both run as subprocesses, as
typed, on the demo configuration unless a test writes its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import pipeline_yaml

from .dagster_dev import REPO_ROOT, DagsterDev, repo_pythonpath

DAGSTER = Path(sys.executable).with_name("dagster")


def newcomer_env(config: Path | None = None) -> dict[str, str]:
    """The test's environment without DAGSTER_HOME (and with the given pipelines file)."""
    unset = ("DAGSTER_HOME", "WATERMARK_ASSETS_CONFIG", "WATERMARK_ASSETS_DATA")
    env = {name: value for name, value in os.environ.items() if name not in unset}
    if config is not None:
        env["WATERMARK_ASSETS_CONFIG"] = str(config)
    env["PYTHONPATH"] = repo_pythonpath()
    return env


def temporary_homes() -> set[Path]:
    return set(REPO_ROOT.glob(".tmp_dagster_home_*"))


def validate(config: Path | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(DAGSTER), "definitions", "validate"],
        cwd=REPO_ROOT,
        env=newcomer_env(config),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.mark.slow
def test_dagster_definitions_validate_passes_in_the_repository_root_without_dagster_home() -> None:
    homes = temporary_homes()
    completed = validate(None)
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    assert "Validation successful for code location watermark_assets" in output
    assert temporary_homes() == homes, "the temporary instance folder is removed on exit"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "named"),
    [
        pytest.param(
            {"sensor": {"max_files_per_run": 0}},
            "sensor.max_files_per_run",
            id="a zero batch size fails naming sensor.max_files_per_run",
        ),
        pytest.param(
            {"partitions": {"granularity": "yearly"}},
            "partitions.granularity",
            id="an unknown granularity fails naming partitions.granularity",
        ),
    ],
)
def test_dagster_definitions_validate_fails_on_an_invalid_config_naming_pipeline_and_key(
    tmp_path: Path, override: dict[str, Any], named: str
) -> None:
    config = tmp_path / "pipelines.yaml"
    pipeline = pipeline_yaml(tmp_path, **override)
    config.write_text(yaml.safe_dump({"pipelines": [pipeline]}), encoding="utf-8")
    completed = validate(config)
    assert completed.returncode != 0
    assert f"pipeline 'events': {named}" in completed.stdout + completed.stderr


@pytest.mark.slow
def test_dagster_dev_serves_the_code_location_from_the_repository_root_and_stops_cleanly(
    tmp_path: Path,
) -> None:
    homes = temporary_homes()
    dev = DagsterDev(None, None, tmp_path / "dagster-dev.log", workspace=None)
    dev.start()
    try:
        dev.wait_until_ready(timeout=180)  # /server_info answers, the location is LOADED
        assert len(temporary_homes() - homes) == 1, "storage in a .tmp_dagster_home_* folder"
        assets = dev.graphql("{ assetNodes { assetKey { path } } }")["assetNodes"]
        assert {tuple(a["assetKey"]["path"]) for a in assets} >= {
            ("events",),
            ("clicks",),
            ("orders",),
            ("customers_pg",),
        }
    finally:
        exit_code = dev.stop(grace=60)
    assert exit_code is not None, f"dagster dev ignored SIGTERM\n{dev.log_tail()}"
    assert temporary_homes() == homes, f"dagster dev left its temporary home\n{dev.log_tail()}"
