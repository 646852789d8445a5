"""Event-time aggregates across Delta maintenance (issue 21 §3): real Spark, real Delta tables.

A pipeline lives for years: its upstream's log is checkpointed and cleaned (delta-rs does it
every 100 commits, a maintenance job at any time), the upstream is compacted (OPTIMIZE, files
added with ``dataChange: false``) and vacuumed (the files OPTIMIZE replaced are deleted), and the
same happens to the aggregate's own output, late and state tables. Time is simulated with the
helpers of ``tests/maintenance.py`` (backdated log files), never by sleeping.

Each case runs the same events through two aggregates, one whose tables saw the maintenance and
one whose tables did not (the reference), and compares what they committed: the windows emitted,
the late records, the windows still open with their partial aggregates, and the watermark.

The aggregates' first batches are the same in many cases: :class:`Scenes` runs them once per
module (one worker: tests/conftest.py XDIST_GROUPS) and each test maintains and runs on on its
own copy of the tables.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import maintenance
import pytest
from deltalake import DeltaTable
from test_event_window import BATCH_1, BATCH_2, T0, append, event, make_spec, oracle, to_ms

from watermark_assets.kinds.event_time.window import (
    WindowAggregateSpec,
    load_progress,
    run_window_batch,
)
from watermark_assets.vocabulary import millis_text

#: While the aggregate is paused, its upstream gets four commits of on-time events: 12:31 falls
#: in the window 12:30 the state already holds (event 12:33), the others in new windows.
PAUSED = [
    [event(40, 31, 8), event(41, 41, 1)],
    [event(42, 44, 2), event(43, 47, 3)],
    [event(44, 52, 1)],
    [event(45, 58, 4), event(46, 61, 5)],
]
#: After the maintenance, one more commit: the aggregate reads on by version again.
LATER = [event(50, 66, 6), event(51, 90, 7)]


def committed(spec: WindowAggregateSpec) -> dict[str, Any]:
    """What the aggregate's tables hold, read through their current snapshots (their logs may
    have been cleaned): emitted windows, late ids, open windows' partials, the watermark."""
    output = DeltaTable(spec.output_uri).to_pyarrow_table().to_pylist()
    state = DeltaTable(spec.state_uri).to_pyarrow_table().to_pylist()
    late = DeltaTable(spec.late_uri).to_pyarrow_table(columns=["id"])["id"].to_pylist()
    progress = load_progress(spec)
    return {
        "output": sorted((f"{r['window_start']:%H:%M}", r["events"], r["users"]) for r in output),
        "late": sorted(late),
        "state": sorted(tuple(sorted((k, str(v)) for k, v in r.items())) for r in state),
        "watermark": progress.watermark.watermark_ms,
        "batch": progress.batch,
        "open_windows": progress.open_windows,
    }


def run(spark: Any, spec: WindowAggregateSpec, hours: int) -> Any:
    return run_window_batch(spark, spec, now=T0 + timedelta(hours=hours), run_id=f"r{hours}")


class Scenes:
    """Folders (upstream and aggregate tables, as ``make_spec(folder)`` names them) brought to a
    state once per module by Spark batches, then copied whole for each test that starts there:
    a test maintains and runs on its own copy, never on the prepared folder. Delta tables hold
    relative paths and the aggregate's progress names its upstreams, not their folders, so a
    copy is the same aggregate in another folder (``copy2`` keeps the log files' times)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.built: set[str] = set()

    def copy(self, name: str, build: Callable[[Path], object], to: Path) -> WindowAggregateSpec:
        """Scene ``name`` (``build(folder)`` makes it, the first time) copied into ``to`` (which
        may exist, e.g. tmp_path); the spec of the copy."""
        source = self.root / name
        if name not in self.built:
            try:
                build(source)
            except BaseException:
                shutil.rmtree(source, ignore_errors=True)
                raise
            self.built.add(name)
        shutil.copytree(source, to, dirs_exist_ok=True)
        return make_spec(to)


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Scenes:
    return Scenes(tmp_path_factory.mktemp("scenes"))


def first_batch(spark: Any, root: Path) -> None:
    """Batch 1 over BATCH_1, appended in one commit."""
    append(root / "events", *BATCH_1)
    run(spark, make_spec(root), 1)


def two_batches(spark: Any, scenes: Scenes, root: Path) -> None:
    """:func:`first_batch`, then batch 2 over BATCH_2 (its 21, 12:03, is late)."""
    spec = scenes.copy("first_batch", lambda folder: first_batch(spark, folder), root)
    append(root / "events", *BATCH_2)
    run(spark, spec, 2)


def before_the_pause(spark: Any, root: Path) -> None:
    """Batch 1 over BATCH_1 in two upstream commits, batch 2 over BATCH_2."""
    spec = make_spec(root)
    upstream = root / "events"
    append(upstream, *BATCH_1[:5])
    append(upstream, *BATCH_1[5:])
    run(spark, spec, 1)
    append(upstream, *BATCH_2)  # 21 (12:03) is late: kept by batch 2, read by version
    run(spark, spec, 2)


def feed_and_run(
    spark: Any,
    scenes: Scenes,
    root: Path,
    maintain_upstream: Callable[[str], object] | None,
    paused: list[list[dict[str, Any]]] = PAUSED,
) -> tuple[WindowAggregateSpec, list[Any]]:
    """Two batches (:func:`before_the_pause`), a pause over the upstream commits ``paused``,
    the upstream's maintenance (None: none), then a batch over the pause and one more after a
    later commit; the results of those two batches."""
    spec = scenes.copy("before_the_pause", lambda folder: before_the_pause(spark, folder), root)
    upstream = root / "events"
    for rows in paused:
        append(upstream, *rows)
    if maintain_upstream is not None:
        maintain_upstream(str(upstream))
    results = [run(spark, spec, 3)]
    append(upstream, *LATER)
    results.append(run(spark, spec, 4))
    return spec, results


def reference_run(
    spark: Any, scenes: Scenes, root: Path, name: str, paused: list[list[dict[str, Any]]]
) -> WindowAggregateSpec:
    """:func:`feed_and_run` without maintenance (the same for every case of a test: run once
    per module as the scene ``name``), copied into ``root``."""
    return scenes.copy(name, lambda folder: feed_and_run(spark, scenes, folder, None, paused), root)


def optimize_and_vacuum(uri: str) -> None:
    maintenance.optimize(uri)
    maintenance.vacuum(uri)


def everything(uri: str) -> None:
    optimize_and_vacuum(uri)
    maintenance.checkpoint_and_clean(uri)


UPSTREAM_MAINTENANCE = {
    "the upstream's log checkpointed and cleaned while the aggregate was paused": (
        maintenance.checkpoint_and_clean
    ),
    "the upstream compacted (OPTIMIZE) and vacuumed between two batches": optimize_and_vacuum,
    "the upstream compacted, vacuumed, then its log checkpointed and cleaned": everything,
}


@pytest.mark.spark
@pytest.mark.parametrize("maintain", UPSTREAM_MAINTENANCE.values(), ids=list(UPSTREAM_MAINTENANCE))
def test_upstream_maintenance_leaves_every_window_aggregated_exactly_once(
    spark: Any, scenes: Scenes, tmp_path: Path, maintain: Callable[[str], object]
) -> None:
    reference = reference_run(spark, scenes, tmp_path / "reference", "reference", PAUSED)
    spec, (over_the_pause, after) = feed_and_run(spark, scenes, tmp_path / "maintained", maintain)

    assert committed(spec) == committed(reference)
    everything_fed = BATCH_1 + BATCH_2 + [e for rows in PAUSED for e in rows] + LATER
    assert committed(spec)["output"] == oracle(everything_fed, {21}, T0 + timedelta(minutes=80))
    assert over_the_pause.read_by == "event_time"
    assert over_the_pause.late_unidentified == 0
    assert "read by event time" in over_the_pause.reason
    assert "every row appended since is accounted for" in over_the_pause.reason
    assert after.read_by == "versions"  # back to reading by version


def no_event_time(id_: int, user: int) -> dict[str, Any]:
    return {**event(id_, 0, user), "event_time": None}


#: While the aggregate is paused, its upstream also gets late rows: 11:57 falls in the window
#: 11:55, which the watermark 12:30 closed and which had no row (none emitted for it), and one row
#: has no event time. Both are known exactly once found: nothing of those windows was emitted.
PAUSED_LATE = [
    [event(40, 31, 8), event(47, -3, 8)],
    [no_event_time(48, 9)],
    [event(42, 44, 2)],
]


def late_reasons(spec: WindowAggregateSpec) -> dict[int, str]:
    rows = DeltaTable(spec.late_uri).to_pyarrow_table(columns=["id", "_late_reason"]).to_pylist()
    return {r["id"]: r["_late_reason"] for r in rows}


@pytest.mark.spark
@pytest.mark.parametrize("maintain", UPSTREAM_MAINTENANCE.values(), ids=list(UPSTREAM_MAINTENANCE))
def test_late_rows_appended_while_the_upstream_versions_were_gone_go_to_the_late_table(
    spark: Any, scenes: Scenes, tmp_path: Path, maintain: Callable[[str], object]
) -> None:
    """Read by event time, the batch counts each closed window's upstream rows against its
    output row (``_rows``) and the late table: the rows appended since into closed windows (and
    without an event time) are found and kept as late records, as the batch reading by version
    keeps them, exactly once (a later batch finds the counts balanced)."""
    reference = reference_run(spark, scenes, tmp_path / "reference", "reference_late", PAUSED_LATE)
    maintained = tmp_path / "maintained"
    spec, (over_the_pause, after) = feed_and_run(spark, scenes, maintained, maintain, PAUSED_LATE)

    assert committed(spec) == committed(reference)
    assert committed(spec)["late"] == [21, 47, 48]  # each once, after the batch over the pause
    assert over_the_pause.read_by == "event_time" and over_the_pause.late_rows == 2
    assert (over_the_pause.late_recovered, over_the_pause.late_inferred) == (2, 0)
    assert over_the_pause.late_unidentified == 0
    assert "2 row(s) appended since into 2 window(s) already closed" in over_the_pause.reason
    reasons, expected = late_reasons(spec), late_reasons(reference)
    for id_ in (47, 48):  # the usual reason, then where the row was appended
        assert reasons[id_].startswith(expected[id_] + "; appended to ")
        assert "found by event time" in reasons[id_]
    assert after.read_by == "versions" and after.late_rows == 0
    output = DeltaTable(spec.output_uri).to_pyarrow_table(columns=["events", "_rows"])
    assert output["_rows"].to_pylist() == output["events"].to_pylist()  # count(*) per window


LOSING_THE_LOG = {
    "the upstream's log checkpointed and cleaned": maintenance.checkpoint_and_clean,
    "the upstream compacted, vacuumed, then its log checkpointed and cleaned": everything,
}


@pytest.mark.spark
@pytest.mark.parametrize("maintain", LOSING_THE_LOG.values(), ids=list(LOSING_THE_LOG))
def test_a_late_row_into_a_window_with_emitted_rows_is_kept_once_its_identity_inferred(
    spark: Any, scenes: Scenes, tmp_path: Path, maintain: Callable[[str], object]
) -> None:
    """12:02 is appended while the upstream's versions are gone, into the window 12:00, which
    emitted 3 rows and whose late row 21 is kept already. Counting finds one row more than the
    output and the late table account for; which one cannot be known (the output keeps only
    the aggregate): a row alike the kept 21 is never taken again, and of the others the most
    recently written one is kept, its reason saying so. After a log cleanup alone that is the
    appended file's row; after OPTIMIZE the rows share one file."""
    spec = scenes.copy("two_batches", lambda root: two_batches(spark, scenes, root), tmp_path)
    upstream = tmp_path / "events"
    append(upstream, event(60, 35, 1))
    append(upstream, event(61, 2, 9))  # 12:02: its window was closed at 12:11
    maintain(str(upstream))
    result = run(spark, spec, 3)

    assert result.read_by == "event_time" and result.late_unidentified == 0
    assert (result.late_recovered, result.late_inferred) == (1, 1)
    late = committed(spec)["late"]
    assert len(late) == 2 and 21 in late  # one more, and never 21 twice
    (found,) = set(late) - {21}
    if maintain is maintenance.checkpoint_and_clean:
        assert found == 61  # the newest file's row
    else:
        assert found in (1, 2, 3, 61)  # a row of the window 12:00 that is not 21
    reason = late_reasons(spec)[found]
    assert reason.startswith("window ending 2024-01-30T12:05:00.000Z was closed by the watermark")
    assert "1 of the window's 4 row(s) not kept earlier were appended then" in reason
    # versions 2.. were gone (OPTIMIZE and VACUUM commit versions of their own)
    assert f"appended to {str(upstream)!r} in versions 2.." in reason
    assert f"{str(upstream)!r} versions 2.." in result.reason
    fed = BATCH_1 + BATCH_2 + [event(60, 35, 1)]
    assert committed(spec)["output"] == oracle(fed, {21}, T0 + timedelta(minutes=30))
    append(upstream, *LATER)  # on by version: nothing found again
    assert run(spark, spec, 4).late_rows == 0 and committed(spec)["late"] == late


@pytest.mark.spark
def test_with_late_policy_update_a_late_row_of_the_lost_versions_reopens_its_window(
    spark: Any, tmp_path: Path
) -> None:
    """``late_policy: update``: the row found by counting reopens its window, which is
    recomputed from every upstream row and replaced; the output equals the oracle with nothing
    late, whichever row was appended (the recomputation needs no identity)."""
    spec = make_spec(tmp_path, late_policy="update")
    upstream = tmp_path / "events"
    append(upstream, *BATCH_1)
    run(spark, spec, 1)
    append(upstream, event(60, 30, 1))
    append(upstream, event(61, 2, 9), no_event_time(62, 4))
    maintenance.checkpoint_and_clean(str(upstream))
    result = run(spark, spec, 2)
    assert result.read_by == "event_time" and result.late_recovered == 2
    fed = [*BATCH_1, event(60, 30, 1), event(61, 2, 9)]
    assert committed(spec)["output"] == oracle(fed, set(), T0 + timedelta(minutes=20))
    assert committed(spec)["late"] == [62]  # only the row without an event time is set aside


@pytest.mark.spark
def test_with_two_inputs_one_lost_upstream_log_still_aggregates_every_window_once(
    spark: Any, tmp_path: Path
) -> None:
    """Two inputs, and only ``views``'s log is cleaned while the aggregate is paused: the batch
    reads both inputs by event time (the state is one for both) and matches a run without
    maintenance."""
    from watermark_assets.core.event_time import WatermarkTracker

    def two_inputs(root: Path, clean_views: bool) -> WindowAggregateSpec:
        spec = make_spec(
            root,
            upstreams={"clicks": str(root / "clicks"), "views": str(root / "views")},
            tracker=WatermarkTracker(delays_ms={"clicks": 600_000, "views": 600_000}),
        )
        append(root / "clicks", event(1, 0, 1), event(2, 30, 2))
        append(root / "views", event(3, 5, 3), event(4, 20, 4))
        run(spark, spec, 1)  # watermark: min(12:20, 12:10) = 12:10
        append(root / "clicks", event(5, 41, 1))
        append(root / "views", event(6, 35, 5))
        append(root / "views", event(7, 45, 6), event(8, 11, 7))  # 12:11: on time, window 12:10
        if clean_views:
            maintenance.checkpoint_and_clean(str(root / "views"))
        result = run(spark, spec, 2)
        assert result.read_by == ("event_time" if clean_views else "versions")
        assert result.late_unidentified == 0
        return spec

    reference = two_inputs(tmp_path / "reference", clean_views=False)
    spec = two_inputs(tmp_path / "maintained", clean_views=True)
    assert committed(spec) == committed(reference)
    assert committed(spec)["output"]  # windows were emitted and compared


@pytest.mark.spark
def test_a_state_from_before_the_progress_file_is_read_from_its_commit_once(
    spark: Any, scenes: Scenes, tmp_path: Path
) -> None:
    """An aggregate whose progress is only in its state commit's metadata (as before any
    progress file) goes on from there, and its next read writes the file."""
    spec = scenes.copy("first_batch", lambda root: first_batch(spark, root), tmp_path)
    Path(spec.progress_uri).unlink()
    assert load_progress(spec).batch == 1
    append(tmp_path / "events", *BATCH_2)
    assert run(spark, spec, 2).batch == 2
    assert Path(spec.progress_uri).is_file()
    expected = oracle(BATCH_1 + BATCH_2, {21}, T0 + timedelta(minutes=30))
    assert committed(spec)["output"] == expected and committed(spec)["batch"] == 2


@pytest.mark.spark
def test_a_lost_progress_names_its_recovery_and_the_rebuilt_aggregate_reads_a_cleaned_upstream(
    spark: Any, scenes: Scenes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A state table whose batch neither the state file nor the log records (a table from
    before the file, whose log was cleaned) stops with the one error and its command,
    ``repair-state``: it removes the aggregate's tables. Rebuilt, its first batch reads the
    upstream's current snapshot whole, although the upstream's log lost its first commits."""
    import yaml
    from conftest import TEST_SPARK_CONF
    from test_event_time_pipeline import pipelines

    from watermark_assets.cli import main
    from watermark_assets.exceptions import StateHistoryLostError

    spec = scenes.copy("first_batch", lambda root: first_batch(spark, root), tmp_path)
    upstream = tmp_path / "events"
    Path(spec.progress_uri).unlink()  # as before the state file
    z_order_by_time(spec.state_uri)
    maintenance.checkpoint_and_clean(spec.state_uri)
    with pytest.raises(StateHistoryLostError) as caught:
        load_progress(spec)
    assert "watermark-assets repair-state events_5min" in str(caught.value)
    assert "removes the aggregate's output, late and state tables" in str(caught.value)

    append(upstream, *BATCH_2[:2])
    append(upstream, *BATCH_2[2:])
    maintenance.checkpoint_and_clean(str(upstream))  # version 0 is gone from its log
    config = tmp_path / "pipelines.yaml"
    document = {"spark": {"master": "local[1]", "conf": TEST_SPARK_CONF}}
    config.write_text(yaml.safe_dump({**document, "pipelines": pipelines(tmp_path)}))
    assert main(["--config", str(config), "repair-state", "events_5min"]) == 0
    assert "rebuilt from its upstream" in capsys.readouterr().out
    rebuilt = run(spark, spec, 2)
    assert rebuilt.batch == 1 and rebuilt.rows_read == len(BATCH_1 + BATCH_2)
    expected = oracle(BATCH_1 + BATCH_2, set(), T0 + timedelta(minutes=30))  # one batch: none late
    assert committed(spec)["output"] == expected


def maintain_own_tables(spec: WindowAggregateSpec, *steps: Callable[[str], object]) -> None:
    for uri in (spec.output_uri, spec.late_uri, spec.state_uri):
        for step in steps:
            step(uri)


def z_order_by_time(uri: str) -> None:
    """Z-order by the table's time column (it rewrites even a table of one file)."""
    names = DeltaTable(uri).schema().to_arrow().names
    maintenance.z_order(uri, ["window_start" if "window_start" in names else "event_time"])


#: (compaction, VACUUM and log cleanup of its tables: the suite of every kind,
#: ``tests/test_state_maintenance.py``)
OWN_MAINTENANCE = {
    "its output, late and state tables z-ordered, then checkpointed and cleaned": (
        z_order_by_time,
        maintenance.checkpoint_and_clean,
    ),
}


@pytest.mark.spark
@pytest.mark.parametrize("steps", OWN_MAINTENANCE.values(), ids=list(OWN_MAINTENANCE))
def test_maintenance_of_the_aggregates_own_tables_breaks_neither_the_tick_nor_the_run(
    spark: Any, scenes: Scenes, tmp_path: Path, steps: tuple[Callable[[str], object], ...]
) -> None:
    from conftest import project_config
    from test_event_time_pipeline import pipelines

    from watermark_assets.kinds.event_time.defs import decide_closing, event_time_partitions
    from watermark_assets.kinds.event_time.engines import BatchEngine
    from watermark_assets.kinds.event_time.kind import summarize as summarize_event_time

    spec = scenes.copy("two_batches", lambda root: two_batches(spark, scenes, root), tmp_path)
    upstream = tmp_path / "events"
    before = committed(spec)
    maintain_own_tables(spec, *steps)
    assert committed(spec) == before  # the progress is read back after the maintenance

    config = project_config(*pipelines(tmp_path))  # the same tables as ``spec``
    pipeline = config.pipeline("events_5min")
    row = summarize_event_time(config, pipeline)  # type: ignore[arg-type]
    assert row.watermark == millis_text(before["watermark"])  # `watermark-assets summary`
    partitions = event_time_partitions(pipeline)  # type: ignore[arg-type]
    append(upstream, *LATER)  # newest 13:30: the watermark would reach 13:20
    tick = decide_closing(BatchEngine(spec), partitions, T0 + timedelta(hours=3))
    assert tick.keys == ("2024-01-30-12:00",)

    result = run(spark, spec, 3)
    assert result.batch == 3 and result.read_by == "versions"
    fed = BATCH_1 + BATCH_2 + LATER
    assert committed(spec)["output"] == oracle(fed, {21}, T0 + timedelta(minutes=80))
    assert committed(spec)["late"] == [21]
    assert load_progress(spec).batch == 3


@pytest.mark.spark
def test_a_batch_killed_after_its_output_commit_is_finished_once_that_commit_left_the_log(
    spark: Any, scenes: Scenes, tmp_path: Path
) -> None:
    """The plan of a batch in flight is written to the progress file before its output commit:
    a run killed after that commit is finished with the killed run's plan even when a
    maintenance job z-ordered the output and cleaned its log (the commit's metadata is gone)."""
    import os
    import subprocess
    import sys

    from test_event_window import CRASH_SCRIPT

    from watermark_assets.core.time.instant import to_millis
    from watermark_assets.runs.faults import CRASH_ENV_VAR

    spec = scenes.copy("first_batch", lambda root: first_batch(spark, root), tmp_path)
    append(tmp_path / "events", *BATCH_2)
    script = CRASH_SCRIPT.format(tests=str(Path(__file__).parent), root=str(tmp_path))
    env = {
        **os.environ,
        CRASH_ENV_VAR: "event_window_after_output",
        "PYSPARK_PYTHON": sys.executable,
    }
    killed = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    z_order_by_time(spec.output_uri)
    maintenance.checkpoint_and_clean(spec.output_uri)

    resumed = run(spark, spec, 5)
    assert resumed.batch == 2 and resumed.resumed
    assert committed(spec)["output"] == oracle(BATCH_1 + BATCH_2, {21}, T0 + timedelta(minutes=30))
    assert committed(spec)["late"] == [21]
    # the killed run's plan (planned at 14:00), not a new one
    mark = load_progress(spec).watermark.mark("events")
    assert mark.last_data_ms == to_millis(T0 + timedelta(hours=2))


@pytest.mark.spark
def test_the_streaming_engine_reads_its_watermark_back_after_its_output_table_is_maintained(
    spark: Any, tmp_path: Path
) -> None:
    """``engine: streaming``: the committed watermark comes from the output's txn version and
    Spark's offsets file of that micro-batch, not from the output's commit metadata."""
    from test_event_stream import RUNS, land, make_stream_spec, windows

    from watermark_assets.kinds.event_time.stream import committed_watermark_ms, run_window_stream

    spec = make_stream_spec(tmp_path)
    land(tmp_path / "landing", 0, RUNS[0])
    first = run_window_stream(spark, spec, now=T0, run_id="s0")
    assert first.watermark_ms is not None
    z_order_by_time(spec.output_uri)
    maintenance.checkpoint_and_clean(spec.output_uri)
    assert committed_watermark_ms(spec) == first.watermark_ms

    land(tmp_path / "landing", 1, RUNS[1])
    second = run_window_stream(spark, spec, now=T0 + timedelta(hours=1), run_id="s1")
    assert second.watermark_ms == committed_watermark_ms(spec)
    assert [w for w, *_ in windows(spec.output_uri)] == ["12:00", "12:05", "12:10"]


@pytest.mark.spark
def test_a_failed_range_run_gets_a_new_run_key_and_the_sensor_requests_it_again(
    spark: Any, tmp_path: Path
) -> None:
    """Dagster never forgets a run key: the sensor counts the failed runs of a range by its own
    tag and requests the range again under ``...|a1``; that run succeeds."""
    from conftest import project_config
    from dagster import DagsterInstance, build_sensor_context
    from test_event_time_pipeline import Clock, pipelines

    from watermark_assets.defs import build_definitions

    defs = build_definitions(
        project_config(*pipelines(tmp_path)), clock=Clock(T0 + timedelta(hours=3))
    )
    instance = DagsterInstance.ephemeral()
    sensor = defs.resolve_sensor_def("events_5min_sensor")
    job = defs.resolve_job_def("events_5min_job")

    def tick() -> Any:
        return sensor.evaluate_tick(build_sensor_context(instance=instance, definitions=defs))

    upstream = tmp_path / "events"
    append(upstream, event(1, 0, 1), event(2, 40, 3), event(3, 75, 1))  # newest 13:15
    (first,) = tick().run_requests
    assert first.run_key == "events_5min|2024-01-30-12:00..2024-01-30-12:00|a0"

    commits = sorted((upstream / "_delta_log").glob("*.json"))
    kept = [path.read_bytes() for path in commits]
    for path in commits:  # the upstream cannot be read for a moment: the run fails
        path.write_text("not a Delta commit", encoding="utf-8")
    failed = job.execute_in_process(instance=instance, tags=first.tags, raise_on_error=False)
    assert not failed.success
    for path, content in zip(commits, kept):
        path.write_bytes(content)

    (again,) = tick().run_requests
    assert again.run_key == "events_5min|2024-01-30-12:00..2024-01-30-12:00|a1"
    assert job.execute_in_process(instance=instance, tags=again.tags).success
    assert tick().skip_message.startswith("no partition closes")


@pytest.mark.spark
@pytest.mark.parametrize(
    "crash_at",
    ["event_window_after_late", "event_window_after_state"],
    ids=["killed after the late commit", "killed after the state commit, before the progress file"],
)
def test_a_batch_read_by_event_time_killed_after_its_late_commit_keeps_its_late_rows_once(
    spark: Any, scenes: Scenes, tmp_path: Path, crash_at: str
) -> None:
    """SIGKILL between the late records found by counting and the progress save: the next run
    finishes the batch (or finds it done) and the late table holds each row once; the rows it
    finds are counted against the late table as it was before the batch, so the re-run counts
    the same and its late commit is skipped by the txn."""
    import os
    import subprocess
    import sys

    from test_event_window import CRASH_SCRIPT

    from watermark_assets.runs.faults import CRASH_ENV_VAR

    spec = scenes.copy("first_batch", lambda root: first_batch(spark, root), tmp_path)
    upstream = tmp_path / "events"
    append(upstream, event(60, 30, 1))
    append(upstream, event(61, -3, 9), no_event_time(62, 4))  # 11:57 and no event time: late
    maintenance.checkpoint_and_clean(str(upstream))
    script = CRASH_SCRIPT.format(tests=str(Path(__file__).parent), root=str(tmp_path))
    env = {**os.environ, CRASH_ENV_VAR: crash_at, "PYSPARK_PYTHON": sys.executable}
    killed = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert committed(spec)["late"] == [61, 62]

    again = run(spark, spec, 5)
    if crash_at == "event_window_after_late":
        assert again.batch == 2 and again.resumed and again.late_recovered == 2
    else:  # the state commit holds the batch: the progress written before the output says it
        assert again.batch is None
    assert committed(spec)["late"] == [61, 62]  # once
    assert committed(spec)["batch"] == 2
    fed = [*BATCH_1, event(60, 30, 1)]
    assert committed(spec)["output"] == oracle(fed, set(), T0 + timedelta(minutes=20))
    append(upstream, *LATER)
    assert run(spark, spec, 6).late_rows == 0 and committed(spec)["late"] == [61, 62]


@pytest.mark.spark
def test_a_batch_whose_recorded_upstream_version_is_gone_fails_naming_repair_state_then_finishes(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end through Dagster. Batch 2 dies after its output commit; before any run
    finishes it, late and on-time rows are appended upstream and its log is cleaned, so the
    upstream version batch 2's plan read up to is gone. The sensor requests the range again
    under a new run key; that run fails naming what is missing and the one recovery command,
    ``watermark-assets repair-state events_5min``. The sensor asks again (``|a2``); after the
    command, that run finishes batch 2 from the upstream's current version: the windows batch
    2 emitted stay, the rows appended since are in the late table once, and the sensor has
    nothing left to close."""
    import yaml
    from conftest import project_config
    from dagster import DagsterInstance, build_sensor_context
    from test_event_time_pipeline import Clock, pipelines

    from watermark_assets.cli import main
    from watermark_assets.defs import build_definitions
    from watermark_assets.kinds.event_time import window as event_window

    defs = build_definitions(
        project_config(*pipelines(tmp_path)), clock=Clock(T0 + timedelta(hours=4))
    )
    instance = DagsterInstance.ephemeral()
    sensor = defs.resolve_sensor_def("events_5min_sensor")
    job = defs.resolve_job_def("events_5min_job")
    spec = make_spec(tmp_path)  # the same tables as the configuration's

    def tick() -> Any:
        return sensor.evaluate_tick(build_sensor_context(instance=instance, definitions=defs))

    def execute(request: Any) -> Any:
        return job.execute_in_process(instance=instance, tags=request.tags, raise_on_error=False)

    upstream = tmp_path / "events"
    first_batch = [event(1, 0, 1), event(2, 40, 3), event(3, 75, 1)]  # -> watermark 13:05
    append(upstream, *first_batch)
    assert execute(tick().run_requests[0]).success

    second_batch = [event(4, 100, 2), event(5, 135, 4)]  # 13:40, 14:15 -> watermark 14:05
    append(upstream, *second_batch)
    (request,) = tick().run_requests
    assert request.run_key == "events_5min|2024-01-30-13:00..2024-01-30-13:00|a0"

    def die_after_output(name: str) -> None:
        if name == "event_window_after_output":
            raise RuntimeError("the run died after its output commit")

    with monkeypatch.context() as patched:
        patched.setattr(event_window, "crash_point", die_after_output)
        assert not execute(request).success
    emitted = committed(spec)["output"]
    assert [w for w, *_ in emitted] == ["12:00", "12:40", "13:15", "13:40"]  # batch 2's output

    # 12:50 (closed before batch 2), 13:41 (window 13:40, emitted by batch 2), 14:20 (open)
    since = [event(6, 50, 7), event(7, 101, 8), event(8, 140, 1)]
    append(upstream, *since[:2])
    append(upstream, since[2])
    maintenance.checkpoint_and_clean(str(upstream))  # version 1, batch 2's plan's, is gone

    (request,) = tick().run_requests
    assert request.run_key.endswith("|a1")
    failed = execute(request)
    assert not failed.success
    errors = "\n".join(
        e.step_failure_data.error.to_string()
        for e in failed.all_events
        if e.event_type_value == "STEP_FAILURE"
    )
    assert "UpstreamHistoryLostError" in errors
    assert f"upstream table {str(upstream)!r} cannot be read at version 1" in errors
    assert "batch 2" in errors
    assert "Recover with `watermark-assets repair-state events_5min`" in errors
    assert committed(spec)["output"] == emitted and committed(spec)["batch"] == 1

    (request,) = tick().run_requests
    assert request.run_key.endswith("|a2")
    config = tmp_path / "pipelines.yaml"
    config.write_text(yaml.safe_dump({"pipelines": pipelines(tmp_path)}), encoding="utf-8")
    assert main(["--config", str(config), "repair-state", "events_5min"]) == 0
    assert "batch 2's plan moved from upstream versions {'events': 1} to {'events': 3}" in (
        capsys.readouterr().out
    )
    assert execute(request).success

    after = committed(spec)
    assert after["batch"] == 2 and after["output"] == emitted  # batch 2 finished, emitted once
    assert after["late"] == [6, 7]  # 13:41's identity inferred: the newest file's row
    assert after["watermark"] == to_ms(T0 + timedelta(hours=2, minutes=5))
    assert load_progress(spec).upstream_versions == {"events": 3}
    assert tick().skip_message.startswith("no partition closes")
    assert run(spark, spec, 5).batch is None  # nothing left: completed exactly once
