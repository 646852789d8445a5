"""A pipeline's state across what Delta does to a table over a year (issue 21).

First the state store itself (``state/snapshot.py``) on hand-made commits, without Spark; then one
maintenance suite that the column, time, time x unit and unit kinds each run through a scene of
their own: a quiet month with log cleanup, OPTIMIZE + Z-order + VACUUM, cleanup on every commit,
and a crash between the data commit and the snapshot.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
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
    vacuum,
    z_order,
)

from watermark_assets.cli import main
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.time import TimeWatermark
from watermark_assets.exceptions import StateHistoryLostError
from watermark_assets.state.snapshot import StateLog, WatermarkFold, snapshot_uri

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
    assert json.loads(Path(snapshot_uri(table.uri, table.key)).read_text())["table_version"] == 1


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
        Path(snapshot_uri(table.uri, table.key)).name
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
    assert Path(snapshot_uri(table.uri, table.key)).exists()
    assert table.days() == [0, 1, 2, 3]


# --- the maintenance suite of every kind, on real runs -------------------------------------


class KindScene:
    """One kind's pipeline over a source it can add rows to (a fixture builds each kind)."""

    table: str
    name: str
    raw: dict[str, Any]

    def run(self) -> None:
        """Run the pipeline over everything due (raises on a failed run)."""
        raise NotImplementedError

    def add_rows(self) -> None:
        """New source rows for the next run."""
        raise NotImplementedError

    def assert_exact(self) -> None:
        """The target holds every source row the runs covered, each once."""
        raise NotImplementedError

    def snapshots(self) -> list[Path]:
        return sorted((Path(self.table) / "_watermarks" / "state").glob("*.json"))


class ColumnKind(KindScene):
    def __init__(self, tmp_path: Path, **overrides: Any) -> None:
        from test_column_pipeline import Scene, order

        self.scene = Scene(tmp_path, **overrides)
        self.table, self.name, self.raw = self.scene.table, "orders", self.scene.raw
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


class TimeKind(KindScene):
    def __init__(self, tmp_path: Path) -> None:
        from test_time_pipeline import DAILY_ORDERS, TimeScene

        self.scene = TimeScene(tmp_path, "2020-01-05", to="P0D", partition="daily")
        self.table, self.name, self.raw = self.scene.table, "orders", self.scene.raw
        self._orders = DAILY_ORDERS
        self._days = 5
        self.scene.orders.put(*DAILY_ORDERS)

    def run(self) -> None:
        self.scene.at(f"2020-01-{self._days:02}").run("2020-01-01", f"2020-01-{self._days - 1:02}")

    def add_rows(self) -> None:
        self._days += 2

    def assert_exact(self) -> None:
        # DAILY_ORDERS: id i at noon of 2019-12-31 + i days; the run covered days before _days
        assert self.scene.ids() == list(range(1, self._days))


class UnitKind(KindScene):
    def __init__(self, tmp_path: Path) -> None:
        from test_unit_pipeline import Scene, _key, answer

        self.scene = Scene(tmp_path, {"units": "id1,id2"})
        self.table, self.name, self.raw = self.scene.table, "answers", self.scene.raw
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
        from watermark_assets.runs.unit import load_unit_watermark

        expected = sorted(self.scene.source.rows.values(), key=self._key)
        assert self.scene.target() == expected
        done = load_unit_watermark(self.table, "answers").units
        assert {u for u, d in done.items() if d is not None} == {"id1", "id2"}


class TimeUnitKind(KindScene):
    def __init__(self, tmp_path: Path) -> None:
        from test_time_unit_pipeline import ANSWERS, Scene

        self.scene = Scene(tmp_path, {"units": "a,b"}, now="2024-01-03T06:00")
        self.table, self.name, self.raw = self.scene.table, "answers", self.scene.raw
        self._answers = ANSWERS
        self._days = 3
        self.scene.source.put(*ANSWERS)

    def run(self) -> None:
        self.scene.now = datetime(2024, 1, self._days, 6, tzinfo=UTC)
        for unit in ("a", "b"):
            self.scene.run(f"2024-01-01|{unit}", f"2024-01-{self._days - 1:02}|{unit}")

    def add_rows(self) -> None:
        self._days += 1

    def assert_exact(self) -> None:
        due = datetime(2024, 1, self._days, tzinfo=UTC)
        expected = sorted(
            (r["survey_id"], r["answer"]) for r in self._answers if r["answered_at"] < due
        )
        assert self.scene.target() == expected


def column_with_a_file_provider(tmp_path: Path) -> KindScene:
    provider = {"provider": {"type": "file", "uri": str(tmp_path / "watermarks")}}
    return ColumnKind(tmp_path, watermark=provider)


KINDS: dict[str, Callable[[Path], KindScene]] = {
    "column (delta_metadata)": ColumnKind,
    "column (file provider)": column_with_a_file_provider,
    "time (daily)": TimeKind,
    "time x unit": TimeUnitKind,
    "unit": UnitKind,
}


@pytest.fixture(params=list(KINDS))
def kind(request: pytest.FixtureRequest, tmp_path: Path) -> KindScene:
    return KINDS[request.param](tmp_path)


@pytest.mark.spark
class TestMaintenanceOfEveryKind:
    def test_a_quiet_month_of_log_cleanup_then_runs_go_on_exactly(
        self, spark: Any, kind: KindScene
    ) -> None:
        kind.run()
        assert kind.snapshots(), "a run leaves its state snapshot"
        checkpoint_and_clean(kind.table)
        kind.run()  # the source was quiet
        kind.add_rows()
        kind.run()
        kind.assert_exact()

    def test_optimize_z_order_vacuum_and_cleanup_between_runs(
        self, spark: Any, kind: KindScene
    ) -> None:
        kind.run()
        optimize(kind.table)
        vacuum(kind.table)
        checkpoint_and_clean(kind.table)
        kind.add_rows()
        kind.run()
        z_order(kind.table, [DeltaTable(kind.table).schema().fields[0].name])
        vacuum(kind.table)
        kind.add_rows()
        kind.run()
        kind.assert_exact()

    def test_delta_rs_cleaning_the_log_on_every_commit_during_the_runs(
        self, spark: Any, kind: KindScene
    ) -> None:
        kind.run()
        clean_while_writing(kind.table)
        kind.add_rows()
        kind.run()
        kind.add_rows()
        kind.run()
        assert len(commit_files(kind.table)) <= 2
        kind.assert_exact()

    def test_a_crash_after_the_commit_before_the_snapshot_then_a_month(
        self, spark: Any, kind: KindScene, tmp_path: Path
    ) -> None:
        """The snapshot is put back as it was before a run (the process died after its commits,
        before it wrote the snapshot); the next tick's read catches it up; then a month passes."""
        kind.run()
        saved = tmp_path / "snapshots-before"
        shutil.copytree(Path(kind.table) / "_watermarks" / "state", saved)
        kind.add_rows()
        kind.run()
        shutil.rmtree(Path(kind.table) / "_watermarks" / "state")
        shutil.copytree(saved, Path(kind.table) / "_watermarks" / "state")
        kind.run()  # reads the commits after the old snapshot: nothing again, nothing lost
        checkpoint_and_clean(kind.table)
        kind.add_rows()
        kind.run()
        kind.assert_exact()


def write_config(kind: KindScene, tmp_path: Path) -> Path:
    path = tmp_path / "repair.yaml"
    path.write_text(yaml.safe_dump({"pipelines": [kind.raw]}), encoding="utf-8")
    return path


@pytest.mark.spark
def test_state_lost_with_the_log_names_repair_state_and_repair_state_recovers(
    spark: Any, kind: KindScene, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The worst case: a run's commits are not in the snapshot (it died before writing it), and
    the log is cleaned before any tick reads them. The next run stops, naming the one command;
    that command rebuilds the state from what the table holds, and the runs go on exactly."""
    kind.run()
    saved = tmp_path / "snapshots-before"
    state = Path(kind.table) / "_watermarks" / "state"
    shutil.copytree(state, saved)
    kind.add_rows()
    kind.run()
    shutil.rmtree(state)
    shutil.copytree(saved, state)
    optimize(kind.table)  # a maintenance commit after the run's: the checkpoint is past them
    checkpoint_and_clean(kind.table)
    with pytest.raises(Exception, match="watermark-assets repair-state") as caught:
        kind.run()
    assert "cannot be read" in str(caught.value)

    assert main(["--config", str(write_config(kind, tmp_path)), "repair-state", kind.name]) == 0
    assert "rebuilt at Delta version" in capsys.readouterr().out
    kind.run()
    kind.add_rows()
    kind.run()
    kind.assert_exact()


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


@pytest.mark.spark
def test_a_column_pipeline_reads_its_delta_source_exactly_across_the_sources_maintenance(
    spark: Any, tmp_path: Path
) -> None:
    """A column pipeline reads its Delta source by the watermark predicate over the source's
    current snapshot, never by old versions or file paths: OPTIMIZE, VACUUM and log cleanup of
    the source between runs change nothing it reads."""
    kind = ColumnKind(tmp_path)
    kind.run()
    source = str(kind.scene.orders.uri)
    kind.add_rows()
    optimize(source)
    vacuum(source)
    checkpoint_and_clean(source)
    kind.run()
    kind.add_rows()
    z_order(source, ["id"])
    vacuum(source)
    kind.run()
    kind.assert_exact()
