"""Pieces of the file runs that need no Spark: staging hygiene, txn app ids, the crash point."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from watermark_assets.runs.faults import CRASH_ENV_VAR
from watermark_assets.staging import list_parquet, remove_stale_staging
from watermark_assets.state.commit_metadata import txn_app_id

NOW = datetime(2024, 1, 28, 12, 0, tzinfo=timezone.utc)
REPO_ROOT = Path(__file__).resolve().parent.parent


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


# What Spark wrote under a staging folder, and whether it is one of the data files, by Spark's
# own rule: a name starting with '.', or with '_' unless it is a partition folder ('_col=value').
SPARK_OUTPUT = [
    ("part-00000-a.snappy.parquet", True),
    ("event_date=2024-01-28/part-00000-b.snappy.parquet", True),
    ("_dagster_partition=2024-01-28/part-00000-c.snappy.parquet", True),
    ("event_date=2024-01-28/_dagster_partition=2024-01-28/part-00000-d.snappy.parquet", True),
    ("event_date=2024-01-28/.part-00000-b.snappy.parquet.crc", False),
    ("_temporary/0/_temporary/attempt_1/part-00001-e.snappy.parquet", False),
    ("event_date=2024-01-29/_temporary/part-00001-f.snappy.parquet", False),
    (".hidden/part-00000-g.snappy.parquet", False),
    ("_SUCCESS", False),
]


def test_the_data_files_of_a_spark_output_folder_are_spark_s_own(tmp_path: Path) -> None:
    for relative, _ in SPARK_OUTPUT:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_bytes(b"x")
    listed = [uri.split(str(tmp_path) + "/", 1)[1] for uri in list_parquet(str(tmp_path))]
    assert listed == sorted(relative for relative, data in SPARK_OUTPUT if data)


@pytest.mark.parametrize(
    ("pipeline", "partition", "app_id"),
    [
        pytest.param("events", "2024-01-28", "watermark_assets/events/2024-01-28", id="a day"),
        pytest.param(
            "events", "2024-01-28-14:00", "watermark_assets/events/2024-01-28-14:00", id="an hour"
        ),
        pytest.param("clicks", "2024-01-28", "watermark_assets/clicks/2024-01-28", id="a pipeline"),
    ],
)
def test_the_txn_app_id_names_the_pipeline_and_the_dagster_partition(
    pipeline: str, partition: str, app_id: str
) -> None:
    # docs/how-it-works.md documents this format: users find a partition's commits in the log by it.
    assert txn_app_id(pipeline, partition) == app_id


_CALL_CRASH_POINT = """
from watermark_assets.runs.faults import crash_point
crash_point("after_commit")
print("went on", flush=True)
"""


@pytest.mark.parametrize(
    ("crash_at", "returncode", "output"),
    [
        pytest.param("after_commit", -signal.SIGKILL, "", id="the named point kills the process"),
        pytest.param("after_data_written", 0, "went on\n", id="another named point goes on"),
        pytest.param(None, 0, "went on\n", id="nothing named goes on"),
    ],
)
def test_a_crash_point_kills_the_process_only_where_it_is_named(
    crash_at: str | None, returncode: int, output: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV_VAR}
    if crash_at is not None:
        env[CRASH_ENV_VAR] = crash_at
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    completed = subprocess.run(
        [sys.executable, "-c", _CALL_CRASH_POINT],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (completed.returncode, completed.stdout) == (returncode, output), completed.stderr
