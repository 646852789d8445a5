"""Pieces of ingest.py that need no Spark: staging hygiene and txn app ids."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from watermark_assets.ingest import crash_point, remove_stale_staging
from watermark_assets.state_store import txn_app_id

NOW = datetime(2024, 1, 28, 12, 0, tzinfo=timezone.utc)


def test_staging_folders_left_by_crashed_runs_are_removed_after_the_retention(
    tmp_path: Path,
) -> None:
    staging = tmp_path / "table" / "_staging"
    for token in ("20240128T010000-old", "20240128T110000-recent", "not-a-token"):
        (staging / token).mkdir(parents=True)
        (staging / token / "part-0.parquet").write_bytes(b"x")
    assert remove_stale_staging(str(tmp_path / "table"), NOW) == ["20240128T010000-old"]
    assert sorted(p.name for p in staging.iterdir()) == ["20240128T110000-recent", "not-a-token"]


def test_no_staging_folder_is_nothing_to_do(tmp_path: Path) -> None:
    assert remove_stale_staging(str(tmp_path / "absent"), NOW) == []


def test_each_dagster_partition_has_its_own_txn_app_id() -> None:
    assert txn_app_id("events", "2024-01-28") == "watermark_assets/events/2024-01-28"
    assert txn_app_id("events", "2024-01-28") != txn_app_id("events", "2024-01-29")


@pytest.mark.parametrize("point", ["after_data_written", "after_commit"])
def test_a_crash_point_does_nothing_unless_named(point: str) -> None:
    crash_point(point, env={})
    crash_point(point, env={"WATERMARK_ASSETS_CRASH_AT": "somewhere_else"})
