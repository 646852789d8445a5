"""Replay over chunks of a range, for column pipelines (seed 001, "Replay watermark behaviour").

The "orders" Delta source of ``test_column_pipeline``, replayed over ``[00:00, 08:00)`` of
2026-04-03 in 4 chunks of 2 hours, with rows sitting exactly on the chunk bounds. Replays run in
process (``kinds.column.replay.run_replay`` with the test session); the crash test runs
``watermark-assets replay`` in a subprocess that ``runs.faults.crash_point`` SIGKILLs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from dagster import ExecuteInProcessResult
from deltalake import DeltaTable
from test_column_pipeline import NOW, REPO, TESTS, Scene, at, checks_passed, order

from watermark_assets.cli import main
from watermark_assets.config import ColumnPipelineConfig, ReplayConfig
from watermark_assets.core.column.watermark import ColumnWatermark
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.exceptions import ConfigError
from watermark_assets.kinds.column.replay import (
    REPLAY_METADATA_KEY,
    ChunkRun,
    ReplayResult,
    replay_app_id,
    replay_chunks,
    replay_dataflow_id,
    run_replay,
)
from watermark_assets.providers.delta_metadata import DeltaMetadataProvider
from watermark_assets.runs.faults import CRASH_ENV_VAR

pytestmark = pytest.mark.spark

#: [00:00, 08:00) in chunks of 2 hours: bounds at 00:00, 02:00, 04:00, 06:00, 08:00
RANGE = {"start": "2026-04-03T00:00:00Z", "end": "2026-04-03T08:00:00Z", "chunk": {"hours": 2}}
#: id -> updated_at; ids 1, 3, 5, 7 sit exactly on a chunk's lower bound, 9 on the range's end
ROWS = {
    1: at(0),
    2: at(1),
    3: at(2),
    4: at(3, 30),
    5: at(4),
    6: at(5, 59),
    7: at(6),
    8: at(7),
    9: at(8),  # the end: excluded
    10: at(23, day=2),  # before the start: excluded
}
IN_RANGE = [1, 2, 3, 4, 5, 6, 7, 8]
PER_CHUNK = [[1, 2], [3, 4], [5, 6], [7, 8]]


def replay_scene(tmp_path: Path, **replay: Any) -> Scene:
    target = {"target_table": str(tmp_path / "delta" / "orders_backfill")}
    scene = Scene(tmp_path, replay={**RANGE, **target, **replay})
    scene.orders.put(*(order(i, when) for i, when in ROWS.items()))
    return scene


def replay_of(scene: Scene) -> ReplayConfig:
    assert scene.pipeline.replay is not None
    return scene.pipeline.replay


def replay(scene: Scene, spark: Any, config: ReplayConfig | None = None) -> ReplayResult:
    return run_replay(
        scene.pipeline, config or replay_of(scene), spark, run_id="test", clock=lambda: NOW
    )


def ids(table: str) -> list[int]:
    return sorted(DeltaTable(table).to_pyarrow_table(columns=["id"]).column("id").to_pylist())


def production(scene: Scene) -> str | None:
    return DeltaMetadataProvider(scene.table).get_watermark(scene.pipeline.dataflow_id)


def replay_commits(table: str) -> list[dict[str, Any]]:
    """The replay commits of ``table`` in order: their replay record, metadata and added ids."""
    committer = DeltaCommitter(table)
    latest = committer.current_version()
    records = []
    for version in range(0 if latest is None else latest + 1):
        commit = committer.read_commit(version)
        if REPLAY_METADATA_KEY in commit.custom_metadata:
            earlier = set(ids_at(table, version - 1)) if version else set()
            records.append(
                {
                    "replay": json.loads(commit.custom_metadata[REPLAY_METADATA_KEY]),
                    "metadata": commit.custom_metadata,
                    "ids": sorted(set(ids_at(table, version)) - earlier),
                }
            )
    return records


def ids_at(table: str, version: int) -> list[int]:
    frame = DeltaTable(table, version=version).to_pyarrow_table(columns=["id"])
    return sorted(frame.column("id").to_pylist())


def saved_upper_bounds(scene: Scene, table: str) -> list[str | None]:
    """Per replay commit, the replay watermark it saved (its chunk's upper bound), or None."""
    key = f"watermark_assets.column_watermark/{replay_dataflow_id('orders', replay_of(scene))}"
    return [
        json.loads(c["metadata"][key])["watermark"] if key in c["metadata"] else None
        for c in replay_commits(table)
    ]


@pytest.mark.parametrize(
    ("save_watermark", "behaviour"),
    [
        pytest.param(
            False,
            "Production watermark is never touched — safe for backfill into new tables",
            id="False (default): production watermark is never touched",
        ),
        pytest.param(
            True,
            "Chunk upper bound is saved after each successful chunk — enables crash-resume",
            id="True: chunk upper bound is saved after each successful chunk",
        ),
    ],
)
def test_the_seeds_save_watermark_table(
    tmp_path: Path, spark: Any, save_watermark: bool, behaviour: str
) -> None:
    scene = replay_scene(tmp_path, save_watermark=save_watermark)
    scene.run()  # the production run: everything, watermark at the greatest row
    before = production(scene)
    assert before is not None

    result = replay(scene, spark)

    target = replay_of(scene).target_table
    assert target is not None
    assert ids(target) == IN_RANGE
    assert production(scene) == before, behaviour
    chunks = replay_chunks(scene.pipeline, replay_of(scene))
    if save_watermark:
        assert saved_upper_bounds(scene, target) == [c.upper.to_json() for c in chunks]
        rerun = replay(scene, spark)
        assert rerun.skipped == [1, 2, 3, 4], "every chunk completed: crash-resume skips them"
    else:
        assert saved_upper_bounds(scene, target) == [None] * 4
    assert result.skipped == []


def test_a_replay_killed_after_chunk_2_resumes_at_chunk_3_and_holds_each_row_once(
    tmp_path: Path, spark: Any
) -> None:
    scene = replay_scene(tmp_path, save_watermark=True)
    env = {
        **os.environ,
        CRASH_ENV_VAR: "after_chunk_commit:2",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)]),
    }
    command = ["-m", "watermark_assets.cli", "--config", str(scene.config_path), "replay", "orders"]
    killed = subprocess.run(
        [sys.executable, *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert "chunk 2 " in killed.stdout and "chunk 3 " not in killed.stdout, killed.stdout
    target = replay_of(scene).target_table
    assert target is not None
    assert ids(target) == [1, 2, 3, 4], "chunks 1-2 committed before the kill"

    lines: list[str] = []
    result = run_replay(
        scene.pipeline, replay_of(scene), spark, run_id="rerun", clock=lambda: NOW, log=lines.append
    )

    assert result.skipped == [1, 2]
    chunks = replay_chunks(scene.pipeline, replay_of(scene))
    skipped = [line.strip() for line in lines if "skipped" in line]
    assert [line.split(": skipped")[0] for line in skipped] == [
        f"chunk {n} {c.key}" for n, c in zip((1, 2), chunks)
    ], lines
    assert ids(target) == IN_RANGE, "every row of the range exactly once"
    assert [c["replay"]["chunk"][0] for c in replay_commits(target)] == [
        c.lower.to_json() for c in replay_chunks(scene.pipeline, replay_of(scene))
    ], "one commit per chunk, none twice"
    versions = DeltaCommitter(target).transaction_versions(
        [replay_app_id("orders", c) for c in replay_chunks(scene.pipeline, replay_of(scene))]
    )
    assert set(versions.values()) == {1}


def test_save_watermark_false_leaves_the_production_watermark_of_its_own_table_unchanged(
    tmp_path: Path, spark: Any
) -> None:
    scene = Scene(  # replays into the pipeline's own table: replace_by_watermark required
        tmp_path,
        replay={**RANGE, "save_watermark": False},
        destination={"replace_by_watermark": True},
    )
    scene.orders.put(*(order(i, when) for i, when in ROWS.items()))
    scene.run()
    before = production(scene)
    version = DeltaCommitter(scene.table).current_version()
    scene.orders.put(order(4, at(3, 30), amount=40.0))  # corrected history inside the range

    result = replay(scene, spark)

    assert production(scene) == before
    assert [c.result is not None for c in result.chunks] == [True] * 4
    assert all(
        "watermark_assets.column_watermark/orders" not in c["metadata"]
        for c in replay_commits(scene.table)
    ), "no replay commit carries the production watermark"
    assert DeltaCommitter(scene.table).current_version() == (version or 0) + 4
    rows = {r["id"]: r["amount"] for r in scene.target_rows()}
    assert sorted(rows) == sorted(ROWS), "each row once: the chunks replaced their windows"
    assert rows[4] == 40.0


def test_rows_exactly_on_chunk_bounds_are_read_once_by_the_chunk_they_open(
    tmp_path: Path, spark: Any
) -> None:
    scene = replay_scene(tmp_path)

    result = replay(scene, spark)

    assert [c["ids"] for c in replay_commits(result.target_table)] == PER_CHUNK
    assert ids(result.target_table) == IN_RANGE, "9 (at the end) and 10 (before) not read"
    predicates = [r.result.staged.plan.predicate_text for r in result.chunks if r.result]
    assert predicates[1] == (
        "`updated_at` >= TIMESTAMP '2026-04-03 02:00:00+00:00' AND "
        "`updated_at` < TIMESTAMP '2026-04-03 04:00:00+00:00'"
    )


def test_a_replay_with_save_watermark_advances_its_own_tables_watermark_from_at_or_below_it(
    tmp_path: Path, spark: Any
) -> None:
    scene = Scene(
        tmp_path,
        replay={**RANGE, "save_watermark": True},
        destination={"replace_by_watermark": True},
    )
    scene.orders.put(*(order(i, when) for i, when in ROWS.items() if when < at(1)))
    scene.run()  # production watermark: (00:00, 1), at or above the replay's start
    scene.orders.put(*(order(i, when) for i, when in ROWS.items()))

    result = replay(scene, spark)

    after = ColumnWatermark.from_json(production(scene) or "{}")
    assert after.as_dict() == {"updated_at": at(7), "id": 8}, "the greatest row replayed"
    assert result.production_after == after
    assert sorted(r["id"] for r in scene.target_rows()) == sorted(set(ROWS) - {9})
    scene.run()  # the normal run goes on from there: 9 (at the range's end) and nothing twice
    assert sorted(r["id"] for r in scene.target_rows()) == sorted(ROWS)


@pytest.mark.parametrize(
    ("replay", "message"),
    [
        pytest.param(
            {**RANGE, "chunk": {"hours": 2, "size": 3}}, "not both", id="a duration and a size"
        ),
        pytest.param({**RANGE, "chunk": {}}, "not neither", id="no chunk size"),
        pytest.param({**RANGE, "end": RANGE["start"]}, "empty or reversed", id="empty range"),
        pytest.param({**RANGE, "start": 5}, "differ in type", id="start and end of two types"),
        pytest.param({**RANGE}, "replace_by_watermark", id="own table, append"),
    ],
)
def test_a_bad_replay_section_is_refused_with_the_fix(
    tmp_path: Path, replay: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        Scene(tmp_path, replay=replay)


def test_the_replay_config_is_parsed_from_yaml_values(tmp_path: Path) -> None:
    scene = replay_scene(tmp_path)
    assert isinstance(scene.pipeline, ColumnPipelineConfig)
    assert replay_chunks(scene.pipeline, replay_of(scene))[0].key == (
        "2026-04-03T00:00:00+00:00..2026-04-03T02:00:00+00:00"
    )


def test_a_ui_backfill_of_a_partition_range_replays_exactly_those_windows(
    tmp_path: Path, spark: Any
) -> None:
    scene = Scene(
        tmp_path,
        partitions={"granularity": "hourly", "start": "2026-04-03T00:00", "end": "2026-04-03T08"},
        destination={"replace_by_watermark": True},
    )
    scene.orders.put(*(order(i, when) for i, when in ROWS.items()))
    job = scene.defs.resolve_job_def("orders_job")

    # what the UI launches for a backfill of 02:00..05:00 under BackfillPolicy.single_run()
    backfill = job.execute_in_process(
        instance=scene.instance,
        tags={
            "dagster/asset_partition_range_start": "2026-04-03-02:00",
            "dagster/asset_partition_range_end": "2026-04-03-05:00",
        },
    )

    assert scene.target_ids() == [3, 4, 5, 6], "[02:00, 06:00): 02:00 in, 06:00 out"
    assert [c["ids"] for c in replay_commits(scene.table)] == [[3], [4], [5], [6]]
    assert all(checks_passed(backfill).values()), checks_passed(backfill)
    assert production(scene) is None, "save_watermark false: no production watermark"

    scene.orders.put(order(5, at(4), amount=50.0), order(11, at(4, 30)))
    job.execute_in_process(instance=scene.instance, partition_key="2026-04-03-04:00")

    rows = {r["id"]: r["amount"] for r in scene.target_rows()}
    assert sorted(rows) == [3, 4, 5, 6, 11], "the 04:00 window replaced, nothing twice"
    assert rows[5] == 50.0


def test_the_cli_refuses_a_bad_range_and_a_pipeline_without_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scene = replay_scene(tmp_path)
    config = str(scene.config_path)
    assert main(["--config", config, "replay", "orders", "--start", "yesterday"]) == 2
    assert "'yesterday' is not an integer, a date" in capsys.readouterr().err
    assert main(["--config", config, "replay", "orders", "--end", "2026-04-02T00:00Z"]) == 2
    assert "empty or reversed" in capsys.readouterr().err
    (tmp_path / "plain").mkdir()
    plain = Scene(tmp_path / "plain")
    assert main(["--config", str(plain.config_path), "replay", "orders"]) == 2
    assert "has no replay section" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("start", "end", "chunk", "value"),
    [
        ("2026-04-03T02:00:00Z", "2026-04-03T04:00:00Z", {"hours": 1}, at(2)),
        ("2026-04-03", "2026-04-05", {"days": 1}, date(2026, 4, 3)),
        ("42", "50", {"size": 4}, 42),
    ],
)
def test_range_values_given_as_text_keep_their_type(
    start: str, end: str, chunk: dict[str, int], value: object
) -> None:
    config = ReplayConfig.model_validate({"start": start, "end": end, "chunk": chunk})
    assert config.start == value
    assert type(config.start) is type(value)


# Chunks that read no row: a replace removes what the target still holds of their window, a
# save_watermark replay records their completion, and nothing else commits (no empty commits).


def log_actions(table: str, version: int) -> Counter[str]:
    """How many actions of each kind (add, remove, txn, commitInfo...) commit ``version`` holds."""
    text = (Path(table) / "_delta_log" / f"{version:020d}.json").read_text(encoding="utf-8")
    return Counter(next(iter(json.loads(line))) for line in text.splitlines() if line.strip())


def run_logged(scene: Scene, spark: Any, lines: list[str]) -> ReplayResult:
    return run_replay(
        scene.pipeline, replay_of(scene), spark, run_id="test", clock=lambda: NOW, log=lines.append
    )


def assert_removed_in_one_commit(table: str, run: ChunkRun, removed: int, lines: list[str]) -> None:
    """``run`` read no row and removed ``removed`` rows of its window in ONE commit of remove
    actions (and the rewritten remainders of straddling files) with its txns and metadata."""
    assert run.result is not None
    version = run.result.outcome.version
    assert version is not None, run.line()
    assert (run.result.staged.rows_read, run.result.rows_removed) == (0, removed)
    expected = f"chunk {run.number} {run.chunk.key}: 0 rows read, {removed} rows removed from the "
    assert f"  {run.line()}" in lines and run.line().startswith(f"{expected}window as Delta ")
    actions = log_actions(table, version)
    assert actions["remove"] >= 1 and actions["commitInfo"] == 1
    assert actions["txn"] == len(DeltaCommitter(table).read_commit(version).txns) >= 1
    added = DeltaCommitter(table).read_commit(version).added
    assert sum(a.num_records or 0 for a in added) == run.result.rows_kept_by_rewrite, "no new row"


@dataclass(frozen=True)
class SourceChange:
    """What changes at the source after the production run; what the replay must do then."""

    deleted: tuple[int, ...]
    #: chunk number -> rows its replace removes; each of these chunks reads no row
    emptied: Mapping[int, int]
    #: the target after the replay (9 and 10, outside the range, are deleted at the source in
    #: every case: the replay never touches them)
    expected_ids: list[int]
    #: id -> its new updated_at (a correction that moves it out of its chunk)
    corrected: Mapping[int, datetime] = field(default_factory=dict)


OUTSIDE_THE_RANGE = (9, 10)

SOURCE_CHANGES = {
    "every row of chunk 2 deleted": SourceChange((3, 4), {2: 2}, [1, 2, 5, 6, 7, 8, 9, 10]),
    "every row of the first and the last chunk deleted": SourceChange(
        (1, 2, 7, 8), {1: 2, 4: 2}, [3, 4, 5, 6, 9, 10]
    ),
    "every row of the range deleted": SourceChange(
        tuple(IN_RANGE), {1: 2, 2: 2, 3: 2, 4: 2}, [9, 10]
    ),
    "chunk 3's rows corrected to after the range": SourceChange(
        (), {3: 2}, [1, 2, 3, 4, 7, 8, 9, 10], corrected={5: at(9), 6: at(10)}
    ),
}


@pytest.mark.parametrize("change", SOURCE_CHANGES.values(), ids=SOURCE_CHANGES.keys())
def test_rows_deleted_at_the_source_inside_a_replayed_window_leave_the_target(
    tmp_path: Path, spark: Any, change: SourceChange
) -> None:
    scene = Scene(tmp_path, replay=RANGE, destination={"replace_by_watermark": True})
    scene.orders.put(*(order(i, when) for i, when in ROWS.items()))
    scene.run()
    assert scene.target_ids() == sorted(ROWS)
    version = DeltaCommitter(scene.table).current_version()
    assert version is not None
    scene.orders.delete(*change.deleted, *OUTSIDE_THE_RANGE)
    scene.orders.put(*(order(i, when) for i, when in change.corrected.items()))

    lines: list[str] = []
    result = run_logged(scene, spark, lines)

    assert scene.target_ids() == change.expected_ids, "outside the windows: untouched"
    chunks = replay_chunks(scene.pipeline, replay_of(scene))
    assert [c["replay"]["chunk"][0] for c in replay_commits(scene.table)] == [
        c.lower.to_json() for c in chunks
    ], "one commit per chunk"
    assert DeltaCommitter(scene.table).current_version() == version + len(chunks)
    for number, removed in change.emptied.items():
        assert_removed_in_one_commit(scene.table, result.chunks[number - 1], removed, lines)


@dataclass(frozen=True)
class PartitionChange:
    """A change at the source after a backfill of 02:00..05:00 ([3, 4, 5, 6]), and the run of
    the partitions ``first``..``last`` that follows it."""

    first: str
    last: str
    windows: int
    expected_ids: list[int]
    deleted: tuple[int, ...] = ()
    corrected: Mapping[int, datetime] = field(default_factory=dict)


PARTITION_CHANGES = {
    "the partition's only row deleted": PartitionChange(
        "2026-04-03-04:00", "2026-04-03-04:00", 1, [3, 4, 6], deleted=(5,)
    ),
    "the partition's only row corrected into a later partition": PartitionChange(
        "2026-04-03-04:00", "2026-04-03-04:00", 1, [3, 4, 6], corrected={5: at(7, 30)}
    ),
    "a backfill of two partitions whose rows were deleted": PartitionChange(
        "2026-04-03-03:00", "2026-04-03-04:00", 2, [3, 6], deleted=(4, 5)
    ),
}


def partition_run(
    scene: Scene, first: str, last: str, *, raise_on_error: bool = True
) -> ExecuteInProcessResult:
    """The run the UI launches for a backfill of ``first``..``last`` (single_run policy)."""
    return scene.defs.resolve_job_def("orders_job").execute_in_process(
        instance=scene.instance,
        tags={
            "dagster/asset_partition_range_start": first,
            "dagster/asset_partition_range_end": last,
        },
        raise_on_error=raise_on_error,
    )


@pytest.mark.parametrize("change", PARTITION_CHANGES.values(), ids=PARTITION_CHANGES.keys())
def test_re_running_a_partition_whose_source_rows_were_deleted_removes_them(
    tmp_path: Path, change: PartitionChange
) -> None:
    scene = Scene(
        tmp_path,
        partitions={"granularity": "hourly", "start": "2026-04-03T00:00", "end": "2026-04-03T08"},
        destination={"replace_by_watermark": True},
    )
    scene.orders.put(*(order(i, when) for i, when in ROWS.items()))
    partition_run(scene, "2026-04-03-02:00", "2026-04-03-05:00")
    assert scene.target_ids() == [3, 4, 5, 6]
    version = DeltaCommitter(scene.table).current_version()
    assert version is not None
    scene.orders.delete(*change.deleted)
    scene.orders.put(*(order(i, when) for i, when in change.corrected.items()))

    run = partition_run(scene, change.first, change.last)

    assert scene.target_ids() == change.expected_ids
    windows = change.windows
    assert DeltaCommitter(scene.table).current_version() == version + windows, "one per window"
    materialization = run.asset_materializations_for_node("orders")[0]
    meta = {key: value.value for key, value in materialization.metadata.items()}
    assert meta["delta/versions"] == list(range(version + 1, version + windows + 1))
    assert meta["rows/read"] == 0
    assert str(meta["replay/chunks"]).count(": 0 rows read, 1 rows removed from the window") == (
        windows
    ), meta["replay/chunks"]
    assert all(checks_passed(run).values()), checks_passed(run)


EMPTY_WINDOW_CASES = {
    "its own table, chunk 2's rows deleted at the source": ({}, (3, 4), [1, 2, 5, 6]),
    "its own table, every row deleted at the source": ({}, (1, 2, 3, 4, 5, 6), []),
    "a backfill table, chunk 2's rows deleted at the source": (
        {"target_table": "orders_backfill"},
        (3, 4),
        [1, 2, 5, 6],
    ),
}


@pytest.mark.parametrize(
    ("target", "deleted", "expected_ids"),
    EMPTY_WINDOW_CASES.values(),
    ids=EMPTY_WINDOW_CASES.keys(),
)
def test_an_empty_window_the_target_holds_nothing_of_makes_no_commit(
    tmp_path: Path,
    spark: Any,
    target: dict[str, str],
    deleted: tuple[int, ...],
    expected_ids: list[int],
) -> None:
    """Chunk 4 [06:00, 08:00) is empty at the source and in the target: no commit, while the
    windows emptied at the source commit their removals (one commit per chunk 1-3)."""
    table = {k: str(tmp_path / "delta" / v) for k, v in target.items()}
    scene = Scene(tmp_path, replay={**RANGE, **table}, destination={"replace_by_watermark": True})
    scene.orders.put(*(order(i, ROWS[i]) for i in range(1, 7)))  # nothing in chunk 4
    if table:
        replay(scene, spark)  # the backfill table: chunks 1-3 (chunk 4: nothing to commit)
    else:
        scene.run()
    uri = table.get("target_table", scene.table)
    version = DeltaCommitter(uri).current_version()
    assert version is not None
    scene.orders.delete(*deleted)

    lines: list[str] = []
    result = run_logged(scene, spark, lines)

    assert ids(uri) == expected_ids
    chunks = replay_chunks(scene.pipeline, replay_of(scene))
    commits = replay_commits(uri)[-3:] if table else replay_commits(uri)
    assert [c["replay"]["chunk"][0] for c in commits] == [c.lower.to_json() for c in chunks[:3]]
    assert DeltaCommitter(uri).current_version() == version + 3, "chunks 1-3, not 4"
    last = result.chunks[3]
    assert last.result is not None and last.result.outcome.version is None
    assert last.line() == (
        f"chunk 4 {last.chunk.key}: 0 rows read (no row read and no row of the table where "
        f"{last.result.window}: nothing to commit)"
    )
    assert f"where {scene.pipeline.watermark.columns[0]} in [" in last.line(), "no Python repr"
    assert f"  {last.line()}" in lines


COMPLETION_CASES = {
    "replace into its own table, the last chunk empty at the source and in the target": (
        {"destination": {"replace_by_watermark": True}},
        [1, 2, 3, 4, 5, 6],
        (),
        0,
    ),
    "replace into its own table, the last chunk's rows deleted at the source": (
        {"destination": {"replace_by_watermark": True}},
        IN_RANGE,
        (7, 8),
        2,
    ),
    "append into a backfill table, the last chunk empty at the source": (
        {"replay": {"target_table": "orders_backfill"}},
        [1, 2, 3, 4, 5, 6],
        (),
        0,
    ),
}


@pytest.mark.parametrize(
    ("overrides", "source_ids", "deleted", "removed"),
    COMPLETION_CASES.values(),
    ids=COMPLETION_CASES.keys(),
)
def test_save_watermark_records_an_empty_chunks_completion_and_a_re_run_skips_it(
    tmp_path: Path,
    spark: Any,
    overrides: dict[str, dict[str, Any]],
    source_ids: list[int],
    deleted: tuple[int, ...],
    removed: int,
) -> None:
    replay_section = {**RANGE, "save_watermark": True, **overrides.get("replay", {})}
    if "target_table" in replay_section:
        replay_section["target_table"] = str(tmp_path / "delta" / replay_section["target_table"])
    destination = overrides.get("destination", {})
    scene = Scene(tmp_path, replay=replay_section, destination=destination)
    scene.orders.put(*(order(i, ROWS[i]) for i in source_ids))
    if destination:
        scene.run()  # the production run: the own table holds every row of the source
    production_before = production(scene)
    scene.orders.delete(*deleted)

    result = replay(scene, spark)

    uri = result.target_table
    chunks = replay_chunks(scene.pipeline, replay_of(scene))
    last = result.chunks[3]
    assert last.result is not None and last.result.staged.rows_read == 0
    version = last.result.outcome.version
    assert version is not None, last.line()
    assert (last.result.rows_removed, last.result.rows_committed) == (removed, 0)
    commit = DeltaCommitter(uri).read_commit(version)
    assert commit.txns[replay_app_id("orders", chunks[3])] == 1
    assert saved_upper_bounds(scene, uri) == [c.upper.to_json() for c in chunks]
    actions = log_actions(uri, version)
    assert (actions["remove"] > 0) == (removed > 0), actions
    assert sum(a.num_records or 0 for a in commit.added) == last.result.rows_kept_by_rewrite
    if not removed:
        assert actions["add"] == 0, "a commit of the chunk's txn and upper bound only"
    assert production(scene) == production_before, "an empty chunk moves no watermark"
    assert 7 not in ids(uri) and 8 not in ids(uri)

    rerun = replay(scene, spark)

    assert rerun.skipped == [1, 2, 3, 4], [c.line() for c in rerun.chunks]
    assert DeltaCommitter(uri).current_version() == version, "the re-run commits nothing"


def test_an_empty_chunk_with_no_target_table_yet_creates_it_to_record_completion(
    tmp_path: Path, spark: Any
) -> None:
    """No table: the first chunk's ONE commit creates it, with no file and the schema of the
    zero-row Parquet file Spark wrote for the read (the decision in
    ``runs.column.commit_column_batch``), and records the chunk; the re-run skips every chunk."""
    scene = replay_scene(tmp_path, save_watermark=True)
    scene.orders.delete(*IN_RANGE)  # 9 and 10 stay, outside the range: every chunk is empty

    result = replay(scene, spark)

    assert result.versions == list(range(len(PER_CHUNK)))
    assert "created the table" in result.chunks[0].result.outcome.reason  # type: ignore[union-attr]
    schema = DeltaTable(result.target_table).schema().to_arrow()
    assert schema.names == ["id", "updated_at", "amount"]
    assert ids(result.target_table) == []
    assert replay(scene, spark).skipped == [1, 2, 3, 4]
