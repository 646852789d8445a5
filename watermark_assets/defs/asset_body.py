"""The ONE asset body every kind's asset runs (issue 23: "one generic asset body").

Dagster's side of a run is the same for every kind: the run's partitions read off the context
once (:func:`~watermark_assets.defs.partitions.partition_selection`), the run's id, job and log,
the Spark session on first use; then the kind's run (:data:`KindRun`: plan, stage, the ONE commit,
its metadata), and what Dagster is told after it: each partition's own metadata on that partition,
the run's metadata with the table's schema (``dagster/column_schema``), its check results.

A kind's ``defs.py`` says only what is its own: the asset's decorator arguments (key, partitions,
backfill policy, group, metadata, checks) and its :data:`KindRun`. Its run never sees a Dagster
context (it gets an :class:`AssetRun`), so what it does is the same whether Dagster, the CLI or
a test called it.

No ``from __future__ import annotations`` here: Dagster reads the body's annotations (the
context, the Spark resource, the run config's class) as the objects they are.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetExecutionContext,
    AssetsDefinition,
    Config,
    MaterializeResult,
)

from watermark_assets.core.partition_selection import PartitionSelection
from watermark_assets.defs.partition_truth import PartitionTruth
from watermark_assets.defs.partitions import partition_selection
from watermark_assets.defs.resources import WatermarkSparkResource
from watermark_assets.defs.table_schema import with_table_schema


@dataclass(frozen=True)
class AssetRun:
    """What a kind's run gets of Dagster's run, as plain values."""

    #: the run's partitions (None: the asset has none)
    selection: PartitionSelection | None
    run_id: str
    job_name: str
    info: Callable[[str], None]
    warning: Callable[[str], None]
    _spark: Callable[[], Any] = field(repr=False)
    #: the run's config of a kind whose asset takes one (the file kind's files), else None
    config: Any = None

    @property
    def partitions(self) -> PartitionSelection:
        """The run's partitions, of a partitioned asset."""
        if self.selection is None:
            raise ValueError("this asset has no partitions: a run of it covers none")
        return self.selection

    @property
    def spark(self) -> Any:
        """The run's Spark session, started on first use (a run with nothing to read starts
        none)."""
        return self._spark()


@dataclass(frozen=True)
class AssetOutcome:
    """What a kind's run tells Dagster: the run's metadata (its table's schema is added), each
    partition's own (its state and why, what it committed), the run's check results."""

    metadata: dict[str, Any]
    #: the table whose schema the materialization shows
    table_uri: str
    per_partition: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    check_results: Sequence[AssetCheckResult] = ()

    @staticmethod
    def truths(truths: Mapping[str, PartitionTruth]) -> dict[str, Mapping[str, Any]]:
        """Each partition's truth (its state and why) as its own metadata."""
        return {key: truth.metadata() for key, truth in truths.items()}


#: A kind's run inside the asset: Dagster's run as plain values in, what to tell Dagster out.
KindRun = Callable[[AssetRun], AssetOutcome]


def _asset_run(
    context: AssetExecutionContext, spark: WatermarkSparkResource, config: Any
) -> AssetRun:
    return AssetRun(
        selection=None
        if context.assets_def.partitions_def is None
        else partition_selection(context),
        run_id=context.run.run_id,
        job_name=context.run.job_name,
        info=context.log.info,
        warning=context.log.warning,
        _spark=lambda: spark.spark_session,
        config=config,
    )


def _told(context: AssetExecutionContext, outcome: AssetOutcome) -> MaterializeResult[Any]:
    for key, metadata in outcome.per_partition.items():
        context.add_asset_metadata(dict(metadata), partition_key=key)
    return MaterializeResult(
        metadata=with_table_schema(outcome.metadata, outcome.table_uri),
        check_results=list(outcome.check_results) or None,
    )


def run_asset(
    decorator: Callable[[Callable[..., Any]], AssetsDefinition],
    run: KindRun,
    *,
    config_type: type[Config] | None = None,
) -> AssetsDefinition:
    """The asset ``decorator`` (Dagster's ``@asset(...)`` with the kind's arguments, its
    ``key`` among them: the asset's op is named by its key) makes of the one body running
    ``run``. ``config_type``: the run config the asset takes (the file kind's files), or
    None."""
    if config_type is None:

        def body(
            context: AssetExecutionContext, spark: WatermarkSparkResource
        ) -> MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
            return _told(context, run(_asset_run(context, spark, None)))

    else:

        def body_with_config(
            context: AssetExecutionContext, config: Config, spark: WatermarkSparkResource
        ) -> MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
            return _told(context, run(_asset_run(context, spark, config)))

        body_with_config.__annotations__["config"] = config_type
        body = body_with_config  # type: ignore[assignment]
    return decorator(body)
