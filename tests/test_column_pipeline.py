"""Column pipelines end to end: an "orders" Delta table read above its column watermark.

Each run is the pipeline's Dagster job executed in process (the one Spark session of the test
run), on real Delta tables on tmp_path: the source written with deltalake, the target committed by
the IO manager. The crash tests run the job in a subprocess that ``runs.faults.crash_point``
SIGKILLs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from conftest import TEST_SPARK_CONF, pipeline_yaml, project_config
from dagster import DagsterInstance, ExecuteInProcessResult
from deltalake import DeltaTable, write_deltalake

from watermark_assets.config import ColumnPipelineConfig
from watermark_assets.defs import build_definitions
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.kinds import KINDS
from watermark_assets.providers.delta_metadata import DeltaMetadataProvider
from watermark_assets.runs.column import RUN_METADATA_KEY, txn_app_id
from watermark_assets.runs.faults import CRASH_ENV_VAR

pytestmark = pytest.mark.spark

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
NOW = datetime(2026, 4, 3, 12, 0, tzinfo=timezone.utc)
ORDERS_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("updated_at", pa.timestamp("us", tz="UTC")),
        ("amount", pa.float64()),
    ]
)


def at(hour: int, minute: int = 0, *, day: int = 3) -> datetime:
    return datetime(2026, 4, day, hour, minute, tzinfo=timezone.utc)


def order(id_: int, updated_at: datetime, amount: float | None = None) -> dict[str, Any]:
    return {"id": id_, "updated_at": updated_at, "amount": float(id_) if amount is None else amount}


class Orders:
    """The source: a Delta table written with deltalake, replaced whole to change rows."""

    def __init__(self, uri: Path) -> None:
        self.uri = uri
        self.rows: dict[int, dict[str, Any]] = {}

    def put(self, *rows: dict[str, Any]) -> None:
        """Insert or change rows (by id), then write the table's new version."""
        for row in rows:
            self.rows[row["id"]] = row
        table = pa.Table.from_pylist(list(self.rows.values()), schema=ORDERS_SCHEMA)
        write_deltalake(str(self.uri), table, mode="overwrite")

    def delete(self, *ids: int) -> None:
        """Delete rows (by id) at the source, then write the table's new version."""
        for id_ in ids:
            del self.rows[id_]
        self.put()


def column_pipeline(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    pipeline: dict[str, Any] = {
        "name": "orders",
        "source": {"type": "delta_table", "uri": str(tmp_path / "source" / "orders")},
        "watermark": {"columns": ["updated_at", "id"]},
        "table": {"uri": str(tmp_path / "delta" / "orders")},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(pipeline.get(key), dict):
            pipeline[key] = {**pipeline[key], **value}
        else:
            pipeline[key] = value
    return pipeline


class Scene:
    """The orders source, the column pipeline over it and a Dagster instance to run it on."""

    def __init__(self, tmp_path: Path, **overrides: Any) -> None:
        self.raw = column_pipeline(tmp_path, **overrides)
        config = self.config = project_config(self.raw)
        pipeline = config.pipeline("orders")
        assert isinstance(pipeline, ColumnPipelineConfig)
        self.pipeline = pipeline
        self.table = pipeline.table.uri
        self.orders = Orders(tmp_path / "source" / "orders")
        self.defs = build_definitions(config, clock=lambda: NOW)
        self.instance = DagsterInstance.ephemeral()
        self.config_path = tmp_path / "pipelines.yaml"
        self.config_path.write_text(
            yaml.safe_dump(
                {"spark": {"master": "local[1]", "conf": TEST_SPARK_CONF}, "pipelines": [self.raw]}
            ),
            encoding="utf-8",
        )

    def run(self, *, raise_on_error: bool = True) -> ExecuteInProcessResult:
        job = self.defs.resolve_job_def("orders_job")
        return job.execute_in_process(instance=self.instance, raise_on_error=raise_on_error)

    def target_rows(self) -> list[dict[str, Any]]:
        table = DeltaTable(self.table).to_pyarrow_table(columns=["id", "updated_at", "amount"])
        return sorted(table.to_pylist(), key=lambda r: (r["id"], r["updated_at"]))

    def target_ids(self) -> list[int]:
        return sorted(r["id"] for r in self.target_rows())

    def assert_each_source_row_once(self) -> None:
        assert self.target_rows() == sorted(
            self.orders.rows.values(), key=lambda r: (r["id"], r["updated_at"])
        )


def metadata(result: ExecuteInProcessResult) -> dict[str, Any]:
    (materialization,) = result.asset_materializations_for_node("orders")
    return {key: value.value for key, value in materialization.metadata.items()}


def checks_passed(result: ExecuteInProcessResult) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def test_the_second_run_reads_only_the_rows_whose_updated_at_changed(tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    scene.orders.put(*(order(i, at(9 + i % 3)) for i in range(10)))

    first = metadata(scene.run())
    assert first["rows/read"] == 10
    assert first["read/predicate"] == "TRUE"
    assert first["watermark/before"] == "(empty: read everything)"
    assert first["watermark/after"] == "updated_at=2026-04-03T11:00:00Z, id=8"
    assert first["watermark/provider"] == "delta_metadata"
    assert first["dagster/row_count"] == 10

    scene.orders.put(order(3, at(11, 30), 33.0), order(7, at(11, 45), 77.0), order(10, at(11, 45)))
    result = scene.run()
    second = metadata(result)
    assert second["rows/read"] == 3
    assert second["rows/committed"] == 3
    # The boundary value is read again (rows may arrive there later), the 3 rows committed at
    # it (ids 2, 5, 8) dropped by their hashes.
    assert second["watermark/operator"] == ">="
    assert second["read/predicate"] == "`updated_at` >= TIMESTAMP '2026-04-03 11:00:00+00:00'"
    assert second["rows/boundary_reread"] == 3
    assert second["watermark/before"] == first["watermark/after"]
    assert second["watermark/after"] == "updated_at=2026-04-03T11:45:00Z, id=10"
    assert second["watermark/after_values"] == {
        "updated_at": "2026-04-03T11:45:00Z",
        "id": 10,
    }
    assert second["replace/window"] == "(none: append)"
    assert second["read/details"]["files_skipped_by_statistics"] == 0
    assert checks_passed(result) == {
        "watermark_never_moves_backwards": True,
        "rows_reconcile": True,
        "column_schema_change": True,
    }
    # The second commit holds exactly the changed and the new rows (an append keeps versions).
    commit = DeltaCommitter(scene.table).read_commit(second["delta/version"])
    assert json.loads(commit.custom_metadata[RUN_METADATA_KEY])["rows_read"] == 3
    assert sum(add.num_records or 0 for add in commit.added) == 3
    stored = DeltaMetadataProvider(scene.table).get_watermark("orders")
    assert stored is not None and json.loads(stored)["id"] == 10
    assert DeltaCommitter(scene.table).transaction_version(txn_app_id("orders")) == 2

    third = metadata(scene.run())
    assert third["rows/read"] == 0
    assert third["delta/version"].startswith("no new commit")


def test_rows_sharing_one_updated_at_resume_exactly_on_the_id(tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    tie = at(10)
    scene.orders.put(*(order(i, tie) for i in range(1, 6)))
    assert metadata(scene.run())["rows/read"] == 5

    scene.orders.put(*(order(i, tie) for i in range(6, 9)))
    second = metadata(scene.run())
    assert second["rows/read"] == 3
    assert second["watermark/after"] == "updated_at=2026-04-03T10:00:00Z, id=8"
    assert scene.target_ids() == list(range(1, 9))


def test_a_failing_commit_saves_no_watermark_and_the_re_run_retries_from_the_same_one(
    tmp_path: Path,
) -> None:
    provider_root = tmp_path / "watermarks"
    scene = Scene(tmp_path, watermark={"provider": {"type": "file", "uri": str(provider_root)}})
    scene.orders.put(*(order(i, at(9)) for i in range(5)))
    assert metadata(scene.run())["watermark/provider"] == "file"
    stored = provider_root / "orders.json"
    saved = stored.read_text(encoding="utf-8")
    assert json.loads(json.loads(saved)["watermark"])["id"] == 4

    # The source gains a column the target does not have: the Delta commit refuses the files.
    wider = ORDERS_SCHEMA.append(pa.field("note", pa.string()))
    rows = [{**order(i, at(10)), "note": "late"} for i in range(5, 8)]
    write_deltalake(
        str(scene.orders.uri),
        pa.Table.from_pylist(rows, schema=wider),
        mode="append",
        schema_mode="merge",
    )
    failed = scene.run(raise_on_error=False)
    assert not failed.success
    assert "note" in str(failed.all_events)
    assert stored.read_text(encoding="utf-8") == saved, "a failed commit saves no watermark"
    assert DeltaCommitter(scene.table).current_version() == 0
    assert not list(Path(scene.table).glob("_staging/*")), "the staged files were cleaned up"

    DeltaCommitter(scene.table).add_missing_columns(pa.schema([pa.field("note", pa.string())]))
    retried = metadata(scene.run())
    assert retried["watermark/before"] == "updated_at=2026-04-03T09:00:00Z, id=4"
    assert retried["rows/read"] == 3
    assert json.loads(json.loads(stored.read_text(encoding="utf-8"))["watermark"])["id"] == 7
    assert scene.target_ids() == list(range(8))


def test_replace_by_watermark_with_a_look_back_keeps_every_source_row_exactly_once(
    tmp_path: Path,
) -> None:
    scene = Scene(
        tmp_path,
        watermark={"columns": ["updated_at"], "backward_days": 1},
        destination={"replace_by_watermark": True},
    )
    scene.orders.put(order(1, at(8, day=1)), *(order(i, at(8 + i)) for i in range(2, 8)))
    first = metadata(scene.run())
    assert first["rows/read"] == 7
    assert first["replace/window"] == "updated_at in [-inf, 2026-04-03T15:00:00Z]"

    # A correction of a row inside the look-back (same updated_at), a late row below the
    # watermark but inside the look-back, and a new row above it.
    scene.orders.put(order(3, at(11), 333.0), order(20, at(9, 30)), order(21, at(16)))
    result = scene.run()
    second = metadata(result)
    assert second["watermark/operator"] == ">="
    assert second["read/predicate"] == "`updated_at` >= TIMESTAMP '2026-04-02 15:00:00+00:00'"
    assert second["rows/read"] == 8  # ids 2-7 (3 corrected), 20 and 21; id 1 is older
    assert second["rows/removed"] == 6
    assert second["replace/window"] == (
        "updated_at in [2026-04-02T15:00:00Z, 2026-04-03T16:00:00Z]"
    )
    assert second["watermark/after"] == "updated_at=2026-04-03T16:00:00Z"
    assert checks_passed(result) == {
        "watermark_never_moves_backwards": True,
        "rows_reconcile": True,
        "column_schema_change": True,
    }
    scene.assert_each_source_row_once()
    log = DeltaCommitter(scene.table).read_commit(second["delta/version"])
    assert log.custom_metadata["watermark_assets.replace"], "ONE commit: removes and adds"


def test_a_look_back_without_replace_by_watermark_is_refused_at_load(tmp_path: Path) -> None:
    from watermark_assets.exceptions import ConfigError

    with pytest.raises(ConfigError, match="replace_by_watermark: true"):
        project_config(column_pipeline(tmp_path, watermark={"backward_days": 2}))


def run_in_subprocess(scene: Scene, crash_at: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "WATERMARK_ASSETS_CONFIG": str(scene.config_path),
        CRASH_ENV_VAR: crash_at,
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)]),
    }
    return subprocess.run(
        [sys.executable, str(TESTS / "_crash_run.py"), "orders", "-"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("crash_at", "provider"),
    [
        pytest.param("after_data_written", "delta_metadata", id="killed after Spark wrote rows"),
        pytest.param("after_commit", "delta_metadata", id="killed after the commit (Delta)"),
        pytest.param("after_commit", "file", id="killed after the commit, before the file save"),
    ],
)
def test_a_run_killed_mid_way_and_re_run_commits_each_source_row_exactly_once(
    tmp_path: Path, crash_at: str, provider: str
) -> None:
    chosen: dict[str, Any] = {"type": provider}
    if provider == "file":
        chosen["uri"] = str(tmp_path / "watermarks")
    scene = Scene(tmp_path, watermark={"provider": chosen})
    scene.orders.put(*(order(i, at(9, i)) for i in range(6)))
    completed = run_in_subprocess(scene, crash_at)
    assert completed.returncode == -signal.SIGKILL, completed.stderr[-3000:]
    committed = crash_at == "after_commit"
    assert (DeltaCommitter(scene.table).current_version() is not None) == committed
    if provider == "file":
        assert not (tmp_path / "watermarks" / "orders.json").exists(), "killed before the save"
        # `plan` says the provider is behind the log, and leaves the repair to the run
        (planned,) = KINDS["column"].plan_run(scene.config, scene.pipeline, [], lambda: NOW)
        assert planned.notes[-1] == (
            "the file provider's copy is behind the Delta log: the run saves the log's "
            "watermark to it first"
        )
        assert planned.watermark.startswith(f"updated_at={at(9, 5):%Y-%m-%dT%H:%M:%S}Z, id=5")
        assert not (tmp_path / "watermarks" / "orders.json").exists(), "planning saved nothing"

    scene.orders.put(order(6, at(10)))
    rerun = metadata(scene.run())
    assert rerun["rows/read"] == (1 if committed else 7)
    assert rerun["watermark/repaired_from_log"] is (committed and provider == "file")
    scene.assert_each_source_row_once()
    metadata(scene.run())  # and again: nothing new
    scene.assert_each_source_row_once()


@pytest.mark.slow
def test_dagster_definitions_validate_loads_a_column_pipeline(tmp_path: Path) -> None:
    config = tmp_path / "pipelines.yaml"
    pipelines = [pipeline_yaml(tmp_path), column_pipeline(tmp_path)]
    config.write_text(yaml.safe_dump({"pipelines": pipelines}), encoding="utf-8")
    # DAGSTER_HOME stays the session's own (conftest): unset, dagster would keep a temporary
    # home in the checkout, which tests/ui/test_first_commands.py watches from another worker.
    env = {**os.environ, "WATERMARK_ASSETS_CONFIG": str(config), "PYTHONPATH": str(REPO)}
    completed = subprocess.run(
        [str(Path(sys.executable).with_name("dagster")), "definitions", "validate"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    assert "Validation successful" in output
    defs = build_definitions(project_config(*pipelines))
    assert defs.resolve_job_def("orders_job") is not None
    assert {s.name for s in defs.sensors or ()} == {"events_sensor"}


def test_files_whose_statistics_are_below_the_watermark_are_never_read(tmp_path: Path) -> None:
    scene = Scene(tmp_path)

    def append(*rows: dict[str, Any]) -> None:  # one more file in the source table
        write_deltalake(
            str(scene.orders.uri),
            pa.Table.from_pylist(list(rows), schema=ORDERS_SCHEMA),
            mode="append",
        )

    append(*(order(i, at(9)) for i in range(3)))
    append(*(order(i, at(9, 30)) for i in range(3, 6)))
    assert metadata(scene.run())["rows/read"] == 6
    append(order(6, at(10)), order(7, at(11)))
    second = metadata(scene.run())
    assert second["rows/read"] == 2
    # The 09:00 file's maximum is below the watermark (09:30, 5): Spark never sees it. The 09:30
    # file may hold ties above id 5: it is read, and the pushed filter drops its rows.
    assert second["read/details"]["files_in_table"] == 3
    assert second["read/details"]["files_skipped_by_statistics"] == 1
    assert scene.target_ids() == list(range(8))


def test_a_run_whose_commit_went_stale_reads_again_from_the_newer_watermark(
    tmp_path: Path, spark: Any
) -> None:
    """Two runs of one pipeline plan on the same watermark; the later commit finds the txn moved,
    plans and reads again, and commits only what the first did not."""
    from watermark_assets.runs.column import (
        ColumnRunRequest,
        commit_column_batch,
        plan_column_batch,
        stage_column_batch,
    )

    scene = Scene(tmp_path)
    scene.orders.put(*(order(i, at(9, i)) for i in range(5)))

    def staged(run_id: str) -> Any:
        request = ColumnRunRequest(pipeline=scene.pipeline, run_id=run_id, clock=lambda: NOW)
        return stage_column_batch(plan_column_batch(request, now=NOW), spark, now=NOW)

    slow, fast = staged("slow"), staged("fast")
    assert slow.rows_read == fast.rows_read == 5
    assert commit_column_batch(fast, now=NOW).rows_committed == 5
    scene.orders.put(order(5, at(10)))
    result = commit_column_batch(slow, now=NOW)
    assert result.attempts == 2
    assert result.rows_committed == 1
    scene.assert_each_source_row_once()


def _write_rows(folder: Path, name: str, fmt: str, rows: list[dict[str, Any]]) -> None:
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(rows, schema=ORDERS_SCHEMA), folder / f"{name}.parquet")
        return
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    texts = [{**r, "updated_at": r["updated_at"].strftime(stamp)} for r in rows]
    if fmt == "csv":
        lines = [
            "id,updated_at,amount",
            *(f"{r['id']},{r['updated_at']},{r['amount']}" for r in texts),
        ]
    else:
        lines = [json.dumps(r) for r in texts]
    (folder / f"{name}.{fmt}").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_file_sources_read_only_the_rows_above_the_watermark(tmp_path: Path, fmt: str) -> None:
    folder = tmp_path / "source" / fmt
    source: dict[str, Any] = {"type": fmt, "uri": str(folder)}
    if fmt != "parquet":
        source["schema"] = "id BIGINT, updated_at TIMESTAMP, amount DOUBLE"
    scene = Scene(tmp_path, source=source)
    _write_rows(folder, "a", fmt, [order(i, at(9, i)) for i in range(3)])
    assert metadata(scene.run())["rows/read"] == 3
    _write_rows(folder, "b", fmt, [order(i, at(10, i)) for i in range(3, 5)])
    second = metadata(scene.run())
    assert second["rows/read"] == 2
    assert second["read/source"] == f"{fmt} {folder}"
    assert second["watermark/after"] == "updated_at=2026-04-03T10:04:00Z, id=4"
    assert scene.target_ids() == list(range(5))
