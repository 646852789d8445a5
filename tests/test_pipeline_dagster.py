"""The sensor -> run -> commit loop through Dagster's own APIs, over several ticks.

Definitions come from ``build_definitions`` with a frozen clock; ticks are evaluated with
``build_sensor_context``/``evaluate_tick`` and every RunRequest is executed in process on the same
Dagster instance, on the one Spark session of the test run. Tables are real Delta tables on
tmp_path, read back with deltalake, Polars and DuckDB.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from _landing import (
    FROZEN_NOW,
    MALFORMED_LINES,
    ClickWriter,
    Landing,
    checkpoint_json,
    delta_ids,
    duckdb_ids,
    hour,
    name_of,
    polars_ids,
    prefix_of,
    quarantine_rows,
    table_files,
    table_version,
)
from _sensor_loop import SensorLoop, by_partition, requested_files
from conftest import pipeline_yaml, project_config
from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetObservation,
    DagsterInstance,
    DagsterRunStatus,
    ExecuteInProcessResult,
)
from deltalake import DeltaTable

from watermark_assets.config import FilePipelineConfig
from watermark_assets.defs import build_definitions
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.exceptions import RequestedFileError, UnsortableFileNameError
from watermark_assets.names import PIPELINE_TAG
from watermark_assets.state.commit_metadata import txn_app_id
from watermark_assets.state.load import load_state
from watermark_assets.vocabulary import duration_text, table_pairs, table_rows

NOTHING_YET = "(none: no file processed yet)"


@dataclass
class World:
    """A pipeline, its landing directory and the Dagster loop that ingests it."""

    loop: SensorLoop
    pipeline: FilePipelineConfig
    landing: Landing

    @property
    def table(self) -> str:
        return self.pipeline.table.uri

    def assert_each_row_once(self) -> None:
        """The table holds every id written to the landing directory exactly once."""
        assert delta_ids(self.table) == sorted(self.landing.ids)


def make_world(
    tmp_path: Path, *, clock: Callable[[], datetime] = lambda: FROZEN_NOW, **overrides: Any
) -> World:
    config = project_config(pipeline_yaml(tmp_path, **overrides))
    defs = build_definitions(config, clock=clock)
    pipeline = config.pipeline("events")
    assert isinstance(pipeline, FilePipelineConfig)
    return World(
        SensorLoop(defs, DagsterInstance.ephemeral()), pipeline, Landing(tmp_path / "landing")
    )


@pytest.fixture
def world_with(spark: Any, tmp_path: Path) -> Callable[..., World]:
    """Builds a World with pipeline overrides; the Spark session exists before any run."""
    return lambda **overrides: make_world(tmp_path, **overrides)


@pytest.fixture
def world(world_with: Callable[..., World]) -> World:
    return world_with()


#: Older landing partitions stay listable through the late-arrival window (default) or, without
#: one, through the sensor cursor's oldest pending prefix and the backfill window's start.
LATE_ARRIVAL = pytest.mark.parametrize(
    "late_arrival_days",
    [
        pytest.param(3, id="within the late-arrival window"),
        pytest.param(None, id="with no late-arrival window"),
    ],
)


# --- the loop over several ticks --------------------------------------------------------------


def test_ticks_request_files_above_the_watermarks_and_runs_commit_them_once(world: World) -> None:
    loop, landing = world.loop, world.landing

    # Tick 1: files in two days -> one RunRequest per daily partition, listing exactly its files.
    day28 = [
        landing.add(hour(28, 10)),
        landing.add(hour(28, 10), minute=20),
        landing.add(hour(28, 11)),
    ]
    day29 = [landing.add(hour(29, 10))]
    first = loop.tick()
    assert by_partition(first.run_requests) == {"2024-01-28": day28, "2024-01-29": day29}
    assert len(loop.cursor or "") < 200
    loop.run_all(first.run_requests)
    world.assert_each_row_once()

    expected = {
        "2024-01-28": {
            "watermark/state": "Active",
            "watermark/before": NOTHING_YET,
            "watermark/after": day28[-1],
            "files": 3,
            "rows/read": 9,
            "rows/quarantined": 0,
            "rows/committed": 9,
            "delta/version": 0,
            "watermark/partitions_after": {
                prefix_of(day28[0]): name_of(day28[1]),
                prefix_of(day28[2]): name_of(day28[2]),
            },
        },
        "2024-01-29": {
            "watermark/state": "Active",
            "watermark/before": day28[-1],
            "watermark/after": day29[-1],
            "files": 1,
            "rows/read": 3,
            "rows/quarantined": 0,
            "rows/committed": 3,
            "delta/version": 1,
            "watermark/partitions_after": {prefix_of(day29[0]): name_of(day29[0])},
        },
    }
    for key, want in expected.items():
        got = loop.metadata(key)
        got["watermark/partitions_after"] = table_pairs(got["watermark/partitions_after"])
        assert {k: got[k] for k in want} == want, f"metadata of partition {key}"

    # Tick 2: nothing new -> skipped as Idle, and the checkpoint says so.
    idle = loop.tick()
    assert idle.run_requests == []
    assert (idle.skip_message or "").startswith("Idle:")
    assert checkpoint_json(world.pipeline)["watermark"]["state"] == "Idle"
    assert len(loop.cursor or "") < 200

    # Tick 3: a late file in an older hour (above that hour's watermark) and a new day with
    # malformed lines -> exactly those files are requested.
    late = landing.add(hour(28, 10), minute=40)
    new_day = landing.add(hour(30, 9), rows=3, malformed=MALFORMED_LINES)
    third = loop.tick()
    assert by_partition(third.run_requests) == {"2024-01-28": [late], "2024-01-30": [new_day]}
    loop.run_all(third.run_requests)
    world.assert_each_row_once()

    late_meta = loop.metadata("2024-01-28")
    # the partition's whole watermark: every landing partition of the day, not only the run's
    hour11 = {prefix_of(day28[2]): name_of(day28[2])}
    assert table_pairs(late_meta["watermark/partitions_before"]) == {
        prefix_of(late): name_of(day28[1]),
        **hour11,
    }
    assert table_pairs(late_meta["watermark/partitions_after"]) == {
        prefix_of(late): name_of(late),
        **hour11,
    }
    new_meta = loop.metadata("2024-01-30")
    assert (new_meta["rows/read"], new_meta["rows/quarantined"], new_meta["rows/committed"]) == (
        5,
        2,
        3,
    )
    assert quarantine_rows(world.pipeline.table.quarantine) == sorted(
        (
            {"_source_file": new_day, "_dagster_partition": "2024-01-30", "raw_record": line}
            for line in MALFORMED_LINES
        ),
        key=lambda r: (r["_source_file"], r["raw_record"]),
    )

    # Tick 4: idle again; every reader sees each row once.
    assert (loop.tick().skip_message or "").startswith("Idle:")
    assert len(loop.cursor or "") < 200
    ids = sorted(landing.ids)
    assert len(set(ids)) == len(ids) == 18
    assert delta_ids(world.table) == polars_ids(world.table) == duckdb_ids(world.table) == ids


@pytest.mark.parametrize(
    ("landing_files", "reason_start"),
    [
        pytest.param([], "Initial: no files at all", id="no landing files at all is Initial"),
        pytest.param(
            ["date=2023-12-31/hour=10/1704016800-000001.ndjson.gz"],
            "Initial: 1 files seen, none in a partition",
            id="files only before partitions.start are reported, not requested",
        ),
    ],
)
def test_a_tick_without_work_says_why_in_its_skip_reason(
    tmp_path: Path, landing_files: list[str], reason_start: str
) -> None:
    world = make_world(tmp_path)  # no run: no Spark needed
    world.landing.root.mkdir(parents=True)  # an empty folder (a missing one is an error)
    for relative in landing_files:
        path = world.landing.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"id": 1}\n')
    data = world.loop.tick()
    assert data.run_requests == []
    assert (data.skip_message or "").startswith(reason_start)
    if landing_files:
        assert "outside the partitions" in (data.skip_message or "")


# FROZEN_NOW is 2024-01-31T12:00Z: a file under today's folder belongs to the current (partial)
# partition while partitions.end is in the future, exactly as without an end (issue 22, item 8).
TODAYS_FILE = "date=2024-01-31/hour=10/1706695200-000001.ndjson.gz"


@pytest.mark.parametrize(
    ("end", "requested"),
    [
        pytest.param(None, "2024-01-31", id="no end: today's partition exists"),
        pytest.param("2027-01-01", "2024-01-31", id="an end years ahead: today's partition exists"),
        pytest.param("2024-02-01", "2024-01-31", id="an end tomorrow: today is the last partition"),
        pytest.param("2024-01-31", None, id="an end today (exclusive): today is outside"),
    ],
)
def test_todays_files_are_requested_while_partitions_end_is_in_the_future(
    tmp_path: Path, end: str | None, requested: str | None
) -> None:
    partitions = {"granularity": "daily", "start": "2024-01-01", "end": end}
    world = make_world(tmp_path, partitions=partitions)  # no run: no Spark needed
    path = world.landing.root / TODAYS_FILE
    path.parent.mkdir(parents=True)
    path.write_text('{"id": 1}\n')
    data = world.loop.tick()
    if requested is None:
        assert data.run_requests == []
        assert "outside the partitions" in (data.skip_message or "")
    else:
        assert [r.partition_key for r in data.run_requests] == [requested]


# --- failures, runs in flight, bounded batches ----------------------------------------------------


def failure_text(result: ExecuteInProcessResult) -> str:
    """Class names and messages of a failed run's step errors, causes included."""
    parts = []
    for event in result.all_events:
        error = event.step_failure_data.error if event.is_step_failure else None
        while error is not None:
            parts.append(f"{error.cls_name}: {error.message}")
            error = error.cause
    return "\n".join(parts)


@LATE_ARRIVAL
def test_a_failed_run_is_requested_again_with_a_new_run_key_after_a_newer_partition_commits(
    world_with: Callable[..., World], tmp_path: Path, late_arrival_days: int | None
) -> None:
    world = world_with(watermark={"late_arrival_days": late_arrival_days})
    loop = world.loop
    wanted = world.landing.add(hour(28, 10))
    newer = world.landing.add(hour(29, 10))
    source = world.landing.root / wanted
    parked = tmp_path / "parked.ndjson.gz"

    requests = {r.partition_key: r for r in loop.tick().run_requests}
    assert loop.run(requests["2024-01-29"]).success  # the global watermark moves past 2024-01-28
    request, keys = requests["2024-01-28"], []
    for _attempt in range(2):  # the file vanishes before the run: the run fails, twice
        keys.append(request.run_key)
        shutil.move(source, parked)
        result = loop.run(request, raise_on_error=False)
        assert not result.success
        assert "SourceFileMissingError" in failure_text(result) and wanted in failure_text(result)
        shutil.move(parked, source)
        [request] = loop.tick().run_requests
        assert (request.partition_key, requested_files(request)) == ("2024-01-28", [wanted])

    assert request.run_key not in keys
    assert len({*keys, request.run_key}) == 3, "each attempt has its own run key"
    assert loop.runs_with_run_key(request.run_key or "") == [], "the daemon would not dedupe it"
    assert loop.run(request).success
    world.assert_each_row_once()
    assert load_state(world.pipeline, now=FROZEN_NOW).watermark.value == newer


def test_a_file_that_lands_below_its_partitions_watermark_is_counted_and_shown(
    world: World,
) -> None:
    loop, landing = world.loop, world.landing
    landing.add(hour(28, 10), minute=30)
    loop.run_all(loop.tick().run_requests)
    assert loop.tick().skip_message.startswith("Idle:")  # type: ignore[union-attr]
    ids_before = list(landing.ids)
    late = landing.add(hour(28, 10), minute=0)  # sorts below the hour's watermark
    landing.ids[:] = ids_before  # it is not ingested: the table must not change

    tick = loop.tick()
    assert tick.run_requests == []
    reason = tick.skip_message or ""
    assert "1 files landed below their partition's watermark" in reason
    assert f"{prefix_of(late)}: 1" in reason
    observation, on_partition = tick.asset_events  # the daemon records them
    assert (observation.asset_key, observation.partition) == (AssetKey("events"), None)
    metadata = observation.metadata
    assert metadata["files/below_watermark"].value == 1
    assert table_rows(metadata["files/below_watermark_by_partition"]) == [
        {"partition": prefix_of(late), "files": 1}
    ]
    # ... and on the partition's own page, with its whole watermark and the fix
    assert on_partition.partition == "2024-01-28"
    said = {k: v.value for k, v in on_partition.metadata.items()}
    assert said["partition/state"] == "files not ingested"
    assert said["partition/reason"].startswith(
        f"1 file(s) landed in {prefix_of(late)} at or below its watermark: set sweep.ingest: true"
    )
    assert table_pairs(said["partition/watermarks"]) == table_pairs(
        loop.metadata("2024-01-28")["partition/watermarks"]
    )
    world.assert_each_row_once()

    again = loop.tick()
    assert "1 files landed below" in (again.skip_message or ""), "it stays visible, not dropped"
    assert again.asset_events == [], "an observation only when the count changes"


class Clock:
    """A clock the test moves on (the sweep runs at most once per sweep.interval_minutes)."""

    def __init__(self) -> None:
        self.now = FROZEN_NOW

    def __call__(self) -> datetime:
        return self.now


def test_a_file_landing_after_its_partitions_late_window_is_reported_by_the_sweep(
    spark: Any, tmp_path: Path
) -> None:
    clock = Clock()
    world = make_world(tmp_path, clock=clock, watermark={"late_arrival_days": 1})
    loop, landing = world.loop, world.landing
    landing.add(hour(20, 10))
    landing.add(hour(28, 10))
    loop.run_all(loop.tick().run_requests)
    ids_before = list(landing.ids)
    late = landing.add(hour(20, 10), minute=30)  # above its watermark, 8 days below the newest
    every_id, landing.ids[:] = list(landing.ids), ids_before

    quiet = loop.tick()  # the last sweep was under an hour ago: nothing new is said
    assert "late-arrival window" not in (quiet.skip_message or "")
    clock.now += timedelta(minutes=61)
    tick = loop.tick()
    assert tick.run_requests == [], "the regular listing stopped at the 27th: no run"
    reason = tick.skip_message or ""
    assert (
        f"1 files landed after their partition's late-arrival window closed (first ['{late}'])"
        in (reason)
    )
    assert "backfill their partitions" in reason
    [observation] = tick.asset_events
    assert observation.metadata["files/late_after_window"].value == 1
    assert observation.metadata["files/late_after_window_first"].value == [late]
    world.assert_each_row_once()

    clock.now += timedelta(minutes=5)
    again = loop.tick()
    assert "1 files landed after" in (again.skip_message or ""), "kept between sweeps"
    assert loop.run_partition("2024-01-20").success  # the backfill the note asks for
    clock.now += timedelta(minutes=61)
    cleared = loop.tick()
    assert "late-arrival window" not in (cleared.skip_message or "")
    assert delta_ids(world.table) == sorted(every_id)


def test_a_cold_start_whose_files_all_lie_before_the_lookback_names_them(
    world_with: Callable[..., World],
) -> None:
    world = world_with(watermark={"cold_start": {"lookback_days": 1}})  # now: Jan 31st, 12:00
    old = [world.landing.add(hour(28, 10)), world.landing.add(hour(29, 10))]
    tick = world.loop.tick()
    assert tick.run_requests == []
    reason = tick.skip_message or ""
    assert reason.startswith("Initial: no files since date=2024-01-30/hour=12 under ")
    assert (
        f"2 files landed before the cold start's lookback (watermark.cold_start.lookback_days) "
        f"(first {old})" in reason
    )
    [observation] = [e for e in tick.asset_events if e.partition is None]
    assert observation.metadata["files/late_after_window"].value == 2
    said = {
        e.partition: e.metadata["partition/state"].value for e in tick.asset_events if e.partition
    }
    assert said["2024-01-28"] == "not listed", "its own page says why it was not read"


def test_partitions_into_which_no_file_landed_are_closed_once_their_window_passed(
    world: World,
) -> None:
    loop, landing = world.loop, world.landing  # daily partitions from Jan 1st, 3 late days
    landing.add(hour(20, 10))
    landing.add(hour(28, 10))
    loop.run_all(loop.tick().run_requests)
    stray = landing.add(hour(10, 10))  # lands in a closed window: the partition is not empty

    tick = loop.tick()
    closed = sorted(e.partition for e in tick.asset_events if isinstance(e, AssetMaterialization))
    expected = [f"2024-01-{day:02d}" for day in range(1, 25) if day not in (10, 20)]
    assert closed == expected, "up to the 24th: the horizon is 3 days below Jan 28th, 10:00"
    assert "22 partitions closed with no files landed (2024-01-01..2024-01-24)" in (
        tick.skip_message or ""
    )
    metadata = loop.metadata("2024-01-05")
    assert metadata["partition/files"] == 0 and metadata["dagster/partition_row_count"] == 0
    assert metadata["partition/closed"].startswith(
        "no files landed in [2024-01-05T00:00:00Z, 2024-01-06T00:00:00Z)"
    )
    assert loop.metadata("2024-01-20")["files"] == 1, "a materialized partition is left alone"
    assert "2024-01-10" not in closed, f"{stray} landed there"

    again = loop.tick()
    assert [e for e in again.asset_events if isinstance(e, AssetMaterialization)] == [], (
        "closed once"
    )


HOUR_28 = "date=2024-01-28/hour=10"


@pytest.mark.parametrize(
    ("entry", "error", "says"),
    [
        (f"{HOUR_28}/event-abc123.ndjson.gz", UnsortableFileNameError, "sortable identifier"),
        ("../outside.ndjson.gz", RequestedFileError, "'.', '..' or empty parts"),
        (f"{HOUR_28}/../{HOUR_28}/1706436000-1.ndjson.gz", RequestedFileError, "'..'"),
        (".", RequestedFileError, "'.', '..' or empty parts"),
        ("/tmp/1706436000-1.ndjson.gz", RequestedFileError, "it is absolute"),
        ("", RequestedFileError, "it is empty"),
        (f"{HOUR_28}/_1706436000-1.ndjson.gz", RequestedFileError, "starts with '_' or '.'"),
        (f"{HOUR_28}/1706436000-1.csv", RequestedFileError, "does not end with one of"),
        (
            "date=2024-01-29/hour=10/1706522400-1.ndjson.gz",
            RequestedFileError,
            "it belongs to partition '2024-01-29', not to this run's partitions ['2024-01-28']",
        ),
    ],
    ids=[
        "unsortable name",
        "escapes the source",
        "dot-dot inside",
        "dot",
        "absolute",
        "empty",
        "hidden",
        "wrong suffix",
        "another partition",
    ],
)
def test_a_requested_file_list_passes_the_checks_of_a_listing(
    world: World, entry: str, error: type[Exception], says: str
) -> None:
    good = world.landing.add(hour(28, 10))
    for relative in (
        f"{HOUR_28}/event-abc123.ndjson.gz",
        f"{HOUR_28}/_1706436000-1.ndjson.gz",
        "date=2024-01-29/hour=10/1706522400-1.ndjson.gz",
    ):
        (world.landing.root / relative).parent.mkdir(parents=True, exist_ok=True)
        (world.landing.root / relative).write_bytes((world.landing.root / good).read_bytes())
    with pytest.raises(error, match=re.escape(says)) as raised:
        world.loop.run_partition("2024-01-28", files=[good, entry])
    assert repr(entry) in str(raised.value), "the error names the refused entry"
    assert not DeltaTable.is_deltatable(world.table), "nothing was read or committed"
    assert load_state(world.pipeline, now=FROZEN_NOW).watermark.value is None


def test_a_requested_file_brings_the_unrequested_files_below_it_in_its_partition(
    world: World,
) -> None:
    first, second = world.landing.add(hour(28, 10)), world.landing.add(hour(28, 10), minute=5)
    third = world.landing.add(hour(28, 10), minute=9)
    assert world.loop.run_partition("2024-01-28", files=[second]).success
    metadata = world.loop.metadata("2024-01-28")
    assert metadata["files/added"] == 1, f"{first} is older: the watermark must not pass it"
    assert metadata["files"] == 2
    assert load_state(world.pipeline, now=FROZEN_NOW).watermark.value == second
    assert world.loop.run_partition("2024-01-28", files=[third]).success
    world.assert_each_row_once()


def test_a_first_batch_of_only_malformed_records_still_commits_progress(world: World) -> None:
    loop = world.loop
    path = world.landing.add(hour(28, 10), rows=0, malformed=MALFORMED_LINES)
    loop.run_all(loop.tick().run_requests)

    table = DeltaTable(world.table)
    assert table.version() == 0
    assert "event_date" in table.schema().to_arrow().names  # created with the data's schema
    assert table.to_pyarrow_dataset().count_rows() == 0
    assert [r["_source_file"] for r in quarantine_rows(world.pipeline.table.quarantine)] == [
        path,
        path,
    ]
    assert checkpoint_json(world.pipeline)["watermark"]["value"] == path
    assert (loop.tick().skip_message or "").startswith("Idle:")


def test_a_cold_start_with_a_lookback_lists_only_the_recent_days(
    world_with: Callable[..., World],
) -> None:
    world = world_with(watermark={"cold_start": {"lookback_days": 1}})  # now: Jan 31st, 12:00
    world.landing.add(hour(28, 10))  # before the lookback: history left alone
    # an hourly template: the lookback starts at the same hour one day ago (Jan 30th, 12:00)
    world.landing.add(hour(30, 11))
    recent = [world.landing.add(hour(30, 12)), world.landing.add(hour(31, 9))]
    assert by_partition(world.loop.tick().run_requests) == {
        "2024-01-30": [recent[0]],
        "2024-01-31": [recent[1]],
    }


def test_every_commit_is_recorded_in_the_checkpoint_and_the_interval_only_paces_rewrites(
    world_with: Callable[..., World],
) -> None:
    """The checkpoint is the state that survives Delta's log cleanup (a commit's commitInfo does
    not), so each commit's progress is written at once; the interval governs the rewrites of an
    unchanged state only."""
    world = world_with(checkpoint={"interval_files": 100, "interval_secs": 3600})
    loop, landing = world.loop, world.landing
    first = landing.add(hour(28, 10))
    loop.run_all(loop.tick().run_requests)
    assert checkpoint_json(world.pipeline)["delta_version"] == 0

    second = landing.add(hour(28, 11))
    loop.run_all(loop.tick().run_requests)
    written = checkpoint_json(world.pipeline)
    assert written["delta_version"] == 1, "1 file and 0 s since the last write: written anyway"
    assert written["partition_watermarks"] == {
        prefix_of(first): name_of(first),
        prefix_of(second): name_of(second),
    }

    assert (loop.tick().skip_message or "").startswith("Idle:")
    stamp = Path(world.pipeline.checkpoint_uri).stat().st_mtime_ns
    assert (loop.tick().skip_message or "").startswith("Idle:")
    assert Path(world.pipeline.checkpoint_uri).stat().st_mtime_ns == stamp, (
        "an idle tick with nothing new rewrites nothing"
    )


def test_a_partition_with_a_run_in_flight_is_not_requested_twice(world: World) -> None:
    loop = world.loop
    f28 = world.landing.add(hour(28, 10))
    f29 = world.landing.add(hour(29, 10))
    in_flight = loop.instance.create_run_for_job(
        loop.job,
        status=DagsterRunStatus.STARTED,
        tags={PIPELINE_TAG: "events", "dagster/partition": "2024-01-28"},
    )

    first = loop.tick()
    assert by_partition(first.run_requests) == {"2024-01-29": [f29]}
    loop.run_all(first.run_requests)

    waiting = loop.tick()
    assert waiting.run_requests == []
    assert (waiting.skip_message or "").startswith("Active:")
    assert "2024-01-28" in (waiting.skip_message or "")
    (said,) = [e for e in first.asset_events if e.partition == "2024-01-28"]
    assert said.metadata["partition/state"].value == "waiting"
    assert said.metadata["partition/reason"].value.startswith(
        f"1 file(s) above the watermark ({f28} .. {f28}) wait for the run in flight over this "
        "partition. No file of this partition committed yet"
    )
    assert said.metadata["files/pending"].value == 1
    assert said.metadata["bytes/pending"].value == (world.landing.root / f28).stat().st_size
    # the pipeline's backlog as numbers, on the asset's observation
    (backlog,) = [
        e for e in first.asset_events if isinstance(e, AssetObservation) and not e.partition
    ]
    numbers = {k: v.value for k, v in backlog.metadata.items() if k.startswith("backlog/")}
    assert numbers == {
        "backlog/files_pending": 2,
        "backlog/bytes_pending": sum((world.landing.root / f).stat().st_size for f in (f28, f29)),
        "backlog/oldest_pending_age": duration_text(FROZEN_NOW - hour(28, 10)),
        "backlog/oldest_pending_age/seconds": (FROZEN_NOW - hour(28, 10)).total_seconds(),
        "backlog/oldest_pending_time": "2024-01-28T10:00:00Z",
        "backlog/oldest_pending_file": f28,
        "backlog/listing_capped": False,
    }
    assert not [
        e
        for e in waiting.asset_events
        if isinstance(e, AssetObservation) and e.partition == "2024-01-28"
    ], "said once, not every tick"

    loop.instance.report_run_failed(in_flight)
    after = loop.tick()
    assert by_partition(after.run_requests) == {"2024-01-28": [f28]}
    loop.run_all(after.run_requests)
    world.assert_each_row_once()


def test_a_range_backfill_in_flight_holds_back_every_partition_of_its_range(world: World) -> None:
    loop = world.loop
    world.landing.add(hour(27, 10))
    world.landing.add(hour(28, 10))
    f29 = world.landing.add(hour(29, 10))
    backfill = loop.instance.create_run_for_job(  # as a UI backfill of the asset launches it
        loop.job,
        status=DagsterRunStatus.STARTED,
        tags={
            "dagster/asset_partition_range_start": "2024-01-27",
            "dagster/asset_partition_range_end": "2024-01-28",
        },
    )
    first = loop.tick()
    assert by_partition(first.run_requests) == {"2024-01-29": [f29]}
    loop.instance.report_run_failed(backfill)
    assert set(by_partition(loop.tick().run_requests)) == {"2024-01-27", "2024-01-28", "2024-01-29"}


def test_max_files_per_run_caps_a_batch_and_the_rest_comes_on_the_next_tick(
    world_with: Callable[..., World],
) -> None:
    world = world_with(sensor={"max_files_per_run": 2})
    loop, landing = world.loop, world.landing
    day28 = [
        landing.add(hour(28, 10)),
        landing.add(hour(28, 10), minute=30),
        landing.add(hour(28, 11)),
    ]
    day29 = [landing.add(hour(29, 10))]

    first = loop.tick()
    assert by_partition(first.run_requests) == {"2024-01-28": day28[:2], "2024-01-29": day29}
    loop.run_all(first.run_requests)
    second = loop.tick()
    assert by_partition(second.run_requests) == {"2024-01-28": day28[2:]}
    loop.run_all(second.run_requests)
    assert (loop.tick().skip_message or "").startswith("Idle:")
    world.assert_each_row_once()


# --- backfills and replays ----------------------------------------------------------------------


def test_a_backfill_run_without_a_file_list_ingests_its_partition_above_its_own_watermark(
    world: World,
) -> None:
    loop, landing = world.loop, world.landing
    first = landing.add(hour(28, 10))
    landing.add(hour(29, 10))
    loop.run_all(loop.tick().run_requests)

    late = landing.add(hour(28, 10), minute=30)
    other_day = landing.add(hour(29, 11))
    assert loop.run_partition("2024-01-28").success  # no file list, as a backfill runs it

    metadata = loop.metadata("2024-01-28")
    assert (metadata["files"], metadata["partition/first_file"]) == (1, late)
    assert table_pairs(metadata["watermark/partitions_before"]) == {
        prefix_of(first): name_of(first)
    }
    assert table_pairs(metadata["watermark/partitions_after"]) == {prefix_of(late): name_of(late)}
    assert by_partition(loop.tick().run_requests) == {"2024-01-29": [other_day]}, (
        "the other partition's new file is left to its own run"
    )


def test_a_backfill_of_a_partition_older_than_the_late_arrival_window_never_duplicates(
    world_with: Callable[..., World],
) -> None:
    world = world_with(watermark={"late_arrival_days": 1, "sweep": {"days": 1}})
    loop, landing = world.loop, world.landing
    old = landing.add(hour(20, 10))
    landing.add(hour(28, 10))
    loop.run_all(loop.tick().run_requests)
    assert prefix_of(old) not in checkpoint_json(world.pipeline)["partition_watermarks"], (
        "the 20th is 8 days below the newest partition (1 + 1 days kept): its watermark is pruned"
    )

    late = landing.add(hour(20, 10), minute=30)  # lands after the 20th left the window
    assert by_partition(loop.tick().run_requests) == {}, "the sensor no longer lists the 20th"
    assert loop.run_partition("2024-01-20").success  # a backfill of the old partition

    metadata = loop.metadata("2024-01-20")
    assert (metadata["files"], metadata["partition/first_file"]) == (1, late)
    assert table_pairs(metadata["watermark/partitions_before"]) == {prefix_of(old): name_of(old)}, (
        "the pruned watermark came back from the partition's last commit in the Delta log"
    )
    world.assert_each_row_once()
    assert loop.run_partition("2024-01-20").success
    world.assert_each_row_once()


@LATE_ARRIVAL
def test_a_range_run_covers_its_window_in_one_commit_with_metadata_per_partition(
    world_with: Callable[..., World], late_arrival_days: int | None
) -> None:
    world = world_with(watermark={"late_arrival_days": late_arrival_days})
    loop, landing = world.loop, world.landing
    seen = landing.add(hour(28, 10))
    loop.run_all(loop.tick().run_requests)  # 2024-01-28 already has a watermark (txn 1)
    version_before = table_version(world.table)

    day27 = landing.add(hour(27, 10))
    day28 = [landing.add(hour(28, 10), minute=30), landing.add(hour(28, 12))]
    result = loop.run_range("2024-01-27", "2024-01-29")  # 2024-01-29 has no files
    assert result.success
    world.assert_each_row_once()

    committer = DeltaCommitter(world.table)
    assert committer.current_version() == version_before + 1, "ONE commit for the whole range"
    commit = committer.read_commit(version_before + 1)
    assert commit.txns == {
        txn_app_id("events", "2024-01-27"): 1,
        txn_app_id("events", "2024-01-28"): 2,
        txn_app_id("events", "2024-01-29"): 1,
    }
    expected = {
        "2024-01-27": (1, day27, day27, {}, {prefix_of(day27): name_of(day27)}),
        "2024-01-28": (
            2,
            day28[0],
            day28[1],
            {prefix_of(seen): name_of(seen)},
            {prefix_of(d): name_of(d) for d in day28},
        ),
        "2024-01-29": (0, NOTHING_YET, NOTHING_YET, {}, {}),
    }
    for key, (files, first, last, before, after) in expected.items():
        got = loop.metadata(key)
        assert (
            got["partition/files"],
            got["partition/first_file"],
            got["partition/last_file"],
            table_pairs(got["watermark/partitions_before"]),
            table_pairs(got["watermark/partitions_after"]),
        ) == (files, first, last, before, after), f"metadata of partition {key}"
        assert got["delta/version"] == version_before + 1
    assert (loop.tick().skip_message or "").startswith("Idle:")


# --- the commit pipeline kind: Parquet files another writer puts under the table ----------------


def clicks_loop(table: Path) -> SensorLoop:
    """A commit pipeline over ``table``: another writer's Parquet files, committed in place."""
    clicks = {
        "name": "clicks",
        "source": {"type": "parquet_commit", "uri": str(table)},
        "watermark": {"partition_template": "date=%Y-%m-%d"},
        "table": {"uri": str(table), "partition_by": ["date"]},
        "partitions": {"granularity": "daily", "start": "2024-01-01"},
        "checkpoint": {"interval_files": 1, "interval_secs": 0},
    }
    defs = build_definitions(project_config(clicks), clock=lambda: FROZEN_NOW)
    return SensorLoop(defs, DagsterInstance.ephemeral(), pipeline="clicks")


def test_the_commit_pipeline_adds_another_writers_parquet_files_through_the_same_loop(
    tmp_path: Path,
) -> None:
    table = tmp_path / "delta" / "clicks"
    loop = clicks_loop(table)
    writer = ClickWriter(table)
    day28 = [writer.add(hour(28, 1)), writer.add(hour(28, 5))]
    day29 = [writer.add(hour(29, 2), rows=3)]

    first = loop.tick()
    assert by_partition(first.run_requests, "clicks") == {"2024-01-28": day28, "2024-01-29": day29}
    loop.run_all(first.run_requests)
    assert table_files(table) == sorted(day28 + day29), "added in place"
    assert (loop.tick().skip_message or "").startswith("Idle:")

    later = writer.add(hour(29, 9))
    second = loop.tick()
    assert by_partition(second.run_requests, "clicks") == {"2024-01-29": [later]}
    loop.run_all(second.run_requests)

    ids = sorted(writer.ids)
    frame = pl.read_delta(str(table))
    assert sorted(frame.get_column("click_id").to_list()) == ids
    rows_per_day = dict(frame.group_by("date").len().sort("date").iter_rows())
    assert rows_per_day == {"2024-01-28": 8, "2024-01-29": 7}
    uris = DeltaTable(str(table)).file_uris()
    duck = duckdb.execute(f"SELECT click_id FROM read_parquet({uris!r})").fetchall()
    assert sorted(row[0] for row in duck) == ids
    assert loop.metadata("2024-01-29")["partition/last_file"] == later


def test_the_commit_pipeline_quarantines_a_truncated_parquet_file_and_commits_the_others(
    tmp_path: Path,
) -> None:
    table = tmp_path / "delta" / "clicks"
    loop = clicks_loop(table)
    writer = ClickWriter(table)
    day28 = [writer.add(hour(28, 1)), writer.add(hour(28, 5))]
    lost_ids = list(writer.ids[-4:])  # the second file's rows
    day28.append(writer.add(hour(28, 9)))
    broken = table / day28[1]
    content = broken.read_bytes()[:100]
    broken.write_bytes(content)
    good_ids = [i for i in writer.ids if i not in lost_ids]

    loop.run_all(loop.tick().run_requests)

    assert table_files(table) == [day28[0], day28[2]], "the truncated file is not in the log"
    assert sorted(pl.read_delta(str(table)).get_column("click_id").to_list()) == good_ids
    [record] = (
        DeltaTable(str(tmp_path / "delta" / "clicks_quarantine")).to_pyarrow_table().to_pylist()
    )
    assert (record["_source_file"], record["file_size"]) == (day28[1], len(content))
    assert record["error"].startswith("not a readable Parquet file"), record["error"]
    assert loop.metadata("2024-01-28")["files/quarantined"] == 1
    assert (loop.tick().skip_message or "").startswith("Idle:"), "the watermark passed it"


# --- a partition's materialization states its whole watermark ------------------------------------


def test_a_range_backfill_that_finds_nothing_new_keeps_each_partitions_whole_watermark(
    world: World,
) -> None:
    loop, landing = world.loop, world.landing
    day28 = [landing.add(hour(28, h)) for h in (10, 11, 12, 13)]  # four landing partitions
    loop.run_all(loop.tick().run_requests)
    marks = {prefix_of(f): name_of(f) for f in day28}

    assert loop.run_range("2024-01-28", "2024-01-29").success  # nothing new anywhere

    got = loop.metadata("2024-01-28")
    assert got["partition/files"] == 0, "this run read nothing"
    assert (
        table_pairs(got["watermark/partitions_before"]),
        table_pairs(got["watermark/partitions_after"]),
    ) == (marks, marks)
    assert table_pairs(got["partition/watermarks"]) == marks, (
        "the partition's whole watermark, not the run's"
    )
    assert (got["partition/state"], got["partition/watermark"]) == ("ingested", day28[-1])
    assert got["partition/files_committed"] == 4
    assert got["dagster/partition_row_count"] == 12
    assert got["partition/first_file"] == "(none: no new file)"
    assert "4 file(s) committed from 4 landing partition(s)" in got["partition/reason"]
    empty = loop.metadata("2024-01-29")
    assert (empty["partition/state"], table_pairs(empty["partition/watermarks"])) == (
        "no file yet",
        {},
    )
    assert empty["partition/first_file"] == NOTHING_YET
