"""Time x unit pipelines (seed 003, issue 8 section 2): a (window, unit) grid of partitions.

``watermark: {kind: unit, column, units | secondary_input, time: {...}}``: Dagster's
multi-partition keys (``2024-01-01|a``) are exactly the core's cells; each cell is read with
``unit = id AND start <= time < end`` pushed to the source and replaced in ONE commit carrying its
txn and its high watermark; each unit keeps its own cut-off, so cells re-run independently; a
backfill of one unit over a range of windows is one run (Dagster's single-run policy); the sensor
adds new ids of a secondary input and requests exactly the due cells, saying why. Real Spark, real
Delta on tmp_path, real PostgreSQL and HTTP on loopback, real Dagster (ephemeral or temp
instances, ``execute_in_process``, ``evaluate_tick``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import TEST_SPARK_CONF, local_instance, new_pg_database, project_config
from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DagsterRunStatus,
    ExecuteInProcessResult,
    MultiPartitionsDefinition,
    build_sensor_context,
    partition_loading_context,
)
from dagster._core.definitions.automation_tick_evaluation_context import (
    build_run_requests_with_backfill_policies,
)
from dagster._core.definitions.events import AssetKeyPartitionKey
from dagster._core.definitions.sensor_definition import SensorExecutionData
from deltalake import DeltaTable, write_deltalake
from test_time_pipeline import shared

from watermark_assets.config import UnitPipelineConfig
from watermark_assets.core.time import windows
from watermark_assets.core.unit import Cell, due_cells
from watermark_assets.defs import build_definitions
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.exceptions import ConfigError
from watermark_assets.kinds.unit.grid_defs import cell_key, decide_grid_tick
from watermark_assets.kinds.unit.grid_run import (
    cell_app_id,
    cell_spec,
    load_grid_watermark,
    time_unit_metadata_key,
)
from watermark_assets.runs.faults import CRASH_ENV_VAR
from watermark_assets.sources.jdbc import postgres_jdbc_jar
from watermark_assets.vocabulary import table_rows

UTC = timezone.utc
TESTS = Path(__file__).parent
PG_SERVER = "postgresql://postgres@127.0.0.1:5432"
SCHEMA = pa.schema(
    [("survey_id", pa.string()), ("answer", pa.int64()), ("answered_at", pa.timestamp("us", UTC))]
)
SPARK_SCHEMA = "survey_id STRING, answer BIGINT, answered_at TIMESTAMP"


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def answer(survey: str, number: int, at: str) -> dict[str, Any]:
    return {"survey_id": survey, "answer": number, "answered_at": day(at)}


# --- the source: answers with a unit (survey) and a time, in several source types ---


class AnswersApi(BaseHTTPRequestHandler):
    """``GET /answers?survey=ID&since=ISO&until=ISO`` or ``/surveys/ID/answers?since&until``."""

    rows: dict[tuple[str, int], dict[str, Any]]
    requests: list[str]

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self.requests.append(self.path)
        parts = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(parts.query))
        segments = [urllib.parse.unquote(p) for p in parts.path.strip("/").split("/")]
        survey = segments[1] if segments[0] == "surveys" else query.get("survey")
        since = datetime.fromisoformat(query["since"]) if "since" in query else None
        until = datetime.fromisoformat(query["until"]) if "until" in query else None
        rows = [
            {**r, "answered_at": r["answered_at"].isoformat()}
            for r in self.rows.values()
            if (survey is None or r["survey_id"] == survey)
            and (since is None or r["answered_at"] >= since)
            and (until is None or r["answered_at"] < until)
        ]
        payload = json.dumps({"data": rows}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class Source:
    """The answers in one source type, rewritten whole on each change."""

    def __init__(self, root: Path, kind: str, *, database: str | None = None) -> None:
        self.kind = kind
        self.uri = root / "source" / "answers"
        self.database = database
        self.rows: dict[tuple[str, int], dict[str, Any]] = {}
        self.api: type[AnswersApi] | None = None
        self._server: ThreadingHTTPServer | None = None
        if kind.startswith("http"):
            self.api = type("Answers", (AnswersApi,), {"rows": self.rows, "requests": []})
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), self.api)
            threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def config(self) -> dict[str, Any]:
        if self.kind in ("delta_table", "parquet"):
            return {"type": self.kind, "uri": str(self.uri)}
        if self.kind == "jdbc":
            url = f"jdbc:postgresql://127.0.0.1:5432/{self.database}?user=postgres"
            return {"type": "jdbc", "url": url, "table": "answers"}
        assert self._server is not None
        base = f"http://127.0.0.1:{self._server.server_address[1]}"
        url = f"{base}/answers" if self.kind == "http_param" else f"{base}/surveys/{{unit}}/answers"
        return {
            "type": "http_api",
            "url": url,
            "schema": SPARK_SCHEMA,
            "watermark_param_mapping": {"answered_at": "since"},
            "watermark_to_param": "until",
        }

    def unit_settings(self) -> dict[str, Any]:
        return {"unit_param": "survey"} if self.kind == "http_param" else {}

    def put(self, *rows: dict[str, Any]) -> None:
        for row in rows:
            self.rows[(row["survey_id"], row["answer"])] = row
        self._write()

    def delete(self, survey: str, number: int) -> None:
        del self.rows[(survey, number)]
        self._write()

    def of(self, survey: str) -> list[tuple[str, int]]:
        return sorted(k for k in self.rows if k[0] == survey)

    def _write(self) -> None:
        table = pa.Table.from_pylist(list(self.rows.values()), schema=SCHEMA)
        if self.kind == "delta_table":
            write_deltalake(str(self.uri), table, mode="overwrite")
        elif self.kind == "parquet":
            self.uri.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, self.uri / "part-0.parquet")
        elif self.kind == "jdbc":
            with psycopg.connect(f"{PG_SERVER}/{self.database}", autocommit=True) as conn:
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS answers (survey_id text, answer bigint, "
                    "answered_at timestamptz)"
                )
                conn.execute("DELETE FROM answers")
                with conn.cursor().copy("COPY answers FROM STDIN") as copy:
                    for row in self.rows.values():
                        copy.write_row((row["survey_id"], row["answer"], row["answered_at"]))


def grid_pipeline(
    tmp_path: Path, source: dict[str, Any], units: dict[str, Any], **time: Any
) -> dict[str, Any]:
    return {
        "name": "answers",
        "source": source,
        "watermark": {
            "kind": "unit",
            "column": "survey_id",
            **units,
            "time": {"column": "answered_at", "from": "2024-01-01", "to": "P0D", **time},
        },
        "table": {"uri": str(tmp_path / "delta" / "answers")},
    }


class Scene:
    """A time x unit pipeline over the answers, its definitions and a persistent instance."""

    def __init__(
        self,
        tmp_path: Path,
        units: dict[str, Any],
        source: Source | None = None,
        now: str = "2024-01-05T06:00",
        merge_keys: list[str] | None = None,
        **time: Any,
    ) -> None:
        self.source = source or Source(tmp_path, "delta_table")
        units = {**units, **self.source.unit_settings()}
        self.raw = grid_pipeline(tmp_path, self.source.config(), units, **time)
        if merge_keys:
            self.raw["table"]["merge_keys"] = merge_keys
        self.config = project_config(self.raw)
        pipeline = self.config.pipeline("answers")
        assert isinstance(pipeline, UnitPipelineConfig)
        self.pipeline = pipeline
        self.table = pipeline.table.uri
        self.now = day(now)
        self.defs = build_definitions(self.config, clock=lambda: self.now)
        self.instance = local_instance(tmp_path / "dagster_home")
        self.job = self.defs.resolve_job_def("answers_job")
        self.cursor: str | None = None

    @property
    def partitions_def(self) -> MultiPartitionsDefinition:
        partitions_def = self.job.partitions_def
        assert isinstance(partitions_def, MultiPartitionsDefinition)
        return partitions_def

    def run(self, first: str, last: str | None = None, **tags: str) -> dict[str, Any]:
        """Materialize ``first`` (or the range ``first``..``last``) in ONE run; checks pass."""
        if last is not None:
            tags = {
                **tags,
                "dagster/asset_partition_range_start": first,
                "dagster/asset_partition_range_end": last,
            }
            result = self.job.execute_in_process(instance=self.instance, tags=tags)
        else:
            result = self.job.execute_in_process(
                instance=self.instance, partition_key=first, tags=tags
            )
        return meta(result)

    def tick(self) -> SensorExecutionData:
        context = build_sensor_context(
            instance=self.instance,
            instance_ref=self.instance.get_ref(),
            cursor=self.cursor,
            definitions=self.defs,
        )
        data = self.defs.resolve_sensor_def("answers_sensor").evaluate_tick(context)
        self.cursor = data.cursor
        for request in data.dynamic_partitions_requests:  # applied as the daemon does
            self.instance.add_dynamic_partitions(
                request.partitions_def_name, request.partition_keys
            )
        for event in data.asset_events:
            self.instance.report_runless_asset_event(event)
        return data

    def target(self, survey: str | None = None) -> list[tuple[str, int]]:
        rows = DeltaTable(self.table).to_pyarrow_table(columns=["survey_id", "answer"]).to_pylist()
        return sorted(
            (r["survey_id"], r["answer"])
            for r in rows
            if survey is None or r["survey_id"] == survey
        )

    def version(self) -> int | None:
        return DeltaCommitter(self.table).current_version()


def cells(metadata: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``time_unit/cells``' rows by ``start|unit``, in the run's order."""
    return {f"{r['start']}|{r['unit']}": r for r in table_rows(metadata["time_unit/cells"])}


def meta(result: ExecuteInProcessResult) -> dict[str, Any]:
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert all(checks.values()), checks
    (materialization, *others) = result.asset_materializations_for_node("answers")
    assert all(shared(m) == shared(materialization) for m in others)
    return {key: value.value for key, value in materialization.metadata.items()}


def write_ids(path: Path, ids: list[str]) -> dict[str, Any]:
    path.write_text("id\n" + "".join(f"{i}\n" for i in ids), encoding="utf-8")
    return {"type": "file", "path": str(path), "fields": ["id"]}


#: Two answers a day of surveys a and b at 10:00 and 20:00, 2024-01-01..2024-01-05 (the scenes'
#: now is 2024-01-05T06:00: daily windows keep hours, so the partial window ends there).
ANSWERS = [
    answer(s, d * 10 + k, f"2024-01-{d:02}T{10 * (k + 1):02}:00")
    for s in ("a", "b")
    for d in range(1, 6)
    for k in range(2)
]


# --- configuration ---


def test_a_time_x_unit_watermark_loads_and_its_column_pipeline_reads_the_time_column(
    tmp_path: Path,
) -> None:
    scene = Scene(tmp_path, {"units": "a,b"}, grace_days=1)
    time = scene.pipeline.watermark.time
    assert time is not None and time.grace_days == 1 and time.partition == "daily"
    assert scene.pipeline.is_time_by_unit
    assert list(cell_spec(scene.pipeline, "a").columns) == ["answered_at"]
    assert scene.pipeline.cells_per_backfill_run is None  # single-run backfills


BAD_GRID_CONFIGS = {
    "a to before from (issue 22, item 7)": (
        {"from": "2024-02-01", "to": "2024-01-01"},
        [
            "watermark.time",
            "watermark.from '2024-02-01' and watermark.to '2024-01-01' are refused: to is before "
            "from",
        ],
    ),
    "an unpartitioned inner time": (
        {"partition": "none"},
        ["watermark.time.partition 'none' is refused", "daily", "remove watermark.time"],
    ),
    "the unit column as time column": (
        {"column": "survey_id"},
        ["watermark.time.column 'survey_id' is the unit column too"],
    ),
    "a rolling from (the inner time's own validation)": (
        {"from": "P30D"},
        ["watermark.time", "watermark.from 'P30D' is refused", "fixed start"],
    ),
    "an unknown partition": ({"partition": "yearly"}, ["watermark.time", "'yearly'"]),
    "an unknown key": ({"every": "day"}, ["watermark.time.every"]),
}


@pytest.mark.parametrize(("time", "expected"), BAD_GRID_CONFIGS.values(), ids=BAD_GRID_CONFIGS)
def test_a_bad_time_x_unit_watermark_names_the_key_the_value_and_the_fix(
    tmp_path: Path, time: dict[str, Any], expected: list[str]
) -> None:
    raw = grid_pipeline(tmp_path, {"type": "delta_table", "uri": "/data"}, {"units": "a"}, **time)
    with pytest.raises(ConfigError) as error:
        project_config(raw)
    for text in expected:
        assert text in str(error.value), str(error.value)


# --- Dagster's multi-partition keys = the core's cells ---


@pytest.mark.parametrize(
    ("time", "now"),
    [
        ({"partition": "daily"}, "2024-01-05T06:00"),
        ({"partition": "daily", "partial_partition": False}, "2024-01-05T06:00"),
        ({"partition": "monthly", "from": "2023-11-01", "to": "-"}, "2024-01-05T06:00"),
        ({"partition": "hourly", "from": "2024-01-04 20:00:00"}, "2024-01-05T02:30"),
    ],
    ids=["daily, partial last", "daily, complete only", "monthly", "hourly"],
)
def test_the_multi_partition_keys_are_exactly_the_cores_cells(
    tmp_path: Path, time: dict[str, Any], now: str
) -> None:
    scene = Scene(tmp_path, {"units": "a,b"}, now=now, **time)
    time_config = scene.pipeline.watermark.time
    assert time_config is not None
    spec = time_config.spec
    with partition_loading_context(effective_dt=day(now)):
        keys = scene.partitions_def.get_partition_keys()
    due = due_cells(load_grid_watermark(scene.pipeline), ["a", "b"], spec, day(now))
    cells = [Cell(w, u) for w in windows(spec, day(now)) for u in ("a", "b")]
    assert [str(k) for k in keys] == [cell_key(spec, c) for c in cells]
    assert sorted(cell_key(spec, c) for c in due.cells) == sorted(str(k) for k in keys)
    assert str(keys[0]).endswith("|a") and "|" in str(keys[0])


def test_dynamic_units_are_a_dimension_of_the_grid(tmp_path: Path) -> None:
    scene = Scene(tmp_path, {"secondary_input": write_ids(tmp_path / "ids.csv", ["s1", "s2"])})
    assert scene.partitions_def.partition_dimension_names == ["time", "unit"]
    scene.tick()
    with partition_loading_context(effective_dt=scene.now, dynamic_partitions_store=scene.instance):
        keys = [str(k) for k in scene.partitions_def.get_partition_keys()]
    assert keys[:4] == ["2024-01-01|s1", "2024-01-01|s2", "2024-01-02|s1", "2024-01-02|s2"]
    assert len(keys) == 5 * 2  # 4 whole days and the partial 2024-01-05


# --- runs: one commit per cell, cells independent, re-runs idempotent ---


@pytest.mark.spark
def test_cells_run_independently_and_a_grace_re_run_of_one_unit_never_touches_another(
    spark: Any, tmp_path: Path
) -> None:
    scene = Scene(tmp_path, {"units": "a,b"}, grace_days=1)
    scene.source.put(*ANSWERS)

    first = scene.run("2024-01-01|a", "2024-01-04|a")  # one unit, four windows: ONE run

    assert first["delta/versions"] == [0], "one commit replaces the run's four cells"
    assert scene.target() == [("a", n) for n in (10, 11, 20, 21, 30, 31, 40, 41)]
    assert list(cells(first)) == [f"2024-01-0{d}T00:00:00Z|a" for d in range(1, 5)]
    cell = cells(first)["2024-01-02T00:00:00Z|a"]
    assert cell["high_watermark"] == "2024-01-03T00:00:00Z"
    assert cell["pushed_down"] == (
        "`answered_at` >= TIMESTAMP '2024-01-02 00:00:00+00:00' AND `answered_at` < "
        "TIMESTAMP '2024-01-03 00:00:00+00:00' AND `survey_id` = 'a'"
    )
    assert {r["unit"]: r["cut_off"] for r in table_rows(first["cut_off"])} == {
        "a": "2024-01-01T00:00:00Z (first run: from)"
    }
    committer = DeltaCommitter(scene.table)
    commit = committer.read_commit(0)
    app_ids = [f"watermark_assets/answers/a/time/2024-01-0{d}T00:00:00.000Z" for d in range(1, 5)]
    assert commit.txns == dict.fromkeys(app_ids, 1), "each cell's txn, in the one commit"
    entry = json.loads(commit.custom_metadata[time_unit_metadata_key("answers")])
    assert entry["cells"][1] == ["a", "2024-01-02T00:00:00.000Z", "2024-01-03T00:00:00.000Z"]
    replaced = json.loads(commit.custom_metadata["watermark_assets.replace"])
    assert [w["column"] for w in replaced["windows"]] == ["answered_at", "survey_id"]
    assert len(replaced["regions"]) == 4

    scene.run("2024-01-01|b", "2024-01-05|b")  # b catches up, partial 01-05 included
    b_rows = scene.target("b")
    assert b_rows == [("b", n) for n in (10, 11, 20, 21, 30, 31, 40, 41)]  # 01-05 10:00 is later

    # Each unit has its own cut-off: a's highest is 01-05 (grace 1: 01-04 and the new 01-05);
    # b's is 01-05T06:00 (the partial window's to) -> 01-04T06:00, so 01-04 and 01-05 again.
    tick = decide_grid_tick(scene.pipeline, ["a", "b"], scene.now)
    assert [cell_key(scene.pipeline.watermark.time.spec, c) for c in tick.due.cells] == [  # type: ignore[union-attr]
        "2024-01-04|a",
        "2024-01-05|a",
        "2024-01-04|b",
        "2024-01-05|b",
    ]
    assert tick.message == (
        "4 cells of 2 units (of 2): a: 2 partitions: 2024-01-04 ends after the cut-off "
        "2024-01-04T00:00:00Z (highest watermark 2024-01-05T00:00:00Z + abstinent 0d - grace 1d); "
        "2024-01-05 (partial, to 2024-01-05T06:00:00Z) has no history; b: 2 partitions: "
        "2024-01-04, 2024-01-05 (partial, to 2024-01-05T06:00:00Z) end after the cut-off "
        "2024-01-04T06:00:00Z (highest watermark 2024-01-05T06:00:00Z + abstinent 0d - grace 1d)"
    )
    assert [r.tags["dagster/asset_partition_range_start"] for r in tick.requests] == [
        "2024-01-04|a",
        "2024-01-04|b",
    ]

    # A late answer of a on 01-04 and a changed b row: the grace re-run of a takes a's only.
    scene.source.put(answer("a", 42, "2024-01-04T23:00"), answer("b", 40, "2024-01-04T10:30"))
    before = scene.version()
    rerun = scene.run("2024-01-04|a")
    assert scene.target("a")[-3:] == [("a", 40), ("a", 41), ("a", 42)]
    assert scene.target("b") == b_rows, "b's rows are never touched"
    assert rerun["delta/versions"] == [(before or 0) + 1]
    assert rerun["rows/read"] == 3 and rerun["rows/removed"] == 2


@pytest.mark.spark
def test_re_running_any_cell_any_number_of_times_leaves_the_table_unchanged(
    spark: Any, tmp_path: Path
) -> None:
    scene = Scene(tmp_path, {"units": "a,b"})
    scene.source.put(*ANSWERS, answer("a", 99, "2024-01-03T00:00"))  # on a window's start
    scene.run("2024-01-02|a", "2024-01-03|b")  # a rectangle: 2 days x 2 units, one run
    table = scene.target()
    assert table == sorted(
        [("a", n) for n in (20, 21, 30, 31, 99)] + [("b", n) for n in (20, 21, 30, 31)]
    )
    version = scene.version()
    assert version == 0, "the rectangle's four cells in one commit"
    for _ in range(3):
        for key in ("2024-01-03|a", "2024-01-02|b"):
            again = scene.run(key)
            assert scene.target() == table, "no duplicates, nothing lost"
            assert len(again["delta/versions"]) == 1
    assert scene.version() == version + 6
    committer = DeltaCommitter(scene.table)
    spec = scene.pipeline.watermark.time.spec  # type: ignore[union-attr]
    window = windows(spec, scene.now)[2]
    assert committer.transaction_version(cell_app_id("answers", Cell(window, "a"))) == 4
    grid = load_grid_watermark(scene.pipeline)
    assert window.start == day("2024-01-03")
    assert grid.units["a"].high_watermark(window) == day("2024-01-04")  # type: ignore[union-attr]
    assert grid.units["b"].high_watermark(window) == day("2024-01-04")  # type: ignore[union-attr]


@pytest.mark.spark
def test_an_empty_cell_still_commits_and_removes_rows_deleted_at_the_source(
    spark: Any, tmp_path: Path
) -> None:
    scene = Scene(tmp_path, {"units": "a,b"})
    scene.source.put(*ANSWERS)
    scene.run("2024-01-02|a", "2024-01-02|b")
    scene.source.delete("a", 20)
    scene.source.delete("a", 21)
    emptied = scene.run("2024-01-02|a")
    assert scene.target() == [("b", 20), ("b", 21)]
    assert emptied["rows/read"] == 0 and emptied["rows/removed"] == 2
    assert len(emptied["delta/versions"]) == 1
    cell = cells(emptied)["2024-01-02T00:00:00Z|a"]
    assert cell["high_watermark"] == "2024-01-03T00:00:00Z"


NO_JDBC = "the PostgreSQL JDBC driver is missing: run `make jdbc`"

#: source type -> what a cell's read sends to it (unit a, window 2024-01-02)
PUSHED = {
    "parquet": "`answered_at` >= TIMESTAMP '2024-01-02 00:00:00+00:00' AND `answered_at` < "
    "TIMESTAMP '2024-01-03 00:00:00+00:00' AND `survey_id` = 'a'",
    "jdbc": '"answered_at" >= TIMESTAMPTZ \'2024-01-02 00:00:00+00:00\' AND "answered_at" < '
    "TIMESTAMPTZ '2024-01-03 00:00:00+00:00' AND \"survey_id\" = 'a'",
    "http_param": "query: since=2024-01-02T00:00:00+00:00, until=2024-01-03T00:00:00+00:00",
    "http_path": "query: since=2024-01-02T00:00:00+00:00, until=2024-01-03T00:00:00+00:00",
}


@pytest.fixture
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Source]:
    kind = request.param
    if kind != "jdbc":
        made = Source(tmp_path, kind)
        yield made
        made.close()
        return
    if postgres_jdbc_jar() is None:
        pytest.skip(NO_JDBC)
    with new_pg_database("wa_gridpipe") as name:
        yield Source(tmp_path, kind, database=name)


@pytest.mark.spark
@pytest.mark.parametrize("source", list(PUSHED), indirect=True)
def test_a_cell_is_pushed_to_every_source_type(tmp_path: Path, source: Source) -> None:
    scene = Scene(tmp_path, {"units": "a,b"}, source)
    source.put(*ANSWERS)
    metadata = scene.run("2024-01-02|a")
    assert scene.target() == [("a", 20), ("a", 21)]
    cell = cells(metadata)["2024-01-02T00:00:00Z|a"]
    assert cell["pushed_down"] == PUSHED[source.kind]
    if source.api is not None:  # the unit reached the API: a parameter, or in the path
        (path,) = source.api.requests
        assert path.startswith(
            "/answers?survey=a&" if source.kind == "http_param" else "/surveys/a/"
        )


# --- backfills through Dagster ---


@pytest.mark.spark
def test_a_backfill_of_one_unit_over_thirty_days_is_one_run_of_one_commit(
    spark: Any, tmp_path: Path
) -> None:
    """What the UI's Materialize -> unit a, 2024-01-01...2024-01-30 asks: Dagster's own backfill
    planning (the single-run policy) makes ONE run of the range; it commits its cells at once."""
    scene = Scene(tmp_path, {"units": "a,b,c"}, now="2024-02-01T00:00")
    scene.source.put(
        *(answer(u, d, f"2024-01-{d:02}T12:00") for u in ("a", "b") for d in range(1, 31))
    )
    keys = [f"2024-01-{d:02}|a" for d in range(1, 31)]
    repository = scene.defs.get_repository_def()
    with partition_loading_context(effective_dt=scene.now):
        (request,) = build_run_requests_with_backfill_policies(
            [AssetKeyPartitionKey(AssetKey("answers"), k) for k in keys],
            repository.asset_graph,
            scene.instance,
        )
    assert request.tags["dagster/asset_partition_range_start"] == "2024-01-01|a"
    assert request.tags["dagster/asset_partition_range_end"] == "2024-01-30|a"
    # Three units over five days: one run per unit (Dagster holds the smaller dimension fixed).
    rectangle = [f"2024-01-{d:02}|{u}" for d in range(1, 6) for u in "abc"]
    with partition_loading_context(effective_dt=scene.now):
        per_unit = build_run_requests_with_backfill_policies(
            [AssetKeyPartitionKey(AssetKey("answers"), k) for k in rectangle],
            repository.asset_graph,
            scene.instance,
        )
    assert len(per_unit) == 3

    metadata = scene.run(
        request.tags["dagster/asset_partition_range_start"],
        request.tags["dagster/asset_partition_range_end"],
    )
    assert metadata["delta/versions"] == [0]
    assert scene.target() == [("a", d) for d in range(1, 31)]
    assert table_rows(metadata["watermark/after"]) == [
        {"unit": "a", "watermark": "2024-01-31T00:00:00Z"}
    ]
    # the first cell's materialization states its own window, not the run's last
    (record,) = scene.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey("answers"), asset_partitions=["2024-01-01|a"]),
        limit=1,
    ).records
    assert record.asset_materialization is not None
    first = {k: v.value for k, v in record.asset_materialization.metadata.items()}
    assert first["partition/watermark"] == "2024-01-02T00:00:00Z"
    assert first["partition/reason"].startswith(
        "[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z) read up to its high watermark "
        "2024-01-02T00:00:00Z; final"
    )


# --- the sensor: new ids, due cells, the tick's words ---


@pytest.mark.spark
def test_the_sensor_adds_new_ids_and_requests_their_cells_and_reports_refused_rows(
    spark: Any, tmp_path: Path
) -> None:
    listing = tmp_path / "surveys.csv"
    scene = Scene(tmp_path, {"secondary_input": write_ids(listing, ["a", "a/b", "b"])})
    scene.source.put(*ANSWERS)

    first = scene.tick()

    assert scene.instance.get_dynamic_partitions("answers_units") == ["a", "b"]
    requests = first.run_requests or []
    ranges = [
        (r.tags["dagster/asset_partition_range_start"], r.tags["dagster/asset_partition_range_end"])
        for r in requests
    ]
    assert ranges == [("2024-01-01|a", "2024-01-05|a"), ("2024-01-01|b", "2024-01-05|b")]
    (observation,) = first.asset_events
    refused = table_rows(observation.metadata["units/refused"])
    assert refused[0]["row"] == 3 and refused[0]["value"] == "a/b"  # the header is row 1

    # A run in flight over a's range: its cells are not requested again.
    in_flight = scene.instance.create_run_for_job(
        scene.job,
        status=DagsterRunStatus.STARTED,
        tags={
            "dagster/asset_partition_range_start": "2024-01-01|a",
            "dagster/asset_partition_range_end": "2024-01-05|a",
        },
    )
    busy = scene.tick()
    assert [r.tags["dagster/asset_partition_range_start"] for r in busy.run_requests or []] == [
        "2024-01-01|b"
    ]
    scene.instance.report_run_failed(in_flight)

    for request in requests:  # the daemon would launch these
        result = scene.job.execute_in_process(instance=scene.instance, tags=request.tags)
        assert result.success
    assert scene.target() == sorted(
        (a["survey_id"], a["answer"]) for a in ANSWERS if a["answered_at"] < scene.now
    )

    write_ids(listing, ["a", "a/b", "b", "c"])  # c appended later
    scene.source.put(answer("c", 1, "2024-01-03T08:00"))
    later = scene.tick()
    assert scene.instance.get_dynamic_partitions("answers_units") == ["a", "b", "c"]
    (new_request,) = later.run_requests or []
    assert new_request.tags["dagster/asset_partition_range_start"] == "2024-01-01|c"
    assert scene.job.execute_in_process(instance=scene.instance, tags=new_request.tags).success
    assert scene.target("c") == [("c", 1)]

    quiet = scene.tick()
    assert not quiet.run_requests
    assert quiet.skip_message == (
        "0 cells of 0 units (of 3): a, b, c: 0 partitions: all 5 end at or before the cut-off "
        "2024-01-05T06:00:00Z (highest watermark 2024-01-05T06:00:00Z + abstinent 0d - grace 0d) | "
        f"no new unit ids | 3 unit id(s) from file '{listing}' (4 row(s), 1 refused: row 3 "
        f"'a/b': {refused[0]['reason']})"
    )


def test_a_from_in_the_future_says_when_the_first_cells_become_due(tmp_path: Path) -> None:
    """Issue 22, item 7: "0 cells" and when the first window of every unit becomes due."""
    scene = Scene(tmp_path, {"units": "a,b"}, **{"from": "2024-02-01"})  # now 2024-01-05T06:00
    tick = decide_grid_tick(scene.pipeline, ["a", "b"], scene.now)
    assert tick.requests == ()
    assert tick.message == (
        "0 cells of 0 units (of 2): a, b: 0 partitions: no window between from "
        "2024-02-01T00:00:00Z and to 2024-01-05T06:00:00Z; the first window becomes due at "
        "2024-02-01T00:00:00.001Z"
    )


def test_the_tick_caps_its_runs_and_says_what_waits(tmp_path: Path) -> None:
    raw_units = {"units": ",".join(f"u{i}" for i in range(5))}
    scene = Scene(tmp_path, raw_units)
    capped = scene.pipeline.model_copy(
        update={"sensor": scene.pipeline.sensor.model_copy(update={"max_runs_per_tick": 2})}
    )
    busy = {"2024-01-02|u0"}
    tick = decide_grid_tick(capped, [f"u{i}" for i in range(5)], scene.now, busy=busy)
    assert len(tick.due) == 25
    single, ranged = tick.requests  # u0: 01-01 alone (one key), 01-02 in flight, 01-03..05
    assert single.partition_key == "2024-01-01|u0"
    assert ranged.partition_key is None
    assert ranged.tags["dagster/asset_partition_range_start"] == "2024-01-03|u0"
    assert ranged.tags["dagster/asset_partition_range_end"] == "2024-01-05|u0"
    assert ranged.run_key == "answers|2024-01-03|u0..2024-01-05|u0|2024-01-01T00:00:00.000Z|a0"
    assert tick.message.endswith(
        "; 1 cell(s) wait for their runs in flight; 4 more run(s) (20 cells) left for the next "
        "ticks (sensor.max_runs_per_tick 2)"
    )
    assert tick.message.startswith(
        "25 cells of 5 units (of 5): u0, u1, u2, u3, u4: 5 partitions: 2024-01-01, 2024-01-02, "
        "2024-01-03, 2024-01-04, 2024-01-05 (partial, to 2024-01-05T06:00:00Z) have no history"
    )


@pytest.mark.spark
def test_an_answer_moved_to_a_newer_cell_leaves_its_old_cell_with_merge_keys(
    spark: Any, tmp_path: Path
) -> None:
    """Answer a/10 moves from 2024-01-01 (never re-run) to 2024-01-04: re-running a's 01-04
    cell removes the old copy in the same commit (``rows/moved``); b is never touched."""
    scene = Scene(tmp_path, {"units": "a,b"}, merge_keys=["survey_id", "answer"])
    scene.source.put(*ANSWERS)
    scene.run("2024-01-01|a", "2024-01-04|a")
    scene.run("2024-01-01|b", "2024-01-04|b")
    b_rows = scene.target("b")

    scene.source.put(answer("a", 10, "2024-01-04T23:00"))
    rerun = scene.run("2024-01-04|a")

    assert scene.target("a") == [("a", n) for n in (10, 11, 20, 21, 30, 31, 40, 41)]
    assert scene.target("b") == b_rows
    assert (rerun["rows/read"], rerun["rows/removed"], rerun["rows/moved"]) == (3, 2, 1)


# --- a crash between staging and the commit ---


@pytest.mark.spark
def test_a_run_killed_before_its_commit_leaves_the_cell_due_and_its_re_run_commits_once(
    spark: Any, tmp_path: Path
) -> None:
    scene = Scene(tmp_path, {"units": "a,b"})
    scene.source.put(*ANSWERS)
    scene.run("2024-01-01|a")
    config = tmp_path / "pipelines.yaml"
    config.write_text(
        yaml.safe_dump(
            {"spark": {"master": "local[1]", "conf": TEST_SPARK_CONF}, "pipelines": [scene.raw]}
        ),
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "WATERMARK_ASSETS_CONFIG": str(config),
        CRASH_ENV_VAR: "after_data_written",
        "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)]),
    }
    victim = subprocess.run(
        [sys.executable, str(TESTS / "_crash_run.py"), "answers", "2024-01-02|a"],
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert victim.returncode == -9, victim.stderr.decode()[-2000:]
    assert scene.version() == 0, "nothing committed"
    spec = scene.pipeline.watermark.time.spec  # type: ignore[union-attr]
    due = due_cells(load_grid_watermark(scene.pipeline), ["a"], spec, scene.now)
    assert [cell_key(spec, c) for c in due.cells][:1] == ["2024-01-02|a"]

    rerun = scene.run("2024-01-02|a")
    assert rerun["delta/versions"] == [1]
    assert scene.target() == [("a", 10), ("a", 11), ("a", 20), ("a", 21)]
