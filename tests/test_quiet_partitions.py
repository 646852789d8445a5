"""A file-path pipeline's partition that was never materialized and has no file waiting says why
on its own page (``kinds/file_path/quiet_partitions.py``): the landing path it waits under, since
when,
and what closes it. Written by the sensor's tick only when what it says changed: a sensor ticking
every 30 s neither writes nor reads the event log per partition while nothing changed.

No Spark: the sensor only lists files, and nothing here runs a pipeline."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from _landing import FROZEN_NOW, UTC, Landing, hour
from _sensor_loop import SensorLoop
from conftest import pipeline_yaml, project_config
from dagster import AssetKey, AssetObservation, DagsterInstance

from watermark_assets.core.filepath.watermark import FileWatermark, WatermarkState
from watermark_assets.defs import build_definitions
from watermark_assets.defs.partitions import partitions_definition
from watermark_assets.kinds.file_path.quiet_partitions import quiet_truths
from watermark_assets.state.load import PipelineState

EVENTS = AssetKey("events")


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class CountingInstance:
    """Counts the event-log reads of the instance it wraps (what a tick costs)."""

    def __init__(self, instance: DagsterInstance) -> None:
        self.reads = 0
        for name in ("fetch_observations", "fetch_materializations", "get_materialized_partitions"):
            setattr(instance, name, self._counted(getattr(instance, name)))

    def _counted(self, call: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.reads += 1
            return call(*args, **kwargs)

        return counted


def _quiet(data: Any) -> dict[str, tuple[str, str]]:
    """{partition: (state, reason)} of the tick's observations of partitions with no file."""
    return {
        str(event.partition): (
            event.metadata["partition/state"].value,
            event.metadata["partition/reason"].value,
        )
        for event in data.asset_events
        if isinstance(event, AssetObservation)
        and event.partition
        and event.metadata["partition/state"].value in {"waiting", "not listed"}
        and "no file" in event.metadata["partition/reason"].value
    }


def test_a_partition_without_files_says_why_once_and_a_quiet_tick_reads_nothing(
    tmp_path: Path,
) -> None:
    clock = Clock(FROZEN_NOW)
    (tmp_path / "landing").mkdir()
    defs = build_definitions(project_config(pipeline_yaml(tmp_path)), clock=clock)
    instance = DagsterInstance.ephemeral()
    loop = SensorLoop(defs, instance)
    counter = CountingInstance(instance)
    landing = Landing(tmp_path / "landing")

    first = _quiet(loop.tick())
    assert sorted(first) == [f"2024-01-{day:02d}" for day in range(1, 32)]
    state, reason = first["2024-01-31"]
    assert state == "waiting"
    assert reason == (
        f"no file above the watermark under {tmp_path / 'landing'} in its landing partitions "
        "from date=2024-01-31/hour=00 (before date=2024-02-01/hour=00) since "
        "2024-01-31T00:00:00Z: none landed for [2024-01-31T00:00:00Z, 2024-02-01T00:00:00Z) "
        "yet; the sensor lists it on every tick, and it waits for the pipeline's first file"
    )
    page = loop.instance.fetch_observations(EVENTS, limit=100).records
    assert len(page) == 31, "each partition's own page holds its observation"

    reads = counter.reads
    for _ in range(120):  # an hour of ticks every 30 s: nothing new to say
        clock.now += timedelta(seconds=30)
        assert _quiet(loop.tick()) == {}
    assert counter.reads == reads, "a tick with nothing new reads no partition's events"

    clock.now = datetime(2024, 2, 1, 0, 0, 30, tzinfo=UTC)  # a new partition begins
    assert list(_quiet(loop.tick())) == ["2024-02-01"]

    landing.add(hour(30, 10))  # files land in one partition: it is left to the run's words
    data = loop.tick()
    assert [r.partition_key for r in data.run_requests] == ["2024-01-30"]
    assert _quiet(data) == {}, "the other partitions say what they said"


def test_a_partition_before_the_cold_starts_lookback_says_it_is_not_listed(
    tmp_path: Path,
) -> None:
    (tmp_path / "landing").mkdir()
    config = project_config(pipeline_yaml(tmp_path, watermark={"cold_start": {"lookback_days": 2}}))
    defs = build_definitions(config, clock=Clock(FROZEN_NOW))
    said = _quiet(SensorLoop(defs, DagsterInstance.ephemeral()).tick())
    assert {key for key, (state, _) in said.items() if state == "waiting"} == {
        "2024-01-29",
        "2024-01-30",
        "2024-01-31",
    }
    state, reason = said["2024-01-28"]
    assert state == "not listed"
    assert "its cold start lists only from date=2024-01-29/hour=12" in reason
    assert "(cold_start.lookback_days 2)" in reason
    assert "materialize or backfill this partition" in reason


def _state(newest: str) -> PipelineState:
    watermark = FileWatermark(
        WatermarkState.IDLE, f"{newest}/1706000000-1.ndjson.gz", {newest: "1706000000-1.ndjson.gz"}
    )
    return PipelineState(
        watermark=watermark, delta_version=3, checkpoint=None, files_since_checkpoint=0
    )


@pytest.mark.parametrize(
    ("late_days", "waiting", "closes"),
    [
        pytest.param(
            2,
            ["2024-01-31", "2024-01-30", "2024-01-29", "2024-01-28"],
            "the sensor closes it empty (0 rows) once the newest landing partition processed "
            "is at or after 2024-02-03T00:00:00Z (its end + late_arrival_days 2)",
            id="the listing's window: each says when it closes",
        ),
        pytest.param(
            None,
            [f"2024-01-{day:02d}" for day in range(31, 0, -1)],
            "the listing looks at every landing partition (late_arrival_days: none)",
            id="no late-arrival window: every partition waits",
        ),
    ],
)
def test_after_the_first_commit_a_partition_says_what_closes_it(
    tmp_path: Path, late_days: int | None, waiting: list[str], closes: str
) -> None:
    config = project_config(pipeline_yaml(tmp_path, watermark={"late_arrival_days": late_days}))
    pipeline = config.file_pipelines[0]
    truths = quiet_truths(
        pipeline,
        partitions_definition(pipeline),
        _state("date=2024-01-30/hour=10"),
        FROZEN_NOW,
        leave_out={"2024-01-30"},
    )
    assert list(truths) == [key for key in waiting if key != "2024-01-30"]
    assert truths["2024-01-31"].reason.endswith(closes)
    assert truths["2024-01-31"].metadata()["dagster/partition_row_count"].value == 0
