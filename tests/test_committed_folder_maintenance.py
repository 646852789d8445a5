"""A ``parquet_commit`` table's own maintenance: the table folder IS the landing folder, so
OPTIMIZE and Z-order write their compacted files (``dataChange: false``) into the landing
partitions and VACUUM deletes the small originals from them (issue 21, item 4).

Files the table holds are never landing files: each landing file is committed exactly once, no
compacted file is ingested, reported as an unsortable name, as late or as below its partition's
watermark, and a vacuumed original is not missed. Every sensor tick below sweeps the partitions
below the listing horizon too (the clock moves past ``sweep.interval_minutes`` between ticks), so
the sweep sees the compacted files of the old partition.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from _landing import CLICK_SCHEMA, FROZEN_NOW, ClickWriter, checkpoint_json, hour, table_files
from _sensor_loop import SensorLoop, by_partition
from conftest import TEST_SPARK_CONF, project_config
from dagster import DagsterInstance
from dagster._core.definitions.sensor_definition import SensorExecutionData
from deltalake import DeltaTable
from maintenance import checkpoint_and_clean, forget_removals, optimize, vacuum, z_order

from watermark_assets import explain
from watermark_assets.defs.build import build_definitions
from watermark_assets.defs.partitions import partition_mapper, partitions_definition
from watermark_assets.kinds.file_path.kind import summarize
from watermark_assets.kinds.file_path.sensors import SensorCursor
from watermark_assets.runs.faults import CRASH_ENV_VAR
from watermark_assets.verdicts import Evidence, Verdict

TESTS = Path(__file__).parent


class Clicks:
    """A commit pipeline over ``table`` whose clock moves an hour per tick (a sweep each tick)."""

    def __init__(self, table: Path, ordering: str) -> None:
        self.table = table
        self.now = FROZEN_NOW
        document = {
            "name": "clicks",
            "source": {"type": "parquet_commit", "uri": str(table)},
            "watermark": {
                "partition_template": "date=%Y-%m-%d",
                "file_name_ordering": ordering,
                "late_arrival_days": 3,
                "sweep": {"interval_minutes": 1, "days": 30},
            },
            "table": {"uri": str(table), "partition_by": ["date"]},
            "partitions": {"granularity": "daily", "start": "2024-01-01"},
            "checkpoint": {"interval_files": 1, "interval_secs": 0},
        }
        self.document = document
        self.config = project_config(document)
        defs = build_definitions(self.config, clock=lambda: self.now)
        self.loop = SensorLoop(defs, DagsterInstance.ephemeral(), pipeline="clicks")
        self.writer = ClickWriter(table)

    def land(self, day: int, name: str, rows: int = 3) -> str:
        """A Parquet file named ``name`` in the landing partition of January ``day``."""
        relative = f"date=2024-01-{day:02d}/{name}"
        path = self.table / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        ids = list(range(self.writer.next_id, self.writer.next_id + rows))
        pages = [f"/p{i}" for i in ids]
        pq.write_table(pa.table({"click_id": ids, "page": pages}, schema=CLICK_SCHEMA), path)
        self.writer.ids.extend(ids)
        self.writer.next_id += rows
        return relative

    def tick(self) -> SensorExecutionData:
        self.now += timedelta(hours=1)
        return self.loop.tick()

    def ingest(self) -> dict[str, list[str]]:
        """One tick and its runs; the files each partition's run was asked for."""
        data = self.tick()
        self.loop.run_all(data.run_requests)
        return by_partition(data.run_requests, "clicks")

    def assert_quiet(self, after: str) -> None:
        """A tick that requests nothing and reports nothing wrong."""
        data = self.tick()
        message = data.skip_message or ""
        requested = by_partition(data.run_requests, "clicks")
        assert requested == {}, f"after {after}: {requested}"
        assert message.startswith("Idle:"), f"after {after}: {message}"
        assert "not ingested" not in message, f"after {after}: {message}"
        cursor = SensorCursor.from_string(self.loop.cursor)
        counts = (cursor.unsortable, cursor.below, cursor.late, cursor.unreadable)
        assert counts == (0, 0, 0, 0), f"after {after}: {cursor}"
        listing = explain.explain_all(self.evidence())
        assert listing.not_ingested == 0, f"after {after}: {listing.groups}"

    def evidence(self) -> Evidence:
        pipeline = self.config.file_pipeline("clicks")
        partition_of = partition_mapper(partitions_definition(pipeline), lambda: self.now)
        return explain.gather_evidence(pipeline, partition_of, now=self.now)

    def assert_each_row_once(self) -> None:
        ids = DeltaTable(str(self.table)).to_pyarrow_table(columns=["click_id"])
        assert sorted(ids.column("click_id").to_pylist()) == sorted(self.writer.ids)


@pytest.mark.parametrize(
    "ordering",
    [
        pytest.param("lexicographic", id="names vouched for as sorting (lexicographic)"),
        pytest.param("auto", id="names that must start with a time (auto)"),
    ],
)
def test_optimize_z_order_and_vacuum_of_the_table_never_make_its_files_landing_files(
    tmp_path: Path, ordering: str
) -> None:
    table = tmp_path / "delta" / "clicks"
    clicks = Clicks(table, ordering)
    old = [clicks.writer.add(hour(20, 1)), clicks.writer.add(hour(20, 2))]
    assert clicks.ingest() == {"2024-01-20": old}
    day28 = [clicks.writer.add(hour(28, 1)), clicks.writer.add(hour(28, 5))]
    day29 = [clicks.writer.add(hour(29, 2), rows=3), clicks.writer.add(hour(29, 4))]
    assert clicks.ingest() == {"2024-01-28": day28, "2024-01-29": day29}
    clicks.assert_quiet("the first files")

    optimize(str(table))
    compacted = set(table_files(table)) - set(old + day28 + day29)
    assert len(compacted) == 3, "one compacted file per landing partition, 2024-01-20 included"
    clicks.assert_quiet("OPTIMIZE")
    clicks.assert_each_row_once()
    verdicts = {explain.explain_file(clicks.evidence(), p).verdict for p in compacted}
    assert verdicts == {Verdict.TABLE_FILE}

    z_order(str(table), ["click_id"])
    clicks.assert_quiet("Z-order")
    vacuum(str(table))
    assert not any((table / path).exists() for path in old + day28 + day29), "originals vacuumed"
    clicks.assert_quiet("VACUUM")

    later = [clicks.writer.add(hour(29, 9))]
    day30 = [clicks.writer.add(hour(30, 1)), clicks.writer.add(hour(30, 3), rows=2)]
    assert clicks.ingest() == {"2024-01-29": later, "2024-01-30": day30}
    clicks.assert_quiet("the files landed after maintenance")
    clicks.assert_each_row_once()

    optimize(str(table))  # compacts the compacted files again: their first versions are removed
    clicks.assert_quiet("a second OPTIMIZE, before VACUUM")
    vacuum(str(table))
    clicks.assert_quiet("a second VACUUM")
    clicks.assert_each_row_once()


@pytest.mark.parametrize(
    ("first", "then"),
    [
        pytest.param(
            "a", "z", id="compacted files sorting between the watermark and a requested file"
        ),
        pytest.param("x", "y", id="compacted files sorting below the partition's watermark"),
    ],
)
def test_a_requested_file_list_never_takes_in_the_tables_own_files(
    tmp_path: Path, first: str, then: str
) -> None:
    """Names vouched for as sorting (lexicographic) may sort either side of OPTIMIZE's
    ``part-...`` names: above the watermark, a run given a later file must not add the compacted
    file that sorts before it; below it, the compacted file is no late landing file."""
    table = tmp_path / "delta" / "clicks"
    clicks = Clicks(table, "lexicographic")
    landed = [clicks.land(28, f"{first}-001.parquet"), clicks.land(28, f"{first}-002.parquet")]
    assert clicks.ingest() == {"2024-01-28": landed}
    optimize(str(table))
    clicks.assert_quiet("OPTIMIZE")

    later = clicks.land(28, f"{then}-003.parquet")
    result = clicks.loop.run_partition("2024-01-28", [later])
    assert result.success
    assert clicks.loop.metadata("2024-01-28")["partition/files"] == 1, "the compacted file added"
    clicks.assert_each_row_once()
    clicks.assert_quiet(f"{later} was committed")


def optimized(table: str) -> None:
    optimize(table)


def optimized_and_vacuumed(table: str) -> None:
    optimize(table)
    vacuum(table)


def optimized_and_forgotten(table: str) -> None:
    optimize(table)
    forget_removals(table)


@pytest.mark.parametrize(
    "maintain",
    [
        pytest.param(optimized, id="after OPTIMIZE"),
        pytest.param(optimized_and_vacuumed, id="after OPTIMIZE and VACUUM"),
        pytest.param(
            optimized_and_forgotten,
            id="after OPTIMIZE whose removals expired without VACUUM (originals left on disk)",
        ),
    ],
)
def test_a_file_landing_below_its_partitions_watermark_is_still_reported_exactly_after_maintenance(
    tmp_path: Path, maintain: Any
) -> None:
    table = tmp_path / "delta" / "clicks"
    clicks = Clicks(table, "auto")
    day28 = [clicks.writer.add(hour(28, 1)), clicks.writer.add(hour(28, 5))]
    day29 = [clicks.writer.add(hour(29, 2)), clicks.writer.add(hour(29, 4))]
    assert clicks.ingest() == {"2024-01-28": day28, "2024-01-29": day29}
    maintain(str(table))
    clicks.assert_quiet("the maintenance")

    late = clicks.writer.add(hour(28, 3))  # sorts below the partition's last file
    data = clicks.tick()
    assert data.run_requests == []
    message = data.skip_message or ""
    assert "1 files landed below their partition's watermark (date=2024-01-28: 1" in message
    cursor = SensorCursor.from_string(clicks.loop.cursor)
    assert (cursor.below, cursor.below_first) == (1, (late,))


def optimized_twice(clicks: Clicks) -> None:
    """OPTIMIZE, files landed and ingested in the same partition, OPTIMIZE again: the first
    compacted file is compacted away (ticks between, as a sensor's would be)."""
    optimize(str(clicks.table))
    clicks.assert_quiet("the first OPTIMIZE")
    later = [clicks.writer.add(hour(28, 9))]
    assert clicks.ingest() == {"2024-01-28": later}
    optimize(str(clicks.table))


def optimized_then_z_ordered(clicks: Clicks) -> None:
    """OPTIMIZE then Z-order in one maintenance job, no tick between: the compacted file is
    rewritten at once (only the commits still in the log saw it)."""
    optimize(str(clicks.table))
    z_order(str(clicks.table), ["click_id"])


@pytest.mark.parametrize("ordering", ["lexicographic", "auto"])
@pytest.mark.parametrize(
    "maintain",
    [
        pytest.param(optimized_twice, id="OPTIMIZE twice"),
        pytest.param(optimized_then_z_ordered, id="OPTIMIZE then Z-order"),
    ],
)
def test_a_compacted_file_compacted_again_whose_removal_expired_is_never_a_landing_file(
    tmp_path: Path, ordering: str, maintain: Any
) -> None:
    """The table forgets the first compacted file (its removal expired before any VACUUM, so
    VACUUM never deletes it) and then its log (a month later): the file stays in the landing
    partition, neither held nor remembered by the table. The pipeline's state recorded it as
    the table's own while it read the log: it is never ingested, nor named unsortable."""
    table = tmp_path / "delta" / "clicks"
    clicks = Clicks(table, ordering)
    day28 = [clicks.writer.add(hour(28, 1)), clicks.writer.add(hour(28, 5))]
    assert clicks.ingest() == {"2024-01-28": day28}
    before = set(table_files(table))
    maintain(clicks)
    forget_removals(str(table))
    clicks.assert_quiet("the removals expired")
    checkpoint_and_clean(str(table))
    vacuum(str(table))
    forgotten = [
        str(p.relative_to(table))
        for p in table.rglob("part-*.parquet")
        if str(p.relative_to(table)) not in set(table_files(table)) | before
    ]
    assert forgotten, "a compacted file no longer in the table stays on disk"
    recorded = checkpoint_json(clicks.config.file_pipeline("clicks"))["own_files"]
    assert set(forgotten) <= set(recorded), "the checkpoint keeps it"
    clicks.assert_quiet("log cleanup and VACUUM")
    verdicts = {explain.explain_file(clicks.evidence(), p).verdict for p in forgotten}
    assert verdicts == {Verdict.TABLE_FILE}
    clicks.assert_each_row_once()

    later = [clicks.writer.add(hour(28, 11)), clicks.writer.add(hour(29, 2))]
    assert clicks.ingest() == {"2024-01-28": later[:1], "2024-01-29": later[1:]}
    clicks.assert_quiet("the files landed after maintenance")
    clicks.assert_each_row_once()


def test_a_run_killed_after_its_commit_then_the_tables_maintenance_commits_each_file_once(
    tmp_path: Path,
) -> None:
    """A run SIGKILLed between its commit and its checkpoint; OPTIMIZE and Z-order run before
    any tick reads the log again, and the table forgets their removals. The next tick catches
    up with the run's commit and records the table's own files from the same commits: nothing
    is ingested twice or named unsortable, then or after the log's cleanup and VACUUM."""
    table = tmp_path / "delta" / "clicks"
    clicks = Clicks(table, "lexicographic")
    first = [clicks.writer.add(hour(28, 1)), clicks.writer.add(hour(28, 5))]
    assert clicks.ingest() == {"2024-01-28": first}
    later = clicks.writer.add(hour(28, 9))
    config = tmp_path / "pipelines.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "spark": {"master": "local[2]", "conf": TEST_SPARK_CONF},
                "pipelines": [clicks.document],
            }
        ),
        encoding="utf-8",
    )
    env = {**os.environ, "WATERMARK_ASSETS_CONFIG": str(config), CRASH_ENV_VAR: "after_commit"}
    crashed = subprocess.run(
        [sys.executable, str(TESTS / "_crash_run.py"), "clicks", "2024-01-28", later],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert crashed.returncode == -9, crashed.stderr
    assert checkpoint_json(clicks.config.file_pipeline("clicks"))["delta_version"] == 0

    optimize(str(table))
    z_order(str(table), ["click_id"])
    forget_removals(str(table))
    clicks.assert_quiet("the killed run's commit, OPTIMIZE and Z-order")
    checkpoint_and_clean(str(table))
    vacuum(str(table))
    clicks.assert_quiet("log cleanup and VACUUM")
    clicks.assert_each_row_once()
    row = summarize(clicks.config.file_pipeline("clicks"))
    assert (row.files, row.rows) == (3, 12)
