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
