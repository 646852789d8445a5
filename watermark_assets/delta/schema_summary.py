"""A pipeline's schema in one line, for ``explain`` and ``summary``: its ``schema.mode``, how many
columns its table has, and the table's last evolution (the newest version of its schema history,
:func:`~watermark_assets.delta.schema_change.schema_history`: what changed, in which Delta
version, from which file or source), or the files an inferred schema came from.

All of it is in the table's schema (the columns' metadata, kept by every checkpoint): ONE snapshot
read, whatever the length of the log, and no commit is walked.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from watermark_assets import names, storage
from watermark_assets.delta.schema_change import SchemaEvent, schema_history

if TYPE_CHECKING:
    from deltalake import DeltaTable

_FILES = re.compile(r"^(\d+) files: ")


@dataclass(frozen=True)
class SchemaSummary:
    """What ``explain`` and ``summary`` say of a pipeline's schema (module docstring)."""

    mode: str
    #: the table's columns; None: no table yet
    columns: int | None
    #: the changes of the newest version of the schema history (none: never evolved)
    last: tuple[SchemaEvent, ...] = ()
    #: where an inferred schema came from (``3 files: a .. c``, or one file); None: declared
    inferred: str | None = None

    def line(self) -> str:
        """``schema: add_columns, 5 table columns; last evolution in Delta version 7: added
        region (string) from 'landing/b.csv'`` (explain)."""
        if self.columns is None:
            return f"schema: {self.mode}, no table yet"
        text = f"schema: {self.mode}, {self.columns} table columns"
        if self.inferred:
            text += f", inferred from {self.inferred}"
        if not self.last:
            return text + "; no evolution recorded"
        changes = ", ".join(_change(e) for e in self.last)
        origins = sorted({e.origin for e in self.last if e.origin})
        source = f" from {', '.join(repr(o) for o in origins)}" if origins else ""
        return f"{text}; last evolution in Delta version {self.last[0].version}: {changes}{source}"

    def cell(self) -> str:
        """The summary's ``schema`` cell, narrow: ``fail``, ``add_columns (+2 @v7)`` (2 columns
        added in version 7; ``~1``: widened), ``fail (inferred: 3 files)``."""
        said = []
        if self.inferred:
            said.append(f"inferred: {_file_count(self.inferred)}")
        if self.last:
            added = sum(1 for e in self.last if e.change == "added")
            widened = len(self.last) - added
            counts = " ".join([f"+{added}"] * bool(added) + [f"~{widened}"] * bool(widened))
            said.append(f"{counts} @v{self.last[0].version}")
        return self.mode + (f" ({', '.join(said)})" if said else "")


def _change(event: SchemaEvent) -> str:
    if event.change == "added":
        return f"added {event.column} ({event.to_type})"
    return f"widened {event.column} {event.from_type} -> {event.to_type}"


def _file_count(origin: str) -> str:
    found = _FILES.match(origin)
    return f"{found.group(1)} files" if found else "1 file"


def schema_summary(table_uri: str, mode: str) -> SchemaSummary:
    """The schema of the table at ``table_uri`` under ``schema.mode`` ``mode``: one snapshot
    read (module docstring)."""
    table = _open(table_uri)
    return SchemaSummary(mode, None) if table is None else _summary_of(table, mode)


@dataclass(frozen=True)
class TableFacts:
    """What a ``summary`` row says of a pipeline's table, read from ONE snapshot: its rows (the
    add actions' statistics, no data read), its version and its schema."""

    #: rows in the current version (0: no table yet)
    rows: int
    #: the current version; None: no table yet
    version: int | None
    schema: SchemaSummary


def table_facts(table_uri: str, mode: str) -> TableFacts:
    """:class:`TableFacts` of the table at ``table_uri`` (``mode``: the pipeline's
    ``schema.mode``), one snapshot load where a row used to load the table once per fact."""
    from watermark_assets.delta.log import rows_in

    table = _open(table_uri)
    if table is None:
        return TableFacts(0, None, SchemaSummary(mode, None))
    return TableFacts(rows_in(table), table.version(), _summary_of(table, mode))


def _open(table_uri: str) -> DeltaTable | None:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(table_uri, storage_options=storage.delta_options(table_uri))
    except TableNotFoundError:
        return None


def _summary_of(table: DeltaTable, mode: str) -> SchemaSummary:
    schema = table.schema()
    fields = json.loads(schema.to_json())["fields"]
    inferred = None
    for field in fields:
        raw = (field.get("metadata") or {}).get(names.SCHEMA_INFERRED_KEY)
        if raw:
            inferred = str(json.loads(raw).get("origin") or "") or None
            break
    history = schema_history(schema)
    newest = max((e.version for e in history), default=None)
    last = tuple(e for e in history if e.version == newest)
    return SchemaSummary(mode, len(fields), last, inferred)
