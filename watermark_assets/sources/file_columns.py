"""The columns a data file holds, read as cheaply as the format allows (no Spark), and the ones a
read leaves out (no schema evolution yet: they are named, never taken in silently).

- Parquet: the footer (only the footer is read);
- CSV with a header: its first line that is not blank nor a comment, split with the reader's
  ``sep``/``delimiter``, ``quote`` and ``encoding``; headerless CSV is read by position, so its
  files cannot name a column (:func:`names_columns` is False);
- JSON lines: the keys of the records in the file's first :data:`PROBE_BYTES` of text (4 KiB, at
  least the first record; a line that does not parse is passed: the run quarantines it). A key that
  first appears further into a file is not seen here. Whole-file JSON (``multiLine``) is not
  probed (:func:`names_columns` is False).

Files are read a few at once, in small blocks (an object store sends that much, not its default
read-ahead), decompressed by their suffix (``.gz``...). A file that cannot be read (no
footer, not gzip, gone) names nothing: the run that reads it quarantines it or fails.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from watermark_assets import storage
from watermark_assets.config.sources import names_columns as names_columns
from watermark_assets.sources.schema_drift import Layout

#: How much of a JSON-lines file is probed for keys (decompressed text): a few records, at
#: least the first (the keys of 4 KiB of records in each of 240 files: about 0.3 s here; of 64 KiB:
#: over 1 s, a run's own cost).
PROBE_BYTES = 4 * 1024
#: The read size asked of the storage (an object store sends that much, not its default
#: read-ahead of megabytes).
_BLOCK_BYTES = 64 * 1024
#: Files probed at once.
_THREADS = 8


def file_columns(
    uris: Sequence[str], format: str, options: Mapping[str, str] | None = None
) -> list[tuple[str, ...] | None]:
    """Per file of ``uris``, the column names it holds in file order (module docstring); None
    when it names none: an empty file, one that cannot be read, or a format that cannot tell
    (:func:`names_columns`)."""
    if not names_columns(format, options):
        return [None] * len(uris)
    lowered = _lowered(options)

    def probe(uri: str) -> tuple[str, ...] | None:
        try:
            if format == "parquet":
                return tuple(storage.parquet_schema(uri).names)
            if format == "csv":
                return _csv_header(uri, lowered)
            return _json_keys(uri, lowered)
        except Exception:  # unreadable (no footer, not gzip, gone...): the run's read says why
            return None

    with ThreadPoolExecutor(max_workers=_THREADS) as pool:
        return list(pool.map(probe, uris))


def file_layouts(
    uris: Sequence[str], format: str, options: Mapping[str, str] | None = None
) -> list[Layout | None]:
    """Per file of ``uris``, its :data:`~watermark_assets.sources.schema_drift.Layout`: the names
    of :func:`file_columns`, with their Spark types where the file states them (a Parquet footer;
    None for a CSV header or JSON keys). None: the file names no column (:func:`file_columns`),
    or its footer holds a type Spark does not read."""
    if format != "parquet":
        return [
            None if names is None else tuple((name, None) for name in names)
            for names in file_columns(uris, format, options)
        ]

    def probe(uri: str) -> Layout | None:
        try:
            return footer_layout(storage.parquet_schema(uri))
        except Exception:  # unreadable, or a type Spark does not read: the run's read says why
            return None

    with ThreadPoolExecutor(max_workers=_THREADS) as pool:
        return list(pool.map(probe, uris))


def footer_layout(schema: pa.Schema) -> tuple[tuple[str, str], ...]:
    """A Parquet footer's columns with their Spark types (TypeError: a type Spark does not
    read)."""
    from pyspark.sql.pandas.types import from_arrow_type

    return tuple(
        (f.name, from_arrow_type(f.type, prefer_timestamp_ntz=True).simpleString()) for f in schema
    )


def left_out(found: Iterable[Sequence[str] | None], read: Iterable[str]) -> tuple[str, ...]:
    """The columns of ``found`` (per file, None: it names none) that are not among ``read``
    (case-insensitive, as Spark matches columns), first seen first, each once."""
    taken = {name.lower() for name in read}
    seen: dict[str, str] = {}
    for columns in found:
        for name in columns or ():
            if name.lower() not in taken:
                seen.setdefault(name.lower(), name)
    return tuple(seen.values())


def _lowered(options: Mapping[str, str] | None) -> dict[str, str]:
    return {k.lower(): str(v) for k, v in (options or {}).items()}


def _encoding(options: Mapping[str, str]) -> str:
    return options.get("encoding", options.get("charset", "utf-8"))


def _csv_header(uri: str, options: Mapping[str, str]) -> tuple[str, ...] | None:
    """The file's header: its first line that is not blank nor a comment (None: no such line)."""
    delimiter = options.get("sep", options.get("delimiter", ","))
    quote = options.get("quote", '"') or '"'
    comment = options.get("comment") or None
    fs, path = storage.filesystem(uri)
    with fs.open(path, "rb", block_size=_BLOCK_BYTES, compression="infer") as handle:
        for line in io.TextIOWrapper(handle, encoding=_encoding(options), errors="replace"):
            text = line.rstrip("\r\n")
            if not text.strip() or (comment and text.startswith(comment)):
                continue
            names = next(csv.reader([text], delimiter=delimiter[:1], quotechar=quote[:1]))
            return tuple(names)
    return None


def _json_keys(uri: str, options: Mapping[str, str]) -> tuple[str, ...] | None:
    """The top-level keys of the JSON records in the file's first PROBE_BYTES (None: none)."""
    fs, path = storage.filesystem(uri)
    keys: dict[str, None] = {}
    read = 0
    with fs.open(path, "rb", block_size=_BLOCK_BYTES, compression="infer") as handle:
        text = io.TextIOWrapper(handle, encoding=_encoding(options), errors="replace")
        while read < PROBE_BYTES:
            line = text.readline(PROBE_BYTES)
            if not line:
                break
            read += len(line)
            try:
                record = json.loads(line)
            except ValueError:
                continue  # blank, cut at PROBE_BYTES, or malformed (the run quarantines it)
            if isinstance(record, dict):
                keys.update(dict.fromkeys(record))
    return tuple(keys) if keys else None
