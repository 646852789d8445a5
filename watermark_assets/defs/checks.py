"""The two asset checks of every pipeline, read from the Delta log, not from the run's claims.

- ``watermark_never_moves_backwards``: in every commit this run made, the watermark the commit
  stores is at or above the one it read (file path: each landing partition's and the global
  value; column: the stored one and the previous commit's; unit: each unit's done-at);
- ``rows_reconcile``: rows committed (the add actions' numRecords in the log) equal the rows the
  run read, less what it set aside (file path: the quarantined rows; column and unit: rows
  deduplicated on merge keys, plus rows a rewrite kept).

One builder, :func:`watermark_checks`, reads the run's commits for every kind; a kind gives only
its judge of one commit (:class:`CommitFindings`).
"""

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

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

from watermark_assets import names
from watermark_assets.config import Pipeline
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.defs.table_schema import metadata_versions
from watermark_assets.delta.committer import CommitRecord, DeltaCommitter, HasUri, committer_for
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


@dataclass(frozen=True)
class CommitFindings:
    """What a kind's judge finds in one of the run's commits: where the watermark moved
    backwards, and why its rows do not reconcile (None: they do)."""

    regressions: Sequence[str] = ()
    mismatch: str | None = None


#: A kind's judge of one commit (the committer reads earlier commits if it must); None: the
#: commit carries no record of this kind's run (nothing to judge).
CommitJudge = Callable[[CommitRecord, DeltaCommitter], CommitFindings | None]


def run_versions(context: AssetCheckExecutionContext, asset_key: AssetKey) -> list[int]:
    """The commits this run made to the asset's table, as its materializations name them
    (``delta/version``, ``delta/versions``: :func:`~watermark_assets.defs.table_schema.
    metadata_versions`)."""
    records = context.instance.get_records_for_run(
        context.run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION
    ).records
    versions: set[int] = set()
    for record in records:
        materialization = record.event_log_entry.asset_materialization
        if materialization is None or materialization.asset_key != asset_key:
            continue
        versions |= metadata_versions(materialization.metadata)
    return sorted(versions)


def watermark_checks(
    name: str,
    asset_key: AssetKey,
    table: HasUri,
    judge: CommitJudge,
    *,
    monotone: str,
    reconcile: str,
    no_commit: str,
) -> AssetChecksDefinition:
    """The two checks of a pipeline's asset (``name``: the pipeline's), evaluated after each
    materialization in the same run: each commit the run made, read from the table's log, is
    judged by ``judge``; ``monotone`` and ``reconcile`` describe the checks in the UI;
    ``no_commit`` is what both say when the run committed nothing."""

    @multi_asset_check(
        specs=[
            AssetCheckSpec(MONOTONE_CHECK, asset=asset_key, description=monotone),
            AssetCheckSpec(RECONCILE_CHECK, asset=asset_key, description=reconcile),
        ],
        name=names.checks_name(name),
    )
    def checks(context: AssetCheckExecutionContext) -> Iterator[AssetCheckResult]:
        versions = run_versions(context, asset_key)
        if not versions:
            yield AssetCheckResult(check_name=MONOTONE_CHECK, passed=True, description=no_commit)
            yield AssetCheckResult(check_name=RECONCILE_CHECK, passed=True, description=no_commit)
            return
        committer = committer_for(table)
        commits, gone = readable_commits(committer, versions)
        regressions: list[str] = []
        mismatches: list[str] = []
        for commit in commits:
            found = judge(commit, committer)
            if found is None:
                continue
            regressions += found.regressions
            if found.mismatch is not None:
                mismatches.append(found.mismatch)
        yield from check_results(versions, regressions, mismatches, gone)

    return checks


def judge_file_commit(commit: CommitRecord, committer: DeltaCommitter) -> CommitFindings | None:
    """A file-path run's commit: each landing partition's watermark and the global one at or
    above the ones before; rows in the log = rows read - rows quarantined."""
    text = commit.custom_metadata.get(COMMIT_METADATA_KEY)
    if not text:
        return None
    metadata = CommitMetadata.from_json(text)
    logged = sum(add.num_records or 0 for add in commit.added)
    return CommitFindings(
        watermark_regressions(commit.version, metadata.watermark_before, metadata.watermark_after),
        row_mismatch(commit.version, metadata, logged),
    )


def build_checks(pipeline: Pipeline, asset_key: AssetKey) -> AssetChecksDefinition:
    """Both checks of a file-path pipeline's asset."""
    return watermark_checks(
        pipeline.name,
        asset_key,
        pipeline.table,
        judge_file_commit,
        monotone="The watermark never moved backwards in this run's commits.",
        reconcile="Rows committed = rows read - rows quarantined.",
        no_commit="this run made no commit (nothing above the watermark, or already committed)",
    )


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
