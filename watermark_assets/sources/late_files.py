"""Files that landed at or below their partition's watermark and were never committed.

A file-path watermark moves past a file only when it is committed, so a file found at or below
its partition's watermark either was committed, or landed there afterwards (an upstream that
writes out of name order). The regular listing counts such files per landing partition; the
reconciliation sweep (``sweep.interval_minutes``) names them here, off the hot path: it lists
each such landing partition in full and takes away every file the tables hold (each row's
lineage: the ``files`` source's ``_source_file``, the quarantine table's, or for
``parquet_commit`` the add actions), which survives Delta's log cleanup, OPTIMIZE and VACUUM,
where the commits' ``commitInfo`` does not.

The state counts the files committed per landing partition (exact, a running count); a partition
whose count says fewer files are uncommitted than the lineage finds (rows deleted from the table,
a committed file with no rows) cannot tell which: :class:`LateFilesUnprovableError` says so
instead of guessing, and nothing is ingested. Named files are reported, and with
``sweep.ingest: true`` ingested by runs of an explicit late mode (``late: true`` in the run
config) whose commits carry txn ids of their own (:func:`late_txn_app_id`) and leave the
watermark where it is.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from watermark_assets import names, storage
from watermark_assets.config import Pipeline
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.delta.committer import committer_for
from watermark_assets.exceptions import LateFilesUnprovableError
from watermark_assets.sources.files import TableFiles
from watermark_assets.spark.paths import unreadable_character
from watermark_assets.state.commit_metadata import pipeline_commits
from watermark_assets.state.load import table_lineage

#: The Delta txn appId of the late-file commits of one Dagster partition of one pipeline (apart
#: from the regular batches' :func:`~watermark_assets.state.commit_metadata.txn_app_id`, so a
#: late commit never makes a regular one stale, nor the other way round).
late_txn_app_id = names.late_app_id


def committed_among(
    pipeline: Pipeline, paths: Iterable[str], recorded: Collection[str] = ()
) -> frozenset[str]:
    """Which of ``paths`` were committed: the state ``recorded`` them (its committed files of the
    retained landing partitions, ``PipelineState.file_signatures``: a file whose rows were all
    removed since stays known after the log's cleanup), the pipeline's tables hold them (rows,
    or quarantined records: the lineage, whatever Delta's maintenance did to the log), or a
    commit still in the log names them (a ``parquet_commit`` file that OPTIMIZE compacted away
    and whose removal the table forgot). Evidence that a file was committed; what none holds is
    decided by the counts (:func:`find_late_files`)."""
    asked = set(paths)
    found = frozenset(asked.intersection(recorded))
    wanted = asked - found
    if not wanted:
        return found
    held = table_lineage(pipeline, lambda path: path in wanted).files
    logged = {
        path
        for _, metadata in pipeline_commits(
            committer_for(pipeline.table), pipeline, None, lost="skip"
        )
        for path in metadata.source_files
        if path in wanted
    }
    return found | held | logged


def find_late_files(
    pipeline: Pipeline,
    watermark: FileWatermark,
    prefixes: Iterable[str],
    committed_files: Mapping[str, int],
    *,
    table_files: TableFiles | None,
    signatures: dict[str, str] | None = None,
    recorded: Collection[str] = (),
    first_sight: dict[str, str] | None = None,
) -> dict[str, tuple[str, ...]]:
    """Per landing prefix, the files at or below its watermark that no commit recorded (sorted).

    Each prefix is listed in full (the reconciliation: on S3 the regular listing starts after the
    watermark and never sees these files). Only a prefix holding more such files than the state's
    count of committed ones (``committed_files``) costs the read of the tables' lineage that names
    them (with the state's ``recorded`` committed files, :func:`committed_among`); one where
    they miss more files than that count allows raises :class:`LateFilesUnprovableError`. Files
    Spark cannot read by their exact path are left out (the listing reports them).

    Where the landing folder is the table's (``table_files``), the files the table holds are
    never named, and a prefix is read further only when :meth:`TableFiles.not_ingested` counts
    files never committed there (the files the table forgot are the committed ones).

    ``signatures``, when given, receives the content signature (size and mtime, or ETag) of each
    file listed at or below its watermark: the same listing, to find files rewritten in place
    where the regular listing cannot (S3 lists from the watermark on). ``first_sight``, when
    given, receives it for each file listed at or below its watermark that ``recorded`` lacks
    and the tables' lineage (or a commit still in the log) proves committed: a file committed
    before the signatures were recorded, or after ``repair-state``, gets one now (a rewrite
    before this first sight cannot be told). Such files cost the same read of the lineage.
    """
    source = pipeline.source
    held = frozenset() if table_files is None else table_files.held
    candidates: dict[str, list[str]] = {}
    excess: dict[str, int] = {}
    unrecorded: dict[str, str] = {}  # listed at or below, no record: committed before records?
    for prefix in sorted(set(prefixes)):
        directory = storage.join(source.uri, prefix) if prefix else source.uri
        at_or_below: list[str] = []
        held_below: list[str] = []
        listed = storage.list_signatures(directory)
        for name in sorted(listed):
            path = f"{prefix}/{name}" if prefix else name
            if storage.is_hidden(name) or not name.endswith(tuple(source.suffixes)):
                continue
            if not watermark.is_above(path):
                (held_below if path in held else at_or_below).append(path)
                signature = listed[name]
                if signature is not None and path not in held:
                    if signatures is not None:
                        signatures[path] = signature
                    if first_sight is not None and path not in recorded:
                        unrecorded[path] = signature
        if table_files is None:
            never = len(at_or_below) - committed_files.get(prefix, 0)
        else:
            never = table_files.not_ingested(
                {prefix: len(at_or_below)}, held_below, committed_files, watermark
            ).get(prefix, 0)
        if never > 0:
            readable = [
                p for p in at_or_below if not unreadable_character(storage.join(source.uri, p))
            ]
            candidates[prefix] = readable
            excess[prefix] = never
    if not candidates and not unrecorded:
        return {}
    committed = committed_among(
        pipeline, {*(p for paths in candidates.values() for p in paths), *unrecorded}, recorded
    )
    if first_sight is not None:
        first_sight.update({p: s for p, s in unrecorded.items() if p in committed})
    found = {
        prefix: kept
        for prefix, paths in candidates.items()
        if (kept := tuple(p for p in paths if p not in committed))
    }
    for prefix, kept in found.items():
        if len(kept) > excess[prefix]:
            raise LateFilesUnprovableError(
                pipeline.name,
                pipeline.table.uri,
                f"landing partition {prefix!r} holds {excess[prefix]} file(s) more than the "
                f"state counts as committed, but the tables hold no rows of {len(kept)} "
                f"({', '.join(kept[:3])}{' ...' if len(kept) > 3 else ''}): rows of a "
                "committed file were deleted, or it had none",
            )
    return found


def group_by_partition(
    files_by_prefix: Mapping[str, Sequence[str]], key_of: Callable[[str], str | None]
) -> dict[str, tuple[str, ...]]:
    """Files grouped by Dagster partition key (files without a key are left out), sorted."""
    grouped: dict[str, list[str]] = {}
    for paths in files_by_prefix.values():
        for path in paths:
            key = key_of(path)
            if key is not None:
                grouped.setdefault(key, []).append(path)
    return {key: tuple(sorted(paths)) for key, paths in sorted(grouped.items())}
