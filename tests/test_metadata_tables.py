"""Several values of one shape are a Dagster table (issue 23, "one vocabulary"): a file
pipeline's landing partitions' watermarks (``watermark/partitions_before``,
``watermark/partitions_after``, ``partition/watermarks``) and a commit's Delta transaction ids
(``delta/txns``, of a file and of a column run), each with its typed columns and one row per
value, never a JSON object."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _landing import hour, name_of, prefix_of
from dagster import TableMetadataValue
from test_column_pipeline import Scene as OrdersScene
from test_column_pipeline import at, order
from test_column_pipeline import metadata as column_metadata
from test_pipeline_dagster import World, make_world

from watermark_assets.runs.column import txn_app_id as column_txn_app_id
from watermark_assets.state.commit_metadata import txn_app_id
from watermark_assets.vocabulary import table_rows

LANDING = [("partition", "string"), ("watermark", "string")]
TXNS = [("app_id", "string"), ("version", "int")]


@pytest.fixture
def world(spark: Any, tmp_path: Path) -> World:
    """A file pipeline over a landing folder; the Spark session exists before any run."""
    return make_world(tmp_path)


def landing_rows(*paths: str) -> list[dict[str, Any]]:
    return [{"partition": prefix_of(p), "watermark": name_of(p)} for p in paths]


def test_a_range_run_says_watermarks_and_txns_as_tables(world: World) -> None:
    loop, landing = world.loop, world.landing
    seen = landing.add(hour(28, 10))
    loop.run_all(loop.tick().run_requests)  # 2024-01-28's first txn
    later = [landing.add(hour(28, 10), minute=30), landing.add(hour(28, 12))]
    day27 = landing.add(hour(27, 10))
    assert loop.run_range("2024-01-27", "2024-01-29").success  # one commit, three partitions

    txns = [
        {"app_id": txn_app_id("events", "2024-01-27"), "version": 1},
        {"app_id": txn_app_id("events", "2024-01-28"), "version": 2},
        {"app_id": txn_app_id("events", "2024-01-29"), "version": 1},
    ]
    #: (partition key, metadata key) -> (columns, rows)
    cases: dict[tuple[str, str], tuple[list[tuple[str, str]], list[dict[str, Any]]]] = {
        ("2024-01-28", "watermark/partitions_before"): (LANDING, landing_rows(seen)),
        ("2024-01-28", "watermark/partitions_after"): (LANDING, landing_rows(*later)),
        ("2024-01-28", "partition/watermarks"): (LANDING, landing_rows(*later)),
        ("2024-01-27", "watermark/partitions_before"): (LANDING, []),
        ("2024-01-27", "watermark/partitions_after"): (LANDING, landing_rows(day27)),
        ("2024-01-29", "partition/watermarks"): (LANDING, []),
        ("2024-01-28", "delta/txns"): (TXNS, txns),
        ("2024-01-29", "delta/txns"): (TXNS, txns),
    }
    for (partition, key), (columns, rows) in cases.items():
        value = loop.materialization(partition).metadata[key]
        assert isinstance(value, TableMetadataValue), (partition, key, value)
        assert [(c.name, c.type) for c in value.schema.columns] == columns, (partition, key)
        assert table_rows(value) == rows, (partition, key)


def test_a_sensor_observation_says_the_partition_s_watermarks_as_a_table(world: World) -> None:
    loop, landing = world.loop, world.landing
    first = landing.add(hour(28, 10), minute=30)
    loop.run_all(loop.tick().run_requests)
    assert (loop.tick().skip_message or "").startswith("Idle:")
    landing.add(hour(28, 10), minute=0)  # below the hour's watermark: never ingested
    tick = loop.tick()
    (on_partition,) = [e for e in tick.asset_events if e.partition == "2024-01-28"]
    value = on_partition.metadata["partition/watermarks"]
    assert isinstance(value, TableMetadataValue), value
    assert [(c.name, c.type) for c in value.schema.columns] == LANDING
    assert table_rows(value) == landing_rows(first)


@pytest.mark.spark
def test_a_column_run_says_its_txn_as_a_table(tmp_path: Path) -> None:
    scene = OrdersScene(tmp_path)
    scene.orders.put(order(1, at(9)), order(2, at(10)))
    scene.run()
    scene.orders.put(order(3, at(11)))
    value = column_metadata(scene.run())["delta/txns"]  # the pipeline's second commit
    assert isinstance(value, TableMetadataValue), value
    assert [(c.name, c.type) for c in value.schema.columns] == TXNS
    assert table_rows(value) == [{"app_id": column_txn_app_id("orders"), "version": 2}]
