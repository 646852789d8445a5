"""A pipeline's state across what Delta does to a table over a year (issue 21).

First the one state store (``state/store.py``) on hand-made commits, without Spark: a
commitInfo entry's state (``state/snapshot.py``), the store's ordering, the event-time progress
and the on-disk names. Then one maintenance suite that every kind runs (column with either
provider, time, time x unit, unit, file path, event time), each through a scene of its own: log
cleanup between runs and in the middle of a run, OPTIMIZE + Z-order + VACUUM of its tables and of
its upstream, a crash between the data commit and the state file, ``summary`` and ``explain``
in a fresh process, and the state lost with the log, recovered by the command its error names.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties, Transaction
from maintenance import (
    checkpoint_and_clean,
    clean_while_writing,
    commit_files,
    optimize,
    stop_cleaning,
    vacuum,
    z_order,
)

from watermark_assets.cli import main
from watermark_assets.core.event_time import EventTimeWatermark
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.time import TimeWatermark
from watermark_assets.exceptions import (
    CheckpointError,
    ConcurrentWriteError,
    StateHistoryLostError,
)
from watermark_assets.kinds.event_time.progress import (
    BatchPlan,
    ProgressEntry,
    WindowProgress,
    legacy_progress_uri,
    progress_store,
    read_progress,
    write_committed,
    write_planned,
)
from watermark_assets.state.snapshot import StateLog, WatermarkFold
from watermark_assets.state.store import CommitFold, Envelope, StateStore, Stored, state_file_uri

UTC = timezone.utc
KEY = "watermark_assets.time/orders"


def day(n: int) -> datetime:
    return datetime(2020, 1, 1, tzinfo=UTC) + timedelta(days=n)


class HandLog:
    """A table whose commits carry time-watermark entries, written by hand: commit ``n`` of the
    pipeline records the window of day ``n`` under its own txn (as a time pipeline does)."""

    def __init__(self, tmp_path: Path, pipeline: str = "orders") -> None:
        self.uri = str(tmp_path / "t")
        self.pipeline = pipeline
        self.key = f"watermark_assets.time/{pipeline}"

    def ours(self, n: int) -> None:
        window = TimeWatermark.empty().advance(TimeWindow(day(n), day(n + 1)))
        self._write({self.key: json.dumps({"watermark": window.to_json()})}, f"w{n}")

    def foreign(self) -> None:
        """A commit of another writer (another pipeline's txn, no entry of ours)."""
        self._write({}, None)

    def _write(self, metadata: dict[str, str], window: str | None) -> None:
        app = f"watermark_assets/{self.pipeline}/time/{window}" if window else "someone/else"
        version = 1 if window else (DeltaTable(self.uri).version() + 2 if self._exists() else 1)
        write_deltalake(
            self.uri,
            pa.table({"id": [1]}),
            mode="append",
            commit_properties=CommitProperties(
                custom_metadata=metadata, app_transactions=[Transaction(app, version)]
            ),
        )

    def _exists(self) -> bool:
        return (Path(self.uri) / "_delta_log").exists()

    def log(self) -> StateLog[TimeWatermark]:
        return StateLog(
            self.uri,
            self.key,
            WatermarkFold(TimeWatermark.empty(), TimeWatermark.from_json),
            txn_prefix=f"watermark_assets/{self.pipeline}/",
            pipeline=self.pipeline,
        )

    def days(self) -> list[int]:
        covered = self.log().read().covered()
        return [n for n in range(40) if any(w.start <= day(n) < w.end for w in covered)]


def test_a_quiet_month_of_log_cleanup_loses_nothing_the_snapshot_holds(tmp_path: Path) -> None:
    table = HandLog(tmp_path)
    for n in range(3):
        table.ours(n)
    assert table.days() == [0, 1, 2]  # this read writes the snapshot
    for _ in range(3):
        table.foreign()  # the user's maintenance commits meanwhile
    checkpoint_and_clean(table.uri)
    assert table.days() == [0, 1, 2]


def test_a_crash_between_the_commit_and_the_snapshot_is_caught_up_by_the_next_read(
    tmp_path: Path,
) -> None:
    table = HandLog(tmp_path)
    table.ours(0)
    assert table.days() == [0]
    table.ours(1)  # committed; the process died before any read wrote the snapshot
    assert table.days() == [0, 1]
    assert json.loads(Path(state_file_uri(table.uri, table.key)).read_text())["table_version"] == 1


@pytest.mark.parametrize(
    ("commits_in_the_gap", "lost"),
    [
        pytest.param(["foreign", "foreign"], False, id="a gap of other writers' commits only"),
        pytest.param(["foreign", "ours"], True, id="a gap holding one of the pipeline's commits"),
    ],
)
def test_a_gap_in_the_log_is_decided_by_the_txns_the_checkpoint_keeps(
    tmp_path: Path, commits_in_the_gap: list[str], lost: bool
) -> None:
    table = HandLog(tmp_path)
    table.ours(0)
    assert table.days() == [0]
    for kind in commits_in_the_gap:
        table.ours(5) if kind == "ours" else table.foreign()
    checkpoint_and_clean(table.uri)  # nobody read for a month: the gap is gone from the log
    table.ours(9)  # after the checkpoint: still in the log
    if not lost:
        assert table.days() == [0, 9]
        return
    with pytest.raises(StateHistoryLostError) as caught:
        table.days()
    assert caught.value.first_missing == 1
    assert "watermark-assets repair-state orders" in str(caught.value)


def test_a_read_never_needs_a_commit_older_than_the_snapshot(tmp_path: Path) -> None:
    """200 commits, read as they come; then every JSON older than the snapshot is deleted (no
    checkpoint at all): the state reads the same, so its cost cannot grow with the history."""
    table = HandLog(tmp_path)
    for n in range(200):
        table.ours(n % 30)
        if n % 50 == 49:
            table.days()
    for path in commit_files(table.uri)[:-1]:
        path.unlink()
    assert table.days() == list(range(30))


@pytest.mark.parametrize("name", ["orders daily", "orders*", "a/b"])
def test_a_name_with_a_space_a_star_or_a_slash_is_one_snapshot_file(
    tmp_path: Path, name: str
) -> None:
    table = HandLog(tmp_path, pipeline=name)
    table.ours(3)
    assert table.days() == [3]
    folder = Path(table.uri) / "_watermarks" / "state"
    assert [p.name for p in folder.iterdir() if p.suffix == ".json"] == [
        Path(state_file_uri(table.uri, table.key)).name
    ]


def test_optimize_z_order_and_vacuum_leave_the_snapshot_and_the_state(tmp_path: Path) -> None:
    table = HandLog(tmp_path)
    for n in range(4):
        table.ours(n)
    assert table.days() == [0, 1, 2, 3]
    optimize(table.uri)
    z_order(table.uri, ["id"])
    vacuum(table.uri)
    checkpoint_and_clean(table.uri)
    assert Path(state_file_uri(table.uri, table.key)).exists()
    assert table.days() == [0, 1, 2, 3]


# --- the store's rules, for every client ----------------------------------------------------


def test_a_stored_state_is_never_replaced_by_an_older_one(tmp_path: Path) -> None:
    """Ordered by (table version, txn sum): an older write loses, a newer or equal one wins, a
    repair (force) wins whatever the file holds."""
    table = HandLog(tmp_path)
    table.ours(0)
    store = StateStore(table.uri, "k", Envelope("k", str, str), _NoFold(), pipeline="orders")
    assert store.write(Stored('"v5"', 5, 3))
    assert not store.write(Stored('"v4"', 4, 9)), "an older table version loses"
    assert not store.write(Stored('"v5 sum 2"', 5, 2)), "the same version with a smaller sum loses"
    assert store.write(Stored('"v5 again"', 5, 3))
    assert store.write(Stored('"v5 sum 4"', 5, 4))
    assert store.load()[0] == Stored('"v5 sum 4"', 5, 4)
    assert store.write(Stored('"repaired"', 1, 1), force=True)
    assert store.load()[0] == Stored('"repaired"', 1, 1)


class _NoFold(CommitFold[str]):
    def empty(self) -> str:
        return '""'

    def fold(self, state: str, commit: Any) -> str:
        return state


def test_a_state_file_ahead_of_its_table_names_repair_state(tmp_path: Path) -> None:
    """The table was replaced (deleted and written again) under its state file: the store
    refuses to read a state of another table, and names the recovery."""
    table = HandLog(tmp_path)
    for n in range(3):
        table.ours(n)
    assert table.days() == [0, 1, 2]
    shutil.rmtree(Path(table.uri) / "_delta_log")
    table.ours(7)  # a new table, version 0
    with pytest.raises(CheckpointError, match="repair-state orders"):
        table.days()
    table.log().repair()
    assert table.days() == [7]


def test_a_table_none_of_whose_cleaned_commits_was_the_pipelines_reads_as_no_state(
    tmp_path: Path,
) -> None:
    """No state file and a cleaned log: the kind's old reader (a walk back to its newest entry)
    is not needed when the checkpoint holds no txn of the pipeline (e.g. a column pipeline that
    never committed to a table others write)."""
    from watermark_assets.providers.delta_metadata import column_state_log

    table = HandLog(tmp_path)
    for _ in range(3):
        table.foreign()
    checkpoint_and_clean(table.uri)
    log = column_state_log(table.uri, "orders", "orders")
    assert log.read() is None
    assert Path(log.location).is_file(), "the first read writes the state file"


# --- the event-time progress in the store, on hand-made state tables ----------------------

PIPELINE = "agg"
APP_ID = f"watermark_assets/{PIPELINE}/event_window"
STATE_KEY = f"watermark_assets.event_time/{PIPELINE}"


class HandStateTable:
    """An event-time aggregate's state table written by hand: batch ``b``'s state commit holds
    txn ``b`` and its progress in ``commitInfo`` (``kinds/event_time/window.py``)."""

    def __init__(self, tmp_path: Path) -> None:
        self.uri = str(tmp_path / "agg_state")
        self.store = progress_store(
            pipeline=PIPELINE,
            state_uri=self.uri,
            app_id=APP_ID,
            state_key=STATE_KEY,
            inputs={"events": None},
        )

    @staticmethod
    def progress(batch: int) -> WindowProgress:
        return WindowProgress(
            batch=batch,
            watermark=EventTimeWatermark(watermark_ms=batch * 60_000),
            upstream_versions={"events": batch},
            open_windows=batch,
            upstream_rows={"events": None},
        )

    @staticmethod
    def plan(batch: int) -> BatchPlan:
        before = EventTimeWatermark(watermark_ms=(batch - 1) * 60_000)
        after = EventTimeWatermark(watermark_ms=batch * 60_000)
        return BatchPlan(
            batch=batch,
            upstream_from={"events": batch - 1},
            upstream_to={"events": batch},
            watermark_before=before,
            watermark_after=after,
        )

    def commit(self, batch: int) -> int:
        metadata = {STATE_KEY: json.dumps(self.progress(batch).to_dict())}
        write_deltalake(
            self.uri,
            pa.table({"window_start": [batch]}),
            mode="overwrite",
            commit_properties=CommitProperties(
                custom_metadata=metadata, app_transactions=[Transaction(APP_ID, batch)]
            ),
        )
        return DeltaTable(self.uri).version()

    def maintenance(self) -> None:
        """A commit of no batch (OPTIMIZE, VACUUM, a property change)."""
        write_deltalake(self.uri, pa.table({"window_start": [0]}), mode="append")

    def run(self, batch: int) -> None:
        """Batch ``batch`` as a run does it: planned, committed, recorded."""
        file = read_progress(self.store)
        write_planned(file, ProgressEntry(self.plan(batch), self.progress(batch), None))
        version = self.commit(batch)
        write_committed(file, ProgressEntry(self.plan(batch), self.progress(batch), version))

    def committed(self) -> tuple[int, WindowProgress | None]:
        file = read_progress(self.store)
        entry = file.entries.get(file.committed)
        return file.committed, None if entry is None else entry.progress


def test_the_state_files_of_every_kind_are_where_they_were(tmp_path: Path) -> None:
    """The on-disk names are a contract: existing tables keep working across versions."""
    from conftest import pipeline_yaml, project_config

    table = str(tmp_path / "t")
    assert state_file_uri(table, "watermark_assets.time/orders daily") == (
        f"{table}/_watermarks/state/watermark_assets.time%2Forders%20daily.json"
    )
    file_pipeline = project_config(pipeline_yaml(tmp_path)).file_pipeline("events")
    assert file_pipeline.checkpoint_uri == (
        f"{tmp_path}/delta/events/_watermarks/events_main_checkpoint.json"
    ), "the seed's checkpoint name"
    state = HandStateTable(tmp_path)
    assert state.store.location == (
        f"{state.uri}/_watermarks/state/watermark_assets.event_time%2Fagg.json"
    )
    assert legacy_progress_uri(state.uri) == f"{state.uri}/_watermarks/event_window.json"


def test_an_older_event_time_progress_file_is_read_and_the_first_write_moves_it(
    tmp_path: Path,
) -> None:
    """A table whose progress is in the progress file of earlier versions (by batch, with the
    state version of each): it is read, and the first read that goes past it writes the
    store's file; the old file is left as it was."""
    state = HandStateTable(tmp_path)
    versions = {1: state.commit(1), 2: state.commit(2)}
    old = {
        "schema_version": 1,
        "batches": {
            str(b): {
                "plan": state.plan(b).to_json(),
                "progress": state.progress(b).to_dict(),
                "state_version": versions[b] if b == 1 else None,  # 2: died before recording
            }
            for b in (1, 2)
        },
    }
    legacy = Path(legacy_progress_uri(state.uri))
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_text(json.dumps(old), encoding="utf-8")

    assert state.committed() == (2, state.progress(2))
    written = json.loads(Path(state.store.location).read_text(encoding="utf-8"))
    assert (written["table_version"], written["txn_sum"]) == (versions[2], 2)
    assert json.loads(legacy.read_text(encoding="utf-8")) == old
    state.run(3)
    assert state.committed() == (3, state.progress(3))


@pytest.mark.parametrize(
    ("recorded_ahead", "lost"),
    [
        pytest.param(True, False, id="the batch planned in the file before its commits"),
        pytest.param(False, True, id="a file restored from before the batch was planned"),
    ],
)
def test_an_event_time_batch_whose_commit_left_the_log_is_read_from_the_file_planned_ahead(
    tmp_path: Path, recorded_ahead: bool, lost: bool
) -> None:
    """Batch 2 committed, the run died before recording it, and a month of maintenance cleaned
    the state table's log: the checkpoint's txn names batch 2 and the file holds its plan and
    progress, written before the commit. Without that entry, the one error and its command."""
    state = HandStateTable(tmp_path)
    state.run(1)
    before = Path(state.store.location).read_text(encoding="utf-8")
    file = read_progress(state.store)
    write_planned(file, ProgressEntry(state.plan(2), state.progress(2), None))
    state.commit(2)  # killed here
    if not recorded_ahead:
        Path(state.store.location).write_text(before, encoding="utf-8")
    state.maintenance()
    checkpoint_and_clean(state.uri)
    if not lost:
        assert state.committed() == (2, state.progress(2))
        state.run(3)
        assert state.committed() == (3, state.progress(3))
        return
    with pytest.raises(StateHistoryLostError) as caught:
        state.committed()
    assert f"watermark-assets repair-state {PIPELINE}" in str(caught.value)
    assert "removes the aggregate's output, late and state tables" in str(caught.value)


def test_two_runs_planning_one_event_time_batch_the_second_stops(tmp_path: Path) -> None:
    """Planned writes merge with whatever another writer put in the file since it was read,
    except another plan of the same batch: that run stops before committing anything."""
    state = HandStateTable(tmp_path)
    state.run(1)
    first, second = read_progress(state.store), read_progress(state.store)
    write_planned(first, ProgressEntry(state.plan(2), state.progress(2), None))
    with pytest.raises(ConcurrentWriteError, match="planned or committed batch 2"):
        write_planned(second, ProgressEntry(state.plan(2), state.progress(2), None))
    state.maintenance()
    read_progress(state.store)  # a reader catching the file up: merged, not a conflict
    version = state.commit(2)
    write_committed(first, ProgressEntry(state.plan(2), state.progress(2), version))
    assert state.committed() == (2, state.progress(2))


def test_a_batch_planned_by_a_run_that_died_before_committing_is_planned_again(
    tmp_path: Path,
) -> None:
    """The run that planned batch 2 died before its output commit: the next run reads its
    entry, plans batch 2 anew (another upstream range) and commits it; a run that read the
    file before that new plan stops."""
    state = HandStateTable(tmp_path)
    state.run(1)
    write_planned(
        read_progress(state.store), ProgressEntry(state.plan(2), state.progress(2), None)
    )  # and died
    stale, again = read_progress(state.store), read_progress(state.store)
    assert again.entries[2].state_version is None and again.committed == 1
    replanned = replace(state.plan(2), upstream_to={"events": 5})
    write_planned(again, ProgressEntry(replanned, state.progress(2), None))
    with pytest.raises(ConcurrentWriteError):
        write_planned(stale, ProgressEntry(state.plan(2), state.progress(2), None))
    version = state.commit(2)
    write_committed(again, ProgressEntry(replanned, state.progress(2), version))
    file = read_progress(state.store)
    assert (file.committed, file.entries[2].plan) == (2, replanned)


# --- the maintenance suite of every kind, on real runs -------------------------------------
#
# One scene per kind (a class-scoped fixture), taken through a year of maintenance step by step:
# each test is one step and goes on from the scene the previous one left (pytest runs a class's
# tests in order, one kind after the other; ``tests/conftest.py`` keeps a kind's steps in one
# xdist worker). A step that fails skips the kind's later steps.


class KindScene:
    """One kind's pipeline over a source it can add rows to (a fixture builds each kind)."""

    name: str
    #: the tables the pipeline writes (the target first)
    tables: list[str]
    #: its Delta upstream (None: its source is no Delta table)
    upstream: str | None = None
    #: every pipeline of its configuration file (the upstream pipelines too)
    pipelines: list[dict[str, Any]]
    #: the first step that failed on this scene
    failed: str | None = None
    #: the test session's Spark
    spark: Any = None

    @property
    def table(self) -> str:
        return self.tables[0]

    def run(self) -> None:
        """Run the pipeline over everything due (raises on a failed run)."""
        raise NotImplementedError

    def add_rows(self) -> None:
        """New source rows for the next run (enough for a run of more than one commit)."""
        raise NotImplementedError

    def assert_exact(self) -> None:
        """The target holds every source row the runs covered, each once."""
        raise NotImplementedError

    def state_files(self) -> list[Path]:
        """The files of the state store, as a crash or a restore from a backup sees them."""
        return [p for t in self.tables for p in (Path(t) / "_watermarks" / "state").glob("*.json")]

    def summary(self) -> dict[str, str | re.Pattern[str]]:
        """What ``watermark-assets summary`` must print in the pipeline's row, by column, as
        the source and the target say (not as the state says)."""
        raise NotImplementedError

    def explain(self) -> list[str]:
        """What ``watermark-assets explain PIPELINE`` must print: its state read from the state
        file up to the table's latest version."""
        return ["state file", f"the table read up to version {self.state_version()}"]

    def state_version(self) -> int:
        return DeltaTable(self.state_table).version()

    @property
    def state_table(self) -> str:
        """The table whose versions the state file reflects."""
        return self.table


class ColumnKind(KindScene):
    def __init__(self, tmp_path: Path, **overrides: Any) -> None:
        from test_column_pipeline import Scene, order

        self.scene = Scene(tmp_path, **overrides)
        self.name, self.pipelines = "orders", [self.scene.raw]
        self.tables, self.upstream = [self.scene.table], str(self.scene.orders.uri)
        self._order = order
        self._next = 1
        self.add_rows()

    def run(self) -> None:
        self.scene.run()

    def add_rows(self) -> None:
        base = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(hours=self._next)
        self.scene.orders.put(*(self._order(self._next + i, base) for i in range(3)))
        self._next += 3

    def assert_exact(self) -> None:
        self.scene.assert_each_source_row_once()

    def summary(self) -> dict[str, str | re.Pattern[str]]:
        last = max(self.scene.orders.rows)
        return {
            "kind": f"column ({self.scene.pipeline.watermark.provider.type})",
            "rows": str(len(self.scene.orders.rows)),
            "high watermark / done at": re.compile(rf"\bid={last}\b"),
            "delta version": str(DeltaTable(self.table).version()),
        }


def column_with_a_file_provider(tmp_path: Path) -> KindScene:
    provider = {"provider": {"type": "file", "uri": str(tmp_path / "watermarks")}}
    return ColumnKind(tmp_path, watermark=provider)


class TimeKind(KindScene):
    def __init__(self, tmp_path: Path) -> None:
        from test_time_pipeline import DAILY_ORDERS, TimeScene

        self.scene = TimeScene(tmp_path, "2020-01-05", to="P0D", partition="daily")
        self.name, self.pipelines = "orders", [self.scene.raw]
        self.tables, self.upstream = [self.scene.table], str(self.scene.orders.uri)
        self._ids = len(DAILY_ORDERS)
        self._days = 5  # days 1 to _days - 1 are due
        self._run = 0  # days 1 to _run ran
        self.scene.orders.put(*DAILY_ORDERS)

    def run(self) -> None:
        """The days due that never ran, in one range run (the last one again when none)."""
        last = self._days - 1
        self.scene.at(f"2020-01-{self._days:02}").run(
            f"2020-01-{min(self._run + 1, last):02}", f"2020-01-{last:02}"
        )
        self._run = last

    def add_rows(self) -> None:
        """Two more days due, each with its order once DAILY_ORDERS has none (a run replaces
        its days in ONE commit: new rows make a later OPTIMIZE commit too)."""
        from test_time_pipeline import order

        self._days += 2
        self.scene.orders.put(
            *(
                order(i, datetime(2019, 12, 31, 12, tzinfo=UTC) + timedelta(days=i))
                for i in range(self._ids, self._days)
            )
        )
        self._ids = max(self._ids, self._days)

    def assert_exact(self) -> None:
        # DAILY_ORDERS: id i at noon of 2019-12-31 + i days; the runs covered days before _days
        assert self.scene.ids() == list(range(1, min(self._days, self._ids)))

    def summary(self) -> dict[str, str | re.Pattern[str]]:
        return {
            "kind": "time (daily)",
            "partitions done": re.compile(rf"^{self._run}/\d+$"),
            "rows": str(len(range(1, min(self._days, self._ids)))),
            "delta version": str(DeltaTable(self.table).version()),
        }


class UnitKind(KindScene):
    def __init__(self, tmp_path: Path) -> None:
        from test_unit_pipeline import Scene, _key, answer

        self.scene = Scene(tmp_path, {"units": "id1,id2"})
        self.name, self.pipelines = "answers", [self.scene.raw]
        self.tables, self.upstream = [self.scene.table], str(self.scene.source.uri)
        self._answer = answer
        self._key = _key
        self._n = 1
        self.add_rows()

    def run(self) -> None:
        for unit in ("id1", "id2"):
            assert self.scene.run(unit).success

    def add_rows(self) -> None:
        self.scene.source.put(*(self._answer(u, self._n) for u in ("id1", "id2")))
        self._n += 1

    def assert_exact(self) -> None:
        from watermark_assets.kinds.unit.run import load_unit_watermark

        expected = sorted(self.scene.source.rows.values(), key=self._key)
        assert self.scene.target() == expected
        done = load_unit_watermark(self.table, "answers").units
        assert {u for u, d in done.items() if d is not None} == {"id1", "id2"}

    def summary(self) -> dict[str, str | re.Pattern[str]]:
        return {
            "kind": "unit (explicit)",
            "partitions done": "2/2",
            "rows": str(len(self.scene.source.rows)),
            "delta version": str(DeltaTable(self.table).version()),
        }


class TimeUnitKind(KindScene):
    def __init__(self, tmp_path: Path) -> None:
        from test_time_unit_pipeline import ANSWERS, Scene

        self.scene = Scene(tmp_path, {"units": "a,b"}, now="2024-01-03T06:00")
        self.name, self.pipelines = "answers", [self.scene.raw]
        self.tables, self.upstream = [self.scene.table], str(self.scene.source.uri)
        self._answers = ANSWERS
        self._days = 3  # days 1 to _days - 1 are due
        self._run = 0
        self.scene.source.put(*ANSWERS)

    def run(self) -> None:
        """Each unit's days due that never ran, in one range run each (the last day again)."""
        last = self._days - 1
        self.scene.now = datetime(2024, 1, self._days, 6, tzinfo=UTC)
        first = min(self._run + 1, last)
        for unit in ("a", "b"):
            self.scene.run(f"2024-01-{first:02}|{unit}", f"2024-01-{last:02}|{unit}")
        self._run = last

    def add_rows(self) -> None:
        self._days += 2

    def _expected(self) -> list[tuple[str, int]]:
        due = datetime(2024, 1, self._days, tzinfo=UTC)
        return sorted(
            (r["survey_id"], r["answer"]) for r in self._answers if r["answered_at"] < due
        )

    def assert_exact(self) -> None:
        assert self.scene.target() == self._expected()

    def summary(self) -> dict[str, str | re.Pattern[str]]:
        return {
            "kind": "time (daily) x unit",
            "partitions done": re.compile(rf"^{2 * self._run}/\d+ cells$"),
            "rows": str(len(self._expected())),
            "delta version": str(DeltaTable(self.table).version()),
        }


class FileKind(KindScene):
    """A file-path pipeline (the seed's checkpoint intervals, 100 files and 60 s: they pace an
    idle state's rewrites, never whether a commit's progress is recorded). Its clock moves an
    hour past the sweep's interval with each batch of new files, so ticks sweep the landing
    folder for files below the watermarks: a false alarm is as wrong as a lost file."""

    def __init__(self, tmp_path: Path) -> None:
        from _landing import Landing, hour
        from _sensor_loop import SensorLoop
        from conftest import pipeline_yaml, project_config
        from dagster import DagsterInstance
        from test_pipeline_dagster import Clock

        from watermark_assets.defs import build_definitions

        raw = pipeline_yaml(tmp_path, checkpoint={"interval_files": 100, "interval_secs": 60})
        config = project_config(raw)
        self.pipeline = config.file_pipeline("events")
        self.name, self.pipelines = "events", [raw]
        self.tables = [self.pipeline.table.uri]
        self.clock = Clock()
        self.loop = SensorLoop(
            build_definitions(config, clock=self.clock), DagsterInstance.ephemeral()
        )
        self.landing = Landing(tmp_path / "landing")
        self._hour = hour
        self._next = 0
        self.add_rows()

    def run(self) -> None:
        """Ticks and their runs until the sensor requests nothing."""
        while requests := self.loop.tick().run_requests:
            self.loop.run_all(requests)

    def add_rows(self) -> None:
        """Two files, in two landing partitions of two days (two runs)."""
        for _ in range(2):
            day, at = divmod(self._next, 3)
            self.landing.add(self._hour(20 + day, 10 + at))
            self._next += 1
        self.clock.now += timedelta(minutes=61)

    def assert_exact(self) -> None:
        """Each row once; the next tick requests nothing and names no file below a watermark;
        the state's counts and per-partition watermarks are the landing folder's."""
        from _landing import checkpoint_json, delta_ids, name_of, prefix_of

        from watermark_assets.kinds.file_path.kind import summarize

        assert delta_ids(self.table) == sorted(self.landing.ids)
        tick = self.loop.tick()
        assert tick.run_requests == []
        assert "below their partition's watermark" not in (tick.skip_message or "")
        row = summarize(self.pipeline)
        expected = self.summary()
        assert (str(row.partitions), str(row.files), str(row.rows)) == (
            expected["partitions"],
            expected["files"],
            expected["rows"],
        )
        greatest: dict[str, str] = {}
        for path in self._files():
            relative = str(path.relative_to(self.landing.root))
            prefix = prefix_of(relative)
            greatest[prefix] = max(greatest.get(prefix, ""), name_of(relative))
        kept = checkpoint_json(self.pipeline)["partition_watermarks"]
        assert kept and kept == {p: greatest[p] for p in kept}

    def state_files(self) -> list[Path]:
        return [Path(self.pipeline.checkpoint_uri)]

    def _files(self) -> list[Path]:
        return sorted(p for p in Path(self.landing.root).rglob("*") if p.is_file())

    def summary(self) -> dict[str, str | re.Pattern[str]]:
        files = self._files()
        days = {p.relative_to(self.landing.root).parts[0] for p in files}
        return {
            "partitions": str(len(days)),
            "files": str(len(files)),
            "rows": str(len(self.landing.ids)),
            "delta version": str(DeltaTable(self.table).version()),
        }

    def explain(self) -> list[str]:
        count = len(self._files())
        return [f"{count} files in {self.landing.root}, {count} ingested, 0 not ingested"]


class EventTimeKind(KindScene):
    """An event-time aggregate (batch engine) over a Delta upstream, fed events in order, so
    that none is late and the output is exactly the windows the watermark closed."""

    def __init__(self, tmp_path: Path) -> None:
        from test_event_time_pipeline import pipelines
        from test_event_window import make_spec

        self.spec = make_spec(tmp_path)  # the tables of ``pipelines(tmp_path)``
        self.name, self.pipelines = "events_5min", pipelines(tmp_path)
        self.tables = [self.spec.output_uri, self.spec.late_uri, self.spec.state_uri]
        self.upstream = self.spec.upstreams["events"]
        self._fed: list[dict[str, Any]] = []
        self._runs = 0
        self.add_rows()

    @property
    def state_table(self) -> str:
        return self.spec.state_uri

    def run(self) -> None:
        from test_event_window import T0

        from watermark_assets.kinds.event_time.window import run_window_batch

        self._runs += 1
        now = T0 + timedelta(hours=self._runs)
        run_window_batch(self.spark, self.spec, now=now, run_id=f"r{self._runs}")

    def add_rows(self) -> None:
        """Two upstream commits of three events each, later than every event before."""
        from test_event_window import append, event

        for _ in range(2):
            n = len(self._fed)
            rows = [event(100 + n + i, 4 * (n + i), 1 + (n + i) % 3) for i in range(3)]
            append(Path(self.upstream), *rows)
            self._fed += rows

    def _closed_before(self) -> datetime:
        return max(e["event_time"] for e in self._fed) - timedelta(minutes=10)

    def _expected(self) -> list[Any]:
        from test_event_window import oracle

        return oracle(self._fed, set(), self._closed_before())

    def assert_exact(self) -> None:
        from test_event_time_maintenance import committed

        now = committed(self.spec)
        assert now["output"] == self._expected() and now["late"] == []

    def summary(self) -> dict[str, str | re.Pattern[str]]:
        from watermark_assets.core.text import time_text

        return {
            "kind": "event time (hourly, batch)",
            "rows": str(len(self._expected())),
            "high watermark / done at": time_text(self._closed_before()),
            "delta version": str(DeltaTable(self.table).version()),
        }


KINDS: dict[str, Callable[[Path], KindScene]] = {
    "column (delta_metadata)": ColumnKind,
    "column (file provider)": column_with_a_file_provider,
    "time (daily)": TimeKind,
    "time x unit": TimeUnitKind,
    "unit": UnitKind,
    "file path": FileKind,
    "event time": EventTimeKind,
}


@pytest.fixture(scope="class", params=list(KINDS))
def kind(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, spark: Any
) -> KindScene:
    scene = KINDS[request.param](tmp_path_factory.mktemp("kind"))
    scene.spark = spark
    return scene


def step(test: Callable[..., None]) -> Callable[..., None]:
    """A step of a kind's story: skipped once an earlier step failed on the same scene."""

    @functools.wraps(test)
    def run(self: Any, kind: KindScene, *args: Any, **kwargs: Any) -> None:
        if kind.failed is not None:
            pytest.skip(f"the step {kind.failed} failed on this scene")
        try:
            test(self, kind, *args, **kwargs)
        except pytest.skip.Exception:
            raise
        except BaseException:
            kind.failed = test.__name__
            raise

    return run


def each_table(kind: KindScene, *maintenance: Callable[[str], object]) -> None:
    for uri in kind.tables:
        if (Path(uri) / "_delta_log").is_dir():
            for job in maintenance:
                job(uri)


def z_order_by_first_column(uri: str) -> None:
    z_order(uri, [DeltaTable(uri).schema().fields[0].name])


def crash_after_the_commit(kind: KindScene) -> None:
    """A run whose process died after its data commit, before it wrote the state file: the
    state files are put back as they were before it."""
    saved = {path: path.read_bytes() for path in kind.state_files()}
    kept = sorted(str(p) for t in kind.tables for p in (Path(t) / "_watermarks").rglob("*"))
    assert saved, f"every run leaves a state file; the tables' _watermarks hold {kept}"
    kind.add_rows()
    kind.run()
    for path in kind.state_files():
        if path not in saved:
            path.unlink()
    for path, content in saved.items():
        path.write_bytes(content)


def write_config(kind: KindScene, tmp_path: Path) -> Path:
    from conftest import TEST_SPARK_CONF

    path = tmp_path / "pipelines.yaml"
    document = {
        "spark": {"master": "local[1]", "conf": TEST_SPARK_CONF},
        "pipelines": kind.pipelines,
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def fresh_process(config: Path, *commands: list[str]) -> list[str]:
    """The outputs of ``watermark-assets`` commands run in one new interpreter (nothing of
    this test process's state: only what the files and tables hold)."""
    script = (
        "import sys\n"
        "from watermark_assets.cli import main\n"
        f"for command in {[list(c) for c in commands]!r}:\n"
        f"    assert main(['--config', {str(config)!r}, *command]) == 0, command\n"
        "    print('\\x00', flush=True)\n"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout.split("\x00\n")[: len(commands)]


def table_rows(printed: str) -> dict[str, dict[str, str]]:
    """The rows of every table ``summary`` printed, by pipeline, cut at the column rules."""
    rows: dict[str, dict[str, str]] = {}
    lines = printed.splitlines()
    for number, rule in enumerate(lines):
        if not rule or set(rule) - {"-", " "}:
            continue
        spans = [m.span() for m in re.finditer(r"-+", rule)]
        headers = [lines[number - 1][a:b].strip() for a, b in spans[:-1]]
        headers.append(lines[number - 1][spans[-1][0] :].strip())
        for line in lines[number + 1 :]:
            if not line.strip():
                break
            cells = [line[a:b].strip() for a, b in spans[:-1]] + [line[spans[-1][0] :].strip()]
            rows[cells[0]] = dict(zip(headers, cells))
    return rows


@pytest.mark.spark
class TestMaintenanceOfEveryKind:
    @step
    def test_1_checkpoint_and_log_cleanup_between_runs(self, kind: KindScene) -> None:
        kind.run()
        assert kind.state_files(), "a run leaves its state file"
        each_table(kind, checkpoint_and_clean)  # a quiet month: every commit JSON but one gone
        kind.run()  # the source was quiet
        kind.add_rows()
        kind.run()
        kind.assert_exact()

    @step
    def test_2_delta_rs_cleaning_the_log_at_every_commit_in_the_middle_of_a_run(
        self, kind: KindScene
    ) -> None:
        each_table(kind, clean_while_writing)
        kind.add_rows()
        kind.run()  # more than one commit: the log is cleaned between them
        kind.add_rows()
        kind.run()
        assert len(commit_files(kind.table)) <= 2
        each_table(kind, stop_cleaning)
        kind.assert_exact()

    @step
    def test_3_optimize_z_order_and_vacuum_of_its_tables(self, kind: KindScene) -> None:
        each_table(kind, optimize, vacuum, checkpoint_and_clean)
        kind.add_rows()
        kind.run()
        each_table(kind, z_order_by_first_column, vacuum)
        kind.add_rows()
        kind.run()
        kind.assert_exact()

    @step
    def test_4_optimize_z_order_vacuum_and_log_cleanup_of_its_upstream(
        self, kind: KindScene
    ) -> None:
        """A reader of its upstream reads by value or by version, never by the file paths
        VACUUM deletes nor by the commits log cleanup deletes."""
        if kind.upstream is None:
            pytest.skip("its source is a landing folder, no Delta table")
        kind.add_rows()
        optimize(kind.upstream)
        vacuum(kind.upstream)
        checkpoint_and_clean(kind.upstream)
        kind.run()
        kind.add_rows()
        z_order_by_first_column(kind.upstream)
        vacuum(kind.upstream)
        kind.run()
        kind.assert_exact()

    @step
    def test_5_a_crash_between_the_data_commit_and_the_state_file_then_a_month(
        self, kind: KindScene, tmp_path: Path
    ) -> None:
        crash_after_the_commit(kind)
        kind.run()  # reads the commits after the old state file: nothing again, nothing lost
        each_table(kind, checkpoint_and_clean)
        kind.add_rows()
        kind.run()
        kind.assert_exact()

    @step
    def test_6_summary_and_explain_in_a_fresh_process_are_exact(
        self, kind: KindScene, tmp_path: Path
    ) -> None:
        each_table(kind, optimize, checkpoint_and_clean)  # the last maintenance after the runs
        summary, explained = fresh_process(
            write_config(kind, tmp_path), ["summary"], ["explain", kind.name]
        )
        row = table_rows(summary)[kind.name]
        for column, expected in kind.summary().items():
            if isinstance(expected, re.Pattern):
                assert expected.search(row[column]), (column, row)
            else:
                assert row[column] == expected, (column, row)
        for line in kind.explain():
            assert line in explained, explained

    @step
    def test_7_state_lost_with_the_log_names_repair_state_and_repair_state_recovers(
        self, kind: KindScene, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The worst case: a run's commits are not in the state file (restored from a backup
        older than them), and the log is cleaned before any run or tick reads them. The next
        run stops, naming the one command; that command rebuilds the state from what the table
        holds, and the runs go on exactly."""
        crash_after_the_commit(kind)
        each_table(kind, optimize, checkpoint_and_clean)  # the checkpoint is past the commits
        with pytest.raises(Exception, match="watermark-assets repair-state") as caught:
            kind.run()
        assert "cannot be read" in str(caught.value)

        assert main(["--config", str(write_config(kind, tmp_path)), "repair-state", kind.name]) == 0
        assert "rebuilt" in capsys.readouterr().out
        kind.run()
        kind.add_rows()
        kind.run()
        kind.assert_exact()


# --- replay (column) ---------------------------------------------------------------------


@pytest.mark.spark
def test_a_replay_with_save_watermark_runs_again_after_its_chunks_commits_were_cleaned(
    spark: Any, tmp_path: Path
) -> None:
    """Its chunks' commits are gone from the log, their txns are in the checkpoint: a re-run
    skips every chunk and the target holds each row of the range once."""
    from test_column_replay import IN_RANGE, ids, replay, replay_of, replay_scene

    scene = replay_scene(tmp_path, save_watermark=True)
    scene.run()
    replay(scene, spark)
    target = replay_of(scene).target_table
    assert target is not None
    optimize(target)
    checkpoint_and_clean(target)
    checkpoint_and_clean(scene.table)

    again = replay(scene, spark)

    assert again.skipped == [1, 2, 3, 4]
    assert ids(target) == IN_RANGE


@pytest.mark.spark
def test_a_replays_lost_saved_bound_is_recovered_from_its_chunks_txns_by_repair_state(
    spark: Any, tmp_path: Path
) -> None:
    """The replay's state snapshot misses its chunks (restored from before it) and the log was
    cleaned: the re-run stops naming repair-state, which recovers the bound from the chunks'
    txns; the re-run then skips every chunk."""
    from test_column_replay import IN_RANGE, ids, replay, replay_of, replay_scene

    scene = replay_scene(tmp_path, save_watermark=True)
    scene.run()
    target = replay_of(scene).target_table
    assert target is not None
    replay(scene, spark)
    state = Path(target) / "_watermarks" / "state"
    first = sorted(state.glob("*.json"))
    saved = {p: json.loads(p.read_text()) for p in first}
    for path, content in saved.items():  # back to "after chunk 1": the others never snapshotted
        content["table_version"], content["txn_sum"] = 0, 1
        if content["state"] is not None:
            content["state"]["delta_version"] = 0
        path.write_text(json.dumps(content))
    optimize(target)
    checkpoint_and_clean(target)
    with pytest.raises(StateHistoryLostError, match="repair-state orders"):
        replay(scene, spark)

    assert main(["--config", str(scene.config_path), "repair-state", "orders"]) == 0
    again = replay(scene, spark)

    assert again.skipped == [1, 2, 3, 4]
    assert ids(target) == IN_RANGE
