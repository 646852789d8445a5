"""A file pipeline whose landing files change their columns: ``schema.mode`` decides, nothing is
silent (issue 25, the read side).

The issue's four cases, each a table row per mode: a CSV header that gains a column in the middle
(it used to shift values), a CSV/JSON column that turns from int to string, a Parquet column that
does (it used to fail with Spark's raw FAILED_READ_FILE), and a Parquet/CSV column added at the end
(it used to be dropped). Pure tests for the ``schema:`` model and the layout comparison; Spark tests
run the real sensor and job (in process) against a real Delta table.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _landing import FROZEN_NOW, plan_day
from _sensor_loop import SensorLoop
from conftest import pipeline_yaml, project_config
from dagster import DagsterInstance
from deltalake import DeltaTable
from test_column_schema_modes import PER_COLUMN, per_column

from watermark_assets.config.schema import SchemaMode, SchemaPolicy
from watermark_assets.defs import build_definitions
from watermark_assets.exceptions import ConfigError, SchemaChangeError
from watermark_assets.kinds.file_path.stage import stage_batch
from watermark_assets.sources.schema_drift import (
    ColumnChange,
    ValueSample,
    changes,
    holds,
    new_columns,
)
from watermark_assets.sources.value_types import fits
from watermark_assets.staging import STAGING_DIR
from watermark_assets.state.load import load_state

SCHEMA = "id BIGINT, event_time TIMESTAMP, name STRING"
DECLARED = [("id", "bigint"), ("event_time", "timestamp"), ("name", "string")]
STAMP = "2024-01-28T10:00:00Z"


# --- the schema: model (pure) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "mode", "hints"),
    [
        pytest.param(None, SchemaMode.FAIL, {}, id="absent: fail"),
        pytest.param({"mode": "rescue"}, SchemaMode.RESCUE, {}, id="rescue"),
        pytest.param(
            {"mode": "add_columns", "hints": {"amount": "DECIMAL(10, 2)", "n": "int"}},
            SchemaMode.ADD_COLUMNS,
            {"amount": "decimal(10,2)", "n": "int"},
            id="hints in Spark's canonical spelling",
        ),
        pytest.param({"mode": "ignore"}, SchemaMode.IGNORE, {}, id="ignore"),
    ],
)
def test_the_schema_section_of_a_pipeline(
    tmp_path: Path, written: dict[str, Any] | None, mode: SchemaMode, hints: dict[str, str]
) -> None:
    extra = {} if written is None else {"schema": written}
    (pipeline,) = project_config(pipeline_yaml(tmp_path, **extra)).pipelines
    assert pipeline.schema_policy == SchemaPolicy(mode=mode, hints=hints)
    assert pipeline.source.schema_ddl == SCHEMA  # source.schema stays the DDL


@pytest.mark.parametrize(
    ("written", "said"),
    [
        pytest.param({"mode": "evolve"}, "schema.mode 'evolve' is not a mode", id="unknown mode"),
        pytest.param({"modes": "fail"}, "schema.modes: unknown key", id="a misspelt key"),
        pytest.param(
            {"hints": {"region": "STRNG"}},
            "schema.hints.region 'STRNG' is not a Spark type",
            id="bad type",
        ),
        pytest.param(
            {"hints": {"region": "INT, other INT"}}, "give one type only", id="two columns"
        ),
        pytest.param({"hints": {"region": "INT NOT NULL"}}, "give one type only", id="not null"),
    ],
)
def test_a_bad_schema_section_is_refused_naming_the_key(
    tmp_path: Path, written: dict[str, Any], said: str
) -> None:
    with pytest.raises(ConfigError, match="pipeline 'events'") as info:
        project_config(pipeline_yaml(tmp_path, schema=written))
    assert said in str(info.value)


def test_every_pipeline_kind_has_the_schema_section() -> None:
    from watermark_assets.config.shared import PipelineModel

    assert "schema_policy" in PipelineModel.model_fields
    assert PipelineModel.model_fields["schema_policy"].alias == "schema"


# --- the comparison (pure) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("declared", "found", "fits"),
    [
        ("bigint", "int", True),
        ("int", "bigint", False),
        ("double", "float", True),
        ("double", "int", True),
        ("double", "bigint", False),
        ("timestamp", "date", True),
        ("timestamp", "timestamp_ntz", True),
        ("decimal(12,2)", "decimal(10,2)", True),
        ("decimal(10,2)", "decimal(10,3)", False),
        ("bigint", "string", False),
        ("string", "int", False),
    ],
    ids=lambda v: str(v),
)
def test_which_footer_types_a_declared_type_holds(declared: str, found: str, fits: bool) -> None:
    assert holds(declared, found) is fits


def test_changes_name_the_file_the_column_and_both_types() -> None:
    layouts = {
        "a.csv": (("id", None), ("region", None), ("event_time", None), ("name", None)),
        "b.parquet": (("ID", "string"), ("event_time", "timestamp"), ("name", "string")),
        "c.parquet": (("id", "int"), ("event_time", "date"), ("name", "string")),
        "empty.csv": None,
    }
    found = changes(DECLARED, layouts)
    assert found == [
        ColumnChange("a.csv", "region", None, None),
        ColumnChange("b.parquet", "ID", "bigint", "string"),
    ]
    assert str(found[1]) == "file 'b.parquet' column 'ID' is string, the schema says bigint"
    assert "has a column 'region' the schema lacks" in str(found[0])


@pytest.mark.parametrize(
    ("declared", "value", "text", "parses"),
    [
        # what Spark 4's readers parse (checked against Spark's CSV and JSON readers)
        ("bigint", "4", True, True),
        ("bigint", "+4", True, True),
        ("bigint", "x4", True, False),
        ("bigint", "4.0", True, False),
        ("int", "3000000000", True, False),
        ("bigint", 4, False, True),
        ("bigint", "4", False, False),  # a quoted number is no JSON integer to Spark
        ("bigint", 4.0, False, False),
        ("bigint", True, False, False),
        ("int", 3000000000, False, False),
        ("double", "1.5d", True, True),
        ("double", "NaN", True, True),
        ("double", "Inf", True, True),
        ("double", "1,5", True, False),
        ("double", 4, False, True),
        ("double", "Infinity", False, True),
        ("double", "x", False, False),
        ("boolean", "TRUE", True, True),
        ("boolean", "yes", True, False),
        ("boolean", "true", False, False),
        ("boolean", True, False, True),
        ("date", "never", True, False),
        ("timestamp", 1706436000, False, True),
        ("date", 19000, False, False),
        ("string", {"a": 1}, False, True),
        ("bigint", {"a": 1}, False, False),
        # lenient where Spark's rules are options: never stop on values Spark reads
        ("date", "28/01/2024", True, True),
        ("timestamp", "10:00:00", True, True),
        ("decimal(5,2)", "1,000.5", True, True),
        ("bigint", " 4 ", True, True),
        ("array<int>", "x", False, True),
    ],
    ids=lambda v: repr(v),
)
def test_which_csv_and_json_values_a_declared_type_reads(
    declared: str, value: object, text: bool, parses: bool
) -> None:
    assert fits(declared, value, text=text) is parses


def _csv(**values: tuple[str, ...]) -> ValueSample:
    return ValueSample(values, text=True)


def _json(**values: tuple[object, ...]) -> ValueSample:
    return ValueSample(values, text=False)


LAYOUT = (("id", None), ("event_time", None), ("name", None))


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        pytest.param(_csv(id=("x1", "x2", "x3")), [("id", "string")], id="CSV ids turned text"),
        pytest.param(_json(id=("x1", "x2", "x3")), [("id", "string")], id="JSON ids turned text"),
        pytest.param(_json(id=("1", "2", "3")), [("id", "string")], id="JSON ids quoted"),
        pytest.param(_json(id=(1.5, 2.5, 3.0)), [("id", "double")], id="JSON ids turned floats"),
        pytest.param(_json(id=({"a": 1},) * 3), [("id", "struct")], id="JSON ids turned objects"),
        pytest.param(
            _csv(id=("1", "x2", "3")),
            [],
            id="one bad value among good ones: malformed, not a change",
        ),
        pytest.param(_csv(id=("x1", "x2")), [], id="too few values to tell: malformed"),
        pytest.param(_csv(id=()), [], id="no value: nothing to tell"),
        pytest.param(
            _csv(event_time=("never", "soon", "later")),
            [("event_time", "string")],
            id="timestamps without a digit",
        ),
        pytest.param(_csv(name=("1", "2", "3")), [], id="a string holds anything"),
        pytest.param(
            ValueSample({"id": ("N/A",) * 3}, text=True, float_words=frozenset({"N/A"})),
            [("id", "string")],
            id="the reader's nanValue is a double, not a bigint",
        ),
    ],
)
def test_a_csv_or_json_column_is_a_type_change_when_none_of_its_sampled_values_fit(
    sample: ValueSample, expected: list[tuple[str, str]]
) -> None:
    found = changes(DECLARED, {"f": LAYOUT}, samples={"f": sample})
    assert [(c.column, c.found) for c in found] == expected
    assert all(c.declared == dict(DECLARED)[c.column] for c in found)
    assert changes(DECLARED, {"f": LAYOUT}) == []  # without samples: not judged, as before


def test_a_sampled_type_change_says_it_was_told_from_the_values() -> None:
    (change,) = changes(DECLARED, {"a.csv": LAYOUT}, samples={"a.csv": _csv(id=("x",) * 4)})
    assert change == ColumnChange("a.csv", "id", "bigint", "string", sampled=4)
    assert str(change) == (
        "file 'a.csv' column 'id' holds string values (all 4 in its first records), the schema "
        "says bigint"
    )
    error = SchemaChangeError("events", "fail", [change])
    assert "a.csv" in str(error) and "schema.mode: rescue" in str(error)
    assert "ignore" in str(error) and "source.schema" in str(error)


def test_new_columns_take_the_hint_then_the_footer_then_string() -> None:
    found = [
        ColumnChange("a", "region", None, None),
        ColumnChange("b", "Amount", None, "int"),
        ColumnChange("c", "amount", None, "bigint"),
        ColumnChange("d", "code", None, "int"),
    ]
    hints = {"code": "string"}
    assert new_columns(found, hints.get) == {"region": "string", "Amount": "int", "code": "string"}


def test_the_error_says_the_fix() -> None:
    new = SchemaChangeError("events", "fail", [ColumnChange("a.csv", "region", None, None)])
    assert "schema.mode: add_columns" in str(new) and "Nothing was written" in str(new)
    typed = SchemaChangeError(
        "events", "add_columns", [ColumnChange("b", "id", "bigint", "string")]
    )
    assert "declare the column's type in source.schema as the type its values hold" in str(typed)


# --- real runs (Spark, Delta, the sensor and job in process) ----------------------------------

Writer = Callable[[Path, str, int], str]


def _rows(first: int) -> list[dict[str, Any]]:
    return [{"id": i, "event_time": STAMP, "name": f"e{i}"} for i in range(first, first + 3)]


def csv_old(folder: Path, name: str, first: int) -> str:
    lines = ["id,event_time,name", *[f"{r['id']},{STAMP},{r['name']}" for r in _rows(first)]]
    (folder / f"{name}.csv").write_text("\n".join(lines) + "\n", "utf-8")
    return f"{name}.csv"


def csv_middle(folder: Path, name: str, first: int) -> str:
    """``region`` between id and event_time (by position it shifted every value after it)."""
    rows = [f"{r['id']},eu,{STAMP},{r['name']}" for r in _rows(first)]
    (folder / f"{name}.csv").write_text("\n".join(["id,region,event_time,name", *rows]) + "\n")
    return f"{name}.csv"


def csv_end(folder: Path, name: str, first: int) -> str:
    rows = [f"{r['id']},{STAMP},{r['name']},eu" for r in _rows(first)]
    (folder / f"{name}.csv").write_text("\n".join(["id,event_time,name,region", *rows]) + "\n")
    return f"{name}.csv"


def csv_id_text(folder: Path, name: str, first: int) -> str:
    rows = [f"x{r['id']},{STAMP},{r['name']}" for r in _rows(first)]
    (folder / f"{name}.csv").write_text("\n".join(["id,event_time,name", *rows]) + "\n")
    return f"{name}.csv"


def csv_one_bad_id(folder: Path, name: str, first: int) -> str:
    """Only the middle record's id is not a number: a malformed record, not a type change."""
    rows = [
        f"{'x' if i == 1 else ''}{r['id']},{STAMP},{r['name']}" for i, r in enumerate(_rows(first))
    ]
    (folder / f"{name}.csv").write_text("\n".join(["id,event_time,name", *rows]) + "\n")
    return f"{name}.csv"


def json_one_bad_id(folder: Path, name: str, first: int) -> str:
    rows = [r | {"id": f"x{r['id']}"} if i == 1 else r for i, r in enumerate(_rows(first))]
    (folder / f"{name}.ndjson").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f"{name}.ndjson"


def json_old(folder: Path, name: str, first: int) -> str:
    (folder / f"{name}.ndjson").write_text("".join(json.dumps(r) + "\n" for r in _rows(first)))
    return f"{name}.ndjson"


def json_id_text(folder: Path, name: str, first: int) -> str:
    rows = [r | {"id": f"x{r['id']}"} for r in _rows(first)]
    (folder / f"{name}.ndjson").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f"{name}.ndjson"


def _parquet(folder: Path, name: str, first: int, id_type: pa.DataType, region: bool) -> str:
    rows = [
        r | {"id": (f"x{r['id']}" if id_type == pa.string() else r["id"]), "event_time": FROZEN_NOW}
        for r in _rows(first)
    ]
    fields = [("id", id_type), ("event_time", pa.timestamp("us", tz="UTC")), ("name", pa.string())]
    if region:
        rows = [r | {"region": "eu"} for r in rows]
        fields.append(("region", pa.string()))
    table = pa.Table.from_pylist(rows, schema=pa.schema(fields))
    pq.write_table(table, folder / f"{name}.parquet")
    return f"{name}.parquet"


def parquet_old(folder: Path, name: str, first: int) -> str:
    return _parquet(folder, name, first, pa.int64(), False)


def parquet_id_text(folder: Path, name: str, first: int) -> str:
    return _parquet(folder, name, first, pa.string(), False)


def parquet_end(folder: Path, name: str, first: int) -> str:
    return _parquet(folder, name, first, pa.int64(), True)


@dataclass(frozen=True)
class Case:
    format: str
    old: Writer
    new: Writer
    mode: str
    #: None: the second run fails with SchemaChangeError naming this column
    fails_on: str | None = None
    #: (declared, found) the error names for ``fails_on`` (None: not checked)
    types: tuple[str, str] | None = None
    #: the second file's rows as committed: (id, name, _rescued_data without _file)
    rows: tuple[tuple[Any, str, dict[str, str] | None], ...] = ()
    metadata: tuple[tuple[str, Any], ...] = ()


def _ok(rescued: dict[str, str] | None = None, ids: bool = True) -> tuple[Any, ...]:
    return tuple((i if ids else None, f"e{i}", rescued) for i in (4, 5, 6))


CASES = [
    # 1. A CSV header gains a column in the middle.
    pytest.param(
        Case("csv", csv_old, csv_middle, "fail", fails_on="region"), id="CSV middle, fail"
    ),
    pytest.param(
        Case("csv", csv_old, csv_middle, "rescue", rows=_ok({"region": "eu"})),
        id="CSV middle, rescue: values stay in their columns, region rescued",
    ),
    pytest.param(
        Case(
            "csv",
            csv_old,
            csv_middle,
            "ignore",
            rows=_ok(),
            metadata=(("schema/ignored_columns", ["region"]), ("schema/values_nulled", {})),
        ),
        id="CSV middle, ignore: by name, region named",
    ),
    # 2. A CSV or JSON column turns from int to string.
    pytest.param(
        Case(
            "csv",
            csv_old,
            csv_id_text,
            "rescue",
            rows=tuple((None, f"e{i}", {"id": f"x{i}"}) for i in (4, 5, 6)),
            metadata=(("schema/values_rescued", {"id": 3}), ("schema/rows_rescued", 3)),
        ),
        id="CSV int to string, rescue",
    ),
    pytest.param(
        Case(
            "ndjson",
            json_old,
            json_id_text,
            "ignore",
            rows=_ok(ids=False),
            metadata=(("schema/values_nulled", {"id": 3}),),
        ),
        id="JSON int to string, ignore: NULL but counted",
    ),
    pytest.param(
        Case(
            "ndjson",
            json_old,
            json_id_text,
            "rescue",
            rows=tuple((None, f"e{i}", {"id": f"x{i}"}) for i in (4, 5, 6)),
        ),
        id="JSON int to string, rescue",
    ),
    pytest.param(
        Case(
            "csv",
            csv_old,
            csv_id_text,
            "ignore",
            rows=_ok(ids=False),
            metadata=(("schema/values_nulled", {"id": 3}),),
        ),
        id="CSV int to string, ignore: NULL but counted",
    ),
    pytest.param(
        Case("csv", csv_old, csv_id_text, "fail", fails_on="id", types=("bigint", "string")),
        id="CSV int to string, fail: stops before anything is written",
    ),
    pytest.param(
        Case("ndjson", json_old, json_id_text, "fail", fails_on="id", types=("bigint", "string")),
        id="JSON int to string, fail: stops before anything is written",
    ),
    pytest.param(
        Case(
            "ndjson",
            json_old,
            json_id_text,
            "add_columns",
            fails_on="id",
            types=("bigint", "string"),
        ),
        id="JSON int to string, add_columns still fails (a type change, as for Parquet)",
    ),
    pytest.param(
        Case(
            "csv",
            csv_old,
            csv_one_bad_id,
            "fail",
            rows=((4, "e4", None), (6, "e6", None)),
            metadata=(("rows/quarantined", 1),),
        ),
        id="CSV one id not a number among good ones, fail: that record quarantined (no change)",
    ),
    pytest.param(
        Case(
            "ndjson",
            json_old,
            json_one_bad_id,
            "fail",
            rows=((4, "e4", None), (6, "e6", None)),
            metadata=(("rows/quarantined", 1),),
        ),
        id="JSON one id not a number among good ones, fail: that record quarantined",
    ),
    # 3. A Parquet column turns from int to string.
    pytest.param(
        Case("parquet", parquet_old, parquet_id_text, "fail", fails_on="id"),
        id="Parquet int to string, fail (not FAILED_READ_FILE)",
    ),
    pytest.param(
        Case("parquet", parquet_old, parquet_id_text, "add_columns", fails_on="id"),
        id="Parquet int to string, add_columns still fails",
    ),
    pytest.param(
        Case(
            "parquet",
            parquet_old,
            parquet_id_text,
            "rescue",
            rows=tuple((None, f"e{i}", {"id": f"x{i}"}) for i in (4, 5, 6)),
        ),
        id="Parquet int to string, rescue",
    ),
    # 4. A Parquet or CSV column added at the end.
    pytest.param(
        Case("parquet", parquet_old, parquet_end, "fail", fails_on="region"), id="Parquet end, fail"
    ),
    pytest.param(Case("csv", csv_old, csv_end, "fail", fails_on="region"), id="CSV end, fail"),
    pytest.param(
        Case("parquet", parquet_old, parquet_end, "rescue", rows=_ok({"region": "eu"})),
        id="Parquet end, rescue",
    ),
]


def _files(root: Path) -> list[Path]:
    """The data, log and state files under ``root`` (not a run's hygiene marker)."""
    return sorted(p for p in root.rglob("*") if p.suffix in (".parquet", ".json", ".checkpoint"))


def _schema_error(error: BaseException) -> SchemaChangeError | None:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, SchemaChangeError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


@pytest.mark.spark
@pytest.mark.parametrize("case", CASES)
def test_a_landing_file_that_changed_its_columns(spark: Any, tmp_path: Path, case: Case) -> None:
    landing = tmp_path / "landing"
    folder = landing / "date=2024-01-28" / "hour=10"
    folder.mkdir(parents=True)
    source = {"uri": str(landing), "format": case.format, "schema": SCHEMA}
    config = project_config(pipeline_yaml(tmp_path, source=source, schema={"mode": case.mode}))
    loop = SensorLoop(
        build_definitions(config, clock=lambda: FROZEN_NOW), DagsterInstance.ephemeral()
    )
    case.old(folder, "1706436000-000001", 1)
    (request,) = loop.tick().run_requests or []
    assert loop.run(request).success
    table = str(tmp_path / "delta" / "events")
    version = DeltaTable(table).version()
    pipeline = config.pipeline("events")
    watermark = load_state(pipeline, now=FROZEN_NOW).watermark
    staged = _files(Path(table) / STAGING_DIR)

    new_file = case.new(folder, "1706436060-000004", 4)
    (request,) = loop.tick().run_requests or []
    before = _files(tmp_path / "delta")
    if case.fails_on is not None:
        with pytest.raises(Exception) as info:
            loop.run(request)
        error = _schema_error(info.value)
        assert error is not None, f"not a SchemaChangeError: {info.value}"
        assert "FAILED_READ_FILE" not in str(error)
        (change,) = [c for c in error.changes if c.column == case.fails_on]  # type: ignore[attr-defined]
        assert change.file == f"date=2024-01-28/hour=10/{new_file}"
        if case.types is not None:  # the file, the column, both types and the fix, in words
            assert (change.declared, change.found) == case.types
            said = str(error)
            assert all(w in said for w in (new_file, repr(case.fails_on), *case.types))
            assert "schema.mode: rescue" in said and "source.schema" in said
        assert DeltaTable(table).version() == version  # nothing committed
        assert _files(Path(table) / STAGING_DIR) == staged  # nothing staged
        assert _files(tmp_path / "delta") == before  # no data, log or state file written
        assert load_state(pipeline, now=FROZEN_NOW).watermark == watermark  # not moved
        return
    assert loop.run(request).success
    rows = DeltaTable(table).to_pyarrow_table().to_pylist()
    second = sorted(
        (r for r in rows if r["_source_file"].endswith(new_file)), key=lambda r: r["name"]
    )
    got = []
    for row in second:
        rescued = row.get("_rescued_data")
        parsed = None if rescued is None else json.loads(rescued)
        if parsed is not None:
            assert parsed.pop("_source").endswith(new_file)
        got.append((row["id"], row["name"], parsed))
        assert row["event_time"] is not None  # no value moved into another column
    assert tuple(got) == case.rows
    metadata = loop.metadata("2024-01-28")
    for key, value in case.metadata:
        said = per_column(metadata[key]) if key in PER_COLUMN else metadata[key]
        assert said == value, (key, metadata[key])


REFUSED = [case for case in CASES if case.values[0].fails_on is not None]


@pytest.mark.parametrize("case", REFUSED)
def test_a_batch_its_schema_mode_refuses_never_asks_for_spark(tmp_path: Path, case: Case) -> None:
    """The files' layouts are read before the run asks for its Spark session (which a run
    worker is still starting then): a batch that ``schema.mode`` refuses never waits for it."""
    folder = tmp_path / "landing" / "date=2024-01-28" / "hour=10"
    folder.mkdir(parents=True)
    new_file = case.new(folder, "1706436060-000004", 4)
    source = {"uri": str(tmp_path / "landing"), "format": case.format, "schema": SCHEMA}
    config = project_config(pipeline_yaml(tmp_path, source=source, schema={"mode": case.mode}))
    plan = plan_day(config.file_pipeline("events"), "2024-01-28", FROZEN_NOW)
    assert list(plan.files) == [f"date=2024-01-28/hour=10/{new_file}"]
    asked: list[str] = []

    def spark() -> Any:
        asked.append("spark")
        raise AssertionError("the run asked for its Spark session")

    with pytest.raises(SchemaChangeError) as refused:
        stage_batch(plan, spark, now=FROZEN_NOW)
    assert case.fails_on in [change.column for change in refused.value.changes]
    assert asked == []


@pytest.mark.spark
@pytest.mark.parametrize(
    ("fmt", "write", "hints", "region_type"),
    [
        pytest.param("csv", csv_end, {}, "string", id="CSV: a header column, STRING"),
        pytest.param("parquet", parquet_end, {}, "string", id="Parquet: the footer's type"),
        pytest.param("csv", csv_end, {"region": "STRING"}, "string", id="CSV with a hint"),
    ],
)
def test_add_columns_stages_the_new_column(
    spark: Any, tmp_path: Path, fmt: str, write: Writer, hints: dict[str, str], region_type: str
) -> None:
    """The staged frame carries the new column (nullable) for the commit to add; files
    without it give NULL (the commit side adds the column to the table)."""
    from watermark_assets.sources.landing_files import LandingFilesSource
    from watermark_assets.spark.batch import read_batch

    landing = tmp_path / "landing"
    folder = landing / "date=2024-01-28" / "hour=10"
    folder.mkdir(parents=True)
    source = {"uri": str(landing), "format": fmt, "schema": SCHEMA}
    schema = {"mode": "add_columns", "hints": hints}
    (pipeline,) = project_config(pipeline_yaml(tmp_path, source=source, schema=schema)).pipelines
    old = (csv_old if fmt == "csv" else parquet_old)(folder, "1706436000-000001", 1)
    new = write(folder, "1706436060-000004", 4)
    files = [f"date=2024-01-28/hour=10/{old}", f"date=2024-01-28/hour=10/{new}"]
    landing_source = pipeline.file_source
    assert isinstance(landing_source, LandingFilesSource)
    policy = landing_source._policy(files, SCHEMA)
    assert policy is not None and dict(policy.added) == {"region": region_type}
    assert policy.columns_added == (("region", region_type),)  # what the commit adds
    from watermark_assets.sources.files import FileBatch

    batch = FileBatch(tuple(files), dict.fromkeys(files, "2024-01-28"), "t", str(tmp_path / "q"))
    spec = landing_source._read_spec(batch, files, FROZEN_NOW, policy, SCHEMA)
    frame, _ = read_batch(spark, spec)
    field = frame.schema["region"]
    assert field.nullable and field.dataType.simpleString() == region_type
    got = sorted((r["id"], r["region"]) for r in frame.select("id", "region").collect())
    assert got == [(1, None), (2, None), (3, None), (4, "eu"), (5, "eu"), (6, "eu")]


@pytest.mark.spark
@pytest.mark.parametrize(
    ("fmt", "old", "new"),
    [
        pytest.param("csv", csv_old, csv_middle, id="CSV: a column in the middle"),
        pytest.param("ndjson", json_old, json_id_text, id="JSON: int to string"),
        pytest.param("parquet", parquet_old, parquet_id_text, id="Parquet: int to string"),
    ],
)
def test_rescue_reads_alike_on_s3_and_on_local_disk(
    spark: Any, s3_storage: Any, tmp_path: Path, fmt: str, old: Writer, new: Writer
) -> None:
    """Spark's own reader (local files) and the fsspec reader (S3 without s3a) rescue the same
    values: the layouts, the cast and the rescued JSON are the same code on both paths."""
    from watermark_assets import storage
    from watermark_assets.sources.file_columns import file_layouts
    from watermark_assets.spark import io
    from watermark_assets.spark.layouts import read_by_layout

    names = [old(tmp_path, "a", 1), new(tmp_path, "b", 4)]
    bucket = f"s3://{s3_storage.new_bucket()}/landing"
    fs, root = storage.filesystem(bucket)
    for name in names:
        fs.pipe(f"{root}/{name}", (tmp_path / name).read_bytes())
    declared = io.struct_of(spark, SCHEMA)

    options = {"header": "true"} if fmt == "csv" else None

    def rows(root: str) -> list[tuple[Any, ...]]:
        uris = [f"{root}/{name}" for name in names]
        read = read_by_layout(
            spark,
            uris,
            file_layouts(uris, fmt, options),
            format=fmt,
            declared=declared,
            mode="rescue",
            added={},
            options=options,
            corrupt_column=None if fmt == "parquet" else "_corrupt",
            file_column="_file_path",
        )
        found = []
        for row in read.frame.collect():
            rescued = json.loads(row["_rescued_data"]) if row["_rescued_data"] else None
            if rescued is not None:
                assert rescued.pop("_source").rsplit("/", 1)[1] == row["_file_path"].rsplit("/")[-1]
            found.append((row["id"], row["name"], row["event_time"] is not None, rescued))
        return sorted(found, key=lambda r: r[1])

    local = rows(str(tmp_path))
    assert local == rows(bucket)
    assert len(local) == 6 and all(r[2] for r in local)
    assert [r[3] for r in local if r[1] in ("e4", "e5", "e6")] == (
        [{"region": "eu"}] * 3 if fmt == "csv" else [{"id": "x4"}, {"id": "x5"}, {"id": "x6"}]
    )


def test_a_hint_pins_a_type_a_parquet_source_without_a_schema_infers(tmp_path: Path) -> None:
    """Without source.schema nor a table, the first footer gives the columns; a hint pins one
    (read from the footer, no Spark)."""
    from watermark_assets.sources.landing_files import LandingFilesSource

    folder = tmp_path / "landing" / "date=2024-01-28" / "hour=10"
    folder.mkdir(parents=True)
    name = _parquet(folder, "1706436000-000001", 1, pa.int32(), False)
    source = {"uri": str(tmp_path / "landing"), "format": "parquet", "schema": None}
    schema = {"hints": {"ID": "BIGINT"}}
    (pipeline,) = project_config(pipeline_yaml(tmp_path, source=source, schema=schema)).pipelines
    landing = pipeline.file_source
    assert isinstance(landing, LandingFilesSource)
    policy = landing._policy([f"date=2024-01-28/hour=10/{name}"], None)
    assert policy is not None
    assert policy.declared == (("id", "bigint"), ("event_time", "timestamp"), ("name", "string"))


@pytest.mark.spark
@pytest.mark.parametrize(
    ("fmt", "old", "new", "first_mode", "mode", "added"),
    [
        pytest.param(
            "csv", csv_old, csv_end, "add_columns", "add_columns", "region", id="CSV end"
        ),
        pytest.param(
            "parquet", parquet_old, parquet_end, "add_columns", "add_columns", "region",
            id="Parquet end",
        ),
        pytest.param(
            "csv", csv_old, csv_middle, "add_columns", "add_columns", "region",
            id="CSV middle",
        ),
        pytest.param(
            "csv", csv_old, csv_middle, "fail", "rescue", "_rescued_data",
            id="a table made under fail, then rescue: _rescued_data added",
        ),
    ],
)  # fmt: skip
def test_a_new_column_lands_in_the_commit_of_its_data(
    spark: Any,
    tmp_path: Path,
    fmt: str,
    old: Writer,
    new: Writer,
    first_mode: str,
    mode: str,
    added: str,
) -> None:
    """End to end, sensor -> run -> commit: the column a file brings (add_columns) or the
    rescue column becomes a nullable table column in the SAME Delta commit as the rows that
    brought it; the rows committed before read NULL in it."""
    landing = tmp_path / "landing"
    folder = landing / "date=2024-01-28" / "hour=10"
    folder.mkdir(parents=True)
    source = {"uri": str(landing), "format": fmt, "schema": SCHEMA}

    def loop_in(mode: str) -> SensorLoop:
        yaml = pipeline_yaml(tmp_path, source=source, schema={"mode": mode})
        defs = build_definitions(project_config(yaml), clock=lambda: FROZEN_NOW)
        return SensorLoop(defs, instance)

    instance = DagsterInstance.ephemeral()
    loop = loop_in(first_mode)
    old(folder, "1706436000-000001", 1)
    (request,) = loop.tick().run_requests or []
    assert loop.run(request).success
    table = str(tmp_path / "delta" / "events")
    before = DeltaTable(table)
    assert added not in before.schema().to_arrow().names

    later = loop_in(mode)
    later.cursor = loop.cursor
    new_file = new(folder, "1706436060-000004", 4)
    (request,) = later.tick().run_requests or []
    assert later.run(request).success
    after = DeltaTable(table)
    assert after.version() == before.version() + 1  # the column and its rows: ONE commit
    field = after.schema().to_arrow().field(added)
    assert field.nullable
    rows = after.to_pyarrow_table().to_pylist()
    assert {r["id"] for r in rows if r["_source_file"].endswith(new_file)} == {4, 5, 6}
    for row in rows:
        brought = row["_source_file"].endswith(new_file)
        if added == "region":
            assert row["region"] == ("eu" if brought else None)
        else:
            assert (row["_rescued_data"] is not None) == brought
            if brought:
                assert json.loads(row["_rescued_data"])["region"] == "eu"
