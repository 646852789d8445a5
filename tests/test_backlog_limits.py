"""``backlog_limits:``: the backlog's numbers against limits a user sets, as the asset check
``backlog_within_limits`` (``defs/backlog_check.py``). A file-path pipeline's sensor evaluates it
on the ticks that measure the backlog; an event-time run evaluates the lag it leaves behind.

No Spark: the sensor only lists files, and nothing here runs a pipeline."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from _landing import FROZEN_NOW, Landing, hour
from _sensor_loop import SensorLoop
from conftest import pipeline_yaml, project_config
from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetKey,
    DagsterInstance,
    build_asset_check_context,
)
from pydantic import ValidationError

from watermark_assets.config.backlog import EventTimeBacklogLimits, FileBacklogLimits
from watermark_assets.defs import build_definitions
from watermark_assets.defs.backlog_check import BACKLOG_CHECK, backlog_verdict

EVENTS = AssetKey("events")


@pytest.mark.parametrize(
    ("limits", "measured", "breaches"),
    [
        pytest.param({"files_pending": 10}, {"files_pending": 10}, [], id="at the limit passes"),
        pytest.param(
            {"files_pending": 10},
            {"files_pending": 1_204},
            ["files_pending 1,204 > limit 10"],
            id="over the limit",
        ),
        pytest.param(
            {"bytes_pending": 1_000, "oldest_pending_age": "2 hours"},
            {"bytes_pending": 5, "oldest_pending_age": 7_201},
            ["oldest_pending_age 7,201 s > limit 7,200 s"],
            id="an age in seconds against a duration",
        ),
        pytest.param(
            {"oldest_pending_age": "1 hour"},
            {"files_pending": 0, "bytes_pending": 0},
            [],
            id="no file waiting: no age, no breach",
        ),
    ],
)
def test_the_verdict_names_each_limit_passed(
    limits: dict[str, Any], measured: dict[str, float], breaches: list[str]
) -> None:
    verdict = backlog_verdict(FileBacklogLimits(**limits), measured)
    assert verdict.passed is (not breaches)
    assert list(verdict.breaches) == breaches
    assert verdict.metadata[f"{next(iter(limits))}/limit"].value == pytest.approx(
        FileBacklogLimits(**limits).maxima()[next(iter(limits))]
    )


@pytest.mark.parametrize(
    ("model", "value", "message"),
    [
        pytest.param(FileBacklogLimits, {}, "sets no limit", id="no limit at all"),
        pytest.param(
            FileBacklogLimits,
            {"oldest_pending_age": "two hours"},
            "backlog_limits.oldest_pending_age: duration 'two hours' is refused",
            id="a duration that is not one",
        ),
        pytest.param(FileBacklogLimits, {"files_pending": -1}, "greater than or equal to 0"),
        pytest.param(
            EventTimeBacklogLimits, {"files_pending": 3}, "Extra inputs", id="file limit on lag"
        ),
    ],
)
def test_bad_limits_are_refused_naming_the_key(model: Any, value: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        model(**value)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def _world(tmp_path: Path, clock: Clock, **limits: Any) -> tuple[SensorLoop, Landing]:
    (tmp_path / "landing").mkdir()
    config = project_config(pipeline_yaml(tmp_path, backlog_limits=limits))
    defs = build_definitions(config, clock=clock)
    return SensorLoop(defs, DagsterInstance.ephemeral()), Landing(tmp_path / "landing")


def _evaluations(data: Any) -> list[AssetCheckEvaluation]:
    return [e for e in data.asset_events if isinstance(e, AssetCheckEvaluation)]


def test_the_sensor_evaluates_the_limits_when_the_backlog_or_the_verdict_changes(
    tmp_path: Path,
) -> None:
    clock = Clock(FROZEN_NOW)
    loop, landing = _world(tmp_path, clock, files_pending=5, oldest_pending_age="4 days")
    assert AssetCheckKey(EVENTS, BACKLOG_CHECK) in loop.defs.resolve_asset_graph().asset_check_keys
    landing.add(hour(28, 10))
    landing.add(hour(29, 10))

    (first,) = _evaluations(loop.tick())
    assert first.passed, first.description
    assert first.metadata["files_pending"].value == 2
    assert first.metadata["oldest_pending_age"].value == (
        (FROZEN_NOW - hour(28, 10)).total_seconds()
    )
    assert _evaluations(loop.tick()) == [], "nothing changed: nothing said again"

    clock.now = hour(28, 10) + timedelta(days=4, seconds=1)  # the oldest file waits too long
    (aged,) = _evaluations(loop.tick())
    assert not aged.passed
    assert aged.description == (
        "Backlog over its limits: oldest_pending_age 345,601 s > limit 345,600 s"
    )
    assert aged.severity.value == "WARN"

    # executed by hand: the sensor's latest measurement, at the current time
    check = loop.defs.get_asset_checks_def(AssetCheckKey(EVENTS, BACKLOG_CHECK))
    clock.now += timedelta(hours=1)
    by_hand = check(build_asset_check_context(instance=loop.instance))
    assert not by_hand.passed
    assert "oldest_pending_age 349,201 s" in (by_hand.description or "")


def test_without_limits_there_is_no_check(tmp_path: Path) -> None:
    (tmp_path / "landing").mkdir()
    config = project_config(pipeline_yaml(tmp_path))
    defs = build_definitions(config, clock=Clock(FROZEN_NOW))
    assert AssetCheckKey(EVENTS, BACKLOG_CHECK) not in defs.resolve_asset_graph().asset_check_keys


def test_the_check_by_hand_before_any_tick_says_how_to_measure(tmp_path: Path) -> None:
    loop, _ = _world(tmp_path, Clock(FROZEN_NOW), files_pending=5, severity="error")
    check = loop.defs.get_asset_checks_def(AssetCheckKey(EVENTS, BACKLOG_CHECK))
    result = check(build_asset_check_context(instance=loop.instance))
    assert result.passed
    assert "events_sensor measures it" in (result.description or "")
