"""Secondary inputs of a unit watermark (seed 003): real files (local disk and ``memory://``), a
real Delta table and real PostgreSQL (127.0.0.1:5432). One suite runs against every backend: the
same ids in, the same units and refusals out; then each format's own cases.
"""

from __future__ import annotations

import gzip
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fsspec
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import project_config
from deltalake import write_deltalake
from test_unit_pipeline import unit_pipeline

from watermark_assets.core.unit import RefusedUnit, ScreenedUnits, UnitWatermark
from watermark_assets.exceptions import ConfigError, SecondaryInputError, UnitIdError
from watermark_assets.sources.secondary_input import (
    DeltaTableInput,
    FileInput,
    PostgresInput,
    SecondaryInput,
    read_units,
)

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"

# Qualaroo-like survey ids: good ones, a repeat, and one of each kind of refusal.
IDS: list[str | None] = ["s1", "s2", "s1", "a|b", "s3", "", " s4", None, "s/5", "s6"]
GOOD = ("s1", "s2", "s3", "s6")
# (position in IDS from 1, value, words of the reason)
BAD = [(4, "a|b", "'|'"), (6, "", "empty"), (7, " s4", "whitespace"), (9, "s/5", "'/'")]
NULL = (8, None, "null")


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """A database of this module's own, dropped at the end."""
    name = f"wa_secondary_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{PG_SERVER}/{name}"
    finally:
        with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def memory_dir() -> Iterator[str]:
    root = f"memory://secondary-{uuid.uuid4().hex[:8]}"
    yield root
    fs = fsspec.filesystem("memory")
    if fs.exists(root):
        fs.rm(root, recursive=True)


# --- writers: the same ids into each kind of input ---


def write_text(url: str, text: str, *, compress: bool = False) -> None:
    data = text.encode("utf-8")
    with fsspec.open(url, "wb") as f:
        f.write(gzip.compress(data) if compress else data)


def csv_text(ids: list[str | None]) -> str:
    # A null has no CSV form: it is written as an empty value (refused as empty).
    return "id,name\n" + "".join(f'"{"" if i is None else i}",n\n' for i in ids)


def jsonl_text(ids: list[str | None]) -> str:
    return "".join(json.dumps({"id": i, "name": "n"}) + "\n" for i in ids)


def parquet_table(ids: list[str | None]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.string()), "name": pa.array(["n"] * len(ids))})


Writer = Callable[[Path, str, str, list[str | None]], SecondaryInput]


def local_csv(tmp: Path, mem: str, db: str, ids: list[str | None]) -> SecondaryInput:
    write_text(str(tmp / "surveys.csv"), csv_text(ids))
    return FileInput(path=str(tmp / "surveys.csv"), fields=("id",))


def gzip_csv_in_memory(tmp: Path, mem: str, db: str, ids: list[str | None]) -> SecondaryInput:
    write_text(f"{mem}/surveys.csv.gz", csv_text(ids), compress=True)
    return FileInput(path=f"{mem}/surveys.csv.gz", fields=("id",))


def local_jsonl(tmp: Path, mem: str, db: str, ids: list[str | None]) -> SecondaryInput:
    write_text(f"file://{tmp}/surveys.jsonl", jsonl_text(ids))
    return FileInput(path=f"file://{tmp}/surveys.jsonl", fields=("id",))


def jsonl_in_memory(tmp: Path, mem: str, db: str, ids: list[str | None]) -> SecondaryInput:
    write_text(f"{mem}/surveys", jsonl_text(ids))
    return FileInput(path=f"{mem}/surveys", fields=("id",), format="jsonl")


def local_parquet(tmp: Path, mem: str, db: str, ids: list[str | None]) -> SecondaryInput:
    pq.write_table(parquet_table(ids), tmp / "surveys.parquet", row_group_size=3)
    return FileInput(path=str(tmp / "surveys.parquet"), fields=("id",))


def parquet_in_memory(tmp: Path, mem: str, db: str, ids: list[str | None]) -> SecondaryInput:
    with fsspec.open(f"{mem}/surveys.parquet", "wb") as f:
        pq.write_table(parquet_table(ids), f)
    return FileInput(path=f"{mem}/surveys.parquet", fields=("id",))


def delta_table(tmp: Path, mem: str, db: str, ids: list[str | None]) -> SecondaryInput:
    write_deltalake(str(tmp / "surveys"), parquet_table(ids))
    return DeltaTableInput(uri=str(tmp / "surveys"), fields=("id",))


def postgres_rows(db: str, table: str, ids: list[str | None]) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f'CREATE TABLE "{table}" (position int, id text, name text)')
        with conn.cursor().copy(f'COPY "{table}" (position, id, name) FROM STDIN') as copy:
            for n, i in enumerate(ids, start=1):
                copy.write_row((n, i, "n"))


def postgres_table(tmp: Path, mem: str, db: str, ids: list[str | None]) -> SecondaryInput:
    table = f"surveys_{uuid.uuid4().hex[:6]}"
    postgres_rows(db, table, ids)
    return PostgresInput(conninfo=db, table=table, schema="public", fields=("id",))


def postgres_query(tmp: Path, mem: str, db: str, ids: list[str | None]) -> SecondaryInput:
    table = f"surveys_{uuid.uuid4().hex[:6]}"
    postgres_rows(db, table, ids)
    query = f"SELECT id FROM \"{table}\" WHERE name LIKE 'n%' ORDER BY position;"
    return PostgresInput(conninfo=db, query=query, fields=("id",))


# (writer, first row number, whether a null survives the format)
BACKENDS = [
    pytest.param(local_csv, 2, False, id="CSV on local disk (row = line, header is line 1)"),
    pytest.param(gzip_csv_in_memory, 2, False, id="gzipped CSV on memory://"),
    pytest.param(local_jsonl, 1, True, id="JSON lines on file:// (row = line)"),
    pytest.param(jsonl_in_memory, 1, True, id="JSON lines on memory://, format given"),
    pytest.param(local_parquet, 1, True, id="Parquet on local disk, several row groups"),
    pytest.param(parquet_in_memory, 1, True, id="Parquet on memory://"),
    pytest.param(delta_table, 1, True, id="a Delta table"),
    pytest.param(postgres_table, 1, True, id="a PostgreSQL table"),
    pytest.param(postgres_query, 1, True, id="a PostgreSQL query with ORDER BY and LIKE '%'"),
]


@pytest.mark.parametrize(("writer", "first_row", "keeps_null"), BACKENDS)
def test_every_backend_keeps_the_good_ids_and_names_each_bad_row(
    tmp_path: Path,
    memory_dir: str,
    database: str,
    writer: Writer,
    first_row: int,
    keeps_null: bool,
) -> None:
    source = writer(tmp_path, memory_dir, database, IDS)
    screened = read_units(source)
    assert screened.units == GOOD
    assert screened.rows == len(IDS) and screened.duplicates == 1
    expected_bad = sorted([*BAD, NULL if keeps_null else (8, "", "empty")])
    assert [(r.row, r.value) for r in screened.refused] == [
        (position - 1 + first_row, value) for position, value, _ in expected_bad
    ]
    for refused, (_, _, words) in zip(screened.refused, expected_bad):
        assert words in refused.reason
    assert screened.source == source.describe()
    for error in screened.errors():
        assert isinstance(error, UnitIdError) and source.describe() in str(error)


@pytest.mark.parametrize(("writer", "first_row", "keeps_null"), BACKENDS)
def test_an_input_without_the_field_is_refused_as_a_whole(
    tmp_path: Path,
    memory_dir: str,
    database: str,
    writer: Writer,
    first_row: int,
    keeps_null: bool,
) -> None:
    source = writer(tmp_path, memory_dir, database, ["s1"])
    wrong = type(source)(**{**_fields_of(source), "fields": ("survey_id",)})
    if isinstance(wrong, FileInput) and wrong.file_format() == "jsonl":
        # JSON lines have no header: each object lacks the field, each row is refused alone.
        screened = read_units(wrong)
        assert screened.units == () and "no field 'survey_id'" in screened.refused[0].reason
        return
    with pytest.raises(SecondaryInputError, match="survey_id") as caught:
        read_units(wrong)
    assert caught.value.source == source.describe()


def _fields_of(source: SecondaryInput) -> dict[str, Any]:
    return {k: getattr(source, k) for k in source.__dataclass_fields__}


# --- the seed's secondary input, and new ids on a later tick ---


def test_the_seeds_secondary_input_from_a_preceding_table(tmp_path: Path) -> None:
    """ms.secondary.input=[{"path": "${job.dir}/${preceding.table.name}", "fields": ["id"]}]:
    the preceding pipeline's table lists survey ids, one unit per id. A new id appended later is
    new on the next read; an id that disappeared is reported, and its history is kept."""
    job_dir, preceding_table_name = tmp_path, "qualaroo_surveys"
    path = f"{job_dir}/{preceding_table_name}"
    write_deltalake(path, pa.table({"id": ["101", "102"], "title": ["a", "b"]}))
    source = DeltaTableInput(uri=path, fields=("id",))

    first = read_units(source)
    watermark = UnitWatermark("done_at")
    listing = watermark.new_units(first.units)
    assert listing.new == ("101", "102")
    watermark = watermark.add_units(listing.new)

    write_deltalake(path, pa.table({"id": ["103"], "title": ["c"]}), mode="append")
    assert watermark.new_units(read_units(source).units).new == ("103",)

    write_deltalake(path, pa.table({"id": ["102", "103"], "title": ["b", "c"]}), mode="overwrite")
    listing = watermark.new_units(read_units(source).units)
    assert listing.new == ("103",) and listing.missing == ("101",)
    assert "101" in watermark.add_units(listing.new).units  # never dropped


# --- CSV ---


@pytest.mark.parametrize(
    ("text", "units", "refused"),
    [
        pytest.param("id\n007\n42\n", ("007", "42"), [], id="values stay text: 007 is not 7"),
        pytest.param("\ufeffid\ns1\n", ("s1",), [], id="a byte order mark"),
        pytest.param("id\ns1\n\ns2\n", ("s1", "s2"), [], id="a blank line is skipped"),
        pytest.param(
            'id\n"a,b"\ns2\n', ("s2",), [(2, "a,b", "','")], id="a quoted comma is refused"
        ),
        pytest.param(
            'id,note\n"s1","two\nlines"\n"x/y",n\n',
            ("s1",),
            [(4, "x/y", "'/'")],
            id="a row's number is the line it starts on",
        ),
        pytest.param(
            "name,id\nn,s1\nonly-one-value\nn,s2\n",
            ("s1", "s2"),
            [(3, "only-one-value", "1 value(s), the header 2")],
            id="a short row is refused alone",
        ),
    ],
)
def test_csv_rows(
    tmp_path: Path, text: str, units: tuple[str, ...], refused: list[tuple[int, str, str]]
) -> None:
    (tmp_path / "ids.csv").write_text(text, encoding="utf-8", newline="")
    screened = read_units(FileInput(path=str(tmp_path / "ids.csv"), fields=("id",)))
    assert screened.units == units
    assert [(r.row, r.value) for r in screened.refused] == [(n, v) for n, v, _ in refused]
    for r, (_, _, words) in zip(screened.refused, refused):
        assert words in r.reason


def test_a_byte_that_is_not_utf8_refuses_its_row_only(tmp_path: Path) -> None:
    (tmp_path / "ids.csv").write_bytes(b"id\ns1\nbad\xff\ns2\n")
    screened = read_units(FileInput(path=str(tmp_path / "ids.csv"), fields=("id",)))
    assert screened.units == ("s1", "s2")
    assert screened.refused[0].row == 3 and "not valid Unicode" in screened.refused[0].reason


def test_an_empty_csv_has_no_header(tmp_path: Path) -> None:
    (tmp_path / "ids.csv").write_text("")
    with pytest.raises(SecondaryInputError, match="header"):
        read_units(FileInput(path=str(tmp_path / "ids.csv"), fields=("id",)))


# --- JSON lines ---


@pytest.mark.parametrize(
    ("line", "unit", "reason"),
    [
        pytest.param('{"id": 42}', "42", None, id="an integer id becomes its text"),
        pytest.param('{"id": "s1", "x": [1]}', "s1", None, id="other fields are ignored"),
        pytest.param('{"id": 4.2}', None, "float", id="a float is refused"),
        pytest.param('{"id": true}', None, "bool", id="a boolean is refused"),
        pytest.param('{"id": {"a": 1}}', None, "dict", id="an object is refused"),
        pytest.param('{"id": null}', None, "null", id="a null is refused"),
        pytest.param('{"name": "n"}', None, "no field 'id'", id="an object without the field"),
        pytest.param('["s1"]', None, "not an object", id="a JSON array"),
        pytest.param('{"id": "s1"', None, "not JSON", id="a truncated line"),
    ],
)
def test_json_lines(tmp_path: Path, line: str, unit: str | None, reason: str | None) -> None:
    (tmp_path / "ids.jsonl").write_text(f'{{"id": "first"}}\n\n{line}\n{{"id": "last"}}\n')
    screened = read_units(FileInput(path=str(tmp_path / "ids.jsonl"), fields=("id",)))
    if unit is not None:
        assert screened.units == ("first", unit, "last") and not screened.refused
    else:
        assert screened.units == ("first", "last")
        (refused,) = screened.refused
        assert refused.row == 3 and reason is not None and reason in refused.reason


# --- Parquet and Delta: typed columns, projection ---


def test_typed_columns_become_text(tmp_path: Path) -> None:
    table = pa.table(
        {
            "n": pa.array([7, 8, None], pa.int64()),
            "u": pa.array([uuid.UUID(int=1).bytes] * 3, pa.uuid()),
            "f": pa.array([1.0, 2.0, 3.0]),
        }
    )
    pq.write_table(table, tmp_path / "typed.parquet")
    numbers = read_units(FileInput(path=str(tmp_path / "typed.parquet"), fields=("n",)))
    assert numbers.units == ("7", "8") and numbers.refused[0].row == 3
    uuids = read_units(FileInput(path=str(tmp_path / "typed.parquet"), fields=("u",)))
    assert uuids.units == ("00000000-0000-0000-0000-000000000001",)
    floats = read_units(FileInput(path=str(tmp_path / "typed.parquet"), fields=("f",)))
    assert floats.units == () and "float" in floats.refused[0].reason


def test_several_fields_join_into_one_id(tmp_path: Path) -> None:
    table = pa.table({"region": ["eu", "us", "e~u"], "id": [42, 42, 1]})
    write_deltalake(str(tmp_path / "t"), table)
    screened = read_units(DeltaTableInput(uri=str(tmp_path / "t"), fields=("region", "id")))
    assert screened.units == ("eu~42", "us~42")
    assert (
        screened.refused == (RefusedUnit(3, ("e~u", 1), screened.refused[0].reason),)
        and "separator" in screened.refused[0].reason
    )


# --- PostgreSQL specifics ---


def test_postgres_names_are_quoted_and_types_become_text(database: str) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute('CREATE SCHEMA "odd schema"')
        conn.execute('CREATE TABLE "odd schema"."the ""ids""" ("Survey Id" uuid, n bigint)')
        conn.execute(
            'INSERT INTO "odd schema"."the ""ids""" VALUES '
            "('00000000-0000-0000-0000-000000000001', 1), (NULL, 2)"
        )
    source = PostgresInput(
        conninfo=database, schema="odd schema", table='the "ids"', fields=("Survey Id",)
    )
    screened = read_units(source)
    assert screened.units == ("00000000-0000-0000-0000-000000000001",)
    assert screened.refused == (RefusedUnit(2, None, "it is null"),)
    numbers = read_units(
        PostgresInput(conninfo=database, schema="odd schema", table='the "ids"', fields=("n",))
    )
    assert numbers.units == ("1", "2")
    assert "PostgreSQL table 'odd schema.the \"ids\"'" in screened.describe()


@pytest.mark.parametrize(
    ("options", "words"),
    [
        pytest.param({"table": "no_such_table"}, "no_such_table", id="a missing table"),
        pytest.param({"query": "SELEC 1 AS id"}, "syntax", id="a query that is not SQL"),
    ],
)
def test_postgres_read_failures_are_refused_as_a_whole(
    database: str, options: dict[str, str], words: str
) -> None:
    with pytest.raises(SecondaryInputError, match=words):
        read_units(PostgresInput(conninfo=database, fields=("id",), **options))


def test_an_unreachable_server_says_so_without_the_password() -> None:
    source = PostgresInput(
        conninfo="postgresql://postgres:secret@127.0.0.1:1/x",
        table="t",
        fields=("id",),
        connect_timeout=2,
    )
    assert "secret" not in repr(source)
    with pytest.raises(SecondaryInputError, match="cannot connect") as caught:
        read_units(source)
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({}, id="neither table nor query"),
        pytest.param({"table": "t", "query": "SELECT 1"}, id="both table and query"),
        pytest.param({"query": "SELECT 1", "schema": "s"}, id="a schema with a query"),
    ],
)
def test_postgres_input_needs_exactly_a_table_or_a_query(options: dict[str, str]) -> None:
    with pytest.raises(SecondaryInputError):
        PostgresInput(conninfo="postgresql://x", fields=("id",), **options)


# --- inputs that cannot be read at all ---


@pytest.mark.parametrize(
    ("make", "words"),
    [
        pytest.param(lambda t: FileInput(path=f"{t}/none.csv", fields=("id",)), "no file there"),
        pytest.param(lambda t: FileInput(path=str(t), fields=("id",), format="csv"), "directory"),
        pytest.param(lambda t: FileInput(path=f"{t}/ids.txt", fields=("id",)), "its format"),
        pytest.param(
            lambda t: FileInput(path=f"{t}/ids.csv", fields=("id",), format="xml"),  # type: ignore[arg-type]
            "format 'xml'",
        ),
        pytest.param(lambda t: FileInput(path=f"{t}/ids.parquet", fields=()), "fields"),
        pytest.param(lambda t: DeltaTableInput(uri=f"{t}/none", fields=("id",)), "no Delta table"),
        pytest.param(
            lambda t: FileInput(path=f"{t}/not.parquet", fields=("id",)), "not a readable Parquet"
        ),
    ],
    ids=[
        "a missing file",
        "a directory",
        "an unknown suffix",
        "an unknown format",
        "no fields",
        "a missing Delta table",
        "a file that is not Parquet",
    ],
)
def test_unreadable_inputs(tmp_path: Path, make: Callable[[Path], Any], words: str) -> None:
    (tmp_path / "ids.txt").write_text("id\ns1\n")
    (tmp_path / "not.parquet").write_text("id\ns1\n")
    with pytest.raises(SecondaryInputError, match=words):
        read_units(make(tmp_path))


def test_a_result_is_a_value() -> None:
    assert ScreenedUnits(source="s", units=("a",)) == ScreenedUnits(source="s", units=("a",))


# --- one rule for both ways of listing ids (issue 22, item 9) ---


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(" a1", id="a leading space"),
        pytest.param("a1 ", id="a trailing space"),
        pytest.param("\ta1", id="a leading tab"),
    ],
)
def test_an_id_with_spaces_around_it_is_refused_in_units_and_in_a_secondary_input_alike(
    tmp_path: Path, bad: str
) -> None:
    """The value is never trimmed on either path: explicit ids fail the load, an input's row is
    refused (the others still become units), both with the same reason naming the id."""
    source = {"type": "delta_table", "uri": str(tmp_path / "answers")}
    with pytest.raises(ConfigError) as raised:
        project_config(unit_pipeline(tmp_path, source, {"units": f"a0,{bad}"}))
    from_units = raised.value.__cause__
    assert isinstance(from_units, UnitIdError)
    assert (from_units.unit_id, from_units.row) == (bad, 2)
    assert f"unit id {bad!r} (row 2 of watermark.units) is refused" in str(raised.value)
    assert "write the ids without spaces around the commas, e.g. 'a0,a1'" in str(raised.value)

    (tmp_path / "ids.csv").write_text(csv_text(["a0", bad]), encoding="utf-8", newline="")
    screened = read_units(FileInput(path=str(tmp_path / "ids.csv"), fields=("id",)))
    assert screened.units == ("a0",)
    (from_file,) = screened.refused
    assert (from_file.row, from_file.value) == (3, bad)  # the header is row 1
    assert from_units.reason.startswith(from_file.reason)  # the same rule, plus the units' fix
    assert "leading or trailing whitespace (refused, not trimmed" in from_file.reason
