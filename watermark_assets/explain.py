"""Why a landing file was, or was not, ingested: one verdict per file (``explain PIPELINE PATH``).

The evidence is read once per pipeline, from what the pipeline itself trusts: the Delta log (every
commit names its ``source_files``; their union is what was ingested, and the merge of every
commit's watermark is the watermark with nothing pruned), the quarantine table (``_source_file``,
``error``), the state (checkpoint + log) and the same listing window and name checks the sensor
applies. :func:`explain_path` then decides, without any I/O, in this order:

1. ``missing``: no such file in the landing folder (the facts say if a commit holds it).
2. ``ingested`` / ``quarantined``: a commit holds it; ``quarantined`` when every record it held
   went to the quarantine table (none in the data table).
3. the checks of a name, in :data:`NAME_CHECKS` (``ignored``, ``unsortable-name``,
   ``template-mismatch``, ``outside-partitions``): the extension point for more refusals.
4. ``below-watermark``: at or below its landing partition's watermark, yet no commit holds it.
5. ``late-partition-closed`` / ``before-lookback``: above its watermark, but its landing partition
   lies below the window the sensor lists (the sweep reports it; a backfill ingests it).
6. ``pending``: the sensor's listing returns it; a coming tick requests its partition's run.

Reading every commit costs the log's length: a diagnostic's price, never a sensor tick's.
No Dagster: the caller passes the mapping of a landing time to its Dagster partition key.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from watermark_assets import storage
from watermark_assets.config import CommitPipelineConfig, IngestPipelineConfig
from watermark_assets.core.file_watermark import FileWatermark
from watermark_assets.core.filepath import check_sortable, split_path
from watermark_assets.core.listing import ListingPlan, plan_listing
from watermark_assets.delta import DeltaCommitter
from watermark_assets.discovery import PartitionOf
from watermark_assets.exceptions import ExplainPathError, UnsortableFileNameError
from watermark_assets.state_store import (
    COMMIT_METADATA_KEY,
    CommitMetadata,
    PipelineState,
    listing_horizon,
    load_state,
)

Pipeline = IngestPipelineConfig | CommitPipelineConfig

#: The version of the ``--json`` shapes; bumped only when a key changes meaning or goes away.
JSON_SCHEMA_VERSION = 1


class Verdict(str, Enum):
    """What became of a landing file; the values are the command's spelling."""

    INGESTED = "ingested"
    QUARANTINED = "quarantined"
    PENDING = "pending"
    BELOW_WATERMARK = "below-watermark"
    LATE_PARTITION_CLOSED = "late-partition-closed"
    BEFORE_LOOKBACK = "before-lookback"
    OUTSIDE_PARTITIONS = "outside-partitions"
    TEMPLATE_MISMATCH = "template-mismatch"
    IGNORED = "ignored"
    UNSORTABLE_NAME = "unsortable-name"
    MISSING = "missing"


@dataclass(frozen=True, kw_only=True)
class Commit:
    """One commit that holds a file: its Delta version, Dagster run and partitions."""

    version: int
    run_id: str
    partition_keys: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Quarantined:
    """A file's records in the quarantine table, and the first error given for them."""

    rows: int
    error: str | None


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """Everything a verdict needs, read once per pipeline (see :func:`gather_evidence`).

    ``history``: the state's watermark merged with every commit's, so the watermark of a
    partition pruned from the state still decides. ``log_from``: the oldest version whose commit
    info was read (older JSON files were cleaned up after a Delta checkpoint: a commit older than
    that is not seen); None without a table. ``plan``: the sensor's listing window.
    """

    pipeline: Pipeline
    state: PipelineState
    history: FileWatermark
    commits: Mapping[str, tuple[Commit, ...]]
    log_from: int | None
    horizon: str | None
    plan: ListingPlan
    quarantined: Mapping[str, Quarantined]
    partition_of: PartitionOf
    now: datetime


@dataclass(frozen=True, kw_only=True)
class Explanation:
    """The verdict on one landing path, one sentence saying why, and the facts behind it."""

    path: str
    verdict: Verdict
    reason: str
    facts: Mapping[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        return f"{self.path}: {self.verdict.value}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "facts": dict(self.facts),
        }


# --- reading the evidence -------------------------------------------------------------------------


def gather_evidence(pipeline: Pipeline, partition_of: PartitionOf, *, now: datetime) -> Evidence:
    """Read the state, every commit of the pipeline and the quarantine table (nothing written)."""
    state = load_state(pipeline, now=now)
    committer = DeltaCommitter(pipeline.table.uri)
    commits: dict[str, list[Commit]] = {}
    history = state.watermark
    log_from = None
    if committer.current_version() is not None:
        records = committer.read_commits_after(None)
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
    horizon = listing_horizon(pipeline, state.watermark, now)
    return Evidence(
        pipeline=pipeline,
        state=state,
        history=history,
        commits={path: tuple(found) for path, found in commits.items()},
        log_from=log_from,
        horizon=horizon,
        plan=plan_listing(state.watermark, horizon),
        quarantined=_quarantined(pipeline),
        partition_of=partition_of,
        now=now,
    )


def _quarantined(pipeline: Pipeline) -> dict[str, Quarantined]:
    """Rows per source file in the quarantine table (only its two small columns are read)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(pipeline.table.quarantine)
    except TableNotFoundError:
        return {}
    names = set(table.schema().to_arrow().names)
    if "_source_file" not in names:
        return {}
    columns = ["_source_file", *(["error"] if "error" in names else [])]
    rows = table.to_pyarrow_table(columns=columns).to_pylist()
    counts = Counter(str(row["_source_file"]) for row in rows)
    errors: dict[str, str] = {}
    for row in rows:
        if row.get("error"):
            errors.setdefault(str(row["_source_file"]), str(row["error"]))
    return {path: Quarantined(rows=n, error=errors.get(path)) for path, n in counts.items()}


def rows_in_table(pipeline: Pipeline, paths: Iterable[str]) -> dict[str, int]:
    """Rows each landing file has in the data table now (0 when none).

    Ingest pipelines: the ``_source_file`` lineage column, filtered to ``paths``. Commit
    pipelines: the landing file IS the data file; its add action's record count.
    """
    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    wanted = sorted(set(paths))
    counts = dict.fromkeys(wanted, 0)
    if not wanted:
        return counts
    try:
        table = DeltaTable(pipeline.table.uri)
    except TableNotFoundError:
        return counts
    if isinstance(pipeline, CommitPipelineConfig):
        inside = posixpath.relpath(
            storage.filesystem(pipeline.source.uri)[1], storage.filesystem(pipeline.table.uri)[1]
        )
        of_table = {posixpath.normpath(posixpath.join(inside, p)): p for p in wanted}
        actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
        for action in actions:
            source = of_table.get(str(action["path"]))
            if source is not None:
                counts[source] += int(action.get("num_records") or 0)
        return counts
    import pyarrow.compute as pc

    # Filtered in Arrow, not in the scan: the scan prunes files by the add actions' min/max
    # statistics, which delta-rs truncates for long strings (a filter on a path finds nothing).
    column = table.to_pyarrow_table(columns=["_source_file"]).column("_source_file")
    found = column.filter(pc.is_in(column, value_set=pa.array(wanted, column.type)))
    counts.update(Counter(str(value) for value in found.to_pylist()))
    return counts


def landing_files(pipeline: Pipeline) -> list[str]:
    """Every file under the source folder, relative to it, sorted; hidden folders and files
    (``_``, ``.``: never part of a source) are left out, other formats are kept (``ignored``)."""
    fs, root = storage.filesystem(pipeline.source.uri)
    fs.invalidate_cache()
    if not fs.exists(root):
        return []
    found = []
    for entry in fs.find(root, detail=False):
        relative = posixpath.relpath(str(entry), root)
        if not any(storage.is_hidden(part) for part in relative.split("/")):
            found.append(relative)
    return sorted(found)


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


# --- the verdicts (no I/O) ------------------------------------------------------------------------

#: One check of a name or place a listing refuses or skips: an Explanation, or None to go on.
NameCheck = Callable[[Evidence, str], "Explanation | None"]


def _ignored(evidence: Evidence, path: str) -> Explanation | None:
    source = evidence.pipeline.source
    if any(storage.is_hidden(part) for part in path.split("/")):
        return Explanation(
            path=path,
            verdict=Verdict.IGNORED,
            reason="a folder or the file name starts with '_' or '.': hidden, never part of a "
            "source (rename it to ingest it)",
            facts={"hidden": True},
        )
    if not path.endswith(source.suffixes):
        return Explanation(
            path=path,
            verdict=Verdict.IGNORED,
            reason=f"not a {source.format.value} file: the source reads only names ending with "
            f"{', '.join(source.suffixes)}",
            facts={"suffixes": list(source.suffixes)},
        )
    return None


def _unsortable(evidence: Evidence, path: str) -> Explanation | None:
    ordering = evidence.pipeline.source.file_name_ordering
    try:
        check_sortable(path, ordering)
    except UnsortableFileNameError:
        # the listing checks the names it returns: one above the watermark fails every tick
        blocks = evidence.plan.accepts(path)
        effect = (
            "every sensor tick of the pipeline fails on it (UnsortableFileNameError) while it is "
            "there"
            if blocks
            else "the sensor would refuse it"
        )
        return Explanation(
            path=path,
            verdict=Verdict.UNSORTABLE_NAME,
            reason=f"its name does not start with a sortable identifier (file_name_ordering: "
            f"{ordering.value}), so a watermark cannot order it and {effect}: move it away and "
            "land it again named with a Unix-timestamp, UUIDv7 or ISO 8601 prefix above the "
            "watermark",
            facts={"file_name_ordering": ordering.value, "blocks_sensor": blocks},
        )
    return None


def _template_mismatch(evidence: Evidence, path: str) -> Explanation | None:
    template = evidence.pipeline.source.partition_template
    prefix, _ = split_path(path)
    if evidence.pipeline.source.template.try_parse(prefix) is not None:
        return None
    return Explanation(
        path=path,
        verdict=Verdict.TEMPLATE_MISMATCH,
        reason=f"its folder {prefix or '(the source root)'!r} does not match the partition "
        f"template {template!r}, so it has no time and no Dagster partition: move it into a "
        "matching folder",
        facts={"folder": prefix, "partition_template": template},
    )


def _outside_partitions(evidence: Evidence, path: str) -> Explanation | None:
    pipeline = evidence.pipeline
    when = pipeline.source.template.try_parse(split_path(path)[0])
    if when is None or evidence.partition_of(when) is not None:
        return None
    end = pipeline.partitions.end
    bounds = f"partitions start {pipeline.partitions.start}" + (f", end {end}" if end else "")
    return Explanation(
        path=path,
        verdict=Verdict.OUTSIDE_PARTITIONS,
        reason=f"its folder's time {when.isoformat()} has no Dagster partition ({bounds}; a "
        "partition after the current one does not exist yet): widen partitions.start or "
        "partitions.end to ingest it",
        facts={
            "landing_time": when.isoformat(),
            "partitions_start": pipeline.partitions.start,
            "partitions_end": end,
        },
    )


#: The checks of a file's name and place, in order; the first that answers decides. A new
#: refusal (e.g. characters a reader cannot take) is one more function here, with its Verdict.
NAME_CHECKS: tuple[NameCheck, ...] = (
    _ignored,
    _unsortable,
    _template_mismatch,
    _outside_partitions,
)


def _commit_facts(commits: Sequence[Commit]) -> dict[str, Any]:
    return {
        "delta_versions": [c.version for c in commits],
        "run_ids": [c.run_id for c in commits],
        "partition_keys": sorted({key for c in commits for key in c.partition_keys}),
    }


def _where(commits: Sequence[Commit]) -> str:
    versions = ", ".join(str(c.version) for c in commits)
    runs = ", ".join(c.run_id[:8] for c in commits)
    plural = "s" if len(commits) > 1 else ""
    return f"Delta version{plural} {versions} (run{plural} {runs})"


def explain_path(
    evidence: Evidence, path: str, *, present: bool, rows: int | None = None
) -> Explanation:
    """The verdict on ``path`` (relative to the source folder); see the module docstring.

    ``present``: the file is in the landing folder. ``rows``: its rows in the data table, when
    read (:func:`rows_in_table`); without it a committed file is ``ingested`` unless it has
    quarantined records and ``rows`` is 0.
    """
    commits = evidence.commits.get(path, ())
    quarantined = evidence.quarantined.get(path)
    if not present:
        source = evidence.pipeline.source.uri
        if commits:
            return Explanation(
                path=path,
                verdict=Verdict.MISSING,
                reason=f"not in {source} any more; it was ingested in {_where(commits)} before "
                "it was removed",
                facts={"previously_ingested": True, **_commit_facts(commits)},
            )
        return Explanation(
            path=path,
            verdict=Verdict.MISSING,
            reason=f"no such file in {source}, and no commit holds it",
            facts={"previously_ingested": False},
        )
    if commits:
        facts: dict[str, Any] = {**_commit_facts(commits), "rows": rows}
        if quarantined is not None:
            facts |= {"rows_quarantined": quarantined.rows, "error": quarantined.error}
        if quarantined is not None and rows == 0:
            return Explanation(
                path=path,
                verdict=Verdict.QUARANTINED,
                reason=f"committed in {_where(commits)}, but all its {quarantined.rows} records "
                f"are in the quarantine table {evidence.pipeline.table.quarantine} "
                f"({quarantined.error}): fix the file and land it again with a new name",
                facts=facts,
            )
        counts = "" if rows is None else f", {rows} rows in the table"
        if quarantined is not None:
            counts += f", {quarantined.rows} records quarantined ({quarantined.error})"
        return Explanation(
            path=path,
            verdict=Verdict.INGESTED,
            reason=f"committed in {_where(commits)}{counts}",
            facts=facts,
        )
    for check in NAME_CHECKS:
        found = check(evidence, path)
        if found is not None:
            return found
    return _by_watermark(evidence, path)


def _by_watermark(evidence: Evidence, path: str) -> Explanation:
    """The verdict on a well-named file in a partition, never committed: where the watermarks
    and the listing window put it."""
    pipeline = evidence.pipeline
    prefix, _ = split_path(path)
    when = pipeline.source.template.parse(prefix)
    key = evidence.partition_of(when)
    entry = evidence.history.partition_watermarks.get(prefix)
    base: dict[str, Any] = {"partition_key": key, "partition_watermark": entry}
    if not evidence.history.is_above(path):
        incomplete = evidence.log_from not in (None, 0)
        note = (
            f" (the log's commit history starts at version {evidence.log_from}: an older commit "
            "may hold it)"
            if incomplete
            else ""
        )
        return Explanation(
            path=path,
            verdict=Verdict.BELOW_WATERMARK,
            reason=f"its name sorts at or below the watermark {entry!r} of its landing partition "
            f"{prefix!r} and no commit holds it{note}: a watermark never goes back to it. Land it "
            "again with a name above the watermark",
            facts={**base, "log_from": evidence.log_from},
        )
    if evidence.plan.accepts(path):
        return Explanation(
            path=path,
            verdict=Verdict.PENDING,
            reason=f"above its landing partition's watermark ({entry or 'none yet'}): the "
            f"sensor lists it, and a coming tick requests a run of partition {key}",
            facts=base,
        )
    source = pipeline.source
    facts = {**base, "listing_horizon": evidence.horizon}
    if evidence.state.watermark.value is None:
        return Explanation(
            path=path,
            verdict=Verdict.BEFORE_LOOKBACK,
            reason=f"nothing is ingested yet and its landing partition lies before the cold "
            f"start's lookback (from {evidence.horizon}, cold_start.lookback_days="
            f"{source.cold_start.lookback_days}): backfill partition {key}, or raise the lookback",
            facts={**facts, "lookback_days": source.cold_start.lookback_days},
        )
    newest = split_path(evidence.state.watermark.value)[0]
    if evidence.horizon is None:
        # No late-arrival window: the listing's floor is the newest partition processed, and it
        # only goes below it into partitions that have a watermark; no sweep looks there.
        why = (
            f"it has no watermark and lies below the newest partition processed ({newest}); with "
            "late_arrival_days: null the listing only goes back into partitions it processed, so "
            "the sensor never lists it and no sweep reports it"
        )
    else:
        why = (
            f"its landing partition lies below the listing horizon {evidence.horizon} "
            f"(late_arrival_days={source.late_arrival_days} before the newest partition "
            f"processed, {newest}): the sensor no longer lists it, its sweep reports it"
        )
    return Explanation(
        path=path,
        verdict=Verdict.LATE_PARTITION_CLOSED,
        reason=f"{why}. Backfill partition {key} to ingest it",
        facts={**facts, "late_arrival_days": source.late_arrival_days, "newest_partition": newest},
    )


# --- the two questions ----------------------------------------------------------------------------


def explain_file(evidence: Evidence, given: str) -> Explanation:
    """The verdict on one path (relative to the source folder, or absolute inside it)."""
    pipeline = evidence.pipeline
    path = relative_path(pipeline, given)
    fs, root = storage.filesystem(pipeline.source.uri)
    fs.invalidate_cache()
    present = bool(fs.isfile(f"{root}/{path}"))
    rows = None
    if present and path in evidence.commits:
        rows = rows_in_table(pipeline, [path])[path]
    return explain_path(evidence, path, present=present, rows=rows)


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
    """Every file of the landing folder that is not ingested, with its verdict."""
    pipeline = evidence.pipeline
    paths = landing_files(pipeline)
    # a committed file is "quarantined" only when none of its rows is in the data table
    suspects = [p for p in paths if p in evidence.commits and p in evidence.quarantined]
    rows = rows_in_table(pipeline, suspects)
    groups: dict[Verdict, list[Explanation]] = {}
    ingested = 0
    for path in paths:
        found = explain_path(evidence, path, present=True, rows=rows.get(path))
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
