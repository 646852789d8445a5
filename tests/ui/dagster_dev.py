"""The real ``dagster dev`` as a subprocess, its GraphQL API, landing files and Chromium.

Nothing here imports the project: the tests see the code location only through the webserver,
as a user does.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from datetime import time as clock_time
from pathlib import Path
from typing import Any, TypeVar

import requests
import yaml
from _ports import free_port
from conftest import TEST_SPARK_CONF
from dagster import DagsterRunStatus
from dagster_graphql import DagsterGraphQLClient

from watermark_assets.kinds.file_path.assets import requested_files

REPO_ROOT = Path(__file__).resolve().parents[2]
#: the repository's instance configuration (DAGSTER_HOME .dagster_home, named by .env)
INSTANCE_YAML = REPO_ROOT / ".dagster_home" / "dagster.yaml"
#: Where the browser tests save their screenshots: build/screenshots/ (ignored by git), or the
#: folder in $WATERMARK_ASSETS_SCREENSHOTS; set it to docs/screenshots to refresh the docs'.
SCREENSHOTS = Path(
    os.environ.get("WATERMARK_ASSETS_SCREENSHOTS") or REPO_ROOT / "build" / "screenshots"
).resolve()
LOCATION = "watermark_assets"
REPOSITORY = "__repository__"
PIPELINE = "events"
SENSOR = f"{PIPELINE}_sensor"
SENSOR_SELECTOR = {
    "repositoryLocationName": LOCATION,
    "repositoryName": REPOSITORY,
    "sensorName": SENSOR,
}
SCHEMA = "id BIGINT, event_time TIMESTAMP, name STRING"
MALFORMED_LINE = "this line is not JSON"
TERMINAL = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}

T = TypeVar("T")


# --------------------------------------------------------------------------------------- waiting


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = 1.0,
    details: Callable[[], str] = lambda: "",
) -> T:
    """Call ``probe`` until it returns something other than None/False; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{details()}")
        time.sleep(interval)


# --------------------------------------------------------------------------------- dagster dev


def repo_pythonpath() -> str:
    """PYTHONPATH for a subprocess: this checkout first, whatever the editable install points at."""
    return os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))


def instance_yaml(source: Path = INSTANCE_YAML) -> str:
    """The repo's instance configuration (``.dagster_home/dagster.yaml``), with the queued runs
    dequeued every second instead of every 5."""
    document = yaml.safe_load(source.read_text())
    coordinator = document.get("run_coordinator", {})
    if coordinator.get("class") == "QueuedRunCoordinator":
        coordinator.setdefault("config", {})["dequeue_interval_seconds"] = 1
    return yaml.safe_dump(document, sort_keys=False)


def _reset_sigint() -> None:  # pragma: no cover - runs in the child before exec
    # A shell or CI runner may start pytest with SIGINT ignored; dagster dev maps SIGTERM onto
    # the SIGINT handler, so an inherited SIG_IGN would make it ignore SIGTERM as well.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class GraphQLError(AssertionError):
    pass


@dataclass
class DagsterDev:
    """``dagster dev -w workspace.yaml`` (webserver + daemon) in its own process group.

    ``dagster_home`` None runs it as a newcomer does, in ``cwd`` (a copy of the repository):
    DAGSTER_HOME unset, so Dagster reads it from the ``.env`` there (the repository's instance,
    ``.dagster_home``). A ``dagster_home`` given runs it in that folder, where no ``.env`` names
    another instance (the repository's would win over the variable). ``config_path`` None uses
    the demo configuration; ``workspace`` None leaves ``-w`` out (Dagster then finds
    ``workspace.yaml`` in the working directory)."""

    dagster_home: Path | None
    config_path: Path | None
    log_path: Path
    port: int = field(default_factory=free_port)
    workspace: Path | None = REPO_ROOT / "workspace.yaml"
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    cwd: Path | None = None  # default: dagster_home, else the repository
    #: the environment to start from (default: this process's, the checkout first on PYTHONPATH)
    base_env: dict[str, str] | None = None
    #: ``-m MODULE`` instead of a workspace (the code location is then named after the module)
    module: str | None = None

    @property
    def location(self) -> str:
        return self.module or LOCATION

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @functools.cached_property
    def client(self) -> DagsterGraphQLClient:
        """Dagster's Python client (it fetches the schema once, when first used)."""
        return DagsterGraphQLClient("127.0.0.1", port_number=self.port, timeout=60)

    def start(self) -> None:
        if self.base_env is None:
            env = {**os.environ, "PYTHONPATH": repo_pythonpath()}
        else:
            env = dict(self.base_env)
        env["PYSPARK_PYTHON"] = sys.executable
        for name, value in (
            ("DAGSTER_HOME", self.dagster_home),
            ("WATERMARK_ASSETS_CONFIG", self.config_path),
            ("WATERMARK_ASSETS_DATA", None),
        ):
            if value is None:
                env.pop(name, None)
            else:
                env[name] = str(value)
        cwd = self.cwd or self.dagster_home or REPO_ROOT
        env["PWD"] = str(cwd)  # as a shell that cd'ed there would say (.env reads it)
        dagster = Path(sys.executable).with_name("dagster")
        command = [str(dagster), "dev"]
        if self.module is not None:
            command += ["-m", self.module]
        elif self.workspace is not None:
            command += ["-w", str(self.workspace)]
        command += ["-h", "127.0.0.1", "-p", str(self.port)]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_reset_sigint,
            )
        self.started_at = time.monotonic()

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        tail = "\n".join(text.splitlines()[-lines:])
        return f"--- last {lines} lines of {self.log_path} ---\n{tail}"

    def wait_until_ready(self, timeout: float = 120.0) -> None:
        """Until the webserver answers and the code location is loaded (or fail with the log)."""

        def ready() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(
                    f"dagster dev exited with code {self.process.returncode}\n{self.log_tail()}"
                )
            try:
                requests.get(f"{self.url}/server_info", timeout=5).raise_for_status()
                data = self.graphql(
                    """{ workspaceOrError { __typename ... on Workspace { locationEntries {
                           name loadStatus
                           locationOrLoadError { __typename
                             ... on PythonError { message causes { message } } } } } } }"""
                )
            except (requests.RequestException, GraphQLError):
                return False
            entries = {e["name"]: e for e in data["workspaceOrError"].get("locationEntries", [])}
            entry = entries.get(self.location)
            if entry is None or entry["loadStatus"] != "LOADED":
                return False
            loaded = entry["locationOrLoadError"]
            if loaded and loaded["__typename"] == "PythonError":
                causes = "".join(f"caused by: {c['message']}" for c in loaded.get("causes") or [])
                raise AssertionError(
                    f"code location {self.location} failed to load: {loaded['message']}{causes}\n"
                    f"{self.log_tail()}"
                )
            return True

        wait_for(
            f"dagster dev on {self.url}",
            ready,
            timeout=timeout,
            interval=1.0,
            details=self.log_tail,
        )

    def stop(self, grace: float = 20.0) -> int | None:
        """SIGTERM to the whole process group (dagster dev stops its services), then SIGKILL.

        Returns dagster dev's exit code if it exited within ``grace`` seconds, else None."""
        if self.process is None:
            return None
        pgid = self.process.pid  # start_new_session: the group id is the leader's pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        exited: int | None = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            exited = self.process.wait(timeout=grace)
        # Whatever is left in the group (a run's Spark JVM, a hung service): kill it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        return exited

    # ------------------------------------------------------------------------------- GraphQL

    def graphql(self, query: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """POST a raw query to /graphql; raise GraphQLError on errors."""
        response = requests.post(
            f"{self.url}/graphql",
            json={"query": query, "variables": dict(variables or {})},
            timeout=60,
        )
        try:
            body = response.json()
        except ValueError as error:
            raise GraphQLError(f"HTTP {response.status_code}: {response.text[:2000]}") from error
        if body.get("errors"):
            raise GraphQLError(json.dumps(body["errors"], indent=1)[:4000])
        if response.status_code >= 400:
            raise GraphQLError(f"HTTP {response.status_code}: {response.text[:2000]}")
        return dict(body["data"])

    def launch_backfill(self, asset: str, partition_names: Sequence[str]) -> str:
        data = self.graphql(
            """mutation Launch($params: LaunchBackfillParams!) {
                 launchPartitionBackfill(backfillParams: $params) {
                   __typename
                   ... on LaunchBackfillSuccess { backfillId }
                   ... on PythonError { message stack }
                   ... on InvalidSubsetError { message }
                   ... on UnauthorizedError { message }
                 } }""",
            {
                "params": {
                    "assetSelection": [{"path": [asset]}],
                    "partitionNames": list(partition_names),
                    "title": f"{asset} {partition_names[0]}..{partition_names[-1]}",
                }
            },
        )
        result = data["launchPartitionBackfill"]
        if result["__typename"] != "LaunchBackfillSuccess":
            raise GraphQLError(f"launchPartitionBackfill: {result}")
        return str(result["backfillId"])

    def backfill(self, backfill_id: str) -> dict[str, Any]:
        data = self.graphql(
            """query Backfill($id: String!) {
                 partitionBackfillOrError(backfillId: $id) {
                   __typename
                   ... on PartitionBackfill {
                     id status isAssetBackfill partitionNames numPartitions
                     error { message }
                     runs(limit: 20) { runId status tags { key value } runConfigYaml }
                   }
                   ... on PythonError { message }
                 } }""",
            {"id": backfill_id},
        )
        result = data["partitionBackfillOrError"]
        if result["__typename"] != "PartitionBackfill":
            raise GraphQLError(f"partitionBackfillOrError: {result}")
        return dict(result)

    def runs(self, tags: Mapping[str, str]) -> list[dict[str, Any]]:
        data = self.graphql(
            """query Runs($filter: RunsFilter) {
                 runsOrError(filter: $filter) {
                   __typename
                   ... on Runs { results { runId status runConfigYaml tags { key value } } }
                   ... on PythonError { message }
                 } }""",
            {"filter": {"tags": [{"key": k, "value": v} for k, v in tags.items()]}},
        )
        result = data["runsOrError"]
        if result["__typename"] != "Runs":
            raise GraphQLError(f"runsOrError: {result}")
        return list(result["results"])

    def run_failure(self, run_id: str) -> str:
        """The step failure messages of a run, for assertion messages."""
        data = self.graphql(
            """query Logs($id: ID!) { logsForRun(runId: $id) { __typename
                 ... on EventConnection { events { __typename
                   ... on ExecutionStepFailureEvent { stepKey error { message
                       cause { message stack } } }
                   ... on RunFailureEvent { message } } } } }""",
            {"id": run_id},
        )
        events = data["logsForRun"].get("events", [])
        messages = []
        for event in events:
            if event["__typename"] == "ExecutionStepFailureEvent":
                error = event["error"] or {}
                cause = error.get("cause") or {}
                messages.append(
                    f"{event['stepKey']}: {error.get('message')} "
                    f"{cause.get('message', '')}{''.join(cause.get('stack') or [])}"
                )
            elif event["__typename"] == "RunFailureEvent":
                messages.append(event["message"])
        return "\n".join(messages) or "(no failure events)"

    def wait_for_runs(self, run_ids: Iterable[str], timeout: float) -> None:
        """Until every run is finished (DagsterGraphQLClient.get_run_status); all must succeed."""
        pending = set(run_ids)
        statuses: dict[str, DagsterRunStatus] = {}

        def done() -> bool:
            for run_id in sorted(pending):
                statuses[run_id] = self.client.get_run_status(run_id)
                if statuses[run_id] in TERMINAL:
                    pending.discard(run_id)
            return not pending

        wait_for(
            f"runs {sorted(pending)}",
            done,
            timeout=timeout,
            interval=2.0,
            details=lambda: f"statuses: {statuses}\n{self.log_tail(30)}",
        )
        failed = {r: s for r, s in statuses.items() if s is not DagsterRunStatus.SUCCESS}
        assert not failed, "runs did not succeed: " + "; ".join(
            f"{r} {s.value}: {self.run_failure(r)}" for r, s in failed.items()
        )

    def materializations(self, asset: str, limit: int = 50) -> list[dict[str, Any]]:
        """Newest first: partition, runId, timestamp (ms) and metadata as label -> value."""
        data = self.graphql(
            """query Mats($key: AssetKeyInput!, $limit: Int) {
                 assetOrError(assetKey: $key) { __typename
                   ... on Asset { assetMaterializations(limit: $limit) {
                     partition runId timestamp
                     metadataEntries { label __typename
                       ... on TextMetadataEntry { text }
                       ... on IntMetadataEntry { intValue }
                       ... on FloatMetadataEntry { floatValue }
                       ... on BoolMetadataEntry { boolValue }
                       ... on JsonMetadataEntry { jsonString }
                       ... on TableMetadataEntry { table { records } }
                       ... on PathMetadataEntry { path } } } } } }""",
            {"key": {"path": [asset]}, "limit": limit},
        )
        events = data["assetOrError"]["assetMaterializations"]
        return [
            {
                "partition": e["partition"],
                "runId": e["runId"],
                "timestamp": e["timestamp"],
                "metadata": {m["label"]: metadata_value(m) for m in e["metadataEntries"]},
            }
            for e in events
        ]

    def sensor_ticks(self, limit: int = 20) -> list[dict[str, Any]]:
        data = self.graphql(
            """query Ticks($selector: SensorSelector!, $limit: Int) {
                 sensorOrError(sensorSelector: $selector) { __typename
                   ... on Sensor { sensorState { status
                     ticks(limit: $limit) { tickId status timestamp skipReason runIds cursor
                                            error { message } } } } } }""",
            {"selector": SENSOR_SELECTOR, "limit": limit},
        )
        return list(data["sensorOrError"]["sensorState"]["ticks"])


def metadata_value(entry: Mapping[str, Any]) -> Any:
    for key in ("text", "intValue", "floatValue", "boolValue", "path"):
        if key in entry:
            return entry[key]
    if "jsonString" in entry:
        return json.loads(entry["jsonString"])
    if "table" in entry:  # a table: its records, each a dict
        return [json.loads(record) for record in entry["table"]["records"]]
    return None


def tag_dict(run: Mapping[str, Any]) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["tags"]}


def run_files(run: Mapping[str, Any]) -> list[str]:
    """The ``files`` list of a run's config (what the sensor asked it to ingest)."""
    config = yaml.safe_load(run["runConfigYaml"]) or {}
    return requested_files(config, PIPELINE) or []


# ------------------------------------------------------------------------- config and landing


@dataclass(frozen=True)
class Paths:
    root: Path

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    @property
    def table(self) -> Path:
        return self.root / "delta" / PIPELINE

    @property
    def quarantine(self) -> Path:
        return self.root / "delta" / f"{PIPELINE}_quarantine"

    @property
    def checkpoint(self) -> Path:
        return self.table / "_watermarks" / f"{PIPELINE}_main_checkpoint.json"


#: The Spark settings of the runs dagster dev starts: the tests' own (conftest.TEST_SPARK_CONF:
#: no UI, 2 partitions, no adaptive execution, no DataFrame call-site debugging), without the
#: JDBC jar.
SESSION_CONF = {key: value for key, value in TEST_SPARK_CONF.items() if key != "spark.jars"}


def write_config(path: Path, paths: Paths, partitions_start: date) -> None:
    """An ingest pipeline over hourly landing folders, polled every 5 s, with a small Spark."""
    pipeline = {
        "name": PIPELINE,
        "description": "Test events: gzip NDJSON files in hourly landing folders.",
        "source": {
            "type": "files",
            "uri": str(paths.landing),
            "format": "ndjson",
            "schema": SCHEMA,
        },
        "watermark": {"partition_template": "date=%Y-%m-%d/hour=%H"},
        "table": {
            "uri": str(paths.table),
            "partition_by": ["event_date"],
            "derived_columns": {"event_date": "to_date(event_time)"},
        },
        "partitions": {"granularity": "daily", "start": partitions_start.isoformat()},
        "checkpoint": {"interval_files": 1, "interval_secs": 0},
        "sensor": {"minimum_interval_seconds": 5},
    }
    spark = {"master": "local[2]", "conf": {**SESSION_CONF, "spark.driver.memory": "1g"}}
    path.write_text(yaml.safe_dump({"spark": spark, "pipelines": [pipeline]}, sort_keys=False))


@dataclass(frozen=True)
class LandingFile:
    """One landing file: its path relative to the source, ids and malformed lines."""

    day: date
    hour: int
    offset_seconds: int
    tag: str
    ids: tuple[int, ...]
    malformed: int = 0

    @property
    def when(self) -> datetime:
        return datetime.combine(self.day, clock_time(self.hour), tzinfo=timezone.utc)

    @property
    def prefix(self) -> str:
        return f"date={self.day.isoformat()}/hour={self.hour:02d}"

    @property
    def name(self) -> str:
        # Unix seconds first: lexicographic order is chronological order (file_name_ordering auto).
        stamp = int(self.when.timestamp()) + self.offset_seconds
        return f"{stamp}-{self.tag}.ndjson.gz"

    @property
    def path(self) -> str:
        return f"{self.prefix}/{self.name}"

    @property
    def partition(self) -> str:
        return self.day.isoformat()

    @property
    def rows(self) -> int:
        return len(self.ids)

    def lines(self) -> list[str]:
        stamp = (self.when + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
        records = [json.dumps({"id": i, "event_time": stamp, "name": f"e{i}"}) for i in self.ids]
        return records + [MALFORMED_LINE] * self.malformed


def land(landing: Path, files: Sequence[LandingFile]) -> None:
    """Write the files under a hidden staging folder, then rename each into place.

    A sensor tick never sees a half-written gzip file: the listing skips names starting with '_'.
    """
    staging = landing / "_incoming"
    staging.mkdir(parents=True, exist_ok=True)
    for file in files:
        temporary = staging / file.name
        with gzip.open(temporary, "wt", encoding="utf-8") as handle:
            handle.write("\n".join(file.lines()) + "\n")
        target = landing / file.path
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(temporary, target)


def today_utc() -> date:
    return datetime.now(timezone.utc).date()


# ------------------------------------------------------------------------------------ Chromium

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def ensure_chromium() -> str | None:
    """Debian's Chromium: None when /usr/bin/chromium is there (installed now if need be),
    else the reason it is missing and cannot be installed."""
    if CHROMIUM.exists():
        return None
    apt_get = shutil.which("apt-get")
    if apt_get is None:
        return f"{CHROMIUM} is absent and there is no apt-get to install Debian's chromium"
    if os.geteuid() != 0:
        return (
            f"{CHROMIUM} is absent and installing it needs root "
            "(run `make browser` or `apt-get install -y chromium` as root)"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in ([apt_get, "update", "-q"], [apt_get, "install", "-y", "-q", "chromium"]):
        result = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=900, check=False
        )
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
            return f"{CHROMIUM} is absent and `{' '.join(command)}` failed:\n{tail}"
    return None if CHROMIUM.exists() else f"{CHROMIUM} is still absent after apt-get install"
