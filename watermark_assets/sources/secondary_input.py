"""The ids of a unit watermark from a secondary input (seed 003, "Implicit definition").

The seed's ``ms.secondary.input=[{"path": "${job.dir}/${preceding.table.name}", "fields":
["id"]}]``: an input listing ids, one unit per row. Three kinds of input, each a frozen value:

- :class:`FileInput`: one file on any fsspec location (local, ``s3://``, ``memory://``...): CSV
  with a header row, JSON lines, or Parquet; the format from ``format`` or the file's suffix
  (``.csv``, ``.jsonl``/``.ndjson``/``.json``, ``.parquet``/``.pq``; CSV and JSON lines may be
  compressed, ``.gz`` and the other suffixes fsspec infers);
- :class:`DeltaTableInput`: a Delta table (a preceding pipeline's table), read with ``deltalake``,
  only the ``fields`` columns (deletion vectors and column mapping are honoured);
- :class:`PostgresInput`: a PostgreSQL table or query through psycopg 3, only the ``fields``
  columns, streamed with a server-side cursor.

:func:`read_units` returns a :class:`~watermark_assets.core.unit.ScreenedUnits`: the valid ids in
first-seen order, each once, and every refused row with its row number and reason. A bad id never
hides the good ones: a row is refused alone (its id breaks a rule of
:mod:`watermark_assets.core.unit.units`, it is null, it is not JSON, it lacks the field), and
``rows == len(units) + duplicates + len(refused)`` accounts for every row read. Only an input that
cannot be read at all raises :class:`~watermark_assets.exceptions.SecondaryInputError` (missing,
unreachable, no such field, unknown format).

**Several fields.** The seed shows one field, the id. With several, the row's values are joined
with :data:`~watermark_assets.core.unit.FIELD_SEPARATOR` (``("eu", "42")`` -> ``"eu~42"``), and a
value holding the separator is refused, so the id splits back into the values exactly (a source
read per unit needs them one by one). Use a PostgreSQL query to build any other form of id.

**Rows.** A row number is 1-based: in a CSV or JSON lines file it is the line the row starts on
(the CSV header is line 1; blank lines are skipped, not counted as rows); in Parquet, Delta and
PostgreSQL it is the row's position in the read. Delta tables and PostgreSQL tables have no
order of their own: give a PostgreSQL ``query`` an ``ORDER BY`` for stable numbers and first-seen
order.

**Values.** Text is read as text (CSV values are never converted: ``007`` stays ``007``); integers
of typed inputs become their decimal text, UUIDs their canonical text; floats, booleans, dates and
nulls are refused (see :mod:`watermark_assets.core.unit.units`). Bytes that are not UTF-8 refuse
their row only.

**Credentials.** Keep passwords out of ``conninfo``: libpq reads ``PGPASSWORD`` and ``~/.pgpass``;
object stores take ``storage_options`` (or their own environment variables).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Literal, Protocol, TypeAlias

from watermark_assets import storage
from watermark_assets.config.sources import (
    check_postgres_listing,
    excerpt,
    listing_fields,
    postgres_listing,
)
from watermark_assets.core.unit.units import ScreenedUnits, UnreadableRow, screen_units
from watermark_assets.exceptions import SecondaryInputError

__all__ = [
    "DeltaTableInput",
    "FileFormat",
    "FileInput",
    "PostgresInput",
    "SecondaryInput",
    "read_units",
]

FileFormat: TypeAlias = Literal["csv", "jsonl", "parquet"]

Row: TypeAlias = tuple[int, Sequence[object] | UnreadableRow]

_SUFFIXES: dict[str, FileFormat] = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}


class _Input(Protocol):
    @property
    def fields(self) -> tuple[str, ...]: ...

    def describe(self) -> str: ...

    def rows(self) -> Iterator[Row]: ...


@dataclass(frozen=True, kw_only=True)
class FileInput:
    """One file listing ids: CSV with a header row, JSON lines, or Parquet (module docstring)."""

    #: the file's fsspec URL or local path
    path: str
    #: the column(s) holding the id (the seed's ``fields``); several are joined (module docstring)
    fields: tuple[str, ...]
    #: the file's format; None: from its suffix
    format: FileFormat | None = None
    #: fsspec storage options (credentials, endpoint); not part of equality
    storage_options: Mapping[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", listing_fields(self.fields, self.describe()))

    def describe(self) -> str:
        """The input in words, for messages."""
        return f"file {self.path!r}"

    def file_format(self) -> FileFormat:
        """``format``, or the one the file's suffix says (a compression suffix is skipped)."""
        if self.format is not None:
            if self.format not in ("csv", "jsonl", "parquet"):
                raise SecondaryInputError(
                    self.describe(),
                    f"format {self.format!r} is unknown",
                    "Use 'csv', 'jsonl' or 'parquet'",
                )
            return self.format
        suffixes = [s.lower() for s in PurePosixPath(self.path.rstrip("/")).suffixes]
        for suffix in reversed(suffixes[-2:]):
            if suffix in _SUFFIXES:
                return _SUFFIXES[suffix]
        raise SecondaryInputError(
            self.describe(),
            "its format is not known from its name",
            "Name it .csv, .jsonl or .parquet (optionally compressed, e.g. .csv.gz), or set "
            "format: csv | jsonl | parquet",
        )

    def rows(self) -> Iterator[Row]:
        """Each row's ``fields`` values (or why the row is unreadable), with its row number."""
        import fsspec

        file_format = self.file_format()
        options = dict(self.storage_options or {}) or storage.fsspec_options(self.path)
        fs, path = fsspec.core.url_to_fs(self.path, **options)
        try:
            is_directory = fs.isdir(path)
            exists = is_directory or fs.exists(path)
        except OSError as exc:
            raise SecondaryInputError(
                self.describe(), f"its location cannot be reached ({exc})", _REACH_FIX
            ) from exc
        if is_directory:
            raise SecondaryInputError(
                self.describe(),
                "it is a directory",
                "Name one file; a preceding pipeline's Delta table is read as a Delta input",
            )
        if not exists:
            raise SecondaryInputError(
                self.describe(),
                "there is no file there",
                "Fix the path, or run the pipeline that writes it first",
            )
        if file_format == "parquet":
            yield from self._parquet_rows(fs, path)
        elif file_format == "csv":
            yield from self._csv_rows(fs, path)
        else:
            yield from self._jsonl_rows(fs, path)

    def _csv_rows(self, fs: Any, path: str) -> Iterator[Row]:
        with (
            fs.open(path, "rb", compression="infer") as raw,
            io.TextIOWrapper(raw, encoding="utf-8-sig", errors="surrogateescape", newline="") as f,
        ):
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise SecondaryInputError(
                    self.describe(), "the file is empty (no header row)", _HEADER_FIX
                )
            positions = _positions(self.fields, header, self.describe())
            line = reader.line_num + 1
            for record in reader:
                start, line = line, reader.line_num + 1
                if not record:
                    continue  # a blank line
                if len(record) <= max(positions):
                    text = excerpt(",".join(record))
                    yield (
                        start,
                        UnreadableRow(
                            text, f"the row has {len(record)} value(s), the header {len(header)}"
                        ),
                    )
                    continue
                yield start, tuple(record[p] for p in positions)

    def _jsonl_rows(self, fs: Any, path: str) -> Iterator[Row]:
        with fs.open(path, "rb", compression="infer") as f:
            for number, raw_line in enumerate(f, start=1):
                text = raw_line.decode("utf-8", "surrogateescape")
                if number == 1:
                    text = text.removeprefix("\ufeff")
                if not text.strip():
                    continue
                try:
                    value = json.loads(text)
                except ValueError as exc:
                    yield number, UnreadableRow(excerpt(text), f"it is not JSON ({exc})")
                    continue
                if not isinstance(value, dict):
                    reason = f"it is a JSON {type(value).__name__}, not an object"
                    yield number, UnreadableRow(excerpt(text), reason)
                    continue
                absent = [f for f in self.fields if f not in value]
                if absent:
                    reason = f"the object has no field {', '.join(map(repr, absent))}"
                    yield number, UnreadableRow(excerpt(text), reason)
                    continue
                yield number, tuple(value[f] for f in self.fields)

    def _parquet_rows(self, fs: Any, path: str) -> Iterator[Row]:
        import pyarrow.parquet as pq

        with fs.open(path, "rb") as f:
            try:
                parquet = pq.ParquetFile(f)
            except Exception as exc:  # pyarrow.ArrowInvalid: no footer, not Parquet
                raise SecondaryInputError(
                    self.describe(),
                    f"it is not a readable Parquet file ({exc})",
                    "Check the format (or set format:), or rewrite the file",
                ) from exc
            _positions(self.fields, parquet.schema_arrow.names, self.describe())
            yield from _arrow_rows(parquet.iter_batches(columns=list(self.fields)), self.fields)


@dataclass(frozen=True, kw_only=True)
class DeltaTableInput:
    """A Delta table listing ids; only the ``fields`` columns are read."""

    #: the table's URI (local path, ``s3://``...)
    uri: str
    #: the column(s) holding the id; several are joined (module docstring)
    fields: tuple[str, ...]
    #: deltalake storage options; not part of equality
    storage_options: Mapping[str, str] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", listing_fields(self.fields, self.describe()))

    def describe(self) -> str:
        """The input in words, for messages."""
        return f"Delta table {self.uri!r}"

    def rows(self) -> Iterator[Row]:
        """Each row's ``fields`` values with its position in the read."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        options = (
            dict(self.storage_options) if self.storage_options else storage.delta_options(self.uri)
        )
        try:
            table = DeltaTable(self.uri, storage_options=options)
        except TableNotFoundError as exc:
            raise SecondaryInputError(
                self.describe(),
                f"there is no Delta table there ({exc})",
                "Fix the URI, or run the pipeline that writes the table first",
            ) from exc
        except OSError as exc:
            raise SecondaryInputError(
                self.describe(), f"its location cannot be reached ({exc})", _REACH_FIX
            ) from exc
        names = [f.name for f in table.schema().fields]
        _positions(self.fields, names, self.describe())
        yield from _arrow_rows(table.scan(columns=list(self.fields)), self.fields)


@dataclass(frozen=True, kw_only=True)
class PostgresInput:
    """A PostgreSQL table (``table``, optionally in ``schema``) or ``query`` listing ids; only
    the ``fields`` columns are selected, by name, from either."""

    #: libpq connection string or URI, without a password (module docstring)
    conninfo: str = field(repr=False)
    #: the column(s) holding the id; several are joined (module docstring)
    fields: tuple[str, ...]
    #: a table name (quoted as an identifier: any name works)
    table: str | None = None
    #: the table's schema; None: the search path
    schema: str | None = None
    #: a SELECT statement instead of a table (its rows in its own order)
    query: str | None = None
    connect_timeout: int = 10

    def __post_init__(self) -> None:
        fields = check_postgres_listing(self.table, self.schema, self.query, self.fields)
        object.__setattr__(self, "fields", fields)

    def describe(self) -> str:
        """The input in words, for messages (never the conninfo: it may hold credentials)."""
        return postgres_listing(self.table, self.schema, self.query)

    def rows(self) -> Iterator[Row]:
        """Each row's ``fields`` values with its position in the read (server-side cursor)."""
        import psycopg
        from psycopg import sql

        columns = sql.SQL(", ").join(sql.Identifier(f) for f in self.fields)
        if self.table is not None:
            relation = (
                sql.Identifier(self.schema, self.table)
                if self.schema
                else sql.Identifier(self.table)
            )
            statement = sql.SQL("SELECT {} FROM {}").format(columns, relation)
        else:
            query = str(self.query).strip().rstrip(";")
            statement = sql.SQL("SELECT {} FROM ({}) AS secondary_input").format(
                columns,
                sql.SQL(query),  # raw SQL on purpose: the query is the configuration
            )
        try:
            conn = psycopg.connect(self.conninfo, connect_timeout=self.connect_timeout)
        except psycopg.OperationalError as exc:
            raise SecondaryInputError(
                self.describe(),
                f"cannot connect to PostgreSQL ({str(exc).strip()})",
                "Start the server, or fix the conninfo (its password belongs in PGPASSWORD or "
                "~/.pgpass)",
            ) from exc
        with conn, conn.cursor(name="watermark_assets_secondary_input") as cursor:
            cursor.itersize = 10_000
            try:
                cursor.execute(statement)
                for number, record in enumerate(cursor, start=1):
                    yield number, tuple(record)
            except psycopg.Error as exc:
                if not isinstance(exc, (psycopg.ProgrammingError, psycopg.DataError)):
                    raise
                raise SecondaryInputError(
                    self.describe(),
                    f"the server refused the read ({str(exc).strip()})",
                    f"Check that it exists and has the field(s) {list(self.fields)}",
                ) from exc


SecondaryInput: TypeAlias = FileInput | DeltaTableInput | PostgresInput
"""Any input :func:`read_units` reads."""


def read_units(source: SecondaryInput) -> ScreenedUnits:
    """The ids ``source`` lists, and the rows it refused (module docstring).

    Raises :class:`~watermark_assets.exceptions.SecondaryInputError` only when the input cannot
    be read at all; a row with a bad id is refused alone.
    """
    reader: _Input = source
    return screen_units(reader.rows(), source=reader.describe(), fields=reader.fields)


_REACH_FIX = "Check the URL, the network and the storage options (credentials, endpoint)"
_HEADER_FIX = "Give the CSV file a header row naming its columns"


def _positions(fields: Sequence[str], names: Sequence[str], source: str) -> list[int]:
    missing = [f for f in fields if f not in names]
    if missing:
        raise SecondaryInputError(
            source,
            f"it has no column {', '.join(map(repr, missing))}; its columns are {list(names)}",
            "Fix fields (column names are case-sensitive)",
        )
    return [list(names).index(f) for f in fields]


def _arrow_rows(batches: Any, fields: Sequence[str]) -> Iterator[Row]:
    """Rows of Arrow record batches, numbered from 1 across batches."""
    number = 0
    for batch in batches:
        columns = [batch.column(batch.schema.get_field_index(f)).to_pylist() for f in fields]
        for values in zip(*columns):
            number += 1
            yield number, values
