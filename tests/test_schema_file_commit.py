"""``kinds.file_path.commit.commit_batch(..., add_columns=, widen=)`` on a ``parquet_commit``
pipeline
(another writer's Parquet files committed in place: no Spark), under ``schema.mode``: a landing
file that gains a column is committed with the new column in ONE commit (``add_columns``), the
history naming the file; under ``fail`` the batch is refused before the commit, naming the file,
the column and both types, and the watermark does not move; ``ignore`` leaves the column out of
the table's schema; ``rescue`` is refused by the configuration (no file is rewritten).

Before the modes applied here, only the batch's FIRST file's footer was the commit's schema: a
later file's new column was committed invisible to Delta readers whatever the mode, and a column
whose type changed was committed unchecked."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _landing import plan_day
from conftest import project_config
from deltalake import DeltaTable

from watermark_assets.delta.schema_change import SchemaEvolution, schema_history
from watermark_assets.exceptions import SchemaChangeError
from watermark_assets.kinds.file_path.commit import BatchResult, commit_batch
from watermark_assets.kinds.file_path.stage import stage_batch

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


def clicks(table: Path, mode: str = "fail") -> dict[str, object]:
    return {
        "name": "clicks",
        "source": {"type": "parquet_commit", "uri": str(table)},
        "watermark": {
            "partition_template": "date=%Y-%m-%d",
            "file_name_ordering": "lexicographic",
        },
        "table": {"uri": str(table), "partition_by": ["date"]},
        "partitions": {"granularity": "daily", "start": "2024-01-01"},
        "schema": {"mode": mode},
    }


def ingest(table: Path, *files: str, mode: str = "fail") -> BatchResult:
    """Plan, stage and commit ``files`` under ``schema.mode`` (the IO manager's flags)."""
    config = project_config(clicks(table, mode))
    plan = plan_day(config.file_pipeline("clicks"), "2024-01-30", NOW, files)
    staged = stage_batch(plan, None, now=NOW)
    evolution = SchemaEvolution.for_mode(mode)
    return commit_batch(staged, now=NOW, add_columns=evolution.add_columns, widen=evolution.widen)


def test_a_landing_file_with_a_new_column_evolves_the_table_in_its_own_commit(
    tmp_path: Path,
) -> None:
    table = tmp_path / "clicks"
    old_file = land(table, "a-001.parquet", OLD, [{"click_id": 1, "page": "/a"}])
    first = ingest(table, old_file)
    assert first.outcome.version == 0, first.outcome.reason
    new_file = land(table, "a-002.parquet", NEW, [{"click_id": 2, "page": "/b", "referrer": "x"}])

    with pytest.raises(SchemaChangeError, match="'referrer'") as refused:
        ingest(table, new_file)  # schema.mode fail: refused before the commit
    assert "schema.mode: add_columns" in str(refused.value)
    assert new_file in str(refused.value)
    assert DeltaTable(str(table)).version() == 0, "nothing committed"

    result = ingest(table, new_file, mode="add_columns")
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


CHANGED = pa.schema([("click_id", pa.string()), ("page", pa.string())])


def table_columns(table: Path) -> list[str]:
    return [f.name for f in DeltaTable(str(table)).schema().fields]


# (id, mode, the second file's schema, rows of it, error text (None: committed), columns after)
CASES = [
    (
        "a later file's new column stops the batch under fail",
        "fail",
        NEW,
        {"referrer": "x"},
        ("a-002.parquet", "'referrer' (string)", "schema.mode: add_columns"),
        None,
    ),
    (
        "a later file's new column joins the table in the batch's commit under add_columns",
        "add_columns",
        NEW,
        {"referrer": "x"},
        None,
        ["click_id", "page", "referrer", "date"],
    ),
    (
        "a later file's new column is left out of the table's schema under ignore",
        "ignore",
        NEW,
        {"referrer": "x"},
        None,
        ["click_id", "page", "date"],
    ),
    (
        "a bigint turned string stops the batch under fail, naming both types",
        "fail",
        CHANGED,
        {},
        ("a-002.parquet", "'click_id' is string, the schema says bigint"),
        None,
    ),
    (
        "a bigint turned string is no widening: refused under add_columns",
        "add_columns",
        CHANGED,
        {},
        ("a-002.parquet", "'click_id' is string, the schema says bigint", "source.type: files"),
        None,
    ),
    (
        "a bigint turned string cannot be nulled in a file committed by reference under ignore",
        "ignore",
        CHANGED,
        {},
        ("'click_id' is string", "source.type: files"),
        None,
    ),
]


@pytest.mark.parametrize(
    ("mode", "schema", "extra", "error", "columns"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_a_batch_whose_later_file_changes_under_each_mode(
    tmp_path: Path,
    mode: str,
    schema: pa.Schema,
    extra: dict[str, object],
    error: tuple[str, ...] | None,
    columns: list[str] | None,
) -> None:
    """Two files in ONE batch (the table's first): the first file's footer is the schema, the
    second differs."""
    table = tmp_path / "clicks"
    first = land(table, "a-001.parquet", OLD, [{"click_id": 1, "page": "/a"}])
    click = "2" if schema.field("click_id").type == pa.string() else 2
    second = land(table, "a-002.parquet", schema, [{"click_id": click, "page": "/b", **extra}])
    if error is not None:
        with pytest.raises(SchemaChangeError) as refused:
            ingest(table, first, second, mode=mode)
        for text in error:
            assert text in str(refused.value)
        assert not (table / "_delta_log").exists(), "nothing committed"
        return
    result = ingest(table, first, second, mode=mode)
    assert result.outcome.version == 0, result.outcome.reason
    assert table_columns(table) == columns
    rows = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    assert sorted(r["click_id"] for r in rows) == [1, 2]
    if mode == "ignore":
        assert result.staged.columns_ignored == ("referrer",)


def test_rescue_is_refused_for_files_committed_by_reference(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="rescue cannot apply to a parquet_commit source") as raised:
        project_config(clicks(tmp_path / "clicks", "rescue"))
    assert "source.type: files" in str(raised.value)
