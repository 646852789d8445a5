"""Materialization metadata every kind shares: what a person reads on the asset page.

Keys are grouped by prefix so the UI lists them together: ``watermark/*`` for where the watermark
stands and why, ``rows/*`` and ``files`` for volumes, ``delta/*`` for the commit, plus Dagster's
standard ``dagster/uri`` and ``dagster/row_count``. Each kind's own entries are in its folder
(``kinds/file_path/metadata.py``, ``kinds/column/metadata.py``); the keys are ``vocabulary.py``'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from dagster import MetadataValue

from watermark_assets import vocabulary as v
from watermark_assets.config.schema import SchemaMode
from watermark_assets.core.column.watermark import ColumnWatermark
from watermark_assets.runs.column import StagedColumnBatch
from watermark_assets.runs.window_commit import WindowRunTotals

#: The columns of ``delta/txns``: each Delta transaction id (app id) the commit set, its version.
TXN_COLUMNS: dict[str, str] = {"app_id": "string", "version": "int"}


def txns_table(txns: Mapping[str, int]) -> MetadataValue:
    """``delta/txns``: app id -> version as a table, one row per transaction id."""
    return v.pairs(TXN_COLUMNS, txns)


def version_value(version: int | None, reason: str) -> MetadataValue:
    """``delta/version``: the commit's version, or why there was none."""
    if version is not None:
        return MetadataValue.int(version)
    return MetadataValue.text(f"no new commit: {reason}")


def column_watermark_entries(label: str, watermark: ColumnWatermark) -> dict[str, Any]:
    """``label`` readable (:func:`column_watermark_text`), ``label_values`` (column -> value,
    plain JSON) and ``label_time`` when the leading column is an aware datetime."""
    entries: dict[str, Any] = {
        label: MetadataValue.text(v.column_watermark_text(watermark)),
        f"{label}_values": MetadataValue.json(
            {} if watermark.is_empty else v.plain(watermark.as_dict())
        ),
    }
    leading = None if watermark.is_empty else watermark.values[0]
    if isinstance(leading, datetime) and leading.tzinfo is not None:
        entries[f"{label}_time"] = v.timestamp(leading)
    return entries


#: The columns of ``schema/values_nulled`` and ``schema/values_rescued``: per declared column,
#: how many of its values did not fit its type.
VALUES_PER_COLUMN_COLUMNS: dict[str, str] = {"column": "string", "values": "int"}


def _values_per_column(values: Mapping[str, int]) -> MetadataValue:
    return v.pairs(VALUES_PER_COLUMN_COLUMNS, values)


def schema_mode_entries(
    mode: SchemaMode, ignored: Sequence[str], values: Mapping[str, int], rows_rescued: int
) -> dict[str, Any]:
    """What ``schema.mode`` ignore (``ignored`` columns, ``values`` nulled per column) or rescue
    (``values`` rescued per column, ``rows_rescued``) did to a read (docs/metadata.md)."""
    if mode is SchemaMode.IGNORE:
        return {
            v.SCHEMA_IGNORED_COLUMNS: MetadataValue.json(list(ignored)),
            v.SCHEMA_VALUES_NULLED: _values_per_column(values),
        }
    if mode is SchemaMode.RESCUE:
        return {
            v.SCHEMA_VALUES_RESCUED: _values_per_column(values),
            v.SCHEMA_ROWS_RESCUED: MetadataValue.int(rows_rescued),
        }
    return {}


def staged_reads_metadata(staged: Sequence[StagedColumnBatch]) -> dict[str, Any]:
    """What the reads of a column source (one, or a window's, unit's or chunk's each) could not
    take as rows: ``rows/quarantined`` (malformed CSV/JSON records put in ``quarantine/table``
    by these runs), ``source/columns_ignored`` (columns the source's files hold that the rows
    leave out: a Parquet footer, a CSV header, the keys of a JSON file's first records); and
    what they cleaned first: ``cleanup/orphans_removed`` (crash leftovers under the table and
    its quarantine, as the file pipelines count theirs)."""
    metadata: dict[str, Any] = {
        v.ROWS_QUARANTINED: MetadataValue.int(sum(s.rows_quarantined for s in staged)),
        v.CLEANUP_ORPHANS_REMOVED: MetadataValue.int(sum(len(s.leftovers_removed) for s in staged)),
    }
    quarantines = [s for s in staged if s.quarantines]
    if quarantines:
        table = quarantines[0].plan.request.pipeline.table.quarantine
        metadata[v.QUARANTINE_TABLE] = MetadataValue.path(table)
    listed = [s.columns_ignored for s in staged if s.columns_ignored is not None]
    if listed:  # a source that can list its files' columns
        ignored = list(dict.fromkeys(c for columns in listed for c in columns))
        metadata[v.SOURCE_COLUMNS_IGNORED] = MetadataValue.json(ignored)
    if staged:  # schema.mode ignore / rescue: what the reads left out, nulled or rescued
        values: Counter[str] = Counter()
        for read in staged:
            values.update(read.schema_values)
        left = [s.schema_read.ignored for s in staged if s.schema_read is not None]
        metadata |= schema_mode_entries(
            staged[0].plan.request.pipeline.schema_policy.mode,
            list(dict.fromkeys(c for columns in left for c in columns)),
            dict(values),
            sum(s.rows_rescued for s in staged),
        )
    return metadata


def null_watermark_rows(count: int | None) -> MetadataValue:
    """``rows/null_watermark``: the rows whose watermark column is NULL, or ``not counted``."""
    return MetadataValue.int(count) if count is not None else MetadataValue.text("not counted")


def window_run_totals(result: WindowRunTotals) -> dict[str, Any]:
    """A time or time x unit run's totals over its windows or cells, and its commits."""
    return {
        v.ROWS_READ: MetadataValue.int(result.rows_read),
        v.ROWS_COMMITTED: MetadataValue.int(result.rows_committed),
        v.ROWS_REMOVED: MetadataValue.int(result.rows_removed),
        v.ROWS_MOVED: MetadataValue.int(result.rows_moved),
        v.DELTA_VERSIONS: MetadataValue.json(result.versions),
    }
