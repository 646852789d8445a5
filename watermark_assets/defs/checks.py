"""Asset checks that read the Delta log, not the run's own claims.

- ``watermark_never_moves_backwards``: in every commit this run made, each landing partition's
  watermark after the commit is >= the one before it, and so is the global value.
- ``rows_reconcile``: rows committed (the add actions' numRecords in the log) equal rows read by
  Spark minus rows quarantined.
"""

from collections.abc import Iterator

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    multi_asset_check,
)

from watermark_assets.config import CommitPipelineConfig, IngestPipelineConfig
from watermark_assets.delta import DeltaCommitter
from watermark_assets.state_store import CommitMetadata, pipeline_commits

Pipeline = IngestPipelineConfig | CommitPipelineConfig

MONOTONE_CHECK = "watermark_never_moves_backwards"
RECONCILE_CHECK = "rows_reconcile"


def _run_commits(
    pipeline: Pipeline, run_id: str, lookback: int = 50
) -> list[tuple[int, CommitMetadata]]:
    committer = DeltaCommitter(pipeline.table.uri)
    version = committer.current_version()
    if version is None:
        return []
    after = max(-1, version - lookback)
    return [
        (v, m)
        for v, m in pipeline_commits(committer, pipeline, after if after >= 0 else None)
        if m.run_id == run_id
    ]


def build_checks(pipeline: Pipeline, asset_key: AssetKey) -> AssetChecksDefinition:
    """Both checks of a pipeline's asset, evaluated after each materialization in the same run."""

    @multi_asset_check(
        specs=[
            AssetCheckSpec(
                MONOTONE_CHECK,
                asset=asset_key,
                description="The watermark never moved backwards in this run's commits.",
            ),
            AssetCheckSpec(
                RECONCILE_CHECK,
                asset=asset_key,
                description="Rows committed = rows read - rows quarantined.",
            ),
        ],
        name=f"{pipeline.name}_checks",
    )
    def checks(context: AssetCheckExecutionContext) -> Iterator[AssetCheckResult]:
        commits = _run_commits(pipeline, context.run.run_id)
        if not commits:
            note = "this run made no commit (nothing above the watermark, or already committed)"
            yield AssetCheckResult(check_name=MONOTONE_CHECK, passed=True, description=note)
            yield AssetCheckResult(check_name=RECONCILE_CHECK, passed=True, description=note)
            return
        committer = DeltaCommitter(pipeline.table.uri)
        regressions: list[str] = []
        mismatches: list[str] = []
        for version, metadata in commits:
            before, after = metadata.watermark_before, metadata.watermark_after
            for prefix, name in before.partition_watermarks.items():
                new = after.partition_watermarks.get(prefix)
                if new is None or new < name:
                    regressions.append(f"v{version} {prefix}: {name!r} -> {new!r}")
            if before.value and (after.value is None or after.value < before.value):
                regressions.append(f"v{version} global: {before.value!r} -> {after.value!r}")
            logged = sum(add.num_records or 0 for add in committer.read_commit(version).added)
            expected = metadata.rows_read - metadata.rows_quarantined
            if logged != expected:
                mismatches.append(
                    f"v{version}: log has {logged} rows, read {metadata.rows_read} - "
                    f"quarantined {metadata.rows_quarantined} = {expected}"
                )
        versions = [v for v, _ in commits]
        yield AssetCheckResult(
            check_name=MONOTONE_CHECK,
            passed=not regressions,
            severity=AssetCheckSeverity.ERROR,
            description="; ".join(regressions) or f"monotone in commits {versions}",
            metadata={"commits": versions},
        )
        yield AssetCheckResult(
            check_name=RECONCILE_CHECK,
            passed=not mismatches,
            severity=AssetCheckSeverity.ERROR,
            description="; ".join(mismatches) or f"rows reconcile in commits {versions}",
            metadata={"commits": versions},
        )

    return checks
