"""What a crashed run leaves behind is removed once it is older than the table's window.

A run moves its staged files into the table folder and then commits them; a kill in between
leaves data files no commit references, and a kill before an atomic write's rename leaves its
temporary file in ``_watermarks/``. Delta readers never see them; the next run's staging
hygiene (``staging.remove_stale_staging``, once per sweep interval) removes them when they are
older than the window (``watermark_assets.leftoverRetention``, default 6 hours) and counts them
(``cleanup/orphans_removed``, every kind of run). It never touches a file a Delta version holds
or remembers removing, ``_delta_log``, the state snapshots, the checkpoints, or a run in flight's
files.

Time is simulated by backdating modification times (``os.utime``), never by sleeping; the real
leftovers come from runs killed at ``crash_point``s (``_crash_run.py`` in a subprocess).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from _landing import FROZEN_NOW, Landing, delta_ids, hour, table_files
from _sensor_loop import SensorLoop
from conftest import TEST_SPARK_CONF, pipeline_yaml, project_config
from dagster import DagsterInstance
from deltalake import DeltaTable, write_deltalake

from watermark_assets.config import FilePipelineConfig
from watermark_assets.defs import build_definitions
from watermark_assets.exceptions import LeftoverRetentionError
from watermark_assets.runs.faults import CRASH_ENV_VAR
from watermark_assets.staging import LEFTOVER_RETENTION_PROPERTY, SWEEP_MARKER, remove_stale_staging

TESTS = Path(__file__).resolve().parent
HOUR = 3600.0
NOW = datetime(2026, 4, 3, 12, 0, tzinfo=timezone.utc)
MOVED = "part-00000-20260403T030000-0123456789ab.parquet"  # a name move_into_table gives


def backdate(paths: list[Path], hours: float) -> None:
    for path in paths:
        stamp = time.time() - hours * HOUR
        os.utime(path, (stamp, stamp))


def every_file(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


class Table:
    """A Delta table with a current file, a removed file the log still remembers (a tombstone)
    and the project's own files (a checkpoint, a state snapshot, their locks)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.uri = str(root)
        write_deltalake(self.uri, pa.table({"a": [1]}))
        self.tombstoned = Path(DeltaTable(self.uri).file_uris()[0])
        write_deltalake(self.uri, pa.table({"a": [2]}), mode="overwrite")
        self.current = Path(DeltaTable(self.uri).file_uris()[0])
        for name, text in [
            ("_watermarks/events_landing_checkpoint.json", "{}"),
            ("_watermarks/events_landing_checkpoint.json.lock", ""),
            ("_watermarks/state/watermark_assets.unit_watermark%2Fanswers.json", "{}"),
        ]:
            self.put(name, text.encode())

    def put(self, relative: str, data: bytes = b"PAR1") -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    def sweep(self, **kwargs: Any) -> list[str]:
        return remove_stale_staging(self.uri, NOW, **kwargs)


LEFTOVERS: list[tuple[str, Callable[[Table], Path]]] = [
    ("a moved data file no commit references", lambda t: t.put(MOVED)),
    ("one in a partition folder", lambda t: t.put(f"date=2026-04-03/{MOVED}")),
    (
        "an event-time run's moved file",
        lambda t: t.put("part-00000-20260403T030000-0123abcd-output-reopened.parquet"),
    ),
    (
        "a streaming micro-batch's moved file",
        lambda t: t.put("part-00000-20260403T030000-0123abcd-stream-7.parquet"),
    ),
    (
        "a checkpoint's temporary file",
        lambda t: t.put("_watermarks/events_landing_checkpoint.json.0a1b2c3d.tmp", b"{}"),
    ),
    (
        "a state snapshot's temporary file",
        lambda t: t.put("_watermarks/state/x.json.89abcdef.tmp", b"{}"),
    ),
    ("a staging folder", lambda t: t.put("_staging/20260403T010000-0123456789ab/part-0.parquet")),
]
KEPT: list[tuple[str, Callable[[Table], Path]]] = [
    ("the current snapshot's file", lambda t: t.current),
    ("a file a commit removed that the table remembers", lambda t: t.tombstoned),
    ("a commit JSON of _delta_log", lambda t: t.root / "_delta_log" / "00000000000000000000.json"),
    ("the checkpoint", lambda t: t.root / "_watermarks/events_landing_checkpoint.json"),
    ("the checkpoint's lock", lambda t: t.root / "_watermarks/events_landing_checkpoint.json.lock"),
    (
        "a state snapshot",
        lambda t: t.root / "_watermarks/state/watermark_assets.unit_watermark%2Fanswers.json",
    ),
    ("another writer's data file", lambda t: t.put("part-00000-abc-c000.snappy.parquet")),
    ("a file in another hidden folder", lambda t: t.put("_other/part-00000.parquet")),
]


@pytest.mark.parametrize(
    "make", [m for _, m in LEFTOVERS], ids=[f"{n} is removed" for n, _ in LEFTOVERS]
)
def test_a_crashed_runs_leftover_older_than_the_window_is_removed(
    tmp_path: Path, make: Callable[[Table], Path]
) -> None:
    table = Table(tmp_path / "table")
    leftover = make(table)
    backdate(every_file(table.root), hours=7)
    others = {p for p in every_file(table.root) if leftover not in (p, *p.parents)}
    removed = table.sweep()
    assert len(removed) == 1
    assert not leftover.exists()
    assert set(every_file(table.root)) == others | {table.root / SWEEP_MARKER}


@pytest.mark.parametrize("make", [m for _, m in KEPT], ids=[f"{n} is kept" for n, _ in KEPT])
def test_nothing_a_delta_version_or_the_project_needs_is_ever_removed(
    tmp_path: Path, make: Callable[[Table], Path]
) -> None:
    table = Table(tmp_path / "table")
    kept = make(table)
    backdate(every_file(table.root), hours=24 * 30)
    assert table.sweep() == []
    assert kept.exists()
    assert delta_ids_of(table.uri) == [2]


def delta_ids_of(uri: str) -> list[int]:
    return sorted(DeltaTable(uri).to_pyarrow_table()["a"].to_pylist())


def test_a_leftover_younger_than_the_window_stays_a_run_in_flight_may_commit_it(
    tmp_path: Path,
) -> None:
    table = Table(tmp_path / "table")
    fresh = table.put(MOVED)
    backdate([fresh], hours=5)  # default window: 6 hours
    assert table.sweep() == []
    assert fresh.exists()


def test_a_parquet_commit_tables_data_files_are_never_swept(tmp_path: Path) -> None:
    table = Table(tmp_path / "table")
    landing = table.put(MOVED)  # in a parquet_commit table: a landing file not committed yet
    backdate(every_file(table.root), hours=7)
    assert table.sweep(data_files=False) == []
    assert landing.exists()


@pytest.mark.parametrize(
    ("window", "age_hours", "removed"),
    [
        pytest.param("1 hour", 2, True, id="a window of 1 hour removes a 2-hour-old leftover"),
        pytest.param("interval 1 hour", 2, True, id="Delta's 'interval' form is accepted"),
        pytest.param("2 days", 30, False, id="a window of 2 days keeps a 30-hour-old one"),
    ],
)
def test_the_window_is_the_tables_leftover_retention_property(
    tmp_path: Path, window: str, age_hours: float, removed: bool
) -> None:
    table = Table(tmp_path / "table")
    DeltaTable(table.uri).alter.set_table_properties(
        {LEFTOVER_RETENTION_PROPERTY: window}, raise_if_not_exists=False
    )
    leftover = table.put(MOVED)
    backdate([leftover], hours=age_hours)
    assert (table.sweep() == [MOVED]) is removed
    assert leftover.exists() is not removed


def test_a_window_that_is_no_duration_is_refused_naming_the_property_and_the_fix(
    tmp_path: Path,
) -> None:
    table = Table(tmp_path / "table")
    DeltaTable(table.uri).alter.set_table_properties(
        {LEFTOVER_RETENTION_PROPERTY: "soon"}, raise_if_not_exists=False
    )
    leftover = table.put(MOVED)
    backdate([leftover], hours=7)
    with pytest.raises(LeftoverRetentionError, match=r"'soon' is no duration.*'1 hour'"):
        table.sweep()
    assert leftover.exists()


def test_the_folder_is_swept_at_most_once_per_sweep_interval(tmp_path: Path) -> None:
    table = Table(tmp_path / "table")
    assert table.sweep() == []  # the first sweep: the marker records it
    leftover = table.put(MOVED)
    backdate([leftover], hours=7)
    assert table.sweep() == []  # within the interval: not listed again
    backdate([table.root / SWEEP_MARKER], hours=2)
    assert table.sweep() == [MOVED]


# --- the real leftovers: file runs killed mid-way (a subprocess), then the next runs ---

PARTITION = "2024-01-28"


class FileScene:
    """One file pipeline on tmp_path with landing files in PARTITION."""

    def __init__(self, tmp_path: Path) -> None:
        raw = pipeline_yaml(tmp_path)
        self.config_path = tmp_path / "pipelines.yaml"
        self.config_path.write_text(
            yaml.safe_dump(
                {"spark": {"master": "local[1]", "conf": TEST_SPARK_CONF}, "pipelines": [raw]}
            ),
            encoding="utf-8",
        )
        config = project_config(raw)
        pipeline = config.pipeline("events")
        assert isinstance(pipeline, FilePipelineConfig)
        self.table = Path(pipeline.table.uri)
        self.landing = Landing(tmp_path / "landing")
        self.files = [self.landing.add(hour(28, 10)), self.landing.add(hour(28, 11))]
        self.loop = SensorLoop(
            build_definitions(config, clock=lambda: FROZEN_NOW), DagsterInstance.ephemeral()
        )

    def killed_at(self, crash_at: str) -> None:
        env = {
            **os.environ,
            "WATERMARK_ASSETS_CONFIG": str(self.config_path),
            CRASH_ENV_VAR: crash_at,
            "PYSPARK_PYTHON": sys.executable,
        }
        completed = subprocess.run(
            [sys.executable, str(TESTS / "_crash_run.py"), "events", PARTITION, *self.files],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert completed.returncode == -signal.SIGKILL, completed.stderr[-3000:]

    def run(self) -> dict[str, Any]:
        assert self.loop.run_partition(PARTITION, self.files).success
        return self.loop.metadata(PARTITION)

    def moved_but_uncommitted(self) -> set[Path]:
        committed = self.committed_files() if self.committed() else set()
        return {
            p
            for p in self.table.rglob("part-*.parquet")
            if not any(part.startswith("_") for part in p.relative_to(self.table).parts)
            and p not in committed
        }

    def committed_files(self) -> set[Path]:
        return {self.table / p for p in table_files(self.table)}

    def temporary_files(self) -> set[Path]:
        return set((self.table / "_watermarks").rglob("*.tmp"))

    def committed(self) -> bool:
        return DeltaTable.is_deltatable(str(self.table))


@pytest.mark.spark
@pytest.mark.slow
def test_what_killed_runs_left_is_removed_by_a_later_run_and_counted(
    spark: Any, tmp_path: Path
) -> None:
    scene = FileScene(tmp_path)
    assert scene.run()["cleanup/orphans_removed"] == 0  # the table exists, nothing left over
    scene.files.append(scene.landing.add(hour(28, 12)))

    scene.killed_at("after_first_file_moved")
    orphans = scene.moved_but_uncommitted()
    assert len(orphans) == 1, "one data file moved into the table folder, no commit took it"
    scene.killed_at("before_atomic_rename")
    temporary = scene.temporary_files()
    assert temporary, "a checkpoint's or snapshot's temporary file left in _watermarks/"

    # The next run commits the files; the leftovers are younger than the window: kept.
    assert scene.run()["cleanup/orphans_removed"] == 0
    assert orphans <= scene.moved_but_uncommitted() and temporary <= scene.temporary_files()
    ids = delta_ids(str(scene.table))
    assert ids == sorted(scene.landing.ids)

    # Seven hours later (every file backdated), the next run removes them, and only them.
    backdate(every_file(scene.table), hours=7)
    committed = scene.committed_files()
    scene.files.append(scene.landing.add(hour(28, 13)))
    metadata = scene.run()
    assert scene.moved_but_uncommitted() == set() and scene.temporary_files() == set()
    assert metadata["cleanup/orphans_removed"] == len(orphans) + len(temporary)
    assert all(p.exists() for p in committed), "no committed file is ever removed"
    assert delta_ids(str(scene.table)) == sorted(scene.landing.ids)
    assert (scene.table / "_watermarks" / "events_landing_checkpoint.json").exists() or any(
        (scene.table / "_watermarks").glob("*checkpoint*.json")
    )


# --- every kind of run removes and counts them: a staging folder a crashed run left ---

#: A staging folder a run killed in 1999 left (its token starts with its staging time).
OLD_STAGING = "_staging/19990101T000000-0123456789ab/part-00000.parquet"
RUN_NOW = datetime(2026, 4, 4, 12, 0, tzinfo=timezone.utc)


def _json_source(tmp_path: Path) -> dict[str, Any]:
    """Two surveys' rows on 2026-04-03, as JSON lines (a source that quarantines: its
    quarantine table is swept too)."""
    folder = tmp_path / "source"
    folder.mkdir()
    rows = [
        {"id": i, "updated_at": f"2026-04-03T09:{i:02}:00Z", "survey": f"s{i % 2}"}
        for i in range(6)
    ]
    (folder / "a.json").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    schema = "id BIGINT, updated_at TIMESTAMP, survey STRING"
    return {"type": "json", "uri": str(folder), "schema": schema}


def _column(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "name": "orders",
        "source": _json_source(tmp_path),
        "watermark": {"columns": ["updated_at", "id"]},
        "table": {"uri": str(tmp_path / "delta" / "orders")},
        **extra,
    }


def _with_watermark(tmp_path: Path, watermark: dict[str, Any]) -> dict[str, Any]:
    return {**_column(tmp_path), "watermark": watermark}


_UNITS = {"kind": "unit", "column": "survey", "units": "s0,s1"}
_EVENT_TIME = {
    "name": "orders_5min",
    "source": {"type": "pipeline", "pipeline": "orders"},
    "watermark": {"kind": "event_time", "column": "updated_at", "delay": "10 minutes"},
    "window": {"size": "5 minutes"},
    "aggregates": {"orders": "count"},
    "partitions": {"granularity": "hourly", "start": "2026-04-03 09:00:00"},
}


@dataclass(frozen=True)
class KindRun:
    """A pipeline of one watermark kind, the run that materializes it, and the tables whose
    leftovers that run sweeps (relative to tmp_path)."""

    pipelines: Callable[[Path], list[dict[str, Any]]]
    asset: str
    partition: str | None
    swept: tuple[str, ...]


KINDS = [
    pytest.param(
        KindRun(
            lambda t: [_column(t)], "orders", None, ("delta/orders", "delta/orders_quarantine")
        ),
        id="column",
    ),
    pytest.param(
        KindRun(
            lambda t: [
                _column(
                    t,
                    destination={"replace_by_watermark": True},
                    partitions={"granularity": "daily", "start": "2026-04-01"},
                )
            ],
            "orders",
            "2026-04-03",
            ("delta/orders", "delta/orders_quarantine"),
        ),
        id="replay (column partitions)",
    ),
    pytest.param(
        KindRun(
            lambda t: [
                _with_watermark(t, {"kind": "time", "column": "updated_at", "from": "2026-04-01"})
            ],
            "orders",
            "2026-04-03",
            ("delta/orders", "delta/orders_quarantine"),
        ),
        id="time",
    ),
    pytest.param(
        KindRun(
            lambda t: [_with_watermark(t, _UNITS)],
            "orders",
            "s1",
            ("delta/orders", "delta/orders_quarantine"),
        ),
        id="unit",
    ),
    pytest.param(
        KindRun(
            lambda t: [
                _with_watermark(
                    t, {**_UNITS, "time": {"column": "updated_at", "from": "2026-04-01"}}
                )
            ],
            "orders",
            "2026-04-03|s1",
            ("delta/orders", "delta/orders_quarantine"),
        ),
        id="time x unit",
    ),
    pytest.param(
        KindRun(
            lambda t: [_column(t), {**_EVENT_TIME, "table": {"uri": str(t / "agg" / "o5")}}],
            "orders_5min",
            "2026-04-03-09:00",
            ("agg/o5", "agg/o5_late", "agg/o5_state"),
        ),
        id="event time",
    ),
]


@pytest.mark.spark
@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_of_run_removes_what_crashed_runs_left_and_counts_it(
    spark: Any, tmp_path: Path, kind: KindRun
) -> None:
    """``cleanup/orphans_removed``, the key the file pipelines use: one old staging folder under
    each table the run writes (its data table, its quarantine or late and state tables)."""
    raw = kind.pipelines(tmp_path)
    defs = build_definitions(project_config(*raw), clock=lambda: RUN_NOW)
    instance = DagsterInstance.ephemeral()
    for upstream in raw[:-1]:  # an event-time aggregate reads its upstream pipeline's table
        assert (
            defs.resolve_job_def(f"{upstream['name']}_job")
            .execute_in_process(instance=instance)
            .success
        )
    planted = [tmp_path / table / OLD_STAGING for table in kind.swept]
    for path in planted:
        path.parent.mkdir(parents=True)
        path.write_bytes(b"PAR1")

    job = defs.resolve_job_def(f"{kind.asset}_job")
    result = job.execute_in_process(instance=instance, partition_key=kind.partition)
    materialization = result.asset_materializations_for_node(kind.asset)[0]
    metadata = {key: value.value for key, value in materialization.metadata.items()}

    assert metadata["cleanup/orphans_removed"] == len(planted)
    assert not any(path.parent.exists() for path in planted)
