"""Sources as external assets upstream of the pipelines (``defs/upstreams.py``): pipelines that
read one location share one upstream node in the UI's lineage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import pipeline_yaml, project_config
from dagster import AssetKey

from watermark_assets.defs import build_definitions
from watermark_assets.defs.upstreams import source_key


@pytest.mark.parametrize(
    ("location", "cwd", "key"),
    [
        ("data/sources/orders", "/repo", "source/data/sources/orders"),
        ("/repo/data/sources/orders", "/repo", "source/data/sources/orders"),
        ("file:///repo/data/landing events", "/repo", "source/data/landing_events"),
        ("/elsewhere/orders", "/repo", "source/elsewhere/orders"),
        ("s3://bucket/landing/events/", "/repo", "source/s3/bucket/landing/events"),
        ("GET http://127.0.0.1:8765/payments", "/repo", "source/http/127_0_0_1_8765/payments"),
        (
            "jdbc:postgresql://127.0.0.1:5432/shop public.orders",
            "/repo",
            "source/jdbc_postgresql/127_0_0_1_5432/shop_public_orders",
        ),
        ("s3://b/files/*.csv", "/repo", "source/s3/b/files/csv"),
    ],
)
def test_a_source_location_names_its_asset(location: str, cwd: str, key: str) -> None:
    assert source_key(location, cwd).to_user_string() == key


def _delta_reader(tmp_path: Path, name: str, kind: str, source: str) -> dict[str, Any]:
    watermark: dict[str, Any] = {"columns": ["updated_at"]}
    if kind == "time":
        watermark = {"kind": "time", "column": "updated_at", "from": "2024-01-01", "to": "P0D"}
    return {
        "name": name,
        "source": {"type": "delta_table", "uri": source},
        "watermark": watermark,
        "table": {"uri": str(tmp_path / "delta" / name)},
    }


def test_pipelines_reading_one_source_share_its_upstream_asset(tmp_path: Path) -> None:
    orders = str(tmp_path / "sources" / "orders")
    events = pipeline_yaml(tmp_path)  # files under tmp_path/landing, its table delta/events
    config = project_config(
        events,
        _delta_reader(tmp_path, "orders", "column", orders),
        _delta_reader(tmp_path, "orders_daily", "time", orders + "/"),
        _delta_reader(tmp_path, "events_copy", "column", events["table"]["uri"]),
    )
    graph = build_definitions(config).resolve_asset_graph()

    def parents(name: str) -> set[AssetKey]:
        return set(graph.get(AssetKey(name)).parent_keys)

    (shared,) = parents("orders")
    assert parents("orders_daily") == {shared}
    assert shared.path[0] == "source" and shared.path[-2:] == ["sources", "orders"]
    assert not graph.get(shared).is_materializable
    assert "read by orders, orders_daily" in (graph.get(shared).description or "")
    assert parents("events_copy") == {AssetKey("events")}, "another pipeline's table: its asset"
    (landing,) = parents("events")
    assert landing.path[-1] == "landing"
