"""The PostgreSQL-backed Dagster instance of ``docs/dagster-postgres.yaml`` with a real daemon.

One new database on 127.0.0.1:5432, a DAGSTER_HOME whose dagster.yaml is the documented file (the
connection from the DAGSTER_PG_* variables pointing at that database; the run queue polled every
second instead of every 2) and ``dagster-daemon run`` with the project's workspace.yaml, no
webserver. Two file pipelines: ``events`` (its sensor running by default) and ``manual`` (its
sensor stopped: only ``dagster job launch`` and ``dagster job backfill`` start its runs).

1. Before the daemon starts, ``dagster job launch`` and ``dagster job backfill`` each queue a run
   of ``manual`` 2024-01-28 (neither knows the concurrency tag: the run coordinator adds it).
   The daemon starts with the ``before_commit`` pause point: the first manual run holds there
   while the other stays queued and the events sensor's run (another tag) runs beside it; then
   everything goes on.
2. A second daemon with ``WATERMARK_ASSETS_CRASH_AT=after_commit``: the sensor's run of a new
   events file commits, its run worker is SIGKILLed, its code server fails the run and the
   daemon retries it; the retry finds the file committed and succeeds without a second commit.

Runtime: about 2 minutes on this project's 2-core machines (101 s measured, 80 s of it stage 1):
every committing run starts a Spark JVM (20-60 s there under load), each daemon ~10 s to load
the code location. Without the limit, stage 1 fails within seconds of both runs starting.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from _landing import Landing, delta_ids, hour, table_version
from _sensor_loop import SensorLoop
from conftest import PG_SERVER, TEST_SPARK_CONF, new_pg_database, pipeline_yaml, project_config
from dagster import AssetKey, DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.dagster_run import RunRecord

from watermark_assets.defs import build_definitions
from watermark_assets.defs.run_tags import (
    PIPELINE_PARTITION_TAG,
    PIPELINE_RANGE_TAG,
    missing_concurrency_tags,
    pipeline_partition_tags,
)

#: the daemon, the webserver and their runs: whole processes (Spark in each run). A stage's own
#: waits (wait_for: RUN_TIMEOUT each, twice for the retry) end before pytest-timeout's limit, so
#: that a stage that hangs fails with the runs' statuses, their last events and the daemon's log:
#: at worst ~1,000 s for the queue stage and ~630 s for the retry stage, both in one test's
#: set-up when the retry test runs alone.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCUMENTED_YAML = REPO_ROOT / "docs" / "dagster-postgres.yaml"
BIN = Path(sys.executable).parent
DAY = "2024-01-28"
TERMINAL = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}
IN_PROGRESS = {DagsterRunStatus.STARTING, DagsterRunStatus.STARTED}
#: How long the test watches the second run stay queued while the first one holds (seconds;
#: the queue is polled every second).
HOLD_SECONDS = 5.0
RUN_TIMEOUT = 300.0

T = TypeVar("T")


def wait_for(
    what: str, probe: Callable[[], T | None], *, timeout: float, details: Callable[[], str]
) -> T:
    """Call ``probe`` every half second until it returns something truthy; fail after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}: {details()}")
        time.sleep(0.5)


# ------------------------------------------------------------------------- the world under test


@dataclass
class PostgresWorld:
    """The database, DAGSTER_HOME, project config, landing folders and the subprocess env."""

    root: Path
    database: str
    env: dict[str, str]
    events: Landing
    manual: Landing

    @property
    def home(self) -> Path:
        return self.root / "dagster_home"

    @property
    def pause_dir(self) -> Path:
        return self.root / "pause"

    def table(self, pipeline: str) -> Path:
        return self.root / "delta" / pipeline

    @contextlib.contextmanager
    def instance(self) -> Iterator[DagsterInstance]:
        """The instance the daemon uses, opened from the same dagster.yaml and variables."""
        with pytest.MonkeyPatch.context() as patch:
            for name, value in self.env.items():
                if name.startswith("DAGSTER_PG_"):
                    patch.setenv(name, value)
            with DagsterInstance.from_ref(InstanceRef.from_dir(str(self.home))) as instance:
                yield instance

    def records(self, job_name: str) -> list[RunRecord]:
        """The job's run records, oldest first."""
        with self.instance() as instance:
            found = instance.get_run_records(filters=RunsFilter(job_name=job_name))
        return sorted(found, key=lambda record: record.create_timestamp)

    def runs_report(self) -> str:
        """Every run of the instance: one line of their statuses (the first line of a stage's
        failure, what CI's short summary shows), then each run's tags and last events."""
        compact, lines = [], []
        with self.instance() as instance:
            for record in instance.get_run_records(ascending=True):
                run = record.dagster_run
                parent = run.tags.get("dagster/parent_run_id")
                retry = f" retry of {parent[:8]}" if parent else ""
                compact.append(f"{run.job_name} {run.run_id[:8]} {run.status.value}{retry}")
                tags = {k: v for k, v in run.tags.items() if k.startswith(("dagster/", "water"))}
                lines.append(f"run {run.run_id} {run.job_name} {run.status.value} {tags}")
                for event in instance.all_logs(run.run_id)[-6:]:
                    kind = event.dagster_event.event_type_value if event.dagster_event else "LOG"
                    lines.append(f"    {kind}: {event.message[:200]}")
        return "; ".join(compact) + "\n--- the instance's runs ---\n" + "\n".join(lines)

    def dagster(self, *args: str) -> subprocess.Popen[str]:
        """A ``dagster`` CLI command on this instance and the project's workspace."""
        return subprocess.Popen(
            [str(BIN / "dagster"), *args, "-w", str(REPO_ROOT / "workspace.yaml")],
            cwd=self.root,  # not the repository: its .env would name its own instance
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    @contextlib.contextmanager
    def daemon(self, log_name: str, **extra_env: str) -> Iterator[Callable[[], str]]:
        """``dagster-daemon run`` in its own process group, stopped (with its runs and their
        JVMs) on exit; yields a function returning the end of its log."""
        log_path = self.root / log_name
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [str(BIN / "dagster-daemon"), "run", "-w", str(REPO_ROOT / "workspace.yaml")],
                cwd=self.root,  # not the repository: its .env would name its own instance
                env={**self.env, **extra_env},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

        def log_tail() -> str:
            lines = log_path.read_text(errors="replace").splitlines()[-40:]
            try:
                runs = self.runs_report()
            except Exception as error:  # the instance unreachable: keep the wait's own message
                runs = f"(the instance's runs could not be read: {error!r})"
            return f"{runs}\n--- end of {log_path} ---\n" + "\n".join(lines)

        try:
            yield log_tail
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=20)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _pipeline(root: Path, name: str, *, sensor_running: bool) -> dict[str, Any]:
    pipeline = pipeline_yaml(
        root,
        name=name,
        partitions={"granularity": "daily", "start": "2024-01-27", "end": "2024-02-01"},
        sensor={"minimum_interval_seconds": 1, "running_by_default": sensor_running},
    )
    pipeline["source"]["uri"] = str(root / "landing" / name)
    pipeline["table"]["uri"] = str(root / "delta" / name)
    return pipeline


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresWorld]:
    root = tmp_path_factory.mktemp("dagster_postgres")
    spark_conf = {k: v for k, v in TEST_SPARK_CONF.items() if k != "spark.jars"}
    config = {
        "spark": {"master": "local[1]", "conf": spark_conf},
        "pipelines": [
            _pipeline(root, "events", sensor_running=True),
            _pipeline(root, "manual", sensor_running=False),
        ],
    }
    (root / "pipelines.yaml").write_text(yaml.safe_dump(config))
    document = yaml.safe_load(DOCUMENTED_YAML.read_text())
    document["run_coordinator"]["config"]["dequeue_interval_seconds"] = 1
    (root / "dagster_home").mkdir()
    (root / "dagster_home" / "dagster.yaml").write_text(yaml.safe_dump(document))
    (root / "pause").mkdir()
    with new_pg_database("wa_dagster_pg") as database:
        host, port = PG_SERVER.rsplit("@", 1)[1].split(":")
        env = {
            **os.environ,
            "DAGSTER_HOME": str(root / "dagster_home"),
            "DAGSTER_PG_HOST": host,
            "DAGSTER_PG_PORT": port,
            "DAGSTER_PG_USER": "postgres",
            "DAGSTER_PG_PASSWORD": "",
            "DAGSTER_PG_DB": database,
            "WATERMARK_ASSETS_CONFIG": str(root / "pipelines.yaml"),
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.getenv("PYTHONPATH")])),
            # the run-retry daemon reads run failures every second instead of every 5
            "DAGSTER_EVENT_LOG_CONSUMER_DAEMON_INTERVAL_SECONDS": "1",
        }
        for name in ("WATERMARK_ASSETS_CRASH_AT", "WATERMARK_ASSETS_PAUSE_AT"):
            env.pop(name, None)
        world = PostgresWorld(
            root,
            database,
            env,
            Landing(root / "landing" / "events"),
            Landing(root / "landing" / "manual"),
        )
        with world.instance() as instance:  # creates Dagster's tables once, before any CLI
            assert instance.get_runs() == []
        yield world


# ------------------------------------------------------------- stage 1: sensor, launch, backfill


@dataclass(frozen=True)
class QueueStage:
    events_runs: list[RunRecord]
    manual_runs: list[RunRecord]
    #: every run's status when the first manual run held at its pause point, and HOLD_SECONDS
    #: later (the queue was polled every second meanwhile)
    held: list[dict[str, DagsterRunStatus]]
    events_ids: list[int]  # the tables' ids after the stage, and the ids landed
    events_landed: list[int]
    manual_ids: list[int]
    manual_landed: list[int]
    manual_version: int


def _statuses(world: PostgresWorld) -> dict[str, DagsterRunStatus]:
    return {
        record.dagster_run.run_id: record.dagster_run.status
        for job in ("events_job", "manual_job")
        for record in world.records(job)
    }


def _one_started_one_queued(
    world: PostgresWorld, manual: Sequence[str]
) -> dict[str, DagsterRunStatus] | None:
    """The statuses, once one manual run is started, the other queued and an events run started
    (a run of another pipeline partition, beside them)."""
    statuses = _statuses(world)
    manual_statuses = sorted(statuses[run_id].value for run_id in manual)
    others = [s for run_id, s in statuses.items() if run_id not in manual]
    overlapping = [run_id for run_id in manual if statuses[run_id] in IN_PROGRESS]
    assert len(overlapping) < 2, f"both runs of manual|{DAY} are in progress at once: {statuses}"
    if manual_statuses == ["QUEUED", "STARTED"] and DagsterRunStatus.STARTED in others:
        return statuses
    return None


@pytest.fixture(scope="module")
def queue_stage(world: PostgresWorld) -> QueueStage:
    for landing in (world.events, world.manual):
        landing.add(hour(28, 10))
        landing.add(hour(28, 11))
    partition = json.dumps({"dagster/partition": DAY})
    commands = [
        world.dagster("job", "launch", "-j", "manual_job", "--tags", partition),
        world.dagster("job", "backfill", "-j", "manual_job", "--partitions", DAY, "--noprompt"),
    ]
    for command in commands:
        output, _ = command.communicate(timeout=180)
        assert command.returncode == 0, output
    manual = [record.dagster_run.run_id for record in world.records("manual_job")]
    assert len(manual) == 2, f"expected the launched run and the backfill's, got {manual}"

    pause = {
        "WATERMARK_ASSETS_PAUSE_AT": "before_commit",
        "WATERMARK_ASSETS_PAUSE_DIR": str(world.pause_dir),
    }
    with world.daemon("daemon_queue.log", **pause) as log_tail:
        first = wait_for(
            "one manual run started (held before its commit), the other queued, an events run "
            "started",
            lambda: _one_started_one_queued(world, manual),
            timeout=RUN_TIMEOUT,
            details=log_tail,
        )
        time.sleep(HOLD_SECONDS)
        held = [first, _statuses(world)]
        (world.pause_dir / "before_commit.go").touch()

        def all_ended() -> bool:
            statuses = _statuses(world)
            return len(statuses) == 3 and all(s in TERMINAL for s in statuses.values())

        wait_for("the three runs to end", all_ended, timeout=RUN_TIMEOUT, details=log_tail)
    return QueueStage(
        world.records("events_job"),
        world.records("manual_job"),
        held,
        delta_ids(world.table("events")),
        sorted(world.events.ids),
        delta_ids(world.table("manual")),
        sorted(world.manual.ids),
        table_version(world.table("manual")),
    )


# ----------------------------------------------------------- stage 2: a run killed, then retried


@dataclass(frozen=True)
class RetryStage:
    runs: list[RunRecord]  # the events runs of this stage, oldest first
    version_before: int
    landed: str


@pytest.fixture(scope="module")
def retry_stage(world: PostgresWorld, queue_stage: QueueStage) -> RetryStage:
    known = {record.dagster_run.run_id for record in queue_stage.events_runs}
    version_before = table_version(world.table("events"))
    landed = world.events.add(hour(29, 10))

    def new_runs() -> list[RunRecord]:
        return [r for r in world.records("events_job") if r.dagster_run.run_id not in known]

    def retried_and_ended() -> bool:
        runs = new_runs()
        return any(r.dagster_run.tags.get("dagster/parent_run_id") for r in runs) and all(
            r.dagster_run.status in TERMINAL for r in runs
        )

    with world.daemon("daemon_retry.log", WATERMARK_ASSETS_CRASH_AT="after_commit") as log_tail:
        wait_for(
            "the sensor's run, killed after its commit, and its retry to end",
            retried_and_ended,
            timeout=2 * RUN_TIMEOUT,
            details=log_tail,
        )
    return RetryStage(new_runs(), version_before, landed)


# ----------------------------------------------------------------------------------------- tests


def _tag(record: RunRecord, key: str = PIPELINE_PARTITION_TAG) -> str | None:
    return record.dagster_run.tags.get(key)


def test_the_daemon_runs_the_sensor_whose_run_commits(
    world: PostgresWorld, queue_stage: QueueStage
) -> None:
    (run,) = queue_stage.events_runs
    assert run.dagster_run.status is DagsterRunStatus.SUCCESS
    assert run.dagster_run.tags["dagster/sensor_name"] == "events_sensor"
    assert _tag(run) == f"events|{DAY}"
    assert queue_stage.events_ids == queue_stage.events_landed


def test_a_launched_run_executes_in_its_run_worker_whose_spark_started_as_it_loaded(
    world: PostgresWorld, queue_stage: QueueStage
) -> None:
    """The default run launcher's run worker (the code server's subprocess) executes the asset
    and its checks itself (the in-process executor: no step process, one JVM), and it began
    Spark while it loaded the code location (defs/run_worker.py)."""
    (run,) = queue_stage.events_runs
    with world.instance() as instance:
        records = instance.all_logs(run.dagster_run.run_id)
    kinds = {r.dagster_event.event_type_value for r in records if r.dagster_event is not None}
    assert "STEP_WORKER_STARTING" not in kinds and "STEP_SUCCESS" in kinds, kinds
    messages = [r.user_message for r in records]
    ready = [m for m in messages if m.startswith("Spark session ready")]
    assert len(ready) == 1, messages
    assert "started in the background while the run worker loaded the code location" in ready[0]


def test_two_runs_of_one_pipeline_partition_never_run_at_once(
    world: PostgresWorld, queue_stage: QueueStage
) -> None:
    runs = queue_stage.manual_runs
    launched = [r for r in runs if "dagster/backfill" not in r.dagster_run.tags]
    backfilled = [r for r in runs if "dagster/backfill" in r.dagster_run.tags]
    assert len(launched) == len(backfilled) == 1, [r.dagster_run.tags for r in runs]
    # neither CLI knows the tag: the run coordinator added it from dagster/partition and the job
    assert [_tag(r) for r in runs] == [f"manual|{DAY}"] * 2
    # one run held before its commit, the other queued, while a run of another pipeline
    # partition (the sensor's events run) ran beside them: a limit per value, not the queue's
    for statuses in queue_stage.held:
        manual = sorted(statuses[r.dagster_run.run_id].value for r in runs)
        assert manual == ["QUEUED", "STARTED"], statuses
        (events,) = queue_stage.events_runs
        assert statuses[events.dagster_run.run_id] is DagsterRunStatus.STARTED, statuses
    assert [r.dagster_run.status for r in runs] == [DagsterRunStatus.SUCCESS] * 2
    first, second = sorted(runs, key=lambda r: r.start_time or 0)
    assert first.end_time is not None and second.start_time is not None
    assert second.start_time >= first.end_time, "the two runs of one partition overlapped"
    assert second.create_timestamp.timestamp() < first.end_time, "the second was queued behind"
    # the rows once: one commit (the first run's), the second found every file committed
    assert queue_stage.manual_ids == queue_stage.manual_landed
    assert queue_stage.manual_version == 0


def test_a_run_killed_after_its_commit_is_retried_by_the_daemon_without_duplicates(
    world: PostgresWorld, retry_stage: RetryStage
) -> None:
    failed, retry = retry_stage.runs
    assert failed.dagster_run.status is DagsterRunStatus.FAILURE
    assert failed.dagster_run.tags["dagster/sensor_name"] == "events_sensor"
    assert retry.dagster_run.tags["dagster/parent_run_id"] == failed.dagster_run.run_id
    assert retry.dagster_run.tags["dagster/retry_number"] == "1"
    assert retry.dagster_run.status is DagsterRunStatus.SUCCESS
    assert _tag(failed) == _tag(retry) == "events|2024-01-29"
    assert failed.end_time is not None and retry.start_time is not None
    assert retry.start_time >= failed.end_time
    # the killed run committed (one new version); its retry found the file committed: no second
    # commit, every landed row once
    assert table_version(world.table("events")) == retry_stage.version_before + 1
    assert delta_ids(world.table("events")) == sorted(world.events.ids)


def _run(
    tags: Mapping[str, str], job: str = "__ASSET_JOB", assets: Sequence[str] = ()
) -> DagsterRun:
    selection = frozenset(AssetKey([name]) for name in assets) or None
    return DagsterRun(job_name=job, tags=dict(tags), asset_selection=selection)


RANGE = {
    "dagster/asset_partition_range_start": "2024-01-28",
    "dagster/asset_partition_range_end": "2024-01-30",
}


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        pytest.param(
            _run({"dagster/partition": DAY}, assets=["events"]),
            {PIPELINE_PARTITION_TAG: f"events|{DAY}"},
            id="UI materialize of one partition: the asset and dagster/partition",
        ),
        pytest.param(
            _run({"dagster/partition": DAY}, job="events_job"),
            {PIPELINE_PARTITION_TAG: f"events|{DAY}"},
            id="launchpad or dagster job launch of NAME_job",
        ),
        pytest.param(
            _run({**RANGE, "dagster/backfill": "abc"}, assets=["events"]),
            {
                PIPELINE_PARTITION_TAG: "events|2024-01-28...2024-01-30",
                PIPELINE_RANGE_TAG: "events",
            },
            id="single-run backfill of a range",
        ),
        pytest.param(
            _run({"dagster/partition": "2024-01-28|u1"}, assets=["grid"]),
            {PIPELINE_PARTITION_TAG: "grid|2024-01-28|u1"},
            id="a time x unit cell",
        ),
        pytest.param(
            _run({}, job="orders_job"),
            {PIPELINE_PARTITION_TAG: "orders|-"},
            id="an unpartitioned pipeline",
        ),
        pytest.param(
            _run({"dagster/partition": DAY}, assets=["events", "clicks"]),
            {PIPELINE_PARTITION_TAG: f"clicks+events|{DAY}"},
            id="two pipelines in one run: both named",
        ),
        pytest.param(
            _run({"dagster/partition": DAY, PIPELINE_PARTITION_TAG: "events|x"}, assets=["events"]),
            {},
            id="a run that carries the tag (a sensor's, a retry's) keeps it",
        ),
        pytest.param(
            _run({"dagster/partition": DAY}),
            {},
            id="a run of no pipeline asset (checks only) ingests nothing: no tag",
        ),
    ],
)
def test_the_run_coordinator_tags_each_run_that_lacks_the_tag(
    run: DagsterRun, expected: dict[str, str]
) -> None:
    assert missing_concurrency_tags(run) == expected


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        (("events", DAY), {}, {PIPELINE_PARTITION_TAG: f"events|{DAY}"}),
        (("events",), {}, {PIPELINE_PARTITION_TAG: "events|-"}),
        (("events",), {"partition_range": (DAY, DAY)}, {PIPELINE_PARTITION_TAG: f"events|{DAY}"}),
        (
            ("events",),
            {"partition_range": (DAY, "2024-01-29")},
            {PIPELINE_PARTITION_TAG: f"events|{DAY}...2024-01-29", PIPELINE_RANGE_TAG: "events"},
        ),
    ],
    ids=["one partition", "unpartitioned", "a range of one key is that key", "a range"],
)
def test_the_tag_names_the_pipeline_and_the_partition(
    args: tuple[Any, ...], kwargs: dict[str, Any], expected: dict[str, str]
) -> None:
    assert pipeline_partition_tags(*args, **kwargs) == expected


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("",), {}, "non-empty pipeline name"),
        (([],), {}, "non-empty pipeline name"),
        (("events", DAY), {"partition_range": (DAY, DAY)}, "pass one"),
    ],
    ids=["empty name", "no pipeline", "a key and a range"],
)
def test_a_bad_tag_request_names_the_value_and_the_fix(
    args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        pipeline_partition_tags(*args, **kwargs)


def test_the_file_sensor_sets_the_tag_on_its_run_requests(tmp_path: Path) -> None:
    """The sensor's own RunRequest carries the tag (not only the coordinator's later copy)."""
    Landing(tmp_path / "landing").add(hour(28, 10))
    config = project_config(
        pipeline_yaml(tmp_path, partitions={"start": "2024-01-27", "end": "2024-02-01"})
    )
    with DagsterInstance.ephemeral() as instance:
        (request,) = SensorLoop(build_definitions(config), instance).tick().run_requests or []
    assert request.partition_key == DAY
    assert request.tags[PIPELINE_PARTITION_TAG] == f"events|{DAY}"
