"""Schema evolution of a Delta table: what a commit's files change in the table's schema, and the
history of those changes, kept in the schema itself.

- :func:`reconcile` (pure) decides, from the table's schema and the staged files', what the
  commit changes: columns added (always nullable: the table's older files lack them and read
  back as NULL) and columns widened; or it raises :class:`~watermark_assets.exceptions.
  SchemaEvolutionError` naming each refused column, both types and the fix.
- :func:`evolved_schema` is the table's schema with the change applied and each changed column's
  history entry appended; the committer writes it as the ``metaData`` action of the SAME commit
  that adds the data (``delta/committer.py``).
- :func:`schema_history` reads the history back: every change, in which table version, from
  which source file (when the caller knew it). It lives in each column's metadata (key
  :data:`~watermark_assets.names.SCHEMA_HISTORY_KEY`), so it is in the table's ``metaData``
  action: every Delta checkpoint keeps it, log cleanup never removes it (commitInfo would be
  gone), and reading it is reading the snapshot's schema, the same at 5,000 commits as at 5.

Widening follows Delta's type widening rules (``docs.delta.io/delta-type-widening``) limited
to what both deltalake (delta-rs 1.6.6) and Spark 4's Parquet reader read back from the older
files: byte -> short -> integer -> long, byte/short/integer -> double, float -> double. Not
allowed: long -> double (loses precision above 2**53, Delta refuses it too), date -> timestamp
(deltalake reads it, Spark refuses an older file's date column read as a timestamp:
``PARQUET_COLUMN_DATA_TYPE_MISMATCH``), date -> timestamp_ntz (what Delta and Spark allow, but
delta-rs refuses a timestamp_ntz column without the ``timestampNtz`` table feature), decimals,
narrowing, any change to or from a string or a nested type. delta-rs cannot set
``delta.enableTypeWidening`` ("Error parsing property"), so a widening is written as a plain
schema change without the ``typeWidening`` feature's ``delta.typeChanges`` metadata: deltalake
and Spark 4's Parquet reader read the older files widened (tests/test_schema_evolution.py); a
delta-spark reader that checks the feature may refuse the table.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from watermark_assets import names
from watermark_assets.exceptions import SchemaEvolutionError

if TYPE_CHECKING:  # imported where used: the kinds' registry imports this module (through the
    # summaries) before a run worker starts Spark, and pyarrow with numpy costs ~0.2 s there
    import pyarrow as pa
    from deltalake import Schema as DeltaSchema

__all__ = [
    "FIXED",
    "NO_CHANGE",
    "WIDENINGS",
    "ColumnAdded",
    "ColumnWidened",
    "SchemaChange",
    "SchemaEvent",
    "SchemaEvolution",
    "events_of_versions",
    "evolved_schema",
    "reconcile",
    "schema_history",
]

#: The Delta types a column of each type may widen to (module docstring).
WIDENINGS: Mapping[str, frozenset[str]] = {
    "byte": frozenset({"short", "integer", "long", "double"}),
    "short": frozenset({"integer", "long", "double"}),
    "integer": frozenset({"long", "double"}),
    "float": frozenset({"double"}),
}

#: Why a change Delta users might expect is refused (the rest: "Delta cannot widen it").
_NOT_WIDENED: Mapping[tuple[str, str], str] = {
    ("long", "double"): "a double loses a long's precision above 2**53 (Delta refuses it too)",
    ("date", "timestamp_ntz"): "delta-rs writes no timestamp_ntz column without its table feature",
    ("date", "timestamp"): "Spark cannot read an older file's date column as a timestamp",
}

#: The fix for a column the run may evolve but was not allowed to.
_FIX = "set `schema.mode: add_columns` on the pipeline to evolve the table in the same commit"


@dataclass(frozen=True)
class SchemaEvolution:
    """What a run's commit may change in its table's schema (``schema.mode`` of the pipeline:
    ``add_columns`` allows both). ``origin``: where the change comes from (a source file, when
    the run knows it), recorded in the schema history. Default: nothing (a mismatch raises)."""

    add_columns: bool = False
    widen: bool = False
    origin: str | None = None

    @classmethod
    def for_mode(cls, mode: str, *, origin: str | None = None) -> SchemaEvolution:
        """The commit's permissions for a pipeline's ``schema.mode``: ``add_columns`` adds and
        widens; ``rescue`` adds (its ``_rescued_data`` column, the first time a value is
        rescued; every other column keeps the table's type); ``fail`` and ``ignore`` change
        nothing (their staged files hold the table's columns)."""
        if mode not in _MODES:
            raise ValueError(f"schema.mode {mode!r} is none of {sorted(_MODES)}")
        add_columns, widen = _MODES[mode]
        return cls(add_columns=add_columns, widen=widen, origin=origin)


#: ``schema.mode`` -> (add_columns, widen) (:meth:`SchemaEvolution.for_mode`).
_MODES: Mapping[str, tuple[bool, bool]] = {
    "fail": (False, False),
    "add_columns": (True, True),
    "rescue": (True, False),
    "ignore": (False, False),
}


#: No evolution: the files must fit the table's schema (the behaviour before schema modes).
FIXED = SchemaEvolution()


@dataclass(frozen=True)
class ColumnAdded:
    """A column the files have and the table lacks; added as nullable. ``delta_type``: its Delta
    type (the JSON value of the schema: a name, or an object for a nested type)."""

    name: str
    delta_type: Any

    @property
    def type_text(self) -> str:
        return _type_text(self.delta_type)


@dataclass(frozen=True)
class ColumnWidened:
    """A column whose type the files widen (Delta primitive type names)."""

    name: str
    from_type: str
    to_type: str


@dataclass(frozen=True)
class SchemaChange:
    """What a commit changes in the table's schema (:func:`reconcile`); empty: nothing."""

    added: tuple[ColumnAdded, ...] = ()
    widened: tuple[ColumnWidened, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.added or self.widened)

    def describe(self) -> str:
        """``added b (string); widened a integer -> long``, or ``no change``."""
        parts = [f"added {c.name} ({c.type_text})" for c in self.added] + [
            f"widened {c.name} {c.from_type} -> {c.to_type}" for c in self.widened
        ]
        return "; ".join(parts) or "no change"


NO_CHANGE = SchemaChange()


@dataclass(frozen=True)
class SchemaEvent:
    """One entry of a table's schema history: ``column`` was ``added`` (``to_type``) or
    ``widened`` (``from_type`` -> ``to_type``) by the commit ``version``, from ``origin``.
    ``data_version``: the data commit it was made for when that is a later one (a replace or
    merge: the schema commit, then the data commit; None: the same commit)."""

    column: str
    version: int
    change: Literal["added", "widened"]
    to_type: str
    from_type: str | None = None
    origin: str | None = None
    at_ms: int | None = None
    data_version: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "change": self.change,
            "from": self.from_type,
            "to": self.to_type,
            "origin": self.origin,
            "at_ms": self.at_ms,
            "data_version": self.data_version,
        }

    @classmethod
    def from_json(cls, column: str, data: Mapping[str, Any]) -> SchemaEvent:
        return cls(
            column=column,
            version=int(data["version"]),
            change=data["change"],
            to_type=str(data["to"]),
            from_type=data.get("from"),
            origin=data.get("origin"),
            at_ms=data.get("at_ms"),
            data_version=data.get("data_version"),
        )


def reconcile(
    table_schema: pa.Schema | DeltaSchema,
    staged_schema: pa.Schema | DeltaSchema,
    *,
    add_columns: bool,
    widen: bool,
    table_uri: str = "the table",
) -> SchemaChange:
    """What committing files of ``staged_schema`` changes in a table of ``table_schema``.

    - a column the files lack: nothing (it must be nullable in the table: the committer checks);
    - a column the table lacks: added (``add_columns``), else refused;
    - a column of another type: widened to the files' type when Delta allows it (``widen``,
      :data:`WIDENINGS`); a file type the table's already widens (a file written before the
      evolution, read again by a backfill) fits as it is (``widen``); else refused.

    Refused columns raise ONE :class:`SchemaEvolutionError` naming each column, both types and
    the fix; nothing is changed then."""
    table = _delta_fields(table_schema)
    folded = {name.lower(): name for name in table}
    added: list[ColumnAdded] = []
    widened: list[ColumnWidened] = []
    refused: list[tuple[str, str | None, str, str]] = []
    for name, file_type in _delta_fields(staged_schema).items():
        file_text = _type_text(file_type)
        if name not in table:
            if name.lower() in folded:
                why = (
                    f"in the files but the table has {folded[name.lower()]!r}: Delta column "
                    "names ignore case; rename it in the pipeline's schema"
                )
                refused.append((name, None, file_text, why))
            elif add_columns:
                added.append(ColumnAdded(name, file_type))
            else:
                why = f"in the files ({json.dumps(file_type)}) but not in the table; {_FIX}"
                refused.append((name, None, file_text, why))
            continue
        table_text = _type_text(table[name])
        if file_text == table_text:
            continue
        differ = f"the table has {json.dumps(table[name])}, the files {json.dumps(file_type)}"
        if file_text in WIDENINGS and table_text in WIDENINGS[file_text]:
            if widen:
                continue  # an older file: every reader widens it to the table's type
            refused.append((name, table_text, file_text, f"{differ}; {_FIX}"))
        elif table_text in WIDENINGS and file_text in WIDENINGS[table_text]:
            if widen:
                widened.append(ColumnWidened(name, table_text, file_text))
            else:
                refused.append((name, table_text, file_text, f"{differ}; {_FIX}"))
        else:
            reason = _NOT_WIDENED.get(
                (table_text, file_text), f"Delta cannot change {table_text} to {file_text}"
            )
            why = (
                f"{differ}: {reason}. Cast the column in the pipeline's schema, or keep the "
                "values that do not fit with `schema.mode: rescue`"
            )
            refused.append((name, table_text, file_text, why))
    if refused:
        raise SchemaEvolutionError(table_uri, refused)
    return SchemaChange(tuple(added), tuple(widened))


def evolved_schema(
    table_schema: DeltaSchema,
    change: SchemaChange,
    *,
    version: int,
    origin: str | None,
    at_ms: int,
    data_version: int | None = None,
) -> DeltaSchema:
    """``table_schema`` with ``change`` applied (widened types, added nullable columns at the
    end) and each changed column's history entry (commit ``version``; ``data_version``: the
    later data commit it is made for) appended."""
    document = json.loads(table_schema.to_json())
    by_name = {f["name"]: f for f in document["fields"]}
    for widened in change.widened:
        field = by_name[widened.name]
        field["type"] = widened.to_type
        event = SchemaEvent(
            widened.name,
            version,
            "widened",
            widened.to_type,
            widened.from_type,
            origin,
            at_ms,
            data_version,
        )
        _append_event(field, event)
    for added in change.added:
        field = {"name": added.name, "type": added.delta_type, "nullable": True, "metadata": {}}
        event = SchemaEvent(
            added.name, version, "added", added.type_text, None, origin, at_ms, data_version
        )
        _append_event(field, event)
        document["fields"].append(field)
    from deltalake import Schema as DeltaSchema

    return DeltaSchema.from_json(json.dumps(document))


def schema_history(schema: DeltaSchema | pa.Schema) -> tuple[SchemaEvent, ...]:
    """Every change recorded in the columns' metadata, by version then column."""
    schema = _as_delta(schema)
    events: list[SchemaEvent] = []
    for field in json.loads(schema.to_json())["fields"]:
        events.extend(_events(field))
    return tuple(sorted(events, key=lambda e: (e.version, e.column)))


def events_of_versions(schema: DeltaSchema, versions: Iterable[int]) -> tuple[SchemaEvent, ...]:
    """The history entries of the commits ``versions`` (a run's data commits: an entry made in
    a replace's or merge's schema commit for one of them counts)."""
    wanted = set(versions)
    return tuple(
        e for e in schema_history(schema) if e.version in wanted or e.data_version in wanted
    )


def _events(field: Mapping[str, Any]) -> list[SchemaEvent]:
    raw = (field.get("metadata") or {}).get(names.SCHEMA_HISTORY_KEY)
    if not raw:
        return []
    entries = json.loads(raw) if isinstance(raw, str) else raw
    return [SchemaEvent.from_json(field["name"], entry) for entry in entries]


def _append_event(field: dict[str, Any], event: SchemaEvent) -> None:
    metadata = field.setdefault("metadata", {})
    history = [e.to_json() for e in _events(field)] + [event.to_json()]
    metadata[names.SCHEMA_HISTORY_KEY] = json.dumps(history, separators=(",", ":"))


def _delta_fields(schema: pa.Schema | DeltaSchema) -> dict[str, Any]:
    """Each column's Delta type (the schema JSON's value), by name."""
    delta = _as_delta(schema)
    return {f["name"]: f["type"] for f in json.loads(delta.to_json())["fields"]}


def _as_delta(schema: pa.Schema | DeltaSchema) -> DeltaSchema:
    """``schema`` as a Delta schema (an Arrow schema converted)."""
    from deltalake import Schema as DeltaSchema

    return schema if isinstance(schema, DeltaSchema) else DeltaSchema.from_arrow(schema)


def _type_text(delta_type: Any) -> str:
    return delta_type if isinstance(delta_type, str) else json.dumps(delta_type, sort_keys=True)
