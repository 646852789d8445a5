"""What the column engine reads and writes is a plain value built from each kind's configuration as
written (``runs/column_spec.ColumnSpec``, issue 23 §3): no configuration is built or rewritten at
run time; what differs per unit is the source strategy's answer (``ReadsUnits.for_unit``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from watermark_assets.config import parse_config
from watermark_assets.kinds.time.run import column_spec
from watermark_assets.kinds.unit.grid_run import cell_spec
from watermark_assets.kinds.unit.run import unit_spec
from watermark_assets.runs.column_spec import ColumnSpec
from watermark_assets.sources.http_api import HttpApiSource

SCHEMA = "survey_id STRING, answer BIGINT, answered_at TIMESTAMP"


def load(tmp_path: Path, pipeline: dict[str, Any]) -> Any:
    text = json.dumps({"pipelines": [pipeline]})  # JSON is YAML
    config = parse_config(text, env={}, base=tmp_path, origin="pipelines.yaml")
    return config.pipeline(pipeline["name"])


def answers(tmp_path: Path, url: str, **watermark: Any) -> dict[str, Any]:
    """An answers API; a time x unit one (``time`` given) sends its windows' start as since."""
    mapping = {"answered_at": "since"} if "time" in watermark else {}
    return {
        "name": "answers",
        "source": {
            "type": "http_api",
            "url": url,
            "schema": SCHEMA,
            "params": {"lang": "en"},
            "watermark_param_mapping": mapping,
        },
        "watermark": {"kind": "unit", "column": "survey_id", "units": "a,b", **watermark},
        "table": {"uri": str(tmp_path / "delta" / "answers")},
    }


GRID = {"time": {"column": "answered_at", "from": "2024-01-01", "partition": "daily"}}

#: case -> (url, watermark settings, spec builder, what the source asks for unit "x y/1")
UNIT_READS = {
    "a unit run: the unit parameter carries the unit column's value": (
        "http://h/answers",
        {"unit_param": "survey"},
        unit_spec,
        ("http://h/answers", {"survey_id": "survey"}, {"lang": "en"}),
    ),
    "a unit run: the id in the URL, URL-quoted": (
        "http://h/surveys/{unit}/answers",
        {},
        unit_spec,
        ("http://h/surveys/x%20y%2F1/answers", {}, {"lang": "en"}),
    ),
    "a cell's run: the unit parameter is a static one, the time mapping kept": (
        "http://h/answers",
        {"unit_param": "survey", **GRID},
        cell_spec,
        ("http://h/answers", {"answered_at": "since"}, {"lang": "en", "survey": "x y/1"}),
    ),
    "a cell's run: the id in the URL": (
        "http://h/surveys/{unit}/answers",
        GRID,
        cell_spec,
        ("http://h/surveys/x%20y%2F1/answers", {"answered_at": "since"}, {"lang": "en"}),
    ),
}


@pytest.mark.parametrize(
    ("url", "watermark", "spec_of", "asked"), UNIT_READS.values(), ids=UNIT_READS.keys()
)
def test_a_unit_is_told_to_the_source_and_the_configuration_stays_as_written(
    tmp_path: Path, url: str, watermark: dict[str, Any], spec_of: Any, asked: tuple[Any, ...]
) -> None:
    pipeline = load(tmp_path, answers(tmp_path, url, **watermark))
    configured = pipeline.source.model_dump()

    spec = spec_of(pipeline, "x y/1")
    source = spec.build_source()

    assert isinstance(source, HttpApiSource)
    assert (source.url, dict(source.watermark_param_mapping), dict(source.params)) == asked
    assert spec.source is pipeline.source, "the spec holds the source as configured"
    assert pipeline.source.model_dump() == configured, "nothing rewrote the configuration"
    assert spec.replace_by_watermark and spec.watermark is None


def test_a_time_pipelines_spec_reads_its_time_column_and_leaves_merge_keys_to_its_windows(
    tmp_path: Path,
) -> None:
    pipeline = load(
        tmp_path,
        {
            "name": "orders",
            "source": {"type": "delta_table", "uri": str(tmp_path / "source")},
            "watermark": {"kind": "time", "column": "updated_at", "from": "2020-01-01"},
            "table": {"uri": str(tmp_path / "delta" / "orders"), "merge_keys": ["id"]},
        },
    )
    spec = column_spec(pipeline)
    assert (spec.columns, spec.merge_keys, spec.replace_by_watermark) == (("updated_at",), (), True)
    assert spec.table is pipeline.table and spec.table.merge_keys == ["id"]
    with pytest.raises(TypeError, match="'orders' is no column pipeline"):
        spec.column_watermark  # noqa: B018 - a time run has no column watermark to look back on


def test_a_download_writes_into_the_staging_folder_the_loaded_configuration_names(
    tmp_path: Path,
) -> None:
    raw = {
        "name": "files",
        "source": {
            "type": "file_download",
            "url": "http://h/file{date:%Y%m%d}.csv",
            "format": "csv",
            "schema": "id BIGINT, day TIMESTAMP",
        },
        "watermark": {"kind": "time", "column": "day", "from": "2020-01-01"},
        "table": {"uri": str(tmp_path / "delta" / "files") + "/"},
    }
    assert load(tmp_path, raw).source.staging_uri == f"{tmp_path}/delta/files/_staging"
    raw["source"]["staging_uri"] = str(tmp_path / "downloads")
    assert load(tmp_path, raw).source.staging_uri == str(tmp_path / "downloads")


def test_a_column_pipelines_spec_is_its_configuration_field_by_field(tmp_path: Path) -> None:
    pipeline = load(
        tmp_path,
        {
            "name": "orders",
            "source": {"type": "delta_table", "uri": str(tmp_path / "source")},
            "watermark": {"kind": "column", "columns": ["updated_at", "id"]},
            "table": {"uri": str(tmp_path / "delta" / "orders"), "merge_keys": ["id"]},
        },
    )
    spec = ColumnSpec.of(pipeline)
    assert (spec.columns, spec.merge_keys, spec.replace_by_watermark) == (
        ("updated_at", "id"),
        ("id",),
        False,
    )
    assert spec.column_watermark is pipeline.watermark and spec.dataflow_id == "orders"


#: case -> (replay.target_table relative to tmp_path or None, the table the replay writes)
REPLAY_TARGETS = {
    "another table: the replay's": ("delta/orders_backfill", "delta/orders_backfill"),
    "no target_table: the pipeline's own": (None, "delta/orders"),
    "the own table spelled as a file:// URI with a slash: the pipeline's own": (
        "file://{tmp}/delta/orders/",
        "delta/orders",
    ),
}


@pytest.mark.parametrize(("target", "written"), REPLAY_TARGETS.values(), ids=REPLAY_TARGETS.keys())
def test_a_replay_reads_the_pipelines_source_and_writes_its_target_leaving_the_configuration(
    tmp_path: Path, target: str | None, written: str
) -> None:
    replay: dict[str, Any] = {"start": 0, "end": 10, "chunk": {"size": 5}}
    if target is not None:
        replay["target_table"] = (
            target.format(tmp=tmp_path) if "{tmp}" in target else str(tmp_path / target)
        )
    pipeline = load(
        tmp_path,
        {
            "name": "orders",
            "source": {"type": "delta_table", "uri": str(tmp_path / "source")},
            "watermark": {"kind": "column", "columns": ["id"]},
            "table": {"uri": str(tmp_path / "delta" / "orders"), "partition_by": ["day"]},
            "destination": {"replace_by_watermark": True},
            "replay": replay,
        },
    )
    configured = pipeline.model_dump()

    spec = ColumnSpec.replaying(pipeline, pipeline.replay)

    assert spec.source is pipeline.source, "the replay reads the pipeline's source as configured"
    assert (spec.name, spec.columns, spec.watermark) == ("orders", ("id",), pipeline.watermark)
    uri = str(tmp_path / written)
    assert (spec.table.uri, list(spec.table.partition_by)) == (uri, ["day"])
    assert spec.table.quarantine == uri + "_quarantine"
    assert spec == dataclasses.replace(ColumnSpec.of(pipeline), table=spec.table)
    if target is None or "{tmp}" in target:
        assert spec.table is pipeline.table, "its own table: the configured one"
    assert pipeline.model_dump() == configured, "nothing rewrote the configuration"
    assert pipeline.table.uri == str(tmp_path / "delta" / "orders")
