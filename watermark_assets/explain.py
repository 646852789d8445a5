"""Why a landing file was, or was not, ingested (``watermark-assets explain PIPELINE [PATH]``).

The evidence is read once per pipeline, from what the pipeline itself trusts: the tables' lineage
(each row's landing file, in the data and the quarantine table: what was ingested, whatever Delta's
log maintenance removed; its greatest file per landing partition is that partition's watermark
with nothing pruned), the commits the log still holds (their versions and runs, as facts), the
quarantine table (``_source_file``, ``error``), the state (checkpoint + log) and the sensor's
listing window. The verdicts are decided
by :mod:`watermark_assets.verdicts` without I/O. Nothing is written.

Reading every commit costs the log's length: a diagnostic's price, never a sensor tick's.
No Dagster: the caller passes the mapping of a landing time to its Dagster partition key.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from watermark_assets import storage
from watermark_assets.config import Pipeline
from watermark_assets.core.filepath.listing import plan_listing
from watermark_assets.delta.committer import committer_for
from watermark_assets.delta.read import read_columns
from watermark_assets.exceptions import ExplainPathError
from watermark_assets.sources.file_discovery import PartitionOf
from watermark_assets.sources.locations import check_source_folder
from watermark_assets.state.commit_metadata import COMMIT_METADATA_KEY, CommitMetadata
from watermark_assets.state.horizons import listing_horizon
from watermark_assets.state.load import load_state, watermark_of
from watermark_assets.verdicts import (
    Commit,
    Evidence,
    Explanation,
    Quarantined,
    Verdict,
    explain_path,
)

#: The version of the ``--json`` shapes; bumped only when a key changes meaning or goes away.
JSON_SCHEMA_VERSION = 1


# --- reading the evidence -------------------------------------------------------------------------


def gather_evidence(pipeline: Pipeline, partition_of: PartitionOf, *, now: datetime) -> Evidence:
    """Read the state, every commit of the pipeline and the quarantine table (nothing written).

    Raises :class:`LandingFolderMissingError` when the landing folder does not exist (every
    file would be "missing": the folder is what is wrong)."""
    check_source_folder(pipeline)
    state = load_state(pipeline, now=now)
    committer = committer_for(pipeline.table)
    commits: dict[str, list[Commit]] = {}
    # the state's signatures survive log cleanup; a commit the log still holds is as new or newer
    signatures: dict[str, str] = dict(state.file_signatures)
    history = state.watermark
    log_from = None
    if committer.current_version() is not None:
        records = committer.read_commits_after(None, lost="skip")  # log_from says from where
        log_from = records[0].version if records else None
        for record in records:
            text = record.custom_metadata.get(COMMIT_METADATA_KEY)
            if not text:
                continue
            metadata = CommitMetadata.from_json(text)
            if metadata.pipeline != pipeline.name or metadata.source != pipeline.source.name:
                continue
            history = history.merge(metadata.watermark_after)
            commit = Commit(
                version=record.version,
                run_id=metadata.run_id,
                partition_keys=metadata.partition_keys,
            )
            for path in metadata.source_files:
                commits.setdefault(path, []).append(commit)
            signatures.update(metadata.source_signatures)
    horizon = listing_horizon(pipeline, state.watermark, now)
    quarantined = _quarantined(pipeline)
    lineage: frozenset[str] = frozenset()
    if log_from not in (None, 0):
        # older commits were cleaned up: what the tables hold decides (the lineage names every
        # committed file; its greatest per landing partition is the watermark of a partition
        # pruned from the state)
        lineage = (frozenset(_files_in_table(pipeline)) - state.own_files) | frozenset(quarantined)
        history = history.merge(watermark_of(lineage, pipeline.watermark.file_name_ordering))
    table_files = pipeline.file_source.table_files(state.own_files)
    return Evidence(
        table_files=frozenset() if table_files is None else table_files.held,
        pipeline=pipeline,
        state=state,
        history=history,
        commits={path: tuple(found) for path, found in commits.items()},
        log_from=log_from,
        horizon=horizon,
        plan=plan_listing(state.watermark, horizon),
        quarantined=quarantined,
        partition_of=partition_of,
        now=now,
        lineage=lineage,
        signatures=signatures,
    )


def _quarantined(pipeline: Pipeline) -> dict[str, Quarantined]:
    """Rows per source file in the quarantine table (only its two small columns are read)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(
            pipeline.table.quarantine,
            storage_options=storage.delta_options(pipeline.table.quarantine),
        )
    except TableNotFoundError:
        return {}
    names = set(table.schema().to_arrow().names)
    if "_source_file" not in names:
        return {}
    columns = ["_source_file", *(["error"] if "error" in names else [])]
    rows = read_columns(table, columns).to_pylist()
    counts = Counter(str(row["_source_file"]) for row in rows)
    errors: dict[str, str] = {}
    for row in rows:
        if row.get("error"):
            errors.setdefault(str(row["_source_file"]), str(row["error"]))
    return {path: Quarantined(rows=n, error=errors.get(path)) for path, n in counts.items()}


def _files_in_table(pipeline: Pipeline) -> set[str]:
    """The landing files that have rows in the data table now (the whole lineage column is read:
    only when the log no longer holds every commit)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(
            pipeline.table.uri, storage_options=storage.delta_options(pipeline.table.uri)
        )
    except TableNotFoundError:
        return set()
    return pipeline.file_source.files_in_table(table)


def rows_in_table(pipeline: Pipeline, paths: Iterable[str]) -> dict[str, int]:
    """Rows each landing file has in the data table now (0 when none), as the pipeline's source
    strategy counts them (the lineage column, or the add action of a file committed in place)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    wanted = sorted(set(paths))
    counts = dict.fromkeys(wanted, 0)
    if not wanted:
        return counts
    try:
        table = DeltaTable(
            pipeline.table.uri, storage_options=storage.delta_options(pipeline.table.uri)
        )
    except TableNotFoundError:
        return counts
    return pipeline.file_source.rows_in_table(table, wanted)


def landing_files(pipeline: Pipeline) -> list[str]:
    """Every file under the source folder, relative to it, sorted; hidden folders and files
    (``_``, ``.``: never part of a source) are left out, other formats are kept (``ignored``)."""
    return list(landing_file_signatures(pipeline))


def landing_file_signatures(pipeline: Pipeline) -> dict[str, str | None]:
    """:func:`landing_files` (in that order) with each file's content signature (size and
    mtime, or ETag: ``storage.content_signature``), from the same listing."""
    fs, root = storage.filesystem(pipeline.source.uri)
    fs.invalidate_cache()
    if not fs.exists(root):
        return {}
    found: dict[str, str | None] = {}
    for entry, info in fs.find(root, detail=True).items():
        relative = posixpath.relpath(str(entry), root)
        if not any(storage.is_hidden(part) for part in relative.split("/")):
            found[relative] = storage.content_signature(info)
    return dict(sorted(found.items()))


def relative_path(pipeline: Pipeline, given: str) -> str:
    """``given`` as a path relative to the source folder: an absolute local path inside the
    folder is made relative; '.' and '..' parts, or a path outside it, raise ExplainPathError."""
    source = storage.filesystem(pipeline.source.uri)[1]
    path = given
    if given.startswith("/") or given.startswith("file://"):
        local = given.removeprefix("file://")
        if not (local + "/").startswith(source.rstrip("/") + "/"):
            raise ExplainPathError(given, pipeline.source.uri)
        path = local[len(source.rstrip("/")) :].lstrip("/")
    path = path.removeprefix("./")
    if not path or any(part in ("", ".", "..") for part in path.split("/")):
        raise ExplainPathError(given, pipeline.source.uri)
    return path


# --- the two questions ----------------------------------------------------------------------------


def explain_file(evidence: Evidence, given: str) -> Explanation:
    """The verdict on one path (relative to the source folder, or absolute inside it)."""
    pipeline = evidence.pipeline
    path = relative_path(pipeline, given)
    fs, root = storage.filesystem(pipeline.source.uri)
    fs.invalidate_cache()
    present = bool(fs.isfile(f"{root}/{path}"))
    rows = None
    signature = None
    if present and evidence.is_committed(path):
        rows = rows_in_table(pipeline, [path])[path]
        signature = storage.content_signature(fs.info(f"{root}/{path}"))
    return explain_path(evidence, path, present=present, rows=rows, signature=signature)


@dataclass(frozen=True, kw_only=True)
class Listing:
    """Every landing file that was not ingested, grouped by verdict (in Verdict order)."""

    pipeline: str
    source: str
    landing_files: int
    ingested: int
    groups: Mapping[Verdict, tuple[Explanation, ...]]

    @property
    def not_ingested(self) -> int:
        return sum(len(found) for found in self.groups.values())


def explain_all(evidence: Evidence) -> Listing:
    """Every file of the landing folder that is not ingested, with its verdict (the table's own
    files, where the landing folder is the table's, are not landing files: left out)."""
    pipeline = evidence.pipeline
    listed = landing_file_signatures(pipeline)
    paths = [p for p in listed if not evidence.is_table_file(p)]
    # a committed file is "quarantined" only when none of its rows is in the data table
    suspects = [p for p in paths if evidence.is_committed(p) and p in evidence.quarantined]
    rows = rows_in_table(pipeline, suspects)
    groups: dict[Verdict, list[Explanation]] = {}
    ingested = 0
    for path in paths:
        found = explain_path(
            evidence, path, present=True, rows=rows.get(path), signature=listed[path]
        )
        if found.verdict is Verdict.INGESTED:
            ingested += 1
        else:
            groups.setdefault(found.verdict, []).append(found)
    order = list(Verdict)
    return Listing(
        pipeline=pipeline.name,
        source=pipeline.source.uri,
        landing_files=len(paths),
        ingested=ingested,
        groups={v: tuple(groups[v]) for v in sorted(groups, key=order.index)},
    )


# --- rendering ------------------------------------------------------------------------------------


def listing_lines(listing: Listing, *, limit: int | None) -> list[str]:
    """The human listing: a summary line, then per verdict its count and one line per file
    (at most ``limit`` per verdict, then "... and N more")."""
    lines = [
        f"{listing.pipeline}: {_files(listing.landing_files)} in {listing.source}, "
        f"{listing.ingested} ingested, {listing.not_ingested} not ingested"
    ]
    for verdict, found in listing.groups.items():
        lines.append(f"{verdict.value}: {_files(len(found))}")
        shown = found if limit is None else found[:limit]
        lines.extend(f"  {e.path}: {e.reason}" for e in shown)
        if len(found) > len(shown):
            lines.append(f"  ... and {len(found) - len(shown)} more")
    return lines


def _files(count: int) -> str:
    return f"{count} file" if count == 1 else f"{count} files"


def listing_json(listing: Listing, *, limit: int | None) -> dict[str, Any]:
    """The ``--json`` listing: counts, and per verdict the files (capped like the lines)."""
    groups = []
    for verdict, found in listing.groups.items():
        shown = found if limit is None else found[:limit]
        groups.append(
            {
                "verdict": verdict.value,
                "count": len(found),
                "files": [e.to_json() for e in shown],
                "more": len(found) - len(shown),
            }
        )
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "pipeline": listing.pipeline,
        "source": listing.source,
        "landing_files": listing.landing_files,
        "ingested": listing.ingested,
        "not_ingested": listing.not_ingested,
        "groups": groups,
    }


def file_json(pipeline: str, explanation: Explanation) -> dict[str, Any]:
    """The ``--json`` answer for one path."""
    return {"schema_version": JSON_SCHEMA_VERSION, "pipeline": pipeline, **explanation.to_json()}
