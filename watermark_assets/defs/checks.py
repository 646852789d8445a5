"""Asset checks that read the Delta log, not the run's own claims.

- ``watermark_never_moves_backwards``: in every commit this run made, each landing partition's
  watermark after the commit is >= the one before it, and so is the global value.
- ``rows_reconcile``: rows committed (the add actions' numRecords in the log) equal rows read by
  Spark minus rows quarantined.
"""

from collections.abc import Iterable, Iterator, Sequence

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    DagsterEventType,
    multi_asset_check,
)

from watermark_assets.config import Pipeline
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.delta.committer import CommitRecord, DeltaCommitter
from watermark_assets.exceptions import DeltaCommitError
from watermark_assets.state.commit_metadata import COMMIT_METADATA_KEY, CommitMetadata

MONOTONE_CHECK = "watermark_never_moves_backwards"
RECONCILE_CHECK = "rows_reconcile"
#: Dagster's check on every pipeline's asset (``defs/build.schema_change_checks``): its name.
SCHEMA_CHANGE_CHECK = "column_schema_change"


def watermark_regressions(version: int, before: FileWatermark, after: FileWatermark) -> list[str]:
    """Where a commit moved a watermark backwards (per landing partition and globally)."""
    found = []
    for prefix, name in before.partition_watermarks.items():
        new = after.partition_watermarks.get(prefix)
        if new is None or new < name:
            found.append(f"v{version} {prefix}: {name!r} -> {new!r}")
    if before.value and (after.value is None or after.value < before.value):
        found.append(f"v{version} global: {before.value!r} -> {after.value!r}")
    return found


def row_mismatch(version: int, metadata: CommitMetadata, logged_rows: int) -> str | None:
    """Why rows in the log differ from rows read minus rows quarantined, or None."""
    expected = metadata.rows_read - metadata.rows_quarantined
    if logged_rows == expected:
        return None
    return (
        f"v{version}: log has {logged_rows} rows, read {metadata.rows_read} - "
        f"quarantined {metadata.rows_quarantined} = {expected}"
    )


def _run_commits(
    context: AssetCheckExecutionContext, pipeline: Pipeline, asset_key: AssetKey
) -> list[tuple[int, CommitMetadata, int]]:
    """This run's commits, named by its materializations' ``delta/version``, read from the log:
    (version, the commit's metadata, the rows its add actions hold)."""
    records = context.instance.get_records_for_run(
        context.run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION
    ).records
    versions = set()
    for record in records:
        materialization = record.event_log_entry.asset_materialization
        if materialization is None or materialization.asset_key != asset_key:
            continue
        value = materialization.metadata.get("delta/version")
        if value is not None and isinstance(value.value, int):
            versions.add(value.value)
    committer = DeltaCommitter(pipeline.table.uri)
    commits = []
    for commit in readable_commits(committer, versions)[0]:
        version = commit.version
        text = commit.custom_metadata.get(COMMIT_METADATA_KEY)
        if text:
            logged = sum(add.num_records or 0 for add in commit.added)
            commits.append((version, CommitMetadata.from_json(text), logged))
    return commits


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
        commits = _run_commits(context, pipeline, asset_key)
        if not commits:
            note = "this run made no commit (nothing above the watermark, or already committed)"
            yield AssetCheckResult(check_name=MONOTONE_CHECK, passed=True, description=note)
            yield AssetCheckResult(check_name=RECONCILE_CHECK, passed=True, description=note)
            return
        regressions: list[str] = []
        mismatches: list[str] = []
        for version, metadata, logged in commits:
            regressions += watermark_regressions(
                version, metadata.watermark_before, metadata.watermark_after
            )
            mismatch = row_mismatch(version, metadata, logged)
            if mismatch:
                mismatches.append(mismatch)
        versions = [version for version, _, _ in commits]
        yield from check_results(versions, regressions, mismatches)

    return checks


def readable_commits(
    committer: DeltaCommitter, versions: Iterable[int]
) -> tuple[list[CommitRecord], list[int]]:
    """The run's commits still in the Delta log, and the versions log cleanup already removed
    (delta-rs cleans the log after a checkpoint, possibly during a long run): a check says which
    commits it could not read instead of failing the run."""
    found: list[CommitRecord] = []
    gone: list[int] = []
    for version in sorted(versions):
        try:
            found.append(committer.read_commit(version))
        except DeltaCommitError:
            gone.append(version)
    return found, gone


def check_results(
    versions: list[int], regressions: list[str], mismatches: list[str], gone: Sequence[int] = ()
) -> list[AssetCheckResult]:
    """The two checks' results over the commits ``versions`` (shared by every pipeline kind);
    ``gone``: commits the log no longer held when the check read it (not checked)."""
    unchecked = (
        f"; commits {list(gone)} were cleaned from the Delta log before the check read them: "
        "not checked"
        if gone
        else ""
    )
    return [
        AssetCheckResult(
            check_name=name,
            passed=not problems,
            severity=AssetCheckSeverity.ERROR,
            description=("; ".join(problems) or f"{fine} in commits {versions}") + unchecked,
            metadata={"commits": versions, "commits_not_checked": list(gone)},
        )
        for name, problems, fine in (
            (MONOTONE_CHECK, regressions, "monotone"),
            (RECONCILE_CHECK, mismatches, "rows reconcile"),
        )
    ]
