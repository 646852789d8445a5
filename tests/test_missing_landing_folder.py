"""A landing folder that does not exist (renamed, or a typo in ``source.uri``) is an error, never
"Idle": on the sensor's tick, in ``explain`` and in ``summary`` (exit status 1 or 2), and a
warning when the definitions load (which still succeeds). An existing empty folder stays Idle
(Initial before any file). Issue 21, item 6; issue 24.

On S3 a folder is a prefix: it exists when an object is under it (the empty ``prefix/`` marker
included); a missing bucket says so.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from _landing import FROZEN_NOW
from _ports import free_port
from _sensor_loop import SensorLoop
from conftest import TEST_SPARK_CONF, pipeline_yaml, project_config, s3_project
from dagster import DagsterInstance

from watermark_assets import storage
from watermark_assets.cli import main
from watermark_assets.defs.build import build_definitions
from watermark_assets.exceptions import LandingFolderMissingError, LandingFolderMissingWarning
from watermark_assets.sources.locations import server_address


def files_pipeline(root: Path) -> dict[str, Any]:
    """``source.type: files``, landing under ``root/landing``."""
    return pipeline_yaml(root)


def parquet_commit_pipeline(root: Path) -> dict[str, Any]:
    """``source.type: parquet_commit``: the table folder is the landing folder."""
    table = root / "delta" / "events"
    return {
        "name": "events",
        "source": {"type": "parquet_commit", "uri": str(table)},
        "watermark": {"partition_template": "date=%Y-%m-%d"},
        "table": {"uri": str(table), "partition_by": ["date"]},
        "partitions": {"granularity": "daily", "start": "2024-01-01"},
    }


SOURCES = pytest.mark.parametrize(
    "document_of",
    [
        pytest.param(files_pipeline, id="landing files read by Spark (files)"),
        pytest.param(parquet_commit_pipeline, id="Parquet committed in place (parquet_commit)"),
    ],
)


def landing_of(document: dict[str, Any]) -> Path:
    return Path(document["source"]["uri"])


def write_config(root: Path, document: dict[str, Any]) -> Path:
    path = root / "pipelines.yaml"
    project = {"spark": {"master": "local[2]", "conf": TEST_SPARK_CONF}, "pipelines": [document]}
    path.write_text(yaml.safe_dump(project), encoding="utf-8")
    return path


def assert_names_pipeline_path_and_fix(text: str, landing: Path) -> None:
    assert "'events'" in text, text
    assert str(landing) in text, text
    assert "does not exist" in text and "Fix source.uri" in text, text


@SOURCES
def test_a_tick_over_a_missing_landing_folder_is_an_error_naming_pipeline_path_and_fix(
    tmp_path: Path, document_of: Any
) -> None:
    document = document_of(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LandingFolderMissingWarning)
        defs = build_definitions(project_config(document), clock=lambda: FROZEN_NOW)
    loop = SensorLoop(defs, DagsterInstance.ephemeral())
    with pytest.raises(Exception) as raised:
        loop.tick()
    error: BaseException | None = raised.value
    while error is not None and not isinstance(error, LandingFolderMissingError):
        error = error.__cause__
    assert error is not None, f"not a LandingFolderMissingError: {raised.value!r}"
    assert_names_pipeline_path_and_fix(str(error), landing_of(document))

    landing_of(document).mkdir(parents=True)
    assert (loop.tick().skip_message or "").startswith("Initial: no files at all")


@SOURCES
def test_the_definitions_load_with_a_warning_for_a_missing_landing_folder(
    tmp_path: Path, document_of: Any
) -> None:
    document = document_of(tmp_path)
    with pytest.warns(LandingFolderMissingWarning) as caught:
        defs = build_definitions(project_config(document), clock=lambda: FROZEN_NOW)
    assert defs.resolve_sensor_def("events_sensor") is not None, "loading went on"
    [warning] = [w for w in caught if issubclass(w.category, LandingFolderMissingWarning)]
    assert_names_pipeline_path_and_fix(str(warning.message), landing_of(document))

    landing_of(document).mkdir(parents=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LandingFolderMissingWarning)
        build_definitions(project_config(document), clock=lambda: FROZEN_NOW)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param({"type": "parquet"}, id="a Parquet folder"),
        pytest.param({"type": "csv", "schema": "id BIGINT, updated_at TIMESTAMP"}, id="CSV files"),
        pytest.param({"type": "delta_table"}, id="a Delta table"),
    ],
)
def test_a_column_pipeline_over_a_missing_source_folder_warns_at_load_and_fails_before_spark(
    tmp_path: Path, source: dict[str, Any]
) -> None:
    orders = {
        "name": "orders",
        "source": {**source, "uri": str(tmp_path / "typo")},
        "watermark": {"columns": ["updated_at"]},
        "table": {"uri": str(tmp_path / "delta" / "orders")},
    }
    with pytest.warns(LandingFolderMissingWarning, match=r"'orders': its source folder '.*typo'"):
        defs = build_definitions(project_config(orders))
    error = step_error(defs, "orders_job", "LandingFolderMissingError")
    assert "Fix source.uri" in error.message


def step_error(defs: Any, job: str, cls_name: str) -> Any:
    """The ``cls_name`` error (by cause) of the one failed step of a run of ``job``."""
    result = defs.resolve_job_def(job).execute_in_process(raise_on_error=False)
    assert not result.success
    [failure] = [event for event in result.all_events if event.is_step_failure]
    error = failure.step_failure_data.error
    while error is not None and error.cls_name != cls_name:
        error = error.cause
    assert error is not None, failure.step_failure_data.error
    return error


@SOURCES
@pytest.mark.parametrize(
    ("command", "status"),
    [
        pytest.param(["summary"], 1, id="summary exits 1 and says which pipeline cannot run"),
        pytest.param(["explain", "events"], 2, id="explain exits 2 with the error"),
        pytest.param(
            ["run-sensors"], 1, id="run-sensors says the tick failed, goes on and exits 1"
        ),
    ],
)
def test_summary_and_explain_report_a_missing_landing_folder_and_exit_non_zero(
    tmp_path: Path,
    document_of: Any,
    command: list[str],
    status: int,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "dagster_home").mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    document = document_of(tmp_path)
    config = write_config(tmp_path, document)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LandingFolderMissingWarning)
        assert main(["--config", str(config), *command]) == status
    out, err = capfd.readouterr()
    assert_names_pipeline_path_and_fix(err, landing_of(document))
    if command != ["explain", "events"]:
        [row] = [line for line in out.splitlines() if line.startswith("events ")]
        assert "ERROR: no landing folder" in row and "Idle" not in row
    if command == ["run-sensors"]:
        assert "events tick 1: FAILED: pipeline 'events'" in out

    landing_of(document).mkdir(parents=True)
    assert main(["--config", str(config), *command]) == 0, "an empty folder is no problem"
    out, err = capfd.readouterr()
    assert "does not exist" not in out + err


# --- the check itself, on local disk and on an S3 server --------------------------------------


def test_on_local_disk_a_folder_exists_when_it_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "a-file").write_text("x")
    assert storage.missing_folder(str(tmp_path / "empty")) is None
    assert storage.missing_folder(str(tmp_path / "nowhere")) == "no such folder"
    assert storage.missing_folder(str(tmp_path / "a-file")) == "it is a file, not a folder"


def test_on_s3_a_prefix_exists_when_an_object_is_under_it(s3_storage: Any) -> None:
    bucket = s3_storage.new_bucket()
    client = s3_storage.client()
    client.put_object(Bucket=bucket, Key="landing/date=2024-01-28/1706400000-1.json", Body=b"{}")
    client.put_object(Bucket=bucket, Key="empty/", Body=b"")  # a console's "folder"
    cases = {
        f"s3://{bucket}/landing": None,
        f"s3://{bucket}/landing/date=2024-01-28": None,
        f"s3://{bucket}/empty": None,
        f"s3://{bucket}": None,
        f"s3://{bucket}/landin": f"no object under the prefix 'landin/' of bucket {bucket!r}",
        "s3://no-such-bucket-wa/landing": "no bucket 'no-such-bucket-wa'",
    }
    assert {uri: storage.missing_folder(uri) for uri in cases} == cases


def test_on_s3_a_tick_over_a_prefix_without_objects_fails_until_the_folder_marker_is_put(
    s3_server: Any, tmp_path: Path
) -> None:
    bucket = s3_server.new_bucket()
    document = pipeline_yaml(tmp_path, source={"uri": f"s3://{bucket}/landing"})
    with s3_project(s3_server, document) as config:
        with pytest.warns(LandingFolderMissingWarning, match="no object under the prefix"):
            defs = build_definitions(config, clock=lambda: FROZEN_NOW)
        loop = SensorLoop(defs, DagsterInstance.ephemeral())
        with pytest.raises(LandingFolderMissingError, match="put an empty object named 'landing/'"):
            loop.tick()
        s3_server.client().put_object(Bucket=bucket, Key="landing/", Body=b"")
        assert (loop.tick().skip_message or "").startswith("Initial: no files at all")


# --- a database or an API that takes no connection: the run fails before reading (issue 24) ---


UNREACHABLE = {
    "PostgreSQL through JDBC, stopped": (
        lambda port: {
            "type": "jdbc",
            "url": f"jdbc:postgresql://127.0.0.1:{port}/shop",
            "table": "orders",
        },
        "jdbc:postgresql://127.0.0.1:{port}/shop",
        "Start the database",
    ),
    "an HTTP API that is down": (
        lambda port: {
            "type": "http_api",
            "url": f"http://127.0.0.1:{port}/orders?api_key=s3cret",
            "schema": "id BIGINT, updated_at TIMESTAMP",
        },
        "http://127.0.0.1:{port}/orders?api_key=***",
        "serve-demo-api",
    ),
}


@pytest.mark.parametrize(
    ("source_of", "shown", "fix"), list(UNREACHABLE.values()), ids=list(UNREACHABLE)
)
def test_a_run_over_an_unreachable_source_fails_before_reading_naming_pipeline_and_url(
    tmp_path: Path, source_of: Any, shown: str, fix: str
) -> None:
    port = free_port()  # nothing listens on it
    orders = {
        "name": "orders",
        "source": source_of(port),
        "watermark": {"columns": ["updated_at"]},
        "table": {"uri": str(tmp_path / "delta" / "orders")},
    }
    defs = build_definitions(project_config(orders))
    error = step_error(defs, "orders_job", "SourceUnreachableError")
    url = shown.format(port=port)
    assert f"pipeline 'orders': its source.url '{url}' cannot be reached" in error.message
    assert f"no connection to 127.0.0.1:{port}" in error.message and fix in error.message
    assert "s3cret" not in error.message


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("jdbc:postgresql://db.example:6543/shop", ("db.example", 6543)),
        ("jdbc:postgresql://db.example/shop?user=me", ("db.example", 5432)),
        ("jdbc:postgresql://me:pw@db.example:6000/shop", ("db.example", 6000)),
        ("jdbc:postgresql:shop", ("localhost", 5432)),
        ("jdbc:postgresql://a:5432,b:5433/shop", None),
    ],
    ids=["host and port", "default port", "user info", "no host: this machine", "fail-over"],
)
def test_the_address_of_a_jdbc_url(url: str, address: tuple[str, int] | None) -> None:
    pipeline = project_config(
        {
            "name": "orders",
            "source": {"type": "jdbc", "url": url, "table": "orders"},
            "watermark": {"columns": ["updated_at"]},
            "table": {"uri": "/lake/orders"},
        }
    ).pipelines[0]
    found = server_address(pipeline)
    assert (found[1:] if found else None) == address
