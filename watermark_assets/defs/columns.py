"""``dagster/column_schema``: the asset's table columns, from the source's declared DDL.

The columns the source's ``schema`` declares (Spark's types, ``NOT NULL``, ``COMMENT``), then
the ones the pipeline adds (``defs/build.py`` names them per kind). A source without a DDL
(Delta, Parquet, JDBC, another pipeline) gives no column schema: its columns are only known
when Spark reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dagster import (
    AssetsDefinition,
    AutomationCondition,
    FreshnessPolicy,
    TableColumn,
    TableColumnConstraints,
    TableSchema,
)

from watermark_assets.spark.ddl import parse_read_schema

#: Dagster's metadata key of a table's columns (the asset's Columns in the UI).
COLUMN_SCHEMA_KEY = "dagster/column_schema"


def ddl_columns(ddl: str) -> list[TableColumn]:
    """The columns of a Spark DDL column list, typed as Spark spells them."""
    return [
        TableColumn(
            name=column.name,
            type=column.type,
            description=column.comment,
            constraints=TableColumnConstraints(nullable=column.nullable),
        )
        for column in parse_read_schema(ddl)
    ]


def column_schema(ddl: str | None, added: Sequence[TableColumn] = ()) -> TableSchema | None:
    """The table's columns: ``ddl``'s, then ``added``; None without a DDL."""
    if ddl is None or not ddl.strip():
        return None
    return TableSchema(columns=[*ddl_columns(ddl), *added])


def source_schema(source: Any) -> TableSchema | None:
    """A column source's declared columns (``schema``), with a file download's ``date_column``
    (None: the source declares no DDL)."""
    date_column = getattr(source, "date_column", None)
    added = (
        [] if date_column is None else [TableColumn(date_column, "timestamp", "The file's date.")]
    )
    return column_schema(getattr(source, "schema_ddl", None), added)


def with_asset_attributes(
    asset: AssetsDefinition,
    freshness: FreshnessPolicy | None,
    schema: TableSchema | None,
    automation: AutomationCondition[Any] | None = None,
) -> AssetsDefinition:
    """``asset`` with its freshness policy, column schema and automation condition (each only
    when there is one)."""
    if freshness is None and schema is None and automation is None:
        return asset

    def attributes(spec: Any) -> Any:
        if schema is not None:
            spec = spec.merge_attributes(metadata={COLUMN_SCHEMA_KEY: schema})
        if automation is not None:
            spec = spec.replace_attributes(automation_condition=automation)
        return spec if freshness is None else spec.replace_attributes(freshness_policy=freshness)

    return asset.map_asset_specs(attributes)


def with_identity(
    asset: AssetsDefinition,
    group: str | None,
    owners: Sequence[str],
    tags: Mapping[str, str],
) -> AssetsDefinition:
    """``asset`` in the pipeline's ``group:`` (None: its kind's), with its ``owners:`` and its
    ``tags:`` added to the kind's own."""
    if group is None and not owners and not tags:
        return asset

    def identity(spec: Any) -> Any:
        if group is not None:
            spec = spec.replace_attributes(group_name=group)
        return spec.merge_attributes(owners=list(owners), tags=dict(tags))

    return asset.map_asset_specs(identity)
