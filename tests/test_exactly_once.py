"""Exactly-once: a run killed at any point, re-run any number of times, leaves the same table.

The crash tests materialize one partition in a subprocess (its own Spark) that
``watermark_assets.runs.faults.crash_point`` SIGKILLs after the data files are written or after the
Delta commit; the partition is then re-run here, on the shared Spark session. The Delta log is the
truth: a lost or deleted checkpoint is rebuilt from it, a corrupt one stops everything loudly.
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from _landing import (
    FROZEN_NOW,
    MALFORMED_LINES,
    Landing,
    checkpoint_json,
    delta_ids,
    hour,
    name_of,
    prefix_of,
    quarantine_rows,
    table_files,
    table_version,
)
from _sensor_loop import SensorLoop
from conftest import TEST_SPARK_CONF, pipeline_yaml, project_config
from dagster import DagsterInstance, ExecuteInProcessResult
from deltalake import DeltaTable, write_deltalake

from watermark_assets.config import FilePipelineConfig
from watermark_assets.defs import build_definitions
from watermark_assets.exceptions import CorruptCheckpointError
from watermark_assets.runs.faults import CRASH_ENV_VAR
from watermark_assets.state.load import load_state

TESTS = Path(__file__).resolve().parent
PARTITION = "2024-01-28"


class Scene:
    """One ingest pipeline on tmp_path, three landing files in PARTITION (one malformed line)."""

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
        self.pipeline = pipeline
        self.table = pipeline.table.uri
        self.quarantine = pipeline.table.quarantine
        self.landing = Landing(tmp_path / "landing")
        self.files = [
            self.landing.add(hour(28, 10)),
            self.landing.add(hour(28, 10), minute=20, malformed=MALFORMED_LINES[:1]),
            self.landing.add(hour(28, 11)),
        ]
        self.loop = SensorLoop(
            build_definitions(config, clock=lambda: FROZEN_NOW), DagsterInstance.ephemeral()
        )

    def run(self, files: list[str] | None = None) -> ExecuteInProcessResult:
        """Materialize PARTITION in this process (the shared Spark session)."""
        return self.loop.run_partition(PARTITION, files)

    def expected_partition_watermarks(self) -> dict[str, str]:
        last: dict[str, str] = {}
        for path in self.files:
            last[prefix_of(path)] = name_of(path)
        return last

    def assert_exactly_once(self) -> None:
        """Each input row once, the malformed line once, the watermark at the last file, and a
        checkpoint that reflects the table's current version."""
        ids = delta_ids(self.table)
        assert ids == sorted(self.landing.ids)
        assert len(set(ids)) == len(ids)
        quarantined = quarantine_rows(self.pipeline.table.quarantine)
        assert [(r["_source_file"], r["raw_record"]) for r in quarantined] == [
            (self.files[1], MALFORMED_LINES[0])
        ]
        state = load_state(self.pipeline, now=FROZEN_NOW)
        assert state.watermark.value == self.files[-1]
        assert dict(state.watermark.partition_watermarks) == self.expected_partition_watermarks()
        checkpoint = checkpoint_json(self.pipeline)
        assert checkpoint["delta_version"] == table_version(self.table)
        assert checkpoint["partition_watermarks"] == self.expected_partition_watermarks()


@pytest.fixture
def scene(spark: Any, tmp_path: Path) -> Scene:
    return Scene(tmp_path)


def run_in_subprocess(scene: Scene, crash_at: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "WATERMARK_ASSETS_CONFIG": str(scene.config_path),
        CRASH_ENV_VAR: crash_at,
        "PYSPARK_PYTHON": sys.executable,
    }
    return subprocess.run(
        [sys.executable, str(TESTS / "_crash_run.py"), "events", PARTITION, *scene.files],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "crash_at",
    [
        pytest.param("after_data_written", id="killed after Spark wrote the data files"),
        pytest.param("after_commit", id="killed after the Delta commit, before the checkpoint"),
    ],
)
def test_a_run_killed_mid_way_and_re_run_commits_each_row_exactly_once(
    scene: Scene, crash_at: str
) -> None:
    completed = run_in_subprocess(scene, crash_at)
    assert completed.returncode == -signal.SIGKILL, completed.stderr[-3000:]
    assert not Path(scene.pipeline.checkpoint_uri).exists(), "the crash came before the checkpoint"

    if crash_at == "after_data_written":
        assert not DeltaTable.is_deltatable(scene.table), "nothing was committed"
        staged = list((Path(scene.table) / "_staging").rglob("*.parquet"))
        assert staged, "the killed run had written its Parquet files"
    else:
        assert table_version(scene.table) == 0
        assert delta_ids(scene.table) == sorted(scene.landing.ids), "committed before the kill"
    version_after_crash = table_version(scene.table) if crash_at == "after_commit" else None

    assert scene.run(scene.files).success
    scene.assert_exactly_once()
    metadata = scene.loop.metadata(PARTITION)
    if crash_at == "after_commit":
        # The state is recovered from the Delta log: every file is already committed.
        assert table_version(scene.table) == version_after_crash
        assert (metadata["files"], metadata["files/already_committed"]) == (0, 3)
    else:
        assert table_version(scene.table) == 0
        assert (metadata["files"], metadata["rows/committed"]) == (3, 9)
        staged_uris = {Path(p).name for p in table_files(scene.table)}
        assert not staged_uris & {p.name for p in staged}, "orphans of the killed run not added"


@pytest.mark.parametrize(
    ("rerun", "already_committed"),
    [
        pytest.param("request", 3, id="executing the sensor's RunRequest again"),
        pytest.param("same", 3, id="with the same file list"),
        pytest.param(None, 0, id="without a file list, as a backfill runs it"),
    ],
)
def test_re_running_a_partition_twice_leaves_the_table_unchanged(
    scene: Scene, rerun: str | None, already_committed: int
) -> None:
    [request] = scene.loop.tick().run_requests  # the sensor asks for the three files
    assert scene.loop.run(request).success
    before = (
        table_version(scene.table),
        table_files(scene.table),
        delta_ids(scene.table),
        table_version(scene.pipeline.table.quarantine),
    )
    checkpoint = checkpoint_json(scene.pipeline)

    for _ in range(2):
        if rerun == "request":
            result = scene.loop.run(request)
        else:
            result = scene.run(scene.files if rerun == "same" else None)
        assert result.success
        metadata = scene.loop.metadata(PARTITION)
        assert (metadata["files"], metadata["files/already_committed"]) == (0, already_committed)
        assert str(metadata["delta/version"]).startswith("no new commit")

    after = (
        table_version(scene.table),
        table_files(scene.table),
        delta_ids(scene.table),
        table_version(scene.pipeline.table.quarantine),
    )
    assert after == before
    rerun_checkpoint = checkpoint_json(scene.pipeline)
    assert {k: rerun_checkpoint[k] for k in ("partition_watermarks", "delta_version")} == {
        k: checkpoint[k] for k in ("partition_watermarks", "delta_version")
    }
    scene.assert_exactly_once()


def test_a_deleted_checkpoint_is_rebuilt_from_the_delta_log_with_the_same_watermark(
    scene: Scene,
) -> None:
    assert scene.run(scene.files).success
    original = checkpoint_json(scene.pipeline)
    Path(scene.pipeline.checkpoint_uri).unlink()

    state = load_state(scene.pipeline, now=FROZEN_NOW)
    assert state.checkpoint is None
    assert state.watermark.to_dict() == {
        "watermark": original["watermark"],
        "partition_watermarks": original["partition_watermarks"],
    }
    assert state.delta_version == original["delta_version"]

    assert scene.run(scene.files).success  # nothing to ingest; the checkpoint comes back
    rebuilt = checkpoint_json(scene.pipeline)
    for key in ("watermark", "partition_watermarks", "delta_version"):
        assert rebuilt[key] == original[key], key
    scene.assert_exactly_once()


CORRUPT_CHECKPOINTS = [
    pytest.param(lambda text: "{ this is not JSON", id="not JSON at all"),
    pytest.param(lambda text: text[: len(text) // 2], id="a write cut in half"),
    pytest.param(
        lambda text: text.replace('"Active"', '"Running"'), id="an unknown watermark state"
    ),
    pytest.param(
        lambda text: text.replace('"partition_watermarks"', '"partitions"'),
        id="no partition watermarks",
    ),
]


@pytest.mark.parametrize("corrupt", CORRUPT_CHECKPOINTS)
def test_a_corrupt_checkpoint_stops_the_pipeline_and_is_never_silently_reset(
    scene: Scene, corrupt: Any
) -> None:
    assert scene.run(scene.files).success
    location = Path(scene.pipeline.checkpoint_uri)
    broken = corrupt(location.read_text(encoding="utf-8"))
    location.write_text(broken, encoding="utf-8")
    version = table_version(scene.table)
    new = scene.landing.add(hour(28, 12))  # new work that must wait for a readable checkpoint

    with pytest.raises(CorruptCheckpointError):
        load_state(scene.pipeline, now=FROZEN_NOW)
    with pytest.raises(CorruptCheckpointError):
        scene.run(None)  # a backfill of the partition
    with pytest.raises(CorruptCheckpointError):
        scene.run([*scene.files, new])  # a run with an explicit file list
    with pytest.raises(Exception, match="is corrupt"):
        scene.loop.tick()

    assert table_version(scene.table) == version
    assert location.read_text(encoding="utf-8") == broken, "the checkpoint was not reset"


# --- quarantine: exactly once together with the data --------------------------------------------


def test_malformed_records_coming_and_going_in_one_partition_never_stop_it(scene: Scene) -> None:
    """A file with a bad line, then a clean one, then another bad line, each in its own run of
    the same Dagster partition: every run succeeds and each bad line is quarantined once."""
    clean = scene.landing.add(hour(28, 12))
    bad = scene.landing.add(hour(28, 13), malformed=MALFORMED_LINES[1:])
    for files in (scene.files, [clean], [bad]):
        assert scene.run(files).success
    assert delta_ids(scene.table) == sorted(scene.landing.ids)
    assert [(r["_source_file"], r["raw_record"]) for r in quarantine_rows(scene.quarantine)] == [
        (scene.files[1], MALFORMED_LINES[0]),
        (bad, MALFORMED_LINES[1]),
    ]


@pytest.mark.slow
def test_a_run_killed_before_its_quarantine_shows_then_a_new_bad_file_quarantines_both_once(
    scene: Scene,
) -> None:
    """Killed after the data commit, before its quarantined records reach the quarantine table;
    the next run of the partition brings another malformed line: both lines end up in the
    quarantine table exactly once."""
    completed = run_in_subprocess(scene, "after_commit")
    assert completed.returncode == -signal.SIGKILL, completed.stderr[-3000:]
    assert not DeltaTable.is_deltatable(scene.quarantine), "the kill came before the quarantine"
    bad = scene.landing.add(hour(28, 12), malformed=MALFORMED_LINES[1:])

    assert scene.run(None).success
    assert scene.run(None).success  # and again: nothing more
    assert delta_ids(scene.table) == sorted(scene.landing.ids)
    assert [(r["_source_file"], r["raw_record"]) for r in quarantine_rows(scene.quarantine)] == [
        (scene.files[1], MALFORMED_LINES[0]),
        (bad, MALFORMED_LINES[1]),
    ]


@pytest.mark.slow
def test_a_sensor_tick_completes_the_quarantine_a_kill_left_out_then_writes_the_checkpoint(
    scene: Scene,
) -> None:
    """Killed after the data commit, before its quarantine commit and its checkpoint: the next
    sensor tick, with no run, completes the quarantine (the checkpoint it writes promises it),
    and a second tick commits nothing more to the quarantine table."""
    completed = run_in_subprocess(scene, "after_commit")
    assert completed.returncode == -signal.SIGKILL, completed.stderr[-3000:]
    assert not DeltaTable.is_deltatable(scene.quarantine), "the kill came before the quarantine"

    for _ in range(2):
        scene.loop.tick()
        assert DeltaTable(scene.quarantine).version() == 0, "completed once"
        scene.assert_exactly_once()


# --- unreadable files: quarantined whole, the rest of the batch commits ---------------------------


def _gzip_of(lines: int) -> bytes:
    return gzip.compress(b"".join(b'{"id": %d}\n' % n for n in range(lines)))


@pytest.mark.parametrize(
    ("content", "cause"),
    [
        pytest.param(b"this is not gzip\n", "not a gzip file", id="a .gz file that is not gzip"),
        pytest.param(
            _gzip_of(50_000)[:2_000], "Unexpected end of input stream", id="a truncated .gz file"
        ),
    ],
)
def test_an_unreadable_file_is_quarantined_as_a_file_and_the_rest_of_its_batch_commits(
    scene: Scene, content: bytes, cause: str
) -> None:
    broken = scene.landing.add_bytes(hour(28, 10), content, minute=30)
    after = scene.landing.add(hour(28, 10), minute=40)

    assert scene.run(None).success
    metadata = scene.loop.metadata(PARTITION)
    assert scene.run(None).success  # and again: nothing more

    assert delta_ids(scene.table) == sorted(scene.landing.ids)
    files = DeltaTable(scene.quarantine).to_pyarrow_table().to_pylist()
    [record] = [r for r in files if r["_source_file"] == broken]
    assert record["raw_record"] is None
    assert record["file_size"] == len(content)
    assert record["_dagster_partition"] == PARTITION
    assert cause in record["error"], record["error"]
    assert [r["file_size"] for r in files if r["_source_file"] != broken] == [None]
    assert metadata["files/quarantined"] == 1
    assert metadata["partition/files_quarantined"] == 1
    watermark = load_state(scene.pipeline, now=FROZEN_NOW).watermark
    assert watermark.partition_watermarks[prefix_of(broken)] == name_of(after)


def test_a_batch_of_only_unreadable_files_advances_the_watermark_past_them(scene: Scene) -> None:
    assert scene.run(scene.files).success
    first = scene.landing.add_bytes(hour(28, 12), b"not gzip")
    second = scene.landing.add_bytes(hour(28, 12), _gzip_of(50_000)[:999], minute=5)

    assert scene.run(None).success

    quarantined = {r["_source_file"] for r in quarantine_rows(scene.quarantine)}
    assert quarantined == {scene.files[1], first, second}
    assert load_state(scene.pipeline, now=FROZEN_NOW).watermark.value == second
    assert delta_ids(scene.table) == sorted(scene.landing.ids)


def test_a_quarantine_table_from_before_file_size_gains_the_column(scene: Scene) -> None:
    """Quarantine tables written before 0.2 have no ``file_size``: the first file quarantined
    adds the column (NULL in the old rows) instead of failing the commit."""
    assert scene.run(scene.files).success
    old = DeltaTable(scene.quarantine)
    assert "file_size" in old.schema().to_arrow().names  # today's tables have it ...
    write_deltalake(  # ... so rebuild it as 0.1 wrote it, with the same rows
        scene.quarantine,
        old.to_pyarrow_table().drop_columns(["file_size"]),
        mode="overwrite",
        schema_mode="overwrite",
    )
    broken = scene.landing.add_bytes(hour(28, 12), b"not gzip")

    assert scene.run(None).success

    rows = {
        r["_source_file"]: r for r in DeltaTable(scene.quarantine).to_pyarrow_table().to_pylist()
    }
    assert rows[broken]["file_size"] == len(b"not gzip")
    assert rows[scene.files[1]]["file_size"] is None
