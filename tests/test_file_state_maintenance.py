"""A file-path pipeline's state survives what Delta does to its log (issue 21, file-path kind).

delta-rs checkpoints the log and deletes commit JSONs older than a month (every writer's
post-commit hook), users run OPTIMIZE and VACUUM: a commit's ``commitInfo``, where each commit
records its progress, does not survive. The state that does is the checkpoint file (written after
every data commit, with the Delta version it reflects, read with the commits after that version
only) and the tables' rows, which name their landing file. Months pass in milliseconds
(``tests/maintenance.py``); real Spark, Delta and Dagster. The pipelines keep the seed's
checkpoint intervals (100 files, 60 s): they govern an idle state's rewrites, never whether a
commit's progress is recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from _landing import FROZEN_NOW, ClickWriter, checkpoint_json, delta_ids, hour, name_of, prefix_of
from _sensor_loop import SensorLoop, by_partition
from conftest import TEST_SPARK_CONF, pipeline_yaml, project_config
from dagster import AssetObservation, DagsterInstance
from deltalake import DeltaTable
from maintenance import checkpoint_and_clean, optimize, vacuum
from test_pipeline_dagster import Clock, World, make_world

from watermark_assets import explain, storage
from watermark_assets.cli import main
from watermark_assets.defs import build_definitions
from watermark_assets.defs.partitions import partition_mapper, partitions_definition
from watermark_assets.exceptions import StateHistoryLostError
from watermark_assets.kinds.file_path.kind import summarize
from watermark_assets.state.load import load_state
from watermark_assets.verdicts import Verdict
from watermark_assets.vocabulary import table_pairs

pytestmark = pytest.mark.spark

#: The seed's checkpoint intervals (the other tests write one at every commit).
SEED_INTERVALS = {"interval_files": 100, "interval_secs": 60}
#: Old partitions leave the state fast: 1 late-arrival day + 1 sweep day are kept.
SHORT_WINDOWS = {"late_arrival_days": 1, "sweep": {"days": 1}}
SWEEP_EVERY = timedelta(minutes=61)
PIPELINE: dict[str, Any] = {
    "watermark": SHORT_WINDOWS,
    "checkpoint": SEED_INTERVALS,
    "partitions": {"granularity": "daily", "start": "2023-12-01"},
}


def frozen_clock() -> datetime:
    return FROZEN_NOW


def dec(day: int, at: int = 10) -> datetime:
    return hour(1, at).replace(year=2023, month=12, day=day)


def world_of(tmp_path: Path, clock: Callable[[], datetime] = frozen_clock, **extra: Any) -> World:
    return make_world(tmp_path, clock=clock, **{**PIPELINE, **extra})


def ingest(world: World) -> None:
    """Ticks and their runs until the sensor requests nothing."""
    while requests := world.loop.tick().run_requests:
        world.loop.run_all(requests)


def a_month_of_partitions(world: World) -> list[str]:
    """Files in 2023-12-19 (40 days before the newest), 2023-12-20, and 2024-01-27..28, each day
    ingested by its own runs; the old days' watermarks are pruned from the state."""
    landing = world.landing
    files = []
    for when in (dec(19), dec(19, 11), dec(20), hour(27, 10), hour(27, 12), hour(28, 10)):
        files.append(landing.add(when))
        ingest(world)
    assert prefix_of(files[0]) not in checkpoint_json(world.pipeline)["partition_watermarks"]
    return files


def test_a_backfill_of_a_partition_ingested_40_days_ago_after_log_cleanup_commits_no_file_twice(
    spark: Any, tmp_path: Path
) -> None:
    world = world_of(tmp_path)
    old = a_month_of_partitions(world)[:2]
    checkpoint_and_clean(world.table)  # a month later: every commit JSON but the last is gone

    late = world.landing.add(dec(19, 11), minute=30)  # lands after the 19th left the window
    assert world.loop.run_partition("2023-12-19").success  # the backfill of the old partition

    world.assert_each_row_once()
    metadata = world.loop.metadata("2023-12-19")
    assert (metadata["files"], metadata["partition/first_file"]) == (1, late)
    assert table_pairs(metadata["watermark/partitions_before"]) == {
        prefix_of(o): name_of(o) for o in old
    }, "the pruned watermark came back from the table's lineage, not from cleaned commits"
    assert metadata["dagster/partition_row_count"] == 9, "3 files of 3 rows in the partition"
    assert world.loop.run_partition("2023-12-19").success
    world.assert_each_row_once()


def test_summary_and_explain_stay_exact_after_log_cleanup(spark: Any, tmp_path: Path) -> None:
    world = world_of(tmp_path)
    files = a_month_of_partitions(world)
    checkpoint_and_clean(world.table)
    files.append(world.landing.add(hour(28, 12)))  # one more run after the cleanup
    ingest(world)

    row = summarize(world.pipeline)
    assert (row.partitions, row.files, row.rows) == (4, 7, 21)
    saved = checkpoint_json(world.pipeline)
    assert saved["totals"] == {"files": 7, "rows": 21, "partitions": 4}
    assert sorted(saved["partition_rows"]) == ["2024-01-27", "2024-01-28"], (
        "rows per Dagster partition are pruned with their landing partitions' watermarks"
    )

    # a file that lands below the pruned watermark of 2023-12-19/hour=11 and was never committed
    below = world.landing.add(dec(19, 11), minute=-30)
    partition_of = partition_mapper(partitions_definition(world.pipeline), frozen_clock)
    evidence = explain.gather_evidence(world.pipeline, partition_of, now=FROZEN_NOW)
    listing = explain.explain_all(evidence)
    assert (listing.landing_files, listing.ingested) == (8, 7)
    assert {v: [e.path for e in found] for v, found in listing.groups.items()} == {
        Verdict.BELOW_WATERMARK: [below]
    }
    verdict = explain.explain_file(evidence, files[0])
    assert verdict.verdict is Verdict.INGESTED and "3 rows in the table" in verdict.reason


def test_the_sweep_names_only_never_committed_files_after_log_cleanup(
    spark: Any, tmp_path: Path
) -> None:
    clock = Clock()
    world = world_of(tmp_path, clock, watermark={"late_arrival_days": 1, "sweep": {"days": 5}})
    landing = world.landing
    for when in (hour(25, 10), hour(25, 11), hour(26, 10), hour(28, 10)):
        landing.add(when)
        landing.add(when, minute=20)
        ingest(world)
    checkpoint_and_clean(world.table)
    clock.now += SWEEP_EVERY
    quiet = world.loop.tick()
    assert "below their partition's watermark" not in (quiet.skip_message or "")

    late = landing.add(hour(25, 11), minute=10)  # below the 11:00 watermark, never committed
    clock.now += SWEEP_EVERY
    swept = world.loop.tick()
    [observation] = [
        e for e in swept.asset_events if isinstance(e, AssetObservation) and e.partition is None
    ]
    assert observation.metadata["files/below_watermark_first"].value == [late]
    assert (
        f"1 files landed below their partition's watermark ({prefix_of(late)}: 1; first [{late!r}])"
        in (swept.skip_message or "")
    )


def test_optimize_vacuum_and_cleanup_of_the_table_keep_later_runs_and_counts_exact(
    spark: Any, tmp_path: Path
) -> None:
    world = world_of(tmp_path)
    a_month_of_partitions(world)
    optimize(world.table)
    vacuum(world.table)
    checkpoint_and_clean(world.table)

    world.landing.add(hour(28, 10), minute=30)
    world.landing.add(dec(20), minute=30)
    ingest(world)
    assert world.loop.run_partition("2023-12-20").success  # the old day's new file
    assert world.loop.run_partition("2023-12-19").success  # nothing new there
    world.assert_each_row_once()
    row = summarize(world.pipeline)
    assert (row.partitions, row.files, row.rows) == (4, 8, 24)


def test_a_crash_between_the_commit_and_the_checkpoint_loses_nothing_when_the_log_is_cleaned(
    spark: Any, tmp_path: Path
) -> None:
    world = world_of(tmp_path)
    loop, landing = world.loop, world.landing
    landing.add(hour(28, 10))
    ingest(world)
    before_crash = Path(world.pipeline.checkpoint_uri).read_text(encoding="utf-8")
    landing.add(hour(28, 11))
    ingest(world)
    # what a kill right after the Delta commit leaves: the commit, and the checkpoint before it
    storage.write_text_atomic(world.pipeline.checkpoint_uri, before_crash)

    waiting = landing.add(hour(28, 12))
    [request] = loop.tick().run_requests  # the next tick records the crashed run's commit
    optimize(world.table)  # another writer's commit, then a month: the crashed commit is gone
    checkpoint_and_clean(world.table)

    assert loop.run(request).success
    assert by_partition(loop.tick().run_requests) == {}
    world.assert_each_row_once()
    assert checkpoint_json(world.pipeline)["partition_watermarks"]["date=2024-01-28/hour=12"] == (
        name_of(waiting)
    )
    row = summarize(world.pipeline)
    assert (row.partitions, row.files, row.rows) == (1, 3, 9)


def test_the_repair_state_command_named_by_the_error_rebuilds_an_exact_state(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = world_of(tmp_path)
    a_month_of_partitions(world)
    world.landing.add(hour(28, 10), minute=30)
    ingest(world)
    checkpoint_and_clean(world.table)
    Path(world.pipeline.checkpoint_uri).unlink()  # lost (or restored from an old backup)

    with pytest.raises(StateHistoryLostError) as lost:
        load_state(world.pipeline, now=FROZEN_NOW)
    command = "watermark-assets repair-state events"
    assert command in str(lost.value)

    config = tmp_path / "pipelines.yaml"
    raw = pipeline_yaml(tmp_path, **PIPELINE)
    document = {"spark": {"master": "local[2]", "conf": TEST_SPARK_CONF}, "pipelines": [raw]}
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    assert main(["--config", str(config), *command.split()[1:]]) == 0
    assert "7 committed files, 21 rows, 4 partitions" in capsys.readouterr().out

    row = summarize(world.pipeline)
    assert (row.partitions, row.files, row.rows) == (4, 7, 21)
    world.landing.add(dec(19, 11), minute=30)
    world.landing.add(hour(28, 11))
    ingest(world)
    assert world.loop.run_partition("2023-12-19").success
    world.assert_each_row_once()
    assert delta_ids(world.table) == sorted(world.landing.ids)


def test_a_parquet_commit_backfill_after_log_cleanup_commits_no_file_twice(
    spark: Any, tmp_path: Path
) -> None:
    table = tmp_path / "delta" / "clicks"
    clicks = {
        "name": "clicks",
        "source": {"type": "parquet_commit", "uri": str(table)},
        "watermark": {"partition_template": "date=%Y-%m-%d", **SHORT_WINDOWS},
        "table": {"uri": str(table), "partition_by": ["date"]},
        "partitions": {"granularity": "daily", "start": "2023-12-01"},
        "checkpoint": SEED_INTERVALS,
    }
    config = project_config(clicks)
    loop = SensorLoop(
        build_definitions(config, clock=frozen_clock), DagsterInstance.ephemeral(), "clicks"
    )
    writer = ClickWriter(table)
    for when in (dec(19), dec(20), hour(27, 10), hour(28, 10)):
        writer.add(when)
        while requests := loop.tick().run_requests:
            loop.run_all(requests)
    checkpoint_and_clean(str(table))

    writer.add(dec(19, 12))  # another file of the old day, above its (pruned) watermark
    assert loop.run_partition("2023-12-19").success
    ids = DeltaTable(str(table)).to_pyarrow_table(columns=["click_id"]).column("click_id")
    assert sorted(ids.to_pylist()) == writer.ids
    row = summarize(config.file_pipeline("clicks"))
    assert (row.partitions, row.files, row.rows) == (4, 5, 20)
