"""A schema inferred from a sample of landing files (``schema: {infer: true}``), on the driver,
without Spark.

Why not Spark's own inference (``inferSchema`` / the JSON reader without a schema): it reads every
sampled file to its end, and it runs only where Spark reads the files natively; files on S3 without
hadoop-aws are read by the fsspec data source, which needs a schema first. Here the sample is
bounded (the first :data:`SAMPLE_RECORDS` records, at most :data:`SAMPLE_BYTES` of text, of each of
the first ``sample_files`` files), read through fsspec like
:mod:`~watermark_assets.sources.file_columns`, so it costs the same on every storage, and the
types are the ones Spark's readers then parse those values into.

A value's type (:func:`~watermark_assets.sources.value_types.value_type`; CSV values are text, JSON
values keep their JSON type):

- ``true``/``false`` (any case in CSV; a JSON boolean): BOOLEAN;
- an integer: BIGINT (not INT: a later file's larger id still fits); beyond BIGINT: STRING;
- a decimal or exponent number (a JSON float): DOUBLE;
- ``YYYY-MM-DD``: DATE; ``YYYY-MM-DD[T ]hh:mm:ss[.ffffff][Z|+hh:mm]``: TIMESTAMP;
- anything else, and a JSON object or array: STRING (its text; a hint pins a struct type).

A JSON string is STRING unless it spells a date or a timestamp
(:func:`~watermark_assets.sources.value_types.json_value_type`): Spark's JSON reader parses no
number nor boolean from a string, so a quoted ``"42"`` inferred as BIGINT would make every record
malformed.

A column's type is its values' types merged (:func:`~watermark_assets.sources.value_types.merge`):
the same type stays, BIGINT and DOUBLE give DOUBLE, DATE and TIMESTAMP give TIMESTAMP, anything
else gives STRING; a column whose sampled values are all empty or null is STRING. ``hints`` then
pin chosen columns (e.g. an id of digits that must stay STRING). Columns are in the order the
sample first names them (CSV header order, then JSON keys as met); names are matched
case-insensitively, as Spark matches columns.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from watermark_assets import storage
from watermark_assets.exceptions import SchemaInferenceError
from watermark_assets.names import SCHEMA_INFERRED_KEY
from watermark_assets.sources.value_types import json_value_type, merge, value_type
from watermark_assets.spark.ddl import columns_ddl

#: Records read from each sampled file (its first ones).
SAMPLE_RECORDS = 1000
#: Text read from each sampled file at most (decompressed), whatever its records' size.
SAMPLE_BYTES = 1024 * 1024
_BLOCK_BYTES = 64 * 1024
_THREADS = 8


@dataclass(frozen=True)
class InferredSchema:
    """The columns inferred from ``files`` (relative paths of the sample), hints applied."""

    columns: tuple[tuple[str, str], ...]
    files: tuple[str, ...]
    #: the columns whose type a ``schema.hints`` entry pinned
    hinted: tuple[str, ...] = ()

    @property
    def ddl(self) -> str:
        return columns_ddl(self.columns)

    @property
    def origin(self) -> str:
        """The sample, short: its file, or its first and last and how many."""
        if len(self.files) == 1:
            return self.files[0]
        return f"{len(self.files)} files: {self.files[0]} .. {self.files[-1]}"

    def to_json(self) -> dict[str, Any]:
        """The run's ``schema/inferred`` metadata (docs/metadata.md)."""
        return {
            "columns": dict(self.columns),
            "hinted": list(self.hinted),
            "files": list(self.files),
        }

    def stamped(self, schema: pa.Schema) -> pa.Schema:
        """``schema`` (the staged files') with each inferred column's
        :data:`~watermark_assets.names.SCHEMA_INFERRED_KEY` metadata: the table created with it
        says, for as long as it exists, which columns were inferred from which files."""
        kinds = {name.lower(): kind for name, kind in self.columns}
        hinted = {name.lower() for name in self.hinted}
        fields = []
        for field in schema:
            kind = kinds.get(field.name.lower())
            if kind is not None:
                note = {"type": kind, "hinted": field.name.lower() in hinted, "origin": self.origin}
                stamp = {SCHEMA_INFERRED_KEY: json.dumps(note, separators=(",", ":"))}
                field = field.with_metadata({**(field.metadata or {}), **stamp})
            fields.append(field)
        return pa.schema(fields, metadata=schema.metadata)


def inferred_note(metadata: Mapping[str, str] | None) -> str | None:
    """A table column's :data:`~watermark_assets.names.SCHEMA_INFERRED_KEY` in words
    (``inferred as bigint from 3 files: a .. c``), or None when it was not inferred."""
    raw = (metadata or {}).get(SCHEMA_INFERRED_KEY)
    if not raw:
        return None
    note = json.loads(raw)
    how = "pinned by schema.hints" if note.get("hinted") else "inferred"
    return f"{how} as {note.get('type')} when the table was created from {note.get('origin')}"


def infer_columns(
    samples: Sequence[Sequence[tuple[str, Any]]],
    hint: Callable[[str], str | None],
    *,
    json_values: bool = False,
) -> tuple[tuple[str, str], ...]:
    """The columns of ``samples`` (per record, its (column, value) pairs), each once in the order
    first named (the first spelling), typed by :func:`merge` of its values (``json_values``: JSON
    values, a string typed as Spark's JSON reader reads it), else STRING; the ``hint`` for a
    column (case-insensitive) wins."""
    typed = json_value_type if json_values else value_type
    seen: dict[str, tuple[str, str | None]] = {}
    for record in samples:
        for name, value in record:
            key = name.lower()
            spelled, kind = seen.get(key, (name, None))
            seen[key] = (spelled, merge(kind, typed(value)))
    return tuple((name, hint(name) or kind or "string") for name, kind in seen.values())


def infer_schema(
    root: str,
    files: Sequence[str],
    format: str,
    options: Mapping[str, str] | None,
    hint: Callable[[str], str | None],
) -> InferredSchema:
    """The schema of the landing files ``files`` (paths relative to ``root``), read in that
    order (module docstring); a file that cannot be read is passed over.
    SchemaInferenceError when the sample names no column (empty or unreadable files)."""
    lowered = {k.lower(): str(v) for k, v in (options or {}).items()}
    uris = [f"{root.rstrip('/')}/{path}" for path in files]
    reader = _csv_records if format == "csv" else _json_records

    def sample(uri: str) -> list[list[tuple[str, Any]]]:
        try:
            return list(reader(uri, lowered))
        except Exception:  # unreadable (not gzip, gone...): says nothing; the run's read says why
            return []

    with ThreadPoolExecutor(max_workers=_THREADS) as pool:
        per_file = list(pool.map(sample, uris))
    samples = [record for records in per_file for record in records]
    columns = infer_columns(samples, hint, json_values=format != "csv")
    hinted = tuple(name for name, _ in columns if hint(name))
    if not columns:
        raise SchemaInferenceError(root, tuple(files))
    return InferredSchema(columns, tuple(files), hinted)


def _lines(uri: str, options: Mapping[str, str]) -> Iterator[str]:
    """The file's first lines (decompressed by its suffix), at most SAMPLE_BYTES of text."""
    fs, path = storage.filesystem(uri)
    encoding = options.get("encoding", options.get("charset", "utf-8"))
    read = 0
    with fs.open(path, "rb", block_size=_BLOCK_BYTES, compression="infer") as handle:
        for line in io.TextIOWrapper(handle, encoding=encoding, errors="replace"):
            read += len(line)
            if read > SAMPLE_BYTES:
                return
            yield line


def _json_records(uri: str, options: Mapping[str, str]) -> Iterator[list[tuple[str, Any]]]:
    count = 0
    for line in _lines(uri, options):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # blank or malformed: the run quarantines it
        if isinstance(record, dict):
            yield list(record.items())
            count += 1
            if count >= SAMPLE_RECORDS:
                return


def _csv_records(uri: str, options: Mapping[str, str]) -> Iterator[list[tuple[str, Any]]]:
    delimiter = options.get("sep", options.get("delimiter", ",")) or ","
    quote = options.get("quote", '"') or '"'
    comment = options.get("comment") or None
    null = options.get("nullvalue", "")
    kept = (
        line
        for line in _lines(uri, options)
        if line.strip() and not (comment and line.startswith(comment))
    )
    rows = csv.reader(kept, delimiter=delimiter[:1], quotechar=quote[:1])
    header = next(rows, None)
    if header is None:
        return
    for count, row in enumerate(rows):
        if count >= SAMPLE_RECORDS:
            return
        values = [None if value == null else value for value in row]
        yield list(zip(header, values + [None] * (len(header) - len(values)), strict=False))
