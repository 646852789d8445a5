"""The asset checks: what makes them fail, and that a real run passes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _landing import FROZEN_NOW, Landing, hour
from _sensor_loop import SensorLoop
from conftest import pipeline_yaml, project_config
from dagster import DagsterInstance

from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.defs import build_definitions
from watermark_assets.defs.checks import (
    MONOTONE_CHECK,
    RECONCILE_CHECK,
    SCHEMA_CHANGE_CHECK,
    row_mismatch,
    watermark_regressions,
)
from watermark_assets.state.commit_metadata import CommitMetadata

A = "date=2024-01-28/hour=13/1706446800-a.ndjson.gz"
B = "date=2024-01-28/hour=14/1706450400-b.ndjson.gz"
BEFORE = FileWatermark.initial().advance([B])


@pytest.mark.parametrize(
    ("after", "problems"),
    [
        (BEFORE.advance(["date=2024-01-28/hour=14/1706450500-c.ndjson.gz"]), []),
        (BEFORE.merge(FileWatermark.initial().advance([A])), []),
        (
            FileWatermark.initial().advance([A]),
            [
                "v7 date=2024-01-28/hour=14: '1706450400-b.ndjson.gz' -> None",
                f"v7 global: {B!r} -> {A!r}",
            ],
        ),
    ],
    ids=[
        "moving forward in the same partition",
        "a late file in an older partition keeps the global value",
        "losing a partition and going back to an older path",
    ],
)
def test_watermark_regressions(after: FileWatermark, problems: list[str]) -> None:
    assert watermark_regressions(7, BEFORE, after) == problems


def metadata(rows_read: int, rows_quarantined: int) -> CommitMetadata:
    return CommitMetadata(
        pipeline="events",
        source="main",
        run_id="r",
        partition_keys=("2024-01-28",),
        watermark_before=FileWatermark.initial(),
        watermark_after=BEFORE,
        files=1,
        rows_read=rows_read,
        rows_quarantined=rows_quarantined,
        rows_committed=rows_read - rows_quarantined,
    )


@pytest.mark.parametrize(
    ("logged", "expected"),
    [
        (8, None),
        (10, "v3: log has 10 rows, read 10 - quarantined 2 = 8"),
    ],
    ids=["the log holds read minus quarantined", "quarantined rows reached the table"],
)
def test_row_mismatch(logged: int, expected: str | None) -> None:
    assert row_mismatch(3, metadata(10, 2), logged) == expected


def test_a_real_run_passes_both_checks(spark: Any, tmp_path: Path) -> None:
    config = project_config(pipeline_yaml(tmp_path))
    loop = SensorLoop(
        build_definitions(config, clock=lambda: FROZEN_NOW), DagsterInstance.ephemeral()
    )
    Landing(tmp_path / "landing").add(hour(28, 10), malformed=["not json"])
    (request,) = loop.tick().run_requests
    result = loop.run(request)
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert set(evaluations) == {MONOTONE_CHECK, RECONCILE_CHECK, SCHEMA_CHANGE_CHECK}
    assert all(e.passed for e in evaluations.values())
    assert evaluations[RECONCILE_CHECK].description == "rows reconcile in commits [0]"


def test_commit_metadata_tags_its_watermarks_with_their_kind_and_reads_untagged_ones() -> None:
    written = metadata(10, 2)
    document = json.loads(written.to_json())
    assert document["watermark_after"]["kind"] == "file_path"
    assert CommitMetadata.from_json(written.to_json()) == written
    for side in ("watermark_before", "watermark_after"):  # as commits before the tag hold them
        del document[side]["kind"]
    assert CommitMetadata.from_json(json.dumps(document)) == written
