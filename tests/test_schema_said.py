"""What the sensors, ``explain`` and ``summary`` say of a pipeline's schema (issue 25, items 2
and 3).

- The sensor of a pipeline over a column source (time, time x unit, units: a Delta table, a
  PostgreSQL table) reads the source's columns once when a run would start and says, in the
  tick's message and an observation ``schema/source_change``, which columns the source gained or
  retyped and what ``schema.mode`` does with them; the words are the file sensor's. Real Delta
  tables (the target as a first run leaves it, written by ``deltalake``), a real PostgreSQL
  table, real Dagster ticks (``evaluate_tick``); no Spark.
- ``explain PIPELINE`` has a schema line and ``summary`` a ``schema`` column: the mode, the
  table's columns and its last evolution (which Delta version, what changed, from where), or the
  files an inferred schema came from. Real Spark runs make the evolution and the inference.

Before: the column sources' sensors said nothing of a source's columns, and neither command
said anything of a schema.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest
import yaml
from _landing import FROZEN_NOW
from _sensor_loop import SensorLoop
from conftest import TEST_SPARK_CONF, local_instance, pipeline_yaml, project_config
from dagster import DagsterInstance, build_sensor_context
from dagster._core.definitions.sensor_definition import SensorExecutionData
from deltalake import DeltaTable, write_deltalake
from test_column_schema_modes import PG_SERVER, orders_database  # orders (id, updated_at, qty)

from watermark_assets.cli import main
from watermark_assets.defs import build_definitions

NOW = datetime(2020, 1, 3, 12, 0, tzinfo=timezone.utc)
SCHEMA_KEY = "schema/source_change"
BEFORE = pa.schema(
    [
        ("id", pa.int64()),
        ("updated_at", pa.timestamp("us", tz="UTC")),
        ("unit", pa.string()),
        ("qty", pa.int32()),
    ]
)


def rows(count: int) -> list[dict[str, Any]]:
    day = datetime(2020, 1, 1, 6, tzinfo=timezone.utc)
    return [{"id": i, "updated_at": day, "unit": "a", "qty": i} for i in range(1, count + 1)]


def write(uri: Path, schema: pa.Schema, records: list[dict[str, Any]]) -> None:
    table = pa.Table.from_pylist(records, schema=schema)
    write_deltalake(str(uri), table, mode="overwrite", schema_mode="overwrite")


def unchanged(uri: Path) -> None:
    write(uri, BEFORE, rows(3))


def gains_region(uri: Path) -> None:
    schema = BEFORE.append(pa.field("region", pa.string()))
    write(uri, schema, [{**r, "region": "north"} for r in rows(3)])


def widens_qty(uri: Path) -> None:
    schema = BEFORE.set(3, pa.field("qty", pa.int64()))
    write(uri, schema, rows(3))


def qty_as_text(uri: Path) -> None:
    schema = BEFORE.set(3, pa.field("qty", pa.string()))
    write(uri, schema, [{**r, "qty": str(r["qty"])} for r in rows(3)])


# --- the kinds whose sensor reads a column source: (raw pipeline, sensor name) ---


def time_kind(tmp_path: Path, source: dict[str, Any], mode: str) -> tuple[dict[str, Any], str]:
    return {
        "name": "orders",
        "source": source,
        "watermark": {"kind": "time", "column": "updated_at", "from": "2020-01-01"},
        "table": {"uri": str(tmp_path / "delta" / "orders")},
        "schema": {"mode": mode},
    }, "orders_sensor"


def grid_kind(tmp_path: Path, source: dict[str, Any], mode: str) -> tuple[dict[str, Any], str]:
    time = {"column": "updated_at", "from": "2020-01-01", "to": "P0D"}
    return {
        "name": "orders",
        "source": source,
        "watermark": {"kind": "unit", "column": "unit", "units": "a", "time": time},
        "table": {"uri": str(tmp_path / "delta" / "orders")},
        "schema": {"mode": mode},
    }, "orders_sensor"


def units_kind(tmp_path: Path, source: dict[str, Any], mode: str) -> tuple[dict[str, Any], str]:
    listing = tmp_path / "units.csv"
    listing.write_text("id\na\n", encoding="utf-8")
    return {
        "name": "orders",
        "source": source,
        "watermark": {
            "kind": "unit",
            "column": "unit",
            "secondary_input": {"type": "file", "path": str(listing), "fields": ["id"]},
        },
        "table": {"uri": str(tmp_path / "delta" / "orders")},
        "schema": {"mode": mode},
    }, "orders_units_sensor"


Kind = Callable[[Path, dict[str, Any], str], tuple[dict[str, Any], str]]
KINDS = {"time": time_kind, "time x unit": grid_kind, "units": units_kind}

FAIL_FIX = "the runs stop on them (schema.mode fail); to take them in, set schema.mode add_columns"
# (id, source change, mode, what the tick says after "in source '<uri>': "; None: nothing)
CASES: list[tuple[str, Callable[[Path], None], str, str | None]] = [
    ("an unchanged source: nothing said", unchanged, "add_columns", None),
    (
        "a new column under fail: the runs stop, and the fix",
        gains_region,
        "fail",
        f"columns the schema lacks: ['region'], in {{source}}: {FAIL_FIX} or rescue",
    ),
    (
        "a new column under add_columns: added to the table",
        gains_region,
        "add_columns",
        "columns the schema lacks: ['region'], in {source}: the runs add them to the table "
        "(schema.mode add_columns)",
    ),
    (
        "a new column under rescue: kept in _rescued_data",
        gains_region,
        "rescue",
        "columns the schema lacks: ['region'], in {source}: the runs keep them in _rescued_data "
        "(schema.mode rescue)",
    ),
    (
        "a new column under ignore: left out",
        gains_region,
        "ignore",
        "columns the schema lacks: ['region'], in {source}: the runs leave them out "
        "(schema.mode ignore)",
    ),
    (
        "an int widened to bigint under fail: the runs stop",
        widens_qty,
        "fail",
        "columns whose type changed: ['qty int -> bigint'], in {source}: the runs stop on them "
        "(schema.mode fail)",
    ),
    (
        "an int widened to bigint under add_columns: widened",
        widens_qty,
        "add_columns",
        "columns whose type changed: ['qty int -> bigint'], in {source}: the runs widen the "
        "table's columns (schema.mode add_columns)",
    ),
    (
        "an int turned string under add_columns: the runs stop, Delta cannot widen it",
        qty_as_text,
        "add_columns",
        "columns whose type changed: ['qty int -> string'], in {source}: the runs stop on "
        "['qty']: schema.mode add_columns widens only what Delta can (int -> bigint, float -> "
        "double, ...)",
    ),
    (
        "an int turned string under ignore: values that do not fit are NULL",
        qty_as_text,
        "ignore",
        "columns whose type changed: ['qty int -> string'], in {source}: values the table's "
        "type cannot hold become NULL (schema.mode ignore)",
    ),
]


def tick(defs: Any, instance: DagsterInstance, sensor: str) -> SensorExecutionData:
    """One tick, its new partitions and asset events recorded on the instance as the daemon
    records them."""
    context = build_sensor_context(
        instance=instance, instance_ref=instance.get_ref(), definitions=defs
    )
    data = defs.resolve_sensor_def(sensor).evaluate_tick(context)
    for request in data.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, request.partition_keys)
    for event in data.asset_events:
        instance.report_runless_asset_event(event)
    return data


def instance_in(tmp_path: Path) -> DagsterInstance:
    return local_instance(tmp_path / "dagster_home")


def said_of_schema(data: SensorExecutionData) -> list[str]:
    return [
        str(e.metadata[SCHEMA_KEY].value) for e in data.asset_events if SCHEMA_KEY in e.metadata
    ]


@pytest.mark.parametrize("kind", list(KINDS.values()), ids=list(KINDS))
@pytest.mark.parametrize(
    ("change", "mode", "expected"), [pytest.param(*c[1:], id=c[0]) for c in CASES]
)
def test_a_sensor_says_how_its_delta_source_changed_and_what_the_mode_does(
    tmp_path: Path,
    kind: Kind,
    change: Callable[[Path], None],
    mode: str,
    expected: str | None,
    capfd: pytest.CaptureFixture[str],
) -> None:
    source = tmp_path / "source" / "orders"
    raw, sensor = kind(tmp_path, {"type": "delta_table", "uri": str(source)}, mode)
    write(Path(raw["table"]["uri"]), BEFORE, rows(2))  # the table as a first run left it
    write(source, BEFORE, rows(2))
    change(source)
    defs = build_definitions(project_config(raw), clock=lambda: NOW)
    instance = instance_in(tmp_path)

    capfd.readouterr()
    data = tick(defs, instance, sensor)
    logged = capfd.readouterr().err  # the tick's log line (Dagster's console logger)
    assert data.run_requests, data.skip_message  # a run would start: the source was read
    if expected is None:
        assert said_of_schema(data) == []
        assert "schema" not in logged
        return
    text = expected.format(source=f"source {str(source)!r}")
    assert said_of_schema(data) == [text]
    assert text in logged
    assert said_of_schema(tick(defs, instance, sensor)) == []  # observed once, said each tick


def test_the_file_sensor_and_a_column_sources_sensor_use_the_same_words(tmp_path: Path) -> None:
    """The file sensor's words for a file's new column (``test_file_source_columns.py``) are the
    ones a column source's sensor uses, but where the column was seen."""
    from watermark_assets.defs.schema_notes import columns_note

    for mode, does in (
        ("ignore", "the runs leave them out (schema.mode ignore)"),
        ("fail", f"{FAIL_FIX} or rescue, or add them to source.schema"),
    ):
        where = "the newest file of 1 batch(es) requested"
        assert columns_note(["region"], where, mode, declared_by="source.schema") == (
            f" | columns the schema lacks: ['region'], in {where}: {does}"
        )


# --- a PostgreSQL source: one LIMIT 0 query, no Spark ---


@pytest.mark.parametrize(
    ("alter", "expected"),
    [
        pytest.param("", None, id="unchanged: its types read as Spark reads them, nothing said"),
        pytest.param(
            "ALTER TABLE orders ADD COLUMN region text, ADD COLUMN price numeric(10,2)",
            "columns the schema lacks: ['region', 'price'], in {source}: the runs add them to "
            "the table (schema.mode add_columns)",
            id="two new columns",
        ),
        pytest.param(
            "ALTER TABLE orders ALTER COLUMN qty TYPE bigint",
            "columns whose type changed: ['qty int -> bigint'], in {source}: the runs widen the "
            "table's columns (schema.mode add_columns)",
            id="int widened to bigint",
        ),
    ],
)
def test_a_time_sensor_over_postgresql_says_how_the_table_changed(
    tmp_path: Path, alter: str, expected: str | None
) -> None:
    with orders_database() as database:
        url = f"jdbc:postgresql://127.0.0.1:5432/{database}?user=postgres&ssl=false"
        source = {"type": "jdbc", "url": url, "table": "orders"}
        raw, sensor = time_kind(tmp_path, source, "add_columns")
        write(Path(raw["table"]["uri"]), BEFORE, rows(2))
        if alter:
            with psycopg.connect(f"{PG_SERVER}/{database}", autocommit=True) as conn:
                conn.execute(alter)
        defs = build_definitions(project_config(raw), clock=lambda: NOW)
        data = tick(defs, instance_in(tmp_path), sensor)
    assert data.run_requests
    if expected is None:
        assert said_of_schema(data) == []
    else:
        where = f"source {url + ' orders'!r}"  # the source's location: its URL and table
        assert said_of_schema(data) == [expected.format(source=where)]


def test_a_source_that_cannot_be_read_is_said_and_the_runs_still_start(tmp_path: Path) -> None:
    url = "jdbc:postgresql://127.0.0.1:1/nothing_here"
    raw, sensor = time_kind(tmp_path, {"type": "jdbc", "url": url, "table": "orders"}, "fail")
    write(Path(raw["table"]["uri"]), BEFORE, rows(2))
    defs = build_definitions(project_config(raw), clock=lambda: NOW)
    data = tick(defs, instance_in(tmp_path), sensor)
    assert data.run_requests
    (said,) = said_of_schema(data)
    where = f"source {url + ' orders'!r}"
    assert said.startswith(f"schema: the columns of {where} could not be read (connection ")
    assert said.endswith("; the run checks them")


def test_before_the_first_run_the_source_is_not_read(tmp_path: Path) -> None:
    """No table yet: nothing to compare (the first run creates it from the source's columns),
    so the tick reads no source, even one that is not there."""
    raw, sensor = time_kind(tmp_path, {"type": "delta_table", "uri": str(tmp_path / "no")}, "fail")
    defs = build_definitions(project_config(raw), clock=lambda: NOW)
    data = tick(defs, instance_in(tmp_path), sensor)
    assert data.run_requests and said_of_schema(data) == []


# --- explain and summary: the schema line (real Spark runs) ---


def cli(config: Path, *args: str, capfd: pytest.CaptureFixture[str]) -> list[str]:
    capfd.readouterr()
    assert main(["--config", str(config), *args]) == 0
    return capfd.readouterr().out.splitlines()


def summary_cell(lines: list[str], pipeline: str) -> str:
    """The ``schema`` cell (the last column) of ``pipeline``'s row of ``summary``."""
    for number, line in enumerate(lines):
        if line.startswith("pipeline  ") and line.rstrip().endswith("schema"):
            start = line.index("schema", len(line.rstrip()) - len("schema"))
            for row in lines[number + 2 :]:
                if not row.strip():
                    break
                if row.startswith(f"{pipeline} "):
                    return row[start:].strip()
    raise AssertionError(f"no row of {pipeline} in {lines}")


def write_config(tmp_path: Path, raw: dict[str, Any]) -> Path:
    path = tmp_path / "pipelines.yaml"
    config = {"spark": {"master": "local[2]", "conf": TEST_SPARK_CONF}, "pipelines": [raw]}
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.mark.spark
def test_explain_and_summary_say_the_schema_before_and_after_an_add_columns_evolution(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "source" / "orders"
    write(source, BEFORE, rows(2))
    raw = {
        "name": "orders",
        "source": {"type": "delta_table", "uri": str(source)},
        "watermark": {"columns": ["updated_at", "id"]},
        "table": {"uri": str(tmp_path / "delta" / "orders")},
        "schema": {"mode": "add_columns"},
    }
    config = write_config(tmp_path, raw)
    instance = DagsterInstance.ephemeral()
    job = build_definitions(project_config(raw), clock=lambda: NOW).resolve_job_def("orders_job")

    expected = [
        ("before the first run", "schema: add_columns, no table yet", "add_columns"),
        ("after it", "schema: add_columns, 4 table columns; no evolution recorded", "add_columns"),
        (
            "after the source gained a column",
            "schema: add_columns, 5 table columns; last evolution in Delta version 1: added "
            f"region (string) from {str(source)!r}",
            "add_columns (+1 @v1)",
        ),
    ]
    for step, line, cell in expected:
        if step == "after it":
            assert job.execute_in_process(instance=instance).success
        elif step.startswith("after the source"):
            gains_region(source)
            assert job.execute_in_process(instance=instance).success
            assert DeltaTable(raw["table"]["uri"]).version() == 1
        explained = cli(config, "explain", "orders", capfd=capfd)
        assert explained[1] == f"  {line}", (step, explained)
        assert summary_cell(cli(config, "summary", capfd=capfd), "orders") == cell, step


STAMPS = ("1706436000-000001", "1706436060-000002")


@pytest.mark.spark
def test_explain_and_summary_say_an_inferred_schema_and_its_files(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "landing" / "date=2024-01-28" / "hour=10"
    folder.mkdir(parents=True)
    for stamp in STAMPS:
        (folder / f"{stamp}.csv").write_text(
            "id,event_time,name\n1,2024-01-28T10:00:00Z,e1\n", encoding="utf-8"
        )
    source = {"uri": str(tmp_path / "landing"), "format": "csv", "schema": None}
    raw = pipeline_yaml(tmp_path, source=source, schema={"infer": True})
    loop = SensorLoop(
        build_definitions(project_config(raw), clock=lambda: FROZEN_NOW),
        DagsterInstance.ephemeral(),
    )
    (request,) = loop.tick().run_requests or []
    assert loop.run(request).success
    config = write_config(tmp_path, raw)

    explained = cli(config, "explain", "events", capfd=capfd)
    first, last = (f"date=2024-01-28/hour=10/{s}.csv" for s in STAMPS)
    columns = len(DeltaTable(raw["table"]["uri"]).schema().fields)
    assert explained[-1] == (
        f"schema: fail, {columns} table columns, inferred from 2 files: {first} .. {last}; "
        "no evolution recorded"
    ), explained
    assert summary_cell(cli(config, "summary", capfd=capfd), "events") == "fail (inferred: 2 files)"


# --- a column source over a folder of files: its newest files' footers, headers, keys ---

FOLDER_DDL = "id BIGINT, updated_at TIMESTAMP, unit STRING, qty INT"


def parquet_file(folder: Path, name: str, schema: pa.Schema, records: list[dict[str, Any]]) -> None:
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(records, schema=schema), folder / f"{name}.parquet")


def text_file(folder: Path, name: str, header: str, lines: list[str]) -> None:
    suffix = "json" if header == "" else "csv"
    (folder / f"{name}.{suffix}").write_text("\n".join(filter(None, [header, *lines])) + "\n")


def csv_lines(region: bool) -> tuple[str, list[str]]:
    """``region`` in the middle of the header when it is there."""
    if region:
        return "id,region,updated_at,unit,qty", [f"{i},n,2020-01-01T06:00:00,a,{i}" for i in (1, 2)]
    return "id,updated_at,unit,qty", [f"{i},2020-01-01T06:00:00,a,{i}" for i in (1, 2)]


def json_lines(region: bool) -> list[str]:
    extra = ', "region": "n"' if region else ""
    return [
        f'{{"id": {i}, "updated_at": "2020-01-01T06:00:00", "unit": "a", "qty": {i}{extra}}}'
        for i in (1, 2)
    ]


def folder_files(folder: Path, fmt: str, layouts: list[str]) -> None:
    """One file per entry of ``layouts`` (oldest first, their modification times a minute
    apart): ``same`` (the table's columns), ``region`` (a column more), ``qty text`` (qty a
    string: Parquet only)."""
    import os

    folder.mkdir(parents=True)
    for number, layout in enumerate(layouts):
        name = f"part-{number:03d}"
        region = layout == "region"
        if fmt == "parquet":
            schema = BEFORE.append(pa.field("region", pa.string())) if region else BEFORE
            records = [{**r, "region": "n"} if region else r for r in rows(2)]
            if layout == "qty text":
                schema = BEFORE.set(3, pa.field("qty", pa.string()))
                records = [{**r, "qty": str(r["qty"])} for r in rows(2)]
            parquet_file(folder, name, schema, records)
        elif fmt == "csv":
            text_file(folder, name, *csv_lines(region))
        else:
            text_file(folder, name, "", json_lines(region))
        stamp = 1_600_000_000 + 60 * number
        (path,) = folder.glob(f"{name}.*")
        os.utime(path, (stamp, stamp))


# (id, format, files oldest first, mode, what the tick says after "in {source}: "; None: nothing)
FOLDER_CASES: list[tuple[str, str, list[str], str, str | None]] = [
    ("Parquet, unchanged: nothing said", "parquet", ["same", "same"], "fail", None),
    (
        "Parquet, the newest footer gains a column: add_columns adds it",
        "parquet",
        ["same", "region"],
        "add_columns",
        "columns the schema lacks: ['region'], in {source}: the runs add them to the table "
        "(schema.mode add_columns)",
    ),
    (
        "Parquet, the newest footer says qty is a string: ignore nulls what does not fit",
        "parquet",
        ["same", "qty text"],
        "ignore",
        "columns whose type changed: ['qty int -> string'], in {source}: values the table's "
        "type cannot hold become NULL (schema.mode ignore)",
    ),
    (
        "Parquet, a column only a file older than the 3 newest holds: not read, nothing said",
        "parquet",
        ["region", "same", "same", "same"],
        "fail",
        None,
    ),
    (
        "CSV, the newest header gains a column in the middle: fail names the fix",
        "csv",
        ["same", "region"],
        "fail",
        f"columns the schema lacks: ['region'], in {{source}}: {FAIL_FIX} or rescue, or add "
        "them to source.schema",
    ),
    ("CSV, unchanged: nothing said", "csv", ["same", "same"], "fail", None),
    (
        "JSON lines, the newest records gain a key: rescue keeps it",
        "json",
        ["same", "region"],
        "rescue",
        "columns the schema lacks: ['region'], in {source}: the runs keep them in "
        "_rescued_data (schema.mode rescue)",
    ),
]


@pytest.mark.parametrize("kind", list(KINDS.values()), ids=list(KINDS))
@pytest.mark.parametrize(
    ("fmt", "layouts", "mode", "expected"), [pytest.param(*c[1:], id=c[0]) for c in FOLDER_CASES]
)
def test_a_sensor_says_how_its_folder_sources_newest_files_changed(
    tmp_path: Path,
    kind: Kind,
    fmt: str,
    layouts: list[str],
    mode: str,
    expected: str | None,
) -> None:
    folder = tmp_path / "source" / "orders"
    folder_files(folder, fmt, layouts)
    source: dict[str, Any] = {"type": fmt, "uri": str(folder)}
    if fmt != "parquet":
        source["schema"] = FOLDER_DDL
    raw, sensor = kind(tmp_path, source, mode)
    write(Path(raw["table"]["uri"]), BEFORE, rows(2))  # the table as a first run left it
    defs = build_definitions(project_config(raw), clock=lambda: NOW)
    data = tick(defs, instance_in(tmp_path), sensor)
    assert data.run_requests, data.skip_message  # a run would start: the folder was read
    if expected is None:
        assert said_of_schema(data) == []
    else:
        assert said_of_schema(data) == [expected.format(source=f"source {str(folder)!r}")]


# --- the file sensor: a CSV/JSON column whose sampled values turned another type ---

RETYPED_DDL = "id BIGINT, event_time TIMESTAMP, name STRING, qty INT"
WORDS = ["one", "two", "three", "four"]


def retyped_landing(folder: Path, fmt: str) -> None:
    """One landing file whose ``qty`` holds words, not the schema's INT."""
    folder.mkdir(parents=True)
    stamp = "2024-01-28T10:00:00Z"
    if fmt == "csv":
        lines = ["id,event_time,name,qty", *(f"{i},{stamp},e{i},{w}" for i, w in enumerate(WORDS))]
    else:
        lines = [
            f'{{"id": {i}, "event_time": "{stamp}", "name": "e{i}", "qty": "{w}"}}'
            for i, w in enumerate(WORDS)
        ]
    (folder / f"1706436000-000001.{fmt}").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("fmt", "mode", "does"),
    [
        pytest.param("csv", "fail", "the runs stop on them (schema.mode fail)", id="CSV, fail"),
        pytest.param(
            "csv",
            "add_columns",
            "the runs stop on ['qty']: schema.mode add_columns widens only what Delta can "
            "(int -> bigint, float -> double, ...)",
            id="CSV, add_columns: no widening to string",
        ),
        pytest.param(
            "csv",
            "rescue",
            "values the table's type cannot hold go to _rescued_data (schema.mode rescue)",
            id="CSV, rescue",
        ),
        pytest.param(
            "csv",
            "ignore",
            "values the table's type cannot hold become NULL (schema.mode ignore)",
            id="CSV, ignore",
        ),
        pytest.param(
            "ndjson", "fail", "the runs stop on them (schema.mode fail)", id="JSON lines, fail"
        ),
    ],
)
def test_a_file_sensor_tick_says_a_column_whose_values_turned_another_type(
    tmp_path: Path, fmt: str, mode: str, does: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """The tick reads the newest file of the batch it requests as the run does (its header or
    keys and its first records' values) and says what the run under ``schema.mode`` will do."""
    retyped_landing(tmp_path / "landing" / "date=2024-01-28" / "hour=10", fmt)
    source = {"uri": str(tmp_path / "landing"), "format": fmt, "schema": RETYPED_DDL}
    raw = pipeline_yaml(tmp_path, source=source, schema={"mode": mode})
    loop = SensorLoop(
        build_definitions(project_config(raw), clock=lambda: FROZEN_NOW),
        DagsterInstance.ephemeral(),
    )
    capfd.readouterr()
    data = loop.tick()
    logged = capfd.readouterr().err  # the tick's log line (Dagster's console logger)
    assert data.run_requests
    assert (
        " | columns whose type changed: ['qty int -> string'], in the newest file of 1 "
        f"batch(es) requested: {does}"
    ) in logged
    assert "columns the schema lacks" not in logged


def test_a_summary_rows_table_facts_come_from_one_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``summary`` says a table's rows, version and schema from ONE snapshot load (it loaded the
    table once per fact); a table that does not exist yet is 0 rows, no version, no columns."""
    from watermark_assets.delta import schema_summary as module

    uri = str(tmp_path / "table")
    assert module.table_facts(uri, "fail") == module.TableFacts(
        0, None, module.SchemaSummary("fail", None)
    )
    write_deltalake(uri, pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}))
    write_deltalake(uri, pa.table({"id": [4], "name": ["d"]}), mode="append")
    loads: list[str] = []
    opened = module._open
    monkeypatch.setattr(module, "_open", lambda u: loads.append(u) or opened(u))

    facts = module.table_facts(uri, "add_columns")

    assert (facts.rows, facts.version, facts.schema.columns) == (4, 1, 2)
    assert facts.schema.cell() == "add_columns"
    assert loads == [uri]
