"""``runs.file_commit.commit_batch(..., add_columns=, widen=)`` on a ``parquet_commit`` pipeline
(another writer's Parquet files committed in place: no Spark): a landing file that gains a
column is committed with the new column in ONE commit, the history naming the file; without
the flags the commit is refused and the watermark does not move."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import project_config
from deltalake import DeltaTable

from watermark_assets.core.partition_selection import PartitionSelection, TimeWindow
from watermark_assets.defs.partitions import partition_mapper, partitions_definition
from watermark_assets.delta.schema_change import schema_history
from watermark_assets.exceptions import SchemaEvolutionError
from watermark_assets.runs.file_commit import BatchResult, commit_batch
from watermark_assets.runs.file_plan import BatchRequest, plan_batch
from watermark_assets.runs.file_stage import stage_batch

UTC = timezone.utc
NOW = datetime(2024, 1, 31, 12, tzinfo=UTC)
OLD = pa.schema([("click_id", pa.int64()), ("page", pa.string())])
NEW = OLD.append(pa.field("referrer", pa.string()))


def land(table: Path, name: str, schema: pa.Schema, rows: list[dict[str, object]]) -> str:
    relative = f"date=2024-01-30/{name}"
    (table / relative).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), table / relative)
    landed = (NOW - timedelta(hours=1)).timestamp()  # landed before the frozen clock's now
    os.utime(table / relative, (landed, landed))
    return relative


def ingest(table: Path, file: str, *, add_columns: bool) -> BatchResult:
    config = project_config(
        {
            "name": "clicks",
            "source": {"type": "parquet_commit", "uri": str(table)},
            "watermark": {
                "partition_template": "date=%Y-%m-%d",
                "file_name_ordering": "lexicographic",
            },
            "table": {"uri": str(table), "partition_by": ["date"]},
            "partitions": {"granularity": "daily", "start": "2024-01-01"},
        }
    )
    pipeline = config.file_pipeline("clicks")
    day = datetime(2024, 1, 30, tzinfo=UTC)
    request = BatchRequest(
        pipeline=pipeline,
        selection=PartitionSelection.of_time_window(
            ["2024-01-30"], TimeWindow(day, day + timedelta(days=1))
        ),
        run_id="run",
        files=(file,),
        clock=lambda: NOW,
    )
    partition_of = partition_mapper(partitions_definition(pipeline), lambda: NOW)
    plan = plan_batch(request, partition_of, now=NOW)
    staged = stage_batch(plan, None, now=NOW)
    return commit_batch(staged, now=NOW, add_columns=add_columns, widen=add_columns)


def test_a_landing_file_with_a_new_column_evolves_the_table_in_its_own_commit(
    tmp_path: Path,
) -> None:
    table = tmp_path / "clicks"
    old_file = land(table, "a-001.parquet", OLD, [{"click_id": 1, "page": "/a"}])
    first = ingest(table, old_file, add_columns=False)
    assert first.outcome.version == 0, first.outcome.reason
    new_file = land(table, "a-002.parquet", NEW, [{"click_id": 2, "page": "/b", "referrer": "x"}])

    with pytest.raises(SchemaEvolutionError, match="'referrer'") as refused:
        ingest(table, new_file, add_columns=False)
    assert "schema.mode: add_columns" in str(refused.value)
    assert DeltaTable(str(table)).version() == 0, "nothing committed"

    result = ingest(table, new_file, add_columns=True)
    assert result.outcome.version == 1, result.outcome.reason
    assert [c.name for c in result.outcome.schema_change.added] == ["referrer"]
    log = (table / "_delta_log" / f"{1:020d}.json").read_text().splitlines()
    assert sorted({next(iter(json.loads(line))) for line in log}) == [
        "add",
        "commitInfo",
        "metaData",
        "txn",
    ]
    rows = sorted(
        DeltaTable(str(table)).to_pyarrow_table().to_pylist(), key=lambda r: r["click_id"]
    )
    assert [(r["click_id"], r["referrer"]) for r in rows] == [(1, None), (2, "x")]
    [event] = schema_history(DeltaTable(str(table)).schema())
    assert (event.column, event.version, event.origin) == ("referrer", 1, new_file)
