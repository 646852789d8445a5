"""The one asset body every kind's asset runs (``defs/asset_body.py``): what a kind's run gets of
Dagster's run, and what Dagster is told from what it returns. No Spark: the runs here never ask
for the session, so none starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    AssetKey,
    Config,
    DagsterInstance,
    StaticPartitionsDefinition,
    asset,
    materialize,
)
from deltalake import write_deltalake

from watermark_assets.defs.asset_body import AssetOutcome, AssetRun, run_asset
from watermark_assets.defs.resources import WatermarkSparkResource

KEY = AssetKey(["body"])
PARTITIONS = StaticPartitionsDefinition(["a b", "c*d", "e"])


class FilesConfig(Config):
    files: list[str] | None = None


def decorator() -> Any:
    return asset(
        key=KEY,
        partitions_def=PARTITIONS,
        check_specs=[AssetCheckSpec("fine", asset=KEY)],
    )


def build(table_uri: str, seen: list[AssetRun], *, config_type: type[Config] | None = None):
    def kind_run(run: AssetRun) -> AssetOutcome:
        seen.append(run)
        run.info("planned")
        return AssetOutcome(
            {"rows/read": 3},
            table_uri,
            per_partition={key: {"watermark/after": f"w-{key}"} for key in run.selection.keys},
            check_results=[AssetCheckResult(check_name="fine", passed=True)],
        )

    return run_asset(decorator(), kind_run, config_type=config_type)


def materialized(instance: DagsterInstance) -> dict[str, dict[str, Any]]:
    """Each partition's latest materialization metadata, as plain values."""
    found = {}
    for key in PARTITIONS.get_partition_keys():
        records = instance.fetch_materializations(records_filter=_filter(key), limit=1).records
        if records:
            meta = records[0].asset_materialization.metadata  # type: ignore[union-attr]
            found[key] = {k: getattr(m, "value", m) for k, m in meta.items()}
    return found


def _filter(partition: str) -> Any:
    from dagster import AssetRecordsFilter

    return AssetRecordsFilter(asset_key=KEY, asset_partitions=[partition])


@pytest.mark.parametrize("partition", ["a b", "c*d"])
def test_the_kinds_run_gets_the_runs_partitions_id_and_job(partition: str, tmp_path: Path) -> None:
    seen: list[AssetRun] = []
    spark = WatermarkSparkResource(spark_config={})
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [build(str(tmp_path / "none"), seen)],
            partition_key=partition,
            resources={"spark": spark},
            instance=instance,
        )
        assert result.success
        (run,) = seen
        assert run.partitions.keys == (partition,)
        assert run.run_id == result.run_id
        assert run.job_name == result.dagster_run.job_name
        assert run.config is None
        metadata = materialized(instance)[partition]
    # the run's metadata and the partition's own on the one materialization; no table yet: no
    # schema; the session never started (the run did not ask for it)
    assert metadata == {"rows/read": 3, "watermark/after": f"w-{partition}"}
    assert spark._spark_session is None
    checks = result.get_asset_check_evaluations()
    assert [(c.check_name, c.passed) for c in checks] == [("fine", True)]


def test_the_table_schema_is_added_when_the_table_exists(tmp_path: Path) -> None:
    uri = str(tmp_path / "table")
    write_deltalake(uri, pa.table({"id": pa.array([1], pa.int64()), "name": ["x"]}))
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [build(uri, [])],
            partition_key="e",
            resources={"spark": WatermarkSparkResource(spark_config={})},
            instance=instance,
        )
        assert result.success
        schema = materialized(instance)["e"]["dagster/column_schema"]
    assert [c.name for c in schema.columns] == ["id", "name"]


def test_a_kind_with_run_config_gets_it(tmp_path: Path) -> None:
    seen: list[AssetRun] = []
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [build(str(tmp_path / "none"), seen, config_type=FilesConfig)],
            partition_key="e",
            resources={"spark": WatermarkSparkResource(spark_config={})},
            instance=instance,
            run_config={"ops": {"body": {"config": {"files": ["a b.csv", "c*d.csv"]}}}},
        )
    assert result.success
    assert isinstance(seen[0].config, FilesConfig)
    assert seen[0].config.files == ["a b.csv", "c*d.csv"]


def test_an_error_in_the_kinds_run_fails_the_run_and_tells_nothing(tmp_path: Path) -> None:
    def failing(run: AssetRun) -> AssetOutcome:
        raise ValueError("the source is gone")

    asset_def = run_asset(decorator(), failing)
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [asset_def],
            partition_key="e",
            resources={"spark": WatermarkSparkResource(spark_config={})},
            instance=instance,
            raise_on_error=False,
        )
        assert not result.success
        assert materialized(instance) == {}


def test_an_unpartitioned_asset_runs_with_no_selection(tmp_path: Path) -> None:
    """An asset without partitions (a column pipeline without ``partitions``, a time pipeline
    with ``partition: none``): its run covers no partition, and asking for them says so."""
    seen: list[AssetRun] = []

    def kind_run(run: AssetRun) -> AssetOutcome:
        seen.append(run)
        with pytest.raises(ValueError, match="no partitions"):
            run.partitions  # noqa: B018
        return AssetOutcome({"rows/read": 0}, str(tmp_path / "none"))

    asset_def = run_asset(asset(key=KEY), kind_run)
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [asset_def],
            resources={"spark": WatermarkSparkResource(spark_config={})},
            instance=instance,
        )
    assert result.success
    assert seen[0].selection is None
    (event,) = result.asset_materializations_for_node("body")
    assert event.metadata["rows/read"].value == 0
