"""Column pipelines with ``table.merge_keys``: each run's rows upserted on their key, ONE commit.

Each run is the pipeline's Dagster job executed in process (the one Spark session of the test
run) on real Delta tables on tmp_path, as in test_column_pipeline.py (whose scene this reuses).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import project_config
from deltalake import DeltaTable, write_deltalake
from test_column_pipeline import (
    NOW,
    ORDERS_SCHEMA,
    Scene,
    at,
    checks_passed,
    column_pipeline,
    metadata,
    order,
)

from watermark_assets.config import ColumnPipelineConfig
from watermark_assets.delta.committer import DeltaCommitter, TxnVersion
from watermark_assets.delta.merge import MERGE_METADATA_KEY
from watermark_assets.delta.stats import describe_data_files
from watermark_assets.exceptions import ConfigError
from watermark_assets.providers.delta_metadata import DeltaMetadataProvider
from watermark_assets.runs import column as column_run
from watermark_assets.runs.column import RUN_METADATA_KEY

BY_ID = {"merge_keys": ["id"]}
CHECKS_PASS = {
    "watermark_never_moves_backwards": True,
    "rows_reconcile": True,
    "column_schema_change": True,
}


def log_versions(table: str) -> list[int]:
    return sorted(int(p.stem) for p in Path(table, "_delta_log").glob("*.json"))


def actions_of(table: str, version: int) -> list[str]:
    text = Path(table, "_delta_log", f"{version:020d}.json").read_text(encoding="utf-8")
    return [next(iter(json.loads(line))) for line in text.splitlines() if line.strip()]


def orphan_parquet_files(table: str) -> set[str]:
    """Parquet files under the table (staging aside) that no commit of the log ever added."""
    added = {
        f.path for record in DeltaCommitter(table).read_commits_after(None) for f in record.added
    }
    on_disk = {
        str(p.relative_to(table))
        for p in Path(table).rglob("*.parquet")
        if "_staging" not in p.parts
    }
    return on_disk - added


@pytest.mark.spark
def test_an_updated_row_replaces_its_old_version_in_one_commit_per_run(tmp_path: Path) -> None:
    scene = Scene(tmp_path, table=BY_ID)
    scene.orders.put(*(order(i, at(9 + i % 3)) for i in range(10)))
    first = metadata(scene.run())
    assert (first["rows/inserted"], first["rows/updated"], first["merge/keys"]) == (10, 0, "id")
    assert log_versions(scene.table) == [0]

    scene.orders.put(order(3, at(11, 30), 33.0), order(10, at(11, 45)))
    result = scene.run()
    second = metadata(result)

    assert log_versions(scene.table) == [0, 1], "ONE commit per run"
    scene.assert_each_source_row_once()  # id 3 once, with its new amount
    assert [r["amount"] for r in scene.target_rows() if r["id"] == 3] == [33.0]
    assert (second["rows/read"], second["rows/committed"]) == (2, 2)
    assert (second["rows/updated"], second["rows/inserted"], second["rows/removed"]) == (1, 1, 1)
    assert second["dagster/row_count"] == 11
    assert checks_passed(result) == CHECKS_PASS
    commit = DeltaCommitter(scene.table).read_commit(1)
    run = json.loads(commit.custom_metadata[RUN_METADATA_KEY])
    assert (run["merge_keys"], run["rows_updated"], run["rows_inserted"]) == (["id"], 1, 1)
    assert json.loads(commit.custom_metadata[MERGE_METADATA_KEY])["keys"] == ["id"]
    kinds = actions_of(scene.table, 1)
    assert kinds.count("remove") == 1 and kinds.count("add") >= 2  # the new rows + a remainder
    assert DeltaMetadataProvider(scene.table).get_watermark("orders") is not None


@pytest.mark.spark
def test_a_look_back_re_reading_unchanged_rows_leaves_the_table_identical(tmp_path: Path) -> None:
    scene = Scene(tmp_path, watermark={"columns": ["updated_at"], "backward_days": 1}, table=BY_ID)
    scene.orders.put(order(1, at(8, day=1)), *(order(i, at(8 + i)) for i in range(2, 8)))
    metadata(scene.run())
    content = scene.target_rows()

    result = scene.run()  # nothing changed: the look-back reads ids 2-7 again
    again = metadata(result)

    assert again["watermark/operator"] == ">="
    assert (again["rows/read"], again["rows/updated"], again["rows/inserted"]) == (6, 6, 0)
    assert scene.target_rows() == content
    assert checks_passed(result) == CHECKS_PASS
    assert log_versions(scene.table) == [0, 1]

    # A correction inside the look-back keeping its updated_at, and a late row below the watermark.
    scene.orders.put(order(3, at(11), 333.0), order(20, at(9, 30)))
    third = metadata(scene.run())
    assert (third["rows/updated"], third["rows/inserted"]) == (6, 1)
    scene.assert_each_source_row_once()


REGIONAL = pa.schema(
    [("region", pa.string()), *((f.name, f.type) for f in ORDERS_SCHEMA)],
)


def put_regional(scene: Scene, rows: list[dict[str, Any]]) -> None:
    write_deltalake(
        str(scene.orders.uri), pa.Table.from_pylist(rows, schema=REGIONAL), mode="overwrite"
    )


@pytest.mark.spark
def test_composite_keys_replace_only_the_row_with_the_same_pair(tmp_path: Path) -> None:
    scene = Scene(tmp_path, table={"merge_keys": ["region", "id"]})
    eu1, us1, eu2 = ({"region": r, **order(i, at(9))} for r, i in (("eu", 1), ("us", 1), ("eu", 2)))
    put_regional(scene, [eu1, us1, eu2])
    metadata(scene.run())

    us1_new = {**us1, "updated_at": at(10), "amount": 11.0}
    us2 = {"region": "us", **order(2, at(10))}
    put_regional(scene, [eu1, us1_new, eu2, us2])
    second = metadata(scene.run())

    assert (second["rows/updated"], second["rows/inserted"]) == (1, 1)
    assert second["merge/keys"] == "region, id"
    table = DeltaTable(scene.table).to_pyarrow_table(columns=["region", "id", "amount"])
    assert sorted(tuple(r.values()) for r in table.to_pylist()) == [
        ("eu", 1, 1.0),
        ("eu", 2, 2.0),
        ("us", 1, 11.0),
        ("us", 2, 2.0),
    ]


@pytest.mark.spark
def test_rows_of_one_key_read_together_keep_the_greatest_watermark(tmp_path: Path) -> None:
    scene = Scene(tmp_path, table=BY_ID)
    history = [
        order(1, at(10), 2.0),  # id 1: the newer version first ...
        order(1, at(9), 1.0),
        order(2, at(9), 5.0),  # id 2: a tie on (updated_at, id): the greater amount is kept
        order(2, at(9), 7.0),
        order(3, at(8), 3.0),
    ]
    write_deltalake(str(scene.orders.uri), pa.Table.from_pylist(history, schema=ORDERS_SCHEMA))

    result = scene.run()
    first = metadata(result)

    assert (first["rows/read"], first["rows/deduplicated"], first["rows/committed"]) == (5, 2, 3)
    assert first["watermark/after"] == "updated_at=2026-04-03T10:00:00Z, id=1"
    assert checks_passed(result) == CHECKS_PASS
    assert [(r["id"], r["amount"]) for r in scene.target_rows()] == [(1, 2.0), (2, 7.0), (3, 3.0)]

    later = [order(1, at(10, 30), 8.0), order(1, at(11), 9.0)]  # ... and the newer one last
    write_deltalake(
        str(scene.orders.uri), pa.Table.from_pylist(later, schema=ORDERS_SCHEMA), mode="append"
    )
    second = metadata(scene.run())
    assert (second["rows/read"], second["rows/updated"], second["rows/inserted"]) == (2, 1, 0)
    assert [(r["id"], r["amount"]) for r in scene.target_rows()] == [(1, 9.0), (2, 7.0), (3, 3.0)]


@pytest.mark.spark
def test_a_null_key_fails_the_run_with_nothing_committed(tmp_path: Path) -> None:
    scene = Scene(tmp_path, table=BY_ID, watermark={"columns": ["updated_at"]})
    scene.orders.put(*(order(i, at(9)) for i in range(3)))
    metadata(scene.run())
    stored = DeltaMetadataProvider(scene.table).get_watermark("orders")
    files = sorted(p for p in Path(scene.table).rglob("*.parquet") if "_staging" not in p.parts)

    nameless = {"id": None, "updated_at": at(10), "amount": 1.0}
    write_deltalake(
        str(scene.orders.uri),
        pa.Table.from_pylist([order(1, at(10), 10.0), nameless], schema=ORDERS_SCHEMA),
        mode="append",
    )
    failed = scene.run(raise_on_error=False)

    assert not failed.success
    assert "null in key column 'id'" in str(failed.all_events)
    assert "Nothing was committed" in str(failed.all_events)
    assert log_versions(scene.table) == [0]
    assert DeltaMetadataProvider(scene.table).get_watermark("orders") == stored
    assert (
        sorted(p for p in Path(scene.table).rglob("*.parquet") if "_staging" not in p.parts)
        == files
    )
    assert not list(Path(scene.table).glob("_staging/*"))


@pytest.mark.spark
def test_a_merge_key_the_source_does_not_have_fails_before_anything_is_written(
    tmp_path: Path,
) -> None:
    scene = Scene(tmp_path, table={"merge_keys": ["order_id"]})
    scene.orders.put(*(order(i, at(9)) for i in range(3)))

    failed = scene.run(raise_on_error=False)

    assert not failed.success
    assert "merge key 'order_id' is not a column of the rows read" in str(failed.all_events)
    assert not Path(scene.table).exists() or not list(Path(scene.table).rglob("*.parquet"))


@pytest.mark.spark
def test_a_commit_landing_after_the_merge_plan_makes_it_stale_and_the_run_plans_again(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    scene = Scene(tmp_path, table=BY_ID)
    scene.orders.put(*(order(i, at(9, i)) for i in range(5)))
    metadata(scene.run())
    scene.orders.put(order(2, at(12), 22.0))
    request = column_run.ColumnRunRequest(pipeline=scene.pipeline, run_id="r", clock=lambda: NOW)
    staged = column_run.stage_column_batch(
        column_run.plan_column_batch(request, now=NOW), spark, now=NOW
    )
    from watermark_assets.engine import write as engine_write  # plans and makes the commit

    real_plan_merge = engine_write.plan_merge
    plans = []

    def plan_then_race(*args: Any, **kwargs: Any) -> Any:
        plan = real_plan_merge(*args, **kwargs)
        plans.append(plan)
        if len(plans) == 1:  # another writer puts a row of key 2 in the table meanwhile
            folder = Path(scene.table)
            pq.write_table(
                pa.Table.from_pylist([order(2, at(11), -2.0)], schema=ORDERS_SCHEMA),
                folder / "other.parquet",
            )
            DeltaCommitter(scene.table).commit(
                describe_data_files(scene.table, ["other.parquet"], []),
                schema=ORDERS_SCHEMA,
                partition_by=[],
                txns=[TxnVersion("someone/else", 1)],
                custom_metadata={},
            )
        return plan

    monkeypatch.setattr(engine_write, "plan_merge", plan_then_race)

    result = column_run.commit_column_batch(staged, now=NOW)

    assert result.attempts == 2
    assert (result.rows_updated, result.rows_inserted, result.rows_removed) == (1, 0, 2)
    assert log_versions(scene.table) == [0, 1, 2]  # the run, the other writer, the merge
    scene.assert_each_source_row_once()  # key 2 once: ours, the other writer's row removed too
    assert plans[0].rewritten, "the stale plan had rewritten a file"
    assert not orphan_parquet_files(scene.table), "the stale plan's rewrites were deleted"


CONFIGS = {
    "merge_keys with a look-back": ({"backward_days": 1}, {}, {}, None),
    "merge_keys with a lag": ({"lag": "PT10M"}, {}, {}, None),
    "merge_keys with a replay into another table": (
        {},
        {},
        {"replay": {"start": 1, "end": 5, "chunk": {"size": 2}, "target_table": "elsewhere"}},
        None,
    ),
    "merge_keys and replace_by_watermark together": (
        {},
        {"replace_by_watermark": True},
        {},
        "pick one",
    ),
    "merge_keys on a partitioned column pipeline": (
        {},
        {},
        {"partitions": {"granularity": "hourly", "start": "2026-04-03T00:00"}},
        "merge_keys is not enough here",
    ),
    "merge_keys with a replay into the pipeline's own table": (
        {},
        {},
        {"replay": {"start": 1, "end": 5, "chunk": {"size": 2}}},
        "merge_keys is not enough here",
    ),
}


@pytest.mark.parametrize(
    ("watermark", "destination", "other", "refused"), CONFIGS.values(), ids=CONFIGS.keys()
)
def test_which_pipelines_may_merge_on_keys(
    tmp_path: Path,
    watermark: dict[str, Any],
    destination: dict[str, Any],
    other: dict[str, Any],
    refused: str | None,
) -> None:
    raw = column_pipeline(
        tmp_path, watermark=watermark, destination=destination, table=BY_ID, **other
    )
    if refused is not None:
        with pytest.raises(ConfigError, match=refused):
            project_config(raw)
        return
    pipeline = project_config(raw).pipeline("orders")
    assert isinstance(pipeline, ColumnPipelineConfig)
    assert pipeline.table.merge_keys == ["id"]


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        pytest.param([], "set table.merge_keys", id="no key with a look-back: merge_keys offered"),
        pytest.param(["id", "id"], "more than once", id="a key named twice"),
        pytest.param(["id", " "], "blank", id="a blank key"),
    ],
)
def test_bad_merge_keys_are_refused_at_load(tmp_path: Path, keys: list[str], message: str) -> None:
    raw = column_pipeline(tmp_path, watermark={"backward_days": 1}, table={"merge_keys": keys})
    with pytest.raises(ConfigError, match=message):
        project_config(raw)


@pytest.mark.spark
def test_a_replay_into_another_table_upserts_its_chunks_on_the_keys(
    tmp_path: Path, spark: Any
) -> None:
    from watermark_assets.kinds.column.replay import run_replay

    target = str(tmp_path / "delta" / "orders_backfill")
    replay = {
        "start": "2026-04-03T00:00:00Z",
        "end": "2026-04-03T08:00:00Z",
        "chunk": {"hours": 2},
        "target_table": target,
    }
    scene = Scene(tmp_path, table=BY_ID, replay=replay)
    assert scene.pipeline.replay is not None
    scene.orders.put(*(order(i, at(i)) for i in range(8)))

    def replayed() -> list[tuple[int, float]]:
        assert scene.pipeline.replay is not None
        run_replay(scene.pipeline, scene.pipeline.replay, spark, run_id="t", clock=lambda: NOW)
        rows = DeltaTable(target).to_pyarrow_table(columns=["id", "amount"]).to_pylist()
        return sorted((r["id"], r["amount"]) for r in rows)

    assert replayed() == [(i, float(i)) for i in range(8)]
    # Replayed again (save_watermark false: every chunk), with id 3 moved to a later chunk: its
    # old row is removed by the chunk that reads its new one, nothing is duplicated.
    scene.orders.put(order(3, at(7, 30), 33.0))
    assert replayed() == [(i, 33.0 if i == 3 else float(i)) for i in range(8)]
    merges = [
        json.loads(c.custom_metadata[MERGE_METADATA_KEY])
        for c in DeltaCommitter(target).read_commits_after(3)
    ]
    assert [(m["rows_updated"], m["rows_inserted"]) for m in merges] == [
        (2, 0),
        (1, 0),
        (2, 0),
        (3, 0),
    ]
