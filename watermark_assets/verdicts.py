"""The verdict on one landing file, decided from evidence already read (no I/O, no Dagster).

:func:`explain_path` decides, in this order:

1. ``missing``: no such file in the landing folder (the facts say if a commit held it).
2. ``ingested`` / ``quarantined``: a commit holds it; ``quarantined`` when every record it held
   went to the quarantine table (none in the data table).
3. the checks of a name and place, in :data:`NAME_CHECKS` (``ignored``, ``unsortable-name``,
   ``template-mismatch``, ``outside-partitions``): the extension point for more refusals.
4. ``below-watermark``: at or below its landing partition's watermark, yet no commit holds it.
5. ``late-partition-closed`` / ``before-lookback``: above its watermark, but its landing partition
   lies below the window the sensor lists.
6. ``pending``: the sensor's listing returns it; a coming tick requests its partition's run.

The evidence (:class:`Evidence`) is read by :mod:`watermark_assets.explain`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from watermark_assets import storage
from watermark_assets.config import Pipeline
from watermark_assets.core.filepath.listing import ListingPlan
from watermark_assets.core.filepath.path import check_sortable, split_path
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.exceptions import UnsortableFileNameError
from watermark_assets.sources.file_discovery import PartitionOf
from watermark_assets.state.load import PipelineState


class Verdict(str, Enum):
    """What became of a landing file; the values are the command's spelling."""

    INGESTED = "ingested"
    REWRITTEN = "rewritten"
    """Committed, then rewritten in place: its size or modification time (ETag) differs."""
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
    TABLE_FILE = "table-file"
    """Not a landing file: the table's own (OPTIMIZE's output in a folder that is the table's)."""


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
    """Everything a verdict needs, read once per pipeline (:func:`.explain.gather_evidence`).

    ``history``: the state's watermark merged with every commit's left in the log and with the
    lineage's (per landing partition its greatest file), so the watermark of a partition pruned
    from the state still decides. ``log_from``: the oldest version whose commit info was read
    (older JSON files were cleaned up after a Delta checkpoint: a commit older than that is not
    seen); None without a table. ``lineage``: the landing files whose rows (or quarantined
    records) the tables hold, so a file ingested by a commit the log no longer holds is still
    ``ingested``. ``plan``: the sensor's listing window.
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
    lineage: frozenset[str] = frozenset()
    #: where the landing folder is the table's: the files the table holds or removed and still
    #: remembers (see ``sources.files.TableFiles``); empty elsewhere
    table_files: frozenset[str] = frozenset()
    #: per committed file, the content signature its latest commit recorded (size and mtime, or
    #: ETag; ``storage.content_signature``): a file listed with another one was rewritten
    signatures: Mapping[str, str] = field(default_factory=dict)

    def is_table_file(self, path: str) -> bool:
        """Whether ``path`` is the table's own file and no commit of the pipeline took it in."""
        return path in self.table_files and not self.is_committed(path)

    def is_committed(self, path: str) -> bool:
        """Whether a commit holds ``path``: one the log still has, or an older one (the state's
        record of the committed files of its retained landing partitions, ``signatures``, which
        keeps a file whose rows were all removed since; or the lineage)."""
        return path in self.commits or path in self.signatures or path in self.lineage


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
    ordering = evidence.pipeline.watermark.file_name_ordering
    try:
        check_sortable(path, ordering)
    except UnsortableFileNameError:
        # the listing sets such names apart: one above the watermark is held back, with the
        # later files of its landing partition, and named by the sensor on every tick
        blocks = evidence.plan.accepts(path)
        effect = (
            "the sensor holds it back, with the files after it in its landing partition, and "
            "names it on every tick"
            if blocks
            else "the sensor would hold it back"
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
    template = evidence.pipeline.watermark.partition_template
    prefix, _ = split_path(path)
    if evidence.pipeline.watermark.template.try_parse(prefix) is not None:
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
    when = pipeline.watermark.template.try_parse(split_path(path)[0])
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
#: refusal (e.g. characters a reader cannot take) is one more function here, placed where the
#: listing applies it, with its own Verdict member (the enum's order is the listing's order).
NAME_CHECKS: tuple[NameCheck, ...] = (
    _ignored,
    _unsortable,
    _template_mismatch,
    _outside_partitions,
)


def _commit_facts(evidence: Evidence, commits: Sequence[Commit]) -> dict[str, Any]:
    older = {} if commits else {"committed_before_version": evidence.log_from}
    return {
        **older,
        "delta_versions": [c.version for c in commits],
        "run_ids": [c.run_id for c in commits],
        "partition_keys": sorted({key for c in commits for key in c.partition_keys}),
    }


def _where(evidence: Evidence, commits: Sequence[Commit]) -> str:
    if not commits:
        return (
            f"a Delta version before {evidence.log_from} (the oldest commit the log still holds; "
            "older ones were cleaned up after a checkpoint)"
        )
    versions = ", ".join(str(c.version) for c in commits)
    runs = ", ".join(c.run_id[:8] for c in commits)
    plural = "s" if len(commits) > 1 else ""
    return f"Delta version{plural} {versions} (run{plural} {runs})"


def explain_path(
    evidence: Evidence,
    path: str,
    *,
    present: bool,
    rows: int | None = None,
    signature: str | None = None,
) -> Explanation:
    """The verdict on ``path`` (relative to the source folder); see the module docstring.

    ``present``: the file is in the landing folder. ``rows``: its rows in the data table, when
    read (:func:`.explain.rows_in_table`); without it a committed file is ``ingested`` unless it has
    quarantined records and ``rows`` is 0. ``signature``: its content signature now (size and
    mtime, or ETag), which names a committed file rewritten in place since its commit.
    """
    commits = evidence.commits.get(path, ())
    quarantined = evidence.quarantined.get(path)
    committed = evidence.is_committed(path)
    if not present:
        source = evidence.pipeline.source.uri
        if committed:
            return Explanation(
                path=path,
                verdict=Verdict.MISSING,
                reason=f"not in {source} any more; it was ingested in "
                f"{_where(evidence, commits)} before it was removed",
                facts={"previously_ingested": True, **_commit_facts(evidence, commits)},
            )
        return Explanation(
            path=path,
            verdict=Verdict.MISSING,
            reason=f"no such file in {source}, and no commit holds it",
            facts={"previously_ingested": False},
        )
    if committed:
        facts: dict[str, Any] = {**_commit_facts(evidence, commits), "rows": rows}
        if quarantined is not None:
            facts |= {"rows_quarantined": quarantined.rows, "error": quarantined.error}
        if quarantined is not None and rows == 0:
            return Explanation(
                path=path,
                verdict=Verdict.QUARANTINED,
                reason=f"committed in {_where(evidence, commits)}, but all its "
                f"{quarantined.rows} records are in the quarantine table "
                f"{evidence.pipeline.table.quarantine} ({quarantined.error}): fix the file and "
                "land it again with a new name",
                facts=facts,
            )
        committed_as = evidence.signatures.get(path)
        if signature is not None and committed_as is not None and signature != committed_as:
            return Explanation(
                path=path,
                verdict=Verdict.REWRITTEN,
                reason=f"committed in {_where(evidence, commits)}, then rewritten in place: its "
                f"size or modification time (ETag) is {signature!r}, its commit recorded "
                f"{committed_as!r}; the table holds the rows it had then, not its new ones "
                "(land the new content under a new name above the watermark)",
                facts={**facts, "signature_committed": committed_as, "signature_now": signature},
            )
        counts = "" if rows is None else f", {rows} rows in the table"
        if quarantined is not None:
            counts += f", {quarantined.rows} records quarantined ({quarantined.error})"
        return Explanation(
            path=path,
            verdict=Verdict.INGESTED,
            reason=f"committed in {_where(evidence, commits)}{counts}",
            facts=facts,
        )
    if evidence.is_table_file(path):
        return Explanation(
            path=path,
            verdict=Verdict.TABLE_FILE,
            reason=f"the table {evidence.pipeline.table.uri} wrote or removed this file itself "
            "(OPTIMIZE, Z-order: dataChange false), it is not a landing file: nothing to ingest "
            "(VACUUM deletes it once the table no longer needs it)",
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
    when = pipeline.watermark.template.parse(prefix)
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
            f"{prefix!r} and no commit holds it{note}: a watermark never goes back to it. The "
            "sweep's late runs ingest it with watermark.sweep.ingest: true; or land it again "
            "with a name above the watermark",
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
    settings = pipeline.watermark
    facts = {**base, "listing_horizon": evidence.horizon}
    if evidence.state.watermark.value is None:
        return Explanation(
            path=path,
            verdict=Verdict.BEFORE_LOOKBACK,
            reason=f"nothing is ingested yet and its landing partition lies before the cold "
            f"start's lookback (from {evidence.horizon}, watermark.cold_start.lookback_days="
            f"{settings.cold_start.lookback_days}): backfill partition {key}, or raise the "
            "lookback",
            facts={**facts, "lookback_days": settings.cold_start.lookback_days},
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
            f"(late_arrival_days={settings.late_arrival_days} before the newest partition "
            f"processed, {newest}): the sensor no longer lists it, its sweep reports it"
        )
    return Explanation(
        path=path,
        verdict=Verdict.LATE_PARTITION_CLOSED,
        reason=f"{why}. Backfill partition {key} to ingest it",
        facts={
            **facts,
            "late_arrival_days": pipeline.watermark.late_arrival_days,
            "newest_partition": newest,
        },
    )
