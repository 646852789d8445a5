"""What a sensor tick says about a source whose columns changed, in the same words for every
kind: the columns the schema lacks (or whose type changed), where they were seen, and what the
pipeline's ``schema.mode`` will do with them (:func:`columns_note`).

A file pipeline's tick reads the newest file of each batch it requests
(``kinds/file_path/sensors.py``). A
column source's (column, time, unit and time x unit pipelines: a Delta table, a PostgreSQL table)
is read once per tick that would start or wait for a run (:func:`source_schema_note`): one schema
read of the source (a Delta table's snapshot schema, a ``LIMIT 0`` query, the footers, header
lines or first JSON keys of a folder's few newest files:
:func:`~watermark_assets.sources.table.newest_layout`), without Spark, compared with the declared
columns (the source's DDL, then the table's) as the run will compare them
(:func:`~watermark_assets.sources.column_schema.source_changes`). A source that cannot say its
columns without reading rows (an HTTP API) says nothing: its run finds them.
The words go into the tick's log or skip message and, when they change, into an observation of
the asset (``schema/source_change``).
"""

from __future__ import annotations

from collections.abc import Sequence

from dagster import AssetKey, AssetObservation, AssetRecordsFilter, DagsterInstance, MetadataValue

from watermark_assets import vocabulary as vocab
from watermark_assets.runs.column_spec import ColumnSpec
from watermark_assets.sources.column import ShowsColumns
from watermark_assets.sources.column_schema import declared_columns, source_changes, widenable
from watermark_assets.sources.schema_drift import ColumnChange

#: What the runs do with the columns the schema lacks, per ``schema.mode``.
_NEW_COLUMNS = {
    "fail": "the runs stop on them (schema.mode fail); to take them in, set schema.mode "
    "add_columns or rescue",
    "add_columns": "the runs add them to the table (schema.mode add_columns)",
    "rescue": "the runs keep them in _rescued_data (schema.mode rescue)",
    "ignore": "the runs leave them out (schema.mode ignore)",
}
#: What the runs do with values of a column whose type changed, per ``schema.mode``.
_RETYPED = {
    "fail": "the runs stop on them (schema.mode fail)",
    "rescue": "values the table's type cannot hold go to _rescued_data (schema.mode rescue)",
    "ignore": "values the table's type cannot hold become NULL (schema.mode ignore)",
}
#: How many observations of the asset are looked through for the last schema note.
_LOOK_BACK = 50


def columns_note(
    lacking: Sequence[str],
    where: str,
    mode: str,
    *,
    declared_by: str | None = None,
    retyped: Sequence[ColumnChange] = (),
) -> str:
    """`` | columns the schema lacks: [...], in WHERE: what schema.mode does`` (and, for
    ``retyped`` columns, their types and what the mode does with their values); "" when
    nothing changed. ``declared_by``: the key that declares the columns (``source.schema``),
    named in the fix of ``fail``."""
    text = ""
    if lacking:
        fix = f", or add them to {declared_by}" if declared_by and mode == "fail" else ""
        does = _NEW_COLUMNS[mode] + fix
        text += f" | columns the schema lacks: {list(lacking)}, in {where}: {does}"
    if retyped:
        types = [f"{c.column} {c.declared} -> {c.found}" for c in retyped]
        text += f" | columns whose type changed: {types}, in {where}: {_retyped(mode, retyped)}"
    return text


def _retyped(mode: str, retyped: Sequence[ColumnChange]) -> str:
    if mode != "add_columns":
        return _RETYPED[mode]
    refused = [c.column for c in retyped if not widenable(str(c.declared), str(c.found))]
    if not refused:
        return "the runs widen the table's columns (schema.mode add_columns)"
    return (
        f"the runs stop on {refused}: schema.mode add_columns widens only what Delta can "
        "(int -> bigint, float -> double, ...)"
    )


def source_schema_note(pipeline: ColumnSpec) -> str:
    """The tick's words for the columns of the pipeline's source (its column engine's spec, no
    unit: a source that reads per unit cannot say its columns without a read anyway) that differ
    from the declared ones (module docstring); "" when none differ, the table does not exist yet
    (the first run creates it from the source's columns) or the source cannot say its columns
    without a read."""
    declared = declared_columns(pipeline.source.rows_ddl, pipeline.table.uri)
    if declared is None:  # no table yet: the first run creates it from the source's columns
        return ""
    where = f"source {pipeline.source.location!r}"
    try:
        source = pipeline.build_source()
        if not isinstance(source, ShowsColumns):
            return ""
        layout = source.columns()
    except Exception as error:  # a database down, a table gone: the run will say it in full
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return f" | schema: the columns of {where} could not be read ({first}); the run checks them"
    found = source_changes(declared, layout, pipeline.source.location)
    mode = pipeline.schema_policy.mode.value
    return columns_note(
        [c.column for c in found if c.is_new],
        where,
        mode,
        declared_by="source.schema" if pipeline.source.rows_ddl else None,
        retyped=[c for c in found if not c.is_new],
    )


def schema_observations(
    instance: DagsterInstance, asset_key: AssetKey, note: str
) -> list[AssetObservation]:
    """An observation of the asset saying ``note`` (``schema/source_change``), unless its last
    one already said it (none for no note)."""
    text = note.removeprefix(" | ")
    if not text:
        return []
    records = instance.fetch_observations(AssetRecordsFilter(asset_key=asset_key), _LOOK_BACK)
    for record in records.records:
        event = record.asset_observation
        said = None if event is None else event.metadata.get(vocab.SCHEMA_SOURCE_CHANGE)
        if said is not None:
            if said.value == text:
                return []
            break
    return [
        AssetObservation(
            asset_key=asset_key,
            description=text,
            metadata={vocab.SCHEMA_SOURCE_CHANGE: MetadataValue.text(text)},
        )
    ]
