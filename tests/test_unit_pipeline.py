"""Unit pipelines end to end (seed 003, "Unit" watermark; issue 8 section 2).

Explicit ids become static partitions, a secondary input dynamic ones added by the sensor. A
unit's run reads the source's rows of that unit and replaces exactly them in ONE Delta commit,
with its txn and its watermark (done-at). Real Spark, real Delta tables on tmp_path; the sensor is
evaluated with ``build_sensor_context``/``evaluate_tick`` and its dynamic-partition requests
applied to the instance as the daemon does.
"""

from __future__ import annotations

import json
import shutil
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from conftest import local_instance, new_pg_database, project_config
from dagster import (
    Definitions,
    DynamicPartitionsDefinition,
    ExecuteInProcessResult,
    SensorResult,
    StaticPartitionsDefinition,
    TableMetadataValue,
    build_sensor_context,
)
from dagster._core.definitions.sensor_definition import SensorExecutionData
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from watermark_assets.config import UnitPipelineConfig
from watermark_assets.core.errors import UnitIdError
from watermark_assets.core.unit import DoneAt, UnitWatermark
from watermark_assets.defs import build_definitions
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.exceptions import ConfigError
from watermark_assets.kinds.unit.defs import queue_unit_runs
from watermark_assets.kinds.unit.run import (
    INNER_KIND,
    load_unit_watermark,
    plan_unit,
    run_units,
    unit_app_id,
    unit_spec,
    unit_watermark_key,
)
from watermark_assets.runs.column import ColumnRunRequest, commit_column_batch, stage_column_batch
from watermark_assets.sources.jdbc import postgres_jdbc_jar
from watermark_assets.vocabulary import table_rows, time_text

NOW = datetime(2026, 4, 3, 12, 0, tzinfo=timezone.utc)
PG_SERVER = "postgresql://postgres@127.0.0.1:5432"
SCHEMA = pa.schema([("survey_id", pa.string()), ("answer", pa.int64()), ("score", pa.float64())])
SPARK_SCHEMA = "survey_id STRING, answer BIGINT, score DOUBLE"


def answer(survey: str, number: int, score: float | None = None) -> dict[str, Any]:
    return {
        "survey_id": survey,
        "answer": number,
        "score": float(number) if score is None else score,
    }


class AnswersApi(BaseHTTPRequestHandler):
    """``GET /answers?survey=ID`` or ``GET /surveys/ID/answers``: that survey's answers; without
    a survey, all of them. Records each request's path."""

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
        rows = [r for r in self.rows.values() if survey is None or r["survey_id"] == survey]
        payload = json.dumps({"data": rows}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class Source:
    """The answers source in one of the column source types, rewritten whole on each change:
    ``delta_table``, ``parquet``, ``csv``, ``json``, ``jdbc`` (a PostgreSQL table),
    ``http_param`` (an API taking the unit as a query parameter) or ``http_path`` (the unit in the
    URL path)."""

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
        if self.kind == "delta_table":
            return {"type": "delta_table", "uri": str(self.uri)}
        if self.kind == "parquet":
            return {"type": "parquet", "uri": str(self.uri)}
        if self.kind == "jdbc":
            url = f"jdbc:postgresql://127.0.0.1:5432/{self.database}?user=postgres"
            return {"type": "jdbc", "url": url, "table": "answers"}
        if self._server is not None:
            base = f"http://127.0.0.1:{self._server.server_address[1]}"
            url = (
                f"{base}/answers"
                if self.kind == "http_param"
                else f"{base}/surveys/{{unit}}/answers"
            )
            return {"type": "http_api", "url": url, "schema": SPARK_SCHEMA}
        return {"type": self.kind, "uri": str(self.uri), "schema": SPARK_SCHEMA}  # csv, json

    def watermark(self) -> dict[str, Any]:
        """What the source needs in the unit watermark (the API's unit parameter)."""
        return {"unit_param": "survey"} if self.kind == "http_param" else {}

    def put(self, *rows: dict[str, Any]) -> None:
        for row in rows:
            self.rows[(row["survey_id"], row["answer"])] = row
        self._write()

    def delete(self, survey: str, number: int) -> None:
        del self.rows[(survey, number)]
        self._write()

    def of(self, survey: str) -> list[dict[str, Any]]:
        return sorted((r for r in self.rows.values() if r["survey_id"] == survey), key=_key)

    def _write(self) -> None:
        table = pa.Table.from_pylist(list(self.rows.values()), schema=SCHEMA)
        if self.kind == "delta_table":
            write_deltalake(str(self.uri), table, mode="overwrite")
            return
        if self.kind.startswith("http"):
            return  # the API serves self.rows
        if self.kind == "jdbc":
            with psycopg.connect(f"{PG_SERVER}/{self.database}", autocommit=True) as conn:
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS answers (survey_id text, answer bigint, "
                    "score double precision)"
                )
                conn.execute("DELETE FROM answers")
                with conn.cursor().copy("COPY answers FROM STDIN") as copy:
                    for row in self.rows.values():
                        copy.write_row((row["survey_id"], row["answer"], row["score"]))
            return
        shutil.rmtree(self.uri, ignore_errors=True)
        self.uri.mkdir(parents=True)
        if self.kind == "parquet":
            pq.write_table(table, self.uri / "part-0.parquet")
        elif self.kind == "json":
            lines = "".join(json.dumps(row) + "\n" for row in self.rows.values())
            (self.uri / "part-0.json").write_text(lines, encoding="utf-8")
        else:
            pacsv.write_csv(table, self.uri / "part-0.csv")


def _key(row: dict[str, Any]) -> tuple[str, int]:
    return (row["survey_id"], row["answer"])


def unit_pipeline(
    tmp_path: Path, source: dict[str, Any], watermark: dict[str, Any]
) -> dict[str, Any]:
    return {
        "name": "answers",
        "source": source,
        "watermark": {"kind": "unit", "column": "survey_id", **watermark},
        "table": {"uri": str(tmp_path / "delta" / "answers")},
    }


class Scene:
    """A unit pipeline over the answers source, its definitions and a Dagster instance."""

    def __init__(
        self,
        tmp_path: Path,
        watermark: dict[str, Any],
        source: Source | None = None,
        sensor: dict[str, Any] | None = None,
    ) -> None:
        self.source = source or Source(tmp_path, "delta_table")
        watermark = {**watermark, **self.source.watermark()}
        self.raw = unit_pipeline(tmp_path, self.source.config(), watermark)
        if sensor is not None:
            self.raw["sensor"] = sensor
        config = project_config(self.raw)
        pipeline = config.pipeline("answers")
        assert isinstance(pipeline, UnitPipelineConfig)
        self.pipeline = pipeline
        self.table = pipeline.table.uri
        self.defs = build_definitions(config, clock=lambda: self.now)
        self.now = NOW
        # a persistent instance: sensors resolve dynamic partition keys through its ref
        self.instance = local_instance(tmp_path / "dagster_home")
        self.job = self.defs.resolve_job_def("answers_job")
        self.cursor: str | None = None

    def run(self, unit: str) -> ExecuteInProcessResult:
        return self.job.execute_in_process(instance=self.instance, partition_key=unit)

    def target(self, survey: str | None = None) -> list[dict[str, Any]]:
        rows = DeltaTable(self.table).to_pyarrow_table(columns=["survey_id", "answer", "score"])
        return sorted(
            (r for r in rows.to_pylist() if survey is None or r["survey_id"] == survey), key=_key
        )

    def version(self) -> int | None:
        return DeltaCommitter(self.table).current_version()

    def tick(self) -> SensorExecutionData:
        context = build_sensor_context(
            instance=self.instance,
            instance_ref=self.instance.get_ref(),
            cursor=self.cursor,
            definitions=self.defs,
        )
        data = self.defs.resolve_sensor_def("answers_units_sensor").evaluate_tick(context)
        self.cursor = data.cursor
        for request in data.dynamic_partitions_requests:  # applied as the daemon does
            self.instance.add_dynamic_partitions(
                request.partitions_def_name, request.partition_keys
            )
        for event in data.asset_events:
            self.instance.report_runless_asset_event(event)
        return data

    def partitions(self) -> list[str]:
        return self.instance.get_dynamic_partitions("answers_units")


def metadata(result: ExecuteInProcessResult) -> dict[str, Any]:
    (materialization,) = result.asset_materializations_for_node("answers")
    return {key: value.value for key, value in materialization.metadata.items()}


def checks_passed(result: ExecuteInProcessResult) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


# --- configuration and partitions (no Spark) ---


def test_explicit_units_become_exactly_those_static_partitions(tmp_path: Path) -> None:
    scene = Scene(tmp_path, {"units": "id1,id2,id3"})
    partitions_def = scene.job.partitions_def
    assert isinstance(partitions_def, StaticPartitionsDefinition)
    assert partitions_def.get_partition_keys() == ["id1", "id2", "id3"]
    asset = scene.defs.resolve_assets_def("answers")
    assert asset.partitions_def == partitions_def
    assert [s.name for s in scene.defs.sensors or []] == []  # explicit ids: nothing to watch


def test_unit_pipelines_load_beside_the_other_kinds(tmp_path: Path) -> None:
    source = {"type": "delta_table", "uri": str(tmp_path / "s")}
    explicit = unit_pipeline(tmp_path, source, {"units": "id1,id2"})
    listed = {
        **unit_pipeline(
            tmp_path, source, {"secondary_input": write_ids(tmp_path / "i.csv", "csv", [])}
        ),
        "name": "listed",
        "table": {"uri": str(tmp_path / "delta" / "listed")},
    }
    column = {
        "name": "orders",
        "source": source,
        "watermark": {"columns": ["survey_id"]},
        "table": {"uri": str(tmp_path / "delta" / "orders")},
    }
    defs = build_definitions(project_config(explicit, listed, column), clock=lambda: NOW)
    Definitions.validate_loadable(defs)
    assert sorted(s.name for s in defs.sensors or []) == ["listed_units_sensor"]
    assert sorted(j.name for j in defs.jobs or []) == ["answers_job", "listed_job", "orders_job"]


@pytest.mark.parametrize(
    ("units", "refused", "row"),
    [
        pytest.param("id1,a/b,id3", "a/b", 2, id="a path separator"),
        pytest.param("id1,id2,x|y", "x|y", 3, id="the multi-partition separator"),
        pytest.param("id1,,id2", "", 2, id="an empty id"),
        pytest.param("id1,../etc", "../etc", 2, id="a parent directory"),
    ],
)
def test_a_bad_explicit_id_is_refused_at_load_naming_it_and_its_position(
    tmp_path: Path, units: str, refused: str, row: int
) -> None:
    source = {"type": "delta_table", "uri": str(tmp_path / "s")}
    with pytest.raises(ConfigError) as raised:
        project_config(unit_pipeline(tmp_path, source, {"units": units}))
    cause = raised.value.__cause__
    assert isinstance(cause, UnitIdError)
    assert (cause.unit_id, cause.row) == (refused, row)
    assert f"unit id {refused!r} (row {row} of watermark.units)" in str(raised.value)
    assert "'answers'" in str(raised.value)


@pytest.mark.parametrize(
    ("watermark", "source_type", "problem"),
    [
        pytest.param({}, "delta_table", "exactly one of units", id="no ids at all"),
        pytest.param(
            {"units": "a", "secondary_input": {"type": "file", "path": "ids.csv"}},
            "delta_table",
            "got both",
            id="both ways",
        ),
        pytest.param({"units": "a", "unit_param": "id"}, "delta_table", "unit_param", id="param"),
    ],
)
def test_a_unit_watermark_that_cannot_work_is_refused_at_load(
    tmp_path: Path, watermark: dict[str, Any], source_type: str, problem: str
) -> None:
    source = {"type": source_type, "uri": str(tmp_path / "s")}
    with pytest.raises(ConfigError, match=problem):
        project_config(unit_pipeline(tmp_path, source, watermark))


def test_kind_unit_must_be_written_and_takes_only_column_sources(tmp_path: Path) -> None:
    source = {"type": "delta_table", "uri": str(tmp_path / "s")}
    raw = unit_pipeline(tmp_path, source, {"units": "a"})
    assert isinstance(project_config(raw).pipelines[0], UnitPipelineConfig)
    files = {"type": "files", "uri": str(tmp_path / "landing"), "schema": "id BIGINT"}
    with pytest.raises(ConfigError, match=r"not watermark\.kind 'unit'"):
        project_config({**raw, "source": files})


# --- runs: one unit replaced in one commit ---

NO_JDBC = "the PostgreSQL JDBC driver /usr/share/java/postgresql.jar is missing: run `make jdbc`"
#: source type -> how the unit's predicate reaches it (the first run of unit id2)
SOURCE_KINDS = {
    "delta_table": "`survey_id` = 'id2'",
    "parquet": "`survey_id` = 'id2'",
    "csv": "`survey_id` = 'id2'",
    "json": "`survey_id` = 'id2'",
    "jdbc": "\"survey_id\" = 'id2'",
    "http_param": "query: survey=id2",
    "http_path": "query: (no parameter)",
}


@pytest.fixture
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Source]:
    """The answers source of the kind the test is parametrized with (jdbc: a database of its
    own, dropped at the end; http: a server on loopback)."""
    kind = request.param
    if kind != "jdbc":
        made = Source(tmp_path, kind)
        yield made
        made.close()
        return
    if postgres_jdbc_jar() is None:
        pytest.skip(NO_JDBC)
    with new_pg_database("wa_unitpipe") as name:
        yield Source(tmp_path, kind, database=name)


@pytest.mark.spark
@pytest.mark.parametrize("source", list(SOURCE_KINDS), indirect=True)
def test_a_units_run_replaces_only_that_units_rows_and_a_re_run_changes_nothing(
    tmp_path: Path, source: Source
) -> None:
    scene = Scene(tmp_path, {"units": "id1,id2,id3"}, source)
    source.put(*(answer(s, n) for s in ("id1", "id2", "id3") for n in (1, 2)))

    first = scene.run("id2")
    assert scene.target() == source.of("id2")
    meta = metadata(first)
    assert (meta["unit/id"], meta["rows/read"], meta["rows/committed"]) == ("id2", 2, 2)
    assert meta["watermark/before"] == "(first run)"
    assert meta["read/predicate"] == "`survey_id` = 'id2'"
    assert meta["read/pushed_down"] == SOURCE_KINDS[source.kind]
    if source.api is not None:  # the unit reached the API: only id2's answers were sent
        assert source.api.requests[0] in ("/answers?survey=id2", "/surveys/id2/answers")
    assert checks_passed(first) == {
        "watermark_never_moves_backwards": True,
        "rows_reconcile": True,
        "column_schema_change": True,
    }

    scene.run("id1")
    # At the source: id2 loses answer 1, changes answer 2, gains answer 3; id1 changes too.
    source.delete("id2", 1)
    source.put(answer("id2", 2, 20.0), answer("id2", 3), answer("id1", 1, 10.0))
    id1_before = scene.target("id1")
    second = scene.run("id2")
    assert scene.target("id2") == source.of("id2")
    assert scene.target("id1") == id1_before  # another unit's rows are never touched
    assert scene.target("id3") == []
    meta = metadata(second)
    assert (meta["rows/read"], meta["rows/committed"], meta["rows/removed"]) == (2, 2, 2)
    assert meta["watermark/before"] == time_text(NOW)

    table_before, version_before = scene.target(), scene.version()
    scene.now = NOW + timedelta(hours=1)
    again = scene.run("id2")
    assert scene.target() == table_before  # re-running leaves the table unchanged
    assert scene.version() == (version_before or 0) + 1  # in exactly one commit
    assert metadata(again)["watermark/after"] == time_text(scene.now)
    committer = DeltaCommitter(scene.table)
    assert committer.transaction_version(unit_app_id("answers", "id2")) == 3
    assert committer.transaction_version(unit_app_id("answers", "id1")) == 1
    done = load_unit_watermark(scene.table, "answers")
    assert {u: d.when for u, d in done.units.items() if d is not None} == {
        "id1": NOW,
        "id2": NOW + timedelta(hours=1),
    }


@pytest.mark.spark
def test_each_unit_commit_carries_its_txn_and_only_its_own_watermark(tmp_path: Path) -> None:
    scene = Scene(tmp_path, {"units": "id1,id2"})
    scene.source.put(answer("id1", 1), answer("id2", 1))
    scene.run("id1")
    scene.run("id2")
    commit = DeltaCommitter(scene.table).read_commit(scene.version() or 0)
    assert commit.txns == {unit_app_id("answers", "id2"): 1}
    carried = json.loads(commit.custom_metadata["watermark_assets.unit_watermark/answers"])
    assert json.loads(carried["watermark"]) == {
        "inner_kind": "done_at",
        "units": {"id2": {"ms": int(NOW.timestamp() * 1000)}},
    }


@pytest.mark.spark
def test_a_single_run_backfill_of_several_units_commits_once_per_unit(tmp_path: Path) -> None:
    scene = Scene(tmp_path, {"units": "id1,id2,id3"})
    scene.source.put(*(answer(s, n) for s in ("id1", "id2", "id3") for n in (1, 2)))
    result = scene.job.execute_in_process(
        instance=scene.instance,
        tags={
            "dagster/asset_partition_range_start": "id1",
            "dagster/asset_partition_range_end": "id3",
        },
    )
    assert scene.target() == sorted(scene.source.rows.values(), key=_key)
    meta = metadata_of_all(result)
    assert meta["unit/ids"] == ["id1", "id2", "id3"]
    # several units' done-at: a table, one row per unit (never a JSON object)
    assert table_rows(meta["watermark/after"]) == [
        {"unit": unit, "watermark": time_text(scene.now)} for unit in ("id1", "id2", "id3")
    ]
    assert meta["delta/versions"] == [0, 1, 2]
    # each unit's materialization states its own done-at
    states = {
        m.partition: (m.metadata["partition/state"].value, m.metadata["partition/watermark"].value)
        for m in result.asset_materializations_for_node("answers")
    }
    assert {key: state for key, (state, _) in states.items()} == dict.fromkeys(
        ["id1", "id2", "id3"], "done"
    )
    assert all(done.endswith("Z") for _, done in states.values()), states


def metadata_of_all(result: ExecuteInProcessResult) -> dict[str, Any]:
    materializations = result.asset_materializations_for_node("answers")
    return {key: value.value for key, value in materializations[0].metadata.items()}


# --- dynamic partitions from a secondary input ---


def write_ids(path: Path, kind: str, ids: list[str]) -> dict[str, Any]:
    """The secondary input listing ``ids`` (field ``id``), as its configuration."""
    if kind == "delta_table":
        table = pa.Table.from_pylist(
            [{"id": i} for i in ids], schema=pa.schema([("id", pa.string())])
        )
        write_deltalake(str(path), table, mode="overwrite")
        return {"type": "delta_table", "uri": str(path), "fields": ["id"]}
    path.write_text("id\n" + "".join(f"{i}\n" for i in ids), encoding="utf-8")
    return {"type": "file", "path": str(path), "fields": ["id"]}


@pytest.mark.parametrize("kind", ["csv", "delta_table"])
def test_the_sensor_adds_new_ids_as_partitions_with_a_run_each_and_never_removes_one(
    tmp_path: Path, kind: str
) -> None:
    listing = tmp_path / ("surveys.csv" if kind == "csv" else "surveys")
    scene = Scene(tmp_path, {"secondary_input": write_ids(listing, kind, ["s1", "s2"])})
    partitions_def = scene.job.partitions_def
    assert isinstance(partitions_def, DynamicPartitionsDefinition)
    assert partitions_def.name == "answers_units"

    first = scene.tick()
    assert scene.partitions() == ["s1", "s2"]
    assert [r.partition_key for r in first.run_requests or []] == ["s1", "s2"]

    quiet = scene.tick()
    assert not quiet.run_requests and not quiet.dynamic_partitions_requests
    assert "no new unit ids" in (quiet.skip_message or "")
    assert quiet.asset_events == []  # an unchanged report is not observed again

    write_ids(listing, kind, ["s2", "s3"])  # s3 appended, s1 gone from the input
    later = scene.tick()
    assert scene.partitions() == ["s1", "s2", "s3"]  # s1 kept
    assert [r.partition_key for r in later.run_requests or []] == ["s3"]
    (observation,) = later.asset_events
    text = observation.metadata["units/listing"].value
    assert "1 new unit id(s): s3" in str(text)
    assert "no longer listed (kept, with their history): s1" in str(text)


def test_a_tick_requests_at_most_max_runs_per_tick_and_the_others_on_later_ticks(
    tmp_path: Path,
) -> None:
    """500 new ids are 500 partitions at once, but at most ``max_runs_per_tick`` runs a tick;
    the others wait in the cursor, in order (no Dagster query per partition). (500, not 10,000:
    the same code path, and Dagster's SQLite takes minutes to store 10,000 dynamic partitions.)"""
    listing = tmp_path / "surveys.csv"
    ids = [f"s{i:05}" for i in range(500)]
    scene = Scene(
        tmp_path,
        {"secondary_input": write_ids(listing, "csv", ids)},
        sensor={"max_runs_per_tick": 100},
    )
    first = scene.tick()
    assert len(scene.partitions()) == 500
    assert [r.partition_key for r in first.run_requests or []] == ids[:100]
    (observation,) = first.asset_events
    assert observation.metadata["units/waiting"].value == 400

    # A waiting id removed from the input and deleted in the UI is dropped; a new id queues
    # behind the waiting ones.
    write_ids(listing, "csv", [*ids[:150], *ids[151:], "late"])
    scene.instance.delete_dynamic_partition("answers_units", ids[150])
    second = scene.tick()
    assert [r.partition_key for r in second.run_requests or []] == ids[100:150] + ids[151:201]
    assert scene.partitions()[-1] == "late"
    assert list(json.loads(scene.cursor or "")["requested"]) == [*ids[:150], *ids[151:201]]
    third = scene.tick()
    assert [r.partition_key for r in third.run_requests or []] == ids[201:301]
    ticks = [scene.tick() for _ in range(3)]
    assert [r.partition_key for r in ticks[1].run_requests or []] == [*ids[401:], "late"]
    assert not ticks[2].run_requests


def test_the_tick_says_how_many_units_are_due_and_requested() -> None:
    queued = queue_unit_runs(
        ["a", "b", "c", "d", "e"], done={"b"}, requested={"a": 0, "gone": 0}, cap=2
    )
    assert (queued.due, queued.requested, queued.waiting) == (3, {"c": 0, "d": 0}, ("e",))
    assert queued.in_flight == {"a": 0}  # 'gone' is no longer listed: forgotten
    assert queued.describe() == (
        "3 unit(s) never ran: 2 run(s) requested, 1 wait for later ticks "
        "(sensor.max_runs_per_tick 2); 1 requested earlier, not committed yet"
    )
    assert queue_unit_runs(["c"], done=set(), requested={}, cap=2).describe() == (
        "1 unit(s) never ran: 1 run(s) requested"
    )


@pytest.mark.parametrize(
    ("requested", "failed_runs", "asked", "in_flight"),
    [
        pytest.param({"a": 0}, {}, {}, {"a": 0}, id="a run in flight is not requested again"),
        pytest.param({"a": 0}, {"a": 1}, {"a": 1}, {}, id="its run failed: again as attempt 1"),
        pytest.param({"a": 1}, {"a": 1}, {}, {"a": 1}, id="attempt 1 in flight: not again"),
        pytest.param({"a": 1}, {"a": 2}, {"a": 2}, {}, id="attempt 1 failed too: attempt 2"),
        pytest.param({}, {"a": 1}, {"a": 1}, {}, id="a lost cursor: the next attempt"),
    ],
)
def test_a_unit_whose_requested_run_failed_is_due_again_under_its_next_attempt(
    requested: dict[str, int],
    failed_runs: dict[str, int],
    asked: dict[str, int],
    in_flight: dict[str, int],
) -> None:
    queued = queue_unit_runs(
        ["a"], done=set(), requested=requested, cap=5, failed_runs=lambda u: failed_runs.get(u, 0)
    )
    assert (queued.requested, queued.in_flight) == (asked, in_flight)
    if asked and requested:
        assert queued.describe() == (
            "1 unit(s) never ran: 1 run(s) requested (1 again after a failed run: a)"
        )


def record_units_done(table: str, units: list[str]) -> None:
    """Commit ``units``' completion as their runs do (their txn and their done-at entry in the
    commit's metadata), in one Delta commit without Spark: the sensor only reads that state."""
    watermark = UnitWatermark(INNER_KIND, {u: DoneAt.at(NOW) for u in units})
    write_deltalake(
        table,
        pa.Table.from_pylist([answer(u, 1) for u in units], schema=SCHEMA),
        mode="append",
        commit_properties=CommitProperties(
            custom_metadata={
                unit_watermark_key("answers"): json.dumps({"watermark": watermark.to_json()})
            },
            app_transactions=[Transaction(unit_app_id("answers", u), 1) for u in units],
        ),
    )


def requested(data: SensorExecutionData) -> list[str]:
    return [str(r.partition_key) for r in data.run_requests or []]


def test_a_lost_cursor_requests_the_460_of_500_units_that_never_ran_each_once(
    tmp_path: Path,
) -> None:
    """500 listed units, 40 with a committed run: a sensor whose cursor is lost (a new Dagster
    instance here: no partitions, no cursor) requests the 460 others, ``max_runs_per_tick`` a
    tick in listed order, never one twice, never a unit that ran; then says none is due."""
    ids = [f"s{i:05}" for i in range(500)]
    done = ids[::5][:40]
    scene = Scene(
        tmp_path,
        {"secondary_input": write_ids(tmp_path / "surveys.csv", "csv", ids)},
        sensor={"max_runs_per_tick": 100},
    )
    record_units_done(scene.table, done)
    never_ran = [u for u in ids if u not in done]

    ticks = [scene.tick() for _ in range(6)]
    asked = [requested(t) for t in ticks]
    assert [len(a) for a in asked] == [100, 100, 100, 100, 60, 0]
    assert [u for a in asked for u in a] == never_ran  # each once, in listed order
    assert ticks[0].asset_events[0].metadata["units/waiting"].value == 360
    assert "0 unit(s) never ran: 0 run(s) requested; 460 requested earlier" in (
        ticks[-1].skip_message or ""
    )


@pytest.mark.parametrize(
    "lost",
    ["a new Dagster instance (no partitions, no cursor)", "a reset sensor (cursor cleared)"],
)
def test_a_sensor_whose_cursor_is_lost_requests_exactly_the_units_that_never_ran(
    tmp_path: Path, lost: str
) -> None:
    ids = ["s1", "s2", "s3", "s4"]
    scene = Scene(tmp_path, {"secondary_input": write_ids(tmp_path / "surveys.csv", "csv", ids)})
    first = scene.tick()
    assert requested(first) == ids
    record_units_done(scene.table, ["s1", "s3"])  # s2 and s4 never committed (runs failed)
    if lost.startswith("a new"):
        scene.instance = local_instance(tmp_path / "other_home")
    scene.cursor = None
    again = scene.tick()
    assert requested(again) == ["s2", "s4"]
    quiet = scene.tick()
    assert requested(quiet) == []
    assert "0 unit(s) never ran: 0 run(s) requested; 2 requested earlier, not committed yet" in (
        quiet.skip_message or ""
    )


def test_a_bad_id_in_the_secondary_input_is_reported_with_its_row_and_the_good_ones_added(
    tmp_path: Path,
) -> None:
    listing = tmp_path / "surveys.csv"
    scene = Scene(tmp_path, {"secondary_input": write_ids(listing, "csv", ["s1", "a/b", "s2"])})
    scene.instance.add_dynamic_partitions("answers_units", ["by/hand"])  # added in the UI
    data = scene.tick()
    assert scene.partitions() == ["by/hand", "s1", "s2"]
    (observation,) = data.asset_events
    refused = table_rows(observation.metadata["units/refused"])
    assert refused == [{"row": 3, "value": "a/b", "reason": refused[0]["reason"]}]
    assert "contains '/'" in refused[0]["reason"]
    assert "1 refused: row 3 'a/b'" in str(observation.metadata["units/input"].value)
    listing.write_text("id\ns1\na/b\ns2\n", encoding="utf-8")
    quiet = scene.tick()  # the same report: said in the tick, not observed again
    assert "row 3 'a/b'" in (quiet.skip_message or "")
    assert quiet.asset_events == []


#: ids in a CSV listing -> the refused rows (row: the header is row 1, value as read, a word of
#: the reason)
REFUSED_ROWS = {
    "a path separator": (["s1", "a/b", "s2"], [(3, "a/b", "'/'")]),
    "two refused, Dagster's separators": (
        ["x|y", "s1", "p[q"],
        [(2, "x|y", "'|'"), (4, "p[q", "'['")],
    ),
}


@pytest.mark.parametrize(("ids", "refused"), REFUSED_ROWS.values(), ids=REFUSED_ROWS.keys())
def test_the_refused_ids_are_a_table_of_row_value_and_reason(
    tmp_path: Path, ids: list[str], refused: list[tuple[int, str, str]]
) -> None:
    listing = tmp_path / "surveys.csv"
    scene = Scene(tmp_path, {"secondary_input": write_ids(listing, "csv", ids)})
    (observation,) = scene.tick().asset_events
    value = observation.metadata["units/refused"]
    assert isinstance(value, TableMetadataValue), value
    assert [(c.name, c.type) for c in value.schema.columns] == [
        ("row", "int"),
        ("value", "string"),
        ("reason", "string"),
    ]
    rows = table_rows(value)
    assert [(r["row"], r["value"]) for r in rows] == [(row, said) for row, said, _ in refused]
    for r, (_, _, word) in zip(rows, refused, strict=True):
        assert word in r["reason"], r


def test_ids_from_a_postgres_table_become_partitions(tmp_path: Path) -> None:
    name = f"wa_unitids_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{PG_SERVER}/test", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(f"{PG_SERVER}/{name}", autocommit=True) as conn:
            conn.execute("CREATE TABLE surveys (id text, n int)")
            conn.execute("INSERT INTO surveys VALUES ('s1', 1), (' s2', 2), ('s3', 3)")
        listing = {
            "type": "postgres",
            "conninfo": f"{PG_SERVER}/{name}",
            "query": "SELECT id FROM surveys ORDER BY n",
            "fields": ["id"],
        }
        scene = Scene(tmp_path, {"secondary_input": listing})
        data = scene.tick()
    finally:
        with psycopg.connect(f"{PG_SERVER}/test", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert scene.partitions() == ["s1", "s3"]
    (observation,) = data.asset_events
    assert table_rows(observation.metadata["units/refused"])[0]["row"] == 2  # ' s2': a space


def test_an_unreadable_secondary_input_skips_the_tick_and_changes_nothing(tmp_path: Path) -> None:
    listing = tmp_path / "surveys.csv"
    scene = Scene(tmp_path, {"secondary_input": write_ids(listing, "csv", ["s1"])})
    scene.tick()
    listing.unlink()
    data = scene.tick()
    assert "there is no file there" in (data.skip_message or "")
    assert scene.partitions() == ["s1"]


@pytest.mark.spark
def test_a_unit_added_by_the_sensor_is_materialized_by_its_run(tmp_path: Path) -> None:
    listing = tmp_path / "surveys.csv"
    scene = Scene(tmp_path, {"secondary_input": write_ids(listing, "csv", ["s1"])})
    scene.source.put(answer("s1", 1), answer("s2", 1), answer("s2", 2))
    scene.tick()
    write_ids(listing, "csv", ["s1", "s2"])
    (request,) = scene.tick().run_requests or []
    result = scene.job.execute_in_process(
        instance=scene.instance, partition_key=request.partition_key, tags=request.tags
    )
    assert result.success
    assert scene.target() == scene.source.of("s2")


@pytest.mark.spark
def test_a_new_instance_requests_only_the_units_whose_run_never_committed(tmp_path: Path) -> None:
    """The same as a lost cursor above, over units that really ran (their commits by Spark)."""
    listing = tmp_path / "surveys.csv"
    scene = Scene(tmp_path, {"secondary_input": write_ids(listing, "csv", ["s1", "s2", "s3"])})
    scene.source.put(answer("s1", 1), answer("s2", 1), answer("s3", 1))
    assert requested(scene.tick()) == ["s1", "s2", "s3"]
    assert scene.run("s2").success
    scene.instance, scene.cursor = local_instance(tmp_path / "new_home"), None
    assert requested(scene.tick()) == ["s1", "s3"]


@pytest.mark.spark
@pytest.mark.parametrize("cursor", ["kept", "lost"])
def test_a_failed_unit_run_gets_a_new_run_key_and_the_sensor_requests_it_again(
    tmp_path: Path, cursor: str
) -> None:
    """Dagster never forgets a run key: the sensor counts a unit's failed runs by their tag and
    requests the unit again under ``...|a1`` (whether its cursor remembers the request or was
    lost); that run commits the unit, and the next tick requests nothing."""
    listing = tmp_path / "surveys.csv"
    scene = Scene(tmp_path, {"secondary_input": write_ids(listing, "csv", ["s1"])})
    scene.source.put(answer("s1", 1), answer("s1", 2))
    (first,) = scene.tick().run_requests or []
    assert first.run_key == "answers|unit|s1|a0"

    commits = sorted((scene.source.uri / "_delta_log").glob("*.json"))
    kept = [path.read_bytes() for path in commits]
    for path in commits:  # the source cannot be read for a moment: the run fails
        path.write_text("not a Delta commit", encoding="utf-8")
    failed = scene.job.execute_in_process(
        instance=scene.instance, partition_key="s1", tags=first.tags, raise_on_error=False
    )
    assert not failed.success
    for path, content in zip(commits, kept, strict=True):
        path.write_bytes(content)

    if cursor == "lost":
        scene.cursor = None
    (again,) = scene.tick().run_requests or []
    assert (again.partition_key, again.run_key) == ("s1", "answers|unit|s1|a1")
    assert scene.job.execute_in_process(
        instance=scene.instance, partition_key="s1", tags=again.tags
    ).success
    assert scene.target() == scene.source.of("s1")
    assert requested(scene.tick()) == []


def _unused(_: SensorResult) -> None:  # keeps the import for readers of SensorResult
    pass


@pytest.mark.spark
def test_a_unit_whose_source_rows_were_all_deleted_loses_them_in_one_commit(
    tmp_path: Path,
) -> None:
    scene = Scene(tmp_path, {"units": "id1,id2"})
    scene.source.put(answer("id1", 1), answer("id2", 1), answer("id2", 2))
    scene.run("id1")
    scene.run("id2")
    scene.source.delete("id2", 1)
    scene.source.delete("id2", 2)
    version = scene.version() or 0
    meta = metadata(scene.run("id2"))
    assert (meta["rows/read"], meta["rows/removed"]) == (0, 2)
    assert scene.target() == scene.source.of("id1")
    assert scene.version() == version + 1
    again = metadata(scene.run("id2"))  # nothing left to remove: its completion is still recorded
    assert (again["rows/read"], again["rows/removed"], again["delta/versions"]) == (
        0,
        0,
        [version + 2],
    )


@pytest.mark.spark
def test_units_committing_concurrently_never_lose_each_others_rows_or_watermarks(
    spark: Any, tmp_path: Path
) -> None:
    """Unit id1 is planned and staged, then unit id2 runs and commits, then id1 commits: both
    units' rows and done-at values are in the table (per-unit txns and watermark entries)."""
    scene = Scene(tmp_path, {"units": "id1,id2"})
    scene.source.put(answer("id1", 1), answer("id2", 1))
    scene.run("id1")  # the table exists
    scene.source.put(answer("id1", 2), answer("id2", 2))
    pipeline = scene.pipeline
    request = ColumnRunRequest(pipeline=unit_spec(pipeline, "id1"), run_id="r1", clock=lambda: NOW)
    later = NOW + timedelta(minutes=1)
    staged = stage_column_batch(plan_unit(request, "id1", now=later), spark, now=later)
    run_units(pipeline, ["id2"], spark, run_id="r2", clock=lambda: later, log=lambda _: None)
    result = commit_column_batch(
        staged, now=later, replan=lambda: plan_unit(request, "id1", now=later)
    )
    assert result.outcome.version is not None
    assert scene.target() == sorted(scene.source.rows.values(), key=_key)
    done = load_unit_watermark(scene.table, "answers")
    assert {u: d.when for u, d in done.units.items() if d is not None} == {
        "id1": later,
        "id2": later,
    }


@pytest.mark.spark
def test_a_unit_runs_after_the_log_cleaned_up_commits_older_than_its_checkpoint(
    tmp_path: Path,
) -> None:
    """Log retention removes commit files older than a Delta checkpoint. A unit run keeps no
    column watermark, so it must not walk back through the log looking for one (that walk
    reaches the removed commits and fails with WatermarkHistoryLostError)."""
    scene = Scene(tmp_path, {"units": "id1,id2"})
    scene.source.put(answer("id1", 1), answer("id2", 1))
    scene.run("id1")
    scene.run("id2")
    DeltaTable(scene.table).create_checkpoint()
    (Path(scene.table) / "_delta_log" / f"{0:020d}.json").unlink()
    scene.source.put(answer("id1", 2))
    result = scene.run("id1")
    assert result.success
    assert metadata(result)["rows/read"] == 2
    assert scene.target() == sorted(scene.source.rows.values(), key=_key)
