"""Time pipelines (seed 003, issue 8 section 1): windows of a time watermark as Dagster partitions.

- Configuration: ``watermark: {kind: time, column, from, to, partition, ...}`` over the column
  sources; errors name the key, the value and the accepted forms.
- Partitions: Dagster's keys and windows are exactly the core's ``windows(spec, now)``.
- End to end (real Spark, real Delta, frozen clock): an "orders" Delta source read window by
  window, each window replaced in ONE commit that records its high watermark; the ticks of the
  seed's examples request exactly the windows due and say why; an HTTP API serving "the last 7
  days of daily files" (the seed's abstinent example).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from conftest import TEST_SPARK_CONF, project_config
from dagster import (
    AssetMaterialization,
    DagsterInstance,
    DagsterRunStatus,
    ExecuteInProcessResult,
    build_schedule_context,
    build_sensor_context,
    partition_loading_context,
)
from deltalake import CommitProperties, DeltaTable, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_column_pipeline import Orders

from watermark_assets.config import TimePipelineConfig, parse_config
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.time import TimeSpec, TimeWatermark, windows
from watermark_assets.defs import build_definitions
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.exceptions import ConfigError
from watermark_assets.kinds.time.defs import (
    decide_tick,
    partition_cron,
    partition_key,
    tick_message,
    tick_requests,
    time_partitions,
)
from watermark_assets.kinds.time.run import (
    column_spec,
    load_time_watermark,
    time_metadata_key,
    window_app_id,
)
from watermark_assets.runs.faults import CRASH_ENV_VAR
from watermark_assets.vocabulary import table_rows

UTC = timezone.utc


def day(text: str) -> datetime:
    """``2020-01-15`` or ``2020-01-15T06:00`` as an aware UTC instant."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# --- configuration ---


TESTS = Path(__file__).parent


def time_pipeline(tmp_path: Path, **watermark: Any) -> dict[str, Any]:
    return {
        "name": "orders",
        "source": {"type": "delta_table", "uri": str(tmp_path / "source" / "orders")},
        "watermark": {"kind": "time", "column": "updated_at", "from": "2020-01-01", **watermark},
        "table": {"uri": str(tmp_path / "delta" / "orders")},
    }


def load(text: str) -> Any:
    return parse_config(text, env={}, base=Path.cwd(), origin="pipelines.yaml")


def test_a_time_watermark_loads_from_yaml_with_the_seeds_forms(tmp_path: Path) -> None:
    text = f"""
pipelines:
  - name: orders
    source: {{type: delta_table, uri: {tmp_path}/source}}
    watermark:
      kind: time
      column: updated_at
      from: 2020-02-21 10:00:00
      to: '-'
      partition: daily
      grace_days: 3
    table: {{uri: {tmp_path}/delta}}
"""
    (pipeline,) = load(text).pipelines
    assert isinstance(pipeline, TimePipelineConfig)
    spec = pipeline.watermark.spec
    assert spec == TimeSpec("2020-02-21 10:00:00", "-", "daily", grace_days=3)
    assert pipeline.watermark.partial_partition is True
    assert pipeline.watermark.abstinent_days == 0
    # The same source without kind: time is a column pipeline (the implied kind stays column).
    column = text.replace("kind: time", "kind: column")
    with pytest.raises(ConfigError, match="column"):
        load(column)


BAD_TIME_CONFIGS = {
    "a to in no accepted form": (
        {"to": "yesterday"},
        ["'to'", "'yesterday'", "P<n>D", "'-' for now"],
    ),
    "a from in no accepted form": ({"from": "01/02/2020"}, ["'from'", "'01/02/2020'", "ISO date"]),
    "an unknown partition": (
        {"partition": "yearly"},
        ["watermark.partition", "'yearly'", "monthly, weekly, daily, hourly, none"],
    ),
    "a monthly from on the 31st": (
        {"from": "2020-01-31", "partition": "monthly"},
        ["watermark.from", "'2020-01-31'", "day 1..28"],
    ),
    "a rolling from": ({"from": "P30D"}, ["watermark.from", "'P30D'", "fixed start"]),
    "negative grace days": ({"grace_days": -1}, ["grace_days", "-1"]),
    # issue 22, item 7: refused at load, not "0 partitions" on every tick
    "a to before from": (
        {"from": "2020-02-01", "to": "2020-01-01"},
        [
            "watermark.from '2020-02-01' and watermark.to '2020-01-01' are refused: to is before "
            "from",
            "Give a to after from",
        ],
    ),
    "a to equal to from": (
        {"from": "2020-02-01", "to": "2020-02-01 00:00:00"},
        ["watermark.from '2020-02-01' and watermark.to '2020-02-01 00:00:00'", "the same instant"],
    ),
    "two fixed bounds too close for a complete window": (
        {"from": "2020-02-01", "to": "2020-02-01 20:00:00", "partial_partition": False},
        ["watermark.to '2020-02-01 20:00:00'", "no complete daily window fits"],
    ),
    "an unpartitioned to counted back further than from": (
        {"from": "P1D", "to": "P3D", "partition": "none"},
        ["watermark.from 'P1D' and watermark.to 'P3D' are refused", "as far as from or further"],
    ),
}


@pytest.mark.parametrize(
    ("watermark", "expected"), BAD_TIME_CONFIGS.values(), ids=BAD_TIME_CONFIGS.keys()
)
def test_a_bad_time_watermark_names_the_key_the_value_and_the_accepted_forms(
    tmp_path: Path, watermark: dict[str, Any], expected: list[str]
) -> None:
    with pytest.raises(ConfigError) as error:
        project_config(time_pipeline(tmp_path, **watermark))
    for text in expected:
        assert text in str(error.value), str(error.value)


@pytest.mark.parametrize(
    "source",
    [
        {"type": "delta_table", "uri": "/data/orders"},
        {"type": "parquet", "uri": "/data/orders"},
        {"type": "csv", "uri": "/data/orders", "schema": "id BIGINT, updated_at TIMESTAMP"},
        {"type": "json", "uri": "/data/orders", "schema": "id BIGINT, updated_at TIMESTAMP"},
        {"type": "jdbc", "url": "jdbc:postgresql://127.0.0.1:5432/shop", "table": "orders"},
        {
            "type": "http_api",
            "url": "http://127.0.0.1:1/orders",
            "schema": "id BIGINT, updated_at TIMESTAMP",
            "watermark_param_mapping": {"updated_at": "since"},
            "watermark_to_param": "until",
        },
    ],
    ids=lambda source: source["type"],
)
def test_every_column_source_takes_a_time_watermark(tmp_path: Path, source: dict[str, Any]) -> None:
    raw = {**time_pipeline(tmp_path), "source": source}
    pipeline = project_config(raw).pipeline("orders")
    assert isinstance(pipeline, TimePipelineConfig)
    assert column_spec(pipeline).replace_by_watermark
    assert list(column_spec(pipeline).columns) == ["updated_at"]


def test_a_from_counted_back_from_now_is_accepted_only_without_partitions(
    tmp_path: Path,
) -> None:
    """Partitions need a fixed start (their keys would move on every tick); one unpartitioned
    window ``[now - P30D, to)`` does not."""
    raw = time_pipeline(tmp_path, partition="none", **{"from": "P30D"})
    pipeline = project_config(raw).pipeline("orders")
    assert isinstance(pipeline, TimePipelineConfig)
    assert pipeline.watermark.spec == TimeSpec("P30D", "P0D", "none")
    assert partition_cron(pipeline.watermark.spec) == "0 * * * *"
    with pytest.raises(ConfigError, match="use partition: none for a window that moves"):
        project_config(time_pipeline(tmp_path, partition="daily", **{"from": "P30D"}))


def test_an_http_mapping_must_name_the_time_column(tmp_path: Path) -> None:
    raw = time_pipeline(tmp_path)
    raw["source"] = {
        "type": "http_api",
        "url": "http://127.0.0.1:1/orders",
        "schema": "id BIGINT, updated_at TIMESTAMP",
        "watermark_param_mapping": {"created_at": "since"},
    }
    with pytest.raises(ConfigError, match="watermark_param_mapping may name only watermark"):
        project_config(raw)


def test_a_bare_hyphen_in_yaml_and_the_time_column_as_merge_key_are_refused_with_the_fix(
    tmp_path: Path,
) -> None:
    text = yaml.safe_dump({"pipelines": [time_pipeline(tmp_path)]}).replace("P0D", "-")
    raw = yaml.safe_load(text)
    raw["pipelines"][0]["watermark"]["to"] = [None]  # what YAML makes of `to: -`
    with pytest.raises(ConfigError, match="write it quoted: to: '-'"):
        load(yaml.safe_dump(raw))
    keyed = time_pipeline(tmp_path)
    keyed["table"]["merge_keys"] = ["id"]
    pipeline = project_config(keyed).pipeline("orders")
    assert isinstance(pipeline, TimePipelineConfig) and pipeline.table.merge_keys == ["id"]
    assert list(column_spec(pipeline).merge_keys) == [], "a window is replaced, not merged"
    keyed["table"]["merge_keys"] = ["id", "updated_at"]
    with pytest.raises(ConfigError, match=r"holds the time column 'updated_at'.*Remove it"):
        project_config(keyed)


# --- Dagster partitions = the core's windows ---

PARTITION_CASES = {
    "daily from 2020-01-01, partial 2020-01-15": ("2020-01-01", "daily", "2020-01-15T06:00"),
    "daily, from with hours 10:00": ("2020-02-21 10:00:00", "daily", "2020-03-02T15:00"),
    "weekly from a Monday (the seed: last 2020-02-17..21)": (
        "2020-01-06",
        "weekly",
        "2020-02-21T09:00",
    ),
    "weekly from a Thursday": ("2020-01-02", "weekly", "2020-02-21T09:00"),
    "monthly from 2019-01-01 on 2020-02-21 (the seed)": (
        "2019-01-01",
        "monthly",
        "2020-02-21T09:00",
    ),
    "monthly from the 15th at 06:30": ("2019-01-15 06:30:00", "monthly", "2020-02-21T09:00"),
    "hourly from 00:30": ("2020-01-01 00:30:00", "hourly", "2020-01-03T05:10"),
}


@pytest.mark.parametrize("partial", [True, False], ids=["partial", "complete only"])
@pytest.mark.parametrize(
    ("from_", "partition", "now"), PARTITION_CASES.values(), ids=PARTITION_CASES.keys()
)
def test_dagster_partitions_are_exactly_the_core_windows(
    from_: str, partition: str, now: str, partial: bool
) -> None:
    spec = TimeSpec(from_, "-", partition, partial_partition=partial)
    at = day(now)
    partitions_def = time_partitions(spec)
    assert partitions_def is not None
    with partition_loading_context(effective_dt=at):
        keys = partitions_def.get_partition_keys()
    dagster_windows = [partitions_def.time_window_for_partition_key(k) for k in keys]
    core = list(windows(spec, at))
    assert len(keys) == len(core)
    to = spec.resolve_to(at)
    for window, theirs in zip(core, dagster_windows, strict=True):
        # Dagster's current partition ends where a complete window would; the core's stops at to.
        assert window == TimeWindow(theirs.start, min(theirs.end, to))
    assert core[-1].end == (to if partial else dagster_windows[-1].end)
    assert [partition_key(spec, w) for w in core] == keys  # what a tick requests


def test_the_seeds_partition_shapes_in_dagster() -> None:
    monthly = TimeSpec("2019-01-01", "-", "monthly")
    weekly = TimeSpec("2020-01-06", "-", "weekly")
    hours = TimeSpec("2020-02-21 10:00:00", "-", "daily")
    at = day("2020-02-21T09:00")
    with partition_loading_context(effective_dt=at):
        monthly_keys = time_partitions(monthly).get_partition_keys()  # type: ignore[union-attr]
        weekly_keys = time_partitions(weekly).get_partition_keys()  # type: ignore[union-attr]
    assert len(monthly_keys) == 14 and monthly_keys[-1] == "2020-02-01"  # 13 full + 1 partial
    assert windows(monthly, at)[-1] == TimeWindow(day("2020-02-01"), day("2020-02-21"))
    assert weekly_keys[-1] == "2020-02-17"
    assert windows(weekly, at)[-1] == TimeWindow(day("2020-02-17"), day("2020-02-21"))
    assert partition_cron(weekly) == "0 0 * * 1"
    assert partition_cron(TimeSpec("2020-01-02", "-", "weekly")) == "0 0 * * 4"
    assert partition_cron(hours) == "0 10 * * *"
    assert partition_cron(monthly) == "0 0 1 * *"
    assert partition_cron(TimeSpec("2020-01-01 00:30:00", "-", "hourly")) == "30 * * * *"
    later = day("2020-02-23T11:00")
    with partition_loading_context(effective_dt=later):
        hour_keys = time_partitions(hours).get_partition_keys()  # type: ignore[union-attr]
    assert hour_keys == ["2020-02-21-10:00", "2020-02-22-10:00", "2020-02-23-10:00"]
    assert windows(hours, later)[-1] == TimeWindow(day("2020-02-23T10:00"), later)
    assert time_partitions(TimeSpec("2020-01-01", "-", "none")) is None


def test_the_first_tick_with_a_partial_window_says_so(tmp_path: Path) -> None:
    pipeline = project_config(time_pipeline(tmp_path)).pipeline("orders")
    assert isinstance(pipeline, TimePipelineConfig)
    tick = decide_tick(pipeline, day("2020-01-15T06:00"))  # no table yet: a first run
    assert tick.keys == tuple(f"2020-01-{d:02}" for d in range(1, 16))
    assert tick.due.explain().endswith(
        "2020-01-13, 2020-01-14, 2020-01-15 (partial, to 2020-01-15T06:00:00Z) have no history "
        "(first run: the cut-off is watermark.from, 2020-01-01T00:00:00Z)"
    )
    complete = pipeline.watermark.model_copy(update={"partial_partition": False})
    without_partial = pipeline.model_copy(update={"watermark": complete})
    assert decide_tick(without_partial, day("2020-01-15T06:00")).keys == tick.keys[:-1]


def test_a_from_in_the_future_loads_and_its_ticks_say_when_the_first_window_becomes_due(
    tmp_path: Path,
) -> None:
    """Issue 22, item 7: the sensor, the schedule and ``decide_tick`` say when the first window
    of a future ``from`` becomes due, instead of only "0 partitions"."""
    now = day("2020-01-15T06:00")
    raw = time_pipeline(tmp_path, **{"from": "2020-02-01 10:00:00", "to": "P1D"})
    config = project_config(raw)
    pipeline = config.pipeline("orders")
    assert isinstance(pipeline, TimePipelineConfig)
    said = (
        "0 partitions: no window between from 2020-02-01T10:00:00Z and to 2020-01-14T06:00:00Z; "
        "the first window becomes due at 2020-02-02T10:00:00.001Z"
    )
    assert decide_tick(pipeline, now).due.explain() == said
    defs = build_definitions(config, clock=lambda: now)
    with build_sensor_context(instance=DagsterInstance.ephemeral(), definitions=defs) as context:
        tick = defs.resolve_sensor_def("orders_sensor").evaluate_tick(context)
    assert (tick.run_requests, tick.skip_message) == ([], said)
    (tmp_path / "dagster").mkdir()
    with (
        DagsterInstance.local_temp(str(tmp_path / "dagster")) as persistent,
        build_schedule_context(
            instance=persistent, repository_def=defs.get_repository_def()
        ) as context,
    ):
        scheduled = defs.resolve_schedule_def("orders_schedule").evaluate_tick(context)
    assert (scheduled.run_requests, scheduled.skip_message) == ([], said)
    # one millisecond after that instant, the partial first window is due
    due = decide_tick(pipeline, day("2020-02-02T10:00") + timedelta(milliseconds=1))
    assert due.keys == ("2020-02-01-10:00",)


def test_a_fixed_to_gives_a_fixed_end() -> None:
    partial = TimeSpec("2020-01-01", "2020-01-05 12:00:00", "daily")
    complete = TimeSpec("2020-01-01", "2020-01-05 12:00:00", "daily", partial_partition=False)
    assert time_partitions(partial).get_partition_keys()[-1] == "2020-01-05"  # type: ignore[union-attr]
    assert time_partitions(complete).get_partition_keys()[-1] == "2020-01-04"  # type: ignore[union-attr]


# --- end to end: real Spark, real Delta, a frozen clock ---


class FrozenClock:
    """The injected clock; a test moves it between runs."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def order(id_: int, updated_at: datetime) -> dict[str, Any]:
    return {"id": id_, "updated_at": updated_at, "amount": float(id_)}


class TimeScene:
    """An "orders" Delta source, a time pipeline over it and a Dagster instance to run it on."""

    def __init__(
        self,
        tmp_path: Path,
        now: str,
        partition_by: list[str] | None = None,
        merge_keys: list[str] | None = None,
        **watermark: Any,
    ) -> None:
        self.raw = time_pipeline(tmp_path, **watermark)
        if partition_by:
            self.raw["table"]["partition_by"] = partition_by
        if merge_keys:
            self.raw["table"]["merge_keys"] = merge_keys
        config = project_config(self.raw)
        pipeline = config.pipeline("orders")
        assert isinstance(pipeline, TimePipelineConfig)
        self.pipeline = pipeline
        self.table = pipeline.table.uri
        self.orders = Orders(tmp_path / "source" / "orders")
        self.clock = FrozenClock(day(now))
        self.defs = build_definitions(config, clock=self.clock)
        self.instance = DagsterInstance.ephemeral()

    def at(self, now: str) -> TimeScene:
        self.clock.now = day(now)
        return self

    def run(self, first: str, last: str | None = None) -> dict[str, Any]:
        """Materialize partitions ``first``..``last`` in ONE run (a UI backfill, single run);
        the materialization's metadata (checks must pass); ``self.last`` is the run."""
        job = self.defs.resolve_job_def("orders_job")
        if last is None:
            result = job.execute_in_process(instance=self.instance, partition_key=first)
        else:
            tags = {
                "dagster/asset_partition_range_start": first,
                "dagster/asset_partition_range_end": last,
            }
            result = job.execute_in_process(instance=self.instance, tags=tags)
        self.last = result
        return meta(result)

    def run_unpartitioned(self) -> dict[str, Any]:
        job = self.defs.resolve_job_def("orders_job")
        return meta(job.execute_in_process(instance=self.instance))

    def variant(self, **watermark: Any) -> TimePipelineConfig:
        """The same pipeline and table with other watermark settings (grace, abstinent...)."""
        changed = self.pipeline.watermark.model_copy(update=watermark)
        return self.pipeline.model_copy(update={"watermark": changed})

    def ids(self) -> list[int]:
        frame = DeltaTable(self.table).to_pyarrow_table(columns=["id"])
        return sorted(frame.column("id").to_pylist())

    def version(self) -> int | None:
        return DeltaCommitter(self.table).current_version()


#: The keys each partition's materialization has of its own (its state, whatever the run read).
OWN_KEYS = ("partition/", "dagster/partition_row_count")


def shared(materialization: AssetMaterialization) -> dict[str, Any]:
    """A materialization's metadata but for the partition's own state (:data:`OWN_KEYS`)."""
    return {k: v for k, v in materialization.metadata.items() if not k.startswith(OWN_KEYS)}


def windows_of(metadata: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``time/windows``' rows by their start."""
    return {row["start"]: row for row in table_rows(metadata["time/windows"])}


def meta(result: ExecuteInProcessResult) -> dict[str, Any]:
    """The run's metadata (the same on every partition, but for each partition's own state)."""
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert all(checks.values()), checks
    (materialization, *others) = result.asset_materializations_for_node("orders")
    assert all(shared(m) == shared(materialization) for m in others)
    return {key: value.value for key, value in materialization.metadata.items()}


def own(result: ExecuteInProcessResult) -> dict[str | None, tuple[str, str]]:
    """Each partition's own ``partition/state`` and ``partition/reason``."""
    return {
        m.partition: (m.metadata["partition/state"].value, m.metadata["partition/reason"].value)  # type: ignore[misc]
        for m in result.asset_materializations_for_node("orders")
    }


def keys(pipeline: TimePipelineConfig, now: str) -> list[str]:
    return list(decide_tick(pipeline, day(now)).keys)


#: One order a day at noon from 2019-12-31 (before from: never read) to 2020-01-16.
DAILY_ORDERS = [order(i, day("2019-12-31T12:00") + timedelta(days=i)) for i in range(17)]


@pytest.mark.spark
def test_the_seeds_daily_example_first_run_then_grace_3(spark: Any, tmp_path: Path) -> None:
    """from 2020-01-01 to P0D: the first run on 2020-01-15 covers 2020-01-01 to 2020-01-15; the
    run on 2020-01-16 with grace 3 and abstinent 0 covers 2020-01-12 to 2020-01-16."""
    scene = TimeScene(tmp_path, "2020-01-15", to="P0D", partition="daily", grace_days=3)
    scene.orders.put(*DAILY_ORDERS)
    first_tick = decide_tick(scene.pipeline, day("2020-01-15"))
    assert first_tick.keys == tuple(f"2020-01-{d:02}" for d in range(1, 15))
    assert first_tick.due.explain() == (
        "14 partitions: 2020-01-01, 2020-01-02, 2020-01-03, ... (8 more), 2020-01-12, "
        "2020-01-13, 2020-01-14 have no history (first run: the cut-off is watermark.from, "
        "2020-01-01T00:00:00Z)"
    )

    # Dagster's current partition 2020-01-15 starts exactly at to: an empty window, skipped.
    first = scene.run("2020-01-01", "2020-01-15")

    assert first["partitions/skipped"] == ["2020-01-15"]
    assert first["delta/versions"] == [0], "one commit for the whole range"
    assert first["rows/read"] == 14 and first["rows/committed"] == 14
    assert first["cut_off"] == "2020-01-01T00:00:00Z (first run: from)"
    assert first["watermark/after"] == "2020-01-15T00:00:00Z"
    assert windows_of(first)["2020-01-14T00:00:00Z"]["high_watermark"] == "2020-01-15T00:00:00Z"
    # each partition says where its own window stands (the grace period re-reads 01-12..01-14)
    said = own(scene.last)
    rule = "the cut-off 2020-01-12T00:00:00Z (the highest high watermark less grace_days 3)"
    assert said["2020-01-01"] == (
        "final",
        "[2020-01-01T00:00:00Z, 2020-01-02T00:00:00Z) read up to its high watermark "
        f"2020-01-02T00:00:00Z; final: it ends at or before {rule}, so ticks no longer read it "
        "(a backfill does)",
    )
    assert said["2020-01-14"] == (
        "read, due again",
        "[2020-01-14T00:00:00Z, 2020-01-15T00:00:00Z) read up to its high watermark "
        f"2020-01-15T00:00:00Z; the next tick reads it again: it ends after {rule}",
    )
    assert said["2020-01-15"][0] == "no window"
    assert scene.ids() == list(range(1, 15))
    watermark, _ = load_time_watermark(scene.pipeline)
    every = windows(scene.pipeline.watermark.spec, day("2020-01-15"))
    assert len(watermark.high_watermarks(every)) == 14
    assert watermark.high_watermark(every[0]) == day("2020-01-02")
    assert watermark.covered() == (TimeWindow(day("2020-01-01"), day("2020-01-15")),)

    expected = ["2020-01-12", "2020-01-13", "2020-01-14", "2020-01-15"]
    why = (
        "4 partitions: 2020-01-12, 2020-01-13, 2020-01-14 end after the cut-off "
        "2020-01-12T00:00:00Z (highest watermark 2020-01-15T00:00:00Z + abstinent 0d - grace 3d); "
        "2020-01-15 has no history"
    )
    tick = decide_tick(scene.pipeline, day("2020-01-16"))
    assert list(tick.keys) == expected
    assert tick.due.explain() == why
    # Without grace only the new window runs; older successful windows never do.
    assert keys(scene.variant(grace_days=0), "2020-01-16") == ["2020-01-15"]

    # The sensor and the schedule request exactly those partitions (the clock is injected).
    scene.at("2020-01-16")
    job = scene.defs.resolve_job_def("orders_job")
    in_flight = scene.instance.create_run_for_job(
        job, status=DagsterRunStatus.STARTED, tags={"dagster/partition": "2020-01-13"}
    )
    sensor = scene.defs.resolve_sensor_def("orders_sensor")
    with build_sensor_context(instance=scene.instance, definitions=scene.defs) as context:
        requested = sensor.evaluate_tick(context).run_requests or []
    assert [r.partition_key for r in requested] == [k for k in expected if k != "2020-01-13"]
    assert len({r.run_key for r in requested}) == 3
    scene.instance.report_run_failed(in_flight)
    schedule = scene.defs.resolve_schedule_def("orders_schedule")
    assert schedule.cron_schedule == "0 0 * * *"
    repository = scene.defs.get_repository_def()
    (tmp_path / "dagster").mkdir()
    with (
        DagsterInstance.local_temp(str(tmp_path / "dagster")) as persistent,  # schedules need one
        build_schedule_context(instance=persistent, repository_def=repository) as context,
    ):
        scheduled = schedule.evaluate_tick(context).run_requests or []
    assert [r.partition_key for r in scheduled] == expected

    # Running them re-reads 01-12..01-14 and adds 01-15; the next tick waits for the next day.
    rerun = scene.run("2020-01-12", "2020-01-15")
    assert rerun["rows/read"] == 4 and rerun["rows/removed"] == 3
    assert rerun["cut_off"] == (
        "2020-01-12T00:00:00Z (highest watermark 2020-01-15T00:00:00Z + abstinent 0d - grace 3d)"
    )
    assert scene.ids() == list(range(1, 16))
    # The cut-off moved to 2020-01-13: the grace windows are due again, under new run keys; a
    # sensor requests a window once per cut-off window (Dagster skips a run key it launched).
    with build_sensor_context(instance=scene.instance, definitions=scene.defs) as context:
        again = sensor.evaluate_tick(context).run_requests or []
    assert [r.partition_key for r in again] == ["2020-01-13", "2020-01-14", "2020-01-15"]
    assert again[0].run_key == "2020-01-13|2020-01-13T00:00:00.000Z|a0"
    assert requested[0].run_key == "2020-01-12|2020-01-12T00:00:00.000Z|a0"
    scene.at("2020-01-17")
    assert keys(scene.pipeline, "2020-01-17") == [
        "2020-01-13",
        "2020-01-14",
        "2020-01-15",
        "2020-01-16",
    ]
    assert keys(scene.variant(grace_days=0, abstinent_days=1), "2020-01-16") == []


@pytest.mark.spark
def test_re_running_a_partition_any_number_of_times_leaves_the_table_unchanged(
    spark: Any, tmp_path: Path
) -> None:
    scene = TimeScene(tmp_path, "2020-01-15", to="P0D", partition="daily")
    scene.orders.put(*DAILY_ORDERS, order(100, day("2020-01-05T00:00")))  # on the window start
    scene.run("2020-01-04", "2020-01-06")
    before = scene.ids()
    assert before == [4, 5, 6, 100]
    # The windows that never ran (or failed) are due; the ones that succeeded are not.
    never = [f"2020-01-{d:02}" for d in (1, 2, 3, *range(7, 15))]
    assert keys(scene.pipeline, "2020-01-15") == never
    version = scene.version()
    assert version is not None

    for attempt in range(1, 4):
        again = scene.run("2020-01-05")
        assert scene.ids() == before, "no duplicates"
        assert again["delta/versions"] == [version + attempt], "one commit per run"
        assert again["rows/read"] == 2 and again["rows/removed"] == 2
        assert again["replace/window"] == "[2020-01-05T00:00:00Z, 2020-01-06T00:00:00Z)"
        assert again["replace/high_watermark"] == "2020-01-06T00:00:00Z"
    window = TimeWindow(day("2020-01-05"), day("2020-01-06"))
    committer = DeltaCommitter(scene.table)
    assert committer.transaction_version(window_app_id("orders", window)) == 4
    # Each commit carries the watermark it advanced, merged with the one stored before.
    last = committer.read_commit(version + 3).custom_metadata[time_metadata_key("orders")]
    # Three contiguous windows that succeeded are one covered span.
    assert json.loads(json.loads(last)["watermark"]) == {
        "spans": [["2020-01-04T00:00:00.000Z", "2020-01-07T00:00:00.000Z"]]
    }


#: 100 orders over ten daily windows 2020-01-01 .. 2020-01-10, ten a day.
HUNDRED_ORDERS = [
    order(i, day("2020-01-01T00:30") + timedelta(days=i // 10, minutes=i % 10)) for i in range(100)
]


@pytest.mark.spark
def test_a_row_whose_time_moves_to_a_newer_window_is_in_exactly_one_window_with_merge_keys(
    spark: Any, tmp_path: Path
) -> None:
    """Issue 22 item 4: order 5's updated_at moves from 2020-01-01 (a window no tick re-runs)
    to 2020-01-11, order 15's from 01-02 into the grace window 01-10: the tick's run replaces
    01-10 and 01-11 in ONE commit and removes both old copies in it (100 rows, not 102)."""
    scene = TimeScene(
        tmp_path, "2020-01-11", merge_keys=["id"], to="P0D", partition="daily", grace_days=1
    )
    scene.orders.put(*HUNDRED_ORDERS)
    first = scene.run("2020-01-01", "2020-01-10")
    assert first["delta/versions"] == [0] and first["rows/moved"] == 0
    assert scene.ids() == list(range(100))

    scene.orders.put(order(5, day("2020-01-11T08:00")), order(15, day("2020-01-10T09:00")))
    assert keys(scene.pipeline, "2020-01-12") == ["2020-01-10", "2020-01-11"]
    scene.at("2020-01-12")
    rerun = scene.run("2020-01-10", "2020-01-11")

    assert scene.ids() == list(range(100)), "each order in exactly one window"
    assert rerun["delta/versions"] == [1], "both windows and the moves in ONE commit"
    assert (rerun["rows/read"], rerun["rows/removed"], rerun["rows/moved"]) == (12, 10, 2)
    moved = DeltaTable(scene.table).to_pyarrow_table(columns=["id", "updated_at"]).to_pylist()
    assert {r["id"]: r["updated_at"] for r in moved if r["id"] in (5, 15)} == {
        5: day("2020-01-11T08:00"),
        15: day("2020-01-10T09:00"),
    }


@pytest.mark.spark
def test_overlapping_range_runs_never_both_commit_what_they_read_before_the_other(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run A (01-01..01-03) has staged and planned when run B (01-02..01-04) commits, after
    the source changed: A's commit is stale (pinned to the snapshot it planned on), A reads
    again and commits the source's rows once; every window's txn says two runs."""
    from watermark_assets.engine import write as window_commit  # makes the windows' commit
    from watermark_assets.kinds.time.run import run_windows

    scene = TimeScene(tmp_path, "2020-01-15", merge_keys=["id"], to="P0D", partition="daily")
    scene.orders.put(*DAILY_ORDERS)
    spec = scene.pipeline.watermark.spec
    tiles = windows(spec, day("2020-01-15"))
    real_commit = window_commit.commit_replace
    raced: list[int] = []

    def commit_after_b(*args: Any, **kwargs: Any) -> Any:
        if not raced:
            raced.append(1)
            scene.orders.put(order(3, day("2020-01-04T01:00")))  # 3 moves from 01-03 to 01-04
            run_windows(scene.pipeline, tiles[1:4], spark, run_id="b", log=lambda _: None)
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(window_commit, "commit_replace", commit_after_b)
    a = run_windows(scene.pipeline, tiles[0:3], spark, run_id="a", log=lambda _: None)

    assert [w.result.attempts for w in a.windows] == [2, 2, 2], "stale once, then read again"
    assert scene.ids() == [1, 2, 3, 4], "each order once, none lost"
    committer = DeltaCommitter(scene.table)
    versions = [committer.transaction_version(window_app_id("orders", w)) for w in tiles[:4]]
    assert versions == [1, 2, 2, 1]


@pytest.mark.spark
@pytest.mark.parametrize("crash_at", ["after_data_written", "before_windows_commit"])
def test_a_range_run_killed_before_its_one_commit_changes_nothing_and_re_runs_once(
    spark: Any, tmp_path: Path, crash_at: str
) -> None:
    """SIGKILL after the first window is staged, or with every window staged and moved into
    the table: no window is committed (no half-replaced range), the re-run commits once."""
    scene = TimeScene(
        tmp_path, "2020-01-15", merge_keys=["id"], to="P0D", partition="daily", grace_days=1
    )
    scene.orders.put(*DAILY_ORDERS)
    scene.run("2020-01-01", "2020-01-04")
    scene.orders.put(order(1, day("2020-01-05T03:00")))  # 1 moves from 01-01 to 01-05
    config = tmp_path / "pipelines.yaml"
    config.write_text(
        yaml.safe_dump(
            {"spark": {"master": "local[1]", "conf": TEST_SPARK_CONF}, "pipelines": [scene.raw]}
        ),
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "WATERMARK_ASSETS_CONFIG": str(config),
        CRASH_ENV_VAR: crash_at,
        "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)]),
    }
    victim = subprocess.run(
        [sys.executable, str(TESTS / "_crash_run.py"), "orders", "2020-01-03...2020-01-06"],
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert victim.returncode == -9, victim.stderr.decode()[-2000:]
    assert scene.version() == 0, "nothing committed"
    assert scene.ids() == [1, 2, 3, 4]

    rerun = scene.run("2020-01-03", "2020-01-06")
    assert rerun["delta/versions"] == [1] and rerun["rows/moved"] == 1
    assert scene.ids() == [1, 2, 3, 4, 5, 6]


#: Six daily windows 2020-01-01 .. 2020-01-06; two orders a day, one on the window's start.
PROPERTY_DAYS = [f"2020-01-{d:02}" for d in range(1, 7)]
PROPERTY_ORDERS = [
    order(10 * d + k, day(f"2020-01-{d:02}T00:00") + timedelta(hours=13 * k))
    for d in range(1, 7)
    for k in range(2)
]


@pytest.mark.spark
@settings(
    max_examples=5,  # each example is a fresh table and a few real Spark runs (~1-2 s each)
    deadline=None,
    derandomize=True,  # the same examples in every CI run
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    runs=st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 2)),  # (first window, extra windows)
        min_size=1,
        max_size=4,
    )
)
def test_property_any_sequence_of_re_runs_leaves_exactly_the_windows_run(
    spark: Any, runs: list[tuple[int, int]]
) -> None:
    """Property (issue 8 §3): re-running any partitions, singly or as ranges, any number of times
    and in any order, leaves the table holding each source row of the windows run exactly once."""
    with tempfile.TemporaryDirectory() as folder:
        scene = TimeScene(Path(folder), "2020-01-07", to="2020-01-07", partition="daily")
        scene.orders.put(*PROPERTY_ORDERS)
        done: set[int] = set()
        for first, extra in runs:
            last = min(first + extra, len(PROPERTY_DAYS) - 1)
            if first == last:
                scene.run(PROPERTY_DAYS[first])
            else:
                scene.run(PROPERTY_DAYS[first], PROPERTY_DAYS[last])
            done |= set(range(first + 1, last + 2))  # window i holds the orders of day i + 1
            expected = sorted(o["id"] for o in PROPERTY_ORDERS if o["id"] // 10 in done)
            assert scene.ids() == expected, (runs, first, last)


@pytest.mark.spark
@pytest.mark.parametrize("partition_by", [[], ["id"]], ids=["unpartitioned", "partitioned"])
def test_an_empty_first_window_creates_the_table_and_is_not_run_again(
    spark: Any, tmp_path: Path, partition_by: list[str]
) -> None:
    """With no table yet, a window that reads no row records its high watermark in ONE commit
    that creates the table (the schema of the zero-row Parquet file Spark wrote for the read, no
    data file): the tick no longer runs it, and later windows append as usual."""
    scene = TimeScene(tmp_path, "2020-01-03", partition_by, to="P0D", partition="daily")
    scene.orders.put(*(o for o in DAILY_ORDERS if o["id"] != 1))  # no order on 2020-01-01
    assert keys(scene.pipeline, "2020-01-03") == ["2020-01-01", "2020-01-02"]

    first = scene.run("2020-01-01")

    assert first["rows/read"] == 0 and first["rows/committed"] == 0
    assert first["delta/versions"] == [0], "the window's one commit creates the table"
    assert first["replace/high_watermark"] == "2020-01-02T00:00:00Z"
    table = DeltaTable(scene.table)
    assert sorted(table.schema().to_arrow().names) == ["amount", "id", "updated_at"]
    assert table.metadata().partition_columns == partition_by
    assert scene.ids() == []
    assert keys(scene.pipeline, "2020-01-03") == ["2020-01-02"], "01-01 is not new any more"

    second = scene.run("2020-01-02")

    assert second["delta/versions"] == [1] and scene.ids() == [2]
    # Exactly once: both windows again, then the empty one alone, change nothing.
    scene.run("2020-01-01", "2020-01-02")
    scene.run("2020-01-01")
    assert scene.ids() == [2]
    committer = DeltaCommitter(scene.table)
    start = TimeWindow(day("2020-01-01"), day("2020-01-02"))
    assert committer.transaction_version(window_app_id("orders", start)) == 3
    watermark, _ = load_time_watermark(scene.pipeline)
    assert watermark.covered() == (TimeWindow(day("2020-01-01"), day("2020-01-03")),)


@pytest.mark.spark
def test_rows_deleted_at_the_source_inside_a_re_run_window_leave_the_target(
    spark: Any, tmp_path: Path
) -> None:
    scene = TimeScene(tmp_path, "2020-01-15", to="P0D", partition="daily")
    scene.orders.put(*DAILY_ORDERS)
    scene.run("2020-01-03", "2020-01-04")
    assert scene.ids() == [3, 4]
    scene.orders.delete(3)

    rerun = scene.run("2020-01-03")

    assert scene.ids() == [4]
    assert rerun["rows/read"] == 0 and rerun["rows/removed"] == 1
    assert len(rerun["delta/versions"]) == 1
    assert rerun["replace/high_watermark"] == "2020-01-04T00:00:00Z"


@pytest.mark.spark
def test_the_seeds_monthly_partial_partition_grows_on_the_next_days_run(
    spark: Any, tmp_path: Path
) -> None:
    """from 2019-01-01 to '-' monthly on 2020-02-21: 13 full months and [2020-02-01, 2020-02-21);
    the next day the partial one is [2020-02-01, 2020-02-22), the 13 others unchanged."""
    monthly = {"from": "2019-01-01", "to": "-", "partition": "monthly"}
    scene = TimeScene(tmp_path, "2020-02-21T10:00", **monthly)
    scene.orders.put(
        order(0, day("2019-01-10T08:00")),
        order(1, day("2020-01-31T23:00")),
        order(2, day("2020-02-01T00:00")),
        order(3, day("2020-02-20T23:59")),
        order(4, day("2020-02-21T05:00")),  # after to (rounded to the day): not yet
    )
    assert len(keys(scene.pipeline, "2020-02-21T10:00")) == 14
    spec = scene.pipeline.watermark.spec
    first_windows = list(windows(spec, day("2020-02-21T10:00")))

    january = scene.run("2019-01-01")
    first = scene.run("2020-02-01")

    # The seed's [2019-01-01, 2019-01-31) names days: in instants the window is [2019-01-01,
    # 2019-02-01) and its high watermark, its end, is 2019-02-01T00:00 (closed-open windows).
    assert january["replace/window"] == "[2019-01-01T00:00:00Z, 2019-02-01T00:00:00Z)"
    assert january["replace/high_watermark"] == "2019-02-01T00:00:00Z"
    grace = decide_tick(scene.variant(grace_days=3), day("2020-02-21T10:00"))
    assert grace.due.cut_off.at == day("2020-02-18"), "the largest high watermark 02-21 - 3d"
    assert first["replace/window"] == "[2020-02-01T00:00:00Z, 2020-02-21T00:00:00Z)"
    assert first["replace/high_watermark"] == "2020-02-21T00:00:00Z"
    assert scene.ids() == [0, 2, 3]

    second = scene.at("2020-02-22T10:00").run("2020-02-01")

    assert second["replace/window"] == "[2020-02-01T00:00:00Z, 2020-02-22T00:00:00Z)"
    assert second["replace/high_watermark"] == "2020-02-22T00:00:00Z"
    assert second["rows/read"] == 3 and second["rows/removed"] == 2
    assert scene.ids() == [0, 2, 3, 4]
    later_windows = list(windows(spec, day("2020-02-22T10:00")))
    assert later_windows[:13] == first_windows[:13]
    watermark, _ = load_time_watermark(scene.pipeline)
    assert watermark.high_watermark(later_windows[13]) == day("2020-02-22")


@pytest.mark.spark
def test_the_seeds_abstinent_example_unpartitioned(spark: Any, tmp_path: Path) -> None:
    """Abstinent 1: on 2020-01-16 the effective range is empty and nothing is read; on
    2020-01-17 it reads again. Abstinent 0: on 2020-01-16 it reads [2020-01-15, 2020-01-16)."""
    scene = TimeScene(tmp_path, "2020-01-15", to="P0D", partition="none")
    scene.orders.put(*DAILY_ORDERS)
    first = scene.run_unpartitioned()
    assert first["replace/window"] == "[2020-01-01T00:00:00Z, 2020-01-15T00:00:00Z)"
    assert scene.ids() == list(range(1, 15))

    cases = {
        ("2020-01-16", 1, 0): (False, "0 partitions: all 1 end at or before the cut-off"),
        ("2020-01-17", 1, 0): (True, None),
        ("2020-01-16", 0, 0): (True, None),
    }
    for (now, abstinent, grace), (runs, said) in cases.items():
        tick = decide_tick(scene.variant(abstinent_days=abstinent, grace_days=grace), day(now))
        assert tick.runs is runs, (now, abstinent, tick.due.explain())
        if said is not None:
            assert tick.due.explain().startswith(said), tick.due.explain()
    assert decide_tick(scene.variant(abstinent_days=1), day("2020-01-17")).due.effective_range == (
        TimeWindow(day("2020-01-16"), day("2020-01-17"))
    )
    assert decide_tick(scene.pipeline, day("2020-01-16")).due.effective_range == TimeWindow(
        day("2020-01-15"), day("2020-01-16")
    )

    second = scene.at("2020-01-16").run_unpartitioned()  # abstinent 0: [01-15, 01-16)
    assert second["replace/window"] == "[2020-01-15T00:00:00Z, 2020-01-16T00:00:00Z)"
    assert scene.ids() == list(range(1, 16))
    # One entry: the one window [from, to), whose high watermark is the last run's to.
    watermark, _ = load_time_watermark(scene.pipeline)
    assert watermark.covered() == (TimeWindow(day("2020-01-01"), day("2020-01-16")),)


@pytest.mark.spark
def test_a_from_counted_back_from_now_moves_with_it_when_unpartitioned(
    spark: Any, tmp_path: Path
) -> None:
    """Seed 003: ``from`` may be a duration too. ``from: P7D`` on 2020-01-15 reads the last 7
    days; on 2020-01-17 the window [2020-01-10, 2020-01-17) starts inside what was read, so only
    [2020-01-15, 2020-01-17) is read (the cut-off is the highest watermark, grace 0)."""
    scene = TimeScene(tmp_path, "2020-01-15", to="P0D", partition="none", **{"from": "P7D"})
    scene.orders.put(*DAILY_ORDERS)
    first = scene.run_unpartitioned()
    assert first["replace/window"] == "[2020-01-08T00:00:00Z, 2020-01-15T00:00:00Z)"
    assert scene.ids() == list(range(8, 15))

    tick = decide_tick(scene.pipeline, day("2020-01-17"))
    assert tick.runs and tick.due.effective_range == TimeWindow(
        day("2020-01-15"), day("2020-01-17")
    )
    second = scene.at("2020-01-17").run_unpartitioned()
    assert second["replace/window"] == "[2020-01-15T00:00:00Z, 2020-01-17T00:00:00Z)"
    assert scene.ids() == list(range(8, 17))


class DailyFiles(BaseHTTPRequestHandler):
    """``GET /files?since=ISO&until=ISO``: the records of the daily files ``fileYYYYMMDD`` whose
    day starts in ``[since, until)``; the server keeps the last 7 days (the seed's example)."""

    clock: FrozenClock
    fetched: list[list[str]]

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        today = self.clock().replace(hour=0, minute=0, second=0, microsecond=0)
        kept = [today - timedelta(days=back) for back in range(7)]
        since = datetime.fromisoformat(query["since"]) if "since" in query else kept[-1]
        until = datetime.fromisoformat(query["until"]) if "until" in query else self.clock()
        files = sorted(d for d in kept if since <= d < until)
        self.fetched.append([f"file{d:%Y%m%d}" for d in files])
        records = [
            {"id": int(f"{d:%Y%m%d}") * 10 + k, "updated_at": d.isoformat(), "file": f"{d:%Y%m%d}"}
            for d in files
            for k in range(2)
        ]
        payload = json.dumps({"data": records}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def daily_files() -> Iterator[tuple[str, type[DailyFiles]]]:
    handler = type(
        "Files", (DailyFiles,), {"clock": FrozenClock(day("2020-01-15T12:00")), "fetched": []}
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/files", handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.spark
def test_the_seeds_abstinent_7_over_a_server_keeping_7_days_of_daily_files(
    spark: Any, tmp_path: Path, daily_files: tuple[str, type[DailyFiles]]
) -> None:
    """Abstinent 7, a server keeping the last 7 days of daily files: 01-15, 01-16 and 01-17 each
    download only the new file; with abstinent 0, 01-16 downloads file20200115 again."""
    url, server = daily_files
    raw = time_pipeline(tmp_path, **{"from": "2020-01-15"}, abstinent_days=7)
    raw["source"] = {
        "type": "http_api",
        "url": url,
        "schema": "id BIGINT, updated_at TIMESTAMP, file STRING",
        "watermark_param_mapping": {"updated_at": "since"},
        "watermark_to_param": "until",
    }
    config = project_config(raw)
    pipeline = config.pipeline("orders")
    assert isinstance(pipeline, TimePipelineConfig)
    clock = server.clock
    defs = build_definitions(config, clock=clock)
    instance = DagsterInstance.ephemeral()
    job = defs.resolve_job_def("orders_job")

    downloads: dict[str, list[list[str]]] = {}
    for today in ("2020-01-15", "2020-01-16", "2020-01-17"):
        clock.now = day(f"{today}T12:00")
        if today == "2020-01-16":
            no_abstinence = pipeline.model_copy(
                update={"watermark": pipeline.watermark.model_copy(update={"abstinent_days": 0})}
            )
            assert keys(no_abstinence, "2020-01-16T12:00") == ["2020-01-15", "2020-01-16"]
        (key,) = keys(pipeline, f"{today}T12:00")
        assert key == today
        server.fetched.clear()
        metadata = meta(job.execute_in_process(instance=instance, partition_key=key))
        downloads[today] = list(server.fetched)
        assert windows_of(metadata)[f"{today}T00:00:00Z"]["pushed_down"] == (
            f"query: since={today}T00:00:00+00:00, until={today}T12:00:00+00:00"
        )

    assert downloads == {
        "2020-01-15": [["file20200115"]],
        "2020-01-16": [["file20200116"]],
        "2020-01-17": [["file20200117"]],
    }
    frame = DeltaTable(pipeline.table.uri).to_pyarrow_table(columns=["file"])
    assert sorted(frame.column("file").to_pylist()) == [
        "20200115",
        "20200115",
        "20200116",
        "20200116",
        "20200117",
        "20200117",
    ]


def test_the_watermark_is_read_from_the_newest_entry_and_the_commits_after_its_read(
    tmp_path: Path,
) -> None:
    """Each entry holds every entry up to the version its run read: a reader merges the newest
    entry with the commits after that version (concurrent runs), not the whole history."""
    pipeline = project_config(time_pipeline(tmp_path)).pipeline("orders")
    assert isinstance(pipeline, TimePipelineConfig)
    key = time_metadata_key("orders")

    def commit(entry: dict[str, Any] | None) -> None:
        metadata = {} if entry is None else {key: json.dumps(entry)}
        write_deltalake(
            pipeline.table.uri,
            pa.table({"id": [1]}),
            mode="append",
            commit_properties=CommitProperties(custom_metadata=metadata),
        )

    def entry(read_version: int, *days: int) -> dict[str, Any]:
        highs = {day(f"2020-01-{d:02}"): day(f"2020-01-{d + 1:02}") for d in days}
        return {"watermark": TimeWatermark.of(highs).to_json(), "read_version": read_version}

    commit(entry(-1, 9))  # v0: in no later entry, so a reader that skips it never sees 01-09
    commit(entry(0, 1))  # v1: read up to v0 (here: a log written by hand, not consistent)
    commit(entry(1, 1, 2))  # v2: read up to v1
    commit(entry(1, 1, 3))  # v3: concurrent with v2, read up to v1 too: lacks 01-02
    commit(None)  # v4: another writer

    watermark, version = load_time_watermark(pipeline)

    assert version == 4
    assert watermark.covered() == (TimeWindow(day("2020-01-01"), day("2020-01-04")),)


def test_a_first_tick_over_many_windows_requests_at_most_max_runs_per_tick_oldest_first(
    tmp_path: Path,
) -> None:
    """14 daily windows are due on the first tick; with ``schedule.max_runs_per_tick: 3`` the
    sensor requests the 3 oldest and says how many wait (a first tick over years of hourly
    windows must not launch tens of thousands of runs at once)."""
    raw = {**time_pipeline(tmp_path, to="P0D"), "schedule": {"max_runs_per_tick": 3}}
    config = project_config(raw)
    pipeline = config.pipeline("orders")
    assert isinstance(pipeline, TimePipelineConfig)
    now = day("2020-01-15T06:00")
    tick = decide_tick(pipeline, now)
    assert len(tick.keys) == 15  # 14 whole days and the partial 2020-01-15
    busy = {"2020-01-02"}  # a run of it is in flight: left out, not counted as waiting
    requested = tick_requests(pipeline, tick, busy, lambda base: "a0")
    assert [r.partition_key for r in requested.runs] == ["2020-01-01", "2020-01-03", "2020-01-04"]
    assert (requested.in_flight, requested.deferred) == (["2020-01-02"], 11)
    assert tick_message(tick, requested, 3).endswith(
        "; waiting for the runs in flight of 2020-01-02; 3 run(s) requested, 11 due window(s) "
        "wait for later ticks (schedule.max_runs_per_tick 3)"
    )
    defs = build_definitions(config, clock=lambda: now)
    with build_sensor_context(instance=DagsterInstance.ephemeral(), definitions=defs) as context:
        runs = defs.resolve_sensor_def("orders_sensor").evaluate_tick(context).run_requests or []
    assert [r.partition_key for r in runs] == ["2020-01-01", "2020-01-02", "2020-01-03"]


def test_a_window_the_sensor_does_not_request_says_on_its_page_what_it_waits_for(
    tmp_path: Path,
) -> None:
    """A due window left out of a tick (a run in flight over it, or max_runs_per_tick) is
    observed on its own partition, naming the window and what it waits for; once."""
    raw = {**time_pipeline(tmp_path, to="P0D"), "schedule": {"max_runs_per_tick": 2}}
    config = project_config(raw)
    now = day("2020-01-05T06:00")  # due: 2020-01-01 .. 2020-01-05
    defs = build_definitions(config, clock=lambda: now)
    instance = DagsterInstance.ephemeral()
    instance.create_run_for_job(
        defs.resolve_job_def("orders_job"),
        status=DagsterRunStatus.STARTED,
        tags={"dagster/partition": "2020-01-02"},
    )
    sensor = defs.resolve_sensor_def("orders_sensor")

    def tick() -> dict[str, str]:
        with build_sensor_context(instance=instance, definitions=defs) as context:
            data = sensor.evaluate_tick(context)
        for event in data.asset_events:
            instance.report_runless_asset_event(event)
        return {e.partition: e.metadata["partition/reason"].value for e in data.asset_events}

    said = tick()
    new = "it has no history yet (never read, or its first run failed)"
    assert said == {
        "2020-01-02": f"[2020-01-02T00:00:00Z, 2020-01-03T00:00:00Z) is due: {new}; "
        "it waits for the run in flight over this partition, and the first tick after that run "
        "ends requests it",
        "2020-01-05": f"[2020-01-05T00:00:00Z, 2020-01-05T06:00:00Z) is due: {new}; "
        "it waits for a later tick: a tick requests at most schedule.max_runs_per_tick 2 runs, "
        "oldest windows first",
        "2020-01-04": f"[2020-01-04T00:00:00Z, 2020-01-05T00:00:00Z) is due: {new}; "
        "it waits for a later tick: a tick requests at most schedule.max_runs_per_tick 2 runs, "
        "oldest windows first",
    }
    assert tick() == {}, "the same words are not written twice"
