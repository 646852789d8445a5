"""The YAML configuration: defaults, ${ENV} interpolation, and errors that name the fix."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import pipeline_yaml

from watermark_assets.config import (
    DEFAULT_CONFIG_PATH,
    ColumnPipelineConfig,
    ConfigDeprecationWarning,
    EventTimePipelineConfig,
    FilePipelineConfig,
    TimePipelineConfig,
    UnitPipelineConfig,
    interpolate_env,
    load_config,
    parse_config,
)
from watermark_assets.exceptions import ConfigError


def parse(pipelines: list[dict[str, Any]], env: dict[str, str] | None = None) -> Any:
    text = yaml.safe_dump({"pipelines": pipelines})
    return parse_config(text, env=env or {}, base=Path("/base"), origin="test.yaml")


def test_the_demo_file_loads_with_its_watermark_kinds_and_source_types() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the demo is written the current way
        config = load_config(DEFAULT_CONFIG_PATH, env={})
    kinds = {p.name: (type(p), p.watermark.kind, p.source.type) for p in config.pipelines}
    assert kinds == {
        "events": (FilePipelineConfig, "file_path", "files"),
        "events_5min": (EventTimePipelineConfig, "event_time", "pipeline"),
        "clicks": (FilePipelineConfig, "file_path", "parquet_commit"),
        "orders": (ColumnPipelineConfig, "column", "delta_table"),
        "customers_pg": (ColumnPipelineConfig, "column", "jdbc"),
        "orders_daily": (TimePipelineConfig, "time", "delta_table"),
        "payments_api_daily": (TimePipelineConfig, "time", "http_api"),
        "orders_monthly": (TimePipelineConfig, "time", "delta_table"),
        "orders_by_status": (UnitPipelineConfig, "unit", "delta_table"),
        "survey_answers": (UnitPipelineConfig, "unit", "delta_table"),  # time x unit
    }
    # What `dagster dev` loads, with no demo process (nor its HTTP API) running.
    from dagster import Definitions

    from watermark_assets.defs import build_definitions

    Definitions.validate_loadable(build_definitions(config))


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
    assert pipeline.watermark.cold_start.lookback_days is None  # full scan
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
                "watermark": {"partition_template": "d=%Y-%m-%d"},
            },
            r"has no %H but partitions.granularity is hourly",
        ),
        (
            {"watermark": {"partition_template": "%d-%m-%Y"}},
            r"pipeline 'events': .*%d-%m-%Y",
        ),
        ({"checkpoint": {"interval_files": 0}}, r"checkpoint.interval_files: .*\(got 0\)"),
        ({"unknown_key": 1}, r"pipeline 'events': unknown_key: unknown key"),
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


def time_pipeline(**watermark: Any) -> dict[str, Any]:
    """A time pipeline 'orders_daily' over a Delta table (its watermark keys given)."""
    return {
        "name": "orders_daily",
        "source": {"type": "delta_table", "uri": "/lake/orders"},
        "watermark": {"kind": "time", "column": "updated_at", **watermark},
        "table": {"uri": "/lake/orders_daily"},
    }


#: (pipeline, its one block as the error shows it) -- issue 24, item 6
BLOCKS = {
    "a misspelt alias (form for from) is one problem, not also 'from is missing'": (
        time_pipeline(form="2024-01-01"),
        "pipeline 'orders_daily': watermark.form: unknown key (got '2024-01-01')\n"
        "  did you mean `from`?\n"
        "  fix: rename form to from",
    ),
    "a misspelt section shows its value as written": (
        {**pipeline_yaml(Path("/d")), "partitons": {"start": "2024-01-01", "granularity": "daily"}},
        "pipeline 'events': partitons: unknown key (got {granularity: daily, start: '2024-01-01'})"
        "\n  did you mean `partitions`?\n  fix: rename partitons to partitions",
    ),
    "an unknown key like no accepted one lists the accepted keys": (
        pipeline_yaml(Path("/d"), checkpoint={"zzz": 1}),
        "pipeline 'events': checkpoint.zzz: unknown key (got 1)\n"
        "  fix: remove it; the keys accepted here: interval_files, interval_secs",
    ),
    "a missing required key names what it is for": (
        time_pipeline(),
        "pipeline 'orders_daily': watermark.from: required key is missing\n"
        "  fix: add from (Start of the first window: an ISO date or datetime",
    ),
    "a number out of range says which numbers are accepted": (
        pipeline_yaml(Path("/d"), checkpoint={"interval_files": 0}),
        "pipeline 'events': checkpoint.interval_files: Input should be greater than or equal "
        "to 1 (got 0)\n  fix: set interval_files to a value greater than or equal to 1",
    ),
    "text for a number": (
        pipeline_yaml(Path("/d"), sensor={"max_runs_per_tick": "x"}),
        "pipeline 'events': sensor.max_runs_per_tick: Input should be a valid integer, unable to "
        "parse string as an integer (got 'x')\n  fix: set max_runs_per_tick to a valid integer",
    ),
}


@pytest.mark.parametrize(("pipeline", "block"), list(BLOCKS.values()), ids=list(BLOCKS))
def test_a_refused_key_is_one_block_with_key_value_did_you_mean_and_fix(
    pipeline: dict[str, Any], block: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        parse([pipeline])
    text = str(raised.value)
    assert text.startswith("test.yaml: invalid configuration, 1 problem:\n\n"), text
    assert block in text, text
    assert "Extra inputs" not in text and "pydantic" not in text and "Field required" not in text
    assert raised.value.__cause__ is None, "pydantic's report is not chained (printed twice)"


def test_every_problem_of_a_file_is_reported_at_once_one_block_each(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        parse(
            [
                time_pipeline(form="2024-01-01"),
                pipeline_yaml(tmp_path, tabel={"uri": "x"}, checkpoint={"interval_files": 0}),
            ]
        )
    error = raised.value
    assert str(error).startswith("test.yaml: invalid configuration, 3 problems:")
    assert [(p.where, p.key, p.suggestion) for p in error.problems] == [
        ("pipeline 'orders_daily'", "watermark.form", "from"),
        ("pipeline 'events'", "checkpoint.interval_files", None),
        ("pipeline 'events'", "tabel", "table"),
    ]
    assert (error.pipeline, error.key) == ("orders_daily", "watermark.form")
    assert len(str(error).split("\n\n")) == 4, "a header, then one block per problem"


def test_a_parquet_commit_source_must_stage_inside_its_table(tmp_path: Path) -> None:
    pipeline = {
        "name": "clicks",
        "source": {"type": "parquet_commit", "uri": str(tmp_path / "elsewhere")},
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
    ("source_type", "problem"),
    [
        pytest.param(None, "source.type is required", id="a source without type"),
        pytest.param("file", "source.type 'file' is not an accepted value", id="a misspelt type"),
        pytest.param("Files", "source.type 'Files' is not an accepted value", id="in capitals"),
        pytest.param("", "source.type '' is not an accepted value", id="an empty type"),
    ],
)
def test_a_missing_or_unknown_source_type_names_the_pipeline_and_the_accepted_values(
    tmp_path: Path, source_type: str | None, problem: str
) -> None:
    raw = pipeline_yaml(tmp_path)
    if source_type is None:
        del raw["source"]["type"]
    else:
        raw["source"]["type"] = source_type
    with pytest.raises(ConfigError) as raised:
        parse([raw])
    error = raised.value
    assert (error.pipeline, error.key, error.value) == ("events", "source.type", source_type)
    assert f"test.yaml: pipeline 'events': {problem}; set it to one of 'files' (" in str(error)
    for accepted in ("parquet_commit", "delta_table", "jdbc", "http_api"):
        assert f"'{accepted}' (" in str(error)
    assert "discriminator" not in str(error)
    suggested = {"file": "files", "Files": "files"}.get(str(source_type))
    assert str(error).endswith(f"; did you mean `{suggested}`?") == (suggested is not None)


@pytest.mark.parametrize(
    ("watermark_kind", "problem"),
    [
        pytest.param("column", "a 'files' source takes a 'file_path' watermark", id="mismatch"),
        pytest.param("time", "a 'files' source takes a 'file_path' watermark", id="time on files"),
        pytest.param(
            "event_time", "sources with a 'event_time' watermark: \\['pipeline'\\]", id="event time"
        ),
        pytest.param("spatial", "watermark.kind 'spatial' is not an accepted value", id="unknown"),
    ],
)
def test_a_watermark_kind_that_does_not_fit_the_source_is_refused(
    tmp_path: Path, watermark_kind: str, problem: str
) -> None:
    raw = pipeline_yaml(tmp_path, watermark={"kind": watermark_kind})
    with pytest.raises(ConfigError, match=problem) as raised:
        parse([raw])
    assert (raised.value.key, raised.value.value) == ("watermark.kind", watermark_kind)


def test_the_watermark_kind_may_be_written_or_left_to_the_source_type(tmp_path: Path) -> None:
    written = pipeline_yaml(tmp_path, watermark={"kind": "file_path"})
    (pipeline,) = parse([written]).pipelines
    assert (pipeline.watermark.kind, pipeline.file_source.needs_spark) == ("file_path", True)
    assert parse([pipeline_yaml(tmp_path)]).pipelines == [pipeline]


def legacy_ingest(tmp_path: Path) -> dict[str, Any]:
    """The pipeline of ``pipeline_yaml`` as it was written before ``source.type``."""
    raw = pipeline_yaml(tmp_path)
    watermark = raw.pop("watermark")
    source = {k: v for k, v in raw["source"].items() if k != "type"}
    return {**raw, "kind": "ingest", "source": {**source, **watermark}}


@pytest.mark.parametrize(
    ("legacy", "current", "fix"),
    [
        pytest.param(
            lambda tmp: legacy_ingest(tmp),
            lambda tmp: pipeline_yaml(tmp),
            "'kind: ingest' is deprecated; write 'source: {type: files, ...}' and move "
            "partition_template from source to watermark",
            id="kind: ingest",
        ),
        pytest.param(
            lambda tmp: {
                "name": "clicks",
                "kind": "commit",
                "source": {"uri": f"{tmp}/t", "format": "parquet", "late_arrival_days": 1},
                "table": {"uri": f"{tmp}/t"},
            },
            lambda tmp: {
                "name": "clicks",
                "source": {"type": "parquet_commit", "uri": f"{tmp}/t"},
                "watermark": {"late_arrival_days": 1},
                "table": {"uri": f"{tmp}/t"},
            },
            "'kind: commit' is deprecated; write 'source: {type: parquet_commit, ...}' and move "
            "late_arrival_days from source to watermark",
            id="kind: commit",
        ),
    ],
)
def test_a_legacy_kind_still_loads_as_the_current_shape_and_says_how_to_write_it(
    tmp_path: Path,
    legacy: Callable[[Path], dict[str, Any]],
    current: Callable[[Path], dict[str, Any]],
    fix: str,
) -> None:
    with pytest.warns(ConfigDeprecationWarning) as caught:
        old = parse([legacy(tmp_path)])
    assert fix in str(caught[0].message)
    assert old == parse([current(tmp_path)])


def test_an_unknown_legacy_kind_names_the_source_types(tmp_path: Path) -> None:
    raw = {**pipeline_yaml(tmp_path), "kind": "ingset"}
    with pytest.raises(ConfigError, match="kind 'ingset' is not accepted; remove 'kind' and set "):
        parse([raw])


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


# --- a date or time that does not exist, written unquoted (YAML reads valid ones as objects) ---


def _time_pipeline(tmp_path: Path) -> dict[str, Any]:
    return {
        "name": "orders",
        "source": {"type": "delta_table", "uri": str(tmp_path / "source")},
        "watermark": {"kind": "time", "column": "updated_at", "from": "2020-01-01"},
        "table": {"uri": str(tmp_path / "delta")},
    }


def _replay_pipeline(tmp_path: Path) -> dict[str, Any]:
    return {
        "name": "orders",
        "source": {"type": "delta_table", "uri": str(tmp_path / "source")},
        "watermark": {"columns": ["updated_at"]},
        "table": {"uri": str(tmp_path / "delta")},
        "replay": {
            "start": "2020-01-01 00:00:00",
            "end": "2020-02-01 00:00:00",
            "chunk": {"days": 1},
            "target_table": str(tmp_path / "backfill"),
        },
    }


TIME_KEYS: dict[str, tuple[Callable[[Path], dict[str, Any]], str, str, list[str]]] = {
    # id: (pipeline, block, key, words the error shows besides the pipeline and the value)
    "time watermark from": (_time_pipeline, "watermark", "from", ["'from'", "ISO date"]),
    "time watermark to": (_time_pipeline, "watermark", "to", ["'to'", "ISO date"]),
    "column replay start": (_replay_pipeline, "replay", "start", ["replay.start", "a date"]),
    "column replay end": (_replay_pipeline, "replay", "end", ["replay.end", "a date"]),
    "file partitions start": (pipeline_yaml, "partitions", "start", ["partitions.start", "ISO"]),
    "file partitions end": (pipeline_yaml, "partitions", "end", ["partitions.end", "ISO"]),
}
NOT_AN_INSTANT = ["2020-02-30", "2020-13-01", "2020-02-30 10:00:00", "2020-02-29 25:00:00"]


@pytest.mark.parametrize("written", NOT_AN_INSTANT)
@pytest.mark.parametrize("case", list(TIME_KEYS))
def test_an_unquoted_date_that_does_not_exist_is_a_config_error_naming_the_key(
    tmp_path: Path, case: str, written: str
) -> None:
    # PyYAML raises a bare ValueError ("day is out of range for month") for an unquoted
    # 2020-02-30 while it reads the file; the loader keeps such a value as its text instead, and
    # the key refuses it like a quoted one.
    build, block, key, words = TIME_KEYS[case]
    pipeline = build(tmp_path)
    pipeline[block][key] = "UNQUOTED"
    text = yaml.safe_dump({"pipelines": [pipeline]}).replace("UNQUOTED", written)
    assert f"{key}: {written}\n" in text, "written unquoted"
    with pytest.raises(ConfigError) as caught:
        parse_config(text, env={}, base=Path("/base"), origin="test.yaml")
    message = str(caught.value)
    for word in [f"pipeline {pipeline['name']!r}", repr(written), *words]:
        assert word in message, message


@pytest.mark.parametrize("case", list(TIME_KEYS))
def test_an_unquoted_date_and_datetime_that_exist_load(tmp_path: Path, case: str) -> None:
    build, block, key, _ = TIME_KEYS[case]
    for written in ["2020-01-05 10:00:00", "2020-01-05"]:
        pipeline = build(tmp_path)
        pipeline[block][key] = "UNQUOTED"
        if block == "replay":  # start and end of one type: both datetimes here
            written = "2020-01-05 10:00:00"
        text = yaml.safe_dump({"pipelines": [pipeline]}).replace("UNQUOTED", written)
        (loaded,) = parse_config(text, env={}, base=Path("/"), origin="t.yaml").pipelines
        holder = loaded.watermark if block == "watermark" else getattr(loaded, block)
        value = getattr(holder, {"from": "from_"}.get(key, key))
        assert str(value).startswith(written[:10]), value


def test_the_documented_refused_file_is_what_loading_it_says() -> None:
    page = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
    shown = next(
        b for b in page.read_text(encoding="utf-8").split("```text\n")[1:] if "invalid conf" in b
    )
    shown = shown.split("```", 1)[0].strip()
    text = yaml.safe_dump({"pipelines": [time_pipeline(form="2024-01-01")]})
    with pytest.raises(ConfigError) as raised:
        parse_config(text, env={}, base=Path("/base"), origin="pipelines.yaml")
    assert str(raised.value) == shown


def test_every_kind_s_partitions_are_one_model_with_its_own_defaults() -> None:
    """One partitions model (issue 23): event time's block is the shared one with its defaults
    (hourly, a start to write) and its messages; a naive start or end is UTC, read in one place."""
    from datetime import datetime, timezone

    from watermark_assets.config import EventTimePartitionsConfig, PartitionsConfig

    shared, event = PartitionsConfig(), EventTimePartitionsConfig(start="2024-01-01 10:00")
    assert isinstance(event, PartitionsConfig)
    assert (shared.granularity.value, shared.start, event.granularity) == (
        "daily",
        "2024-01-01",
        "hourly",
    )
    assert event.start_at == datetime(2024, 1, 1, 10, tzinfo=timezone.utc)
    assert PartitionsConfig(end="2024-02-01T00:00:00+02:00").end_at == datetime(
        2024, 1, 31, 22, tzinfo=timezone.utc
    )
    assert shared.end_at is None
    with pytest.raises(ValueError, match=r"partitions\.start '2020-02-30' is not an ISO"):
        EventTimePartitionsConfig(start="2020-02-30")
    with pytest.raises(ValueError, match=r"Value error, '2020-02-30' is not an ISO"):
        PartitionsConfig(start="2020-02-30")
