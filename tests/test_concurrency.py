"""Exactly-once when runs of the same pipeline overlap in time.

A run in a subprocess plans and stages its batch, then waits at the ``before_commit`` pause point
(``watermark_assets.runs.faults.pause_point``) while the test commits something else; released, it
must commit exactly the files nobody committed meanwhile. Checkpoints written by racing processes
must never go backwards.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from _landing import FROZEN_NOW, Landing, delta_ids, hour, quarantine_rows
from _sensor_loop import SensorLoop, requested_files
from conftest import TEST_SPARK_CONF, pipeline_yaml, project_config
from dagster import DagsterInstance

from watermark_assets.config import FilePipelineConfig
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.defs import build_definitions
from watermark_assets.runs.faults import PAUSE_DIR_ENV_VAR, PAUSE_ENV_VAR
from watermark_assets.state.checkpoint import save_checkpoint
from watermark_assets.state.load import PipelineState, load_state

TESTS = Path(__file__).resolve().parent
PARTITION = "2024-01-28"

pytestmark = pytest.mark.slow


class Scene:
    """One ingest pipeline on tmp_path whose config file a subprocess can load."""

    def __init__(self, tmp_path: Path) -> None:
        raw = pipeline_yaml(tmp_path)
        self.tmp_path = tmp_path
        self.config_path = tmp_path / "pipelines.yaml"
        self.config_path.write_text(
            yaml.safe_dump(
                {"spark": {"master": "local[1]", "conf": TEST_SPARK_CONF}, "pipelines": [raw]}
            ),
            encoding="utf-8",
        )
        pipeline = project_config(raw).pipeline("events")
        assert isinstance(pipeline, FilePipelineConfig)
        self.pipeline = pipeline
        self.landing = Landing(tmp_path / "landing")
        self.loop = SensorLoop(
            build_definitions(project_config(raw), clock=lambda: FROZEN_NOW),
            DagsterInstance.ephemeral(),
        )

    def start_paused(self, name: str, partition: str, files: list[str]) -> subprocess.Popen[str]:
        """A run of ``partition`` in a subprocess that stops at ``before_commit``."""
        pause_dir = self.tmp_path / f"pause-{name}"
        pause_dir.mkdir()
        env = {
            **os.environ,
            "WATERMARK_ASSETS_CONFIG": str(self.config_path),
            "PYSPARK_PYTHON": sys.executable,
            PAUSE_ENV_VAR: "before_commit",
            PAUSE_DIR_ENV_VAR: str(pause_dir),
        }
        return subprocess.Popen(
            [sys.executable, str(TESTS / "_crash_run.py"), "events", partition, *files],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def wait_until_paused(self, name: str, process: subprocess.Popen[str]) -> None:
        reached = self.tmp_path / f"pause-{name}" / "before_commit.reached"
        deadline = time.monotonic() + 300
        while not reached.exists():
            if process.poll() is not None:
                _, err = process.communicate()
                raise AssertionError(f"run {name} ended before its commit: {err[-3000:]}")
            assert time.monotonic() < deadline, f"run {name} never reached its commit"
            time.sleep(0.1)

    def release(self, name: str) -> None:
        (self.tmp_path / f"pause-{name}" / "before_commit.go").touch()


def finished(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=300)
    return process.returncode, out, err


@pytest.fixture
def scene(spark: Any, tmp_path: Path) -> Scene:
    return Scene(tmp_path)


def test_a_manual_run_racing_a_sensor_run_commits_exactly_the_files_left(scene: Scene) -> None:
    """The sensor asks for files 1-4; files 5-8 land; a manual run of the partition plans 1-8
    and waits before its commit while the sensor's run commits 1-4. Released, the manual run
    must not skip 5-8 (the txn version it planned with is taken) nor commit 1-4 twice."""
    first = [scene.landing.add(hour(28, 10), minute=m) for m in range(4)]
    (request,) = scene.loop.tick().run_requests
    assert requested_files(request) == first
    later = [scene.landing.add(hour(28, 10), minute=10 + m) for m in range(4)]

    manual = scene.start_paused("manual", PARTITION, [])  # no list: every file above
    scene.wait_until_paused("manual", manual)
    assert scene.loop.run(request).success  # the sensor's run commits 1-4
    scene.release("manual")

    code, out, err = finished(manual)
    assert code == 0, err[-3000:]
    assert "retries=1" in out, "the manual run planned again once"
    assert "were committed by" in err
    assert delta_ids(scene.pipeline.table.uri) == sorted(scene.landing.ids)
    state = load_state(scene.pipeline, now=FROZEN_NOW)
    assert state.watermark.value == later[-1]


@pytest.mark.parametrize(
    ("second", "expected_commits"),
    [
        pytest.param(PARTITION, 1, id="the same partition and files"),
        pytest.param("2024-01-29", 2, id="another partition"),
    ],
)
def test_two_runs_creating_the_table_at_once_commit_each_file_once(
    scene: Scene, second: str, expected_commits: int
) -> None:
    """The first commit of a pipeline creates its table (and a malformed line creates the
    quarantine table): two runs that both find no table must still commit every row once."""
    scene.landing.add(hour(28, 10), malformed=["not json"])
    scene.landing.add(hour(29, 10), malformed=["also not json"])
    runs = {
        "a": scene.start_paused("a", PARTITION, []),
        "b": scene.start_paused("b", second, []),
    }
    for name, process in runs.items():
        scene.wait_until_paused(name, process)
    for name in runs:
        scene.release(name)
    for process in runs.values():
        code, _, err = finished(process)
        assert code == 0, err[-3000:]

    wanted = scene.landing.ids[:3] if second == PARTITION else scene.landing.ids
    assert delta_ids(scene.pipeline.table.uri) == sorted(wanted)
    raw = [r["raw_record"] for r in quarantine_rows(scene.pipeline.table.quarantine)]
    assert sorted(raw) == (["not json"] if second == PARTITION else ["also not json", "not json"])
    commits = [
        line
        for path in sorted(Path(scene.pipeline.table.uri, "_delta_log").glob("*.json"))
        for line in path.read_text().splitlines()
        if "commitInfo" in line
    ]
    assert len(commits) == expected_commits


def test_processes_creating_the_table_at_the_same_instant_commit_once(tmp_path: Path) -> None:
    """Both find no table and write version 0 at once. delta-rs would retry the loser as version 1
    of the winner's table (its rows twice) unless the create is never rebased. A race, so several
    rounds (before the fix about one round in four committed twice): the same two processes
    race once per round, a barrier starting both commits of a round at once."""
    from _racers import create_at_once

    spawn = multiprocessing.get_context("spawn")  # deltalake's runtime does not survive fork
    rounds = [str(tmp_path / f"round{round_number}") for round_number in range(8)]
    start, outcomes = spawn.Barrier(2), spawn.Queue()
    processes = [
        spawn.Process(target=create_at_once, args=(rounds, name, start, outcomes))
        for name in ("a", "b")
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=300)
    assert [p.exitcode for p in processes] == [0, 0]
    stale: dict[int, list[bool]] = {}
    for _ in range(2 * len(rounds)):
        round_number, outcome = outcomes.get(timeout=5)
        stale.setdefault(round_number, []).append(outcome)
    for round_number, uri in enumerate(rounds):
        assert sorted(stale[round_number]) == [False, True], f"round {round_number}"
        assert len(list(Path(uri, "_delta_log").glob("*.json"))) == 1, f"round {round_number}"


def test_racing_writers_never_replace_a_newer_checkpoint_with_an_older_one(
    tmp_path: Path,
) -> None:
    """Writer 1 read version 0 and decides slowly (4 s) to write 1; meanwhile writer 2 writes 2. The
    file must end at 2: the read, the check and the write are one step (what two
    `watermark-assets run-sensors` at once rely on for their checkpoints)."""
    target = tmp_path / "_watermarks" / "events_main_checkpoint.json"
    target.parent.mkdir()
    target.write_text("0")
    from _racers import replace_slowly

    context = multiprocessing.get_context("spawn")
    started = context.Event()
    slow = context.Process(target=replace_slowly, args=(str(target), 1, started, 4.0))
    slow.start()
    assert started.wait(60)
    unused = context.Event()  # kept referenced until the child has started
    fast = context.Process(target=replace_slowly, args=(str(target), 2, unused, 0))
    fast.start()
    for worker in (slow, fast):
        worker.join(60)
        assert worker.exitcode == 0
    assert target.read_text() == "2"


def test_a_checkpoint_is_never_replaced_by_an_older_state(tmp_path: Path) -> None:
    pipeline = project_config(pipeline_yaml(tmp_path)).pipeline("events")
    newer = PipelineState(FileWatermark.initial(), 5, None, 0)
    assert save_checkpoint(pipeline, newer, now=FROZEN_NOW, force=True)
    assert not save_checkpoint(
        pipeline, replace(newer, delta_version=4), now=FROZEN_NOW, force=True
    )
    assert save_checkpoint(pipeline, replace(newer, delta_version=6), now=FROZEN_NOW, force=True)
