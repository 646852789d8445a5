"""The table's schema in Dagster (issue 25): ``dagster/column_schema`` from the Delta table on
every materialization, ``schema/added_columns`` and ``schema/widened`` for the commits the run
made, and Dagster's ``column_schema_change`` check on every pipeline's asset. No Spark."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import pipeline_yaml, project_config
from dagster import AssetCheckKey, AssetKey, MetadataValue, TableSchema

from watermark_assets import vocabulary as v
from watermark_assets.defs import build_definitions
from watermark_assets.defs.checks import SCHEMA_CHANGE_CHECK
from watermark_assets.defs.table_schema import metadata_versions, with_table_schema
from watermark_assets.delta.committer import DeltaCommitter, TxnVersion
from watermark_assets.delta.schema_change import SchemaEvolution
from watermark_assets.delta.stats import describe_data_files

NOW = datetime(2024, 1, 2, tzinfo=timezone.utc)


def commit(table: Path, name: str, rows: list[dict[str, Any]], schema: pa.Schema, n: int) -> int:
    table.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), table / name)
    outcome = DeltaCommitter(str(table), now=lambda: NOW).commit(
        describe_data_files(str(table), [name], []),
        schema=schema,
        partition_by=[],
        txns=[TxnVersion("t", n)],
        custom_metadata={},
        evolution=SchemaEvolution(add_columns=True, widen=True, origin=f"landing/{name}"),
    )
    assert outcome.version is not None, outcome.reason
    return outcome.version


def test_every_materialization_carries_the_tables_columns_and_the_runs_changes(
    tmp_path: Path,
) -> None:
    table = tmp_path / "orders"
    old = pa.schema([("id", pa.int32()), ("value", pa.string())])
    commit(table, "a.parquet", [{"id": 1, "value": "a"}], old, 1)
    new = pa.schema([("id", pa.int64()), ("value", pa.string()), ("note", pa.string())])
    evolved = commit(table, "b.parquet", [{"id": 2, "value": "b", "note": "x"}], new, 2)

    metadata = with_table_schema({v.DELTA_VERSION: MetadataValue.int(evolved)}, str(table))

    schema = metadata[v.DAGSTER_COLUMN_SCHEMA].value
    assert isinstance(schema, TableSchema)
    assert [(c.name, c.type, c.constraints.nullable) for c in schema.columns] == [
        ("id", "long", True),
        ("value", "string", True),
        ("note", "string", True),
    ]
    assert schema.columns[2].description == "added in version 1 (from landing/b.parquet)"
    assert v.table_rows(metadata[v.SCHEMA_ADDED_COLUMNS]) == [
        {"column": "note", "type": "string", "version": 1, "origin": "landing/b.parquet"}
    ]
    assert v.table_rows(metadata[v.SCHEMA_WIDENED]) == [
        {
            "column": "id",
            "from": "integer",
            "to": "long",
            "version": 1,
            "origin": "landing/b.parquet",
        }
    ]

    later = commit(table, "c.parquet", [{"id": 3, "value": "c", "note": "y"}], new, 3)
    quiet = with_table_schema({v.DELTA_VERSION: MetadataValue.int(later)}, str(table))
    assert v.DAGSTER_COLUMN_SCHEMA in quiet
    assert v.SCHEMA_ADDED_COLUMNS not in quiet and v.SCHEMA_WIDENED not in quiet


def test_no_table_yet_adds_nothing(tmp_path: Path) -> None:
    assert with_table_schema({"k": 1}, str(tmp_path / "none")) == {"k": 1}


def test_the_versions_a_runs_metadata_names() -> None:
    assert metadata_versions({v.DELTA_VERSION: MetadataValue.int(4)}) == {4}
    assert metadata_versions({v.DELTA_VERSIONS: MetadataValue.json([5, 7])}) == {5, 7}
    assert metadata_versions({v.DELTA_VERSION: MetadataValue.text("no new commit: x")}) == set()
    assert metadata_versions({v.DELTA_VERSION: 3, v.DELTA_VERSIONS: [True, 8]}) == {3, 8}


def test_every_pipeline_has_a_column_schema_change_check(tmp_path: Path) -> None:
    (tmp_path / "landing").mkdir()
    column = {
        "name": "orders",
        "source": {"type": "delta_table", "uri": str(tmp_path / "sources" / "orders")},
        "watermark": {"columns": ["updated_at"]},
        "table": {"uri": str(tmp_path / "delta" / "orders")},
    }
    defs = build_definitions(project_config(pipeline_yaml(tmp_path), column))
    keys = {key for checks in defs.asset_checks or [] for key in checks.check_keys}
    for asset in ("events", "orders"):
        assert AssetCheckKey(AssetKey(asset), SCHEMA_CHANGE_CHECK) in keys, asset
