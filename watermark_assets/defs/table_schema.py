"""The table's schema in every materialization: ``dagster/column_schema`` and what the run's
commits changed (``schema/added_columns``, ``schema/widened``), read from the Delta table.

The changes come from the table's schema history (``delta/schema_change.py``: kept in the
columns' metadata), matched to the run's commits by the versions its metadata already names
(``delta/version``, ``delta/versions``): the history is one snapshot read, whatever the log's
length, and it does not depend on each kind's result type.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dagster import (
    MetadataValue,
    TableColumn,
    TableColumnConstraints,
    TableSchema,
)
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from watermark_assets import storage
from watermark_assets import vocabulary as v
from watermark_assets.delta.schema_change import SchemaEvent, events_of_versions, schema_history
from watermark_assets.sources.schema_inference import inferred_note


def with_table_schema(metadata: Mapping[str, Any], table_uri: str) -> dict[str, Any]:
    """``metadata`` plus the table's ``dagster/column_schema`` and the schema changes made by
    the commits it names (none: no schema key; no table yet: ``metadata`` as it is)."""
    try:
        table = DeltaTable(table_uri, storage_options=storage.delta_options(table_uri))
    except TableNotFoundError:
        return dict(metadata)
    delta_schema = table.schema()
    history: dict[str, list[SchemaEvent]] = {}
    for event in schema_history(delta_schema):
        history.setdefault(event.column, []).append(event)
    columns = [
        TableColumn(
            name=field["name"],
            type=field["type"] if isinstance(field["type"], str) else json.dumps(field["type"]),
            description=_described(history.get(field["name"], []), field.get("metadata")),
            constraints=TableColumnConstraints(nullable=bool(field["nullable"])),
        )
        for field in json.loads(delta_schema.to_json())["fields"]
    ]
    result = {**metadata, v.DAGSTER_COLUMN_SCHEMA: MetadataValue.table_schema(TableSchema(columns))}
    events = events_of_versions(delta_schema, metadata_versions(metadata))
    added = [_row(e) for e in events if e.change == "added"]
    widened = [_row(e) for e in events if e.change == "widened"]
    if added:
        result[v.SCHEMA_ADDED_COLUMNS] = v.table(ADDED_COLUMNS, added)
    if widened:
        result[v.SCHEMA_WIDENED] = v.table(WIDENED_COLUMNS, widened)
    return result


def metadata_versions(metadata: Mapping[str, Any]) -> set[int]:
    """The commit versions a materialization's metadata names (``delta/version``; a replay's,
    time run's or unit run's ``delta/versions``); the checks read the same."""
    found: set[int] = set()
    for key in (v.DELTA_VERSION, v.DELTA_VERSIONS):
        value = metadata.get(key)
        if isinstance(value, MetadataValue):  # a record: never iterate it
            value = value.value
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            found.add(value)
        elif isinstance(value, (list, tuple)):
            found.update(x for x in value if isinstance(x, int) and not isinstance(x, bool))
        elif isinstance(value, Mapping):  # versions by unit or by window
            found.update(x for x in value.values() if isinstance(x, int))
    return found


#: The columns of ``schema/added_columns``: the added column, its Delta type, the commit that
#: added it and the source file it came from (empty: not known).
ADDED_COLUMNS: dict[str, str] = {
    "column": "string",
    "type": "string",
    "version": "int",
    "origin": "string",
}
#: The columns of ``schema/widened``: the column, its Delta type before and after, the commit
#: and the source file.
WIDENED_COLUMNS: dict[str, str] = {
    "column": "string",
    "from": "string",
    "to": "string",
    "version": "int",
    "origin": "string",
}


def _row(event: SchemaEvent) -> dict[str, object]:
    row: dict[str, object] = {"column": event.column}
    if event.change == "added":
        row["type"] = event.to_type
    else:
        row["from"], row["to"] = event.from_type, event.to_type
    return row | {"version": event.version, "origin": event.origin}


def _described(events: list[SchemaEvent], metadata: Mapping[str, Any] | None) -> str | None:
    """``inferred as bigint when the table was created from 3 files: a .. c`` (``schema.infer``),
    ``added in version 3 (from landing/b.csv); widened integer -> long in version 9``."""
    inferred = inferred_note(metadata)
    if not events:
        return inferred
    return "; ".join(
        ([inferred] if inferred else [])
        + [
            (
                f"added in version {e.version}"
                if e.change == "added"
                else f"widened {e.from_type} -> {e.to_type} in version {e.version}"
            )
            + (f" (from {e.origin})" if e.origin else "")
            for e in events
        ]
    )
