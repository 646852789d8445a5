"""The code location as a client sees it: Dagster's GraphQL API on a real ``dagster dev``.

Assets and partitions are listed, a backfill of a partition range is launched and waited for, the
sensor is turned on and ingests exactly the files that land, and the same backfill again adds no
rows. The Delta table (deltalake), the checkpoint under ``{table}/_watermarks/`` and the
materialization metadata are checked after each stage.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from .conftest import BackfillStage, Scenario, SensorStage, Snapshot
from .dagster_dev import PIPELINE, SENSOR, DagsterDev, LandingFile

pytestmark = pytest.mark.slow


def expected_rows(files: tuple[LandingFile, ...]) -> list[tuple[int, str, str]]:
    return sorted((i, f.path, f.partition) for f in files for i in f.ids)


def table_rows(snap: Snapshot) -> list[tuple[int, str, str]]:
    return sorted((r["id"], r["_source_file"], r["_dagster_partition"]) for r in snap.rows)


def pairs(rows: list[dict[str, Any]]) -> dict[Any, Any]:
    """A two-column table's records (``watermark/partitions_after``, ``delta/txns``) as a
    mapping: first column -> second."""
    return {first: second for first, second in (tuple(row.values()) for row in rows)}


def by_partition(materializations: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for event in materializations:  # newest first: keep the newest per partition
        found.setdefault(event["partition"], event["metadata"])
    return found


def test_lists_the_asset_and_its_partitions(dagster_dev: DagsterDev, scenario: Scenario) -> None:
    data = dagster_dev.graphql(
        """{ assetNodes { assetKey { path } description isPartitioned groupName jobNames
               partitionKeys partitionDefinition { type }
               partitionStats { numPartitions }
               metadataEntries { label ... on PathMetadataEntry { path }
                                       ... on TextMetadataEntry { text } } }
             repositoriesOrError { ... on RepositoryConnection { nodes { name
               location { name } sensors { name description } } } } }"""
    )
    nodes = {tuple(n["assetKey"]["path"]): n for n in data["assetNodes"]}
    assert (PIPELINE,) in nodes, f"assets: {sorted(nodes)}"
    node = nodes[(PIPELINE,)]
    assert node["isPartitioned"] is True
    assert node["partitionDefinition"]["type"] == "TIME_WINDOW"
    assert node["groupName"] == "watermark_ingestion"
    assert f"{PIPELINE}_job" in node["jobNames"]
    keys = node["partitionKeys"]
    # daily partitions from the configured start up to today's (still filling) one
    assert keys[0] == scenario.partitions_start.isoformat()
    assert keys == sorted(keys) and len(keys) == len(set(keys))
    assert set(scenario.backfill_range) | {scenario.day3.isoformat()} <= set(keys)
    assert keys[-1] >= (scenario.day3 + timedelta(days=3)).isoformat()
    assert node["partitionStats"]["numPartitions"] == len(keys)
    # the description explains the pipeline in a paragraph
    description = node["description"]
    assert "watermark" in description
    assert str(scenario.paths.landing) in description
    assert str(scenario.paths.table) in description
    metadata = {m["label"]: m.get("path") or m.get("text") for m in node["metadataEntries"]}
    assert metadata["table_uri"] == str(scenario.paths.table)
    assert metadata["checkpoint_uri"] == str(scenario.paths.checkpoint)

    repositories = data["repositoriesOrError"]["nodes"]
    sensors = {s["name"]: s for r in repositories for s in r["sensors"]}
    assert SENSOR in sensors
    assert str(scenario.paths.landing) in sensors[SENSOR]["description"]


def test_a_backfill_of_a_partition_range_ingests_its_files(
    first_backfill: BackfillStage, scenario: Scenario
) -> None:
    backfill = first_backfill.backfill
    assert backfill["isAssetBackfill"] is True
    assert backfill["partitionNames"] == scenario.backfill_range
    # BackfillPolicy.single_run: ONE run covers the whole range (one Spark job, one commit)
    assert len(first_backfill.run_ids) == 1, backfill["runs"]
    run = backfill["runs"][0]
    tags = {t["key"]: t["value"] for t in run["tags"]}
    assert tags["dagster/backfill"] == first_backfill.backfill_id
    assert tags["dagster/asset_partition_range_start"] == scenario.day1.isoformat()
    assert tags["dagster/asset_partition_range_end"] == scenario.day2.isoformat()

    # the Delta table: every valid record once, in its partition, with its lineage
    snap = first_backfill.snapshot
    assert snap.version == 0
    assert table_rows(snap) == expected_rows(scenario.first_files)
    assert len(snap.quarantine) == 1
    assert snap.quarantine[0]["_source_file"] == scenario.first_files[0].path

    # the checkpoint: one watermark per landing folder, the global one = the newest path
    checkpoint = snap.checkpoint
    assert checkpoint is not None
    assert checkpoint["schema_version"] == 1
    assert checkpoint["delta_version"] == 0
    assert checkpoint["partition_watermarks"] == {f.prefix: f.name for f in scenario.first_files}
    assert checkpoint["watermark"]["value"] == max(f.path for f in scenario.first_files)
    assert checkpoint["watermark"]["state"] == "Active"

    # the materialization metadata: one event per Dagster partition of the run
    events = by_partition(first_backfill.materializations)
    assert set(events) == set(scenario.backfill_range)
    newest = max(f.path for f in scenario.first_files)
    for key, metadata in events.items():
        assert metadata["watermark/state"] == "Active"
        assert str(metadata["watermark/before"]).startswith("(none")
        assert metadata["watermark/after"] == newest
        assert metadata["files"] == 3
        assert metadata["rows/read"] == 15
        assert metadata["rows/quarantined"] == 1
        assert metadata["rows/committed"] == 14
        assert metadata["delta/version"] == 0
        assert metadata["dagster/uri"] == str(scenario.paths.table)
        assert metadata["quarantine/table"] == str(scenario.paths.quarantine)
        mine = [f for f in scenario.first_files if f.partition == key]
        assert metadata["partition/files"] == len(mine)
        assert metadata["partition/rows_quarantined"] == sum(f.malformed for f in mine)
        assert pairs(metadata["watermark/partitions_after"]) == {f.prefix: f.name for f in mine}
        assert pairs(metadata["delta/txns"]) == {
            f"watermark_assets/{PIPELINE}/{k}": 1 for k in scenario.backfill_range
        }


def test_the_sensor_starts_runs_for_exactly_the_files_that_land(
    sensor_ingest: SensorStage, first_backfill: BackfillStage, scenario: Scenario
) -> None:
    assert sensor_ingest.skip_reason_before.startswith("Idle: 3 partitions"), (
        sensor_ingest.skip_reason_before
    )
    runs = sensor_ingest.runs
    assert runs, "the sensor started no run"
    assert all(r["status"] == "SUCCESS" for r in runs), runs
    requested = [p for r in runs for p in r["files"]]
    # exactly the new files, each in one run only, each run within its own partition
    assert sorted(requested) == sorted(f.path for f in scenario.sensor_files)
    assert len(requested) == len(set(requested))
    partition_of = {f.path: f.partition for f in scenario.sensor_files}
    for run in runs:
        assert {partition_of[p] for p in run["files"]} == {run["tag_map"]["dagster/partition"]}
        assert run["files"] == sorted(run["files"])
    # one run per Dagster partition with new files
    assert Counter(r["tag_map"]["dagster/partition"] for r in runs) == {
        scenario.day2.isoformat(): 1,
        scenario.day3.isoformat(): 1,
    }

    snap = sensor_ingest.snapshot
    assert snap.version == 2  # one commit per sensor run
    all_files = scenario.first_files + scenario.sensor_files
    assert table_rows(snap) == expected_rows(all_files)
    assert len(snap.quarantine) == 2
    checkpoint = snap.checkpoint
    assert checkpoint is not None
    assert checkpoint["delta_version"] == 2
    watermarks = checkpoint["partition_watermarks"]
    assert watermarks == {
        **{f.prefix: f.name for f in scenario.first_files},
        **{f.prefix: f.name for f in scenario.sensor_files},
    }
    b1 = scenario.sensor_files[0]  # advanced inside a landing folder that had a watermark
    assert watermarks[b1.prefix] == b1.name
    assert checkpoint["watermark"]["value"] == max(f.path for f in all_files)

    events = {m["runId"]: m["metadata"] for m in sensor_ingest.materializations}
    for run in runs:
        metadata = events[run["runId"]]
        mine = [f for f in scenario.sensor_files if f.path in run["files"]]
        assert metadata["files"] == len(mine)
        assert metadata["rows/committed"] == sum(f.rows for f in mine)
        assert metadata["rows/quarantined"] == sum(f.malformed for f in mine)
        assert isinstance(metadata["delta/version"], int)
        # the partition's whole watermark: every landing folder of its day, this run's or not
        day = run["tag_map"]["dagster/partition"]
        day_of = {f.prefix: f.partition for f in all_files}
        assert pairs(metadata["watermark/partitions_after"]) == {
            prefix: name for prefix, name in watermarks.items() if day_of[prefix] == day
        }

    # and then the sensor says why it does nothing
    assert sensor_ingest.skip_reason_after.startswith(
        f"Idle: {len(watermarks)} partitions, no files above their watermarks"
    ), sensor_ingest.skip_reason_after


def test_the_same_backfill_again_adds_no_rows(
    dagster_dev: DagsterDev,
    first_backfill: BackfillStage,
    sensor_ingest: SensorStage,
    second_backfill: BackfillStage,
    scenario: Scenario,
) -> None:
    assert second_backfill.backfill["status"] == "COMPLETED_SUCCESS", second_backfill.backfill
    assert dagster_dev.backfill(first_backfill.backfill_id)["status"] == "COMPLETED_SUCCESS"
    assert second_backfill.backfill["partitionNames"] == scenario.backfill_range

    before, after = sensor_ingest.snapshot, second_backfill.snapshot
    assert after.version == before.version  # no new commit at all
    assert table_rows(after) == table_rows(before)
    ids = [r["id"] for r in after.rows]
    assert len(ids) == len(set(ids)), "duplicate rows after the same backfill ran again"
    assert len(after.quarantine) == len(before.quarantine)
    assert after.checkpoint is not None and before.checkpoint is not None
    assert after.checkpoint["partition_watermarks"] == before.checkpoint["partition_watermarks"]

    events = by_partition(second_backfill.materializations)
    assert set(events) == set(scenario.backfill_range)
    for metadata in events.values():
        assert metadata["files"] == 0
        assert metadata["rows/committed"] == 0
        assert str(metadata["delta/version"]).startswith("no new commit")
        assert metadata["watermark/after"] == before.checkpoint["watermark"]["value"]
