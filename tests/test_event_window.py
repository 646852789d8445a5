"""Event-time window aggregates, batch path (issue 9 §1-2): real Spark, real Delta tables.

An upstream "events" Delta table gets rows in several appends (as ingestion runs commit them);
each batch aggregates what was appended since the last one into 5-minute windows (events, distinct
users), emits the windows the watermark (max event time - 10 minutes) closed, keeps the open ones
in the state table, and sends late records to the late table, never dropping one. Expected
results are computed here in plain Python from the same events (the oracle).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from watermark_assets.core.event_time import TumblingWindows, WatermarkTracker
from watermark_assets.core.time.instant import to_millis
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.exceptions import UpstreamNotAppendOnlyError
from watermark_assets.kinds.event_time.window import (
    LATE_BATCH,
    LATE_REASON,
    LATE_WATERMARK,
    WindowAggregateSpec,
    load_progress,
    run_window_batch,
)
from watermark_assets.spark.window_agg import Aggregate

UTC = timezone.utc
T0 = datetime(2024, 1, 30, 12, 0, tzinfo=UTC)
MIN = 60_000
EVENTS_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("event_time", pa.timestamp("us", "UTC")),
        ("user_id", pa.int64()),
        ("event_date", pa.string()),
    ]
)


def event(id_: int, minute: float, user: int) -> dict[str, Any]:
    when = T0 + timedelta(minutes=minute)
    return {"id": id_, "event_time": when, "user_id": user, "event_date": f"{when:%Y-%m-%d}"}


def append(uri: Path, *rows: dict[str, Any]) -> None:
    """One upstream commit (an ingestion run), partitioned by day like the file pipelines'."""
    table = pa.Table.from_pylist(list(rows), schema=EVENTS_SCHEMA)
    write_deltalake(str(uri), table, mode="append", partition_by=["event_date"])


def make_spec(root: Path, **changes: Any) -> WindowAggregateSpec:
    settings: dict[str, Any] = {
        "pipeline": "events_5min",
        "upstreams": {"events": str(root / "events")},
        "event_column": "event_time",
        "tracker": WatermarkTracker(delays_ms={"events": 10 * MIN}),
        "windows": TumblingWindows(size_ms=5 * MIN),
        "aggregates": (
            Aggregate.parse("events", "count"),
            Aggregate.parse("users", "count_distinct(user_id)"),
        ),
        "output_uri": str(root / "agg" / "events_5min"),
        "late_uri": str(root / "agg" / "events_5min_late"),
        "state_uri": str(root / "agg" / "events_5min_state"),
    }
    return WindowAggregateSpec(**{**settings, **changes})


def output_rows(spec: WindowAggregateSpec) -> list[tuple[str, int, int]]:
    """The output table's rows as its commits added them, file by file: append only, so this is
    also the order a reader tailing the table sees (asserted to be window order)."""
    committer = DeltaCommitter(spec.output_uri)
    rows = []
    for record in committer.read_commits_after(None):
        for added in record.added:
            frame = pq.read_table(f"{spec.output_uri}/{added.path}").to_pylist()
            rows += [(f"{r['window_start']:%H:%M}", r["events"], r["users"]) for r in frame]
    assert rows == sorted(rows), "emitted windows are ordered across batches"
    return rows


def late_ids(spec: WindowAggregateSpec) -> list[int]:
    return sorted(DeltaTable(spec.late_uri).to_pyarrow_table(columns=["id"])["id"].to_pylist())


def oracle(events: list[dict[str, Any]], late: set[int], closed_before: datetime) -> list[Any]:
    """Windows of 5 minutes ending at or before ``closed_before``, over the events not late."""
    groups: dict[datetime, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e["id"] in late:
            continue
        minute = e["event_time"].minute // 5 * 5
        groups[e["event_time"].replace(minute=minute, second=0, microsecond=0)].append(e)
    return [
        (f"{start:%H:%M}", len(rows), len({r["user_id"] for r in rows}))
        for start, rows in sorted(groups.items())
        if start + timedelta(minutes=5) <= closed_before
    ]


#: Batch 1: 12:00 .. 12:21 -> watermark 12:11, windows 12:00 and 12:05 closed.
BATCH_1 = [
    event(i, m, u)
    for i, (m, u) in enumerate(
        [(0, 1), (1, 2), (3, 1), (6, 3), (9, 3), (11, 1), (14, 2), (16, 4), (21, 5)], start=1
    )
]
#: Batch 2: out of order 12:12 (on time: its window ends 12:15 > 12:11), late 12:03 (its window
#: ended 12:05 <= 12:11), and newer events up to 12:40 -> watermark 12:30.
BATCH_2 = [event(20, 12, 6), event(21, 3, 7), event(22, 27, 1), event(23, 33, 2), event(24, 40, 3)]


@pytest.mark.spark
def test_windows_are_emitted_once_the_watermark_passes_and_late_records_are_kept(
    spark: Any, tmp_path: Path
) -> None:
    spec = make_spec(tmp_path)
    append(tmp_path / "events", *BATCH_1[:5])
    append(tmp_path / "events", *BATCH_1[5:])  # two upstream commits, one batch

    first = run_window_batch(spark, spec, now=T0 + timedelta(hours=1), run_id="run-1")
    assert first.batch == 1 and first.rows_read == 9 and first.late_rows == 0
    assert first.watermark_after.watermark_ms - first.watermark_before.watermark_ms > 0
    assert first.upstream_ranges == {"events": (0, 1)}
    assert output_rows(spec) == [("12:00", 3, 2), ("12:05", 2, 1)]
    assert output_rows(spec) == oracle(BATCH_1, set(), T0 + timedelta(minutes=11))
    assert first.windows_emitted == 2 and first.windows_open == 3  # 12:10, 12:15, 12:20
    assert "watermark 1970-01-01T00:00:00Z -> 2024-01-30T12:11:00Z" in first.reason

    append(tmp_path / "events", *BATCH_2)
    second = run_window_batch(spark, spec, now=T0 + timedelta(hours=2), run_id="run-2")
    assert second.batch == 2 and second.rows_read == 5 and second.late_rows == 1
    assert late_ids(spec) == [21]
    late = DeltaTable(spec.late_uri).to_pyarrow_table().to_pylist()[0]
    assert late[LATE_REASON] == (
        "window ending 2024-01-30T12:05:00.000Z was closed by the watermark "
        "2024-01-30T12:11:00.000Z"
    )
    assert late[LATE_WATERMARK] == T0 + timedelta(minutes=11) and late[LATE_BATCH] == 2
    everything = BATCH_1 + BATCH_2
    assert output_rows(spec) == oracle(everything, {21}, T0 + timedelta(minutes=30))
    assert [w for w, _, _ in output_rows(spec)][2:] == ["12:10", "12:15", "12:20", "12:25"]
    # the state holds only the windows still open: 12:30 (event 12:33) and 12:40
    state = DeltaTable(spec.state_uri).to_pyarrow_table(columns=["window_start"])
    assert sorted({f"{w:%H:%M}" for w in state["window_start"].to_pylist()}) == ["12:30", "12:40"]
    assert load_progress(spec).open_windows == second.windows_open == 2

    third = run_window_batch(spark, spec, now=T0 + timedelta(hours=3), run_id="run-3")
    assert third.batch is None and "no rows appended upstream" in third.reason
    assert DeltaTable(spec.output_uri).version() == 1  # nothing committed


@pytest.mark.spark
def test_each_upstream_partition_keeps_a_local_watermark_committed_with_the_batch(
    spark: Any, tmp_path: Path
) -> None:
    """Seed 002's local watermarks: one per upstream partition (here a day), each at its own
    max event - delay; the input's watermark is their maximum, as Spark's."""
    spec = make_spec(tmp_path)
    append(tmp_path / "events", event(1, 0, 1), event(2, 50, 1))  # 2024-01-30 12:00 .. 12:50
    append(tmp_path / "events", event(3, 24 * 60 + 5, 2))  # 2024-01-31 12:05
    run_window_batch(spark, spec, now=T0 + timedelta(days=2), run_id="run-1")
    mark = load_progress(spec).watermark.mark("events")
    assert mark.partitioning == ("event_date",)
    assert dict(mark.local) == {
        "event_date=2024-01-30": to_millis(T0 + timedelta(minutes=40)),
        "event_date=2024-01-31": to_millis(T0 + timedelta(days=1, minutes=-5)),
    }
    assert mark.watermark_ms == max(mark.local.values())

    append(tmp_path / "events", event(4, 30, 3))  # a late event of the 30th: nothing goes back
    run_window_batch(spark, spec, now=T0 + timedelta(days=3), run_id="run-2")
    assert load_progress(spec).watermark.mark("events").local == mark.local


@pytest.mark.spark
def test_an_allowed_lateness_holds_windows_open_and_keeps_their_rows_on_time(
    spark: Any, tmp_path: Path
) -> None:
    """With 10 minutes of allowed lateness a window closes at watermark - 10 minutes: 12:03
    arriving at watermark 12:11 is on time, and window 12:00 is emitted once, with it, when the
    watermark reaches 12:15 (never early, so never twice)."""
    spec = make_spec(tmp_path, lateness_ms=10 * MIN)
    append(tmp_path / "events", event(1, 6, 1), event(2, 21, 1))
    first = run_window_batch(spark, spec, now=T0, run_id="r1")  # watermark 12:11
    assert first.windows_emitted == 0
    append(tmp_path / "events", event(3, 3, 9))
    second = run_window_batch(spark, spec, now=T0, run_id="r2")
    assert second.late_rows == 0 and second.windows_emitted == 0
    append(tmp_path / "events", event(4, 30, 2))
    third = run_window_batch(spark, spec, now=T0, run_id="r3")  # watermark 12:20: closes < 12:10
    assert output_rows(spec) == [("12:00", 1, 1), ("12:05", 1, 1)]
    assert third.windows_emitted == 2


CRASH_SCRIPT = """
import json, sys
from datetime import datetime
from watermark_assets.spark.session import get_spark
sys.path.insert(0, {tests!r})
from test_event_window import make_spec
from pathlib import Path
spec = make_spec(Path({root!r}))
spark = get_spark("local[1]", {{"spark.ui.enabled": "false"}})
from watermark_assets.kinds.event_time.window import run_window_batch
result = run_window_batch(
    spark, spec, now=datetime.fromisoformat("2024-01-30T14:00:00+00:00"), run_id="victim")
print(json.dumps({{"batch": result.batch}}))
"""


@pytest.mark.spark
@pytest.mark.parametrize(
    "crash_at",
    ["event_window_staged_output", "event_window_after_output", "event_window_after_late"],
    ids=[
        "killed after Spark wrote the output, before its commit",
        "killed after the output commit",
        "killed after the late-records commit",
    ],
)
def test_a_batch_killed_between_its_commits_is_finished_by_the_next_run_exactly_once(
    spark: Any, tmp_path: Path, crash_at: str
) -> None:
    spec = make_spec(tmp_path)
    append(tmp_path / "events", *BATCH_1)
    run_window_batch(spark, spec, now=T0 + timedelta(hours=1), run_id="run-1")
    append(tmp_path / "events", *BATCH_2)

    script = CRASH_SCRIPT.format(tests=str(Path(__file__).parent), root=str(tmp_path))
    env = {**os.environ, "WATERMARK_ASSETS_CRASH_AT": crash_at, "PYSPARK_PYTHON": sys.executable}
    killed = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert load_progress(spec).batch == 1  # the state was not committed: batch 2 is unfinished

    resumed = run_window_batch(spark, spec, now=T0 + timedelta(hours=5), run_id="run-3")
    output_committed = crash_at != "event_window_staged_output"
    assert resumed.batch == 2 and resumed.resumed is output_committed
    assert output_rows(spec) == oracle(BATCH_1 + BATCH_2, {21}, T0 + timedelta(minutes=30))
    assert late_ids(spec) == [21]  # exactly once
    assert DeltaTable(spec.output_uri).version() == 1  # the output of batch 2 once
    progress = load_progress(spec)
    assert progress.batch == 2 and progress.open_windows == 2
    assert progress.watermark.watermark_ms == resumed.watermark_after.watermark_ms
    # once its output was committed, the killed run's plan was used (its processing time, not
    # the re-run's); before that, nothing of it counts and the re-run planned the batch anew
    plan = json.loads(
        DeltaTable(spec.output_uri).history(1)[0]["watermark_assets.event_window_plan/events_5min"]
    )
    planned_at = "14:00" if output_committed else "17:00"
    assert f'"last_data_at":"2024-01-30T{planned_at}:00.000Z"' in plan["watermark_after"]


@pytest.mark.spark
def test_a_compaction_upstream_adds_no_row_and_a_delete_upstream_stops_the_batch(
    spark: Any, tmp_path: Path
) -> None:
    """Files rewritten without a data change (OPTIMIZE) are not read again; a commit that
    deleted rows is refused, naming the version: emitted windows cannot be taken back."""
    spec = make_spec(tmp_path)
    upstream = tmp_path / "events"
    append(upstream, *BATCH_1[:4])
    append(upstream, *BATCH_1[4:])
    run_window_batch(spark, spec, now=T0, run_id="r1")
    DeltaTable(str(upstream)).optimize.compact()  # dataChange false: the same rows
    append(upstream, event(30, 45, 1))
    second = run_window_batch(spark, spec, now=T0, run_id="r2")
    assert second.rows_read == 1  # only the appended row, not the compacted files' rows

    DeltaTable(str(upstream)).delete("id = 30")
    append(upstream, event(31, 50, 1))
    with pytest.raises(UpstreamNotAppendOnlyError) as caught:
        run_window_batch(spark, spec, now=T0, run_id="r3")
    assert caught.value.version == DeltaTable(str(upstream)).version() - 1
    assert "append-only" in str(caught.value)


@pytest.mark.spark
@pytest.mark.parametrize(
    "policy, watermarks",
    [
        ("min", ["12:10", "12:10", "13:00"]),  # views holds the min back until it is idle
        ("max", ["12:20", "12:40", "13:00"]),  # the faster input decides
    ],
    ids=["min: the slower input decides, an idle one is left out", "max: the faster decides"],
)
def test_several_inputs_combine_their_watermarks_and_an_idle_input_stops_holding_back(
    spark: Any, tmp_path: Path, policy: str, watermarks: list[str]
) -> None:
    """Seed 002's merger over two upstream pipelines (clicks, views), each with its own
    watermark (max - 10 minutes) in the committed value; views stops sending after 12:20 and is
    idle after 30 minutes without rows (left out of the min). A views row of 12:15 arriving
    after that is late and kept."""
    from watermark_assets.core.event_time import WatermarkPolicy

    spec = make_spec(
        tmp_path,
        upstreams={"clicks": str(tmp_path / "clicks"), "views": str(tmp_path / "views")},
        tracker=WatermarkTracker(
            delays_ms={"clicks": 10 * MIN, "views": 10 * MIN},
            policy=WatermarkPolicy(policy),
            idle_timeout_ms=30 * MIN,
        ),
    )
    append(tmp_path / "clicks", event(1, 0, 1), event(2, 30, 2))
    append(tmp_path / "views", event(3, 5, 3), event(4, 20, 4))
    results = [run_window_batch(spark, spec, now=T0 + timedelta(minutes=60), run_id="r1")]
    append(tmp_path / "clicks", event(5, 50, 1))  # views: 10 minutes without rows
    results.append(run_window_batch(spark, spec, now=T0 + timedelta(minutes=70), run_id="r2"))
    append(tmp_path / "clicks", event(6, 70, 1))  # views: 40 minutes without rows: idle
    results.append(run_window_batch(spark, spec, now=T0 + timedelta(minutes=100), run_id="r3"))
    marks = [r.watermark_after for r in results]
    assert [f"{datetime.fromtimestamp(m.watermark_ms / 1000, UTC):%H:%M}" for m in marks] == (
        watermarks
    )
    assert marks[-1].mark("views").watermark_ms == to_ms(T0 + timedelta(minutes=10))

    append(tmp_path / "views", event(7, 15, 5))  # late: window 12:15 was closed at 13:00
    late = run_window_batch(spark, spec, now=T0 + timedelta(minutes=101), run_id="r4")
    assert late.late_rows == 1 and late.watermark_after.watermark_ms == marks[-1].watermark_ms
    kept = DeltaTable(spec.late_uri).to_pyarrow_table().to_pylist()
    assert [(r["id"], r["_input"]) for r in kept] == [(7, "views")]
    # every on-time row closed by 13:00 is in exactly one emitted window: ids 1..5 (13:10 is open)
    emitted = DeltaTable(spec.output_uri).to_pyarrow_table(columns=["events"])
    assert sum(emitted["events"].to_pylist()) == 5


def to_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


@pytest.mark.spark
def test_late_policy_update_reopens_the_window_and_replaces_its_row_in_one_commit(
    spark: Any, tmp_path: Path
) -> None:
    """``late_policy: update``: the late 12:03 (its window 12:00 was emitted in batch 1) is
    not kept aside; window 12:00 is recomputed from every upstream row and its output row
    replaced, in the same commit as the windows batch 2 closes. The output then equals the
    oracle with nothing late."""
    spec = make_spec(tmp_path, late_policy="update")
    append(tmp_path / "events", *BATCH_1)
    run_window_batch(spark, spec, now=T0 + timedelta(hours=1), run_id="r1")
    before = DeltaTable(spec.output_uri).version()
    append(tmp_path / "events", *BATCH_2)
    second = run_window_batch(spark, spec, now=T0 + timedelta(hours=2), run_id="r2")
    assert DeltaTable(spec.output_uri).version() == before + 1  # ONE commit
    table = DeltaTable(spec.output_uri).to_pyarrow_table().to_pylist()
    rows = sorted((f"{r['window_start']:%H:%M}", r["events"], r["users"]) for r in table)
    assert rows == oracle(BATCH_1 + BATCH_2, set(), T0 + timedelta(minutes=30))
    assert ("12:00", 4, 3) in rows  # 12:00, 12:01, 12:03 and the late 12:03; users 1, 2, 7
    assert second.late_rows == 1
    assert DeltaTable(spec.late_uri).to_pyarrow_table().num_rows == 0  # nothing set aside
    # run again with nothing new: nothing changes
    assert run_window_batch(spark, spec, now=T0 + timedelta(hours=3), run_id="r3").batch is None


@pytest.mark.spark
def test_tables_under_a_folder_named_with_a_space_and_a_star_are_read_literally(
    spark: Any, tmp_path: Path
) -> None:
    """Delta hands file URIs percent-encoded (``%20``) and Spark globs ``*``: the state and the
    upstream files are read by their plain, escaped paths. (A ``[`` is refused by delta-rs
    itself: "Invalid object store url".)"""
    root = tmp_path / "a dir with space * star"
    spec = make_spec(root)
    append(root / "events", *BATCH_1)
    run_window_batch(spark, spec, now=T0 + timedelta(hours=1), run_id="r1")
    append(root / "events", *BATCH_2)
    run_window_batch(spark, spec, now=T0 + timedelta(hours=2), run_id="r2")  # reads the state
    assert output_rows(spec) == oracle(BATCH_1 + BATCH_2, {21}, T0 + timedelta(minutes=30))
    assert late_ids(spec) == [21]


PAUSED_SCRIPT = """
import sys
from datetime import datetime
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_event_window import make_spec
from watermark_assets.kinds.event_time.window import run_window_batch
from watermark_assets.spark.session import get_spark
spark = get_spark("local[1]", {{"spark.ui.enabled": "false"}})
run_window_batch(spark, make_spec(Path({root!r})),
                 now=datetime.fromisoformat("2024-01-30T14:00:00+00:00"), run_id="slow")
"""


@pytest.mark.spark
def test_two_runs_of_the_same_batch_at_once_commit_it_once_and_the_later_one_stops(
    spark: Any, tmp_path: Path
) -> None:
    """Run A plans batch 2 and is held after Spark wrote its output; run B does batch 2 whole;
    then A's commit is stale: it stops with EventWindowConflictError, committing nothing."""
    from watermark_assets.runs.faults import PAUSE_DIR_ENV_VAR, PAUSE_ENV_VAR

    spec = make_spec(tmp_path)
    append(tmp_path / "events", *BATCH_1)
    run_window_batch(spark, spec, now=T0 + timedelta(hours=1), run_id="r1")
    append(tmp_path / "events", *BATCH_2)
    pause = tmp_path / "pause"
    pause.mkdir()
    env = {
        **os.environ,
        PAUSE_ENV_VAR: "event_window_staged_output",
        PAUSE_DIR_ENV_VAR: str(pause),
        "PYSPARK_PYTHON": sys.executable,
    }
    script = PAUSED_SCRIPT.format(tests=str(Path(__file__).parent), root=str(tmp_path))
    slow = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 240
        while not (pause / "event_window_staged_output.reached").exists():
            assert slow.poll() is None and time.monotonic() < deadline, "run A never got there"
            time.sleep(0.2)
        fast = run_window_batch(spark, spec, now=T0 + timedelta(hours=2), run_id="B")
        assert fast.batch == 2
        (pause / "event_window_staged_output.go").touch()
        _, stderr = slow.communicate(timeout=240)
    finally:
        if slow.poll() is None:
            slow.kill()
    assert slow.returncode == 1 and "EventWindowConflictError" in stderr, stderr[-2000:]
    assert "batch 2 was committed" in stderr
    assert output_rows(spec) == oracle(BATCH_1 + BATCH_2, {21}, T0 + timedelta(minutes=30))
    assert late_ids(spec) == [21]
    assert load_progress(spec).batch == 2
