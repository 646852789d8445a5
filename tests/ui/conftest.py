"""One real ``dagster dev`` for the UI tests, and the scenario it goes through, in stages.

The stages are package fixtures (tests/ui) that build on each other, so any test can ask for the
state it checks and the browser tests always see the same final state, whatever runs first.
Package, not session: ``dagster dev`` (and its sensor, ticking) stops after the last UI test,
not at the end of the whole run (under pytest-xdist the UI tests run first, in one worker:
tests/conftest.py XDIST_GROUPS):

1. ``first_backfill``: three landing files in two days; a backfill of that partition range.
2. ``sensor_ingest``: the sensor is turned on, three more files land; the sensor's runs.
3. ``second_backfill``: the same backfill again (nothing above the watermarks: no new rows).

Each stage records what the Delta table, the checkpoint and the materializations looked like when
it ended, and the tests assert on those snapshots.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads
import pytest
from deltalake import DeltaTable

from .dagster_dev import (
    PIPELINE,
    SENSOR,
    SENSOR_SELECTOR,
    DagsterDev,
    LandingFile,
    Paths,
    instance_yaml,
    land,
    run_files,
    tag_dict,
    today_utc,
    wait_for,
    write_config,
)

# How long a stage may wait for dagster dev's runs before it fails (the waits end as soon as
# the runs have finished): every run starts a Spark JVM, and under `make pytest` the other
# workers run Spark beside them on the same cores. The sensor stage waits for the requests,
# then for the runs, and stays within pytest-timeout's 600 s per test.
BACKFILL_TIMEOUT = 300.0
SENSOR_TIMEOUT = 260.0


@dataclass(frozen=True)
class Scenario:
    """The test configuration, its folders, the days it uses and the files that will land."""

    paths: Paths
    config_path: Path
    partitions_start: date
    day1: date
    day2: date
    day3: date
    first_files: tuple[LandingFile, ...]
    sensor_files: tuple[LandingFile, ...]

    @property
    def backfill_range(self) -> list[str]:
        return [self.day1.isoformat(), self.day2.isoformat()]


@dataclass(frozen=True)
class Snapshot:
    """The table, its quarantine and the checkpoint at the end of a stage."""

    version: int | None
    rows: list[dict[str, Any]]
    quarantine: list[dict[str, Any]]
    checkpoint: dict[str, Any] | None


@dataclass(frozen=True)
class BackfillStage:
    backfill_id: str
    backfill: dict[str, Any]
    run_ids: list[str]
    materializations: list[dict[str, Any]]
    snapshot: Snapshot


@dataclass(frozen=True)
class SensorStage:
    skip_reason_before: str
    runs: list[dict[str, Any]]
    materializations: list[dict[str, Any]]
    skip_reason_after: str
    snapshot: Snapshot


def _read_table(uri: Path, columns: list[str]) -> list[dict[str, Any]]:
    if not DeltaTable.is_deltatable(str(uri)):
        return []
    # to_pyarrow_dataset, not to_pyarrow_table: the latter sometimes aborts the interpreter at
    # exit ("terminate called without an active exception") with deltalake 1.x.
    dataset: pads.Dataset = DeltaTable(str(uri)).to_pyarrow_dataset()
    return list(dataset.to_table(columns=columns).to_pylist())


def snapshot(paths: Paths) -> Snapshot:
    version = (
        DeltaTable(str(paths.table)).version()
        if DeltaTable.is_deltatable(str(paths.table))
        else None
    )
    rows = _read_table(paths.table, ["id", "_source_file", "_dagster_partition", "event_date"])
    quarantine = _read_table(paths.quarantine, ["_source_file", "raw_record"])
    checkpoint = json.loads(paths.checkpoint.read_text()) if paths.checkpoint.exists() else None
    return Snapshot(version, rows, quarantine, checkpoint)


# ----------------------------------------------------------------------------- the server


@pytest.fixture(scope="package")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    root = tmp_path_factory.mktemp("ui_data")
    today = today_utc()
    # Partitions start a week ago: the partition view shows a handful of days, not years.
    start = today - timedelta(days=7)
    day1, day2, day3 = (today - timedelta(days=n) for n in (6, 5, 4))
    first = (
        LandingFile(day1, 10, 0, "a1", (1, 2, 3, 4, 5), malformed=1),
        LandingFile(day1, 11, 0, "a2", (101, 102, 103, 104, 105)),
        LandingFile(day2, 9, 0, "a3", (201, 202, 203, 204)),
    )
    later = (
        # a later name in a landing folder that already has a watermark
        LandingFile(day2, 9, 1800, "b1", (301, 302)),
        # a new landing folder in a partition the backfill covered
        LandingFile(day2, 12, 0, "b2", (311, 312, 313)),
        # a partition nothing has touched yet
        LandingFile(day3, 8, 0, "b3", (401, 402, 403, 404, 405, 406), malformed=1),
    )
    paths = Paths(root)
    config_path = root / "pipelines.yaml"
    write_config(config_path, paths, start)
    return Scenario(paths, config_path, start, day1, day2, day3, first, later)


@pytest.fixture(scope="package")
def dagster_dev(
    scenario: Scenario, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DagsterDev]:
    """``dagster dev`` (webserver + daemon) on a free port, with a temporary DAGSTER_HOME."""
    home = tmp_path_factory.mktemp("dagster_home")
    (home / "dagster.yaml").write_text(instance_yaml())
    dev = DagsterDev(home, scenario.config_path, home / "dagster-dev.log")
    dev.start()
    try:
        dev.wait_until_ready(timeout=120)
        yield dev
    finally:
        dev.stop()


# ----------------------------------------------------------------------------- the stages


def _wait_for_backfill_runs(dev: DagsterDev, backfill_id: str) -> list[str]:
    """Until the backfill has launched its runs and all of them finished (then they must pass)."""

    def runs_done() -> list[str] | None:
        backfill = dev.backfill(backfill_id)
        if backfill["status"] in ("FAILED", "CANCELED", "COMPLETED_FAILED"):
            failures = [dev.run_failure(r["runId"]) for r in backfill["runs"]]
            raise AssertionError(
                f"backfill {backfill_id} {backfill['status']}: {backfill}\n" + "\n".join(failures)
            )
        runs = backfill["runs"]
        finished = all(r["status"] in ("SUCCESS", "FAILURE", "CANCELED") for r in runs)
        if runs and finished:
            return [r["runId"] for r in runs]
        return None

    run_ids = wait_for(
        f"the runs of backfill {backfill_id}",
        runs_done,
        timeout=BACKFILL_TIMEOUT,
        interval=2.0,
        details=lambda: f"{dev.backfill(backfill_id)}\n{dev.log_tail(30)}",
    )
    dev.wait_for_runs(run_ids, timeout=30)
    return run_ids


def _run_materializations(dev: DagsterDev, run_ids: list[str]) -> list[dict[str, Any]]:
    return [m for m in dev.materializations(PIPELINE) if m["runId"] in set(run_ids)]


@pytest.fixture(scope="package")
def first_backfill(dagster_dev: DagsterDev, scenario: Scenario) -> BackfillStage:
    land(scenario.paths.landing, scenario.first_files)
    backfill_id = dagster_dev.launch_backfill(PIPELINE, scenario.backfill_range)
    run_ids = _wait_for_backfill_runs(dagster_dev, backfill_id)
    return BackfillStage(
        backfill_id,
        dagster_dev.backfill(backfill_id),
        run_ids,
        _run_materializations(dagster_dev, run_ids),
        snapshot(scenario.paths),
    )


def _start_sensor(dev: DagsterDev) -> None:
    data = dev.graphql(
        """mutation Start($selector: SensorSelector!) {
             startSensor(sensorSelector: $selector) { __typename
               ... on Sensor { sensorState { status } }
               ... on PythonError { message }
               ... on SensorNotFoundError { message }
               ... on UnauthorizedError { message } } }""",
        {"selector": SENSOR_SELECTOR},
    )
    result = data["startSensor"]
    assert result["__typename"] == "Sensor", f"startSensor: {result}"
    assert result["sensorState"]["status"] == "RUNNING"


def _next_skipped_tick(dev: DagsterDev, after: float, timeout: float = 60) -> dict[str, Any]:
    """The first skipped tick that started after ``after`` (a Unix timestamp)."""

    def tick() -> dict[str, Any] | None:
        for candidate in reversed(dev.sensor_ticks(limit=10)):
            if candidate["timestamp"] > after and candidate["status"] == "SKIPPED":
                return candidate
            if candidate["timestamp"] > after and candidate["status"] == "FAILURE":
                raise AssertionError(f"sensor tick failed: {candidate['error']}")
        return None

    return wait_for(
        f"a skipped tick of {SENSOR}",
        tick,
        timeout=timeout,
        interval=1.0,
        details=lambda: json.dumps(dev.sensor_ticks(limit=5), indent=1),
    )


@pytest.fixture(scope="package")
def sensor_ingest(
    dagster_dev: DagsterDev, scenario: Scenario, first_backfill: BackfillStage
) -> SensorStage:
    started = time.time()
    _start_sensor(dagster_dev)
    before = _next_skipped_tick(dagster_dev, after=started)
    expected = {f.path for f in scenario.sensor_files}
    land(scenario.paths.landing, scenario.sensor_files)

    def requested() -> list[dict[str, Any]] | None:
        runs = dagster_dev.runs({"dagster/sensor_name": SENSOR})
        files = {p for run in runs for p in run_files(run)}
        return runs if files >= expected else None

    runs = wait_for(
        "the sensor's runs for the new files",
        requested,
        timeout=SENSOR_TIMEOUT,
        interval=2.0,
        details=lambda: json.dumps(dagster_dev.sensor_ticks(5), indent=1),
    )
    run_ids = [r["runId"] for r in runs]
    dagster_dev.wait_for_runs(run_ids, timeout=SENSOR_TIMEOUT)
    finished = time.time()
    # The sensor may still request runs for files it saw while the first ones ran: settle first.
    after = _next_skipped_tick(dagster_dev, after=finished)
    runs = [
        {**r, "files": run_files(r), "tag_map": tag_dict(r)}
        for r in dagster_dev.runs({"dagster/sensor_name": SENSOR})
    ]
    return SensorStage(
        before["skipReason"],
        runs,
        _run_materializations(dagster_dev, [r["runId"] for r in runs]),
        after["skipReason"],
        snapshot(scenario.paths),
    )


@pytest.fixture(scope="package")
def second_backfill(
    dagster_dev: DagsterDev,
    scenario: Scenario,
    first_backfill: BackfillStage,
    sensor_ingest: SensorStage,
) -> BackfillStage:
    backfill_id = dagster_dev.launch_backfill(PIPELINE, scenario.backfill_range)
    run_ids = _wait_for_backfill_runs(dagster_dev, backfill_id)

    def completed() -> dict[str, Any] | None:
        backfill = dagster_dev.backfill(backfill_id)
        return backfill if backfill["status"] not in ("REQUESTED",) else None

    backfill = wait_for(f"backfill {backfill_id} to complete", completed, timeout=90, interval=2.0)
    return BackfillStage(
        backfill_id,
        backfill,
        run_ids,
        _run_materializations(dagster_dev, run_ids),
        snapshot(scenario.paths),
    )
