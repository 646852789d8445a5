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

For CSV and JSON the same read also samples the values of the records in those first
:data:`PROBE_BYTES` (:func:`sampled_layouts`: a
:class:`~watermark_assets.sources.schema_drift.ValueSample`), so a column whose values turned
another type can be told without Spark (:mod:`~watermark_assets.sources.schema_drift`).

Files are read a few at once, in small blocks (an object store sends that much, not its default
read-ahead), decompressed by their suffix (``.gz``...). A file that cannot be read (no
footer, not gzip, gone) names nothing: the run that reads it quarantines it or fails.
"""

from __future__ import annotations

import csv
import io
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO

import pyarrow as pa

from watermark_assets import storage
from watermark_assets.config.sources import names_columns as names_columns
from watermark_assets.sources.schema_drift import Layout, ValueSample

#: How much of a JSON-lines or CSV file is probed for keys and sampled values (decompressed
#: text): a few records, at least the first (the keys of 4 KiB of records in each of 240 files:
#: about 0.3 s here; of 64 KiB: over 1 s, a run's own cost).
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
    if format != "parquet":
        return [
            None if layout is None else tuple(name for name, _ in layout)
            for layout in file_layouts(uris, format, options)
        ]

    def probe(uri: str) -> tuple[str, ...] | None:
        try:
            return tuple(storage.parquet_schema(uri).names)
        except Exception:  # unreadable (no footer, gone...): the run's read says why
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
    return [layout for layout, _ in sampled_layouts(uris, format, options)]


def sampled_layouts(
    uris: Sequence[str],
    format: str,
    options: Mapping[str, str] | None = None,
    *,
    signatures: Sequence[str | None] | None = None,
) -> list[tuple[Layout | None, ValueSample | None]]:
    """Per file of ``uris``, its layout (:func:`file_layouts`) and, for CSV and JSON lines, the
    values of its records in the first :data:`PROBE_BYTES` (one read of the file for both;
    None: Parquet, whose footer states its types, or a file that names no column).

    ``signatures``: each file's content signature as a listing gave it (``storage.
    content_signature``; None: unknown). A file read before with the same signature is not read
    again in this process (:data:`_PROBED`): a rewrite under the same name lists another one. A
    file that could not be read is read again on the next call."""
    if format != "parquet" and not names_columns(format, options):
        return [(None, None)] * len(uris)
    lowered = _lowered(options)
    sample = _csv_sample if format == "csv" else _json_sample

    def probe(uri: str) -> tuple[Layout | None, ValueSample | None] | None:
        """The file's layout and sample; None: unreadable (not gzip, no footer, gone...: the
        run's read says why), or a footer type Spark does not read."""
        try:
            if format == "parquet":
                return footer_layout(storage.parquet_schema(uri)), None
            found = sample(uri, lowered)
        except Exception:
            return None
        if found is None:
            return None, None
        names, values = found
        return tuple((name, None) for name in names), values

    settings = (format, tuple(sorted(lowered.items())))
    keys = [
        None if signature is None else (uri, signature, settings)
        for uri, signature in zip(uris, signatures or [None] * len(uris), strict=True)
    ]
    with _PROBED_LOCK:
        found = [None if key is None else _PROBED.get(key) for key in keys]
    missing = [i for i, known in enumerate(found) if known is None]
    if missing:
        with ThreadPoolExecutor(max_workers=min(_THREADS, len(missing))) as pool:
            fresh = list(pool.map(probe, [uris[i] for i in missing]))
        with _PROBED_LOCK:
            for i, result in zip(missing, fresh, strict=True):
                key = keys[i]
                if result is not None and key is not None:
                    _PROBED[key] = result
                    _PROBED.move_to_end(key)
                found[i] = result
            while len(_PROBED) > _PROBED_MAX:
                _PROBED.popitem(last=False)
    return [(None, None) if known is None else known for known in found]


#: What :func:`sampled_layouts` read of each file with a content signature, by its URI, that
#: signature and the format's settings; the most recently read :data:`_PROBED_MAX`.
_PROBED: OrderedDict[
    tuple[str, str, tuple[str, tuple[tuple[str, str], ...]]],
    tuple[Layout | None, ValueSample | None],
] = OrderedDict()
#: a tick probes at most 10 files per pipeline; a sample holds a few KiB of values
_PROBED_MAX = 1024
_PROBED_LOCK = threading.Lock()


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


def _probe_lines(text: IO[str], read: int = 0) -> Iterator[str]:
    """The lines of ``text`` that start within the file's first PROBE_BYTES (``read``: the text
    read before), each whole; a line cut at PROBE_BYTES of its own is left out (a cut value
    would be sampled as another), and ends the probe."""
    while read < PROBE_BYTES:
        line = text.readline(PROBE_BYTES)
        if not line:
            return
        read += len(line)
        if line.endswith("\n") or len(line) < PROBE_BYTES:  # whole (the last line may lack \n)
            yield line


def _csv_sample(uri: str, options: Mapping[str, str]) -> tuple[tuple[str, ...], ValueSample] | None:
    """The file's header (its first line that is not blank nor a comment, read whole whatever
    its length) and the values of the records after it in the file's first PROBE_BYTES: rows
    of the header's number of fields, the reader's ``nullValue`` and blanks left out. None: no
    header."""
    delimiter = (options.get("sep", options.get("delimiter", ",")) or ",")[:1]
    quote = (options.get("quote", '"') or '"')[:1]
    escape = (options.get("escape", "\\") or "\\")[:1]
    comment = options.get("comment") or None
    null = options.get("nullvalue", "")

    def kept(line: str) -> bool:
        return bool(line.strip()) and not (comment and line.startswith(comment))

    fs, path = storage.filesystem(uri)
    with fs.open(path, "rb", block_size=_BLOCK_BYTES, compression="infer") as handle:
        text = io.TextIOWrapper(handle, encoding=_encoding(options), errors="replace")
        read = 0
        for line in text:
            read += len(line)
            if kept(line.rstrip("\r\n")):
                break
        else:
            return None
        names = tuple(next(csv.reader([line.rstrip("\r\n")], delimiter=delimiter, quotechar=quote)))
        values: dict[str, list[str]] = {name: [] for name in names}
        records = (r.rstrip("\r\n") for r in _probe_lines(text, read) if kept(r.rstrip("\r\n")))
        for row in csv.reader(records, delimiter=delimiter, quotechar=quote, escapechar=escape):
            if len(row) != len(names):
                continue  # too few or too many fields: the reader pads or quarantines it
            for name, value in zip(names, row, strict=True):
                if value != null and value.strip():
                    values[name].append(value)
    floats = {options.get(k) for k in ("nanvalue", "positiveinf", "negativeinf")}
    sample = ValueSample(
        {name: tuple(found) for name, found in values.items()},
        text=True,
        float_words=frozenset(word for word in floats if word),
    )
    return names, sample


def _json_sample(
    uri: str, options: Mapping[str, str]
) -> tuple[tuple[str, ...], ValueSample] | None:
    """The top-level keys of the JSON records in the file's first PROBE_BYTES and their values
    (null and empty ones left out); None: no record."""
    fs, path = storage.filesystem(uri)
    values: dict[str, list[object]] = {}
    with fs.open(path, "rb", block_size=_BLOCK_BYTES, compression="infer") as handle:
        text = io.TextIOWrapper(handle, encoding=_encoding(options), errors="replace")
        for line in _probe_lines(text):
            try:
                record = json.loads(line)
            except ValueError:
                continue  # blank, or malformed (the run quarantines it)
            if isinstance(record, dict):
                for key, value in record.items():
                    found = values.setdefault(key, [])
                    if value is not None and value != "":
                        found.append(value)
    if not values:
        return None
    sample = ValueSample({key: tuple(found) for key, found in values.items()}, text=False)
    return tuple(values), sample
