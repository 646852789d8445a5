"""``schema.mode`` for column sources: a source whose columns change between two runs of a column
pipeline (its Dagster job in process, real Spark and Delta; a JDBC table in PostgreSQL).

Per source change x mode: the table after the run, the run's metadata, and a re-run that commits
nothing twice. Before column sources read ``schema:``, a Delta source gaining a column failed at
the commit (``SchemaEvolutionError``, after the rows were staged) whatever the mode, and a
widened column did too: no mode took a new column in, rescued or ignored it.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from conftest import project_config
from dagster import DagsterInstance, ExecuteInProcessResult
from deltalake import DeltaTable, write_deltalake

from watermark_assets.defs import build_definitions
from watermark_assets.delta.schema_change import schema_history
from watermark_assets.exceptions import SchemaChangeError
from watermark_assets.sources.jdbc import postgres_jdbc_jar
from watermark_assets.vocabulary import table_rows

pytestmark = pytest.mark.spark

NOW = datetime(2026, 4, 3, 12, 0, tzinfo=timezone.utc)
BIG = 2**40  # a bigint an int cannot hold


def at(hour: int) -> datetime:
    return datetime(2026, 4, 3, hour, tzinfo=timezone.utc)


BEFORE = pa.schema(
    [("id", pa.int64()), ("updated_at", pa.timestamp("us", tz="UTC")), ("qty", pa.int32())]
)
FIRST = [{"id": 1, "updated_at": at(1), "qty": 1}, {"id": 2, "updated_at": at(2), "qty": 2}]


def gains_a_column(uri: Path) -> None:
    schema = BEFORE.append(pa.field("region", pa.string()))
    rows = [{**r, "region": None} for r in FIRST] + [
        {"id": 3, "updated_at": at(3), "qty": 3, "region": "north"},
        {"id": 4, "updated_at": at(4), "qty": 4, "region": "south"},
    ]
    write_deltalake(
        str(uri),
        pa.Table.from_pylist(rows, schema=schema),
        mode="overwrite",
        schema_mode="overwrite",
    )


def widens_a_column(uri: Path) -> None:
    schema = pa.schema(
        [("id", pa.int64()), ("updated_at", pa.timestamp("us", tz="UTC")), ("qty", pa.int64())]
    )
    rows = [
        *FIRST,
        {"id": 3, "updated_at": at(3), "qty": 3},
        {"id": 4, "updated_at": at(4), "qty": BIG},
    ]
    write_deltalake(
        str(uri),
        pa.Table.from_pylist(rows, schema=schema),
        mode="overwrite",
        schema_mode="overwrite",
    )


def pipeline(name: str, source: dict[str, Any], tmp_path: Path, mode: str) -> dict[str, Any]:
    """A column pipeline ``name`` over ``source`` with ``schema.mode``."""
    return {
        "name": name,
        "source": source,
        "watermark": {"columns": ["updated_at", "id"]},
        "table": {"uri": str(tmp_path / "delta" / name)},
        "schema": {"mode": mode},
    }


def cause(error: BaseException) -> BaseException:
    """The SchemaChangeError Dagster wrapped (or the error itself)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, SchemaChangeError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return error


def rescued(value: str, column: str, source: str) -> str:
    return json.dumps({column: value, "_source": source}, separators=(",", ":"))


# (id, source change, mode, rows of the table after, metadata entries expected, error text)
CASES: list[
    tuple[
        str,
        Callable[[Path], None],
        str,
        Callable[[Path], list[dict[str, Any]]] | None,
        dict[str, Any],
        tuple[str, ...],
    ]
] = [
    (
        "a new column stops the run under fail, naming the source, the column and its type",
        gains_a_column,
        "fail",
        None,
        {},
        ("orders", "'region' (string)", "schema.mode: add_columns"),
    ),
    (
        "a new column joins the table under add_columns, NULL in the rows before",
        gains_a_column,
        "add_columns",
        lambda s: [
            {"id": 1, "qty": 1, "region": None},
            {"id": 2, "qty": 2, "region": None},
            {"id": 3, "qty": 3, "region": "north"},
            {"id": 4, "qty": 4, "region": "south"},
        ],
        {"schema/added_columns": ["region"]},
        (),
    ),
    (
        "a new column's values go to _rescued_data with the source named under rescue",
        gains_a_column,
        "rescue",
        lambda s: [
            {"id": 1, "qty": 1, "_rescued_data": None},
            {"id": 2, "qty": 2, "_rescued_data": None},
            {"id": 3, "qty": 3, "_rescued_data": rescued("north", "region", s)},
            {"id": 4, "qty": 4, "_rescued_data": rescued("south", "region", s)},
        ],
        {"schema/values_rescued": {"region": 2}, "schema/rows_rescued": 2},
        (),
    ),
    (
        "a new column is left out and named under ignore",
        gains_a_column,
        "ignore",
        lambda s: [{"id": i, "qty": i} for i in (1, 2, 3, 4)],
        {"schema/ignored_columns": ["region"], "schema/values_nulled": {}},
        (),
    ),
    (
        "an int widened to bigint stops the run under fail, naming both types",
        widens_a_column,
        "fail",
        None,
        {},
        ("'qty' is bigint, the schema says int",),
    ),
    (
        "an int widened to bigint widens the table under add_columns",
        widens_a_column,
        "add_columns",
        lambda s: [
            {"id": 1, "qty": 1},
            {"id": 2, "qty": 2},
            {"id": 3, "qty": 3},
            {"id": 4, "qty": BIG},
        ],
        {"schema/widened": ["qty"]},
        (),
    ),
    (
        "a bigint an int cannot hold is rescued, the others kept, under rescue",
        widens_a_column,
        "rescue",
        lambda s: [
            {"id": 1, "qty": 1, "_rescued_data": None},
            {"id": 2, "qty": 2, "_rescued_data": None},
            {"id": 3, "qty": 3, "_rescued_data": None},
            {"id": 4, "qty": None, "_rescued_data": rescued(str(BIG), "qty", s)},
        ],
        {"schema/values_rescued": {"qty": 1}, "schema/rows_rescued": 1},
        (),
    ),
    (
        "a bigint an int cannot hold is NULL and counted under ignore",
        widens_a_column,
        "ignore",
        lambda s: [
            {"id": 1, "qty": 1},
            {"id": 2, "qty": 2},
            {"id": 3, "qty": 3},
            {"id": 4, "qty": None},
        ],
        {"schema/ignored_columns": [], "schema/values_nulled": {"qty": 1}},
        (),
    ),
]


@pytest.mark.parametrize(
    ("change", "mode", "expected", "entries", "error"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_a_delta_source_whose_columns_change(
    tmp_path: Path,
    change: Callable[[Path], None],
    mode: str,
    expected: Callable[[str], list[dict[str, Any]]] | None,
    entries: dict[str, Any],
    error: tuple[str, ...],
) -> None:
    source = tmp_path / "source" / "orders"
    write_deltalake(str(source), pa.Table.from_pylist(FIRST, schema=BEFORE))
    raw = pipeline("orders", {"type": "delta_table", "uri": str(source)}, tmp_path, mode)
    check_evolution(raw, lambda: change(source), str(source), expected, entries, error)


# --- JDBC: a PostgreSQL table gains a column (ALTER TABLE) ---

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"


@contextmanager
def orders_database() -> Iterator[str]:
    """A database of its own with ``orders (id, updated_at, qty)``: rows 1 and 2; dropped after."""
    name = f"wa_colschema_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{PG_SERVER}/test", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(f"{PG_SERVER}/{name}", autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE orders (id bigint PRIMARY KEY, updated_at timestamptz, qty int)"
            )
            conn.execute("INSERT INTO orders VALUES (1, %s, 1), (2, %s, 2)", (at(1), at(2)))
        yield name
    finally:
        with psycopg.connect(f"{PG_SERVER}/test", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_once(raw: dict[str, Any], instance: DagsterInstance) -> ExecuteInProcessResult:
    defs = build_definitions(project_config(raw), clock=lambda: NOW)
    return defs.resolve_job_def(f"{raw['name']}_job").execute_in_process(instance=instance)


def source_rows(uri: str) -> list[dict[str, Any]]:
    table = DeltaTable(uri).to_pyarrow_table()
    wanted = [c for c in table.column_names if c in ("id", "qty", "region", "_rescued_data")]
    return sorted(table.select(wanted).to_pylist(), key=lambda r: r["id"])


# mode -> the table after the evolution (location -> rows), metadata expected
EVOLVED: dict[str, tuple[Callable[[str], list[dict[str, Any]]] | None, dict[str, Any]]] = {
    "fail": (None, {}),
    "add_columns": (
        lambda s: [
            {"id": 1, "qty": 1, "region": None},
            {"id": 2, "qty": 2, "region": None},
            {"id": 3, "qty": 3, "region": "north"},
        ],
        {"schema/added_columns": ["region"]},
    ),
    "rescue": (
        lambda s: [
            {"id": 1, "qty": 1, "_rescued_data": None},
            {"id": 2, "qty": 2, "_rescued_data": None},
            {
                "id": 3,
                "qty": 3,
                "_rescued_data": rescued("north", "region", s),
            },
        ],
        {"schema/values_rescued": {"region": 1}, "schema/rows_rescued": 1},
    ),
    "ignore": (
        lambda s: [{"id": i, "qty": i} for i in (1, 2, 3)],
        {"schema/ignored_columns": ["region"], "schema/values_nulled": {}},
    ),
}


def check_evolution(
    raw: dict[str, Any],
    evolve: Callable[[], None],
    location: str,
    expected: Callable[[str], list[dict[str, Any]]] | None,
    entries: dict[str, Any],
    error: tuple[str, ...] = ("'region' (string)",),
) -> None:
    """Run, ``evolve`` the source, run again: it fails naming ``location`` and ``error``
    (``expected`` None: nothing committed) or leaves ``expected(location)`` with the metadata
    ``entries``; a third run commits nothing (exactly once)."""
    instance = DagsterInstance.ephemeral()
    uri = raw["table"]["uri"]
    run_once(raw, instance)
    first = DeltaTable(uri).version()
    evolve()
    if expected is None:
        with pytest.raises(Exception) as raised:
            run_once(raw, instance)
        found = cause(raised.value)
        assert isinstance(found, SchemaChangeError), repr(raised.value)
        for text in (location, *error):
            assert text in str(found)
        assert DeltaTable(uri).version() == first  # nothing committed, nothing left staged
        assert not any((Path(uri) / "_staging").glob("*/*.parquet"))
        return
    meta = metadata_of(run_once(raw, instance), raw["name"])
    for key, value in entries.items():
        if key in ("schema/added_columns", "schema/widened"):  # named among the changes
            named = [row["column"] for row in table_rows(meta[key])]
            assert all(column in named for column in value), (key, named)
        elif key in PER_COLUMN:  # a table, one row per column
            assert per_column(meta[key]) == value, (key, meta[key])
        else:
            assert meta[key] == value, (key, meta[key])
    assert source_rows(uri) == expected(location)
    evolved = DeltaTable(uri).version()
    if "schema/added_columns" in entries or "schema/widened" in entries:
        history = schema_history(DeltaTable(uri).schema())  # the source named as the origin
        assert history and {e.origin for e in history} == {location}
    run_once(raw, instance)  # exactly once: nothing new, nothing committed
    assert DeltaTable(uri).version() == evolved
    assert source_rows(uri) == expected(location)


#: The keys that are a table of values per column.
PER_COLUMN = ("schema/values_nulled", "schema/values_rescued")


def per_column(value: Any) -> dict[str, int]:
    """``schema/values_nulled`` or ``schema/values_rescued`` (a table) as {column: values}."""
    return {row["column"]: row["values"] for row in table_rows(value)}


def metadata_of(result: ExecuteInProcessResult, name: str) -> dict[str, Any]:
    (materialization,) = result.asset_materializations_for_node(name)
    return {key: value.value for key, value in materialization.metadata.items()}


@pytest.mark.skipif(
    postgres_jdbc_jar() is None, reason="no PostgreSQL JDBC driver: run `make jdbc`"
)
@pytest.mark.parametrize("mode", list(EVOLVED))
def test_a_jdbc_table_that_gains_a_column(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WA_TEST_PG_USER", "postgres")
    with orders_database() as database:
        source = {
            "type": "jdbc",
            "url": f"jdbc:postgresql://127.0.0.1:5432/{database}",
            "table": "orders",
            "schema": "public",
            "user_env": "WA_TEST_PG_USER",
        }
        raw = pipeline("orders_pg", source, tmp_path, mode)

        def evolve() -> None:
            with psycopg.connect(f"{PG_SERVER}/{database}", autocommit=True) as conn:
                conn.execute("ALTER TABLE orders ADD COLUMN region text")
                conn.execute("INSERT INTO orders VALUES (3, %s, 3, 'north')", (at(3),))

        location = project_config(raw).pipeline("orders_pg").source.location
        check_evolution(raw, evolve, location, *EVOLVED[mode])


# --- an HTTP API whose records gain a key ---


class Api(BaseHTTPRequestHandler):
    """``GET /orders``: every record (the run's residual filter selects)."""

    records: list[dict[str, Any]]

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        payload = json.dumps({"data": self.records}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@contextmanager
def orders_api(records: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """An API on loopback serving ``records`` (appended to between runs), as a source config."""
    handler = type("Orders", (Api,), {"records": records})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield {
            "type": "http_api",
            "url": f"http://127.0.0.1:{server.server_address[1]}/orders",
            "schema": "id BIGINT, updated_at TIMESTAMP, qty INT",
            "records_path": "data",
        }
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("mode", list(EVOLVED))
def test_http_api_records_that_gain_a_key(tmp_path: Path, mode: str) -> None:
    records = [{"id": i, "updated_at": at(i).isoformat(), "qty": i} for i in (1, 2)]
    with orders_api(records) as source:
        raw = pipeline("orders_api", source, tmp_path, mode)

        def evolve() -> None:
            records.append({"id": 3, "updated_at": at(3).isoformat(), "qty": 3, "region": "north"})

        location = project_config(raw).pipeline("orders_api").source.location
        check_evolution(raw, evolve, location, *EVOLVED[mode])


# --- a time pipeline (window by window, each window replaced in one commit) ---


def day_rows(day: int, ids: range, region: str | None = None) -> list[dict[str, Any]]:
    start = datetime(2026, 4, day, 6, tzinfo=timezone.utc)
    return [{"id": i, "updated_at": start, "qty": i, "region": region} for i in ids]


@pytest.mark.parametrize(
    ("mode", "later"),
    [
        pytest.param("add_columns", {"region": "north"}, id="add_columns adds the column"),
        pytest.param(
            "rescue",
            {"_rescued_data": '{"region":"north","_source":"SOURCE"}'},
            id="rescue keeps it in _rescued_data",
        ),
    ],
)
def test_a_time_window_whose_delta_source_gained_a_column(
    tmp_path: Path, mode: str, later: dict[str, Any]
) -> None:
    source = tmp_path / "source" / "orders"
    write_deltalake(str(source), pa.Table.from_pylist(day_rows(1, range(1, 3)), schema=BEFORE))
    raw = pipeline("orders", {"type": "delta_table", "uri": str(source)}, tmp_path, mode)
    raw["watermark"] = {"kind": "time", "column": "updated_at", "from": "2026-04-01"}
    defs = build_definitions(project_config(raw), clock=lambda: NOW)
    instance = DagsterInstance.ephemeral()
    job = defs.resolve_job_def("orders_job")
    uri = raw["table"]["uri"]
    assert job.execute_in_process(instance=instance, partition_key="2026-04-01").success
    wider = BEFORE.append(pa.field("region", pa.string()))
    rows = day_rows(1, range(1, 3)) + day_rows(2, range(3, 5), "north")
    write_deltalake(
        str(source),
        pa.Table.from_pylist(rows, schema=wider),
        mode="overwrite",
        schema_mode="overwrite",
    )
    expected = [{"id": i, "qty": i} | {k: None for k in later} for i in (1, 2)] + [
        {"id": i, "qty": i} | {k: v.replace("SOURCE", str(source)) for k, v in later.items()}
        for i in (3, 4)
    ]
    for _ in range(2):  # a window run again replaces its rows: never twice
        assert job.execute_in_process(instance=instance, partition_key="2026-04-02").success
        assert source_rows(uri) == expected
    history = schema_history(DeltaTable(uri).schema())
    assert [e.column for e in history] == [next(iter(later))]
    assert {e.origin for e in history} == {str(source)}


# --- folders of Parquet, CSV and JSON-lines files: a newer file gains a column or a new type ---
# Before folder sources read ``schema.mode``, a column a newer file brought was only named in
# ``source/columns_ignored`` whatever the mode, a Parquet column turned from int to string failed
# the run with Spark's raw FAILED_READ_FILE, and a CSV value that did not parse was quarantined
# under every mode (never rescued, never nulled and counted).

FOLDER_SCHEMA = "id BIGINT, updated_at TIMESTAMP, qty INT"


def write_folder_file(folder: Path, name: str, rows: list[dict[str, Any]], fmt: str) -> None:
    """``rows`` as one file ``name`` of ``fmt`` in ``folder``; columns in the first row's order
    (a CSV header, a Parquet footer: ``qty`` a string when the first row's is)."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = {**rows[0], "updated_at": None}
    columns = list(stamp)
    if fmt == "parquet":
        fields = [
            pa.field(c, pa.timestamp("us", tz="UTC"))
            if c == "updated_at"
            else pa.field(c, pa.int64() if c == "id" else _arrow_type(rows[0][c]))
            for c in columns
        ]
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(fields)), folder / name)
        return
    if fmt == "csv":
        lines = [",".join(columns)] + [
            ",".join(r[c].isoformat() if c == "updated_at" else str(r[c]) for c in columns)
            for r in rows
        ]
    else:
        lines = [json.dumps(r | {"updated_at": r["updated_at"].isoformat()}) for r in rows]
    (folder / name).write_text("\n".join(lines) + "\n")


def _arrow_type(value: object) -> pa.DataType:
    return pa.string() if isinstance(value, str) else pa.int32()


def folder_rows(ids: range, **extra: Any) -> list[dict[str, Any]]:
    return [{"id": i, "updated_at": at(i), "qty": i, **extra} for i in ids]


def folder_pipeline(tmp_path: Path, fmt: str, mode: str) -> tuple[dict[str, Any], Path]:
    folder = tmp_path / "source" / "orders"
    source: dict[str, Any] = {"type": fmt, "uri": str(folder)}
    if fmt != "parquet":
        source["schema"] = FOLDER_SCHEMA
    return pipeline("orders", source, tmp_path, mode), folder


SUFFIX = {"parquet": "parquet", "csv": "csv", "json": "json"}


@pytest.mark.parametrize(
    ("fmt", "mode"),
    [
        pytest.param(fmt, mode, id=f"a {fmt} folder's newer file gains a column, {mode}")
        for fmt in ("parquet", "csv")
        for mode in EVOLVED
    ]
    + [pytest.param("json", m, id=f"a json folder's records gain a key, {m}") for m in EVOLVED],
)
def test_a_folder_whose_newer_file_gains_a_column(tmp_path: Path, fmt: str, mode: str) -> None:
    raw, folder = folder_pipeline(tmp_path, fmt, mode)
    write_folder_file(folder, f"a.{SUFFIX[fmt]}", folder_rows(range(1, 3)), fmt)

    def evolve() -> None:  # in the middle: a CSV header is read by name
        row = {"id": 3, "region": "north", "updated_at": at(3), "qty": 3}
        write_folder_file(folder, f"b.{SUFFIX[fmt]}", [row], fmt)

    # the file named; a Parquet footer states the column's type, a CSV header or JSON key not
    typed = "'region' (string)" if fmt == "parquet" else "'region' the schema lacks"
    error = (f"file '{folder / f'b.{SUFFIX[fmt]}'}'", typed)
    check_evolution(raw, evolve, str(folder), *EVOLVED[mode], error)


def rescued_qty(location: str) -> str:
    return rescued("four", "qty", location)


# mode -> (rows after: None = the run fails, metadata, error text) for a qty that turns from int
# to string in a newer Parquet file ("3" holds an int, "four" does not)
RETYPED: dict[
    str, tuple[Callable[[str], list[dict[str, Any]]] | None, dict[str, Any], tuple[str, ...]]
] = {
    "fail": (None, {}, ("b.parquet", "'qty' is string, the schema says int")),
    "add_columns": (None, {}, ("b.parquet", "'qty' is string, the schema says int")),
    "rescue": (
        lambda s: [
            {"id": 1, "qty": 1, "_rescued_data": None},
            {"id": 2, "qty": 2, "_rescued_data": None},
            {"id": 3, "qty": 3, "_rescued_data": None},
            {"id": 4, "qty": None, "_rescued_data": rescued_qty(s)},
        ],
        {"schema/values_rescued": {"qty": 1}, "schema/rows_rescued": 1},
        (),
    ),
    "ignore": (
        lambda s: [{"id": i, "qty": None if i == 4 else i} for i in (1, 2, 3, 4)],
        {"schema/ignored_columns": [], "schema/values_nulled": {"qty": 1}},
        (),
    ),
}


@pytest.mark.parametrize("mode", list(RETYPED))
def test_a_parquet_folder_whose_int_column_turns_to_string(tmp_path: Path, mode: str) -> None:
    raw, folder = folder_pipeline(tmp_path, "parquet", mode)
    write_folder_file(folder, "a.parquet", folder_rows(range(1, 3)), "parquet")

    def evolve() -> None:
        rows = [{"id": i, "updated_at": at(i), "qty": q} for i, q in ((3, "3"), (4, "four"))]
        write_folder_file(folder, "b.parquet", rows, "parquet")

    expected, entries, error = RETYPED[mode]
    check_evolution(raw, evolve, str(folder), expected, entries, error)


@pytest.mark.parametrize(
    ("mode", "qty_after", "entries", "quarantined"),
    [
        pytest.param("fail", [1, 2, 3], {}, 1, id="fail: the record is quarantined"),
        pytest.param("add_columns", [1, 2, 3], {}, 1, id="add_columns: the record is quarantined"),
        pytest.param(
            "rescue",
            [1, 2, 3, None],
            {"schema/values_rescued": {"qty": 1}, "schema/rows_rescued": 1},
            0,
            id="rescue: the value is kept in _rescued_data",
        ),
        pytest.param(
            "ignore",
            [1, 2, 3, None],
            {"schema/values_nulled": {"qty": 1}},
            0,
            id="ignore: the value is NULL and counted",
        ),
    ],
)
def test_a_csv_folder_whose_int_column_turns_to_text(
    tmp_path: Path,
    mode: str,
    qty_after: list[int | None],
    entries: dict[str, Any],
    quarantined: int,
) -> None:
    raw, folder = folder_pipeline(tmp_path, "csv", mode)
    write_folder_file(folder, "a.csv", folder_rows(range(1, 3)), "csv")
    rows = [{"id": i, "updated_at": at(i), "qty": q} for i, q in ((3, "3"), (4, "four"))]
    write_folder_file(folder, "b.csv", rows, "csv")
    instance = DagsterInstance.ephemeral()
    meta = metadata_of(run_once(raw, instance), "orders")
    assert meta["rows/quarantined"] == quarantined
    for key, value in entries.items():
        said = per_column(meta[key]) if key in PER_COLUMN else meta[key]
        assert said == value, (key, meta[key])
    table = source_rows(raw["table"]["uri"])
    assert [r["qty"] for r in table] == qty_after
    if mode == "rescue":
        assert table[-1]["_rescued_data"] == rescued_qty(str(folder))
    version = DeltaTable(raw["table"]["uri"]).version()
    run_once(raw, instance)  # exactly once
    assert DeltaTable(raw["table"]["uri"]).version() == version


@pytest.mark.parametrize(
    ("hints", "types"),
    [
        pytest.param(
            {},
            {"n": "long", "f": "double", "b": "boolean", "s": "string", "o": "string"},
            id="add_columns types a new key by its JSON values, as a footer types a column",
        ),
        pytest.param(
            {"n": "STRING"},
            {"n": "string", "f": "double", "b": "boolean", "s": "string", "o": "string"},
            id="a hint pins a new key's type",
        ),
    ],
)
def test_http_api_records_gaining_keys_of_each_json_type(
    tmp_path: Path, hints: dict[str, str], types: dict[str, str]
) -> None:
    """Before: every key the schema did not declare was read as STRING, whatever its values."""
    records = [{"id": i, "updated_at": at(i).isoformat(), "qty": i} for i in (1, 2)]
    with orders_api(records) as source:
        raw = pipeline("orders_api", source, tmp_path, "add_columns")
        raw["schema"]["hints"] = hints
        instance = DagsterInstance.ephemeral()
        run_once(raw, instance)
        new = {"n": 7, "f": 1.5, "b": True, "s": "x", "o": {"k": 1}}
        records.append({"id": 3, "updated_at": at(3).isoformat(), "qty": 3, **new})
        run_once(raw, instance)
        uri = raw["table"]["uri"]
        schema = DeltaTable(uri).schema()
        assert {f.name: f.type.type for f in schema.fields if f.name in types} == types
        records.append({"id": 4, "updated_at": at(4).isoformat(), "qty": 4, **new})
        run_once(raw, instance)  # the table's columns read in their types: nothing changes
        rows = DeltaTable(uri).to_pyarrow_table().to_pylist()
        four = next(r for r in rows if r["id"] == 4)
        assert (four["f"], four["b"], four["s"], four["o"]) == (1.5, True, "x", '{"k":1}')
        assert str(four["n"]) == "7"
