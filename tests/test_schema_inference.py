"""A file pipeline without ``source.schema`` (``schema: {infer: true}``): the first run infers the
schema from a sample of its files, ``hints`` pin chosen columns, the commit that creates the table
stores it, and every later run reads with the table's columns (issue 25, item 2).

Pure tests for the value types, their merge, the sample reader and the ``schema:`` section; Spark
tests run the real sensor and job (in process) against a real Delta table: CSV and JSON lines, a
second file whose values would infer otherwise, a crash before the first commit, and two first
runs at once.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from _landing import FROZEN_NOW
from _sensor_loop import SensorLoop
from conftest import pipeline_yaml, project_config, s3_project
from dagster import DagsterInstance
from deltalake import DeltaTable

from watermark_assets import storage
from watermark_assets.defs import build_definitions
from watermark_assets.exceptions import ConfigError, SchemaInferenceError
from watermark_assets.names import SCHEMA_INFERRED_KEY
from watermark_assets.sources.schema_inference import (
    InferredSchema,
    infer_columns,
    infer_schema,
    inferred_note,
    merge,
    value_type,
)
from watermark_assets.sources.value_types import json_value_type

STAMP = "2024-01-28T10:00:00Z"
HOUR = "date=2024-01-28/hour=10"


def no_hint(name: str) -> str | None:
    return None


# --- the types (pure) -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        pytest.param("42", "bigint", id="digits: bigint"),
        pytest.param("-7", "bigint", id="a negative integer"),
        pytest.param("99999999999999999999", "string", id="beyond bigint: string"),
        pytest.param("2.5", "double", id="a decimal point: double"),
        pytest.param("1e3", "double", id="an exponent: double"),
        pytest.param("TRUE", "boolean", id="true in any case: boolean"),
        pytest.param("2024-02-29", "date", id="leap day: date"),
        pytest.param("2023-02-29", "string", id="no such day: string"),
        pytest.param("2024-01-28T10:00:00Z", "timestamp", id="ISO with Z: timestamp"),
        pytest.param("2024-01-28 10:00:00.123456+01:00", "timestamp", id="space, fraction, zone"),
        pytest.param("2024-01-28T25:00:00", "string", id="hour 25: string"),
        pytest.param("x4", "string", id="text"),
        pytest.param("", None, id="empty CSV value: no evidence"),
        pytest.param(None, None, id="JSON null: no evidence"),
        pytest.param(True, "boolean", id="JSON true (not an integer)"),
        pytest.param(7, "bigint", id="JSON integer"),
        pytest.param(2**64, "string", id="JSON integer beyond bigint"),
        pytest.param(0.5, "double", id="JSON float"),
        pytest.param({"a": 1}, "string", id="JSON object: its text"),
        pytest.param([1, 2], "string", id="JSON array: its text"),
    ],
)
def test_the_type_of_a_sampled_value(value: Any, kind: str | None) -> None:
    assert value_type(value) == kind


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        pytest.param(
            "42", "string", id="a quoted number: string (Spark's JSON reader reads no BIGINT)"
        ),
        pytest.param("true", "string", id="a quoted boolean: string"),
        pytest.param("2024-01-28", "date", id="a date in a string: date"),
        pytest.param("2024-01-28T10:00:00Z", "timestamp", id="a timestamp in a string"),
        pytest.param("", None, id="empty: no evidence"),
        pytest.param(42, "bigint", id="a JSON integer"),
    ],
)
def test_the_type_of_a_sampled_json_value(value: Any, kind: str | None) -> None:
    assert json_value_type(value) == kind
    samples = [[("id", value)], [("id", None)]]
    assert infer_columns(samples, no_hint, json_values=True) == (("id", kind or "string"),)


@pytest.mark.parametrize(
    ("first", "second", "merged"),
    [
        ("bigint", "bigint", "bigint"),
        ("bigint", "double", "double"),
        ("double", "bigint", "double"),
        ("date", "timestamp", "timestamp"),
        (None, "date", "date"),
        ("date", None, "date"),
        ("bigint", "boolean", "string"),
        ("timestamp", "double", "string"),
    ],
    ids=lambda v: str(v),
)
def test_two_types_merge_into_one_that_holds_both(
    first: str | None, second: str | None, merged: str
) -> None:
    assert merge(first, second) == merged


def test_columns_in_first_seen_order_merged_hinted_and_string_when_all_null() -> None:
    samples = [
        [("id", "1"), ("Amount", "2"), ("code", "007"), ("note", "")],
        [("ID", "2"), ("amount", "2.5"), ("code", "008"), ("note", None), ("late", "true")],
    ]
    hints = {"code": "string"}
    columns = infer_columns(samples, lambda name: hints.get(name.lower()))
    assert columns == (
        ("id", "bigint"),
        ("Amount", "double"),
        ("code", "string"),  # digits, pinned by the hint
        ("note", "string"),  # no value seen
        ("late", "boolean"),
    )


def test_the_sample_is_read_from_csv_and_gzip_json_lines(tmp_path: Path) -> None:
    (tmp_path / "a b.csv").write_text(
        "# a comment\nid;event_time;name\n1;2024-01-28T10:00:00Z;x\n2;;y\n"
    )
    with gzip.open(tmp_path / "c*.ndjson.gz", "wt") as handle:
        handle.write(
            '{"id": 1, "at": "2024-01-28", "tags": ["a"], "code": "7"}\nnot json\n{"id": 2.5}\n'
        )
    csv = infer_schema(str(tmp_path), ["a b.csv"], "csv", {"sep": ";", "comment": "#"}, no_hint)
    assert csv == InferredSchema(
        (("id", "bigint"), ("event_time", "timestamp"), ("name", "string")), ("a b.csv",)
    )
    assert csv.ddl == "`id` bigint, `event_time` timestamp, `name` string"
    ndjson = infer_schema(str(tmp_path), ["c*.ndjson.gz"], "ndjson", None, no_hint)
    assert ndjson.columns == (
        ("id", "double"),
        ("at", "date"),
        ("tags", "string"),
        ("code", "string"),  # a quoted number: Spark's JSON reader reads it as text only
    )


def test_a_sample_without_records_is_refused_naming_the_fix(tmp_path: Path) -> None:
    (tmp_path / "empty.ndjson").write_text("\n")
    (tmp_path / "broken.ndjson.gz").write_text('{"id": 1}\n')  # not gzip: passed over
    with pytest.raises(SchemaInferenceError, match=r"found no column .* give source.schema"):
        infer_schema(str(tmp_path), ["empty.ndjson", "broken.ndjson.gz"], "ndjson", None, no_hint)


def test_the_table_column_says_it_was_inferred_and_from_which_files() -> None:
    inferred = InferredSchema((("id", "bigint"), ("code", "string")), ("a.csv", "b.csv"), ("code",))
    schema = inferred.stamped(
        pa.schema([("id", pa.int64()), ("code", pa.string()), ("x", pa.int8())])
    )
    notes = [
        inferred_note({k.decode(): v.decode() for k, v in (f.metadata or {}).items()})
        for f in schema
    ]
    assert notes == [
        "inferred as bigint when the table was created from 2 files: a.csv .. b.csv",
        "pinned by schema.hints as string when the table was created from 2 files: a.csv .. b.csv",
        None,
    ]
    assert [SCHEMA_INFERRED_KEY.encode() in (f.metadata or {}) for f in schema] == [
        True,
        True,
        False,
    ]


# --- the schema: section (pure) -------------------------------------------------------------


def test_infer_lets_a_csv_or_json_source_go_without_a_schema(tmp_path: Path) -> None:
    for fmt in ("csv", "ndjson"):
        source = {"format": fmt, "schema": None}
        schema = {"infer": True, "sample_files": 3, "hints": {"code": "STRING"}}
        (pipeline,) = project_config(
            pipeline_yaml(tmp_path, source=source, schema=schema)
        ).pipelines
        assert pipeline.source.schema_ddl is None
        assert pipeline.schema_policy.infer and pipeline.schema_policy.sample_files == 3
        assert (
            "schema is inferred (schema.infer) from the first run's first 3 files (pinned by "
            "schema.hints: code)" in pipeline.file_source.describe()
        )


def test_infer_on_another_source_type_is_refused(tmp_path: Path) -> None:
    pipeline = pipeline_yaml(tmp_path, schema={"infer": True})
    pipeline["source"] = {"type": "parquet_commit", "uri": str(tmp_path / "delta" / "events")}
    with pytest.raises(
        ConfigError, match=r"schema\.infer is true but this pipeline's source is 'parquet_commit'"
    ):
        project_config(pipeline)


@pytest.mark.parametrize(
    ("source", "schema", "said"),
    [
        pytest.param(
            {"schema": None},
            None,
            r"source.schema is required for format 'ndjson'.*schema: \{infer: true\}",
            id="neither a schema nor infer",
        ),
        pytest.param(
            {}, {"infer": True}, "schema.infer is true but source.schema is given", id="both"
        ),
        pytest.param(
            {"schema": None, "format": "parquet"},
            {"infer": True},
            "schema.infer needs files that name their columns",
            id="parquet",
        ),
        pytest.param(
            {"schema": None, "format": "csv", "csv_options": {"header": "false"}},
            {"infer": True},
            "schema.infer needs files that name their columns",
            id="headerless CSV",
        ),
        pytest.param(
            {"schema": None}, {"infer": True, "sample_files": 0}, "sample_files", id="no file"
        ),
    ],
)
def test_a_bad_inference_setting_is_refused_naming_the_fix(
    tmp_path: Path, source: dict[str, Any], schema: dict[str, Any] | None, said: str
) -> None:
    extra = {} if schema is None else {"schema": schema}
    with pytest.raises(ConfigError, match="pipeline 'events'") as info:
        project_config(pipeline_yaml(tmp_path, source=source, **extra))
    assert re.search(said, str(info.value)), str(info.value)


# --- end to end (Spark) ---------------------------------------------------------------------


def _rows(first: int, *, ids: bool = True) -> list[dict[str, Any]]:
    return [
        {"id": i if ids else f"x{i}", "event_time": STAMP, "name": f"e{i}", "code": f"00{i}"}
        for i in range(first, first + 3)
    ]


def write_rows(folder: Path, fmt: str, name: str, rows: list[dict[str, Any]]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        header = list(rows[0])
        lines = [",".join(header), *(",".join(str(r[c]) for c in header) for r in rows)]
        (folder / f"{name}.csv").write_text("\n".join(lines) + "\n")
        return f"{name}.csv"
    (folder / f"{name}.ndjson").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f"{name}.ndjson"


def _loop(tmp_path: Path, fmt: str, mode: str = "fail") -> SensorLoop:
    source = {"uri": str(tmp_path / "landing"), "format": fmt, "schema": None}
    schema = {"infer": True, "mode": mode, "hints": {"code": "STRING"}}
    config = project_config(pipeline_yaml(tmp_path, source=source, schema=schema))
    return SensorLoop(
        build_definitions(config, clock=lambda: FROZEN_NOW), DagsterInstance.ephemeral()
    )


def _types(tmp_path: Path) -> dict[str, str]:
    table = DeltaTable(str(tmp_path / "delta" / "events"))
    return {f["name"]: f["type"] for f in json.loads(table.schema().to_json())["fields"]}


def _metadata(loop: SensorLoop) -> dict[str, Any]:
    return {k: v.value for k, v in loop.materialization("2024-01-28").metadata.items()}


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["csv", "ndjson"])
def test_the_first_run_infers_and_later_runs_read_with_the_stored_schema(
    spark: Any, tmp_path: Path, fmt: str, capfd: pytest.CaptureFixture[str]
) -> None:
    loop = _loop(tmp_path, fmt, mode="rescue")
    folder = tmp_path / "landing" / HOUR
    first = write_rows(folder, fmt, "1706436000-000001", _rows(1))
    capfd.readouterr()
    (request,) = loop.tick().run_requests or []
    said = capfd.readouterr().err  # the tick's log line (Dagster's console logger)
    assert "schema: none stored yet; the first run infers it from its first 10 files" in said
    assert loop.run(request).success

    types = _types(tmp_path)
    assert {k: types[k] for k in ("id", "event_time", "name", "code")} == {
        "id": "long",
        "event_time": "timestamp",
        "name": "string",
        "code": "string",  # digits, pinned by the hint: "001" keeps its zeros
    }
    metadata = _metadata(loop)
    assert metadata["schema/inferred"] == {
        "columns": {"id": "bigint", "event_time": "timestamp", "name": "string", "code": "string"},
        "hinted": ["code"],
        "files": [f"{HOUR}/{first}"],
    }
    described = {c.name: c.description for c in metadata["dagster/column_schema"].columns}
    assert described["id"] == f"inferred as bigint when the table was created from {HOUR}/{first}"
    rows = DeltaTable(str(tmp_path / "delta" / "events")).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["code"]) for r in rows) == [(1, "001"), (2, "002"), (3, "003")]

    # ids that would infer as STRING now: read with the stored BIGINT, rescued (schema.mode)
    second = write_rows(folder, fmt, "1706436060-000004", _rows(4, ids=False))
    (request,) = loop.tick().run_requests or []
    assert loop.run(request).success
    assert _types(tmp_path)["id"] == "long"
    assert "schema/inferred" not in _metadata(loop)  # nothing inferred by this run
    rows = DeltaTable(str(tmp_path / "delta" / "events")).to_pyarrow_table().to_pylist()
    later = sorted((r for r in rows if r["_source_file"].endswith(second)), key=lambda r: r["name"])
    assert [(r["id"], json.loads(r["_rescued_data"])["id"]) for r in later] == [
        (None, "x4"),
        (None, "x5"),
        (None, "x6"),
    ]


@pytest.mark.spark
def test_a_new_column_after_inference_goes_through_schema_mode(spark: Any, tmp_path: Path) -> None:
    loop = _loop(tmp_path, "csv", mode="add_columns")
    folder = tmp_path / "landing" / HOUR
    write_rows(folder, "csv", "1706436000-000001", _rows(1))
    (request,) = loop.tick().run_requests or []
    assert loop.run(request).success
    write_rows(folder, "csv", "1706436060-000004", [r | {"region": "7"} for r in _rows(4)])
    (request,) = loop.tick().run_requests or []
    assert loop.run(request).success
    types = _types(tmp_path)
    assert types["id"] == "long" and types["region"] == "string"  # added as add_columns adds


@pytest.mark.spark
def test_a_crash_before_the_first_commit_infers_again(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import watermark_assets.kinds.file_path.commit as file_commit

    loop = _loop(tmp_path, "ndjson", mode="rescue")
    folder = tmp_path / "landing" / HOUR
    write_rows(folder, "ndjson", "1706436000-000001", _rows(1))
    (request,) = loop.tick().run_requests or []

    def crash(name: str) -> None:
        if name == "before_commit":
            raise RuntimeError("killed before the commit")

    monkeypatch.setattr(file_commit, "pause_point", crash)
    assert not loop.run(request, raise_on_error=False).success  # it inferred id BIGINT
    assert not (tmp_path / "delta" / "events" / "_delta_log").exists()  # nothing stored
    monkeypatch.undo()

    # nothing was stored: the next run infers again, now from both files (ids of text too)
    write_rows(folder, "ndjson", "1706436060-000004", _rows(4, ids=False))
    assert loop.run_partition("2024-01-28").success
    assert _types(tmp_path)["id"] == "string"
    assert len(_metadata(loop)["schema/inferred"]["files"]) == 2
    rows = DeltaTable(str(tmp_path / "delta" / "events")).to_pyarrow_table().to_pylist()
    assert sorted(r["id"] for r in rows) == ["1", "2", "3", "x4", "x5", "x6"]


@pytest.mark.spark
def test_two_first_runs_at_once_commit_one_schema(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run A infers id BIGINT; before it commits, run B (another day) infers id STRING and
    creates the table. A does not commit its BIGINT files: it plans again and reads with B's."""
    import watermark_assets.kinds.file_path.commit as file_commit

    loop = _loop(tmp_path, "ndjson", mode="fail")
    write_rows(tmp_path / "landing" / HOUR, "ndjson", "1706436000-000001", _rows(1))
    other = "date=2024-01-27/hour=10"
    write_rows(tmp_path / "landing" / other, "ndjson", "1706349600-000004", _rows(4, ids=False))
    requests = {r.partition_key: r for r in loop.tick().run_requests or []}
    assert set(requests) == {"2024-01-27", "2024-01-28"}
    interleaved: list[str] = []

    def meanwhile(name: str) -> None:
        if name == "before_commit" and not interleaved:
            interleaved.append("B")
            assert loop.run(requests["2024-01-27"]).success  # B creates the table first

    monkeypatch.setattr(file_commit, "pause_point", meanwhile)
    assert loop.run(requests["2024-01-28"]).success  # A: retried, read with B's schema
    assert interleaved == ["B"]
    table = DeltaTable(str(tmp_path / "delta" / "events"))
    assert _types(tmp_path)["id"] == "string"
    assert sorted(r["id"] for r in table.to_pyarrow_table().to_pylist()) == [
        "1",
        "2",
        "3",
        "x4",
        "x5",
        "x6",
    ]
    assert "schema/inferred" not in _metadata(loop)  # A's commit read the stored schema


@pytest.mark.spark
def test_inference_over_a_landing_folder_and_a_table_on_s3(
    spark: Any, s3_server: Any, tmp_path: Path
) -> None:
    """The same inference with the landing folder and the table in a bucket of moto's S3 server:
    the sample is read through s3fs, the table created with the inferred schema on S3."""
    bucket = s3_server.new_bucket()
    table_uri = f"s3://{bucket}/lake/events"
    source = {"uri": f"s3://{bucket}/landing", "format": "csv", "schema": None}
    schema = {"infer": True, "hints": {"code": "STRING"}}
    raw = pipeline_yaml(tmp_path, source=source, table={"uri": table_uri}, schema=schema)
    rows = _rows(1)
    text = "\n".join([",".join(rows[0]), *(",".join(str(v) for v in r.values()) for r in rows)])
    name = f"{HOUR}/1706436000-000001.csv"
    with s3_project(s3_server, raw) as config:
        s3_server.client().put_object(Bucket=bucket, Key=f"landing/{name}", Body=text.encode())
        loop = SensorLoop(
            build_definitions(config, clock=lambda: FROZEN_NOW), DagsterInstance.ephemeral()
        )
        (request,) = loop.tick().run_requests or []
        assert loop.run(request).success
        table = DeltaTable(table_uri, storage_options=storage.delta_options(table_uri))
        fields = json.loads(table.schema().to_json())["fields"]
        types = {f["name"]: f["type"] for f in fields}
        assert {k: types[k] for k in ("id", "event_time", "name", "code")} == {
            "id": "long",
            "event_time": "timestamp",
            "name": "string",
            "code": "string",
        }
        assert _metadata(loop)["schema/inferred"] == {
            "columns": {
                "id": "bigint",
                "event_time": "timestamp",
                "name": "string",
                "code": "string",
            },
            "hinted": ["code"],
            "files": [name],
        }
        found = table.to_pyarrow_table(columns=["id", "code"]).to_pylist()
        assert sorted((r["id"], r["code"]) for r in found) == [(1, "001"), (2, "002"), (3, "003")]
