"""The YAML configuration: defaults, ${ENV} interpolation, and errors that name the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import pipeline_yaml

from watermark_assets.config import (
    DEFAULT_CONFIG_PATH,
    ColumnPipelineConfig,
    CommitPipelineConfig,
    IngestPipelineConfig,
    interpolate_env,
    load_config,
    parse_config,
)
from watermark_assets.exceptions import ConfigError


def parse(pipelines: list[dict[str, Any]], env: dict[str, str] | None = None) -> Any:
    text = yaml.safe_dump({"pipelines": pipelines})
    return parse_config(text, env=env or {}, base=Path("/base"), origin="test.yaml")


def test_the_demo_file_loads_with_its_three_pipeline_kinds() -> None:
    config = load_config(DEFAULT_CONFIG_PATH, env={})
    kinds = {p.name: type(p) for p in config.pipelines}
    assert kinds == {
        "events": IngestPipelineConfig,
        "clicks": CommitPipelineConfig,
        "orders": ColumnPipelineConfig,
        "customers_pg": ColumnPipelineConfig,
    }
    sources = {
        p.name: p.source.type for p in config.pipelines if isinstance(p, ColumnPipelineConfig)
    }
    assert sources == {"orders": "delta_table", "customers_pg": "jdbc"}


def test_the_environment_variable_chooses_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"pipelines": [pipeline_yaml(tmp_path, name="mine")]}))
    config = load_config(env={"WATERMARK_ASSETS_CONFIG": str(path)})
    assert [p.name for p in config.pipelines] == ["mine"]


def test_defaults_and_the_checkpoint_location_of_the_seed(tmp_path: Path) -> None:
    raw = pipeline_yaml(tmp_path)
    del raw["checkpoint"]
    (pipeline,) = parse([raw]).pipelines
    assert pipeline.checkpoint.interval_files == 100
    assert pipeline.checkpoint.interval_secs == 60
    assert pipeline.sensor.max_files_per_run == 1000
    assert pipeline.source.cold_start.lookback_days is None  # full scan
    assert pipeline.checkpoint_uri == (
        f"{tmp_path}/delta/events/_watermarks/events_main_checkpoint.json"
    )
    assert pipeline.table.quarantine == f"{tmp_path}/delta/events_quarantine"


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("${DATA}/x", {"DATA": "/d"}, "/d/x"),
        ("${DATA:-data}/x", {}, "data/x"),
        ("${DATA:-data}/x", {"DATA": "/d"}, "/d/x"),
        ("no variables", {}, "no variables"),
    ],
    ids=["set variable", "default when unset", "set variable wins", "plain text"],
)
def test_env_interpolation(text: str, env: dict[str, str], expected: str) -> None:
    assert interpolate_env(text, env) == expected


def test_an_unset_variable_without_default_names_it_and_the_fix() -> None:
    with pytest.raises(ConfigError, match=r"'LANDING' is not set; set it or write \$\{LANDING:-"):
        interpolate_env("${LANDING}/events", {})


def test_relative_paths_are_resolved_against_the_base_directory() -> None:
    pipeline = pipeline_yaml(Path("rel"))
    (parsed,) = parse([pipeline]).pipelines
    assert parsed.source.uri == "/base/rel/landing"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"name": "Bad-Name"}, r"pipeline 'Bad-Name': name: .*not a valid pipeline name"),
        (
            {"source": {"format": "xml"}},
            r"pipeline 'events': source.format: .*\(got 'xml'\)",
        ),
        (
            {"source": {"schema": None}},
            r"pipeline 'events': .*source.schema is required for format 'ndjson'",
        ),
        (
            {
                "partitions": {"granularity": "hourly"},
                "source": {"partition_template": "d=%Y-%m-%d"},
            },
            r"has no %H but partitions.granularity is hourly",
        ),
        (
            {"source": {"partition_template": "%d-%m-%Y"}},
            r"pipeline 'events': .*%d-%m-%Y",
        ),
        ({"checkpoint": {"interval_files": 0}}, r"checkpoint.interval_files: .*\(got 0\)"),
        ({"unknown_key": 1}, r"pipeline 'events': unknown_key: Extra inputs"),
    ],
    ids=[
        "a name Dagster would refuse",
        "an unknown file format",
        "ndjson without a schema cannot quarantine",
        "hourly partitions from daily folders",
        "a template whose order is not chronological",
        "a checkpoint interval of zero files",
        "a misspelt key",
    ],
)
def test_errors_name_the_pipeline_the_key_and_the_value(
    tmp_path: Path, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        parse([pipeline_yaml(tmp_path, **overrides)])


def test_a_commit_pipeline_must_stage_inside_its_table(tmp_path: Path) -> None:
    pipeline = {
        "name": "clicks",
        "kind": "commit",
        "source": {"uri": str(tmp_path / "elsewhere"), "format": "parquet"},
        "table": {"uri": str(tmp_path / "table")},
    }
    with pytest.raises(ConfigError, match=r"must be inside table\.uri"):
        parse([pipeline])


def test_pipeline_names_are_unique(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'events' is used twice"):
        parse([pipeline_yaml(tmp_path), pipeline_yaml(tmp_path)])


def test_a_missing_file_says_which_variable_to_set(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="set WATERMARK_ASSETS_CONFIG"):
        load_config(tmp_path / "absent.yaml", env={})


@pytest.mark.parametrize(
    ("kind", "problem"),
    [
        pytest.param(None, "kind is required", id="a pipeline without kind"),
        pytest.param("ingset", "kind 'ingset' is not an accepted value", id="a misspelt kind"),
        pytest.param("Ingest", "kind 'Ingest' is not an accepted value", id="a kind in capitals"),
        pytest.param("", "kind '' is not an accepted value", id="an empty kind"),
    ],
)
def test_a_missing_or_unknown_kind_names_the_pipeline_and_the_accepted_values(
    tmp_path: Path, kind: str | None, problem: str
) -> None:
    raw = pipeline_yaml(tmp_path)
    if kind is None:
        del raw["kind"]
    else:
        raw["kind"] = kind
    with pytest.raises(ConfigError) as raised:
        parse([raw])
    error = raised.value
    assert (error.pipeline, error.key, error.value) == ("events", "kind", kind)
    assert f"test.yaml: pipeline 'events': {problem}; set it to one of 'ingest' (" in str(error)
    assert "'commit' (" in str(error)
    assert "discriminator" not in str(error)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        pytest.param(
            "id BIGNT, ts TIMESTAMP",
            r"source.schema: .*at 'BIGNT' \(line 1, column 4\) expected a Spark type",
            id="a misspelt type",
        ),
        pytest.param(
            "id BIGINT,",
            r"source.schema: .*at the end .* expected a column name",
            id="a trailing comma",
        ),
        pytest.param(
            "event-id STRING",
            r"source.schema: .*at '-'.*backquotes",
            id="an unquoted name with a dash",
        ),
        pytest.param(
            "code CHAR(3)",
            r"source.schema: .*at 'CHAR'.*expected STRING",
            id="char, which Spark's reader refuses",
        ),
    ],
)
def test_an_invalid_spark_schema_is_refused_when_the_configuration_loads(
    tmp_path: Path, schema: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=r"pipeline 'events': " + message):
        parse([pipeline_yaml(tmp_path, source={"schema": schema})])


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param("id BIGINT, ts TIMESTAMP -- the event time", id="a trailing -- comment"),
        pytest.param("`user id` STRUCT<a: INT, b ARRAY<STRING>>", id="nested types"),
    ],
)
def test_a_valid_spark_schema_loads_as_written(tmp_path: Path, schema: str) -> None:
    (pipeline,) = parse([pipeline_yaml(tmp_path, source={"schema": schema})]).pipelines
    assert pipeline.source.schema_ddl == schema
