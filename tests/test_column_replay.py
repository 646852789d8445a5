"""Replay over chunks of a range, for column pipelines (seed 001, "Replay watermark behaviour").

The "orders" Delta source of ``test_column_pipeline``, replayed over ``[00:00, 08:00)`` of
2026-04-03 in 4 chunks of 2 hours, with rows sitting exactly on the chunk bounds. Replays run in
process (``runs.column_replay.run_replay`` with the test session); the crash test runs
``watermark-assets replay`` in a subprocess that ``runs.faults.crash_point`` SIGKILLs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from test_column_pipeline import NOW, REPO, TESTS, Scene, at, checks_passed, order

from watermark_assets.cli import main
from watermark_assets.config import ColumnPipelineConfig, ReplayConfig
from watermark_assets.core.column.watermark import ColumnWatermark
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.exceptions import ConfigError
from watermark_assets.providers.delta_metadata import DeltaMetadataProvider
from watermark_assets.runs.column_replay import (
    REPLAY_METADATA_KEY,
    ReplayResult,
    replay_app_id,
    replay_chunks,
    replay_dataflow_id,
    run_replay,
)
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
